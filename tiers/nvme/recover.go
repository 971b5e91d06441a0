package nvme

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/descriptor"
)

// Recovery reports what New found and repaired.
type Recovery struct {
	Segments  int   // segment files opened
	Entries   int   // index entries kept
	Dropped   int   // index entries dropped (outside their segment, or header mismatch)
	Reindexed int   // extents found after the head, verified and indexed
	Truncated int64 // bytes of torn tails cut off
	Removed   int   // segment files without live blocks removed
	// Skipped extents the scan could not use (a bad header or payload in
	// the middle of a segment): it went on at the next valid extent
	// header instead of cutting the file; SkippedBytes is their space.
	Skipped      int
	SkippedBytes int64
	// IndexRebuilt: the index could not be opened (corrupt) and was set
	// aside as index.corrupt-<time>; every segment was scanned to rebuild
	// it.
	IndexRebuilt bool
	Duration     time.Duration
}

// recover rebuilds the in-memory state from the segment files and the
// index, repairing what a crash left:
//
//  1. every index entry must lie inside its segment file (and, with
//     VerifyOnOpen, match the extent header there); others are dropped;
//  2. segments at or after the recorded head are scanned from the head for
//     extents written but never indexed; each one whose header and payload
//     verify is indexed unless its key is already indexed (with an older
//     generation, it replaces that entry). An extent whose payload does not
//     verify is skipped (its header gives its length); after a header that
//     does not verify, the scan looks for the next valid header at each
//     4 KiB boundary and goes on from there. Only what follows the last
//     valid extent (a torn tail) is cut off;
//  3. segments with no live block are removed.
//
// Extents below the head were either committed (and are in the index) or
// deleted, so the scan never resurrects a deleted block.
func (t *Tier) recover() (Recovery, error) {
	var rep Recovery
	des, err := os.ReadDir(t.segDir)
	if err != nil {
		return rep, fmt.Errorf("nvme: %w", err)
	}
	sizes := map[uint64]int64{}
	var ids []uint64
	for _, de := range des {
		id, ok := parseSegName(de.Name())
		if !ok {
			continue
		}
		s, err := openSegment(t.segDir, id, t.direct, false)
		if err != nil {
			return rep, err
		}
		fi, err := s.file.Stat()
		if err != nil {
			s.file.Close()
			return rep, fmt.Errorf("nvme: %w", err)
		}
		s.sealed = true
		s.end = descriptor.AlignUp(fi.Size())
		sizes[id] = fi.Size()
		t.segs[id] = s
		ids = append(ids, id)
	}
	slices.Sort(ids)
	rep.Segments = len(ids)

	h := head{nextGen: 1}
	err = t.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(headKey)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return it.Value(func(v []byte) error {
			h, err = decodeHead(v)
			return err
		})
	})
	if err != nil {
		return rep, fmt.Errorf("nvme: read head: %w", err)
	}

	maxGen, err := t.checkIndex(sizes, &rep)
	if err != nil {
		return rep, err
	}

	newHead := h
	for _, id := range ids {
		if id < h.seg {
			continue
		}
		start := int64(0)
		if id == h.seg {
			start = h.off
		}
		s := t.segs[id]
		end, err := t.scanTail(s, start, sizes[id], &maxGen, &rep)
		if err != nil {
			return rep, err
		}
		if sizes[id] > end {
			if err := s.file.Truncate(end); err != nil {
				return rep, fmt.Errorf("nvme: truncate %s: %w", s.path, err)
			}
			rep.Truncated += sizes[id] - end
		}
		s.end = end
		if end > 0 && !newHead.after(id, end) {
			newHead.seg, newHead.off = id, end
		}
	}
	newHead.nextGen = max(h.nextGen, maxGen+1)

	last := uint64(0)
	for _, id := range ids {
		s := t.segs[id]
		if s.liveCount == 0 {
			s.file.Close()
			if err := os.Remove(s.path); err != nil {
				return rep, fmt.Errorf("nvme: remove empty segment: %w", err)
			}
			delete(t.segs, id)
			rep.Removed++
		}
		last = max(last, id)
	}
	for _, s := range t.segs {
		t.used += s.end
	}
	// Keep appending to the newest segment if it was scanned (so its tail is clean).
	if s := t.segs[last]; s != nil && last >= h.seg && s.end+HeaderSize+Align <= t.cfg.SegmentSize {
		s.sealed = false
		t.active = s
	}
	t.nextSeg = max(last, h.seg) + 1
	t.nextGen = newHead.nextGen
	t.head = newHead
	if newHead != h {
		if err := t.indexWrite(func(txn *badger.Txn) error { return txn.Set(headKey, newHead.encode()) }); err != nil {
			return rep, fmt.Errorf("nvme: write head: %w", err)
		}
	}
	return rep, nil
}

// checkIndex walks every index entry, drops those that do not lie inside
// their segment file (or, with VerifyOnOpen, disagree with the extent
// header), and accounts the rest. It returns the highest generation seen.
func (t *Tier) checkIndex(sizes map[uint64]int64, rep *Recovery) (uint64, error) {
	var maxGen uint64
	var drop [][]byte
	hdr := t.pool.get(Align)
	defer t.pool.put(hdr)
	err := t.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = []byte{keyPrefix}
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			k, okKey := parseIndexKey(item.Key())
			var e entry
			err := item.Value(func(v []byte) error {
				var derr error
				e, derr = decodeEntry(v)
				return derr
			})
			s := t.segs[e.seg]
			ok := okKey && err == nil && s != nil && e.off%Align == 0 && e.length > 0 &&
				e.off+e.extent() <= sizes[e.seg]
			if ok && t.cfg.VerifyOnOpen {
				if _, rerr := s.file.ReadAt(hdr, e.off); rerr != nil {
					ok = false
				} else if hh, derr := descriptor.DecodeHeader(hdr); derr != nil || hh.Key != k || hh.Gen != e.gen ||
					hh.Length != e.length || hh.Sum != e.sum {
					ok = false
				}
			}
			if !ok {
				drop = append(drop, item.KeyCopy(nil))
				continue
			}
			t.present.add(item.Key()) // the raw index key: what lookup hashes
			s.live += e.extent()
			s.liveCount++
			t.nsAddLocked(k.Namespace, e.length) // New: no one else runs yet
			t.st.liveBytes.Add(e.extent())
			t.st.residentBytes.Add(e.length)
			t.st.blocks.Add(1)
			maxGen = max(maxGen, e.gen)
			rep.Entries++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("nvme: check index: %w", err)
	}
	if len(drop) > 0 {
		if free, ok := t.indexRoom(); !ok {
			return 0, fmt.Errorf("%w: nvme: dropping %d index entries needs %d bytes free on %s, which has %d",
				block.ErrNoSpace, len(drop), t.minFree()/2, t.cfg.Dir, free)
		}
		wb := t.db.NewWriteBatch()
		for _, k := range drop {
			if err := wb.Delete(k); err != nil {
				wb.Cancel()
				return 0, fmt.Errorf("nvme: drop index entries: %w", err)
			}
		}
		if err := wb.Flush(); err != nil {
			return 0, fmt.Errorf("nvme: drop index entries: %w", err)
		}
		rep.Dropped = len(drop)
		t.log.Warn("nvme: dropped index entries that disagree with their segments", "count", len(drop))
	}
	return maxGen, nil
}

// scanTail walks s from start while extents verify, indexing those whose key
// is not indexed yet. It returns the end of the last valid extent.
func (t *Tier) scanTail(s *segment, start, size int64, maxGen *uint64, rep *Recovery) (int64, error) {
	if start >= size { // the file is shorter than the head says (a lost write): nothing to scan
		return min(start, descriptor.AlignUp(size)), nil
	}
	hdr := t.pool.get(Align)
	defer t.pool.put(hdr)
	off := start
	skip := func(from, to int64, why string) {
		rep.Skipped++
		rep.SkippedBytes += to - from
		t.log.Warn("nvme: skipping an extent that does not verify", "segment", s.path, "offset", from, "bytes", to-from, "why", why)
	}
	for off+HeaderSize <= size {
		if _, err := s.file.ReadAt(hdr, off); err != nil {
			break
		}
		h, err := descriptor.DecodeHeader(hdr)
		if err != nil {
			// A damaged header: go on at the next page that holds a valid
			// one; none means a torn tail, cut off by the caller.
			next, ok := t.nextHeader(s, off+Align, size, hdr)
			if !ok {
				break
			}
			skip(off, next, "bad header")
			off = next
			continue
		}
		ext := descriptor.ExtentLen(h.Length)
		if off+ext > size {
			break // the last extent is torn
		}
		e := entry{
			seg: s.id, off: off, length: h.Length, sum: h.Sum, gen: h.Gen, priority: h.Priority,
			created: h.Created, expires: h.Expires,
		}
		buf, err := t.readExtent(h.Key, e)
		if err != nil {
			skip(off, off+ext, err.Error())
			off += ext
			continue
		}
		t.pool.put(buf)
		*maxGen = max(*maxGen, h.Gen)
		cur, present, err := t.lookup(h.Key)
		if err != nil {
			return 0, err
		}
		if !present || cur.gen < h.Gen {
			// New, or a newer extent of an indexed key (a re-put, or a
			// relocated copy, whose index commit was lost).
			if !present {
				t.present.add(indexKey(h.Key))
			}
			if err := t.indexWrite(func(txn *badger.Txn) error { return txn.Set(indexKey(h.Key), e.encode()) }); err != nil {
				return 0, fmt.Errorf("nvme: reindex %s: %w", h.Key, err)
			}
			if present {
				t.unaccount(h.Key, cur)
			} else {
				rep.Reindexed++
			}
			t.account(h.Key, e)
		}
		off += ext
	}
	return off, nil
}

// nextHeader returns the first 4 KiB boundary at or after from (below
// size) whose page decodes as a valid extent header. hdr is a scratch page.
func (t *Tier) nextHeader(s *segment, from, size int64, hdr []byte) (int64, bool) {
	for off := descriptor.AlignUp(from); off+HeaderSize <= size; off += Align {
		if _, err := s.file.ReadAt(hdr, off); err != nil {
			return 0, false
		}
		if h, err := descriptor.DecodeHeader(hdr); err == nil && off+descriptor.ExtentLen(h.Length) <= size {
			return off, true
		}
	}
	return 0, false
}
