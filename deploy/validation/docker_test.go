package validation

import (
	"path/filepath"
	"testing"
)

func TestDockerfile(t *testing.T) {
	img := ctxdImage(t)
	noErrors(t, CheckCtxdImage(img))
	if img.Entrypoint[0] != "/usr/local/bin/ctxd" {
		t.Errorf("entrypoint %q", img.Entrypoint)
	}
}

func TestDockerfileVersitygw(t *testing.T) {
	img, err := LoadDockerfile(filepath.Join(repoRoot(t), "deploy/docker/Dockerfile.versitygw"))
	if err != nil {
		t.Fatal(err)
	}
	if img.From != "scratch" || img.User == "" || img.User == "0" || len(img.Entrypoint) == 0 {
		t.Errorf("versitygw image: FROM %q USER %q ENTRYPOINT %q", img.From, img.User, img.Entrypoint)
	}
}

func TestDockerfileChecksCatchMistakes(t *testing.T) {
	tests := []struct {
		name   string
		break_ func(*Image)
		want   string
	}{
		{"base image", func(i *Image) { i.From = "debian:12" }, "want scratch"},
		{"root", func(i *Image) { i.User = "0:0" }, "non-root"},
		{"no user", func(i *Image) { i.User = "" }, "non-root"},
		{"loopback listener", func(i *Image) { i.Entrypoint = append(i.Entrypoint, "--http-listen", "127.0.0.1:7401") }, "unreachable"},
		{"raft port not exposed", func(i *Image) { i.Expose = []int{7400, 7401, 7403} }, "EXPOSE lacks 7402"},
		{"resp port not exposed", func(i *Image) { i.Expose = []int{7400, 7401, 7402, 7403, 7404} }, "EXPOSE lacks 7405"},
		{"loopback resp listener", func(i *Image) { i.Entrypoint = append(i.Entrypoint, "--resp-listen=127.0.0.1:7405") }, "unreachable"},
		{"data dir elsewhere", func(i *Image) { i.Entrypoint = append(i.Entrypoint, "--data-dir=/var/lib/ctxd") }, "want /data"},
		{"unknown flag", func(i *Image) { i.Entrypoint = append(i.Entrypoint, "--port=1") }, "unknown ctxd setting"},
		{"no revision label", func(i *Image) { delete(i.Labels, "org.opencontainers.image.revision") }, "image.revision missing"},
	}
	for _, tt := range tests {
		img := ctxdImage(t)
		tt.break_(&img)
		wantError(t, CheckCtxdImage(img), tt.want)
	}
}
