package nvme

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TestNVMeQuota: a namespace over its quota evicts its own blocks (unread
// before read ones, oldest first, never pinned ones), each handed to
// OnEvict with its bytes; other namespaces keep every block; a block above
// the quota, or a namespace whose blocks are all pinned, gets
// ErrQuotaExceeded; the accounts survive a reopen (rebuilt from the index).
func TestNVMeQuota(t *testing.T) {
	const bs = 16 << 10
	tests := []struct {
		name      string
		quota     int64
		aPuts     int
		aSize     int
		pin       bool
		readFirst bool // read a/0 before the flood: it outlives unread blocks
		wantErrAt int
		wantKept  []uint64
		wantGone  []uint64
	}{
		{name: "flood", quota: 4 * bs, aPuts: 12, aSize: bs, wantErrAt: -1, wantKept: []uint64{8, 9, 10, 11}, wantGone: []uint64{0, 1, 7}},
		{name: "read block kept longer", quota: 4 * bs, aPuts: 6, aSize: bs, readFirst: true, wantErrAt: -1, wantKept: []uint64{0, 3, 4, 5}, wantGone: []uint64{1, 2}},
		{name: "block above quota", quota: bs - 1, aPuts: 1, aSize: bs, wantErrAt: 0},
		{name: "all pinned", quota: 2 * bs, aPuts: 3, aSize: bs, pin: true, wantErrAt: 2, wantKept: []uint64{0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig(dir)
			var mu sync.Mutex
			handed := map[block.Key][]byte{}
			cfg.OnEvict = func(k block.Key, data []byte, _ uint32) {
				mu.Lock()
				handed[k] = append([]byte(nil), data...)
				mu.Unlock()
			}
			cfg.Quota = func(ns string) int64 {
				if ns == "a" {
					return tt.quota
				}
				return 0
			}
			tr := open(t, cfg)
			for i := range 8 {
				put(t, tr, block.NewKey("b", uint64(i)), payload(uint64(100+i), bs), block.PutOptions{})
			}
			ctx := context.Background()
			for i := range tt.aPuts {
				k := block.NewKey("a", uint64(i))
				data := payload(uint64(i), tt.aSize)
				opts := block.PutOptions{}
				if tt.pin {
					opts.PinTTL = time.Hour
				}
				err := tr.Put(ctx, k, data, block.Checksum(data), opts)
				if i == tt.wantErrAt {
					if !errors.Is(err, block.ErrQuotaExceeded) {
						t.Fatalf("put %d: %v, want ErrQuotaExceeded", i, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("put %d: %v", i, err)
				}
				if i == 0 && tt.readFirst {
					ref, err := tr.Get(ctx, k, block.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					ref.Release()
				}
				if got := tr.NamespaceBytes()["a"]; got > tt.quota {
					t.Fatalf("after put %d a holds %d bytes, quota %d", i, got, tt.quota)
				}
			}
			for i := range 8 {
				mustGet(t, tr, block.NewKey("b", uint64(i)), payload(uint64(100+i), bs))
			}
			for _, i := range tt.wantKept {
				mustGet(t, tr, block.NewKey("a", i), payload(i, tt.aSize))
			}
			for _, i := range tt.wantGone {
				k := block.NewKey("a", i)
				if tr.Contains(k) {
					t.Fatalf("a/%d still held over the quota", i)
				}
				mu.Lock()
				got, ok := handed[k]
				mu.Unlock()
				if !ok || string(got) != string(payload(i, tt.aSize)) {
					t.Fatalf("a/%d was not handed to the next tier with its bytes", i)
				}
			}
			mu.Lock()
			for k := range handed {
				if k.Namespace != "a" {
					t.Fatalf("%s evicted for a's quota", k)
				}
			}
			mu.Unlock()
			before := tr.NamespaceBytes()
			if before["b"] != 8*bs {
				t.Fatalf("b accounted %d bytes, want %d", before["b"], 8*bs)
			}
			st := tr.Stats()
			if tt.wantErrAt >= 0 && st.QuotaRefused == 0 {
				t.Fatal("a refused put was not counted")
			}
			if len(tt.wantGone) > 0 && st.QuotaEvictions < uint64(len(tt.wantGone)) {
				t.Fatalf("QuotaEvictions %d, want >= %d", st.QuotaEvictions, len(tt.wantGone))
			}
			if err := tr.Close(); err != nil {
				t.Fatal(err)
			}
			tr = open(t, cfg)
			defer tr.Close()
			after := tr.NamespaceBytes()
			if after["a"] != before["a"] || after["b"] != before["b"] {
				t.Fatalf("accounts after reopen %v, before %v", after, before)
			}
		})
	}
}

// TestNVMeTrimNamespace: a lowered quota is reached without a put, at most
// budget bytes per call, by handing the namespace's own least valuable
// unpinned blocks to OnEvict; other namespaces keep every block.
func TestNVMeTrimNamespace(t *testing.T) {
	const bs = 16 << 10
	tests := []struct {
		name   string
		limit  int64
		pinned int
		want   []int64 // a's bytes after each call
	}{
		{"lowered", 3 * bs, 0, []int64{8 * bs, 6 * bs, 4 * bs, 3 * bs, 3 * bs}},
		{"under the limit", 12 * bs, 0, []int64{10 * bs}},
		{"pinned blocks stay", 0, 7, []int64{8 * bs, 7 * bs, 7 * bs}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			var mu sync.Mutex
			handed := map[block.Key]bool{}
			cfg.OnEvict = func(k block.Key, _ []byte, _ uint32) {
				mu.Lock()
				handed[k] = true
				mu.Unlock()
			}
			tr := open(t, cfg)
			for i := range 4 {
				put(t, tr, block.NewKey("b", uint64(i)), payload(uint64(100+i), bs), block.PutOptions{})
			}
			for i := range 10 {
				opts := block.PutOptions{}
				if i < tt.pinned {
					opts.PinTTL = time.Hour
				}
				put(t, tr, block.NewKey("a", uint64(i)), payload(uint64(i), bs), opts)
			}
			for call, want := range tt.want {
				if _, err := tr.TrimNamespace(context.Background(), "a", tt.limit, 2*bs); err != nil {
					t.Fatal(err)
				}
				if got := tr.NamespaceBytes()["a"]; got != want {
					t.Fatalf("call %d: a holds %d bytes, want %d", call, got, want)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if want := 10 - int(tt.want[len(tt.want)-1]/bs); len(handed) != want {
				t.Fatalf("%d blocks handed on, want %d", len(handed), want)
			}
			for k := range handed {
				if k.Namespace != "a" || tr.Contains(k) || k.Hash < uint64(tt.pinned) {
					t.Fatalf("evicted %s (pinned below %d)", k, tt.pinned)
				}
			}
			if got := tr.NamespaceBytes()["b"]; got != 4*bs {
				t.Fatalf("b holds %d bytes, want %d", got, 4*bs)
			}
		})
	}
}
