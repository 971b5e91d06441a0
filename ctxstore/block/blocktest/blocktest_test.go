package blocktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

var _ block.Storage = (*Tier)(nil)

func key(h uint64) block.Key { return block.NewKey("ns", h) }

func data(h uint64) []byte { return []byte(fmt.Sprintf("block %d", h)) }

func put(t *testing.T, tr *Tier, hs ...uint64) {
	t.Helper()
	for _, h := range hs {
		if err := tr.Put(context.Background(), key(h), data(h), block.Checksum(data(h)), block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPutGetLeases(t *testing.T) {
	ctx := context.Background()
	tr := New()
	put(t, tr, 1, 1) // the same bytes again succeed
	if err := tr.Put(ctx, key(1), []byte("other"), block.Checksum([]byte("other")), block.PutOptions{}); !errors.Is(err, block.ErrConflict) {
		t.Fatalf("put of other bytes: %v, want ErrConflict", err)
	}
	ref, err := tr.Get(ctx, key(1), block.GetOptions{ReaderVerifies: true})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ref.Data, data(1)) || ref.Sum != block.Checksum(data(1)) || ref.Tier != block.TierDRAM {
		t.Fatalf("got %q sum %x", ref.Data, ref.Sum)
	}
	if _, _, ok := ref.FileRange(); !ok {
		t.Error("the ref does not say where its bytes lie in the memory file")
	}
	if n := tr.OpenLeases(); n != 1 {
		t.Fatalf("%d open leases, want 1", n)
	}
	ref.Release()
	if n := tr.WaitLeases(time.Second); n != 0 {
		t.Fatalf("%d open leases after release", n)
	}
	if _, err := tr.Get(ctx, key(2), block.GetOptions{}); !errors.Is(err, block.ErrNotFound) {
		t.Fatalf("get of an absent block: %v", err)
	}
	if got := tr.TakeReaderMarks(); !slices.Equal(got, []bool{true, false}) {
		t.Fatalf("reader marks %v, want [true false]", got)
	}
	if got := tr.TakeReaderMarks(); got != nil {
		t.Fatalf("reader marks %v after taking them", got)
	}
	if c := tr.Counts(); c.Gets != 2 || c.Puts != 3 {
		t.Fatalf("counts %+v, want 2 gets and 3 puts", c)
	}
}

func TestList(t *testing.T) {
	tr := New()
	put(t, tr, 0x30, 0x10, 0x20, 0x1f)
	other := []byte("x")
	if err := tr.Put(context.Background(), block.NewKey("other", 0x11), other, block.Checksum(other), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name          string
		prefix, after string
		limit         int
		want          []uint64
	}{
		{"all, in name order", "", "", 0, []uint64{0x10, 0x1f, 0x20, 0x30}},
		{"limit", "", "", 2, []uint64{0x10, 0x1f}},
		{"after", "", key(0x1f).ObjectName(), 0, []uint64{0x20, 0x30}},
		{"prefix", "00000000000000" + "1", "", 0, []uint64{0x10, 0x1f}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			infos, err := tr.List(context.Background(), "ns", tc.prefix, tc.after, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			var got []uint64
			for _, in := range infos {
				got = append(got, in.Key.Hash)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("listed %x, want %x", got, tc.want)
			}
		})
	}
}

func TestMedium(t *testing.T) {
	tr := New(WithMedium(block.TierNVMe))
	put(t, tr, 1)
	ref, err := tr.Get(context.Background(), key(1), block.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref.Release()
	infos, _ := tr.List(context.Background(), "ns", "", "", 0)
	if st, _ := tr.Stat(context.Background(), key(1)); ref.Tier != block.TierNVMe || st.Tier != block.TierNVMe || len(infos) != 1 || infos[0].Tier != block.TierNVMe {
		t.Fatalf("ref on %s, stat %s, list %+v: want nvme", ref.Tier, st.Tier, infos)
	}
}

func TestCapacityEvictsOldest(t *testing.T) {
	tr := New(WithCapacity(2))
	put(t, tr, 1, 2, 3)
	if tr.Len() != 2 || tr.Contains(key(1)) || !tr.Contains(key(2)) || !tr.Contains(key(3)) {
		t.Fatalf("holds %d blocks, 1 %v 2 %v 3 %v; want 2 and 3", tr.Len(), tr.Contains(key(1)), tr.Contains(key(2)), tr.Contains(key(3)))
	}
	if err := tr.Delete(context.Background(), key(2)); err != nil {
		t.Fatal(err)
	}
	put(t, tr, 4)
	if tr.Len() != 2 || !tr.Contains(key(3)) || !tr.Contains(key(4)) {
		t.Fatalf("after a delete and a put: %d blocks, 3 %v 4 %v", tr.Len(), tr.Contains(key(3)), tr.Contains(key(4)))
	}
}

func TestBatches(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		opts    []Option
		corrupt bool
	}{
		{"intact", nil, false},
		{"corrupt reads", []Option{WithCorruptReads()}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := New(tc.opts...)
			keys := []block.Key{key(1), key(2)}
			opts := []block.PutOptions{{}, {Parent: 1, HasParent: true}}
			errs, err := tr.PutBatch(ctx, keys, [][]byte{data(1), data(2)}, opts)
			if err != nil || errs[0] != nil || errs[1] != nil {
				t.Fatalf("put batch: %v %v", errs, err)
			}
			if o, ok := tr.PutOptions(key(2)); !ok || o.Parent != 1 || !o.HasParent {
				t.Fatalf("block 2 stored with %+v %v", o, ok)
			}
			bufs := [][]byte{make([]byte, 64), make([]byte, 2), make([]byte, 64)}
			sizes, errs, err := tr.GetBatchInto(ctx, []block.Key{key(1), key(2), key(3)}, bufs)
			if err != nil {
				t.Fatal(err)
			}
			if errs[0] != nil || !errors.Is(errs[1], block.ErrTooLarge) || !errors.Is(errs[2], block.ErrNotFound) {
				t.Fatalf("errors %v", errs)
			}
			got := bufs[0][:sizes[0]]
			if bytes.Equal(got, data(1)) == tc.corrupt || sizes[0] != len(data(1)) {
				t.Fatalf("copied %q, stored %q, corrupt %v", got, data(1), tc.corrupt)
			}
			ref, err := tr.Get(ctx, key(1), block.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(ref.Data, data(1)) == tc.corrupt {
				t.Fatalf("get handed out %q, stored %q, corrupt %v", ref.Data, data(1), tc.corrupt)
			}
			ref.Release()
			if !bytes.Equal(tr.Data(key(1)), data(1)) {
				t.Fatalf("stored bytes changed: %q", tr.Data(key(1)))
			}
		})
	}
}

func TestLookupPinRetain(t *testing.T) {
	ctx := context.Background()
	tr := New()
	put(t, tr, 1, 2, 4)
	for _, tc := range []struct {
		name   string
		retain time.Duration
		want   map[block.Key]time.Duration
	}{
		{"no window", 0, nil},
		{"window: the present prefix", time.Minute, map[block.Key]time.Duration{key(1): time.Minute, key(2): time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := tr.LookupRetain(ctx, []block.Key{key(1), key(2), key(3), key(4)}, tc.retain)
			if err != nil || n != 2 {
				t.Fatalf("lookup: %d %v, want 2", n, err)
			}
			if got := tr.Retains(); !maps.Equal(got, tc.want) {
				t.Fatalf("retains %v, want %v", got, tc.want)
			}
		})
	}
	tr.FailLookups(errors.New("down"))
	if _, err := tr.Lookup(ctx, []block.Key{key(1)}); err == nil {
		t.Fatal("lookup of a failed tier succeeded")
	}
	tr.FailLookups(nil)
	if c := tr.Counts(); c.Lookups != 3 {
		t.Fatalf("%d lookups, want 3", c.Lookups)
	}

	before := time.Now()
	errs := tr.PinBatch(ctx, []block.Key{key(1), key(3)}, time.Hour)
	if errs[0] != nil || !errors.Is(errs[1], block.ErrNotFound) {
		t.Fatalf("pin batch: %v", errs)
	}
	if until := tr.PinnedUntil(key(1)); until.Before(before.Add(time.Hour)) {
		t.Fatalf("pinned until %v", until)
	}
	if err := tr.Pin(ctx, key(1), before); err != nil || tr.PinnedUntil(key(1)).Before(before.Add(time.Hour)) {
		t.Fatalf("an earlier pin shortened it: %v %v", err, tr.PinnedUntil(key(1)))
	}
	if st, err := tr.Stat(ctx, key(1)); err != nil || st.PinnedUntil != tr.PinnedUntil(key(1)) || st.Size != int64(len(data(1))) {
		t.Fatalf("stat %+v %v", st, err)
	}
}

func TestReleaseSession(t *testing.T) {
	ctx := context.Background()
	tr := New()
	for h, s := range map[uint64]uint64{1: 7, 2: 7, 3: 8} {
		if err := tr.Put(ctx, key(h), data(h), block.Checksum(data(h)), block.PutOptions{Session: s, Retain: time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := tr.ReleaseSession(ctx, "ns", 7); err != nil || n != 2 {
		t.Fatalf("released %d %v, want 2", n, err)
	}
	if o, _ := tr.PutOptions(key(1)); o.Session != 0 || o.Retain != 0 {
		t.Fatalf("released block keeps %+v", o)
	}
	if o, _ := tr.PutOptions(key(3)); o.Session != 8 {
		t.Fatalf("other session's block lost it: %+v", o)
	}
}

// TestSlowAndFailingPuts: a put delay lets put calls overlap, and reads that
// start meanwhile are counted; a failing tier refuses a put call whole.
func TestSlowAndFailingPuts(t *testing.T) {
	ctx := context.Background()
	tr := New(WithPutDelay(300 * time.Millisecond))
	var wg sync.WaitGroup
	for h := range uint64(4) {
		wg.Go(func() {
			if err := tr.Put(ctx, key(h+1), data(h+1), block.Checksum(data(h+1)), block.PutOptions{}); err != nil {
				t.Error(err)
			}
		})
	}
	for tr.Counts().MaxPutsInFlight < 4 { // all four waiting out their delay
		time.Sleep(time.Millisecond)
	}
	if _, err := tr.Lookup(ctx, []block.Key{key(1)}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if c := tr.Counts(); c.MaxPutsInFlight != 4 || c.ReadsDuringPuts != 1 || c.Puts != 4 {
		t.Fatalf("counts %+v, want puts in flight together and the lookup among them", c)
	}

	tr = New()
	tr.FailPuts(block.ErrUnavailable)
	if _, err := tr.PutBatch(ctx, []block.Key{key(1)}, [][]byte{data(1)}, []block.PutOptions{{}}); !errors.Is(err, block.ErrUnavailable) {
		t.Fatalf("put batch of a failing tier: %v", err)
	}
	if err := tr.Put(ctx, key(1), data(1), block.Checksum(data(1)), block.PutOptions{}); !errors.Is(err, block.ErrUnavailable) {
		t.Fatalf("put of a failing tier: %v", err)
	}
	if tr.Len() != 0 || tr.Counts().Puts != 0 {
		t.Fatalf("a failing tier stored %d blocks (%d counted)", tr.Len(), tr.Counts().Puts)
	}
	tr.FailPuts(nil)
	put(t, tr, 1)
}
