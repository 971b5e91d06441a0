package peer

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
)

// frameHead returns a frame's first slice: room for the header, then the
// namespace, with capacity for extra more bytes.
func frameHead(ns string, extra int) []byte {
	b := make([]byte, wire.HeaderSize, wire.HeaderSize+1+len(ns)+extra)
	return wire.AppendNamespace(b, ns)
}

// itemErr is the outcome of item j of a decoded answer.
func itemErr(resp *wire.Response, j int) error {
	it := &resp.Items[j]
	return it.Code.Err(it.Message)
}

// keyOp sends a one-key GET, DELETE or PIN and returns the key's outcome
// (and, for a GET, its item). d is a PIN's TTL, and a GET's retain window
// (block.GetOptions.Retain; 0: none), sent as a read hint to a member that
// reads them.
func keyOp(ctx context.Context, l *link, op wire.Op, key block.Key, d time.Duration) error {
	_, err := keyRequest(ctx, l, op, key, d)
	return err
}

func keyRequest(ctx context.Context, l *link, op wire.Op, key block.Key, d time.Duration) (*wire.ItemResult, error) {
	c, err := l.conn()
	if err != nil {
		return nil, err
	}
	var flags uint8
	b := frameHead(key.Namespace, wire.ReadHintsSize+8+wire.KeySize)
	if op == wire.OpGet && c.sessions && d > 0 && block.ValidateRetain(d) == nil {
		flags |= wire.FlagReadHints
		b = wire.AppendReadHints(b, d)
	}
	if op == wire.OpPin {
		ms := (d + time.Millisecond - 1) / time.Millisecond
		b = binary.LittleEndian.AppendUint64(b, uint64(max(ms, 0)))
	}
	b = wire.AppendKey(b, key)
	resp, err := c.do(ctx, op, flags, 1, net.Buffers{b})
	if err != nil {
		return nil, err
	}
	if err := itemErr(resp, 0); err != nil {
		return nil, err
	}
	return &resp.Items[0], nil
}

// getVerified reads key and checks the bytes, summed as they arrived,
// against the CRC-32C the member stored with them. A mismatch is read once
// more (the serving tier verifies every shard read at rest, so a block
// corrupt there is dropped and answered with an error, and one that went
// wrong on the way arrives intact); a second mismatch is
// block.ErrChecksum. retain is the read's retain window (0: none).
func getVerified(ctx context.Context, l *link, key block.Key, retain time.Duration) ([]byte, uint32, error) {
	for try := 0; ; try++ {
		it, err := keyRequest(ctx, l, wire.OpGet, key, retain)
		if err != nil {
			return nil, 0, err
		}
		if it.DataSum == it.Sum {
			return it.Data, it.Sum, nil
		}
		if try == 1 {
			return nil, 0, fmt.Errorf("%w: %s: received bytes are %08x, peer says %08x", block.ErrChecksum, key, it.DataSum, it.Sum)
		}
	}
}

// deleteIf sends one DELETE_IF.
func deleteIf(ctx context.Context, l *link, key block.Key, sum uint32) error {
	c, err := l.conn()
	if err != nil {
		return err
	}
	b := wire.AppendDeleteIfItem(frameHead(key.Namespace, wire.DeleteIfItemSize), key, sum)
	resp, err := c.do(ctx, wire.OpDeleteIf, 0, 1, net.Buffers{b})
	if err != nil {
		return err
	}
	return itemErr(resp, 0)
}

// putFrame is one batch put frame in flight: shards idx[lo:hi].
type putFrame struct {
	lo, hi int
	req    *request
	err    error
}

// putShards sends shards in as few PUT frames as the member's limits allow
// (a new frame at a namespace change, at MaxBatch items, or when the frame
// would outgrow MaxFrameSize), all pipelined before any answer is waited
// for, and sets errs[i] to shard i's outcome. It returns the first error
// of a frame that got no per-shard answer (its shards carry it too).
func putShards(ctx context.Context, l *link, shards []cluster.ShardPut, errs []error) error {
	c, err := l.conn()
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return err
	}
	send, hinted, sessions := wire.CheckPutItems(c.limits, len(shards), func(i int) (block.Key, int, block.PutOptions) {
		return shards[i].Key, len(shards[i].Data), shards[i].Opts
	}, errs)
	itemHead := wire.PutItemHead(hinted, sessions)
	room := int64(c.limits.MaxFrameSize) - wire.HeaderSize - 1 - block.MaxNamespaceLen - 8
	maxBatch := max(int(c.limits.MaxBatch), 1)
	var frames []putFrame
	for lo := 0; lo < len(send); {
		hi, used := lo, int64(0)
		for hi < len(send) {
			s := &shards[send[hi]]
			sz := itemHead + int64(len(s.Data))
			if hi > lo && (hi-lo >= maxBatch || s.Key.Namespace != shards[send[lo]].Key.Namespace || used+sz > room) {
				break
			}
			used += sz
			hi++
		}
		f := putFrame{lo: lo, hi: hi}
		if lo > 0 {
			c, f.err = l.conn()
		}
		if f.err == nil {
			f.req, f.err = sendPut(c, shards, send[lo:hi], hinted, sessions, int(itemHead))
		}
		frames = append(frames, f)
		lo = hi
	}
	var first error
	for _, f := range frames {
		var resp *wire.Response
		if f.err == nil {
			resp, f.err = f.req.wait(ctx)
		}
		for j, i := range send[f.lo:f.hi] {
			if f.err != nil {
				errs[i] = f.err
			} else {
				errs[i] = itemErr(resp, j)
			}
		}
		if f.err != nil && first == nil {
			first = f.err
		}
	}
	return first
}

// sendPut writes one PUT frame of shards[idx...] on c: the item records
// between the shards' bytes, with hint records (and session ids) where the
// member reads them.
func sendPut(c *conn, shards []cluster.ShardPut, idx []int, hinted, sessions bool, itemHead int) (*request, error) {
	var flags uint8
	if hinted && c.hints {
		flags = wire.FlagPutHints
		if sessions && c.sessions {
			flags |= wire.FlagPutSession
		}
	}
	ns := shards[idx[0]].Key.Namespace
	frame := make(net.Buffers, 0, 2*len(idx)+1)
	head := frameHead(ns, itemHead)
	for _, i := range idx {
		s := &shards[i]
		head = wire.AppendPutItem(head, s.Key, s.Sum, uint32(len(s.Data)), s.Opts)
		if flags&wire.FlagPutHints != 0 {
			head = wire.AppendPutHints(head, s.Opts)
		}
		if flags&wire.FlagPutSession != 0 {
			head = wire.AppendPutSession(head, s.Opts.Session)
		}
		if len(s.Data) > 0 {
			frame = append(frame, head, s.Data)
			head = make([]byte, 0, itemHead)
		}
	}
	if len(head) > 0 || len(frame) == 0 {
		frame = append(frame, head)
	}
	return c.send(wire.OpPut, flags, uint32(len(idx)), frame)
}
