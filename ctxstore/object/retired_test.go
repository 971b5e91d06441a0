package object

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// replacingWriter collects what a GET writes and, on its first write (the
// reader holds the first Parallel blocks, the rest not yet fetched),
// replaces the object being read.
type replacingWriter struct {
	buf     bytes.Buffer
	replace func() error
	err     error
}

func (w *replacingWriter) Write(p []byte) (int, error) {
	if w.replace != nil {
		w.err, w.replace = w.replace(), nil
	}
	return w.buf.Write(p)
}

// retireRecords returns the retire records of namespace "obj": id → segments.
func retireRecords(t *testing.T, s *Store) map[string][]Segment {
	t.Helper()
	out := map[string][]Segment{}
	err := s.walk(context.Background(), "obj", func(key, value []byte) error {
		if id, ok := retireID(key); ok {
			_, segs, err := decodeRetire(value)
			if err != nil {
				return fmt.Errorf("retire record %q: %w", id, err)
			}
			out[id] = segs
		}
		return nil
	}, ctxstore.ReadLocal)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// segmentBlocks counts how many data blocks of segs are still stored.
func segmentBlocks(t *testing.T, s *Store, segs []Segment) int {
	t.Helper()
	n := 0
	for _, g := range segs {
		for i := range g.Blocks() {
			ok, err := s.blocks.Exists(context.Background(), dataKey("obj", g.Version, i), ctxstore.ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				n++
			}
		}
	}
	return n
}

// TestReplaceWhileStreaming: a GET of an object larger than the Parallel
// blocks it leases first, replaced while it streams, returns the whole old
// version with a grace; with RetireGrace 0 it is cut short.
func TestReplaceWhileStreaming(t *testing.T) {
	for _, tt := range []struct {
		name  string
		grace time.Duration
		whole bool
	}{
		{"immediate retirement cuts the reader short", 0, false},
		{"deferred retirement serves the old version whole", time.Hour, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(testObjectConfig(tt.grace), newBlockStore(t))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			size := 2*s.cfg.Parallel*int(s.cfg.ChunkSize) + 12345 // 9 data blocks, 4 leased first
			old, next := pattern(size, 1), pattern(size/2, 2)
			if _, err := s.PutObject(ctx, "obj", []byte("k"), bytes.NewReader(old), PutObjectOptions{}); err != nil {
				t.Fatal(err)
			}
			o, err := s.OpenObject(ctx, "obj", []byte("k"), ctxstore.ReadLocal)
			if err != nil {
				t.Fatal(err)
			}
			w := &replacingWriter{replace: func() error {
				_, err := s.PutObject(ctx, "obj", []byte("k"), bytes.NewReader(next), PutObjectOptions{})
				return err
			}}
			n, err := o.WriteRange(ctx, w, 0, o.Size, RangeOptions{})
			if w.err != nil {
				t.Fatalf("replace during the GET: %v", w.err)
			}
			if tt.whole {
				if err != nil || n != int64(size) || !bytes.Equal(w.buf.Bytes(), old) {
					t.Fatalf("GET: %d of %d bytes, equal %v, err %v", n, size, bytes.Equal(w.buf.Bytes(), old), err)
				}
			} else {
				if !errors.Is(err, ErrObjectChanged) || n >= int64(size) || !bytes.Equal(w.buf.Bytes(), old[:n]) {
					t.Fatalf("GET: %d of %d bytes, err %v; want a prefix of the old version and ErrObjectChanged", n, size, err)
				}
			}
			if got, _ := readAll(t, s, "k"); !bytes.Equal(got, next) {
				t.Fatalf("after the replace: %d bytes, want the new %d", len(got), len(next))
			}
		})
	}
}

// TestRetireAfterGrace: a replaced or deleted object's data blocks stay
// until the grace has passed, then a sweep deletes them and their record;
// a store opened again over the same blocks (a restart) sweeps them too.
func TestRetireAfterGrace(t *testing.T) {
	const grace = time.Minute
	for _, tt := range []struct {
		name    string
		delete  bool // DeleteObject, else a replace
		restart bool // sweep from a new Store over the same blocks
	}{
		{"replace", false, false},
		{"delete", true, false},
		{"replace, then restart", false, true},
		{"delete, then restart", true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bs := newBlockStore(t)
			s, err := New(testObjectConfig(grace), bs)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, err := s.PutObject(ctx, "obj", []byte("k"), bytes.NewReader(pattern(5<<20+7, 3)), PutObjectOptions{}); err != nil {
				t.Fatal(err)
			}
			o, err := s.OpenObject(ctx, "obj", []byte("k"), ctxstore.ReadLocal)
			if err != nil {
				t.Fatal(err)
			}
			oldSegs := o.m.Segments
			want := 0 // blocks left at the end
			if tt.delete {
				err = s.DeleteObject(ctx, "obj", []byte("k"))
			} else {
				_, err = s.PutObject(ctx, "obj", []byte("k"), bytes.NewReader(pattern(2<<20, 4)), PutObjectOptions{})
				want = 1 + 2 // the manifest and its two data blocks
			}
			if err != nil {
				t.Fatal(err)
			}
			recs := retireRecords(t, s)
			if len(recs) != 1 || segmentBlocks(t, s, oldSegs) != 6 {
				t.Fatalf("after retiring: %d retire records, %d of 6 old blocks", len(recs), segmentBlocks(t, s, oldSegs))
			}
			for _, segs := range recs {
				if !slices.Equal(segs, oldSegs) {
					t.Fatalf("retire record names %v, want %v", segs, oldSegs)
				}
			}
			if tt.restart {
				if s, err = New(testObjectConfig(grace), bs); err != nil {
					t.Fatal(err)
				}
			}
			// Before the grace has passed the sweep keeps them.
			if _, err := s.SweepUploads(ctx, "obj", 24*time.Hour); err != nil {
				t.Fatal(err)
			}
			if got := segmentBlocks(t, s, oldSegs); got != 6 || len(retireRecords(t, s)) != 1 {
				t.Fatalf("sweep before the grace: %d of 6 old blocks left, %d records", got, len(retireRecords(t, s)))
			}
			s.now = func() time.Time { return time.Now().Add(grace + time.Second) }
			if _, err := s.SweepUploads(ctx, "obj", 24*time.Hour); err != nil {
				t.Fatal(err)
			}
			if got := segmentBlocks(t, s, oldSegs); got != 0 || len(retireRecords(t, s)) != 0 {
				t.Fatalf("sweep after the grace: %d old blocks left, %d records", got, len(retireRecords(t, s)))
			}
			if got := blockCount(t, s, "obj"); got != want {
				t.Fatalf("%d blocks in the namespace, want %d", got, want)
			}
		})
	}
}

// TestRacingReplacesRetireOnce: of racing replaces of one key, each old
// version gets exactly one retire record, the current version none, and
// after the sweep only the current version's blocks are left.
func TestRacingReplacesRetireOnce(t *testing.T) {
	const grace = time.Minute
	for _, writers := range []int{2, 6} {
		t.Run(fmt.Sprint(writers, " writers"), func(t *testing.T) {
			s, err := New(testObjectConfig(grace), newBlockStore(t))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, err := s.PutObject(ctx, "obj", []byte("k"), bytes.NewReader(pattern(3<<20, 9)), PutObjectOptions{}); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make([]error, writers)
			for i := range writers {
				wg.Go(func() {
					_, errs[i] = s.PutObject(ctx, "obj", []byte("k"), bytes.NewReader(pattern(1<<20+i, byte(10+i))), PutObjectOptions{})
				})
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("writer %d: %v", i, err)
				}
			}
			cur, err := s.OpenObject(ctx, "obj", []byte("k"), ctxstore.ReadLocal)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[uint64]int{}
			for _, segs := range retireRecords(t, s) {
				for _, g := range segs {
					seen[g.Version]++
				}
			}
			if len(seen) != writers {
				t.Fatalf("%d versions retired, want %d (the first and all but the last writer's)", len(seen), writers)
			}
			for v, c := range seen {
				if c != 1 || v == cur.m.Segments[0].Version {
					t.Fatalf("version %x retired %d times (current %x)", v, c, cur.m.Segments[0].Version)
				}
			}
			s.now = func() time.Time { return time.Now().Add(grace + time.Second) }
			if _, err := s.SweepUploads(ctx, "obj", 24*time.Hour); err != nil {
				t.Fatal(err)
			}
			if got, want := blockCount(t, s, "obj"), 1+cur.m.Segments[0].Blocks(); got != want {
				t.Fatalf("%d blocks left after the sweep, want %d (the current version)", got, want)
			}
		})
	}
}

// slotHook is a tier that runs hook (once, disarmed first) right after a
// put into one of the slots keys, before the put returns to its writer.
type slotHook struct {
	block.Storage
	mu   sync.Mutex
	keys [2]block.Key
	hook func()
}

func (h *slotHook) Put(ctx context.Context, key block.Key, data []byte, sum uint32, opts block.PutOptions) error {
	err := h.Storage.Put(ctx, key, data, sum, opts)
	h.mu.Lock()
	run := h.hook
	if key != h.keys[0] && key != h.keys[1] {
		run = nil
	}
	if run != nil {
		h.hook = nil
	}
	h.mu.Unlock()
	if err == nil && run != nil {
		run()
	}
	return err
}

// TestSupersededWriterKeepsItsRetirement: writer A's new manifest is in,
// and before A reads the slots again writer B replaces it whole (B drops
// the old version as in the way, writes its own and retires A's). A then
// finds its record is not the winning one. It must not write its manifest
// again: that would make current a version B has already retired (its
// blocks deleted when the grace ends) and retire it a second time later.
// A counts as written, ordered before B.
func TestSupersededWriterKeepsItsRetirement(t *testing.T) {
	hook := &slotHook{}
	bs := newBlockStoreOver(t, func(st block.Storage) block.Storage {
		hook.Storage = st
		return hook
	})
	s, err := New(testObjectConfig(time.Minute), bs)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key := []byte("k")
	if _, err := s.PutObject(ctx, "obj", key, bytes.NewReader(pattern(2<<20, 1)), PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	n, err := bs.Namespace("obj")
	if err != nil {
		t.Fatal(err)
	}
	var errB error
	hook.mu.Lock()
	hook.keys = s.slotKeys(n, key)
	hook.hook = func() {
		_, errB = s.PutObject(ctx, "obj", key, bytes.NewReader(pattern(1<<20+7, 3)), PutObjectOptions{})
	}
	hook.mu.Unlock()
	if _, err := s.PutObject(ctx, "obj", key, bytes.NewReader(pattern(1<<20+5, 2)), PutObjectOptions{}); err != nil {
		t.Fatalf("writer A: %v", err)
	}
	if errB != nil {
		t.Fatalf("writer B: %v", errB)
	}
	hook.mu.Lock()
	missed := hook.hook != nil
	hook.mu.Unlock()
	if missed {
		t.Fatal("writer B never ran: the hook missed A's manifest")
	}
	cur, err := s.OpenObject(ctx, "obj", key, ctxstore.ReadLocal)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := cur.WriteRange(ctx, &buf, 0, cur.Size, RangeOptions{}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), pattern(1<<20+7, 3)) {
		t.Fatalf("the object holds %d bytes, not writer B's (the later write)", buf.Len())
	}
	seen := map[uint64]int{}
	for _, segs := range retireRecords(t, s) {
		for _, g := range segs {
			seen[g.Version]++
		}
	}
	if len(seen) != 2 {
		t.Fatalf("%d versions retired, want 2 (the first and writer A's)", len(seen))
	}
	for v, c := range seen {
		if c != 1 || v == cur.m.Segments[0].Version {
			t.Fatalf("version %x retired %d times (current %x)", v, c, cur.m.Segments[0].Version)
		}
	}
}

// TestSweepBeforeBucketDeletion: the sweep a bucket deletion runs (ttl 0)
// removes pending retire records and their blocks at once, whatever the
// grace, so the emptied namespace can be deleted.
func TestSweepBeforeBucketDeletion(t *testing.T) {
	s, err := New(testObjectConfig(time.Hour), newBlockStore(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, k := range []string{"a", "b", "a"} {
		if _, err := s.PutObject(ctx, "obj", []byte(k), bytes.NewReader(pattern(2<<20+i, byte(i))), PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"a", "b"} {
		if err := s.DeleteObject(ctx, "obj", []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(retireRecords(t, s)); got != 3 {
		t.Fatalf("%d retire records pending, want 3", got)
	}
	// Garbage under a retire record's key goes too.
	// (Written through the internal call: the key-value API refuses
	// reserved keys in an object namespace.)
	n, err := s.blocks.Namespace("obj")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.replace(ctx, n, retireKey("junk"), func(*record) ([]byte, time.Time, bool, error) {
		return []byte("not a retire record"), time.Time{}, true, nil
	}, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := s.blocks.DeleteNamespace(ctx, "obj"); !errors.Is(err, block.ErrNamespaceNotEmpty) {
		t.Fatalf("deleting the namespace with retirements pending: %v, want not empty", err)
	}
	if _, err := s.SweepUploads(ctx, "obj", 0); err != nil {
		t.Fatal(err)
	}
	if got := blockCount(t, s, "obj"); got != 0 {
		t.Fatalf("%d blocks left after the sweep", got)
	}
	if err := s.blocks.DeleteNamespace(ctx, "obj"); err != nil {
		t.Fatal(err)
	}
}

func TestRetireGraceValidate(t *testing.T) {
	for _, tt := range []struct {
		grace time.Duration
		ok    bool
	}{{0, true}, {time.Second, true}, {-time.Nanosecond, false}} {
		c := DefaultConfig()
		c.RetireGrace = tt.grace
		if err := c.Validate(); (err == nil) != tt.ok || (err != nil && !errors.Is(err, block.ErrInvalidArgument)) {
			t.Errorf("RetireGrace %v: %v", tt.grace, err)
		}
	}
}

func FuzzDecodeRetire(f *testing.F) {
	f.Add(encodeRetire(time.Unix(7, 0).UTC(), []Segment{{Version: 1, Size: 9 << 20, Chunk: 8 << 20}, {Version: 2, Size: 0, Chunk: 1}}))
	f.Add(encodeRetire(time.Time{}, nil))
	f.Add(append([]byte(retireMagic), manifest{Meta: Meta{ETag: `"x"`, Size: 1}, Segments: []Segment{{Version: 3, Size: 1, Chunk: 1}}}.encode()...))
	f.Add([]byte("CTXR\x01CTXM\x01\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		at, segs, err := decodeRetire(b)
		if err != nil {
			return
		}
		if len(segs) == 0 {
			t.Fatal("a retire record without segments decoded")
		}
		for _, g := range segs {
			if g.Chunk < 1 || g.Size < 0 || g.Blocks() > MaxChunksPerSegment {
				t.Fatalf("segment %+v outside the block-part space", g)
			}
		}
		at2, segs2, err := decodeRetire(encodeRetire(at, segs))
		if err != nil || !at2.Equal(at) || !slices.Equal(segs2, segs) {
			t.Fatalf("re-encode: %v\n%v %v\n%v %v", err, at, segs, at2, segs2)
		}
	})
}

// BenchmarkReplaceRetire times replacing a 1 MiB object (one data block)
// with the old version's blocks deleted at once (RetireGrace 0, the
// baseline) and with a retire record written instead (the deferred path),
// alternating the two in one run, and reports deferred/immediate as
// "ratio". The sweep that empties the deferred store runs off the clock.
func BenchmarkReplaceRetire(b *testing.B) {
	stores := make([]*Store, 2)
	for i, grace := range []time.Duration{0, time.Hour} {
		var err error
		if stores[i], err = New(testObjectConfig(grace), newBlockStore(b)); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	body := pattern(1<<20, 5)
	var took [2]time.Duration
	b.ResetTimer()
	for n := 0; b.Loop(); n++ {
		for i, s := range stores {
			start := time.Now()
			if _, err := s.PutObject(ctx, "obj", []byte("k"), bytes.NewReader(body), PutObjectOptions{}); err != nil {
				b.Fatal(err)
			}
			took[i] += time.Since(start)
		}
		if n%32 == 31 {
			b.StopTimer()
			if _, err := stores[1].SweepUploads(ctx, "obj", 0); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
	if took[0] > 0 {
		b.ReportMetric(float64(took[1])/float64(took[0]), "ratio")
	}
}
