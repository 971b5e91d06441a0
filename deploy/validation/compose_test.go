package validation

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const ctxdImageName = "ctxtier/ctxd:dev"

func loadCompose(t *testing.T, name string) *ComposeFile {
	t.Helper()
	f, err := LoadCompose(filepath.Join(repoRoot(t), "deploy/compose", name), nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestComposeCluster(t *testing.T) {
	f := loadCompose(t, "docker-compose.yml")
	noErrors(t, CheckCompose(f, ctxdImage(t), ComposeOptions{CtxdImage: ctxdImageName, Cluster: true}))
	if len(f.Services) != 4 {
		t.Errorf("%d services, want 3 nodes and s3", len(f.Services))
	}
	if _, ok := f.Services["s3"]; !ok {
		t.Error("no s3 service")
	}
}

func TestComposeSingle(t *testing.T) {
	f := loadCompose(t, "docker-compose.single.yml")
	noErrors(t, CheckCompose(f, ctxdImage(t), ComposeOptions{CtxdImage: ctxdImageName}))
}

func TestComposeChecksCatchMistakes(t *testing.T) {
	setCmd := func(f *ComposeFile, svc, prefix, with string) {
		s := f.Services[svc]
		s.Command = append([]string(nil), s.Command...)
		for i, a := range s.Command {
			if strings.HasPrefix(a, prefix) {
				s.Command[i] = with
			}
		}
		f.Services[svc] = s
	}
	setEnv := func(f *ComposeFile, svc, k, v string) {
		s := f.Services[svc]
		env := map[string]string{}
		for a, b := range s.Environment {
			env[a] = b
		}
		env[k] = v
		s.Environment = env
		f.Services[svc] = s
	}
	setPorts := func(f *ComposeFile, svc string, ports ...string) {
		s := f.Services[svc]
		s.Ports = ports
		f.Services[svc] = s
	}
	tests := []struct {
		name   string
		file   string
		break_ func(f *ComposeFile)
		want   string
	}{
		{"command differs", "docker-compose.yml", func(f *ComposeFile) { setCmd(f, "ctxd-2", "--nvme-capacity=", "--nvme-capacity=1GiB") }, "command differs"},
		{"join misses a node", "docker-compose.yml", func(f *ComposeFile) {
			for _, n := range []string{"ctxd-1", "ctxd-2", "ctxd-3"} {
				setCmd(f, n, "--join=", "--join=ctxd-1:7401,ctxd-2:7401")
			}
		}, "--join lacks ctxd-3"},
		{"join on the wrong port", "docker-compose.yml", func(f *ComposeFile) {
			for _, n := range []string{"ctxd-1", "ctxd-2", "ctxd-3"} {
				setCmd(f, n, "--join=", "--join=ctxd-1:7402,ctxd-2:7402,ctxd-3:7402")
			}
		}, `--join entry "ctxd-1:7402"`},
		{"bootstrap-expect off", "docker-compose.yml", func(f *ComposeFile) {
			for _, n := range []string{"ctxd-1", "ctxd-2", "ctxd-3"} {
				setCmd(f, n, "--bootstrap-expect=", "--bootstrap-expect=2")
			}
		}, "want the node count 3"},
		{"duplicate zone", "docker-compose.yml", func(f *ComposeFile) { setEnv(f, "ctxd-3", "CTXD_ZONE", "zone-a") }, `zone "zone-a" also used`},
		{"node id not the service", "docker-compose.yml", func(f *ComposeFile) { setEnv(f, "ctxd-2", "CTXD_NODE_ID", "two") }, `node id "two"`},
		{"unknown variable", "docker-compose.yml", func(f *ComposeFile) { setEnv(f, "ctxd-1", "CTXD_RAFT_PORT", "1") }, "CTXD_RAFT_PORT"},
		{"published beyond loopback", "docker-compose.yml", func(f *ComposeFile) {
			setPorts(f, "ctxd-1", "0.0.0.0:27400:7400", "127.0.0.1:27401:7401", "127.0.0.1:27403:7403")
		}, "published beyond 127.0.0.1"},
		{"host port reused", "docker-compose.yml", func(f *ComposeFile) {
			setPorts(f, "ctxd-2", "127.0.0.1:27400:7400", "127.0.0.1:27411:7401", "127.0.0.1:27413:7403")
		}, "host port 27400 already used"},
		{"http not published", "docker-compose.yml", func(f *ComposeFile) {
			setPorts(f, "ctxd-2", "127.0.0.1:27410:7400", "127.0.0.1:27413:7403")
		}, "http-listen port 7401 is not published"},
		{"resp not published", "docker-compose.yml", func(f *ComposeFile) {
			setPorts(f, "ctxd-3", "127.0.0.1:27420:7400", "127.0.0.1:27421:7401", "127.0.0.1:27423:7403")
		}, "resp-listen port 7405 is not published"},
		{"stray published port", "docker-compose.single.yml", func(f *ComposeFile) {
			setPorts(f, "ctxd", "127.0.0.1:27400:7400", "127.0.0.1:27401:7401", "127.0.0.1:27499:7499")
		}, "container port 7499"},
		{"cluster flag in the single-node file", "docker-compose.single.yml", func(f *ComposeFile) { setEnv(f, "ctxd", "CTXD_NODE_ID", "x") }, "--node-id, which today's"},
		{"data not on a volume", "docker-compose.single.yml", func(f *ComposeFile) {
			s := f.Services["ctxd"]
			s.Volumes = nil
			f.Services["ctxd"] = s
		}, `data dir "/data" is not on a named volume`},
		{"undeclared network", "docker-compose.single.yml", func(f *ComposeFile) {
			s := f.Services["s3"]
			s.Networks = []string{"backend"}
			f.Services["s3"] = s
		}, `network "backend" is not declared`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := loadCompose(t, tt.file)
			tt.break_(f)
			wantError(t, CheckCompose(f, ctxdImage(t), ComposeOptions{CtxdImage: ctxdImageName, Cluster: tt.file == "docker-compose.yml"}), tt.want)
		})
	}
}

func TestInterpolate(t *testing.T) {
	env := map[string]string{"SET": "v", "EMPTY": ""}
	for in, want := range map[string]string{
		"${SET}":          "v",
		"${UNSET}":        "",
		"${UNSET:-d}":     "d",
		"${EMPTY:-d}":     "d",
		"${EMPTY-d}":      "",
		"${UNSET-d}":      "d",
		"${SET:-d}":       "v",
		"a${SET}b${SET}c": "avbvc",
		"$SET":            "$SET",
	} {
		if got := interpolate(in, env); got != want {
			t.Errorf("interpolate(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestE2EPortsMatchCompose: e2e.sh reaches each node on the host port the
// compose files publish for its HTTP listener.
func TestE2EPortsMatchCompose(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy/compose/e2e.sh"))
	if err != nil {
		t.Fatal(err)
	}
	prefix := regexp.MustCompile(`CTXTIER_PORT_PREFIX:-(\d+)\}`).FindStringSubmatch(string(b))
	if prefix == nil {
		t.Fatal("e2e.sh sets no default CTXTIER_PORT_PREFIX")
	}
	re := regexp.MustCompile(`(?m)^\s*([a-z0-9| -]+)\)\s*echo "\$\{P\}(\d+)"\s*;;`)
	script := map[string]int{}
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		p, _ := strconv.Atoi(prefix[1] + m[2])
		for _, n := range strings.Split(m[1], "|") {
			script[strings.TrimSpace(n)] = p
		}
	}
	for _, file := range []string{"docker-compose.yml", "docker-compose.single.yml"} {
		f := loadCompose(t, file)
		for name, svc := range f.Services {
			if svc.Image != ctxdImageName {
				continue
			}
			want, ok := script[name]
			if !ok {
				t.Errorf("%s: e2e.sh has no port for node %s", file, name)
				continue
			}
			found := false
			for _, p := range svc.Ports {
				if pp, err := parsePort(p); err == nil && pp.ContainerPort == PortHTTP && pp.HostPort == want {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: e2e.sh reaches %s on %d, but the file publishes %v", file, name, want, svc.Ports)
			}
		}
	}
}
