package weights

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestStream: a checkpoint streamed from a real ctxd fills memory with the
// pushed bytes (every chunk delivered once, at its offset) and writes
// nothing to disk; a sink's error stops the stream and comes back wrapped.
func TestStream(t *testing.T) {
	n := startCtxd(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	src := t.TempDir()
	files := writeCheckpoint(t, src)
	c := n.client(t, func(c *Config) { c.Parallel = 3 })
	if _, err := c.Push(ctx, src, "stream/m", nil); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[string][]byte{}
	seen := map[string]map[int64]bool{}
	var prog Progress
	st, err := c.Stream(ctx, "stream/m", func(f File, off int64, b []byte) error {
		mu.Lock()
		defer mu.Unlock()
		if got[f.Path] == nil {
			got[f.Path], seen[f.Path] = make([]byte, f.Size), map[int64]bool{}
		}
		if seen[f.Path][off] {
			t.Errorf("%s: chunk at %d delivered twice", f.Path, off)
		}
		seen[f.Path][off] = true
		copy(got[f.Path][off:], b)
		return nil
	}, &prog)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for p, size := range files {
		total += int64(size)
		want, err := os.ReadFile(filepath.Join(src, p))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[p], want) {
			t.Errorf("%s: streamed bytes differ from pushed ones", p)
		}
	}
	if st.FilesFetched != 3 || st.BytesFetched != total || prog.Done.Load() != total || prog.Total.Load() != total {
		t.Errorf("stats %+v, progress %d/%d; want 3 files, %d bytes", st, prog.Done.Load(), prog.Total.Load(), total)
	}

	boom := errors.New("sink full")
	_, err = c.Stream(ctx, "stream/m", func(File, int64, []byte) error { return boom }, nil)
	if !errors.Is(err, boom) {
		t.Fatalf("sink error: got %v, want it wrapped", err)
	}
	if _, err := c.Stream(ctx, "stream/none", nil, nil); err == nil {
		t.Fatal("stream of a missing model succeeded")
	}
}
