package nvme

import (
	"errors"
	"fmt"
	"hash/maphash"

	"github.com/dgraph-io/badger/v4"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

var stripeSeed = maphash.MakeSeed()

func (t *Tier) keyLock(k block.Key) func() {
	var h maphash.Hash
	h.SetSeed(stripeSeed)
	h.WriteString(k.Namespace)
	m := &t.keyMu[(h.Sum64()^k.Hash^uint64(k.Part))%stripes]
	m.Lock()
	return m.Unlock
}

// lookup reads key's index entry.
// A key the presence filter rules out is a miss without an index read.
func (t *Tier) lookup(k block.Key) (entry, bool, error) {
	ik := indexKey(k)
	if t.present.absent(ik) {
		return entry{}, false, nil
	}
	var e entry
	found := false
	err := t.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(ik)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return it.Value(func(v []byte) error {
			var derr error
			e, derr = decodeEntry(v)
			found = derr == nil
			return derr
		})
	})
	if err != nil {
		return entry{}, false, fmt.Errorf("nvme: index lookup %s: %w", k, err)
	}
	return e, found, nil
}

func sameExtent(a, b entry) bool { return a.seg == b.seg && a.off == b.off && a.gen == b.gen }

// commitNew indexes a freshly written extent and advances the durable head
// past it. For a relocation, old is the extent being replaced: the commit
// happens only if the key still points there (carrying over its pin), and
// it reports false otherwise.
func (t *Tier) commitNew(k block.Key, e entry, old *entry) (bool, error) {
	unlock := t.keyLock(k)
	defer unlock()
	if old != nil {
		cur, ok, err := t.lookup(k)
		if err != nil || !ok || !sameExtent(cur, *old) {
			return false, err
		}
		e.pinUntil = max(e.pinUntil, cur.pinUntil)
	}
	t.commitMu.Lock()
	defer t.commitMu.Unlock()
	t.mu.Lock()
	h := t.head
	if !h.after(e.seg, e.off+e.extent()) {
		h.seg, h.off = e.seg, e.off+e.extent()
	}
	h.nextGen = max(h.nextGen, e.gen+1)
	t.mu.Unlock()
	ik := indexKey(k)
	if old == nil {
		t.present.add(ik) // before the key can be found (presence.go)
	}
	err := t.indexWrite(func(txn *badger.Txn) error {
		if err := txn.Set(ik, e.encode()); err != nil {
			return err
		}
		return txn.Set(headKey, h.encode())
	})
	if err != nil {
		// The count stays: a commit that failed late may still have made
		// the key present, and a count too many only costs index reads.
		return false, fmt.Errorf("nvme: index commit %s: %w", k, err)
	}
	t.mu.Lock()
	t.head = h
	t.mu.Unlock()
	if old != nil {
		t.unaccount(k, *old)
	}
	t.account(k, e)
	return true, nil
}

// account adds an indexed extent to its segment's live bytes.
func (t *Tier) account(k block.Key, e entry) {
	t.mu.Lock()
	t.nsAddLocked(k.Namespace, e.length)
	if s := t.segs[e.seg]; s != nil {
		s.live += e.extent()
		s.liveCount++
	}
	t.mu.Unlock()
	t.st.liveBytes.Add(e.extent())
	t.st.residentBytes.Add(e.length)
	t.st.blocks.Add(1)
}

func (t *Tier) unaccount(k block.Key, e entry) {
	t.mu.Lock()
	t.nsAddLocked(k.Namespace, -e.length)
	if s := t.segs[e.seg]; s != nil {
		s.live -= e.extent()
		s.liveCount--
	}
	t.mu.Unlock()
	t.st.liveBytes.Add(-e.extent())
	t.st.residentBytes.Add(-e.length)
	t.st.blocks.Add(-1)
}

// dropIf removes key's entry if it still names the same extent as e and
// cond (when set) holds for the current entry. It reports whether it did.
func (t *Tier) dropIf(k block.Key, e entry, cond func(cur entry) bool) (bool, error) {
	unlock := t.keyLock(k)
	defer unlock()
	cur, ok, err := t.lookup(k)
	if err != nil || !ok || !sameExtent(cur, e) || (cond != nil && !cond(cur)) {
		return false, err
	}
	ik := indexKey(k)
	if err := t.indexWrite(func(txn *badger.Txn) error { return txn.Delete(ik) }); err != nil {
		return false, fmt.Errorf("nvme: index delete %s: %w", k, err)
	}
	t.present.remove(ik) // after the key is gone (presence.go)
	t.unaccount(k, cur)
	return true, nil
}

// update rewrites key's entry with fn if it still names the same extent as e.
func (t *Tier) update(k block.Key, e entry, fn func(cur *entry)) (bool, error) {
	unlock := t.keyLock(k)
	defer unlock()
	cur, ok, err := t.lookup(k)
	if err != nil || !ok || !sameExtent(cur, e) {
		return false, err
	}
	fn(&cur)
	err = t.indexWrite(func(txn *badger.Txn) error { return txn.Set(indexKey(k), cur.encode()) })
	if err != nil {
		return false, fmt.Errorf("nvme: index update %s: %w", k, err)
	}
	return true, nil
}
