package native_test

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/blocktest"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/native"
	"github.com/ctxtier/ctxtier/gateway/native/nativetest"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
)

var (
	keyA   = credential.Credential{AccessKeyID: "CTXAAAAAAAAAAAAAAAAA", Secret: "secret-a-0123456789", Namespaces: []string{"a"}}
	keyAll = credential.Credential{AccessKeyID: "CTXALLALLALLALLALLAL", Secret: "secret-all-0123456789", Namespaces: []string{"*"}}
)

// keyring is a Lookuper whose keys can be revoked mid-test.
type keyring struct {
	mu   sync.Mutex
	keys credential.Static
}

func (k *keyring) Lookup(id string) (credential.Credential, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys.Lookup(id)
}

func (k *keyring) revoke(id string) {
	k.mu.Lock()
	delete(k.keys, id)
	k.mu.Unlock()
}

// startAuth serves namespaces a and b with authentication required; block 1
// is stored in both.
func startAuth(t *testing.T) (*nativetest.Server, *keyring) {
	t.Helper()
	ring := &keyring{keys: credential.Static{keyA.AccessKeyID: keyA, keyAll.AccessKeyID: keyAll}}
	srv, err := nativetest.StartWithOptions(t, smallConfig(), blocktest.New(), []native.Option{native.WithAuth(ring)},
		block.Namespace{Name: "a"}, block.Namespace{Name: "b"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"a", "b"} {
		if err := srv.Store.Put(t.Context(), block.NewKey(ns, 1), []byte("block of "+ns), block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return srv, ring
}

// dialKey completes a version-2 handshake with c's credentials.
func dialKey(t *testing.T, addr string, c credential.Credential) *raw {
	t.Helper()
	r, rep := dialHello(t, addr, wire.Version)
	if rep.Code != errcode.OK || rep.Version != wire.Version {
		t.Fatalf("hello reply %+v", rep)
	}
	r.authenticateWith(wire.Auth{AccessKeyID: c.AccessKeyID}, c.Secret, errcode.OK)
	return r
}

func TestAuthHandshake(t *testing.T) {
	srv, _ := startAuth(t)

	// Version 1 carries no credentials: refused.
	r, rep := dialHello(t, srv.Addr, wire.Version1)
	if rep.Code != errcode.Unauthenticated {
		t.Fatalf("v1 hello reply %+v", rep)
	}
	r.closed()

	tests := []struct {
		name   string
		id     string
		secret string
	}{
		{"anonymous", "", ""},
		{"unknown key", "CTXNOSUCHKEYXXXXXXXX", keyA.Secret},
		{"wrong secret", keyA.AccessKeyID, keyAll.Secret},
		{"no proof", keyA.AccessKeyID, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, rep := dialHello(t, srv.Addr, wire.Version)
			if rep.Code != errcode.OK {
				t.Fatalf("hello reply %+v", rep)
			}
			ch := r.authenticateWith(wire.Auth{AccessKeyID: tc.id}, tc.secret, errcode.Unauthenticated)
			if !ch.AuthRequired() {
				t.Fatal("challenge does not say credentials are required")
			}
			r.closed()
		})
	}

	// A proof for one nonce does not open another connection.
	r1, _ := dialHello(t, srv.Addr, wire.Version)
	ch1 := r1.authenticateWith(wire.Auth{AccessKeyID: keyA.AccessKeyID}, keyA.Secret, errcode.OK)
	r2, _ := dialHello(t, srv.Addr, wire.Version)
	replay := wire.Auth{AccessKeyID: keyA.AccessKeyID, Proof: wire.AuthProof(keyA.Secret, ch1.Nonce, keyA.AccessKeyID)}
	if ch2 := r2.authenticateWith(replay, "", errcode.Unauthenticated); ch2.Nonce == ch1.Nonce {
		t.Fatal("nonce reused")
	}
	r2.closed()

	// Authenticated: ping works.
	r = dialKey(t, srv.Addr, keyA)
	r.send(frame(wire.OpPing, 1, 0, nil))
	if resp := r.recv(); resp.Code != errcode.OK {
		t.Fatalf("ping %+v", resp)
	}
}

// nsFrames builds one request frame of every namespaced opcode for ns.
func nsFrames(ns string) map[string][]byte {
	k1, k2 := block.NewKey(ns, 1), block.NewKey(ns, 2)
	data := []byte("new block")
	pin := wire.AppendNamespace(nil, ns)
	pin = append(pin, 0x60, 0xea, 0, 0, 0, 0, 0, 0) // 60000 ms
	pin = wire.AppendKey(pin, k1)
	return map[string][]byte{
		"put":    frame(wire.OpPut, 10, 1, putBody(ns, k2, data, block.Checksum(data))),
		"get":    frame(wire.OpGet, 11, 2, keyBody(ns, k1, k2)),
		"exists": frame(wire.OpExists, 12, 2, keyBody(ns, k1, k2)),
		"lookup": frame(wire.OpLookup, 13, 2, keyBody(ns, k1, k2)),
		"delete": frame(wire.OpDelete, 14, 1, keyBody(ns, k2)),
		"pin":    frame(wire.OpPin, 15, 1, pin),
	}
}

func TestAuthNamespaceIsolation(t *testing.T) {
	srv, _ := startAuth(t)
	r := dialKey(t, srv.Addr, keyA)
	all := dialKey(t, srv.Addr, keyAll)
	for _, op := range []string{"put", "get", "exists", "lookup", "pin", "delete"} {
		t.Run(op, func(t *testing.T) {
			r.send(nsFrames("a")[op])
			if resp := r.recv(); resp.Code != errcode.OK {
				t.Fatalf("own namespace: %+v", resp)
			}
			r.send(nsFrames("b")[op])
			inB := r.recv()
			r.send(nsFrames("z")[op]) // no such namespace
			inZ := r.recv()
			// LOOKUP is denied for the request, the batch opcodes item by item.
			for _, resp := range []*wire.Response{inB, inZ} {
				if op == "lookup" {
					if resp.Code != errcode.PermissionDenied {
						t.Fatalf("lookup code %v, want PermissionDenied", resp.Code)
					}
					continue
				}
				if resp.Code != errcode.OK || len(resp.Items) == 0 {
					t.Fatalf("%+v, want per-item PermissionDenied", resp)
				}
				for _, it := range resp.Items {
					if it.Code != errcode.PermissionDenied {
						t.Fatalf("item %+v, want PermissionDenied", it)
					}
				}
			}
			if inB.ID != inZ.ID || inB.Count != inZ.Count || len(inB.Items) != len(inZ.Items) ||
				strings.ReplaceAll(inZ.Message, `"z"`, `"b"`) != inB.Message {
				t.Fatalf("existing and missing namespaces answer differently:\n%+v\n%+v", inB, inZ)
			}
			for i := range inB.Items {
				if inB.Items[i].Code != inZ.Items[i].Code || strings.ReplaceAll(inZ.Items[i].Message, `"z"`, `"b"`) != inB.Items[i].Message {
					t.Fatalf("item %d differs: %+v / %+v", i, inB.Items[i], inZ.Items[i])
				}
			}
			all.send(nsFrames("b")[op])
			if resp := all.recv(); resp.Code != errcode.OK {
				t.Fatalf("* key in b: %+v", resp)
			}
		})
	}
	// b's block 1 is untouched by key A's attempts.
	ref, err := srv.Store.Get(t.Context(), block.NewKey("b", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Release()
	if !bytes.Equal(ref.Data, []byte("block of b")) {
		t.Fatalf("b's block is %q", ref.Data)
	}
}

// TestAuthRevocation: a revoked key's open connection is refused on its next request.
func TestAuthRevocation(t *testing.T) {
	srv, ring := startAuth(t)
	r := dialKey(t, srv.Addr, keyA)
	r.send(nsFrames("a")["exists"])
	if resp := r.recv(); resp.Code != errcode.OK {
		t.Fatalf("before revoke: %+v", resp)
	}
	ring.revoke(keyA.AccessKeyID)
	r.send(nsFrames("a")["exists"])
	if resp := r.recv(); resp.Code != errcode.Unauthenticated {
		t.Fatalf("after revoke: %+v", resp)
	}
}

// TestAuthOffAcceptsBoth: without WithAuth, version 1 and anonymous or
// credentialed version 2 clients all reach every namespace.
func TestAuthOffAcceptsBoth(t *testing.T) {
	srv := startServer(t, smallConfig())
	v1, rep := dialHello(t, srv.Addr, wire.Version1)
	if rep.Code != errcode.OK || rep.Version != wire.Version1 {
		t.Fatalf("v1 reply %+v", rep)
	}
	anon, _ := dialRaw(t, srv.Addr, wire.Version)
	cred, _ := dialHello(t, srv.Addr, wire.Version)
	ch := cred.authenticateWith(wire.Auth{AccessKeyID: "CTXWHOEVER"}, "anything", errcode.OK)
	if ch.AuthRequired() {
		t.Fatal("challenge says credentials are required")
	}
	for i, r := range []*raw{v1, anon, cred} {
		r.send(frame(wire.OpExists, uint64(i), 1, keyBody("default", block.NewKey("default", 1))))
		if resp := r.recv(); resp.Code != errcode.OK {
			t.Fatalf("client %d: %+v", i, resp)
		}
	}
}
