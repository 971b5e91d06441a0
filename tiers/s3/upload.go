package s3

import (
	"context"
	"fmt"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// pending is a block waiting in the upload buffer. Its bytes are a private
// copy, never modified, so Refs may share them.
type pending struct {
	key     block.Key
	data    []byte
	sum     uint32
	expires int64
	dead    bool // deleted (or replaced) while buffered
}

// openPack is a pack being filled (open) or waiting for upload (sealed).
type openPack struct {
	ns       string
	blocks   []*pending
	bytes    int64
	first    time.Time
	attempts int
	nextTry  time.Time
}

// Demote is the NVMe tier's OnEvict hook: it copies a cold block into the
// upload buffer and returns at once. A namespace that does not reach S3 is
// skipped, a block already in S3 is not uploaded twice, and a block that
// does not fit in the buffer (S3 slow or down) is dropped and counted.
func (t *Tier) Demote(key block.Key, data []byte, sum uint32) {
	pol := t.cfg.Policy(key.Namespace)
	if !pol.Enabled {
		t.st.skippedPolicy.Add(1)
		t.reportDrops([]block.Key{key})
		return
	}
	var expires int64
	if pol.TTL > 0 {
		expires = t.now().Add(pol.TTL).UnixNano()
	}
	if t.enqueue(key, data, sum, expires, false, 0) != nil {
		t.reportDrops([]block.Key{key})
	}
}

// Put buffers a block for upload like Demote (so the tier can serve as a
// tiers.Lower); opts.Expires, when set, bounds its life in S3 further.
func (t *Tier) Put(_ context.Context, key block.Key, data []byte, sum uint32, opts block.PutOptions) error {
	if int64(len(data)) > t.cfg.MaxBlockSize {
		return fmt.Errorf("%w: s3 tier: block %s of %d bytes above %d", block.ErrTooLarge, key, len(data), t.cfg.MaxBlockSize)
	}
	if opts.HasSum && block.Checksum(data) != sum {
		return fmt.Errorf("%w: s3 tier: %s", block.ErrChecksum, key)
	}
	pol := t.cfg.Policy(key.Namespace)
	if !pol.Enabled {
		t.st.skippedPolicy.Add(1)
		return nil
	}
	var expires int64
	if pol.TTL > 0 {
		expires = t.now().Add(pol.TTL).UnixNano()
	}
	if !opts.Expires.IsZero() && (expires == 0 || opts.Expires.UnixNano() < expires) {
		expires = opts.Expires.UnixNano()
	}
	if t.expiredLocked(expires) {
		return nil
	}
	var pin int64
	if opts.PinTTL > 0 {
		pin = t.now().Add(opts.PinTTL).UnixNano()
	}
	return t.enqueue(key, data, sum, expires, false, pin)
}

// enqueue copies a block into its namespace's open pack, first making room
// for it in its namespace's quota. force re-packs a block the index already
// has (compaction; no quota check: the bytes are the same). It returns nil
// when the block is (now or already) held; pin (UnixNano, 0 for none) keeps
// it from quota eviction.
func (t *Tier) enqueue(key block.Key, data []byte, sum uint32, expires int64, force bool, pin int64) error {
	n := int64(len(data))
	if n < 1 || n > t.cfg.MaxBlockSize {
		t.st.dropped.Add(1)
		return fmt.Errorf("%w: s3 tier: block %s of %d bytes (1..%d)", block.ErrInvalidArgument, key, n, t.cfg.MaxBlockSize)
	}
	var evicted []block.Key
	defer func() { t.reportDrops(evicted) }() // runs after the unlock below
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		t.st.dropped.Add(1)
		return block.ErrClosed
	}
	if p := t.pend[key]; p != nil && p.sum == sum && !force {
		t.st.duplicates.Add(1)
		t.touchLocked(key)
		t.pinLocked(key, pin)
		return nil
	}
	if l, ok := t.index[key]; ok && !force && l.sum == sum && l.length == n && !t.expiredLocked(l.expires) {
		t.st.duplicates.Add(1)
		t.touchLocked(key)
		t.pinLocked(key, pin)
		return nil
	}
	if t.buffer+n > t.cfg.MaxBuffer {
		t.st.dropped.Add(1)
		t.st.droppedBytes.Add(uint64(n))
		return fmt.Errorf("%w: s3 tier: upload buffer full", block.ErrNoSpace)
	}
	if !force {
		var err error
		if evicted, err = t.admitLocked(key, n); err != nil {
			return err
		}
	}
	p := &pending{key: key, data: append([]byte(nil), data...), sum: sum, expires: expires}
	if old := t.pend[key]; old != nil {
		old.dead = true
	}
	t.pend[key] = p
	t.syncHeldLocked(key)
	t.touchLocked(key)
	t.pinLocked(key, pin)
	t.buffer += n
	if !force {
		t.st.demoted.Add(1)
		t.st.demotedBytes.Add(uint64(n))
	}
	if t.cfg.SoloSize > 0 && n >= t.cfg.SoloSize {
		// A large block goes alone; the namespace's open pack stays open.
		t.sealLocked(&openPack{ns: key.Namespace, first: t.now(), blocks: []*pending{p}, bytes: n})
		return nil
	}
	op := t.open[key.Namespace]
	if op == nil {
		op = &openPack{ns: key.Namespace, first: t.now()}
		t.open[key.Namespace] = op
	}
	op.blocks = append(op.blocks, p)
	op.bytes += n
	if op.bytes >= t.cfg.PackSize || len(op.blocks) >= t.cfg.PackBlocks {
		t.sealLocked(op)
	}
	return nil
}

// sealLocked closes an open pack and queues it for upload.
func (t *Tier) sealLocked(op *openPack) {
	if t.open[op.ns] == op {
		delete(t.open, op.ns)
	}
	t.sealed = append(t.sealed, op)
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// uploader seals packs that waited FlushInterval and uploads sealed packs,
// retrying failures with backoff.
func (t *Tier) uploader() {
	defer t.wg.Done()
	tick := time.NewTicker(min(t.cfg.FlushInterval/4+time.Millisecond, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-t.kick:
		case <-tick.C:
		}
		t.sealDue(false)
		_ = t.uploadDue(context.Background(), false)
	}
}

// sealDue seals open packs older than FlushInterval (all of them if all).
func (t *Tier) sealDue(all bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	for _, op := range t.open {
		if all || now.Sub(op.first) >= t.cfg.FlushInterval {
			t.sealLocked(op)
		}
	}
}

// uploadDue uploads the sealed packs whose retry time has come (every one if
// all, ignoring backoff). It returns the last upload error.
func (t *Tier) uploadDue(ctx context.Context, all bool) error {
	t.uploadMu.Lock()
	defer t.uploadMu.Unlock()
	var last error
	for {
		t.mu.Lock()
		var op *openPack
		now := t.now()
		for i, s := range t.sealed {
			if all || !now.Before(s.nextTry) {
				op = s
				t.sealed = append(t.sealed[:i:i], t.sealed[i+1:]...)
				break
			}
		}
		t.mu.Unlock()
		if op == nil {
			return last
		}
		if err := t.upload(ctx, op); err != nil {
			last = err
			t.mu.Lock()
			op.attempts++
			backoff := t.cfg.RetryMin << min(op.attempts-1, 20)
			op.nextTry = t.now().Add(min(backoff, t.cfg.RetryMax))
			t.sealed = append(t.sealed, op)
			t.mu.Unlock()
			if all {
				return err
			}
			continue
		}
		select {
		case <-t.stop:
			if !all {
				return last
			}
		default:
		}
	}
}

// upload writes one sealed pack to S3 and indexes its blocks.
func (t *Tier) upload(ctx context.Context, op *openPack) error {
	created := t.now()
	t.mu.Lock()
	live := make([]*pending, 0, len(op.blocks))
	for _, p := range op.blocks {
		if !p.dead {
			live = append(live, p)
		}
	}
	t.mu.Unlock()
	if len(live) == 0 {
		t.release(op)
		return nil
	}
	var size int64
	entries := make([]packEntry, len(live))
	for i, p := range live {
		entries[i] = packEntry{Key: p.key, Off: size, Len: int64(len(p.data)), Sum: p.sum, Expires: p.expires}
		size += int64(len(p.data))
	}
	tail := encodeIndex(entries, created)
	body := make([]byte, 0, size+int64(len(tail)))
	for _, p := range live {
		body = append(body, p.data...)
	}
	body = append(body, tail...)
	name := t.packName(op.ns, created)
	uctx, cancel := context.WithTimeout(ctx, t.cfg.UploadTimeout)
	err := t.store.Put(uctx, name, body)
	cancel()
	if err != nil {
		t.st.uploadErrors.Add(1)
		t.brk.failure()
		t.log.Warn("s3 tier: pack upload failed; will retry", "pack", name, "blocks", len(live), "bytes", len(body), "attempt", op.attempts+1, "err", err)
		return fmt.Errorf("%w: s3 tier: upload %s: %v", block.ErrUnavailable, name, err)
	}
	t.brk.success()
	t.st.uploads.Add(1)
	t.st.uploadedBytes.Add(uint64(len(body)))
	rec := packRecord{name: name, size: int64(len(body)), created: created.UnixNano(), dataBytes: size, count: len(entries)}
	t.mu.Lock()
	// Index only the blocks that are still the buffered version of their key
	// (not deleted or replaced during the upload).
	current := make(map[block.Key]bool, len(live))
	for _, p := range live {
		current[p.key] = t.pend[p.key] == p && !p.dead
	}
	for _, e := range entries {
		if current[e.Key] {
			rec.entries = append(rec.entries, e)
		}
	}
	t.addPackLocked(rec, nil)
	t.journalLocked(encodePackRecord(rec), true)
	t.mu.Unlock()
	t.release(op)
	return nil
}

// release drops an uploaded (or emptied) pack's blocks from the buffer.
func (t *Tier) release(op *openPack) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range op.blocks {
		if t.pend[p.key] == p {
			delete(t.pend, p.key)
			t.syncHeldLocked(p.key)
		}
	}
	t.buffer -= op.bytes
}

// Flush seals every open pack and uploads every sealed one now, ignoring
// backoff; it returns the first upload error (the pack stays queued).
func (t *Tier) Flush(ctx context.Context) error {
	t.sealDue(true)
	return t.uploadDue(ctx, true)
}
