package httpapi

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block/blocktest"
)

// fakeSyncs counts syncTier.SyncRead calls (tests here run one at a time).
var fakeSyncs atomic.Int64

// syncTier is the tests' in-memory tier made a ctxstore.ReadSyncer, as a
// cluster backend is.
type syncTier struct{ *blocktest.Tier }

// SyncRead counts the sync.
func (syncTier) SyncRead(context.Context) error {
	fakeSyncs.Add(1)
	return nil
}

var _ ctxstore.ReadSyncer = syncTier{}

func TestReadLevelHeader(t *testing.T) {
	e := newEnv(t, nil)
	const h1, h2 = "00000000000000a1", "00000000000000a2"
	for _, h := range []string{h1, h2} {
		if st, body := e.put(h, []byte("kv block "+h), nil); st != http.StatusCreated {
			t.Fatalf("put: %d %s", st, body)
		}
	}
	blk := "/v1/namespaces/default/blocks/" + h1
	hashes := `{"hashes":["` + h1 + `","` + h2 + `"]}`
	cases := []struct {
		name, method, path, body, level string
		wantStatus                      int
		wantSyncs                       int64
	}{
		{"get, no header", "GET", blk, "", "", 200, 0},
		{"get, local", "GET", blk, "", "local", 200, 0},
		{"get", "GET", blk, "", "linearizable", 200, 1},
		{"head", "HEAD", blk, "", "linearizable", 200, 1},
		{"lookup", "POST", "/v1/namespaces/default/lookup", hashes, "linearizable", 200, 1},
		{"batch exists", "POST", "/v1/namespaces/default/batch/exists", hashes, "linearizable", 200, 1},
		{"batch get", "POST", "/v1/namespaces/default/batch/get", hashes, "linearizable", 200, 1},
		{"a put ignores it", "PUT", blk, "kv block " + h1, "linearizable", 201, 0},
		{"unknown level", "GET", blk, "", "strong", 400, 0},
		{"unknown level on a put", "PUT", blk, "kv block " + h1, "strong", 400, 0},
		{"unknown level on a lookup", "POST", "/v1/namespaces/default/lookup", hashes, "strong", 400, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string]string{"Content-Type": "application/json"}
			if tc.level != "" {
				hdr["X-Ctxtier-Read"] = tc.level
			}
			before := fakeSyncs.Load()
			st, rh, body := e.do(tc.method, tc.path, hdr, strings.NewReader(tc.body))
			if tc.wantStatus == 400 {
				wantError(t, st, rh, body, 400, "InvalidArgument")
			} else if st/100 != 2 {
				t.Fatalf("status %d: %s", st, body)
			}
			if got := fakeSyncs.Load() - before; got != tc.wantSyncs {
				t.Fatalf("%d syncs, want %d", got, tc.wantSyncs)
			}
		})
	}
}
