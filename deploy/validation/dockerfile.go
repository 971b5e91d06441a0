package validation

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Image is what the checks need from a Dockerfile.
type Image struct {
	From       string
	User       string
	Entrypoint []string
	Expose     []int
	Volumes    []string
	Labels     map[string]string
}

// LoadDockerfile reads the few instructions the checks use. ENTRYPOINT must
// be in exec (JSON) form: a shell form needs a shell, which a scratch image
// has not.
func LoadDockerfile(path string) (Image, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Image{}, err
	}
	img := Image{Labels: map[string]string{}}
	// Join continuation lines, drop comments.
	var lines []string
	cur := ""
	for _, l := range strings.Split(string(b), "\n") {
		t := strings.TrimSpace(l)
		if cur == "" && (t == "" || strings.HasPrefix(t, "#")) {
			continue
		}
		if strings.HasSuffix(t, "\\") {
			cur += strings.TrimSuffix(t, "\\") + " "
			continue
		}
		lines = append(lines, cur+t)
		cur = ""
	}
	for _, l := range lines {
		instr, rest, _ := strings.Cut(l, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(instr) {
		case "FROM":
			img.From = rest
		case "USER":
			img.User = rest
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &img.Entrypoint); err != nil {
				return Image{}, fmt.Errorf("%s: ENTRYPOINT must be in exec (JSON) form: %w", path, err)
			}
		case "EXPOSE":
			for _, f := range strings.Fields(rest) {
				p, err := strconv.Atoi(strings.TrimSuffix(f, "/tcp"))
				if err != nil {
					return Image{}, fmt.Errorf("%s: EXPOSE %q: %w", path, f, err)
				}
				img.Expose = append(img.Expose, p)
			}
		case "VOLUME":
			img.Volumes = append(img.Volumes, strings.Fields(rest)...)
		case "LABEL":
			for _, kv := range splitLabels(rest) {
				k, v, _ := strings.Cut(kv, "=")
				img.Labels[k] = strings.Trim(v, `"`)
			}
		}
	}
	return img, nil
}

// splitLabels splits `a="x y" b="z"` on the spaces outside quotes.
func splitLabels(s string) []string {
	var out []string
	var cur strings.Builder
	quoted := false
	for _, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
			cur.WriteRune(r)
		case r == ' ' && !quoted:
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// CtxdArgs returns the ctxd flags the entrypoint passes (after the binary).
func (img Image) CtxdArgs() ([]Arg, error) {
	if len(img.Entrypoint) == 0 {
		return nil, fmt.Errorf("no ENTRYPOINT")
	}
	return ParseArgs(img.Entrypoint[1:])
}

// CheckCtxdImage checks the release image's Dockerfile: FROM scratch, a
// non-root user, every listener port exposed, /data a volume and the data
// dir, listeners on all interfaces, the OCI labels set.
func CheckCtxdImage(img Image) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("Dockerfile: "+format, a...)) }
	if img.From != "scratch" {
		bad("FROM %q, want scratch (no base image can be pulled)", img.From)
	}
	if uid, _, _ := strings.Cut(img.User, ":"); uid == "" || uid == "0" || uid == "root" {
		bad("USER %q: the image must run as a non-root user", img.User)
	}
	args, err := img.CtxdArgs()
	if err != nil {
		bad("ENTRYPOINT: %v", err)
		return errs
	}
	eff, _ := Effective(nil, nil, args)
	if eff["data-dir"] != "/data" {
		bad("ENTRYPOINT data dir %q, want /data", eff["data-dir"])
	}
	if !contains(img.Volumes, "/data") {
		bad("VOLUME /data missing")
	}
	for _, p := range []int{PortNative, PortHTTP, PortRaft, PortS3Admin, PortPeer, PortRESP} {
		if !containsInt(img.Expose, p) {
			bad("EXPOSE lacks %d", p)
		}
	}
	for _, s := range []string{"listen", "http-listen", "resp-listen"} {
		if _, err := ListenPort(s, eff[s]); err != nil {
			bad("ENTRYPOINT: %v", err)
		}
	}
	for _, l := range []string{"title", "description", "source", "version", "revision", "created"} {
		if img.Labels["org.opencontainers.image."+l] == "" {
			bad("label org.opencontainers.image.%s missing", l)
		}
	}
	return errs
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
