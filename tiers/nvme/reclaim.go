package nvme

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/descriptor"
)

// victimLocked picks the next segment to reclaim and marks it cleaning: a
// segment with no live blocks if there is one, otherwise the oldest. The
// active segment, segments with writes in flight and segments under an
// unexpired descriptor lease are skipped. The caller holds t.mu.
func (t *Tier) victimLocked() *segment {
	now := t.now().UnixNano()
	var best *segment
	for _, s := range t.segs {
		if s == t.active || !s.sealed || s.cleaning || s.removed || s.pending > 0 || s.leasedLocked(now) {
			continue
		}
		if best == nil || betterVictim(s, best) {
			best = s
		}
	}
	if best != nil {
		best.cleaning = true
	}
	return best
}

// betterVictim orders candidates: empty segments first, then oldest first.
func betterVictim(a, b *segment) bool {
	if az, bz := a.liveCount == 0, b.liveCount == 0; az != bz {
		return az
	}
	return a.id < b.id
}

// leasedLocked reports whether s has an unexpired descriptor lease,
// forgetting expired ones.
func (s *segment) leasedLocked(now int64) bool {
	for id, until := range s.leases {
		if until > now {
			return true
		}
		delete(s.leases, id)
	}
	return false
}

// reclaim empties segment s and removes its file. It walks the extents in
// file order: blocks still indexed there that are pinned or were read since
// they were written are re-appended at the head (and lose their accessed
// flag, so they must be read again to survive the next pass); expired blocks
// are dropped; cold blocks are handed to OnEvict and dropped. The caller
// holds t.wmu and s is marked cleaning.
func (t *Tier) reclaim(ctx context.Context, s *segment) error {
	t.mu.Lock()
	end := s.end
	t.mu.Unlock()
	hdr := t.pool.get(Align)
	defer t.pool.put(hdr)
	for off := int64(0); off+HeaderSize <= end; {
		if _, err := s.file.ReadAt(hdr, off); err != nil {
			break // a torn tail: nothing indexed lies beyond a short file
		}
		h, err := descriptor.DecodeHeader(hdr)
		if err != nil {
			off += Align // a hole left by a failed write, or damage: resynchronise
			continue
		}
		ext := descriptor.ExtentLen(h.Length)
		if err := t.reclaimOne(ctx, s, off, h); err != nil {
			t.mu.Lock()
			s.cleaning = false
			t.mu.Unlock()
			return err
		}
		off += ext
	}
	t.mu.Lock()
	left := s.liveCount
	s.removed = true
	delete(t.segs, s.id)
	t.used -= s.end
	closeNow := s.refs == 0
	t.mu.Unlock()
	if left > 0 {
		// Entries whose headers were unreadable: reads find the segment gone
		// and drop them.
		t.log.Warn("nvme: reclaimed segment still had unwalkable index entries", "segment", s.id, "entries", left)
	}
	if err := os.Remove(s.path); err != nil {
		t.log.Error("nvme: removing reclaimed segment", "path", s.path, "err", err)
	}
	if closeNow {
		s.file.Close()
	}
	t.st.reclaimed.Add(1)
	return nil
}

// reclaimOne decides the fate of the extent at off in s whose header is h.
func (t *Tier) reclaimOne(ctx context.Context, s *segment, off int64, h header) error {
	e, ok, err := t.lookup(h.Key)
	if err != nil {
		return err
	}
	if !ok || e.seg != s.id || e.off != off || e.gen != h.Gen {
		return nil // dead: deleted, replaced or moved
	}
	now := t.now().UnixNano()
	if t.expired(e, now) {
		if dropped, err := t.dropIf(h.Key, e, nil); err != nil || !dropped {
			return err
		}
		t.st.expirations.Add(1)
		return nil
	}
	keep := func(c entry) bool { return c.pinUntil > now || c.flags&flagAccessed != 0 }
	if keep(e) {
		err := t.relocate(ctx, h.Key, e)
		if !errors.Is(err, block.ErrNoSpace) {
			return err
		}
		if e.pinUntil > now {
			return err // cannot drop a pinned block
		}
		// No headroom for an accessed (but unpinned) block: evict it instead.
	}
	_, err = t.evictExtent(h.Key, e, now)
	return err
}

// evictExtent drops k's extent e if k still names it and it is not pinned,
// handing its verified bytes to OnEvict first; it reports whether it
// dropped it. An extent that fails verification is dropped as corrupt
// (not handed on, and not reported as evicted).
func (t *Tier) evictExtent(k block.Key, e entry, now int64) (bool, error) {
	var buf []byte
	if t.cfg.OnEvict != nil {
		var err error
		buf, err = t.readExtent(k, e)
		if err != nil {
			if errors.Is(err, block.ErrChecksum) {
				t.corrupt(k, e, err)
				return false, nil
			}
			return false, err
		}
		defer t.pool.put(buf)
	}
	dropped, err := t.dropIf(k, e, func(c entry) bool { return c.pinUntil <= now })
	if err != nil || !dropped {
		return false, err
	}
	t.st.evictions.Add(1)
	t.st.evictedBytes.Add(uint64(e.length))
	if buf != nil {
		t.cfg.OnEvict(k, buf[HeaderSize:HeaderSize+e.length], e.sum)
		t.st.demotions.Add(1)
	}
	return true, nil
}

// relocate re-appends a live block at the head with a new generation.
func (t *Tier) relocate(ctx context.Context, k block.Key, e entry) error {
	buf, err := t.readExtent(k, e)
	if err != nil {
		if errors.Is(err, block.ErrChecksum) {
			t.corrupt(k, e, err)
			return nil
		}
		return err
	}
	defer t.pool.put(buf)
	r, err := t.reserve(ctx, e.extent(), true)
	if err != nil {
		return err
	}
	defer t.finish(r)
	h, err := descriptor.DecodeHeader(buf[:HeaderSize])
	if err != nil {
		return fmt.Errorf("nvme: relocate %s: %w", k, err)
	}
	h.Gen = r.gen
	clear(buf[:HeaderSize])
	h.Encode(buf)
	if err := t.pwrite(r.seg, buf, r.off); err != nil {
		return err
	}
	if err := t.syncSeg(r.seg); err != nil {
		return err
	}
	t.st.writeBytes.Add(uint64(len(buf)))
	ne := e
	ne.seg, ne.off, ne.gen = r.seg.id, r.off, r.gen
	ne.flags &^= flagAccessed
	moved, err := t.commitNew(k, ne, &e)
	if err != nil {
		return err
	}
	if moved {
		t.st.relocations.Add(1)
		t.st.relocatedBytes.Add(uint64(e.length))
	}
	return nil
}
