package validation

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// ComposeFile is the part of a docker-compose file (format 2.4) that the
// checks read; x- extension fields, anchors and merge keys are resolved by
// the YAML decoder.
type ComposeFile struct {
	Version  string                    `json:"version"`
	Services map[string]ComposeService `json:"services"`
	Networks map[string]any            `json:"networks"`
	Volumes  map[string]any            `json:"volumes"`
}

// ComposeService is one service of a compose file.
type ComposeService struct {
	Image       string            `json:"image"`
	Hostname    string            `json:"hostname"`
	Command     []string          `json:"command"`
	Entrypoint  []string          `json:"entrypoint"`
	Environment map[string]string `json:"environment"`
	Ports       []string          `json:"ports"`
	Volumes     []string          `json:"volumes"`
	Networks    []string          `json:"networks"`
	DependsOn   []string          `json:"depends_on"`
}

var composeVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:?-([^}]*))?\}`)

// interpolate resolves ${VAR}, ${VAR-default} and ${VAR:-default} as
// docker-compose does, from env.
func interpolate(s string, env map[string]string) string {
	return composeVar.ReplaceAllStringFunc(s, func(m string) string {
		g := composeVar.FindStringSubmatch(m)
		v, ok := env[g[1]]
		switch {
		case g[2] == "":
			return v
		case strings.HasPrefix(g[2], ":-") && v == "", !ok:
			return g[3]
		}
		return v
	})
}

// LoadCompose reads a compose file, interpolated with env (nil: every
// variable unset, so the defaults apply).
func LoadCompose(path string, env map[string]string) (*ComposeFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f ComposeFile
	if err := yaml.Unmarshal([]byte(interpolate(string(b), env)), &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &f, nil
}

// PublishedPort is one "host_ip:host_port:container_port" mapping.
type PublishedPort struct {
	HostIP        string
	HostPort      int
	ContainerPort int
}

func parsePort(s string) (PublishedPort, error) {
	parts := strings.Split(strings.TrimSuffix(s, "/tcp"), ":")
	if len(parts) != 3 {
		return PublishedPort{}, fmt.Errorf("port %q: want host_ip:host_port:container_port", s)
	}
	hp, err1 := strconv.Atoi(parts[1])
	cp, err2 := strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil {
		return PublishedPort{}, fmt.Errorf("port %q: bad number", s)
	}
	return PublishedPort{HostIP: parts[0], HostPort: hp, ContainerPort: cp}, nil
}

// ComposeOptions says what a compose file is meant to run.
type ComposeOptions struct {
	CtxdImage string // image name of the ctxd services
	// Cluster is true for the multi-node file; false for a file that must
	// run with today's single-node ctxd (no cluster settings).
	Cluster bool
}

// CheckCompose checks a compose file against the image's entrypoint and
// ctxd's settings: only known settings; listeners on all interfaces, their
// ports published on 127.0.0.1 only and unique on the host; /data on a
// named volume; and, for a cluster, the same command line everywhere, a
// --join naming every node, --bootstrap-expect equal to the node count and
// distinct node ids, advertised names and zones.
func CheckCompose(f *ComposeFile, img Image, opt ComposeOptions) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	entry, err := img.CtxdArgs()
	if err != nil {
		return []error{err}
	}
	hostPorts := map[int]string{}
	var nodes []string
	for _, name := range sortedKeys(f.Services) {
		svc := f.Services[name]
		for _, p := range svc.Ports {
			pp, err := parsePort(p)
			if err != nil {
				bad("service %s: %v", name, err)
				continue
			}
			if pp.HostIP != "127.0.0.1" {
				bad("service %s: port %q is published beyond 127.0.0.1", name, p)
			}
			if other, dup := hostPorts[pp.HostPort]; dup {
				bad("service %s: host port %d already used by %s", name, pp.HostPort, other)
			}
			hostPorts[pp.HostPort] = name
		}
		for _, n := range svc.Networks {
			if _, ok := f.Networks[n]; !ok {
				bad("service %s: network %q is not declared", name, n)
			}
		}
		for _, v := range svc.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if !strings.HasPrefix(src, "/") && !strings.HasPrefix(src, ".") {
				if _, ok := f.Volumes[src]; !ok {
					bad("service %s: volume %q is not declared", name, src)
				}
			}
		}
		if svc.Image == opt.CtxdImage {
			nodes = append(nodes, name)
		}
	}
	if len(nodes) == 0 {
		bad("no service runs %s", opt.CtxdImage)
		return errs
	}
	var firstCmd string
	ids, zones, adverts := map[string]string{}, map[string]string{}, map[string]string{}
	for _, name := range nodes {
		svc := f.Services[name]
		nbad := func(format string, a ...any) { bad("service %s: "+format, append([]any{name}, a...)...) }
		if len(svc.Entrypoint) > 0 {
			nbad("overrides the image's entrypoint")
		}
		own, err := ParseArgs(svc.Command)
		if err != nil {
			nbad("command: %v", err)
			continue
		}
		eff, err := Effective(nil, svc.Environment, append(append([]Arg(nil), entry...), own...))
		if err != nil {
			nbad("%v", err)
			continue
		}
		for s := range eff {
			if st, _ := LookupSetting(s); st.Cluster && !opt.Cluster {
				nbad("uses --%s, which today's single-node ctxd does not have", s)
			}
		}
		published := map[int]bool{}
		for _, p := range svc.Ports {
			if pp, err := parsePort(p); err == nil {
				published[pp.ContainerPort] = true
			}
		}
		listeners := []string{"listen", "http-listen", "resp-listen"}
		if opt.Cluster {
			listeners = append(listeners, "raft-listen", "s3-admin-listen")
		}
		for _, s := range listeners {
			p, err := ListenPort(s, eff[s])
			if err != nil {
				nbad("%v", err)
				continue
			}
			if s != "raft-listen" && !published[p] {
				nbad("%s port %d is not published to the host", s, p)
			}
		}
		for p := range published {
			if !listensOn(eff, p) {
				nbad("publishes container port %d, which no ctxd listener uses", p)
			}
		}
		dataOnVolume := false
		for _, v := range svc.Volumes {
			src, dst, _ := strings.Cut(v, ":")
			if dst == eff["data-dir"] && f.Volumes != nil {
				_, dataOnVolume = f.Volumes[src]
			}
		}
		if !dataOnVolume {
			nbad("data dir %q is not on a named volume", eff["data-dir"])
		}
		if !opt.Cluster {
			continue
		}
		cmd := strings.Join(svc.Command, " ")
		if firstCmd == "" {
			firstCmd = cmd
		} else if cmd != firstCmd {
			nbad("command differs from the other nodes'; per-node settings belong in the environment")
		}
		if be, err := strconv.Atoi(eff["bootstrap-expect"]); err != nil || be != len(nodes) {
			nbad("--bootstrap-expect %q, want the node count %d", eff["bootstrap-expect"], len(nodes))
		}
		httpPort, _ := ListenPort("http-listen", eff["http-listen"])
		var joined []string
		for _, addr := range strings.Split(eff["join"], ",") {
			host, port, err := splitHostPort(addr)
			if err != nil || port != httpPort || !contains(nodes, host) {
				nbad("--join entry %q: want NODE:%d with NODE one of %v", addr, httpPort, nodes)
			}
			joined = append(joined, host)
		}
		for _, n := range nodes {
			if !contains(joined, n) {
				nbad("--join lacks %s", n)
			}
		}
		if eff["node-id"] != name || eff["advertise"] != name || svc.Hostname != name {
			nbad("node id %q, advertise %q, hostname %q: want all three to be the service name", eff["node-id"], eff["advertise"], svc.Hostname)
		}
		for what, m := range map[string]map[string]string{"node id": ids, "zone": zones, "advertise": adverts} {
			key := map[string]string{"node id": "node-id", "zone": "zone", "advertise": "advertise"}[what]
			v := eff[key]
			if v == "" {
				nbad("%s not set", what)
			} else if other, dup := m[v]; dup {
				nbad("%s %q also used by %s", what, v, other)
			}
			m[v] = name
		}
	}
	return errs
}

func listensOn(eff map[string]string, port int) bool {
	for s := range ListenSettings {
		if p, err := ListenPort(s, eff[s]); err == nil && p == port {
			return true
		}
	}
	return false
}
