package dram

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/tiers/policy"
)

// ErrResident is Fill's answer when the key is already resident: nothing
// was written, and the caller reads the resident copy instead.
var ErrResident = errors.New("dram: block already resident")

// Filler writes a new block's bytes into slot, the block's pages (its
// length rounded up to PageSize, starting on a page boundary, so an
// O_DIRECT read may target it), and returns the block's CRC-32C and the
// xxh3-64 fingerprint of slot[:size], computed from the bytes as they lie
// in slot: that fingerprint is what every later read is verified against.
type Filler func(slot []byte) (sum uint32, fp uint64, err error)

// Put stores data under key. data must already match sum. A key that is
// present with identical bytes succeeds (and may extend its pin); a key with
// other bytes is block.ErrConflict.
func (t *Tier) Put(ctx context.Context, key block.Key, data []byte, sum uint32, opts block.PutOptions) error {
	return t.PutClean(ctx, key, data, sum, opts, false)
}

// PutClean is Put for a block that a lower tier already holds (written
// through, or promoted from below): evicting it later needs no demotion.
func (t *Tier) PutClean(ctx context.Context, key block.Key, data []byte, sum uint32, opts block.PutOptions, clean bool) error {
	size := int64(len(data))
	if err := t.checkSize(key, size); err != nil {
		return err
	}
	// The at-rest fingerprint is taken from the caller's bytes, which the
	// store verified against their CRC, so a fault during the copy is caught
	// on the first read.
	_, err := t.store(ctx, key, size, opts, storeMode{clean: clean, data: data, sum: sum}, func(slot []byte) (uint32, uint64, error) {
		copy(slot, data)
		return sum, xxh3.Hash(data), nil
	})
	return err
}

// Fill stores a size-byte block that a lower tier holds by letting fill
// write it straight into the block's pages (a promotion without a staging
// buffer and its copy), and returns a leased Ref on the new copy, as Get
// does for a reader that verifies: fill's own check of the bytes in the
// slot stands in for the tier's. retain > 0 arms the block's retain window
// (block.GetOptions.Retain of the read that promoted it). The block is
// clean: evicting it needs no demotion. A key already resident is
// ErrResident; an error from fill frees the pages and is returned as is.
func (t *Tier) Fill(ctx context.Context, key block.Key, size int64, opts block.PutOptions, retain time.Duration, fill Filler) (*block.Ref, error) {
	if err := t.checkSize(key, size); err != nil {
		return nil, err
	}
	return t.store(ctx, key, size, opts, storeMode{clean: true, lease: true, retain: retain}, fill)
}

func (t *Tier) checkSize(key block.Key, size int64) error {
	if size <= 0 {
		return fmt.Errorf("%w: empty block", block.ErrInvalidArgument)
	}
	if size > t.cfg.MaxBlockSize {
		return fmt.Errorf("%w: %s: %d bytes exceeds the dram tier's max block size %d", block.ErrTooLarge, key, size, t.cfg.MaxBlockSize)
	}
	return nil
}

// storeMode is how store treats a block: clean (a lower tier holds it),
// data and sum (a put's bytes and checksum, compared with a resident copy
// of the key; data is nil for Fill, which answers ErrResident instead),
// lease (return a leased Ref on the new block) and retain (its retain
// window, with lease).
type storeMode struct {
	clean  bool
	data   []byte
	sum    uint32
	lease  bool
	retain time.Duration
}

// store reserves size bytes for key, lets fill write them outside the
// lock, and indexes the block.
func (t *Tier) store(ctx context.Context, key block.Key, size int64, opts block.PutOptions, m storeMode, fill Filler) (*block.Ref, error) {
	now := t.now()
	pinUntil := int64(0)
	if opts.PinTTL > 0 {
		pinUntil = now.Add(opts.PinTTL).UnixNano()
	}
	resident := func(h uint32) error {
		if m.data == nil {
			return fmt.Errorf("%w: %s", ErrResident, key)
		}
		return t.samePutLocked(h, m.data, m.sum, pinUntil)
	}

	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, block.ErrClosed
	}
	if h, ok := t.index[key]; ok {
		err := resident(h)
		t.mu.Unlock()
		return nil, err
	}
	page, pages, err := t.reserveLocked(ctx, key, size, t.putQuota(key.Namespace, &opts))
	if err != nil {
		t.mu.Unlock()
		return nil, err
	}
	// A quota eviction may have released the lock and let Close in.
	if !t.enterLocked() {
		t.mu.Unlock()
		return nil, block.ErrClosed
	}
	// A concurrent put of the same key may have won while a demotion had the lock released.
	if h, ok := t.index[key]; ok {
		t.freePagesLocked(page, pages)
		t.unchargeLocked(key.Namespace, size)
		err := resident(h)
		t.mu.Unlock()
		t.busy.Done()
		return nil, err
	}
	off := int64(page) * PageSize
	slot := t.arena[off : off+int64(pages)*PageSize : off+int64(pages)*PageSize]
	t.mu.Unlock()

	// Fill outside the lock: the pages are ours and invisible until
	// indexed, and the gate keeps Close from unmapping them meanwhile.
	sum, fp, ferr := fill(slot)
	t.busy.Done()

	t.mu.Lock()
	defer t.mu.Unlock()
	if ferr != nil {
		t.freePagesLocked(page, pages)
		t.unchargeLocked(key.Namespace, size)
		return nil, ferr
	}
	if t.closed {
		return nil, block.ErrClosed
	}
	if h, ok := t.index[key]; ok { // a concurrent put of the same key won
		t.freePagesLocked(page, pages)
		t.unchargeLocked(key.Namespace, size)
		return nil, resident(h)
	}
	h := t.newHandle()
	ns := now.UnixNano()
	e := t.entries.At(h)
	*e = entry{
		key: key, page: page, pages: pages, size: size, sum: sum, fp: fp, version: atomic.LoadUint64(&t.vers[page]),
		priority: min(opts.Priority, block.MaxPriority), live: true, tracked: true, clean: m.clean, never: opts.Reuse == block.ReuseNever,
		pinUntil: pinUntil, created: ns, access: ns,
	}
	if !opts.Expires.IsZero() {
		e.expires = opts.Expires.UnixNano()
	}
	t.index[key] = h
	t.linkLocked(h) // its bytes were charged by reserveLocked
	t.setClockLocked(ns)
	t.policy.Insert(policy.Handle(h), policy.Meta{
		Hash: key.Hash, Parent: opts.Parent, HasParent: opts.HasParent,
		Size: size, Priority: e.priority, Reuse: opts.Reuse, Retain: int64(opts.Retain),
		Session: sessionKey(key.Namespace, opts.Session),
	})
	t.st.residentBytes.Add(size)
	t.st.blocks.Add(1)
	t.st.puts.Add(1)
	if !m.lease {
		return nil, nil
	}
	e.leases++
	t.retainLocked(h, ns, m.retain)
	return t.fileRef(t.bytesOf(e), sum, h, off), nil
}

// samePutLocked handles a put of a key that is already resident.
func (t *Tier) samePutLocked(h uint32, data []byte, sum uint32, pinUntil int64) error {
	e := t.entries.At(h)
	if e.size != int64(len(data)) || e.sum != sum || !bytes.Equal(t.bytesOf(e), data) {
		return fmt.Errorf("%w: %s: resident block has %d bytes, crc32c %08x; put has %d bytes, crc32c %08x",
			block.ErrConflict, e.key, e.size, e.sum, len(data), sum)
	}
	e.pinUntil = max(e.pinUntil, pinUntil)
	return nil
}
