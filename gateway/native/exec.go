package native

import (
	"fmt"
	"net"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
)

// execute runs a decoded request against the store and encodes its response.
// Nothing is written to the store before the whole frame was read and
// decoded, so a bad or truncated frame changes nothing.
func (c *conn) execute(req *wire.Request, start time.Time) *response {
	s := c.s
	h := req.Header
	var ns block.Namespace
	if h.Op != wire.OpPing && h.Op != wire.OpRelease {
		// Authorization comes first: a namespace outside the key's scope
		// answers PermissionDenied whether or not it exists.
		if err := c.authorize(req.Namespace); err != nil {
			return c.deniedResponse(req, start, err)
		}
		if h.Op == wire.OpRoute {
			return c.route(req, start)
		}
		if h.Flags&wire.FlagLinearizable != 0 {
			// One sync for the whole frame; its reads then answer from
			// this node's index, which holds every acknowledged write.
			if _, err := s.store.Linearize(s.base, ctxstore.ReadOptions{Level: ctxstore.ReadLinearizable}); err != nil {
				return errorResponse(h, start, errcode.Of(err), err.Error(), false)
			}
		}
		// The frame's one namespace lookup: its reads take it along
		// (ctxstore.ReadOptions.Namespace) instead of looking it up again.
		var err error
		if ns, err = s.store.Namespace(req.Namespace); err != nil {
			return errorResponse(h, start, errcode.Of(err), err.Error(), false)
		}
	}
	r := &response{op: h.Op, start: start}
	b := make([]byte, wire.HeaderSize, wire.HeaderSize+int(h.Count)*(wire.StatusSize+wire.GetMetaSize))
	ctx := s.base
	op := h.Op.String()
	count := h.Count
	switch h.Op {
	case wire.OpPing:
	case wire.OpPut:
		var in int64
		errs := c.putItems(req.Items)
		for i, it := range req.Items {
			err := errs[i]
			code := errcode.Of(err)
			if code == errcode.OK {
				in += int64(it.Size)
			}
			s.met.Block(Proto, op, code)
			b = wire.AppendStatus(b, code, errMsg(err))
		}
		s.met.Bytes(Proto, in, 0)
	case wire.OpGet:
		return c.get(req, r, b, ns)
	case wire.OpDescribe:
		b = c.describe(req, b)
	case wire.OpRelease:
		b = c.release(req, b)
	case wire.OpExists:
		for i, k := range req.Keys {
			err := keyErr(req, i)
			var ok bool
			if err == nil {
				ok, err = s.store.Exists(ctx, k, ctxstore.ReadOptions{Namespace: ns})
			}
			code := errcode.Of(err)
			s.met.Block(Proto, op, code)
			b = wire.AppendStatus(b, code, errMsg(err))
			if code == errcode.OK {
				p := byte(0)
				if ok {
					p = 1
				}
				b = append(b, p)
			}
		}
	case wire.OpDelete, wire.OpDeleteIf, wire.OpPin:
		for i, k := range req.Keys {
			err := keyErr(req, i)
			if err == nil {
				switch h.Op {
				case wire.OpDelete:
					err = s.store.Delete(ctx, k)
				case wire.OpDeleteIf:
					err = s.store.DeleteIf(ctx, k, req.Sums[i])
				default:
					err = s.store.Pin(ctx, k, req.PinTTL)
				}
			}
			code := errcode.Of(err)
			s.met.Block(Proto, op, code)
			b = wire.AppendStatus(b, code, errMsg(err))
		}
	case wire.OpLookup:
		for i := range req.Keys {
			if err := keyErr(req, i); err != nil {
				return errorResponse(h, start, errcode.Of(err), fmt.Sprintf("key %d: %v", i, err), false)
			}
		}
		n, err := s.store.Lookup(ctx, req.Keys, ctxstore.ReadOptions{Namespace: ns, Retain: req.Retain})
		if err != nil {
			return errorResponse(h, start, errcode.Of(err), err.Error(), false)
		}
		count = 0
		b = le32(b, uint32(n))
	case wire.OpEndSession:
		n, err := s.store.ReleaseSession(ctx, req.Namespace, req.Session)
		if err != nil {
			return errorResponse(h, start, errcode.Of(err), err.Error(), false)
		}
		count = 0
		b = le32(b, uint32(n))
	}
	wire.PutHeader(b, wire.Header{Length: uint32(len(b) - wire.HeaderSize), Op: h.Op, Flags: wire.FlagResponse, ID: h.ID, Count: count})
	r.buf = b
	return r
}

// get leases every block, then lays the response out as one writev: the
// header and each item's status and metadata from b, each block's bytes
// straight from the tier's memory. The leases are released by the writer.
// Each block goes out with the CRC-32C recorded when it was put (Ref.Sum),
// never one computed from the bytes being sent, so the client's check
// covers the tier's memory too. On a connection whose client declared that
// it verifies (wire.HelloVerifiesGets) the DRAM tier skips its own pass,
// unless the request asks for it (wire.FlagVerifyAtRest: the client's
// check failed and it reads again). ns is the frame's namespace, looked up
// by execute. The frame's reads are local: a linearizable frame was synced
// once by execute.
func (c *conn) get(req *wire.Request, r *response, b []byte, ns block.Namespace) *response {
	s := c.s
	h := req.Header
	op := h.Op.String()
	ctx := s.base
	atRest := h.Flags&wire.FlagVerifyAtRest != 0
	opts := ctxstore.ReadOptions{Namespace: ns, ReaderVerifies: c.readerVerifies && !atRest, Retain: req.Retain}
	room := int64(s.limits.MaxResponseSize) - wire.HeaderSize
	var used int64
	// cuts[i] is where, in b, block i's payload goes (-1: none).
	cuts := make([]int, len(req.Keys))
	refs := make([]*block.Ref, 0, len(req.Keys))
	for i, k := range req.Keys {
		cuts[i] = -1
		err := keyErr(req, i)
		var ref *block.Ref
		if err == nil {
			ref, err = s.store.Read(ctx, k, opts)
		}
		if atRest {
			// Rare: the client received bytes that did not match their
			// CRC-32C. An error here is the tier finding the block
			// corrupt at rest (it dropped it and counted it); success
			// means the bytes went wrong after the tier, on the way.
			s.log.Warn("get re-read with at-rest verification after the client's checksum failed",
				"remote", c.nc.RemoteAddr(), "key", k.String(), "err", err)
		}
		if err == nil {
			need := int64(wire.StatusSize+wire.GetMetaSize) + int64(len(ref.Data))
			if used+need > room-int64(len(req.Keys)-i-1)*(wire.StatusSize+wire.MaxMessageLen) {
				ref.Release()
				ref = nil
				err = fmt.Errorf("%w: %s: the response would exceed the maximum response size %d; ask for fewer blocks per request", block.ErrTooLarge, k, s.limits.MaxResponseSize)
			}
		}
		code := errcode.Of(err)
		s.met.Block(Proto, op, code)
		msg := errMsg(err)
		b = wire.AppendStatus(b, code, msg)
		used += int64(wire.StatusLen(code, msg))
		if code != errcode.OK {
			continue
		}
		b = wire.AppendGetMeta(b, ref.Sum, uint32(len(ref.Data)), ref.Tier)
		used += wire.GetMetaSize + int64(len(ref.Data))
		cuts[i] = len(b)
		refs = append(refs, ref)
	}
	wire.PutHeader(b, wire.Header{Length: uint32(used), Op: h.Op, Flags: wire.FlagResponse, ID: h.ID, Count: h.Count})
	r.buf, r.refs = b, refs
	segs := make(net.Buffers, 0, 2*len(refs)+1)
	var files []fileSeg
	if c.send != nil {
		files = make([]fileSeg, 0, cap(segs))
	}
	prev, j := 0, 0
	for _, cut := range cuts {
		if cut < 0 {
			continue
		}
		segs = append(segs, b[prev:cut])
		if files != nil {
			files = append(files, fileSeg{})
		}
		if d := refs[j].Data; len(d) > 0 {
			segs = append(segs, d)
			r.out += int64(len(d))
			if files != nil {
				// The lease (released by the writer after the send)
				// keeps the range in place; the tier keeps sent pages
				// from being rewritten afterwards (tiers/dram, markSpliced).
				fd, off, ok := refs[j].FileRange()
				files = append(files, fileSeg{fd: fd, off: off, ok: ok})
			}
		}
		prev = cut
		j++
	}
	if prev < len(b) {
		segs = append(segs, b[prev:])
		if files != nil {
			files = append(files, fileSeg{})
		}
	}
	r.segs, r.files = segs, files
	return r
}

func keyErr(req *wire.Request, i int) error {
	if req.KeyErrs == nil {
		return nil
	}
	return req.KeyErrs[i]
}

func errMsg(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func le32(b []byte, v uint32) []byte {
	return append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
}

// putItems stores a frame's decoded blocks with one Store.PutBatch (on a
// cluster, one index commit for the frame) and returns one error per item;
// an item that failed to decode keeps its own error and is not put.
func (c *conn) putItems(items []wire.PutItem) []error {
	errs := make([]error, len(items))
	batch := make([]ctxstore.PutItem, 0, len(items))
	at := make([]int, 0, len(items))
	for i, it := range items {
		if it.Err != nil {
			errs[i] = it.Err
			continue
		}
		batch = append(batch, ctxstore.PutItem{Key: it.Key, Data: it.Data, Opts: it.Opts})
		at = append(at, i)
	}
	for j, err := range c.s.store.PutBatch(c.s.base, batch) {
		errs[at[j]] = err
	}
	return errs
}
