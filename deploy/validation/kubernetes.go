package validation

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// ZoneLabel is the node label that names a node's zone.
const ZoneLabel = "topology.kubernetes.io/zone"

// MinMemoryHeadroom is the least memory a ctxd pod needs above its DRAM
// tier's capacity (Go runtime, Raft, the block index, request buffers);
// docs/operations.md explains the sizing formula.
const MinMemoryHeadroom = 1 << 30

// podName stands for a value the downward API fills with the pod's name.
const podName = "<pod-name>"

// Check runs every consistency check over the bundle and returns what it
// found wrong; none means the manifests agree with each other and with ctxd.
func (b *Bundle) Check() []error {
	var errs []error
	add := func(es ...error) { errs = append(errs, es...) }
	add(b.checkNamespaces()...)
	if len(b.StatefulSets) == 0 {
		add(fmt.Errorf("no StatefulSet"))
	}
	for _, sts := range b.StatefulSets {
		add(b.checkStatefulSet(sts)...)
	}
	for _, svc := range b.Services {
		add(b.checkService(svc)...)
	}
	add(b.checkPDBs()...)
	for _, sm := range b.ServiceMonitors {
		add(b.checkServiceMonitor(sm)...)
	}
	return errs
}

// namespace is the bundle's namespace: the one Namespace object's name.
func (b *Bundle) namespace() string {
	if len(b.Namespaces) == 1 {
		return b.Namespaces[0].Name
	}
	return ""
}

func (b *Bundle) checkNamespaces() []error {
	var errs []error
	if len(b.Namespaces) != 1 {
		return []error{fmt.Errorf("want exactly one Namespace, have %d", len(b.Namespaces))}
	}
	ns := b.namespace()
	seen := map[string]bool{}
	check := func(kind string, m metav1.ObjectMeta) {
		if m.Name == "" {
			errs = append(errs, fmt.Errorf("%s without a name", kind))
		}
		if m.Namespace != ns {
			errs = append(errs, fmt.Errorf("%s %s: namespace %q, want %q", kind, m.Name, m.Namespace, ns))
		}
		if seen[kind+"/"+m.Name] {
			errs = append(errs, fmt.Errorf("%s %s defined twice", kind, m.Name))
		}
		seen[kind+"/"+m.Name] = true
	}
	for _, o := range b.ConfigMaps {
		check("ConfigMap", o.ObjectMeta)
	}
	for _, o := range b.Secrets {
		check("Secret", o.ObjectMeta)
	}
	for _, o := range b.Services {
		check("Service", o.ObjectMeta)
	}
	for _, o := range b.ServiceAccounts {
		check("ServiceAccount", o.ObjectMeta)
	}
	for _, o := range b.StatefulSets {
		check("StatefulSet", o.ObjectMeta)
	}
	for _, o := range b.PDBs {
		check("PodDisruptionBudget", o.ObjectMeta)
	}
	for _, o := range b.ServiceMonitors {
		check("ServiceMonitor", o.ObjectMeta)
	}
	return errs
}

func (b *Bundle) service(name string) *corev1.Service {
	for _, s := range b.Services {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func (b *Bundle) secret(name string) *corev1.Secret {
	for _, s := range b.Secrets {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func (b *Bundle) configMap(name string) *corev1.ConfigMap {
	for _, c := range b.ConfigMaps {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func secretHasKey(s *corev1.Secret, key string) bool {
	if _, ok := s.Data[key]; ok {
		return true
	}
	_, ok := s.StringData[key]
	return ok
}

// ctxdContainer is the container named ctxd.
func ctxdContainer(sts *appsv1.StatefulSet) *corev1.Container {
	for i := range sts.Spec.Template.Spec.Containers {
		if c := &sts.Spec.Template.Spec.Containers[i]; c.Name == "ctxd" {
			return c
		}
	}
	return nil
}

func replicas(sts *appsv1.StatefulSet) int {
	if sts.Spec.Replicas == nil {
		return 1
	}
	return int(*sts.Spec.Replicas)
}

// quorum is the number of voters a Raft cluster of n needs to make progress.
func quorum(n int) int { return n/2 + 1 }

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// podEnv resolves a container's environment as the kubelet would, with
// placeholders for values that are only known at run time, and expands
// $(VAR) references in its args.
func (b *Bundle) podEnv(c *corev1.Container) (map[string]string, []error) {
	var errs []error
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			v, err := expand(e.Value, env)
			if err != nil {
				errs = append(errs, fmt.Errorf("env %s: %w", e.Name, err))
			}
			env[e.Name] = v
		case e.ValueFrom.FieldRef != nil:
			switch fp := e.ValueFrom.FieldRef.FieldPath; fp {
			case "metadata.namespace":
				env[e.Name] = b.namespace()
			case "metadata.name":
				env[e.Name] = podName
			default:
				env[e.Name] = "<" + fp + ">"
			}
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			s := b.secret(ref.Name)
			switch {
			case s == nil && (ref.Optional == nil || !*ref.Optional):
				errs = append(errs, fmt.Errorf("env %s: Secret %q is not among the manifests", e.Name, ref.Name))
			case s != nil && !secretHasKey(s, ref.Key):
				errs = append(errs, fmt.Errorf("env %s: Secret %q has no key %q", e.Name, ref.Name, ref.Key))
			}
			env[e.Name] = "<secret " + ref.Name + "/" + ref.Key + ">"
		default:
			env[e.Name] = "<valueFrom>"
		}
		if _, _, err := SettingOfEnv(e.Name); err != nil {
			errs = append(errs, err)
		}
	}
	return env, errs
}

// expand replaces $(VAR) with VAR's value; an undefined variable is an error
// (the kubelet would leave the text as it is).
func expand(s string, env map[string]string) (string, error) {
	var err error
	out := varRef.ReplaceAllStringFunc(s, func(m string) string {
		name := varRef.FindStringSubmatch(m)[1]
		v, ok := env[name]
		if !ok {
			err = fmt.Errorf("$(%s) is not defined before it is used", name)
			return m
		}
		return v
	})
	return out, err
}

// settings resolves the ctxd container's effective settings: the image's
// entrypoint flags (or the container's command), then its args, the CTXD_*
// environment and the --config file from a mounted ConfigMap.
func (b *Bundle) settings(c *corev1.Container, pod *corev1.PodSpec) (map[string]string, []error) {
	env, errs := b.podEnv(c)
	entry := b.Image.Entrypoint[min(1, len(b.Image.Entrypoint)):]
	if len(c.Command) > 0 {
		entry = c.Command[1:]
	}
	base, err := ParseArgs(entry)
	if err != nil {
		return nil, append(errs, fmt.Errorf("container %s: entrypoint: %w", c.Name, err))
	}
	var raw []string
	for _, a := range c.Args {
		v, err := expand(a, env)
		if err != nil {
			errs = append(errs, fmt.Errorf("args %q: %w", a, err))
		}
		raw = append(raw, v)
	}
	own, err := ParseArgs(raw)
	if err != nil {
		return nil, append(errs, fmt.Errorf("container %s: args: %w", c.Name, err))
	}
	seen := map[string]bool{}
	for _, a := range own {
		if seen[a.Name] {
			errs = append(errs, fmt.Errorf("container %s: --%s given twice in args", c.Name, a.Name))
		}
		seen[a.Name] = true
	}
	args := append(base, own...)
	// The config file named by --config (flag or CTXD_CONFIG).
	cfgPath := env["CTXD_CONFIG"]
	for _, a := range args {
		if a.Name == "config" {
			cfgPath = a.Value
		}
	}
	var file map[string]string
	if cfgPath != "" {
		var ferrs []error
		file, ferrs = b.configFile(c, pod, cfgPath)
		errs = append(errs, ferrs...)
	}
	eff, err := Effective(file, env, args)
	if err != nil {
		errs = append(errs, fmt.Errorf("container %s: %w", c.Name, err))
	}
	return eff, errs
}

// mountFor finds the volume mount that holds file p.
func mountFor(c *corev1.Container, p string) *corev1.VolumeMount {
	var best *corev1.VolumeMount
	for i := range c.VolumeMounts {
		m := &c.VolumeMounts[i]
		if strings.HasPrefix(p, strings.TrimSuffix(m.MountPath, "/")+"/") || p == m.MountPath {
			if best == nil || len(m.MountPath) > len(best.MountPath) {
				best = m
			}
		}
	}
	return best
}

func podVolume(pod *corev1.PodSpec, name string) *corev1.Volume {
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == name {
			return &pod.Volumes[i]
		}
	}
	return nil
}

// configFile reads ctxd's YAML config from the ConfigMap mounted at p.
func (b *Bundle) configFile(c *corev1.Container, pod *corev1.PodSpec, p string) (map[string]string, []error) {
	m := mountFor(c, p)
	if m == nil {
		return nil, []error{fmt.Errorf("--config %s: no volume is mounted there", p)}
	}
	v := podVolume(pod, m.Name)
	if v == nil || v.ConfigMap == nil {
		return nil, []error{fmt.Errorf("--config %s: volume %q is not a ConfigMap", p, m.Name)}
	}
	cm := b.configMap(v.ConfigMap.Name)
	if cm == nil {
		return nil, []error{fmt.Errorf("--config %s: ConfigMap %q is not among the manifests", p, v.ConfigMap.Name)}
	}
	key := strings.TrimPrefix(p, strings.TrimSuffix(m.MountPath, "/")+"/")
	for _, it := range v.ConfigMap.Items {
		if it.Path == key {
			key = it.Key
		}
	}
	text, ok := cm.Data[key]
	if !ok {
		return nil, []error{fmt.Errorf("--config %s: ConfigMap %q has no key %q", p, cm.Name, key)}
	}
	var raw map[string]any
	if err := yaml.UnmarshalStrict([]byte(text), &raw); err != nil {
		return nil, []error{fmt.Errorf("ConfigMap %s key %s: %w", cm.Name, key, err)}
	}
	file := map[string]string{}
	var errs []error
	for _, k := range sortedKeys(raw) {
		if _, err := SettingOfKey(k); err != nil {
			errs = append(errs, fmt.Errorf("ConfigMap %s key %s: %w", cm.Name, key, err))
			continue
		}
		switch x := raw[k].(type) {
		case string:
			file[k] = x
		case bool:
			file[k] = strconv.FormatBool(x)
		case float64:
			file[k] = strconv.FormatFloat(x, 'f', -1, 64)
		default:
			errs = append(errs, fmt.Errorf("ConfigMap %s key %s: %s is a %T, want a scalar", cm.Name, key, k, x))
		}
	}
	return file, errs
}

func (b *Bundle) checkStatefulSet(sts *appsv1.StatefulSet) []error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("StatefulSet %s: "+format, append([]any{sts.Name}, a...)...))
	}
	pod := &sts.Spec.Template.Spec
	podLabels := labels.Set(sts.Spec.Template.Labels)
	sel, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector)
	if err != nil || sel.Empty() {
		bad("selector %v: empty or invalid (%v)", sts.Spec.Selector, err)
	} else if !sel.Matches(podLabels) {
		bad("selector %v does not match the pod template's labels %v", sts.Spec.Selector.MatchLabels, podLabels)
	}
	n := replicas(sts)
	if n < 3 || n%2 == 0 {
		bad("%d replicas: want an odd number, at least 3, for a Raft quorum that survives a loss", n)
	}
	if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		bad("podManagementPolicy %q: want Parallel (pods become ready only once a leader exists, which needs the others started)", sts.Spec.PodManagementPolicy)
	}

	// The headless Service that gives the pods stable names.
	headless := b.service(sts.Spec.ServiceName)
	switch {
	case headless == nil:
		bad("serviceName %q: no such Service", sts.Spec.ServiceName)
	case headless.Spec.ClusterIP != corev1.ClusterIPNone:
		bad("serviceName %q: the Service is not headless (clusterIP None)", headless.Name)
	case !headless.Spec.PublishNotReadyAddresses:
		bad("Service %s: publishNotReadyAddresses must be true, or peers cannot resolve each other before a leader exists", headless.Name)
	}
	if headless != nil && !labels.SelectorFromSet(headless.Spec.Selector).Matches(podLabels) {
		bad("Service %s: selector %v does not select the pods", headless.Name, headless.Spec.Selector)
	}

	c := ctxdContainer(sts)
	if c == nil {
		bad("no container named ctxd")
		return errs
	}
	eff, serrs := b.settings(c, pod)
	for _, e := range serrs {
		bad("%v", e)
	}
	if eff == nil {
		return errs
	}

	// Listeners, container ports and probes.
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for _, s := range sortedKeys(ListenSettings) {
		name := ListenSettings[s]
		addr, ok := eff[s]
		if !ok {
			bad("ctxd setting %s is not set", s)
			continue
		}
		p, err := ListenPort(s, addr)
		if err != nil {
			bad("%v", err)
			continue
		}
		if got, ok := ports[name]; !ok || int(got) != p {
			bad("container port %q is %d, but ctxd's %s is %s", name, got, s, addr)
		}
	}
	for name := range ports {
		if !containsValue(ListenSettings, name) {
			bad("container port %q matches no ctxd listener", name)
		}
	}
	httpPort := int(ports["http"])
	checkProbe := func(kind string, p *corev1.Probe, wantPath string, required bool) {
		if p == nil {
			if required {
				bad("no %s probe", kind)
			}
			return
		}
		if p.HTTPGet == nil {
			bad("%s probe is not an HTTP GET", kind)
			return
		}
		if p.HTTPGet.Path != wantPath {
			bad("%s probe path %q, want %s", kind, p.HTTPGet.Path, wantPath)
		}
		if got := resolvePort(p.HTTPGet.Port, c); got != httpPort || got == 0 {
			bad("%s probe port %s is not the http port %d", kind, p.HTTPGet.Port.String(), httpPort)
		}
	}
	checkProbe("readiness", c.ReadinessProbe, "/readyz", true)
	checkProbe("liveness", c.LivenessProbe, "/healthz", true)
	checkProbe("startup", c.StartupProbe, "/healthz", false)

	// Cluster formation: the same command line on every pod.
	if be, err := strconv.Atoi(eff["bootstrap-expect"]); err != nil || be != n {
		bad("--bootstrap-expect %q, want the replica count %d", eff["bootstrap-expect"], n)
	}
	errs = append(errs, b.checkJoin(sts, eff["join"], httpPort)...)
	if eff["node-id"] != podName {
		bad("node id %q: want the pod name (CTXD_NODE_ID from metadata.name), stable across restarts", eff["node-id"])
	}
	if headless != nil {
		want := podName + "." + headless.Name + "."
		if !strings.HasPrefix(eff["advertise"], want) && eff["advertise"] != podName+"."+headless.Name {
			bad("advertise %q: want the pod's stable name %s<namespace>.svc", eff["advertise"], want)
		}
	}

	// Zone: spread across zones, and each pod told its zone.
	if eff["zone"] != "<metadata.labels['"+ZoneLabel+"']>" {
		bad("zone %q: want CTXD_ZONE from the downward API (metadata.labels['%s'])", eff["zone"], ZoneLabel)
	}
	spread := false
	for _, t := range pod.TopologySpreadConstraints {
		if t.TopologyKey == ZoneLabel {
			s, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
			if err == nil && !s.Empty() && s.Matches(podLabels) {
				spread = true
			}
		}
	}
	if !spread {
		bad("no topology spread constraint over %s selecting the pods", ZoneLabel)
	}
	if !antiAffineByHost(pod, podLabels) {
		bad("pods may share a machine: want required pod anti-affinity on kubernetes.io/hostname")
	}

	errs = append(errs, b.checkVolumes(sts, c, eff)...)
	errs = append(errs, checkResources(sts.Name, c, eff)...)
	return errs
}

func containsValue(m map[string]string, v string) bool {
	for _, x := range m {
		if x == v {
			return true
		}
	}
	return false
}

// resolvePort turns a named or numbered port into the container's number.
func resolvePort(p intstr.IntOrString, c *corev1.Container) int {
	if p.Type == intstr.Int {
		return p.IntValue()
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort)
		}
	}
	return 0
}

// checkJoin: --join names every pod of the initial cluster, through the
// headless Service, at the HTTP port.
func (b *Bundle) checkJoin(sts *appsv1.StatefulSet, join string, httpPort int) []error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("StatefulSet %s: --join: "+format, append([]any{sts.Name}, a...)...))
	}
	if join == "" {
		bad("not set")
		return errs
	}
	n := replicas(sts)
	seen := map[int]bool{}
	for _, addr := range strings.Split(join, ",") {
		host, port, err := splitHostPort(addr)
		if err != nil {
			bad("%q: %v", addr, err)
			continue
		}
		if port != httpPort {
			bad("%q: port %d is not the HTTP port %d", addr, port, httpPort)
		}
		labelsOf := strings.Split(host, ".")
		ord := -1
		if o, ok := strings.CutPrefix(labelsOf[0], sts.Name+"-"); ok {
			if v, err := strconv.Atoi(o); err == nil {
				ord = v
			}
		}
		switch {
		case ord < 0 || ord >= n:
			bad("%q is not one of the pods %s-0..%d", addr, sts.Name, n-1)
		case len(labelsOf) < 2 || labelsOf[1] != sts.Spec.ServiceName:
			bad("%q does not go through the headless Service %s", addr, sts.Spec.ServiceName)
		case len(labelsOf) > 2 && labelsOf[2] != b.namespace():
			bad("%q names namespace %q, not %q", addr, labelsOf[2], b.namespace())
		case seen[ord]:
			bad("%q named twice", addr)
		}
		seen[ord] = true
	}
	for i := 0; i < n; i++ {
		if !seen[i] {
			bad("pod %s-%d missing", sts.Name, i)
		}
	}
	return errs
}

func splitHostPort(addr string) (string, int, error) {
	i := strings.LastIndex(addr, ":")
	if i < 0 {
		return "", 0, fmt.Errorf("no port")
	}
	p, err := strconv.Atoi(addr[i+1:])
	if err != nil {
		return "", 0, fmt.Errorf("bad port")
	}
	return addr[:i], p, nil
}

func antiAffineByHost(pod *corev1.PodSpec, podLabels labels.Set) bool {
	if pod.Affinity == nil || pod.Affinity.PodAntiAffinity == nil {
		return false
	}
	for _, t := range pod.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		s, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
		if t.TopologyKey == "kubernetes.io/hostname" && err == nil && !s.Empty() && s.Matches(podLabels) {
			return true
		}
	}
	return false
}

// checkVolumes: every mount has a volume; the data and NVMe directories are
// on volume claims (the NVMe one larger than the tier), the TLS files are in
// a mounted Secret that has them, and client certificates are required.
func (b *Bundle) checkVolumes(sts *appsv1.StatefulSet, c *corev1.Container, eff map[string]string) []error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("StatefulSet %s: "+format, append([]any{sts.Name}, a...)...))
	}
	pod := &sts.Spec.Template.Spec
	claims := map[string]*corev1.PersistentVolumeClaim{}
	for i := range sts.Spec.VolumeClaimTemplates {
		claims[sts.Spec.VolumeClaimTemplates[i].Name] = &sts.Spec.VolumeClaimTemplates[i]
	}
	for _, m := range c.VolumeMounts {
		v := podVolume(pod, m.Name)
		if v == nil && claims[m.Name] == nil {
			bad("volume mount %q has no volume or claim template", m.Name)
		}
		if v != nil && v.ConfigMap != nil && b.configMap(v.ConfigMap.Name) == nil {
			bad("volume %q: ConfigMap %q is not among the manifests", v.Name, v.ConfigMap.Name)
		}
		if v != nil && v.Secret != nil && b.secret(v.Secret.SecretName) == nil {
			bad("volume %q: Secret %q is not among the manifests", v.Name, v.Secret.SecretName)
		}
	}
	onClaim := func(setting string) *corev1.PersistentVolumeClaim {
		dir := eff[setting]
		if dir == "" {
			bad("ctxd setting %s is not set", setting)
			return nil
		}
		m := mountFor(c, path.Join(dir, "x"))
		if m == nil || claims[m.Name] == nil {
			bad("%s %s is not on a volume claim: it would not survive a restart", setting, dir)
			return nil
		}
		return claims[m.Name]
	}
	onClaim("data-dir")
	if pvc := onClaim("nvme-dir"); pvc != nil {
		capacity, err := block.ParseSize(eff["nvme-capacity"])
		size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
		switch {
		case err != nil:
			bad("nvme-capacity %q: %v", eff["nvme-capacity"], err)
		case size.Value() < capacity:
			bad("nvme-capacity %s exceeds its volume claim %q (%s)", eff["nvme-capacity"], pvc.Name, size.String())
		}
	}
	for _, s := range []string{"tls-cert", "tls-key", "tls-ca"} {
		p := eff[s]
		if p == "" {
			bad("ctxd setting %s is not set (node-to-node mTLS)", s)
			continue
		}
		m := mountFor(c, p)
		var v *corev1.Volume
		if m != nil {
			v = podVolume(pod, m.Name)
		}
		if v == nil || v.Secret == nil {
			bad("%s %s is not in a mounted Secret", s, p)
			continue
		}
		key := strings.TrimPrefix(p, strings.TrimSuffix(m.MountPath, "/")+"/")
		for _, it := range v.Secret.Items {
			if it.Path == key {
				key = it.Key
			}
		}
		if sec := b.secret(v.Secret.SecretName); sec != nil && !secretHasKey(sec, key) {
			bad("%s %s: Secret %s has no key %q", s, p, sec.Name, key)
		}
	}
	if m, err := strconv.ParseBool(eff["tls-mutual"]); err != nil || !m {
		bad("tls-mutual %q: want true, or the Raft and peer ports accept any client (node-to-node mTLS)", eff["tls-mutual"])
	}
	return errs
}

// checkResources: memory is sized for the DRAM tier plus headroom, requests
// equal limits, and GOMEMLIMIT (if set) fits in the headroom.
func checkResources(name string, c *corev1.Container, eff map[string]string) []error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("StatefulSet %s: "+format, append([]any{name}, a...)...))
	}
	dram, err := block.ParseSize(eff["dram-capacity"])
	if err != nil {
		bad("dram-capacity %q: %v", eff["dram-capacity"], err)
		return errs
	}
	limit, ok := c.Resources.Limits[corev1.ResourceMemory]
	if !ok {
		bad("no memory limit")
		return errs
	}
	if req, ok := c.Resources.Requests[corev1.ResourceMemory]; !ok || req.Cmp(limit) != 0 {
		bad("memory request %s != limit %s: want them equal (Guaranteed QoS)", req.String(), limit.String())
	}
	if _, ok := c.Resources.Requests[corev1.ResourceCPU]; !ok {
		bad("no CPU request")
	}
	if limit.Value() < dram+MinMemoryHeadroom {
		bad("memory limit %s < dram-capacity %s + %s headroom", limit.String(), eff["dram-capacity"],
			resource.NewQuantity(MinMemoryHeadroom, resource.BinarySI).String())
	}
	for _, e := range c.Env {
		if e.Name != "GOMEMLIMIT" {
			continue
		}
		gml, err := block.ParseSize(e.Value)
		if err != nil {
			bad("GOMEMLIMIT %q: %v", e.Value, err)
		} else if gml > limit.Value()-dram {
			bad("GOMEMLIMIT %s exceeds the headroom above the DRAM tier (%s - %s)", e.Value, limit.String(), eff["dram-capacity"])
		}
	}
	return errs
}

// checkService: a Service selects ctxd pods, and each of its ports reaches a
// container port of the same number; only the headless Service carries Raft.
func (b *Bundle) checkService(svc *corev1.Service) []error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("Service %s: "+format, append([]any{svc.Name}, a...)...))
	}
	if len(svc.Spec.Selector) == 0 {
		bad("no selector")
		return errs
	}
	var target *appsv1.StatefulSet
	for _, sts := range b.StatefulSets {
		if labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(sts.Spec.Template.Labels)) {
			target = sts
		}
	}
	if target == nil {
		bad("selector %v selects no StatefulSet's pods", svc.Spec.Selector)
		return errs
	}
	c := ctxdContainer(target)
	if c == nil {
		return errs
	}
	headless := svc.Spec.ClusterIP == corev1.ClusterIPNone
	for _, p := range svc.Spec.Ports {
		tp := p.TargetPort
		if tp.Type == intstr.Int && tp.IntVal == 0 {
			tp = intstr.FromInt32(p.Port)
		}
		got := resolvePort(tp, c)
		if got == 0 {
			bad("port %s: targetPort %s is not a port of container ctxd", p.Name, tp.String())
		} else if int32(got) != p.Port {
			bad("port %s: %d forwards to %d; keep the numbers equal", p.Name, p.Port, got)
		}
		if p.Name == "raft" && !headless {
			bad("exposes Raft; only the headless peers Service should")
		}
	}
	return errs
}

// checkPDBs: each PodDisruptionBudget selects exactly a StatefulSet's pods
// and never lets a voluntary disruption break quorum.
func (b *Bundle) checkPDBs() []error {
	var errs []error
	for _, sts := range b.StatefulSets {
		var found bool
		for _, pdb := range b.PDBs {
			sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil || sel.Empty() || !sel.Matches(labels.Set(sts.Spec.Template.Labels)) {
				continue
			}
			found = true
			bad := func(format string, a ...any) {
				errs = append(errs, fmt.Errorf("PodDisruptionBudget %s: "+format, append([]any{pdb.Name}, a...)...))
			}
			if !equalSelectors(pdb.Spec.Selector, sts.Spec.Selector) {
				bad("selector %v differs from StatefulSet %s's %v", pdb.Spec.Selector.MatchLabels, sts.Name, sts.Spec.Selector.MatchLabels)
			}
			n := replicas(sts)
			switch {
			case pdb.Spec.MaxUnavailable != nil && pdb.Spec.MinAvailable == nil:
				mu, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, n, true)
				if err != nil || n-mu < quorum(n) || mu < 1 {
					bad("maxUnavailable %s of %d replicas leaves fewer than a quorum of %d (or blocks every drain)", pdb.Spec.MaxUnavailable.String(), n, quorum(n))
				}
			case pdb.Spec.MinAvailable != nil && pdb.Spec.MaxUnavailable == nil:
				ma, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, n, true)
				if err != nil || ma < quorum(n) || ma >= n {
					bad("minAvailable %s of %d replicas: want at least a quorum of %d and below %d", pdb.Spec.MinAvailable.String(), n, quorum(n), n)
				}
			default:
				bad("set exactly one of maxUnavailable and minAvailable")
			}
		}
		if !found {
			errs = append(errs, fmt.Errorf("StatefulSet %s: no PodDisruptionBudget selects its pods", sts.Name))
		}
	}
	return errs
}

func equalSelectors(a, b *metav1.LabelSelector) bool {
	if a == nil || b == nil || len(a.MatchExpressions) > 0 || len(b.MatchExpressions) > 0 {
		return false
	}
	return labels.Equals(a.MatchLabels, b.MatchLabels)
}

// checkServiceMonitor: it selects exactly one Service in the namespace and
// scrapes /metrics on a port of it that reaches the http listener.
func (b *Bundle) checkServiceMonitor(sm *ServiceMonitor) []error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("ServiceMonitor %s: "+format, append([]any{sm.Name}, a...)...))
	}
	if sm.APIVersion != "monitoring.coreos.com/v1" {
		bad("apiVersion %q", sm.APIVersion)
	}
	ns := sm.Namespace
	if !sm.Spec.NamespaceSelector.Any && len(sm.Spec.NamespaceSelector.MatchNames) > 0 && !contains(sm.Spec.NamespaceSelector.MatchNames, b.namespace()) {
		bad("namespaceSelector %v excludes %s", sm.Spec.NamespaceSelector.MatchNames, b.namespace())
	}
	sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil || sel.Empty() {
		bad("selector empty or invalid: %v", err)
		return errs
	}
	var svcs []*corev1.Service
	for _, s := range b.Services {
		if (s.Namespace == ns || ns == "") && sel.Matches(labels.Set(s.Labels)) {
			svcs = append(svcs, s)
		}
	}
	if len(svcs) != 1 {
		names := []string{}
		for _, s := range svcs {
			names = append(names, s.Name)
		}
		bad("selects %d Services %v; want exactly one (more scrape every pod twice)", len(svcs), names)
		return errs
	}
	svc := svcs[0]
	if len(sm.Spec.Endpoints) == 0 {
		bad("no endpoints")
	}
	for _, ep := range sm.Spec.Endpoints {
		var sp *corev1.ServicePort
		for i := range svc.Spec.Ports {
			if svc.Spec.Ports[i].Name == ep.Port {
				sp = &svc.Spec.Ports[i]
			}
		}
		if sp == nil {
			bad("endpoint port %q is not a named port of Service %s", ep.Port, svc.Name)
		} else if sp.Port != PortHTTP {
			bad("endpoint port %q is %d, not the HTTP port %d that serves /metrics", ep.Port, sp.Port, PortHTTP)
		}
		if ep.Path != "/metrics" {
			bad("endpoint path %q, want /metrics", ep.Path)
		}
		iv, err1 := time.ParseDuration(ep.Interval)
		to, err2 := time.ParseDuration(ep.ScrapeTimeout)
		if ep.Interval != "" && err1 != nil || ep.ScrapeTimeout != "" && err2 != nil {
			bad("interval %q / scrapeTimeout %q: not durations", ep.Interval, ep.ScrapeTimeout)
		} else if ep.Interval != "" && ep.ScrapeTimeout != "" && to > iv {
			bad("scrapeTimeout %s exceeds interval %s", ep.ScrapeTimeout, ep.Interval)
		}
	}
	return errs
}
