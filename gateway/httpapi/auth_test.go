package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
)

// Test keys: A is scoped to namespace "a", all to "*".
var (
	keyA   = credential.Credential{AccessKeyID: "CTXAAAAAAAAAAAAAAAAA", Secret: "secret-a-0123456789", Namespaces: []string{"a"}}
	keyAll = credential.Credential{AccessKeyID: "CTXALLALLALLALLALLAL", Secret: "secret-all-0123456789", Namespaces: []string{"*"}}
)

func bearer(c credential.Credential) map[string]string {
	return map[string]string{"Authorization": "Bearer " + c.AccessKeyID + ":" + c.Secret}
}

// newAuthEnv serves with authentication required over keyA and keyAll, with
// namespaces "a" and "b", and block h1 stored in both.
func newAuthEnv(t *testing.T) *env {
	t.Helper()
	keys := credential.Static{keyA.AccessKeyID: keyA, keyAll.AccessKeyID: keyAll}
	e := newEnv(t, nil, WithAuth(keys, nil))
	ctx := context.Background()
	for _, ns := range []string{"a", "b"} {
		if err := e.srv.store.CreateNamespace(ctx, block.Namespace{Name: ns}); err != nil {
			t.Fatal(err)
		}
		k, _ := block.ParseObjectName(ns, h1)
		if err := e.srv.store.Put(ctx, k, []byte("block of "+ns), block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// nsRequest is one block-API request on a namespace ({ns} is replaced).
type nsRequest struct {
	name, method, path, ctype, body string
}

func nsRequests() []nsRequest {
	return []nsRequest{
		{"get", "GET", "/v1/namespaces/{ns}/blocks/" + h1, "", ""},
		{"get missing", "GET", "/v1/namespaces/{ns}/blocks/" + h2, "", ""},
		{"head", "HEAD", "/v1/namespaces/{ns}/blocks/" + h1, "", ""},
		{"put", "PUT", "/v1/namespaces/{ns}/blocks/" + h3, httpwire.ContentTypeBinary, "new block"},
		{"delete", "DELETE", "/v1/namespaces/{ns}/blocks/" + h2, "", ""},
		{"pin", "POST", "/v1/namespaces/{ns}/blocks/" + h1 + "/pin?ttl=60", "", ""},
		{"lookup", "POST", "/v1/namespaces/{ns}/lookup", jsonType, `{"hashes":["` + h1 + `"]}`},
		{"batch exists", "POST", "/v1/namespaces/{ns}/batch/exists", jsonType, `{"hashes":["` + h1 + `","` + h2 + `"]}`},
		{"batch get", "POST", "/v1/namespaces/{ns}/batch/get", jsonType, `{"hashes":["` + h1 + `"]}`},
		{"batch delete", "POST", "/v1/namespaces/{ns}/batch/delete", jsonType, `{"hashes":["` + h2 + `"]}`},
		{"batch put", "POST", "/v1/namespaces/{ns}/batch/put", httpwire.MixedContentType("b0undary"),
			"--b0undary\r\nX-Ctxtier-Hash: " + h3 + "\r\nContent-Type: application/octet-stream\r\n\r\nxyz\r\n--b0undary--\r\n"},
		{"namespace", "GET", "/v1/namespaces/{ns}", "", ""},
	}
}

func (e *env) send(rq nsRequest, ns string, hdr map[string]string) (int, http.Header, []byte) {
	e.t.Helper()
	h := map[string]string{}
	for k, v := range hdr {
		h[k] = v
	}
	if rq.ctype != "" {
		h["Content-Type"] = rq.ctype
	}
	return e.do(rq.method, strings.ReplaceAll(rq.path, "{ns}", ns), h, strings.NewReader(rq.body))
}

// TestAuthNamespaceIsolation: a key scoped to "a" works in "a" and gets the
// same 403 for the existing "b" as for a namespace that does not exist, for
// every block-API operation.
func TestAuthNamespaceIsolation(t *testing.T) {
	e := newAuthEnv(t)
	for _, rq := range nsRequests() {
		t.Run(rq.name, func(t *testing.T) {
			st, hdr, body := e.send(rq, "a", bearer(keyA))
			if st == 401 || st == 403 || hdr.Get(headerErrorCode) == "UnknownNamespace" {
				t.Fatalf("own namespace: %d %s %s", st, hdr.Get(headerErrorCode), body)
			}
			stB, hdrB, bodyB := e.send(rq, "b", bearer(keyA))
			wantError(t, stB, hdrB, bodyB, 403, "PermissionDenied")
			stN, hdrN, bodyN := e.send(rq, "z", bearer(keyA)) // no such namespace
			wantError(t, stN, hdrN, bodyN, 403, "PermissionDenied")
			if got, want := strings.ReplaceAll(string(bodyN), `\"z\"`, `\"b\"`), string(bodyB); got != want {
				t.Fatalf("existing and missing namespaces answer differently:\n%s\n%s", want, got)
			}
			for _, k := range []string{"Content-Type", "Content-Length", headerErrorCode} {
				if hdrB.Get(k) != hdrN.Get(k) {
					t.Fatalf("header %s: %q vs %q", k, hdrB.Get(k), hdrN.Get(k))
				}
			}
			// The "*" key reaches b.
			if st, hdr, body := e.send(rq, "b", bearer(keyAll)); st == 401 || st == 403 {
				t.Fatalf("* key in b: %d %s %s", st, hdr.Get(headerErrorCode), body)
			}
		})
	}
	// Nothing reached b's blocks through key A: b still has exactly its own.
	kb, _ := block.ParseObjectName("b", h1)
	if got := string(e.tier.Data(kb)); got != "block of b" {
		t.Fatalf("b's block is %q", got)
	}
}

func TestAuthNamespaceListAndCreate(t *testing.T) {
	e := newAuthEnv(t)
	names := func(hdr map[string]string) []string {
		st, _, body := e.do("GET", "/v1/namespaces", hdr, nil)
		var l httpwire.NamespaceList
		if st != 200 || json.Unmarshal(body, &l) != nil {
			t.Fatalf("list: %d %s", st, body)
		}
		var out []string
		for _, ns := range l.Namespaces {
			out = append(out, ns.Name)
		}
		return out
	}
	if got := names(bearer(keyA)); len(got) != 1 || got[0] != "a" {
		t.Fatalf("key A lists %v, want [a]", got)
	}
	if got := names(bearer(keyAll)); len(got) != 3 { // default, a, b
		t.Fatalf("* key lists %v", got)
	}
	create := func(hdr map[string]string, body string) (int, http.Header, []byte) {
		h := map[string]string{"Content-Type": jsonType}
		for k, v := range hdr {
			h[k] = v
		}
		return e.do("POST", "/v1/namespaces", h, strings.NewReader(body))
	}
	// Creating b (exists) and c (does not) with key A: the same 403.
	stB, hdrB, bodyB := create(bearer(keyA), `{"name":"b","block_tokens":32}`)
	wantError(t, stB, hdrB, bodyB, 403, "PermissionDenied")
	stC, hdrC, bodyC := create(bearer(keyA), `{"name":"c","block_tokens":32}`)
	wantError(t, stC, hdrC, bodyC, 403, "PermissionDenied")
	if strings.ReplaceAll(string(bodyC), `\"c\"`, `\"b\"`) != string(bodyB) {
		t.Fatalf("create answers differ: %s / %s", bodyB, bodyC)
	}
	if st, _, body := create(bearer(keyAll), `{"name":"c"}`); st != 201 {
		t.Fatalf("* key create: %d %s", st, body)
	}
}

func TestAuthCredentialFailures(t *testing.T) {
	e := newAuthEnv(t)
	path := "/v1/namespaces/a/blocks/" + h1
	tests := []struct {
		name string
		hdr  map[string]string
	}{
		{"missing", nil},
		{"unknown key", map[string]string{"Authorization": "Bearer CTXNOSUCHKEYXXXXXXXX:" + keyA.Secret}},
		{"wrong secret", map[string]string{"Authorization": "Bearer " + keyA.AccessKeyID + ":" + keyAll.Secret}},
		{"secret prefix", map[string]string{"Authorization": "Bearer " + keyA.AccessKeyID + ":" + keyA.Secret[:5]}},
		{"no colon", map[string]string{"Authorization": "Bearer " + keyA.AccessKeyID}},
		{"empty bearer", map[string]string{"Authorization": "Bearer "}},
		{"basic", map[string]string{"Authorization": "Basic YTpi"}},
		{"garbage sigv4", map[string]string{"Authorization": "AWS4-HMAC-SHA256 Credential=x"}},
		{"sigv2", map[string]string{"Authorization": "AWS " + keyA.AccessKeyID + ":abc"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, m := range []string{"GET", "HEAD"} {
				st, hdr, body := e.do(m, path, tc.hdr, nil)
				wantError(t, st, hdr, body, 401, "Unauthenticated")
				if hdr.Get("WWW-Authenticate") == "" {
					t.Fatal("401 without WWW-Authenticate")
				}
			}
			// Unauthenticated requests to another namespace answer the same 401.
			st, hdr, body := e.do("GET", "/v1/namespaces/b/blocks/"+h1, tc.hdr, nil)
			wantError(t, st, hdr, body, 401, "Unauthenticated")
		})
	}
	// Health, readiness and metrics stay open.
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if st, _, body := e.do("GET", p, nil, nil); st != 200 {
			t.Fatalf("%s: %d %s", p, st, body)
		}
	}
}

// signV4 signs req like `curl --aws-sigv4` or an S3 SDK would.
func signV4(t *testing.T, req *http.Request, c credential.Credential, payload string, at time.Time) {
	t.Helper()
	req.Header.Set("X-Amz-Content-Sha256", payload)
	s := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	if err := s.SignHTTP(context.Background(), aws.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.Secret}, req, payload, "s3", "us-east-1", at); err != nil {
		t.Fatal(err)
	}
}

func (e *env) doReq(req *http.Request) (int, http.Header, []byte) {
	e.t.Helper()
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func TestAuthSigV4(t *testing.T) {
	e := newAuthEnv(t)
	sha := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	put := func(ns, hash string, data []byte, c credential.Credential, payload string, at time.Time) (int, http.Header, []byte) {
		req, _ := http.NewRequest("PUT", e.ts.URL+"/v1/namespaces/"+ns+"/blocks/"+hash, bytes.NewReader(data))
		signV4(t, req, c, payload, at)
		return e.doReq(req)
	}
	data := []byte("signed block")
	if st, _, body := put("a", h2, data, keyA, "UNSIGNED-PAYLOAD", time.Now()); st != 201 {
		t.Fatalf("unsigned payload put: %d %s", st, body)
	}
	if st, _, body := put("a", h3, data, keyA, sha(data), time.Now()); st != 201 {
		t.Fatalf("hashed payload put: %d %s", st, body)
	}
	// A body that does not match its signed hash stores nothing.
	st, hdr, body := put("a", "0000000000000004", data, keyA, sha([]byte("other")), time.Now())
	wantError(t, st, hdr, body, 400, "ChecksumMismatch")
	if k, _ := block.ParseObjectName("a", "0000000000000004"); e.tier.Data(k) != nil {
		t.Fatal("block stored despite a wrong payload hash")
	}
	// Wrong secret, unknown key, skewed clock: 401.
	bad := keyA
	bad.Secret = "wrong"
	st, hdr, body = put("a", h2, data, bad, "UNSIGNED-PAYLOAD", time.Now())
	wantError(t, st, hdr, body, 401, "Unauthenticated")
	unknown := keyA
	unknown.AccessKeyID = "CTXNOSUCHKEYXXXXXXXX"
	st, hdr, body = put("a", h2, data, unknown, "UNSIGNED-PAYLOAD", time.Now())
	wantError(t, st, hdr, body, 401, "Unauthenticated")
	st, hdr, body = put("a", h2, data, keyA, "UNSIGNED-PAYLOAD", time.Now().Add(-time.Hour))
	wantError(t, st, hdr, body, 401, "Unauthenticated")
	// Scope applies to SigV4 too.
	st, hdr, body = put("b", h2, data, keyA, "UNSIGNED-PAYLOAD", time.Now())
	wantError(t, st, hdr, body, 403, "PermissionDenied")
	// aws-chunked bodies, with or without trailers, are refused with a clear error.
	for _, mode := range []string{"STREAMING-AWS4-HMAC-SHA256-PAYLOAD", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER", "STREAMING-UNSIGNED-PAYLOAD-TRAILER"} {
		st, hdr, body = put("a", h2, data, keyA, mode, time.Now())
		wantError(t, st, hdr, body, 400, "InvalidArgument")
		if !strings.Contains(string(body), "aws-chunked") {
			t.Fatalf("%s: streaming refusal unclear: %s", mode, body)
		}
	}

	// GET signed with the empty-body hash, and a presigned URL.
	req, _ := http.NewRequest("GET", e.ts.URL+"/v1/namespaces/a/blocks/"+h3, nil)
	signV4(t, req, keyA, sha(nil), time.Now())
	if st, _, got := e.doReq(req); st != 200 || !bytes.Equal(got, data) {
		t.Fatalf("signed get: %d %q", st, got)
	}
	preq, _ := http.NewRequest("GET", e.ts.URL+"/v1/namespaces/a/blocks/"+h3, nil)
	s := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	q := preq.URL.Query()
	q.Set("X-Amz-Expires", "300")
	preq.URL.RawQuery = q.Encode()
	u, _, err := s.PresignHTTP(context.Background(), aws.Credentials{AccessKeyID: keyA.AccessKeyID, SecretAccessKey: keyA.Secret}, preq, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if st, _, got := e.do("GET", strings.TrimPrefix(u, e.ts.URL), nil, nil); st != 200 || !bytes.Equal(got, data) {
		t.Fatalf("presigned get: %d %q", st, got)
	}
}

func TestAuthMountedNeedsScopeAll(t *testing.T) {
	keys := credential.Static{keyA.AccessKeyID: keyA, keyAll.AccessKeyID: keyAll}
	e := newEnv(t, nil, WithAuth(keys, nil))
	e.srv.Mount("GET /v1/extra", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
	st, hdr, body := e.do("GET", "/v1/extra", nil, nil)
	wantError(t, st, hdr, body, 401, "Unauthenticated")
	st, hdr, body = e.do("GET", "/v1/extra", bearer(keyA), nil)
	wantError(t, st, hdr, body, 403, "PermissionDenied")
	if st, _, body := e.do("GET", "/v1/extra", bearer(keyAll), nil); st != 204 {
		t.Fatalf("* key: %d %s", st, body)
	}
}

// A surface mounted with MountOwnAuth gets every request, credentials or
// not: it checks its own (the cluster API's secret).
func TestAuthMountOwnAuth(t *testing.T) {
	keys := credential.Static{keyA.AccessKeyID: keyA}
	e := newEnv(t, nil, WithAuth(keys, nil))
	e.srv.MountOwnAuth("GET /v1/own", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Own") != "yes" {
			w.WriteHeader(401)
			return
		}
		w.WriteHeader(204)
	}))
	if st, _, body := e.do("GET", "/v1/own", map[string]string{"X-Own": "yes"}, nil); st != 204 {
		t.Fatalf("own credentials, no access key: %d %s", st, body)
	}
	if st, _, _ := e.do("GET", "/v1/own", bearer(keyA), nil); st != 401 {
		t.Fatalf("an access key is not the surface's credential: %d", st)
	}
	defer func() {
		if recover() == nil {
			t.Error("MountOwnAuth outside /v1/ did not panic")
		}
	}()
	e.srv.MountOwnAuth("GET /admin", http.NotFoundHandler())
}

// TestAuthOff: without WithAuth nothing is checked, credentials or not.
func TestAuthOff(t *testing.T) {
	e := newEnv(t, nil)
	for _, hdr := range []map[string]string{nil, bearer(keyA), {"Authorization": "Bearer junk"}} {
		if st, body := e.put(h1, []byte("x"), hdr); st != 201 && st != 200 {
			t.Fatalf("put: %d %s", st, body)
		}
		if st, _, body := e.do("GET", "/v1/namespaces", hdr, nil); st != 200 || !strings.Contains(string(body), `"default"`) {
			t.Fatalf("list: %d %s", st, body)
		}
	}
}

// BenchmarkAuthGuard measures the per-request cost of authentication on the
// server (no network): off, Bearer, and SigV4 verification.
func BenchmarkAuthGuard(b *testing.B) {
	keys := credential.Static{keyA.AccessKeyID: keyA}
	off := New(DefaultConfig(), nil, nil, nil)
	on := New(DefaultConfig(), nil, nil, nil, WithAuth(keys, nil))
	mk := func() *http.Request {
		r, _ := http.NewRequest("GET", "http://127.0.0.1:7401/v1/namespaces/a/blocks/"+h1, nil)
		r.SetPathValue("ns", "a")
		return r
	}
	signed := mk()
	s := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	signed.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	if err := s.SignHTTP(context.Background(), aws.Credentials{AccessKeyID: keyA.AccessKeyID, SecretAccessKey: keyA.Secret}, signed, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now()); err != nil {
		b.Fatal(err)
	}
	bearerReq := mk()
	bearerReq.Header.Set("Authorization", "Bearer "+keyA.AccessKeyID+":"+keyA.Secret)
	for _, tc := range []struct {
		name string
		s    *Server
		r    *http.Request
	}{{"off", off, mk()}, {"bearer", on, bearerReq}, {"sigv4", on, signed}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := tc.s.guard(tc.r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
