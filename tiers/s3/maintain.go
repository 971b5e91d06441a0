package s3

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// MaintainReport says what one maintenance pass did.
type MaintainReport struct {
	Expired      int // blocks dropped because their S3 TTL passed
	PacksDeleted int // packs with nothing live, deleted from S3
	Compacted    int // mostly-dead packs whose live blocks were re-packed
	Repacked     int // live blocks re-packed
}

func (t *Tier) maintainer() {
	defer t.wg.Done()
	tick := time.NewTicker(t.cfg.MaintainInterval)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), t.cfg.UploadTimeout)
		if rep, err := t.Maintain(ctx); err != nil {
			t.log.Warn("s3 tier: maintenance incomplete; retrying next pass", "err", err, "report", rep)
		}
		cancel()
	}
}

// Maintain runs one maintenance pass: it drops expired blocks from the
// index, deletes packs that hold nothing live, and compacts packs whose live
// bytes fell below CompactBelow of their block bytes by re-packing their live
// blocks (the old pack is deleted by a later pass, once the new pack is
// uploaded and nothing points to the old one). Errors leave the work for the
// next pass.
func (t *Tier) Maintain(ctx context.Context) (MaintainReport, error) {
	var rep MaintainReport
	t.mu.Lock()
	now := t.now().UnixNano()
	var expired []block.Key
	for k, l := range t.index {
		if l.expires != 0 && l.expires <= now {
			t.unindexLocked(k)
			expired = append(expired, k)
			rep.Expired++
		}
	}
	var empty, sparse []*packMeta
	for _, p := range t.packs {
		switch {
		case p.live <= 0:
			empty = append(empty, p)
		case !p.compacting && p.dataBytes > 0 && float64(p.liveBytes) < t.cfg.CompactBelow*float64(p.dataBytes):
			sparse = append(sparse, p)
		}
	}
	t.mu.Unlock()
	t.st.expirations.Add(uint64(rep.Expired))
	t.reportDrops(expired)

	var errs []error
	for _, p := range empty {
		if err := t.store.Remove(ctx, p.name); err != nil {
			errs = append(errs, fmt.Errorf("delete %s: %w", p.name, err))
			continue
		}
		t.mu.Lock()
		if p.live <= 0 && t.packs[p.name] == p {
			delete(t.packs, p.name)
			t.journalLocked(encodeRemoveRecord(p.name), true)
		}
		t.mu.Unlock()
		rep.PacksDeleted++
		t.st.packsDeleted.Add(1)
	}
	sort.Slice(sparse, func(i, j int) bool { return sparse[i].created < sparse[j].created })
	for _, p := range sparse {
		n, err := t.compact(ctx, p)
		if err != nil {
			errs = append(errs, fmt.Errorf("compact %s: %w", p.name, err))
			break // most likely S3 trouble or a full buffer: stop for this pass
		}
		rep.Compacted++
		rep.Repacked += n
	}
	if rep.Compacted > 0 {
		if err := t.Flush(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return rep, errors.Join(errs...)
}

// compact reads a sparse pack's live blocks with one GET of its data area,
// verifies them and queues them for a new pack.
func (t *Tier) compact(ctx context.Context, p *packMeta) (int, error) {
	t.mu.Lock()
	var entries []packEntry
	var end int64
	for k, l := range t.index {
		if l.pack == p {
			entries = append(entries, packEntry{Key: k, Off: l.off, Len: l.length, Sum: l.sum, Expires: l.expires})
			end = max(end, l.off+l.length)
		}
	}
	if t.buffer+p.liveBytes > t.cfg.MaxBuffer {
		t.mu.Unlock()
		return 0, fmt.Errorf("%w: upload buffer cannot take %d live bytes now", block.ErrNoSpace, p.liveBytes)
	}
	p.compacting = true
	t.mu.Unlock()
	if len(entries) == 0 {
		return 0, nil
	}
	data := make([]byte, end)
	if err := t.store.ReadRange(ctx, p.name, 0, data); err != nil {
		t.mu.Lock()
		p.compacting = false
		t.mu.Unlock()
		return 0, err
	}
	n := 0
	for _, e := range entries {
		b := data[e.Off : e.Off+e.Len]
		if block.Checksum(b) != e.Sum {
			t.st.corruptions.Add(1)
			t.dropIfSame(e.Key, loc{pack: p, off: e.Off})
			continue
		}
		t.mu.Lock()
		cur, ok := t.index[e.Key]
		still := ok && cur.pack == p && cur.off == e.Off
		t.mu.Unlock()
		if still && t.enqueue(e.Key, b, e.Sum, e.Expires, true, 0) == nil {
			n++
		}
	}
	t.st.compactions.Add(1)
	t.st.compactedBlocks.Add(uint64(n))
	return n, nil
}

// rebuildLoop rebuilds the index from S3 (a node with no index), retrying
// with backoff until it succeeds or the tier closes.
func (t *Tier) rebuildLoop() {
	defer t.wg.Done()
	wait := t.cfg.RetryMin
	for {
		ctx, cancel := context.WithTimeout(context.Background(), t.cfg.UploadTimeout)
		packs, blocks, err := t.Rebuild(ctx)
		cancel()
		if err == nil {
			t.rebuilt.Store(true)
			t.log.Info("s3 tier: index rebuilt from the bucket", "packs", packs, "blocks", blocks)
			return
		}
		t.log.Warn("s3 tier: rebuilding the index from the bucket failed; retrying", "err", err, "in", wait)
		select {
		case <-t.stop:
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, t.cfg.RetryMax)
	}
}

// Rebuilt reports whether the index is complete: it was loaded from the
// journal, or rebuilt from the bucket.
func (t *Tier) Rebuilt() bool { return t.rebuilt.Load() }

// Rebuild lists the packs under the prefix and indexes those the index does
// not know, from each pack's own trailer and index (two ranged GETs). Blocks
// whose expiry passed are skipped; keys the index already has keep their
// entry. It is how a new node, or one that lost its disk, finds the blocks
// other nodes uploaded.
func (t *Tier) Rebuild(ctx context.Context) (packs, blocks int, err error) {
	var names []string
	sizes := map[string]int64{}
	err = t.store.List(ctx, t.cfg.Prefix, func(name string, size int64) error {
		if strings.HasSuffix(name, ".pack") {
			names = append(names, name)
			sizes[name] = size
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("%w: s3 tier: list %s: %v", block.ErrUnavailable, t.cfg.Prefix, err)
	}
	// Newest first (names are namespace/time-random): a key in several packs
	// (re-packed by compaction before the old pack was deleted) is indexed
	// at its newest copy, and the older packs are left empty for deletion.
	sort.Sort(sort.Reverse(sort.StringSlice(names)))
	for _, name := range names {
		t.mu.Lock()
		known := t.packs[name] != nil
		t.mu.Unlock()
		if known {
			continue
		}
		rec, err := t.readPackIndex(ctx, name, sizes[name])
		if errors.Is(err, block.ErrChecksum) || errors.Is(err, block.ErrInvalidArgument) {
			t.log.Warn("s3 tier: skipping an unreadable pack", "pack", name, "err", err)
			continue
		}
		if err != nil {
			return packs, blocks, err
		}
		t.mu.Lock()
		now := t.now().UnixNano()
		before := len(t.index)
		p := t.addPackLocked(rec, func(e packEntry) bool {
			_, have := t.index[e.Key]
			return !have && (e.Expires == 0 || e.Expires > now)
		})
		rec.entries = rec.entries[:0]
		for k, l := range t.index {
			if l.pack == p {
				rec.entries = append(rec.entries, packEntry{Key: k, Off: l.off, Len: l.length, Sum: l.sum, Expires: l.expires})
			}
		}
		t.journalLocked(encodePackRecord(rec), false)
		blocks += len(t.index) - before
		t.mu.Unlock()
		packs++
	}
	return packs, blocks, nil
}

// readPackIndex reads a pack's trailer and index.
func (t *Tier) readPackIndex(ctx context.Context, name string, size int64) (packRecord, error) {
	if size < trailerSize {
		return packRecord{}, fmt.Errorf("%w: pack %s is %d bytes", block.ErrChecksum, name, size)
	}
	tb := make([]byte, trailerSize)
	if err := t.store.ReadRange(ctx, name, size-trailerSize, tb); err != nil {
		return packRecord{}, fmt.Errorf("%w: s3 tier: read %s: %v", block.ErrUnavailable, name, err)
	}
	tr, err := decodeTrailer(tb, size)
	if err != nil {
		return packRecord{}, err
	}
	ib := make([]byte, tr.idxLen)
	if err := t.store.ReadRange(ctx, name, size-trailerSize-tr.idxLen, ib); err != nil {
		return packRecord{}, fmt.Errorf("%w: s3 tier: read %s: %v", block.ErrUnavailable, name, err)
	}
	entries, err := decodeIndex(ib, tr, size)
	if err != nil {
		return packRecord{}, err
	}
	var data int64
	for _, e := range entries {
		data += e.Len
	}
	return packRecord{name: name, size: size, created: tr.created, dataBytes: data, count: tr.count, entries: entries}, nil
}
