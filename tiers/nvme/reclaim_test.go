package nvme

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/descriptor"
)

// 60000-byte blocks take 64 KiB extents: 16 per 1 MiB segment, and the
// 4 MiB tier admits 3 segments' worth before it reclaims.
const (
	recSize    = 60000
	perSegment = 16
)

func reclaimConfig(dir string) Config {
	c := testConfig(dir)
	c.Capacity = 4 << 20
	return c
}

func TestReclaimKeepsHotAndPinnedEvictsCold(t *testing.T) {
	cfg := reclaimConfig(t.TempDir())
	var mu sync.Mutex
	demoted := map[uint64][]byte{}
	cfg.OnEvict = func(k block.Key, data []byte, sum uint32) {
		if block.Checksum(data) != sum {
			t.Errorf("OnEvict %s: bytes do not match sum", k)
		}
		mu.Lock()
		demoted[k.Hash] = append([]byte(nil), data...)
		mu.Unlock()
	}
	tr := open(t, cfg)
	defer tr.Close()
	ctx := context.Background()
	n := uint64(3 * perSegment)
	for i := range n {
		put(t, tr, key(i), payload(i, recSize), block.PutOptions{})
	}
	for i := range uint64(4) { // hot
		mustGet(t, tr, key(i), payload(i, recSize))
	}
	for i := uint64(4); i < 6; i++ { // pinned
		if err := tr.Pin(ctx, key(i), time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if s := tr.Stats(); s.Reclaimed != 0 || s.UsedBytes != 3<<20 {
		t.Fatalf("before reclamation: %+v", s)
	}
	put(t, tr, key(1000), payload(1000, recSize), block.PutOptions{})
	s := tr.Stats()
	if s.Reclaimed != 1 || s.Relocations != 6 || s.Evictions != perSegment-6 || s.Demotions != perSegment-6 {
		t.Fatalf("after one reclamation: %+v", s)
	}
	if s.UsedBytes > cfg.Capacity || s.UsedBytes > cfg.Capacity-cfg.SegmentSize {
		t.Fatalf("used %d above the bound", s.UsedBytes)
	}
	for i := range uint64(perSegment) {
		if got := tr.Contains(key(i)); got != (i < 6) {
			t.Errorf("block %d present=%v after reclamation", i, got)
		}
		if i >= 6 && !bytes.Equal(demoted[i], payload(i, recSize)) {
			t.Errorf("block %d not demoted with its bytes", i)
		}
	}
	for i := range uint64(6) {
		mustGet(t, tr, key(i), payload(i, recSize))
	}
	for i := uint64(perSegment); i < n; i++ {
		mustGet(t, tr, key(i), payload(i, recSize))
	}
	// Relocated blocks lost their accessed flag; reading them again above set it.
	if s := tr.Stats(); s.Corruptions != 0 || s.Blocks != int64(n)-(perSegment-6)+1 {
		t.Fatalf("final stats %+v", s)
	}
}

func TestReclaimAllPinnedIsNoSpace(t *testing.T) {
	tr := open(t, reclaimConfig(t.TempDir()))
	defer tr.Close()
	for i := range uint64(3 * perSegment) {
		put(t, tr, key(i), payload(i, recSize), block.PutOptions{PinTTL: time.Hour})
	}
	d := payload(999, recSize)
	err := tr.Put(context.Background(), key(999), d, block.Checksum(d), block.PutOptions{})
	if !errors.Is(err, block.ErrNoSpace) {
		t.Fatalf("put into a tier full of pinned blocks: %v", err)
	}
	s := tr.Stats()
	if s.NoSpace != 1 || s.UsedBytes > 4<<20 || s.Evictions != 0 {
		t.Fatalf("stats %+v", s)
	}
	for i := range uint64(3 * perSegment) {
		mustGet(t, tr, key(i), payload(i, recSize))
	}
}

func TestDescriptorLeaseDefersReclamation(t *testing.T) {
	tr := open(t, reclaimConfig(t.TempDir()))
	defer tr.Close()
	ctx := context.Background()
	for i := range uint64(3 * perSegment) {
		put(t, tr, key(i), payload(i, recSize), block.PutOptions{})
	}
	d, release, err := tr.Descriptor(ctx, key(3)) // in the oldest segment
	if err != nil {
		t.Fatal(err)
	}
	// One segment's worth of puts reclaims one segment: not the leased one.
	for i := uint64(100); i < 100+perSegment; i++ {
		put(t, tr, key(i), payload(i, recSize), block.PutOptions{})
	}
	if tr.Stats().Reclaimed != 1 || !tr.Contains(key(3)) || tr.Contains(key(perSegment+3)) {
		t.Fatalf("reclaimed the leased segment: %+v", tr.Stats())
	}
	got, err := descriptor.ReadExtent(key(3), d.Block())
	if err != nil || !bytes.Equal(got, payload(3, recSize)) {
		t.Fatalf("leased read: %v", err)
	}
	release()
	for i := uint64(200); i < 200+perSegment; i++ {
		put(t, tr, key(i), payload(i, recSize), block.PutOptions{})
	}
	if _, err := os.Stat(d.Path); !os.IsNotExist(err) {
		t.Fatalf("segment file still there after its lease ended: %v", err)
	}
	if _, err := descriptor.ReadExtent(key(3), d.Block()); err == nil {
		t.Fatal("stale descriptor still read")
	}
	// The descriptor read counted as an access, so the block was re-appended.
	mustGet(t, tr, key(3), payload(3, recSize))
	if tr.Contains(key(4)) {
		t.Fatal("cold neighbour of the leased block survived reclamation")
	}
}

// TestConcurrentChurn runs writers, readers and deleters against a tier that
// reclaims continuously; every byte served must be right.
func TestConcurrentChurn(t *testing.T) {
	tr := open(t, reclaimConfig(t.TempDir()))
	defer tr.Close()
	ctx := context.Background()
	sizeOf := func(h uint64) int { return 1 + int((h*0x9E3779B97F4A7C15>>40)%90000) }
	var stop atomic.Bool
	var wrong, served atomic.Int64
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for i := 0; i < 80; i++ {
				h := r.Uint64N(200)
				d := payload(h, sizeOf(h))
				if err := tr.Put(ctx, key(h), d, block.Checksum(d), block.PutOptions{}); err != nil {
					t.Errorf("put: %v", err)
					return
				}
			}
		}()
	}
	var readers sync.WaitGroup
	for w := range 3 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			r := rand.New(rand.NewPCG(uint64(w), 2))
			for !stop.Load() {
				h := r.Uint64N(200)
				if w == 2 {
					_ = tr.Delete(ctx, key(h))
					time.Sleep(time.Millisecond)
					continue
				}
				ref, err := tr.Get(ctx, key(h), block.GetOptions{})
				if err != nil {
					continue
				}
				served.Add(1)
				if !bytes.Equal(ref.Data, payload(h, sizeOf(h))) {
					wrong.Add(1)
				}
				ref.Release()
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	readers.Wait()
	s := tr.Stats()
	t.Logf("served %d reads; %+v", served.Load(), s)
	if wrong.Load() != 0 || s.Corruptions != 0 {
		t.Fatalf("%d wrong reads, %d corruptions", wrong.Load(), s.Corruptions)
	}
	if s.Reclaimed == 0 || s.UsedBytes > 4<<20 {
		t.Fatalf("no reclamation or over capacity: %+v", s)
	}
}
