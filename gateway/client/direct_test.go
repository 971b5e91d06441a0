package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/blocktest"
	"github.com/ctxtier/ctxtier/gateway/native"
	"github.com/ctxtier/ctxtier/gateway/native/nativetest"
	"github.com/ctxtier/ctxtier/tiers"
	"github.com/ctxtier/ctxtier/tiers/dram"
	"github.com/ctxtier/ctxtier/tiers/nvme"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

const blockSize = 64<<10 + 3 // not page-aligned on purpose

// stack builds a real tier manager: DRAM of dramBlocks blocks, over an NVMe
// tier in a temporary directory when withNVMe.
func stack(t *testing.T, dramBlocks int, withNVMe bool) *tiers.Manager {
	t.Helper()
	dcfg := dram.DefaultConfig()
	dcfg.Capacity = int64(dramBlocks) * (blockSize + dram.PageSize)
	dcfg.MaxBlockSize = 256 << 10
	var lower tiers.Lower
	if withNVMe {
		ncfg := nvme.DefaultConfig()
		ncfg.Dir = t.TempDir()
		ncfg.SegmentSize = 1 << 20
		ncfg.Capacity = 16 << 20
		ncfg.MaxBlockSize = 256 << 10
		ncfg.Index = nvme.IndexConfig{MemTableSize: 1 << 20, NumMemtables: 1, BlockCacheSize: 1 << 20, IndexCacheSize: 1 << 20}
		nt, err := nvme.New(ncfg, quietLog)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nt.Close() })
		lower = nt
	}
	m, err := tiers.New(tiers.DefaultConfig(), dcfg, lower, quietLog)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func startDirect(t *testing.T, cfg native.Config, tier ctxstore.Tier, opts Options) (*nativetest.Server, *Client) {
	t.Helper()
	srv, err := nativetest.StartWithTier(t, cfg, tier)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, srv.Addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return srv, c
}

func waitLeases(t *testing.T, srv *nativetest.Server, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for srv.Server.OpenLeases() != want {
		if time.Now().After(deadline) {
			t.Fatalf("server holds %d leases, want %d", srv.Server.OpenLeases(), want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func describeOne(t *testing.T, c *Client, k block.Key) *Lease {
	t.Helper()
	ls, errs, err := c.Describe(context.Background(), []block.Key{k})
	if err != nil || errs[0] != nil {
		t.Fatalf("Describe %s: %v %v", k, err, errs[0])
	}
	return ls[0]
}

func TestReadDirectThroughTiers(t *testing.T) {
	// DRAM holds 4 blocks; 12 puts push the oldest down to NVMe.
	m := stack(t, 4, true)
	srv, c := startDirect(t, native.DefaultConfig(), m, Options{Conns: 2})
	ctx := context.Background()
	const n = 12
	for i := range uint64(n) {
		if err := c.Put(ctx, block.NewKey("default", i), payload(i, blockSize)); err != nil {
			t.Fatal(err)
		}
	}
	tiersSeen := map[block.Tier]int{}
	buf := make([]byte, blockSize+100)
	for i := range uint64(n) {
		k := block.NewKey("default", i)
		l := describeOne(t, c, k)
		tiersSeen[l.Desc.Tier]++
		got, err := c.ReadLease(l, buf)
		if err != nil || !bytes.Equal(buf[:got], payload(i, blockSize)) {
			t.Fatalf("ReadLease %s (%s): n %d err %v", k, l.Desc.Tier, got, err)
		}
		if errs := c.Release(ctx, l); errs[0] != nil {
			t.Fatalf("Release: %v", errs[0])
		}
		// ReadDirect does the same with an asynchronous release.
		got, err = c.ReadDirect(ctx, k, buf)
		if err != nil || !bytes.Equal(buf[:got], payload(i, blockSize)) {
			t.Fatalf("ReadDirect %s: n %d err %v", k, got, err)
		}
	}
	if tiersSeen[block.TierDRAM] == 0 || tiersSeen[block.TierNVMe] == 0 {
		t.Fatalf("descriptors by tier %v: want both dram and nvme", tiersSeen)
	}
	if s := c.DirectStats(); s.Direct != n || s.Fallbacks != 0 || s.Mismatches != 0 {
		t.Fatalf("stats %+v", s)
	}
	waitLeases(t, srv, 0)
	if _, err := c.ReadDirect(ctx, block.NewKey("default", 999), buf); !errors.Is(err, block.ErrNotFound) {
		t.Fatalf("missing block: %v", err)
	}
	if _, err := c.ReadDirect(ctx, block.NewKey("default", 1), make([]byte, 10)); !errors.Is(err, block.ErrTooLarge) {
		t.Fatalf("short buffer: %v", err)
	}
	// A batch: one DESCRIBE for every key, each item answered on its own.
	keys := []block.Key{block.NewKey("default", 0), block.NewKey("default", 998), block.NewKey("default", 11)}
	bufs := [][]byte{make([]byte, blockSize), make([]byte, blockSize), make([]byte, blockSize)}
	sizes, errs, err := c.ReadDirectBatch(ctx, keys, bufs)
	if err != nil || errs[0] != nil || !errors.Is(errs[1], block.ErrNotFound) || errs[2] != nil {
		t.Fatalf("batch: %v %v", err, errs)
	}
	if !bytes.Equal(bufs[0][:sizes[0]], payload(0, blockSize)) || !bytes.Equal(bufs[2][:sizes[2]], payload(11, blockSize)) {
		t.Fatal("batch read wrong bytes")
	}
	waitLeases(t, srv, 0)
}

// TestDescribePromote: with Options.DirectPromote a block that is only on
// NVMe is read into DRAM by the DESCRIBE and described there (one lower
// tier read, counted as a promotion); without it, the same kind of block is
// described on NVMe and stays there.
func TestDescribePromote(t *testing.T) {
	ctx := context.Background()
	m := stack(t, 2, true)
	_, plain := startDirect(t, native.DefaultConfig(), m, Options{Conns: 1})
	_, promoting := startDirect(t, native.DefaultConfig(), m, Options{Conns: 1, DirectPromote: true, DirectVerify: VerifyVersion})
	for i := range uint64(6) {
		if err := plain.Put(ctx, block.NewKey("default", i), payload(i, blockSize)); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, blockSize)
	l := describeOne(t, plain, block.NewKey("default", 0))
	if l.Desc.Tier != block.TierNVMe {
		t.Fatalf("plain DESCRIBE of an evicted block: %s, want nvme", l.Desc.Tier)
	}
	plain.Release(ctx, l)
	if again := describeOne(t, plain, block.NewKey("default", 0)); again.Desc.Tier != block.TierNVMe {
		t.Fatalf("a plain DESCRIBE moved the block to %s", again.Desc.Tier)
	} else {
		plain.Release(ctx, again)
	}
	before := m.Stats()
	k := block.NewKey("default", 1)
	l = describeOne(t, promoting, k)
	if l.Desc.Tier != block.TierDRAM {
		t.Fatalf("promoting DESCRIBE of an evicted block: %s, want dram", l.Desc.Tier)
	}
	if n, err := promoting.ReadLease(l, buf); err != nil || !bytes.Equal(buf[:n], payload(1, blockSize)) {
		t.Fatalf("read of the promoted copy: %v", err)
	}
	promoting.Release(ctx, l)
	if after := m.Stats(); after.Promotions != before.Promotions+1 {
		t.Fatalf("promotions %d -> %d, want one", before.Promotions, after.Promotions)
	}
}

func TestLeaseOutlivesDeleteAndEviction(t *testing.T) {
	ctx := context.Background()
	t.Run("dram", func(t *testing.T) {
		m := stack(t, 4, false)
		srv, c := startDirect(t, native.DefaultConfig(), m, Options{Conns: 1})
		k := block.NewKey("default", 1)
		if err := c.Put(ctx, k, payload(1, blockSize)); err != nil {
			t.Fatal(err)
		}
		l := describeOne(t, c, k)
		if err := c.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
		// Fill DRAM twice over: eviction must skip the leased pages.
		for i := uint64(100); i < 108; i++ {
			if err := c.Put(ctx, block.NewKey("default", i), payload(i, blockSize)); err != nil && !errors.Is(err, block.ErrNoSpace) {
				t.Fatal(err)
			}
		}
		buf := make([]byte, blockSize)
		if n, err := c.ReadLease(l, buf); err != nil || !bytes.Equal(buf[:n], payload(1, blockSize)) {
			t.Fatalf("leased read after delete and eviction: %v", err)
		}
		if _, err := c.Get(ctx, k); !errors.Is(err, block.ErrNotFound) {
			t.Fatalf("deleted block still served by GET: %v", err)
		}
		before := m.DRAM().Stats().AllocatedB
		if errs := c.Release(ctx, l); errs[0] != nil {
			t.Fatal(errs[0])
		}
		if after := m.DRAM().Stats().AllocatedB; after >= before {
			t.Fatalf("release freed nothing: allocated %d -> %d", before, after)
		}
		waitLeases(t, srv, 0)
	})
	t.Run("nvme", func(t *testing.T) {
		m := stack(t, 2, true)
		_, c := startDirect(t, native.DefaultConfig(), m, Options{Conns: 1})
		for i := range uint64(6) {
			if err := c.Put(ctx, block.NewKey("default", i), payload(i, blockSize)); err != nil {
				t.Fatal(err)
			}
		}
		k := block.NewKey("default", 0)
		l := describeOne(t, c, k)
		if l.Desc.Tier != block.TierNVMe {
			t.Fatalf("block 0 described in %s, want nvme", l.Desc.Tier)
		}
		if err := c.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, blockSize)
		if n, err := c.ReadLease(l, buf); err != nil || !bytes.Equal(buf[:n], payload(0, blockSize)) {
			t.Fatalf("leased nvme read after delete: %v", err)
		}
		c.Release(ctx, l)
	})
}

func TestLeaseTTLExpiry(t *testing.T) {
	ctx := context.Background()
	m := stack(t, 4, false)
	cfg := native.DefaultConfig()
	cfg.LeaseTTL = 50 * time.Millisecond
	srv, c := startDirect(t, cfg, m, Options{Conns: 1})
	k := block.NewKey("default", 1)
	if err := c.Put(ctx, k, payload(1, blockSize)); err != nil {
		t.Fatal(err)
	}
	l := describeOne(t, c, k)
	if ttl := time.Until(l.Expires); ttl > cfg.LeaseTTL {
		t.Fatalf("lease expires in %v, beyond the server's TTL %v", ttl, cfg.LeaseTTL)
	}
	waitLeases(t, srv, 0) // the server ended it by itself
	buf := make([]byte, blockSize)
	if _, err := c.ReadLease(l, buf); !errors.Is(err, block.ErrUnavailable) {
		t.Fatalf("read through an expired lease: %v, want Unavailable", err)
	}
	// Nothing holds the block now: delete it and overwrite the whole arena.
	if err := c.Delete(ctx, k); err != nil {
		t.Fatal(err)
	}
	for i := uint64(100); i < 108; i++ {
		if err := c.Put(ctx, block.NewKey("default", i), payload(i, blockSize)); err != nil {
			t.Fatal(err)
		}
	}
	// A reader that ignores the expiry reads other bytes: the checksum says so.
	l.Expires = time.Now().Add(time.Hour)
	if _, err := c.ReadLease(l, buf); !errors.Is(err, block.ErrChecksum) {
		t.Fatalf("stale read: %v, want ErrChecksum", err)
	}
	if errs := c.Release(ctx, l); !errors.Is(errs[0], block.ErrNotFound) {
		t.Fatalf("release of an expired lease: %v, want NotFound", errs[0])
	}
}

func TestConnectionCloseReleases(t *testing.T) {
	ctx := context.Background()
	m := stack(t, 8, false)
	srv, c := startDirect(t, native.DefaultConfig(), m, Options{Conns: 2})
	keys := make([]block.Key, 4)
	for i := range keys {
		keys[i] = block.NewKey("default", uint64(i))
		if err := c.Put(ctx, keys[i], payload(uint64(i), blockSize)); err != nil {
			t.Fatal(err)
		}
	}
	ls, errs, err := c.Describe(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if e != nil || ls[i] == nil {
			t.Fatalf("item %d: %v", i, e)
		}
	}
	waitLeases(t, srv, len(keys))
	for _, k := range keys {
		if err := c.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if got := m.DRAM().Stats().AllocatedB; got < int64(len(keys))*blockSize {
		t.Fatalf("leased blocks freed early: %d bytes allocated", got)
	}
	c.Close()
	waitLeases(t, srv, 0)
	if got := m.DRAM().Stats().AllocatedB; got != 0 {
		t.Fatalf("%d bytes still allocated after the connection closed", got)
	}
}

func TestMaxLeasesPerConnection(t *testing.T) {
	ctx := context.Background()
	m := stack(t, 4, false)
	cfg := native.DefaultConfig()
	cfg.MaxLeases = 2
	_, c := startDirect(t, cfg, m, Options{Conns: 1})
	k := block.NewKey("default", 1)
	if err := c.Put(ctx, k, payload(1, 100)); err != nil {
		t.Fatal(err)
	}
	ls, errs, err := c.Describe(ctx, []block.Key{k, k, k})
	if err != nil || errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], block.ErrUnavailable) {
		t.Fatalf("describe past MaxLeases: %v %v", err, errs)
	}
	for _, e := range c.Release(ctx, ls[0], ls[1]) {
		if e != nil {
			t.Fatal(e)
		}
	}
	// ReadDirect falls back to GET when no lease can be had: here, none is refused.
	buf := make([]byte, 100)
	if n, err := c.ReadDirect(ctx, k, buf); err != nil || !bytes.Equal(buf[:n], payload(1, 100)) {
		t.Fatalf("ReadDirect: %v", err)
	}
}

// farTier describes blocks at a path this process cannot open, as a server
// on another machine would.
type farTier struct{ *tiers.Manager }

func (f farTier) Descriptor(ctx context.Context, k block.Key) (block.Descriptor, func(), error) {
	d, release, err := f.Manager.Descriptor(ctx, k)
	d.Path = "/nonexistent/ctxtier/memfile"
	return d, release, err
}

func TestReadDirectFallback(t *testing.T) {
	ctx := context.Background()
	data := payload(5, blockSize)
	k := block.NewKey("default", 5)
	buf := make([]byte, blockSize)
	t.Run("not colocated", func(t *testing.T) {
		srv, c := startDirect(t, native.DefaultConfig(), farTier{stack(t, 4, false)}, Options{Conns: 1})
		if err := c.Put(ctx, k, data); err != nil {
			t.Fatal(err)
		}
		var nc *NotColocatedError
		if _, err := c.ReadDirect(ctx, k, buf); !errors.As(err, &nc) || nc.Path != "/nonexistent/ctxtier/memfile" {
			t.Fatalf("got %v, want *NotColocatedError", err)
		}
		waitLeases(t, srv, 0)
	})
	t.Run("not colocated with DirectFallback", func(t *testing.T) {
		srv, c := startDirect(t, native.DefaultConfig(), farTier{stack(t, 4, false)}, Options{Conns: 1, DirectFallback: true})
		if err := c.Put(ctx, k, data); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if n, err := c.ReadDirect(ctx, k, buf); err != nil || !bytes.Equal(buf[:n], data) {
				t.Fatalf("ReadDirect with fallback: %v", err)
			}
		}
		if s := c.DirectStats(); s.Direct != 0 || s.Fallbacks != 3 {
			t.Fatalf("stats %+v", s)
		}
		waitLeases(t, srv, 0)
	})
	t.Run("tier without descriptors", func(t *testing.T) {
		_, c := startDirect(t, native.DefaultConfig(), blocktest.New(), Options{Conns: 1})
		if err := c.Put(ctx, k, data); err != nil {
			t.Fatal(err)
		}
		if _, errs, _ := c.Describe(ctx, []block.Key{k}); !errors.Is(errs[0], block.ErrUnavailable) {
			t.Fatalf("describe on a map tier: %v", errs[0])
		}
		if n, err := c.ReadDirect(ctx, k, buf); err != nil || !bytes.Equal(buf[:n], data) {
			t.Fatalf("ReadDirect: %v", err)
		}
	})
}
