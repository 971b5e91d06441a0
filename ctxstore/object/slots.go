package object

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// A key's two slots. Its records live in the blocks whose hashes are h and
// h^1, h = xxh3 of the key under the namespace's salt (records written
// before generations existed are all in h, generation 0). Each record
// carries a generation; the key's value is the record of the key with the
// higher one. A replace puts the next generation into the free slot and only
// then retires the other, so at every moment of the index one of the two
// holds a whole version of the key: a reader that looks at both sees the old
// value or the new, never a miss and never a mix.

// readPasses bounds how many times readPair looks at both slots again when
// it found neither holding anything (see readPair).
const readPasses = 3

// slotKeys returns key's two slots in namespace n.
func (s *Store) slotKeys(n block.Namespace, key []byte) [2]block.Key {
	h := s.hash(n.TenantSalt, key)
	return [2]block.Key{block.NewKey(n.Name, h), block.NewKey(n.Name, h^1)}
}

// slot is what one slot held when it was read.
type slot struct {
	key block.Key
	ref *block.Ref // nil: empty
	rec record
	// foreign: the block is not an object record (an engine's KV block).
	foreign bool
}

func (sl *slot) release() {
	if sl.ref != nil {
		sl.ref.Release()
		sl.ref = nil
	}
}

// holds reports whether the slot holds a record of key (live or not).
func (sl *slot) holds(key []byte) bool {
	return sl.ref != nil && !sl.foreign && bytes.Equal(sl.rec.key, key)
}

// pair is a key's two slots as read.
type pair [2]slot

func (p *pair) release() {
	p[0].release()
	p[1].release()
}

// current returns the index of key's winning record in p (the higher
// generation, slot 0 on a tie), or -1 when neither slot holds key.
func (p *pair) current(key []byte) int {
	c := -1
	for i := range p {
		if p[i].holds(key) && (c < 0 || p[i].rec.gen > p[c].rec.gen) {
			c = i
		}
	}
	return c
}

// winner reports whether slot i of p holds a record that is its key's
// winning one (what current would pick for that key).
func (p *pair) winner(i int) bool {
	if p[i].ref == nil || p[i].foreign {
		return false
	}
	return p.current(p[i].rec.key) == i
}

// linearize makes this node's view current when lvl is
// ctxstore.ReadLinearizable (one sync, ctxstore.Store.Linearize) and returns
// the level the reads after it then use: ctxstore.ReadLocal.
func (s *Store) linearize(ctx context.Context, lvl ctxstore.ReadLevel) (ctxstore.ReadLevel, error) {
	opts, err := s.blocks.Linearize(ctx, ctxstore.ReadOptions{Level: lvl})
	return opts.Level, err
}

// readSlot reads one slot: an index lookup, then the block when present,
// both from this node's view (readPair made it current first when its
// caller asked) with n, bk's namespace as the caller resolved it.
func (s *Store) readSlot(ctx context.Context, n block.Namespace, bk block.Key) (slot, error) {
	sl := slot{key: bk}
	opts := ctxstore.ReadOptions{Level: ctxstore.ReadLocal, Namespace: n}
	ok, err := s.blocks.Exists(ctx, bk, opts)
	if err != nil || !ok {
		return sl, err
	}
	ref, err := s.blocks.Read(ctx, bk, opts)
	if errors.Is(err, block.ErrNotFound) {
		return sl, nil // retired since the lookup
	}
	if err != nil {
		return sl, err
	}
	sl.ref = ref
	r, derr := decodeRecord(ref.Data)
	sl.rec, sl.foreign = r, derr != nil
	return sl, nil
}

// readPair reads both slots of key. A replace puts before it deletes, so at
// every moment one slot holds the key; finding both empty, slot 0 then slot
// 1, means the key is absent or moved from slot 1 to slot 0 between the two
// reads. Each further pass that finds both empty needs two more moves in
// between, so after readPasses passes the key is absent unless it was
// replaced five times during the read. It reads at lvl (one sync for both
// slots and every pass at ctxstore.ReadLinearizable).
func (s *Store) readPair(ctx context.Context, n block.Namespace, k [2]block.Key, lvl ctxstore.ReadLevel) (pair, error) {
	if _, err := s.linearize(ctx, lvl); err != nil {
		return pair{}, err
	}
	var err error
	var p pair
	for range readPasses {
		for i := range k {
			if p[i], err = s.readSlot(ctx, n, k[i]); err != nil {
				p.release()
				return pair{}, err
			}
		}
		if p[0].ref != nil || p[1].ref != nil {
			break
		}
	}
	return p, nil
}

// take returns key's winning record in p as a Value when it is live, and
// releases the rest of p; otherwise block.ErrNotFound.
func (s *Store) take(p *pair, key []byte) (*Value, error) {
	defer p.release()
	c := p.current(key)
	if c < 0 {
		return nil, fmt.Errorf("%w: %s", block.ErrNotFound, p[0].key)
	}
	r := p[c].rec
	// (The clock is read only for a record that can expire.)
	if !r.expires.IsZero() && !r.live(s.now()) {
		return nil, fmt.Errorf("%w: %s expired", block.ErrNotFound, p[c].key)
	}
	ref := p[c].ref
	p[c].ref = nil
	return &Value{Key: r.key, Data: r.value, Expires: r.expires, ref: ref}, nil
}

// collision is the error for a key that may not be written because a slot
// of p holds a block that is not a record, or a live record of another key.
func collision(p *pair, n block.Namespace, key []byte, now time.Time) error {
	for i := range p {
		sl := &p[i]
		switch {
		case sl.ref == nil || sl.holds(key):
		case sl.foreign:
			return fmt.Errorf("%w: %q in namespace %q: its slot %s holds a block that is not an object record", ErrKeyCollision, key, n.Name, sl.key)
		case sl.rec.live(now):
			return fmt.Errorf("%w: %q in namespace %q", ErrKeyCollision, key, n.Name)
		}
	}
	return nil
}

// inTheWay returns the slot of p a writer of key must clear before it can
// put: an expired record of another key, or, when both slots hold key (a
// writer between its put and its delete, or one that stopped there), the
// lower generation. -1 when nothing is in the way.
func inTheWay(p *pair, key []byte) int {
	for i := range p {
		if p[i].ref != nil && !p[i].foreign && !p[i].holds(key) {
			return i // collision has seen that it is expired
		}
	}
	if c := p.current(key); c >= 0 && p[1-c].holds(key) {
		return 1 - c
	}
	return -1
}

// drop deletes the version sl holds (only that one: a newer block put in the
// slot since is kept) and releases sl. When sl held a record of key and
// this call's delete removed it, retired (if not nil) gets its value: of
// racing writers exactly one retires each version.
func (s *Store) drop(ctx context.Context, sl *slot, key []byte, retired func(value []byte)) error {
	sum := sl.ref.Sum
	var old []byte
	if retired != nil && sl.holds(key) {
		old = bytes.Clone(sl.rec.value)
	}
	sl.release()
	err := s.blocks.DeleteIf(ctx, sl.key, sum)
	switch {
	case err == nil:
		if old != nil {
			retired(old)
		}
		return nil
	case errors.Is(err, block.ErrNotFound):
		return nil // another writer retired it
	}
	return err
}

// decision is a writer's choice given key's current live record (nil when
// there is none): the value and expiry to write, or write false to change
// nothing. The record's bytes are valid only during the call.
type decision func(cur *record) (value []byte, expires time.Time, write bool, err error)

// replace writes key's next record as decide says, in the slot its current
// record is not in, then retires the current record. A put that finds its
// slot taken lost to another writer: replace reads both slots again and
// retries (Config.ReplaceAttempts rounds). retired, when not nil, gets the
// value of every record of key this call retired (the S3 layer frees the
// data blocks an old manifest names). It reports whether it wrote.
//
// strict reads the slots at the linearizable level from the first round
// (a condition must see every write acknowledged anywhere). Otherwise the
// first round reads this node's own view, which in a cluster may be behind:
// a generation chosen from a stale view can be lower than one already
// committed, so after its put the writer reads both slots again (its own
// put is applied by then, and with it everything committed before it) and,
// unless its record is the key's winning one, takes it back (withdraw) and
// starts over at the linearizable level. A plain SET thus costs no leader
// round trip.
func (s *Store) replace(ctx context.Context, n block.Namespace, key []byte, decide decision, retired func(value []byte), strict bool) (bool, error) {
	return s.replaceHinted(ctx, n, key, block.PutOptions{}, decide, retired, strict)
}

// replaceHinted is replace putting the record with agent hints hints
// (an S3 object's manifest, hints.go).
func (s *Store) replaceHinted(ctx context.Context, n block.Namespace, key []byte, hints block.PutOptions, decide decision, retired func(value []byte), strict bool) (bool, error) {
	k := s.slotKeys(n, key)
	bg := context.WithoutCancel(ctx)
	for round := range s.cfg.ReplaceAttempts {
		lvl := ctxstore.ReadLocal
		if strict || round > 0 {
			lvl = ctxstore.ReadLinearizable
		}
		p, err := s.readPair(ctx, n, k, lvl)
		if err != nil {
			return false, err
		}
		now := s.now()
		if err := collision(&p, n, key, now); err != nil {
			p.release()
			return false, err
		}
		if i := inTheWay(&p, key); i >= 0 {
			err := s.drop(bg, &p[i], key, retired)
			p.release()
			if err != nil {
				return false, err
			}
			continue
		}
		c := p.current(key)
		var cur *record
		if c >= 0 && p[c].rec.live(now) {
			cur = &p[c].rec
		}
		value, expires, write, err := decide(cur)
		if err != nil || !write {
			p.release()
			return false, err
		}
		target, gen := 0, uint64(1)
		if c >= 0 {
			target, gen = 1-c, p[c].rec.gen+1
		}
		rec := encodeRecord(key, value, expires, gen)
		err = s.blocks.Put(ctx, k[target], rec, withHints(hints, expires))
		if errors.Is(err, block.ErrConflict) {
			p.release()
			continue // another writer took the slot: read again
		}
		if err != nil {
			p.release()
			return false, err
		}
		if lvl != ctxstore.ReadLinearizable {
			won, err := s.wins(ctx, n, k, key, target)
			if err != nil {
				p.release()
				return false, err
			}
			if !won {
				p.release()
				switch removed, err := s.withdraw(bg, k[target], rec); {
				case err != nil:
					return false, err
				case removed:
					continue // again, linearizable
				}
				return true, nil // superseded by a later writer: done
			}
		}
		if c >= 0 {
			// The new record is in and wins; a failure to retire the old
			// one leaves it to the next writer or DELETE of the key (both
			// clear the lower generation first) and to the tiers.
			_ = s.drop(bg, &p[c], key, retired)
		}
		p.release()
		return true, nil
	}
	return false, fmt.Errorf("%w: %q in namespace %q: concurrent writers kept replacing it", block.ErrUnavailable, key, n.Name)
}

// withdraw removes rec, a record this writer put in slot sk that turned out
// not to be the key's winning one (its generation was chosen from a stale
// view, or a later writer already replaced it), before the writer tries
// again. It reports whether it removed it. When it is already gone, another
// writer dropped it as a replaced or in-the-way record and retired what it
// names (an object's data blocks): the writer must not write the same value
// again, which would name retired blocks and retire them a second time. It
// counts as written then, ordered before the write of the one that removed
// it (that writer's put or delete was running before this call returns).
// Any other failure is returned: the record, not the winning one, is left
// to the next writer of the key, as a failed retirement is.
func (s *Store) withdraw(ctx context.Context, sk block.Key, rec []byte) (bool, error) {
	err := s.blocks.DeleteIf(ctx, sk, block.Checksum(rec))
	if errors.Is(err, block.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// wins reports whether slot target holds key's winning record, read from
// this node's view.
func (s *Store) wins(ctx context.Context, n block.Namespace, k [2]block.Key, key []byte, target int) (bool, error) {
	p, err := s.readPair(ctx, n, k, ctxstore.ReadLocal)
	if err != nil {
		return false, err
	}
	defer p.release()
	return p.current(key) == target, nil
}

// deleteKey removes every record of key, the lower generation first, so a
// reader never sees an older value come back; retired gets the value of
// each record this call removed. It reports whether the key's winning
// record was live. It reads the slots from this node's view.
func (s *Store) deleteKey(ctx context.Context, n block.Namespace, key []byte, retired func(value []byte)) (bool, error) {
	p, err := s.readPair(ctx, n, s.slotKeys(n, key), ctxstore.ReadLocal)
	if err != nil {
		return false, err
	}
	defer p.release()
	c := p.current(key)
	if c < 0 {
		return false, nil
	}
	live := p[c].rec.live(s.now())
	for _, i := range [2]int{1 - c, c} {
		if p[i].holds(key) {
			if err := s.drop(ctx, &p[i], key, retired); err != nil {
				return false, err
			}
		}
	}
	return live, nil
}

// present reports whether either slot of key is occupied in the index
// (by anything: a cheap probe before reading), in this node's view.
func (s *Store) present(ctx context.Context, n block.Namespace, key []byte) (bool, error) {
	for _, bk := range s.slotKeys(n, key) {
		if ok, err := s.blocks.Exists(ctx, bk, ctxstore.ReadOptions{Level: ctxstore.ReadLocal, Namespace: n}); err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// pastSlot is a listing's "after" bound that skips slot h and the data
// blocks named "h.N" beside it ('/' sorts after '.' and before the digits
// of the next hash), so a cursor never lists the same blocks again.
func pastSlot(h uint64) string { return block.FormatHash(h) + "/" }

// eachWinner reads the pairs of slots that the listed blocks touch and calls
// fn with every record there that is its key's winning one and live at now,
// each key once per pair. It returns whether the page's last pair was read
// (so a listing can continue after its second slot). It reads this node's
// view: its caller syncs first when asked for ctxstore.ReadLinearizable.
func (s *Store) eachWinner(ctx context.Context, n block.Namespace, infos []block.Info, now time.Time, fn func(r record) error) (bool, error) {
	lastRead := false
	for i := 0; i < len(infos); i++ {
		in := infos[i]
		lastRead = false
		if in.Key.HasPart {
			continue // a data block
		}
		h := in.Key.Hash &^ 1
		for i+1 < len(infos) && infos[i+1].Key.Hash&^1 == h {
			i++ // the pair's other slot, or data blocks beside it
		}
		lastRead = true
		// Read as a key's pair is (readPair), so a key that moves from one
		// slot to the other between the two reads is not missed.
		p, err := s.readPair(ctx, n, [2]block.Key{block.NewKey(n.Name, h), block.NewKey(n.Name, h|1)}, ctxstore.ReadLocal)
		if err != nil {
			return false, err
		}
		for j := range p {
			if err == nil && p.winner(j) && p[j].rec.live(now) {
				err = fn(p[j].rec)
			}
		}
		p.release()
		if err != nil {
			return false, err
		}
	}
	return lastRead, nil
}
