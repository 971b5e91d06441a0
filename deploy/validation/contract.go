package validation

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
)

// Setting is one of ctxd's settings. Each is a flag (--dram-capacity), an
// environment variable (CTXD_DRAM_CAPACITY) and a key of the YAML file
// (dram_capacity); flags win over the environment, which wins over the file.
type Setting struct {
	Name string
	// Cluster marks the settings that come with the cluster, NVMe and S3
	// work; a file meant to run with today's single-node ctxd must not use
	// them.
	Cluster bool
	// Bool settings may be given as a bare flag (--s3-tls).
	Bool bool
}

// Settings is ctxd's command-line contract. Keep it in step with `ctxd -h`.
var Settings = []Setting{
	{Name: "config"},
	{Name: "data-dir"},
	{Name: "listen"},
	{Name: "http-listen"},
	{Name: "dram-capacity"},
	{Name: "dram-memfile"},
	{Name: "max-block-size"},
	{Name: "pin-max-ttl"},
	{Name: "log-level"},
	{Name: "log-format"},
	{Name: "auth"},
	{Name: "resp-listen"},
	{Name: "resp-databases"},
	{Name: "node-id", Cluster: true},
	{Name: "raft-listen", Cluster: true},
	{Name: "advertise", Cluster: true},
	{Name: "join", Cluster: true},
	{Name: "bootstrap-expect", Cluster: true},
	{Name: "zone", Cluster: true},
	{Name: "cluster-secret", Cluster: true},
	{Name: "cluster-secret-file", Cluster: true},
	{Name: "tls-cert", Cluster: true},
	{Name: "tls-key", Cluster: true},
	{Name: "tls-ca", Cluster: true},
	{Name: "tls-mutual", Cluster: true, Bool: true},
	{Name: "tls-server-name", Cluster: true},
	{Name: "tls-clients", Cluster: true, Bool: true},
	{Name: "nvme-dir", Cluster: true},
	{Name: "nvme-capacity", Cluster: true},
	{Name: "s3-endpoint", Cluster: true},
	{Name: "s3-bucket", Cluster: true},
	{Name: "s3-prefix", Cluster: true},
	{Name: "s3-access-key", Cluster: true},
	{Name: "s3-secret-key", Cluster: true},
	{Name: "s3-tls", Cluster: true, Bool: true},
	{Name: "s3-admin-listen", Cluster: true},
	{Name: "peer-listen", Cluster: true},
}

// Well-known ports of ctxd's listeners.
const (
	PortNative  = 7400
	PortHTTP    = 7401
	PortRaft    = 7402
	PortS3Admin = 7403
	PortPeer    = 7404
	PortRESP    = 7405
)

// ListenSettings maps each listener setting to the port name used for it in
// containers and Services.
var ListenSettings = map[string]string{
	"listen":          "native",
	"http-listen":     "http",
	"raft-listen":     "raft",
	"s3-admin-listen": "s3-admin",
	"peer-listen":     "peer",
	"resp-listen":     "resp",
}

var (
	// ErrUnknownSetting is a flag, variable or key that ctxd does not have.
	ErrUnknownSetting = errors.New("validation: unknown ctxd setting")
	// ErrBadArgs is a command line that does not parse.
	ErrBadArgs = errors.New("validation: malformed ctxd arguments")
)

// LookupSetting finds a setting by flag name.
func LookupSetting(name string) (Setting, bool) {
	for _, s := range Settings {
		if s.Name == name {
			return s, true
		}
	}
	return Setting{}, false
}

// SettingOfEnv returns the flag name of a CTXD_* variable, and false for a
// variable that is not ctxd's (no CTXD_ prefix).
func SettingOfEnv(env string) (string, bool, error) {
	rest, ok := strings.CutPrefix(env, "CTXD_")
	if !ok {
		return "", false, nil
	}
	name := strings.ToLower(strings.ReplaceAll(rest, "_", "-"))
	if _, ok := LookupSetting(name); !ok {
		return "", true, fmt.Errorf("%w: environment variable %s", ErrUnknownSetting, env)
	}
	return name, true, nil
}

// SettingOfKey returns the flag name of a YAML file key.
func SettingOfKey(key string) (string, error) {
	name := strings.ReplaceAll(key, "_", "-")
	if _, ok := LookupSetting(name); !ok || name == "config" || strings.Contains(key, "-") {
		return "", fmt.Errorf("%w: config file key %q", ErrUnknownSetting, key)
	}
	return name, nil
}

// Arg is one setting given on a command line.
type Arg struct {
	Name, Value string
}

// ParseArgs parses ctxd flags the way Go's flag package does: -name=value,
// --name=value, or -name value (a bool flag takes no separate value). It
// refuses unknown flags and positional arguments.
func ParseArgs(args []string) ([]Arg, error) {
	var out []Arg
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			return nil, fmt.Errorf("%w: positional argument %q", ErrBadArgs, a)
		}
		body := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		name, value, hasValue := strings.Cut(body, "=")
		s, ok := LookupSetting(name)
		if !ok {
			return nil, fmt.Errorf("%w: flag --%s", ErrUnknownSetting, name)
		}
		if !hasValue {
			if s.Bool {
				value = "true"
			} else {
				if i+1 >= len(args) {
					return nil, fmt.Errorf("%w: flag --%s needs a value", ErrBadArgs, name)
				}
				i++
				value = args[i]
			}
		}
		out = append(out, Arg{Name: name, Value: value})
	}
	return out, nil
}

// Effective resolves what ctxd would run with, by its precedence: the file,
// then the environment, then the flags in order (a later flag wins). Values
// the environment takes from elsewhere (a Secret, the downward API) are
// given as placeholders by the caller.
func Effective(file map[string]string, env map[string]string, args []Arg) (map[string]string, error) {
	eff := map[string]string{}
	for k, v := range file {
		name, err := SettingOfKey(k)
		if err != nil {
			return nil, err
		}
		eff[name] = v
	}
	for k, v := range env {
		name, ours, err := SettingOfEnv(k)
		if err != nil {
			return nil, err
		}
		if ours {
			eff[name] = v
		}
	}
	for _, a := range args {
		eff[a.Name] = a.Value
	}
	return eff, nil
}

// ListenPort checks that a listen address is reachable from outside the
// container (an unspecified host) and returns its port.
func ListenPort(setting, addr string) (int, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("%s %q: %w", setting, addr, err)
	}
	if host != "" && host != "0.0.0.0" && host != "::" {
		return 0, fmt.Errorf("%s %q: listens on %s only, unreachable from other pods or containers", setting, addr, host)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("%s %q: bad port", setting, addr)
	}
	return p, nil
}

// sortedKeys lists a map's keys in order, for stable messages.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
