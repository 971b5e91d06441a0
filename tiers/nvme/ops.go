package nvme

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/descriptor"
)

// claim makes the caller the only put of key in flight, waiting for others.
func (t *Tier) claim(ctx context.Context, k block.Key) (func(), error) {
	for {
		t.mu.Lock()
		ch, busy := t.inflight[k]
		if !busy {
			ch = make(chan struct{})
			t.inflight[k] = ch
			t.mu.Unlock()
			return func() {
				t.mu.Lock()
				delete(t.inflight, k)
				t.mu.Unlock()
				close(ch)
			}, nil
		}
		t.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func validKey(k block.Key) error {
	if n := len(k.Namespace); n == 0 || n > block.MaxNamespaceLen {
		return fmt.Errorf("%w: namespace of %q must be 1..%d bytes", block.ErrInvalidKey, k.Namespace, block.MaxNamespaceLen)
	}
	return nil
}

// Put stores data under key. data must already match sum. A key that is
// present with identical bytes succeeds (and may extend its pin); a key with
// other bytes is block.ErrConflict. Put returns once the extent is written
// and indexed (and, with SyncWrites, flushed).
func (t *Tier) Put(ctx context.Context, key block.Key, data []byte, sum uint32, opts block.PutOptions) error {
	size := int64(len(data))
	switch {
	case size == 0:
		return fmt.Errorf("%w: empty block", block.ErrInvalidArgument)
	case size > t.cfg.MaxBlockSize:
		return fmt.Errorf("%w: %s: %d bytes exceeds the nvme tier's max block size %d", block.ErrTooLarge, key, size, t.cfg.MaxBlockSize)
	}
	if err := validKey(key); err != nil {
		return err
	}
	if err := t.enter(); err != nil {
		return err
	}
	defer t.leave()
	start := t.now()
	pinUntil := int64(0)
	if opts.PinTTL > 0 {
		pinUntil = start.Add(opts.PinTTL).UnixNano()
	}
	done, err := t.claim(ctx, key)
	if err != nil {
		return err
	}
	defer done()

	if e, ok, err := t.lookup(key); err != nil {
		return err
	} else if ok && !t.expired(e, start.UnixNano()) {
		if handled, err := t.samePut(key, e, data, sum, pinUntil); handled || err != nil {
			return err
		}
	} else if ok {
		if _, err := t.dropIf(key, e, nil); err != nil {
			return err
		}
		t.st.expirations.Add(1)
	}

	release, err := t.admitQuota(ctx, key, size, &opts)
	if err != nil {
		return err
	}
	defer release()
	ext := descriptor.ExtentLen(size)
	t.wmu.Lock()
	r, err := t.reserve(ctx, ext, false)
	t.wmu.Unlock()
	if err != nil {
		return err
	}
	defer t.finish(r)
	h := header{
		Key: key, Priority: min(opts.Priority, block.MaxPriority), Sum: sum, Length: size, Gen: r.gen, Created: start.UnixNano(),
	}
	if !opts.Expires.IsZero() {
		h.Expires = opts.Expires.UnixNano()
	}
	if err := t.writeExtent(r, &h, data); err != nil {
		return err
	}
	e := entry{
		seg: r.seg.id, off: r.off, length: size, sum: sum, gen: r.gen, priority: h.Priority,
		created: h.Created, expires: h.Expires, pinUntil: pinUntil,
	}
	if _, err := t.commitNew(key, e, nil); err != nil {
		return err
	}
	t.st.puts.Add(1)
	t.writeLat.Observe(t.now().Sub(start).Seconds())
	return nil
}

// samePut handles a put of a key that is already indexed: the bytes are read
// back and compared, so a collision of length and CRC is still a conflict.
// It reports handled=false when the stored copy failed verification and was
// dropped, so the caller stores this one.
func (t *Tier) samePut(key block.Key, e entry, data []byte, sum uint32, pinUntil int64) (bool, error) {
	conflict := func() error {
		return fmt.Errorf("%w: %s: stored block has %d bytes, crc32c %08x; put has %d bytes, crc32c %08x",
			block.ErrConflict, key, e.length, e.sum, len(data), sum)
	}
	if e.length != int64(len(data)) || e.sum != sum {
		return true, conflict()
	}
	buf, err := t.readExtent(key, e)
	if err != nil {
		if !errors.Is(err, block.ErrChecksum) && !errors.Is(err, errGone) {
			return true, err
		}
		t.corrupt(key, e, err) // the stored copy is bad: drop it, store this one
		return false, nil
	}
	same := bytes.Equal(buf[HeaderSize:HeaderSize+e.length], data)
	t.pool.put(buf)
	if !same {
		return true, conflict()
	}
	if pinUntil > e.pinUntil {
		if _, err := t.update(key, e, func(c *entry) { c.pinUntil = max(c.pinUntil, pinUntil) }); err != nil {
			return true, err
		}
	}
	return true, nil
}

// corrupt drops an entry whose extent failed verification and counts it.
func (t *Tier) corrupt(key block.Key, e entry, cause error) {
	if dropped, _ := t.dropIf(key, e, nil); !dropped {
		return
	}
	if errors.Is(cause, errGone) {
		t.log.Warn("nvme index entry names a reclaimed segment; dropped", "key", key.String(), "segment", e.seg)
		return
	}
	t.st.corruptions.Add(1)
	t.log.Error("nvme block failed verification; dropped", "key", key.String(), "err", cause)
}

func (t *Tier) expired(e entry, now int64) bool { return e.expires != 0 && e.expires <= now }

// live returns key's unexpired entry, dropping it lazily if it expired.
func (t *Tier) live(key block.Key, now int64) (entry, bool, error) {
	e, ok, err := t.lookup(key)
	if err != nil || !ok {
		return entry{}, false, err
	}
	if t.expired(e, now) {
		if dropped, _ := t.dropIf(key, e, nil); dropped {
			t.st.expirations.Add(1)
		}
		return entry{}, false, nil
	}
	return e, true, nil
}

// Get returns the block's verified bytes, read with one aligned read into a
// pooled buffer that Release returns. A block that fails verification is
// dropped, counted, and reported as block.ErrNotFound.
func (t *Tier) Get(_ context.Context, key block.Key, _ block.GetOptions) (*block.Ref, error) {
	if err := t.enter(); err != nil {
		return nil, err
	}
	defer t.leave()
	start := t.now()
	for attempt := 0; ; attempt++ {
		e, ok, err := t.live(key, start.UnixNano())
		if err != nil {
			return nil, err
		}
		if !ok {
			t.st.misses.Add(1)
			return nil, fmt.Errorf("%w: %s", block.ErrNotFound, key)
		}
		buf, err := t.readExtent(key, e)
		if errors.Is(err, errGone) && attempt == 0 {
			continue // reclaimed between lookup and read: the entry may have moved
		}
		if err != nil {
			if !errors.Is(err, block.ErrChecksum) && !errors.Is(err, errGone) {
				return nil, err
			}
			t.corrupt(key, e, err)
			t.st.misses.Add(1)
			return nil, fmt.Errorf("%w: %s failed verification at rest and was dropped", block.ErrNotFound, key)
		}
		t.touch(key, e, start.UnixNano())
		t.st.hits.Add(1)
		t.readLat.Observe(t.now().Sub(start).Seconds())
		data := buf[HeaderSize : HeaderSize+e.length : HeaderSize+e.length]
		return block.NewRef(data, e.sum, block.TierNVMe, func() { t.pool.put(buf) }), nil
	}
}

// touch sets the entry's accessed flag (once per written generation), which
// makes reclamation re-append the block instead of dropping it.
func (t *Tier) touch(key block.Key, e entry, now int64) {
	if e.flags&flagAccessed != 0 {
		return
	}
	if t.lowSpace() {
		// Below the free-space floor the index takes no optional writes:
		// the block is served, only its hotness goes unrecorded.
		return
	}
	if _, err := t.update(key, e, func(c *entry) { c.flags |= flagAccessed; c.access = now }); err != nil {
		t.log.Warn("nvme: recording access failed", "key", key.String(), "err", err)
	}
}

// Stat returns a block's metadata without touching its recency.
func (t *Tier) Stat(_ context.Context, key block.Key) (block.Info, error) {
	if err := t.enter(); err != nil {
		return block.Info{}, err
	}
	defer t.leave()
	now := t.now().UnixNano()
	e, ok, err := t.live(key, now)
	if err != nil {
		return block.Info{}, err
	}
	if !ok {
		return block.Info{}, fmt.Errorf("%w: %s", block.ErrNotFound, key)
	}
	return info(key, e, now), nil
}

func info(k block.Key, e entry, now int64) block.Info {
	in := block.Info{
		Key: k, Size: e.length, Sum: e.sum, Tier: block.TierNVMe, Priority: e.priority,
		Created: time.Unix(0, e.created), LastAccess: time.Unix(0, max(e.access, e.created)),
	}
	if e.pinUntil > now {
		in.PinnedUntil = time.Unix(0, e.pinUntil)
	}
	return in
}

// Contains reports whether key is indexed and unexpired, without reading or
// verifying its bytes.
func (t *Tier) Contains(key block.Key) bool {
	if t.enter() != nil {
		return false
	}
	defer t.leave()
	e, ok, err := t.lookup(key)
	return err == nil && ok && !t.expired(e, t.now().UnixNano())
}

// Delete removes key from the index; its extent's space is reclaimed with
// its segment.
func (t *Tier) Delete(_ context.Context, key block.Key) error {
	if err := t.enter(); err != nil {
		return err
	}
	defer t.leave()
	for {
		e, ok, err := t.lookup(key)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: %s", block.ErrNotFound, key)
		}
		if dropped, err := t.dropIf(key, e, nil); err != nil || dropped {
			return err
		}
	}
}

// Pin protects key from eviction until the given time (never shortening a
// pin): reclamation re-appends a pinned block instead of dropping it.
func (t *Tier) Pin(_ context.Context, key block.Key, until time.Time) error {
	if err := t.enter(); err != nil {
		return err
	}
	defer t.leave()
	for {
		e, ok, err := t.live(key, t.now().UnixNano())
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: %s", block.ErrNotFound, key)
		}
		if e.pinUntil >= until.UnixNano() {
			return nil
		}
		done, err := t.update(key, e, func(c *entry) { c.pinUntil = max(c.pinUntil, until.UnixNano()) })
		if err != nil || done {
			return err
		}
	}
}

// List returns the metadata of up to limit blocks of namespace ns whose
// object names sort after `after` and start with prefix, in object-name
// order (limit <= 0 means all). It walks the index in key order from the
// first candidate hash, so it is an administrative call, not a data-path one.
func (t *Tier) List(_ context.Context, ns, prefix, after string, limit int) ([]block.Info, error) {
	if err := t.enter(); err != nil {
		return nil, err
	}
	defer t.leave()
	now := t.now().UnixNano()
	pfx := nsPrefix(ns)
	seek := append([]byte(nil), pfx...)
	var from uint64
	if h, err := block.ParseHash(padHex(after, '0')); err == nil {
		from = h
	}
	if hp := hexPrefix(prefix); hp != "" {
		if h, err := block.ParseHash(padHex(hp, '0')); err == nil {
			from = max(from, h)
		}
	}
	hp := hexPrefix(prefix)
	seek = appendBE(seek, from)
	var out []block.Info
	err := t.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = pfx
		it := txn.NewIterator(opts)
		defer it.Close()
		var lastHash uint64
		for it.Seek(seek); it.Valid(); it.Next() {
			k, ok := parseIndexKey(it.Item().Key())
			if !ok || k.Namespace != ns {
				continue
			}
			if hex := block.FormatHash(k.Hash); hp != "" && hex[:len(hp)] > hp {
				break
			}
			if limit > 0 && len(out) >= limit && k.Hash != lastHash {
				break
			}
			name := k.ObjectName()
			if name <= after || !strings.HasPrefix(name, prefix) {
				continue
			}
			var e entry
			if err := it.Item().Value(func(v []byte) error {
				var derr error
				e, derr = decodeEntry(v)
				return derr
			}); err != nil {
				return err
			}
			if t.expired(e, now) {
				continue
			}
			out = append(out, info(k, e, now))
			lastHash = k.Hash
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("nvme: list %s: %w", ns, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key.ObjectName() < out[j].Key.ObjectName() })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// hexPrefix is the leading run of lowercase hex digits of s, at most 16.
func hexPrefix(s string) string {
	i := 0
	for i < len(s) && i < block.HashHexLen && (s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
		i++
	}
	return s[:i]
}

// padHex pads the hex prefix of s to 16 digits with c.
func padHex(s string, c byte) string {
	h := hexPrefix(s)
	if h == "" {
		return ""
	}
	return h + strings.Repeat(string(c), block.HashHexLen-len(h))
}

func appendBE(b []byte, v uint64) []byte {
	return append(b, byte(v>>56), byte(v>>48), byte(v>>40), byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}
