package validation

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func loadBundle(t *testing.T) *Bundle {
	t.Helper()
	ms, err := LoadManifests(filepath.Join(repoRoot(t), "deploy/kubernetes"))
	if err != nil {
		t.Fatal(err)
	}
	return NewBundle(ctxdImage(t), ms)
}

func TestManifestsDecodeStrictly(t *testing.T) {
	ms, err := LoadManifests(filepath.Join(repoRoot(t), "deploy/kubernetes"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, m := range ms {
		kinds[reflect.TypeOf(m.Object).Elem().Name()]++
	}
	want := map[string]int{"Namespace": 1, "ConfigMap": 1, "Secret": 3, "Service": 2, "StatefulSet": 1,
		"PodDisruptionBudget": 1, "ServiceMonitor": 1}
	for k, n := range want {
		if kinds[k] != n {
			t.Errorf("%d %s objects, want %d (all: %v)", kinds[k], k, n, kinds)
		}
	}
}

func TestManifestsAgree(t *testing.T) {
	noErrors(t, loadBundle(t).Check())
}

func TestStrictDecodingRefuses(t *testing.T) {
	tests := []struct{ name, doc string }{
		{"unknown field", "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: x}\nspec: {replica: 3}\n"},
		{"wrong type", "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: x}\nspec: {replicas: three}\n"},
		{"duplicate field", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {clusterIP: None, clusterIP: None}\n"},
		{"misplaced field", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {ports: [{name: http, port: 1, containerPort: 1}]}\n"},
		{"unknown kind", "apiVersion: v1\nkind: Servise\nmetadata: {name: x}\n"},
		{"unmodelled ServiceMonitor field", "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: x}\nspec: {selector: {}, endpoints: [{port: http, intervall: 5s}]}\n"},
		{"no kind", "metadata: {name: x}\n"},
	}
	for _, tt := range tests {
		if _, err := DecodeManifest([]byte(tt.doc)); err == nil {
			t.Errorf("%s: decoded without error", tt.name)
		}
	}
}

func TestSplitDocuments(t *testing.T) {
	docs := splitDocuments([]byte("# only a comment\n---\na: 1\n---   \n\n---\nb: 2\n# trailing\n"))
	if len(docs) != 2 || !strings.Contains(string(docs[0]), "a: 1") || !strings.Contains(string(docs[1]), "b: 2") {
		t.Errorf("splitDocuments = %q", docs)
	}
}

// TestChecksCatchMistakes breaks one thing at a time in a fresh copy of the
// manifests and expects the checks to name it.
func TestChecksCatchMistakes(t *testing.T) {
	sts := func(b *Bundle) *appsv1.StatefulSet { return b.StatefulSets[0] }
	ctr := func(b *Bundle) *corev1.Container { return ctxdContainer(sts(b)) }
	svc := func(b *Bundle, name string) *corev1.Service { return b.service(name) }
	setEnv := func(c *corev1.Container, name, value string) {
		for i := range c.Env {
			if c.Env[i].Name == name {
				c.Env[i] = corev1.EnvVar{Name: name, Value: value}
				return
			}
		}
		c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
	}
	dropEnv := func(c *corev1.Container, name string) {
		var keep []corev1.EnvVar
		for _, e := range c.Env {
			if e.Name != name {
				keep = append(keep, e)
			}
		}
		c.Env = keep
	}
	replaceArg := func(c *corev1.Container, prefix, with string) {
		for i, a := range c.Args {
			if strings.HasPrefix(a, prefix) {
				c.Args[i] = with
			}
		}
	}
	five := int32(5)
	tests := []struct {
		name   string
		break_ func(b *Bundle)
		want   string
	}{
		{"container port differs from listener", func(b *Bundle) { ctr(b).Ports[1].ContainerPort = 8080 }, `container port "http" is 8080`},
		{"resp container port missing", func(b *Bundle) {
			ps := ctr(b).Ports
			for i, p := range ps {
				if p.Name == "resp" {
					ctr(b).Ports = append(ps[:i:i], ps[i+1:]...)
				}
			}
		}, `container port "resp" is 0, but ctxd's resp-listen is 0.0.0.0:7405`},
		{"stray container port", func(b *Bundle) {
			ctr(b).Ports = append(ctr(b).Ports, corev1.ContainerPort{Name: "grpc", ContainerPort: 9000})
		}, `"grpc" matches no ctxd listener`},
		{"readiness on healthz", func(b *Bundle) { ctr(b).ReadinessProbe.HTTPGet.Path = "/healthz" }, "readiness probe path"},
		{"liveness on native port", func(b *Bundle) { ctr(b).LivenessProbe.HTTPGet.Port = intstr.FromString("native") }, "liveness probe port"},
		{"no readiness probe", func(b *Bundle) { ctr(b).ReadinessProbe = nil }, "no readiness probe"},
		{"service targets a missing port", func(b *Bundle) { svc(b, "ctxd").Spec.Ports[1].TargetPort = intstr.FromString("https") }, "targetPort https"},
		{"service port renumbered", func(b *Bundle) { svc(b, "ctxd").Spec.Ports[1].Port = 80 }, "80 forwards to 7401"},
		{"client service exposes raft", func(b *Bundle) {
			svc(b, "ctxd").Spec.Ports = append(svc(b, "ctxd").Spec.Ports, corev1.ServicePort{Name: "raft", Port: 7402, TargetPort: intstr.FromString("raft")})
		}, "exposes Raft"},
		{"headless service not headless", func(b *Bundle) { svc(b, "ctxd-peers").Spec.ClusterIP = "" }, "not headless"},
		{"peers hidden until ready", func(b *Bundle) { svc(b, "ctxd-peers").Spec.PublishNotReadyAddresses = false }, "publishNotReadyAddresses"},
		{"serviceName mismatch", func(b *Bundle) { sts(b).Spec.ServiceName = "ctxd-headless" }, `serviceName "ctxd-headless": no such Service`},
		{"selector misses template", func(b *Bundle) { sts(b).Spec.Selector.MatchLabels["app.kubernetes.io/component"] = "router" }, "does not match the pod template"},
		{"service selects nothing", func(b *Bundle) { svc(b, "ctxd").Spec.Selector["app.kubernetes.io/name"] = "other" }, "selects no StatefulSet"},
		{"ordered pod management", func(b *Bundle) { sts(b).Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement }, "want Parallel"},
		{"PDB selects other pods", func(b *Bundle) { b.PDBs[0].Spec.Selector.MatchLabels["app.kubernetes.io/name"] = "other" }, "no PodDisruptionBudget selects"},
		{"PDB breaks quorum", func(b *Bundle) { v := intstr.FromInt32(2); b.PDBs[0].Spec.MaxUnavailable = &v }, "fewer than a quorum"},
		{"PDB blocks drains", func(b *Bundle) { v := intstr.FromInt32(0); b.PDBs[0].Spec.MaxUnavailable = &v }, "blocks every drain"},
		{"scaled without join", func(b *Bundle) { sts(b).Spec.Replicas = &five }, "want the replica count 5"},
		{"join misses a pod", func(b *Bundle) {
			replaceArg(ctr(b), "--join=", "--join=ctxd-0.ctxd-peers.$(POD_NAMESPACE).svc:7401,ctxd-1.ctxd-peers.$(POD_NAMESPACE).svc:7401")
		}, "pod ctxd-2 missing"},
		{"join on the raft port", func(b *Bundle) {
			replaceArg(ctr(b), "--join=", "--join=ctxd-0.ctxd-peers:7402,ctxd-1.ctxd-peers:7402,ctxd-2.ctxd-peers:7402")
		}, "is not the HTTP port"},
		{"join bypasses headless service", func(b *Bundle) {
			replaceArg(ctr(b), "--join=", "--join=ctxd-0.ctxd:7401,ctxd-1.ctxd:7401,ctxd-2.ctxd:7401")
		}, "does not go through the headless Service"},
		{"undefined variable", func(b *Bundle) { replaceArg(ctr(b), "--join=", "--join=ctxd-0.ctxd-peers.$(NS).svc:7401") }, "$(NS) is not defined"},
		{"unknown flag", func(b *Bundle) { ctr(b).Args = append(ctr(b).Args, "--raft-port=7402") }, "unknown ctxd setting: flag --raft-port"},
		{"flag given twice", func(b *Bundle) { ctr(b).Args = append(ctr(b).Args, "--bootstrap-expect=3") }, "given twice"},
		{"unknown env", func(b *Bundle) { setEnv(ctr(b), "CTXD_RAFT_PORT", "7402") }, "environment variable CTXD_RAFT_PORT"},
		{"unknown config key", func(b *Bundle) { b.ConfigMaps[0].Data["ctxd.yaml"] += "dram_size: 1GiB\n" }, `config file key "dram_size"`},
		{"config not a map", func(b *Bundle) { b.ConfigMaps[0].Data["ctxd.yaml"] = "- a\n" }, "ConfigMap ctxd-config key ctxd.yaml"},
		{"config key missing", func(b *Bundle) { replaceArg(ctr(b), "--config=", "--config=/etc/ctxd/config/ctxd.yml") }, `has no key "ctxd.yml"`},
		{"raft on loopback", func(b *Bundle) { replaceArg(ctr(b), "--raft-listen=", "--raft-listen=127.0.0.1:7402") }, "unreachable"},
		{"memory limit below DRAM", func(b *Bundle) {
			ctr(b).Resources.Limits[corev1.ResourceMemory] = resource.MustParse("16Gi")
			ctr(b).Resources.Requests[corev1.ResourceMemory] = resource.MustParse("16Gi")
		}, "memory limit 16Gi < dram-capacity"},
		{"request below limit", func(b *Bundle) { ctr(b).Resources.Requests[corev1.ResourceMemory] = resource.MustParse("17Gi") }, "Guaranteed QoS"},
		{"GOMEMLIMIT over headroom", func(b *Bundle) { setEnv(ctr(b), "GOMEMLIMIT", "4GiB") }, "GOMEMLIMIT 4GiB exceeds"},
		{"NVMe tier larger than its claim", func(b *Bundle) {
			sts(b).Spec.VolumeClaimTemplates[1].Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("100Gi")
		}, "exceeds its volume claim"},
		{"data dir not on a claim", func(b *Bundle) { ctr(b).Args = append(ctr(b).Args, "--data-dir=/tmp/data") }, "data-dir /tmp/data is not on a volume claim"},
		{"TLS not mutual", func(b *Bundle) {
			b.ConfigMaps[0].Data["ctxd.yaml"] = strings.Replace(b.ConfigMaps[0].Data["ctxd.yaml"], "tls_mutual: true", "tls_mutual: false", 1)
		}, `tls-mutual "false": want true`},
		{"TLS secret lacks the CA", func(b *Bundle) { delete(b.secret("ctxd-tls").StringData, "ca.crt") }, `Secret ctxd-tls has no key "ca.crt"`},
		{"S3 secret key misnamed", func(b *Bundle) { delete(b.secret("ctxd-s3").StringData, "secret-key") }, `Secret "ctxd-s3" has no key "secret-key"`},
		{"S3 secret missing", func(b *Bundle) { b.secret("ctxd-s3").Name = "s3-creds" }, `Secret "ctxd-s3" is not among the manifests`},
		{"zone not from the node", func(b *Bundle) { dropEnv(ctr(b), "CTXD_ZONE") }, "want CTXD_ZONE from the downward API"},
		{"node id not the pod name", func(b *Bundle) { setEnv(ctr(b), "CTXD_NODE_ID", "node") }, "node id \"node\""},
		{"no zone spread", func(b *Bundle) { sts(b).Spec.Template.Spec.TopologySpreadConstraints = nil }, "no topology spread constraint"},
		{"no anti-affinity", func(b *Bundle) { sts(b).Spec.Template.Spec.Affinity = nil }, "pods may share a machine"},
		{"wrong namespace", func(b *Bundle) { b.ConfigMaps[0].Namespace = "default" }, `namespace "default", want "ctxtier"`},
		{"ServiceMonitor scrapes twice", func(b *Bundle) {
			b.ServiceMonitors[0].Spec.Selector.MatchLabels = map[string]string{"app.kubernetes.io/name": "ctxtier"}
		}, "selects 2 Services"},
		{"ServiceMonitor on native port", func(b *Bundle) { b.ServiceMonitors[0].Spec.Endpoints[0].Port = "native" }, "not the HTTP port"},
		{"ServiceMonitor timeout over interval", func(b *Bundle) { b.ServiceMonitors[0].Spec.Endpoints[0].ScrapeTimeout = "30s" }, "exceeds interval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := loadBundle(t)
			tt.break_(b)
			wantError(t, b.Check(), tt.want)
		})
	}
}
