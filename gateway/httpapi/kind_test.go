package httpapi

import (
	"encoding/json"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TestNamespaceKind: the HTTP API creates either kind of namespace, returns
// the kind, refuses an unknown one, and treats "block" as the default.
func TestNamespaceKind(t *testing.T) {
	e := newEnv(t, nil)
	tests := []struct {
		name, body string
		status     int
		want       block.Kind
	}{
		{"object", `{"name":"objs","kind":"object"}`, 201, block.KindObject},
		{"object again", `{"name":"objs","kind":"object"}`, 200, block.KindObject},
		{"block spelled out", `{"name":"blocks","kind":"block"}`, 201, ""},
		{"block by default", `{"name":"blocks"}`, 200, ""},
		{"kind cannot change", `{"name":"objs"}`, 409, ""},
		{"unknown kind", `{"name":"other","kind":"file"}`, 400, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, _, body := e.postJSON("/v1/namespaces", tt.body)
			if st != tt.status {
				t.Fatalf("status %d, want %d: %s", st, tt.status, body)
			}
			if st/100 != 2 {
				return
			}
			var ns block.Namespace
			if err := json.Unmarshal(body, &ns); err != nil || ns.Kind != tt.want {
				t.Fatalf("kind %q, want %q (%v): %s", ns.Kind, tt.want, err, body)
			}
		})
	}
}
