package main

import (
	"bytes"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/gateway/client"
	"github.com/ctxtier/ctxtier/internal/testdep"
)

func TestAuthFlag(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	cfg, err := LoadConfig(nil, none, io.Discard)
	if err != nil || cfg.Auth != "off" {
		t.Fatalf("default auth %q (%v), want off", cfg.Auth, err)
	}
	if cfg, err := LoadConfig([]string{"--auth", "required"}, none, io.Discard); err != nil || cfg.Auth != "required" {
		t.Fatalf("--auth required: %q %v", cfg.Auth, err)
	}
	if _, err := LoadConfig([]string{"--auth", "maybe"}, none, io.Discard); err == nil || !strings.Contains(err.Error(), "auth") {
		t.Fatalf("--auth maybe: %v", err)
	}
}

// curl runs curl with args and returns the HTTP status and body.
func curl(t *testing.T, stdin []byte, args ...string) (string, string) {
	t.Helper()
	cmd := exec.Command("curl", append([]string{"-sS", "-w", "\n%{http_code}"}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("curl %v: %v\n%s", args, err, out)
	}
	s := string(out)
	i := strings.LastIndexByte(s, '\n')
	return s[i+1:], s[:i]
}

// TestAuthRequiredProcess runs ctxd --auth required with keys made by the
// credential store (what `ctxctl keys create` writes) and checks that a key
// scoped to "a" cannot reach "b" over either block API, that SigV4 (the Go
// client and curl --aws-sigv4) and Bearer both work, and that health stays open.
func TestAuthRequiredProcess(t *testing.T) {
	dir := t.TempDir()
	ctx := withTimeout(t, 60*time.Second)
	keys, err := credential.OpenFile(credential.DefaultConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	keyA, err := keys.Create(ctx, []string{"a"}, "tenant a")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := keys.Create(ctx, []string{credential.ScopeAll}, "admin")
	if err != nil {
		t.Fatal(err)
	}
	p := startCtxd(t, "--data-dir", dir, "--auth", "required")
	base := "http://" + p.HTTP

	httpClient := func(c credential.Credential) *client.HTTPClient {
		cfg := client.HTTPDefaultConfig()
		cfg.BaseURL, cfg.AccessKeyID, cfg.Secret = base, c.AccessKeyID, c.Secret
		hc, err := client.NewHTTP(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { hc.Close() })
		return hc
	}
	adm := httpClient(admin)
	for _, ns := range []string{"a", "b"} {
		if _, err := adm.CreateNamespace(ctx, block.Namespace{Name: ns}); err != nil {
			t.Fatalf("create %s: %v", ns, err)
		}
	}
	if err := adm.Put(ctx, block.NewKey("b", 1), []byte("b's block"), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}

	// HTTP, SigV4 through the Go client.
	ha := httpClient(keyA)
	if err := ha.Put(ctx, block.NewKey("a", 1), []byte("a's block"), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ha.Get(ctx, block.NewKey("b", 1)); !errors.Is(err, block.ErrPermissionDenied) {
		t.Fatalf("http get b: %v", err)
	}
	if list, err := ha.ListNamespaces(ctx); err != nil || len(list) != 1 || list[0].Name != "a" {
		t.Fatalf("http list: %v %v", list, err)
	}

	// Native protocol.
	if _, err := client.Dial(ctx, p.Native, client.Options{Conns: 1}); !errors.Is(err, block.ErrUnauthenticated) {
		t.Fatalf("anonymous dial: %v", err)
	}
	if _, err := client.Dial(ctx, p.Native, client.Options{Conns: 1, AccessKeyID: keyA.AccessKeyID, Secret: admin.Secret}); !errors.Is(err, block.ErrUnauthenticated) {
		t.Fatalf("wrong-secret dial: %v", err)
	}
	nc, err := client.Dial(ctx, p.Native, client.Options{Conns: 1, AccessKeyID: keyA.AccessKeyID, Secret: keyA.Secret})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if got, err := nc.Get(ctx, block.NewKey("a", 1)); err != nil || string(got) != "a's block" {
		t.Fatalf("native get a: %q %v", got, err)
	}
	for _, ns := range []string{"b", "z"} {
		if _, err := nc.Get(ctx, block.NewKey(ns, 1)); !errors.Is(err, block.ErrPermissionDenied) {
			t.Fatalf("native get %s: %v", ns, err)
		}
		if _, err := nc.Lookup(ctx, []block.Key{block.NewKey(ns, 1)}); !errors.Is(err, block.ErrPermissionDenied) {
			t.Fatalf("native lookup %s: %v", ns, err)
		}
	}

	// A key created while ctxd runs works without a restart.
	keyC, err := keys.Create(ctx, []string{"a"}, "later")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := client.Dial(ctx, p.Native, client.Options{Conns: 1, AccessKeyID: keyC.AccessKeyID, Secret: keyC.Secret})
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("new key not accepted: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Health stays open.
	testdep.Command(t, "curl", "make test-deps installs it (apt-get install curl)")
	if code, body := curl(t, nil, base+"/healthz"); code != "200" {
		t.Fatalf("healthz: %s %s", code, body)
	}
	if code, body := curl(t, nil, base+"/v1/namespaces"); code != "401" || !strings.Contains(body, "Unauthenticated") {
		t.Fatalf("anonymous list: %s %s", code, body)
	}
	// curl --aws-sigv4. curl before 8.x does not send x-amz-content-sha256,
	// which S3 signing needs; given one, every version signs it and uses it
	// as the payload hash.
	sig := []string{"--aws-sigv4", "aws:amz:us-east-1:s3", "--user", keyA.AccessKeyID + ":" + keyA.Secret,
		"-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"}
	code, body := curl(t, []byte("from curl"), append(sig, "-X", "PUT", "-H", "Content-Type: application/octet-stream",
		"--data-binary", "@-", base+"/v1/namespaces/a/blocks/0000000000000002")...)
	if code != "201" {
		t.Fatalf("curl sigv4 put: %s %s", code, body)
	}
	if code, body := curl(t, nil, append(sig, base+"/v1/namespaces/a/blocks/0000000000000002")...); code != "200" || body != "from curl" {
		t.Fatalf("curl sigv4 get: %s %q", code, body)
	}
	if code, body := curl(t, nil, append(sig, base+"/v1/namespaces/b/blocks/0000000000000001")...); code != "403" {
		t.Fatalf("curl sigv4 get b: %s %s", code, body)
	}
	// Bearer.
	bearer := []string{"-H", "Authorization: Bearer " + keyA.AccessKeyID + ":" + keyA.Secret}
	if code, body := curl(t, nil, append(bearer, base+"/v1/namespaces/a/blocks/0000000000000002")...); code != "200" || body != "from curl" {
		t.Fatalf("curl bearer get: %s %q", code, body)
	}
	if code, body := curl(t, nil, append(bearer, "-X", "POST", "-H", "Content-Type: application/json",
		"-d", `{"hashes":["0000000000000001"]}`, base+"/v1/namespaces/b/lookup")...); code != "403" {
		t.Fatalf("curl bearer lookup b: %s %s", code, body)
	}
}
