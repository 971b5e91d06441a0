package client

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
)

// PutItem is one block of a PutBatch.
type PutItem struct {
	Key  block.Key
	Data []byte
	// Opts: Sum (with HasSum) is sent as given, which lets a caller that
	// already knows the checksum skip computing it; otherwise the client
	// computes it. Priority, PinTTL (millisecond resolution) and Parent are
	// sent when set, and so are the agent hints Reuse and Retain
	// (millisecond resolution, rounded up) to a server that reads them
	// (HintsAccepted); an older server gets the block without them.
	Opts block.PutOptions
}

// Ping round-trips an empty frame.
func (c *Client) Ping(ctx context.Context) error {
	nc, err := c.conn(ctx)
	if err != nil {
		return err
	}
	cl := &call{op: wire.OpPing}
	if err := nc.start(cl, make([]byte, wire.HeaderSize), nil, 0); err != nil {
		return err
	}
	resp, err := nc.wait(ctx, cl)
	if err != nil {
		return err
	}
	return resp.Code.Err(resp.Message)
}

// Put stores one block.
func (c *Client) Put(ctx context.Context, key block.Key, data []byte) error {
	return c.PutWithOptions(ctx, key, data, block.PutOptions{})
}

// PutWithOptions stores one block with options.
func (c *Client) PutWithOptions(ctx context.Context, key block.Key, data []byte, opts block.PutOptions) error {
	errs, err := c.PutBatch(ctx, []PutItem{{Key: key, Data: data, Opts: opts}})
	if err != nil {
		return err
	}
	return errs[0]
}

// PutBatch stores blocks, as few frames as the server's limits allow (one
// frame per namespace run), pipelined. errs[i] is item i's result. err is
// not nil when some frame got no per-item answer (a broken connection, a
// refused request); its items then carry that error too. Blocks larger than
// the server's MaxBlockSize fail locally with block.ErrTooLarge.
func (c *Client) PutBatch(ctx context.Context, items []PutItem) (errs []error, err error) {
	errs = make([]error, len(items))
	send, hinted, sessions := wire.CheckPutItems(c.limits, len(items), func(i int) (block.Key, int, block.PutOptions) {
		return items[i].Key, len(items[i].Data), items[i].Opts
	}, errs)
	itemHead := wire.PutItemHead(hinted, sessions)
	chs := c.chunks(len(send),
		func(j int) string { return items[send[j]].Key.Namespace },
		func(j int) int64 { return itemHead + int64(len(items[send[j]].Data)) })
	fl := make([]flight, len(chs))
	for j, ch := range chs {
		f := &fl[j]
		f.ch = ch
		if f.nc, f.err = c.conn(ctx); f.err != nil {
			continue
		}
		ns := items[send[ch.lo]].Key.Namespace
		var flags uint8
		if hinted && f.nc.hints {
			flags = wire.FlagPutHints
			if sessions && f.nc.sessions {
				flags |= wire.FlagPutSession
			}
		}
		head := make([]byte, wire.HeaderSize, wire.HeaderSize+1+len(ns)+(ch.hi-ch.lo)*int(itemHead))
		head = wire.AppendNamespace(head, ns)
		segs := make(net.Buffers, 0, 2*(ch.hi-ch.lo)+1)
		prev := 0
		var payload int64
		for _, i := range send[ch.lo:ch.hi] {
			it := &items[i]
			sum := it.Opts.Sum
			if !it.Opts.HasSum {
				sum = block.Checksum(it.Data)
			}
			head = wire.AppendPutItem(head, it.Key, sum, uint32(len(it.Data)), it.Opts)
			if flags&wire.FlagPutHints != 0 {
				head = wire.AppendPutHints(head, it.Opts)
			}
			if flags&wire.FlagPutSession != 0 {
				head = wire.AppendPutSession(head, it.Opts.Session)
			}
			if len(it.Data) > 0 {
				segs = append(segs, head[prev:], it.Data)
				// head may still grow (and move): re-slice at the end.
				prev = len(head)
				payload += int64(len(it.Data))
			}
		}
		segs = resliceSegs(segs, head)
		f.cl = &call{op: wire.OpPut, flags: flags, count: uint32(ch.hi - ch.lo)}
		f.err = f.nc.start(f.cl, head, segs, payload)
	}
	err = c.collect(ctx, fl, func(j int) int { return send[j] }, errs, nil)
	return errs, err
}

// HintsAccepted reports whether the server reads the agent hints of puts
// (it echoed wire.HelloPutHints on a connection of this client); false
// also before any connection is up.
func (c *Client) HintsAccepted() bool {
	for _, s := range c.slots {
		s.mu.Lock()
		nc := s.c
		s.mu.Unlock()
		if nc != nil {
			return nc.hints
		}
	}
	return false
}

// resliceSegs rebuilds the head slices of segs (even positions, recorded as
// prefixes of an earlier head whose capacity was reserved up front) against
// the final head, and appends head's tail.
func resliceSegs(segs net.Buffers, head []byte) net.Buffers {
	off := 0
	for k := 0; k < len(segs); k += 2 {
		n := len(segs[k])
		segs[k] = head[off : off+n]
		off += n
	}
	if off < len(head) {
		segs = append(segs, head[off:])
	}
	return segs
}

// flight is one frame of a batch in flight.
type flight struct {
	ch  chunk
	nc  *nconn
	cl  *call
	err error
}

// collect waits for every frame of a batch and spreads the answers into
// errs (index idx(j) for the frame's j-th item); each, when not nil, sees
// every OK item result.
func (c *Client) collect(ctx context.Context, fl []flight, idx func(j int) int, errs []error, each func(i int, it *wire.ItemResult) error) error {
	var first error
	for k := range fl {
		f := &fl[k]
		var resp *wire.Response
		if f.err == nil {
			resp, f.err = f.nc.wait(ctx, f.cl)
		}
		if f.err == nil && resp.Code != errcode.OK {
			f.err = resp.Code.Err(resp.Message)
		}
		if f.err != nil {
			for j := f.ch.lo; j < f.ch.hi; j++ {
				errs[idx(j)] = f.err
			}
			if first == nil {
				first = f.err
			}
			continue
		}
		for j := range resp.Items {
			it := &resp.Items[j]
			i := idx(f.ch.lo + j)
			if it.Code != errcode.OK {
				errs[i] = it.Code.Err(it.Message)
				continue
			}
			if each != nil {
				errs[i] = each(i, it)
			}
		}
	}
	return first
}

func identity(j int) int { return j }

// keyOp sends a key-only request (GET, EXISTS, DELETE, PIN) for keys, in
// pipelined frames. atRest (GET only) sets wire.FlagVerifyAtRest on frames
// sent over a connection whose server knows it.
func (c *Client) keyOp(ctx context.Context, op wire.Op, keys []block.Key, ttl time.Duration, atRest bool, dest func(lo int) wire.Dest, each func(i int, it *wire.ItemResult) error) ([]error, error) {
	errs := make([]error, len(keys))
	chs := c.chunks(len(keys), func(i int) string { return keys[i].Namespace }, nil)
	fl := make([]flight, len(chs))
	for j, ch := range chs {
		f := &fl[j]
		f.ch = ch
		if f.nc, f.err = c.conn(ctx); f.err != nil {
			continue
		}
		f.cl = &call{op: op, flags: frameFlags(ctx, op), count: uint32(ch.hi - ch.lo)}
		if atRest && f.nc.declared {
			f.cl.flags |= wire.FlagVerifyAtRest
		}
		if dest != nil {
			f.cl.dest = dest(ch.lo)
		}
		retain := readRetain(ctx, op, f.nc)
		if retain > 0 {
			f.cl.flags |= wire.FlagReadHints
		}
		f.err = f.nc.start(f.cl, keyFrame(op, keys[ch.lo:ch.hi], ttl, retain), nil, 0)
	}
	return errs, c.collect(ctx, fl, identity, errs, each)
}

// keyFrame encodes a key-only request with room for its header.
func keyFrame(op wire.Op, keys []block.Key, ttl, retain time.Duration) []byte {
	ns := ""
	if len(keys) > 0 {
		ns = keys[0].Namespace
	}
	b := make([]byte, wire.HeaderSize, wire.HeaderSize+1+len(ns)+8+len(keys)*wire.KeySize)
	b = wire.AppendNamespace(b, ns)
	if retain > 0 {
		b = wire.AppendReadHints(b, retain)
	}
	if op == wire.OpPin {
		ms := (ttl + time.Millisecond - 1) / time.Millisecond
		b = binary.LittleEndian.AppendUint64(b, uint64(max(ms, 0)))
	}
	for _, k := range keys {
		b = wire.AppendKey(b, k)
	}
	return b
}

// Get fetches one block into a new slice.
func (c *Client) Get(ctx context.Context, key block.Key) ([]byte, error) {
	out, errs, err := c.GetBatch(ctx, []block.Key{key})
	if err != nil {
		return nil, err
	}
	return out[0], errs[0]
}

// GetSum fetches one block like Get and also returns its CRC-32C: the
// checksum the server recorded at put time, which the received bytes were
// checked against as they arrived (see getVerified). A caller that needs
// the block to match a known checksum compares the returned one instead of
// summing the bytes a second time.
func (c *Client) GetSum(ctx context.Context, key block.Key) ([]byte, uint32, error) {
	var (
		data []byte
		sum  uint32
	)
	errs, err := c.getVerified(ctx, []block.Key{key}, nil, func(_ int, it *wire.ItemResult) error {
		data, sum = it.Data, it.Sum
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	if errs[0] != nil {
		return nil, 0, errs[0]
	}
	return data, sum, nil
}

// GetInto fetches one block straight from the socket into buf and returns
// its size. A block larger than buf is block.ErrTooLarge (its bytes are
// read past; the connection stays usable).
func (c *Client) GetInto(ctx context.Context, key block.Key, buf []byte) (int, error) {
	if buf == nil {
		buf = []byte{}
	}
	ns, errs, err := c.GetBatchInto(ctx, []block.Key{key}, [][]byte{buf})
	if err != nil {
		return 0, err
	}
	return ns[0], errs[0]
}

// GetBatch fetches blocks into new slices; out[i] is nil where errs[i] is
// not. err is as for PutBatch. Every block is checked against its CRC-32C
// (see getVerified).
func (c *Client) GetBatch(ctx context.Context, keys []block.Key) (out [][]byte, errs []error, err error) {
	out = make([][]byte, len(keys))
	errs, err = c.getVerified(ctx, keys, nil, func(i int, it *wire.ItemResult) error {
		out[i] = it.Data
		return nil
	})
	return out, errs, err
}

// GetBatchInto fetches block i straight into bufs[i] (nil: a new slice is
// allocated) and returns the sizes. A block larger than its non-nil buffer
// is block.ErrTooLarge. Every block is checked against its CRC-32C (see
// getVerified); where errs[i] is not nil, bufs[i] may hold any bytes.
func (c *Client) GetBatchInto(ctx context.Context, keys []block.Key, bufs [][]byte) (sizes []int, errs []error, err error) {
	if len(bufs) != len(keys) {
		return nil, nil, fmt.Errorf("%w: %d buffers for %d keys", block.ErrInvalidArgument, len(bufs), len(keys))
	}
	sizes = make([]int, len(keys))
	errs, err = c.getVerified(ctx, keys, bufs, func(i int, it *wire.ItemResult) error {
		sizes[i] = int(it.Size)
		return nil
	})
	return sizes, errs, err
}

// getVerified GETs keys (into bufs[i] when bufs is not nil) and calls ok
// for each block whose bytes match the CRC-32C the server recorded at put
// time. A block that does not match is never handed to ok: it is read once
// more with wire.FlagVerifyAtRest, so the server's tier verifies it at rest
// (the connection declared that this client verifies, so the first read
// skipped that). A block corrupt at rest is then dropped by the tier and
// answered with the server's error; one that went wrong on the way arrives
// intact the second time; a second mismatch is block.ErrChecksum.
func (c *Client) getVerified(ctx context.Context, keys []block.Key, bufs [][]byte, ok func(i int, it *wire.ItemResult) error) ([]error, error) {
	var bad []int // collect calls each in order, on this goroutine
	errs, err := c.keyOp(ctx, wire.OpGet, keys, 0, false, bufDest(bufs), func(i int, it *wire.ItemResult) error {
		if it.Skipped {
			return tooSmall(keys[i], it, bufs[i])
		}
		if err := verify(keys[i], it); err != nil {
			bad = append(bad, i)
			return err
		}
		return ok(i, it)
	})
	if len(bad) == 0 {
		return errs, err
	}
	rkeys := make([]block.Key, len(bad))
	var rbufs [][]byte
	if bufs != nil {
		rbufs = make([][]byte, len(bad))
	}
	for j, i := range bad {
		rkeys[j] = keys[i]
		if bufs != nil {
			rbufs[j] = bufs[i]
		}
	}
	rerrs, rerr := c.keyOp(ctx, wire.OpGet, rkeys, 0, true, bufDest(rbufs), func(j int, it *wire.ItemResult) error {
		if it.Skipped {
			return tooSmall(rkeys[j], it, rbufs[j])
		}
		if err := verify(rkeys[j], it); err != nil {
			return err
		}
		return ok(bad[j], it)
	})
	for j, i := range bad {
		errs[i] = rerrs[j]
	}
	if err == nil {
		err = rerr
	}
	return errs, err
}

// tooSmall is the error of a block whose bytes were skipped because buf
// (only a non-nil buffer can be too small) could not hold them.
func tooSmall(k block.Key, it *wire.ItemResult, buf []byte) error {
	return fmt.Errorf("%w: %s: block is %d bytes, buffer %d", block.ErrTooLarge, k, it.Size, len(buf))
}

// bufDest is the wire.Dest of a GET batch into bufs (nil: new slices).
func bufDest(bufs [][]byte) func(lo int) wire.Dest {
	if bufs == nil {
		return nil
	}
	return func(lo int) wire.Dest {
		return func(j int, _ uint32) []byte { return bufs[lo+j] }
	}
}

// verify checks a received block (summed as it was read) against the
// checksum the server sent.
func verify(k block.Key, it *wire.ItemResult) error {
	if got := it.DataSum; got != it.Sum {
		return fmt.Errorf("%w: %s: received bytes are %08x, server says %08x", block.ErrChecksum, k, got, it.Sum)
	}
	return nil
}

// Exists reports whether a block is present.
func (c *Client) Exists(ctx context.Context, key block.Key) (bool, error) {
	ok, errs, err := c.ExistsBatch(ctx, []block.Key{key})
	if err != nil {
		return false, err
	}
	return ok[0], errs[0]
}

// ExistsBatch reports the presence of each block.
func (c *Client) ExistsBatch(ctx context.Context, keys []block.Key) (present []bool, errs []error, err error) {
	present = make([]bool, len(keys))
	errs, err = c.keyOp(ctx, wire.OpExists, keys, 0, false, nil, func(i int, it *wire.ItemResult) error {
		present[i] = it.Present
		return nil
	})
	return present, errs, err
}

// Delete evicts a block (block.ErrNotFound if absent).
func (c *Client) Delete(ctx context.Context, key block.Key) error {
	errs, err := c.DeleteBatch(ctx, []block.Key{key})
	if err != nil {
		return err
	}
	return errs[0]
}

// DeleteBatch evicts blocks.
func (c *Client) DeleteBatch(ctx context.Context, keys []block.Key) ([]error, error) {
	return c.keyOp(ctx, wire.OpDelete, keys, 0, false, nil, nil)
}

// DeleteIf deletes a block only while the server holds the bytes whose
// CRC-32C is sum (DELETE_IF): block.ErrNotFound, changing nothing, when it
// is absent or holds other bytes. A server older than DELETE_IF answers
// errcode.ErrMalformedFrame and keeps the connection.
func (c *Client) DeleteIf(ctx context.Context, key block.Key, sum uint32) error {
	errs := make([]error, 1)
	fl := []flight{{ch: chunk{lo: 0, hi: 1}}}
	f := &fl[0]
	if f.nc, f.err = c.conn(ctx); f.err == nil {
		f.cl = &call{op: wire.OpDeleteIf, count: 1}
		b := make([]byte, wire.HeaderSize, wire.HeaderSize+1+len(key.Namespace)+wire.DeleteIfItemSize)
		b = wire.AppendDeleteIfItem(wire.AppendNamespace(b, key.Namespace), key, sum)
		f.err = f.nc.start(f.cl, b, nil, 0)
	}
	if err := c.collect(ctx, fl, identity, errs, nil); err != nil {
		return err
	}
	return errs[0]
}

// Pin protects a block from eviction for ttl (millisecond resolution,
// capped by the server).
func (c *Client) Pin(ctx context.Context, key block.Key, ttl time.Duration) error {
	errs, err := c.PinBatch(ctx, []block.Key{key}, ttl)
	if err != nil {
		return err
	}
	return errs[0]
}

// PinBatch pins blocks for ttl.
func (c *Client) PinBatch(ctx context.Context, keys []block.Key, ttl time.Duration) ([]error, error) {
	return c.keyOp(ctx, wire.OpPin, keys, ttl, false, nil, nil)
}

// Lookup returns how many leading keys are present, stopping at the first
// miss: the prefix an engine can fetch instead of recompute. Keys past the
// server's MaxBatch are looked up in further frames only while every key so
// far was present.
func (c *Client) Lookup(ctx context.Context, keys []block.Key) (int, error) {
	total := 0
	for _, ch := range c.chunks(len(keys), func(i int) string { return keys[i].Namespace }, nil) {
		nc, err := c.conn(ctx)
		if err != nil {
			return total, err
		}
		cl := &call{op: wire.OpLookup, flags: frameFlags(ctx, wire.OpLookup), count: uint32(ch.hi - ch.lo)}
		retain := readRetain(ctx, wire.OpLookup, nc)
		if retain > 0 {
			cl.flags |= wire.FlagReadHints
		}
		if err := nc.start(cl, keyFrame(wire.OpLookup, keys[ch.lo:ch.hi], 0, retain), nil, 0); err != nil {
			return total, err
		}
		resp, err := nc.wait(ctx, cl)
		if err != nil {
			return total, err
		}
		if resp.Code != errcode.OK {
			return total, resp.Code.Err(resp.Message)
		}
		if resp.Present > uint32(ch.hi-ch.lo) {
			return total, errcode.MalformedFrame.Err(fmt.Sprintf("lookup answered %d present of %d keys", resp.Present, ch.hi-ch.lo))
		}
		total += int(resp.Present)
		if int(resp.Present) < ch.hi-ch.lo {
			break
		}
	}
	return total, nil
}
