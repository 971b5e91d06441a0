package object

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// S3 objects (this file and multipart.go). An object of an object namespace
// (block.KindObject) is a manifest record in the key's slot, whose value
// lists the object's metadata and its segments; the bytes live in data
// blocks (namespace, segment version, part i), Config.ChunkSize each, which
// the cluster places, replicates or erasure-codes like any block. Data
// blocks are never visible on their own: Scan and listings skip them, and
// they are written before the manifest that names them.
//
// Replacing an object writes the new data blocks first, then the new
// manifest as the key's next generation (slots.go), then deletes the old
// manifest and retires its data blocks: the writer whose delete removed a
// manifest retires its blocks, so racing writers free each old version
// exactly once. Retiring records them and a sweep deletes them after
// Config.RetireGrace (retired.go). A reader that looks the object up sees
// the old or the new manifest, never a miss. WriteRange leases the first
// Config.Parallel data blocks before it writes a byte, so an object of up
// to that many chunks is read whole or fails with ErrObjectChanged before
// its first byte (the S3 layer then opens the key again); a reader
// streaming a larger old version is served whole while it takes less than
// the grace, and one that takes longer (or any, with RetireGrace 0) fails
// mid-body (the S3 layer aborts the response) rather than return bytes of
// two versions.

var (
	// ErrPreconditionFailed: a conditional write's or read's condition
	// (If-None-Match, If-Match) did not hold; nothing changed.
	ErrPreconditionFailed = fmt.Errorf("%w: precondition failed", block.ErrConflict)
	// ErrNotObjectNamespace: an S3-object operation on a block namespace.
	ErrNotObjectNamespace = fmt.Errorf("%w: not an object namespace", block.ErrInvalidArgument)
	// ErrObjectChanged: the version being read was replaced or deleted
	// while it was streamed.
	ErrObjectChanged = fmt.Errorf("%w: object replaced or deleted while it was read", block.ErrUnavailable)
)

// reservedPrefix starts the keys of internal records (multipart uploads and
// parts); S3 keys cannot contain NUL, so no object key can name them.
const reservedPrefix = "\x00"

// PutObjectOptions are a PutObject's conditions and metadata.
type PutObjectOptions struct {
	// IfAbsent stores the object only when the key holds none
	// (If-None-Match: *); otherwise ErrPreconditionFailed.
	IfAbsent bool
	// IfMatch, when set, stores it only when the current object's ETag is
	// this one (If-Match); a missing object is block.ErrNotFound.
	IfMatch string
	// Limit bounds the body's length; more is block.ErrTooLarge.
	Limit int64
	// Headers are kept and returned with the object.
	Headers []Header
	// Hints are the object's agent hints (hints.go): only Reuse, Retain and
	// Session are read; every data block and the manifest are put with
	// them. Invalid hints are block.ErrInvalidArgument and store nothing.
	Hints block.PutOptions
}

// objectNamespace returns ns when it is an object namespace and key may name
// an object in it.
func (s *Store) objectNamespace(ns string, key []byte) (block.Namespace, error) {
	n, err := s.namespace(ns, key)
	if err != nil {
		return n, err
	}
	if !n.IsObject() {
		return n, fmt.Errorf("%w: %q", ErrNotObjectNamespace, ns)
	}
	return n, nil
}

// chunkPool recycles chunk buffers across streams (a stream holds at most
// Config.Parallel of them), so large uploads do not churn the heap.
var chunkPool sync.Pool

func getChunk(n int64) []byte {
	if p, ok := chunkPool.Get().(*[]byte); ok && int64(cap(*p)) >= n {
		return (*p)[:n]
	}
	return make([]byte, n)
}

func putChunk(b []byte) {
	if b != nil {
		chunkPool.Put(&b)
	}
}

// chunkSize is the data block size for namespace n.
func (s *Store) chunkSize(n block.Namespace) int64 { return min(s.cfg.ChunkSize, s.maxBlock(n)) }

// dataKey names data block i of segment version v.
func dataKey(ns string, v uint64, i int) block.Key {
	return block.NewKey(ns, v).WithPart(uint16(i))
}

// PutObject stores body under key in object namespace ns, replacing any
// object there, and returns the new object's metadata. The body is streamed
// into data blocks (at most Config.Parallel chunks in memory); an error from
// body, including a digest check a verifying reader makes at its end, leaves
// nothing behind.
func (s *Store) PutObject(ctx context.Context, ns string, key []byte, body io.Reader, opts PutObjectOptions) (Meta, error) {
	n, err := s.objectNamespace(ns, key)
	if err != nil {
		return Meta{}, err
	}
	if bytes.HasPrefix(key, []byte(reservedPrefix)) {
		return Meta{}, fmt.Errorf("%w: object keys cannot start with NUL", block.ErrInvalidKey)
	}
	hints, err := agentHints(opts.Hints)
	if err != nil {
		return Meta{}, err
	}
	if err := s.checkPut(ctx, n, key, opts); err != nil {
		return Meta{}, err
	}
	seg, sum, err := s.writeSegment(ctx, n, body, opts.Limit, hints)
	if err != nil {
		return Meta{}, err
	}
	m := manifest{Meta: Meta{Size: seg.Size, ETag: `"` + hex.EncodeToString(sum) + `"`, Modified: s.now().UTC(), Headers: opts.Headers}}
	if seg.Size > 0 {
		m.Segments = []Segment{seg}
	}
	if err := s.swapManifest(ctx, n, key, m, opts.IfAbsent, opts.IfMatch, hints); err != nil {
		_ = s.retire(context.WithoutCancel(ctx), n.Name, m.Segments)
		return Meta{}, err
	}
	return m.Meta, nil
}

// checkPut checks a PUT's conditions before any byte is written (they are
// checked again, atomically, when the manifest is put).
func (s *Store) checkPut(ctx context.Context, n block.Namespace, key []byte, opts PutObjectOptions) error {
	if !opts.IfAbsent && opts.IfMatch == "" {
		return nil
	}
	cur, err := s.manifest(ctx, n, key, ctxstore.ReadLinearizable)
	switch {
	case err == nil && opts.IfAbsent:
		return fmt.Errorf("%w: %q exists", ErrPreconditionFailed, key)
	case err == nil && !etagMatches(opts.IfMatch, cur.ETag):
		return fmt.Errorf("%w: %q has ETag %s", ErrPreconditionFailed, key, cur.ETag)
	case err != nil && (opts.IfMatch == "" && errors.Is(err, block.ErrNotFound)):
		return nil
	}
	return err
}

// etagMatches compares an If-Match value (quoted or not, "*" for any) with tag.
func etagMatches(want, tag string) bool {
	for _, t := range strings.Split(want, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.Trim(t, `"`) == strings.Trim(tag, `"`) {
			return true
		}
	}
	return false
}

// swapManifest writes m as key's record (the key's next generation, see
// replace) with agent hints hints, retiring the data blocks of the manifest
// it replaces. ifAbsent and ifMatch are checked against the record it
// replaces, in the same round: of racing conditional writers exactly one wins.
func (s *Store) swapManifest(ctx context.Context, n block.Namespace, key []byte, m manifest, ifAbsent bool, ifMatch string, hints block.PutOptions) error {
	value := m.encode()
	retire := func(old []byte) {
		if om, err := decodeManifest(old); err == nil {
			s.retireLater(context.WithoutCancel(ctx), n, unshared(om.Segments, m.Segments))
		}
	}
	ok, err := s.replaceHinted(ctx, n, key, hints, func(cur *record) ([]byte, time.Time, bool, error) {
		switch {
		case cur != nil && ifAbsent:
			return nil, time.Time{}, false, nil
		case ifMatch == "":
		case cur == nil:
			return nil, time.Time{}, false, fmt.Errorf("%w: %q", block.ErrNotFound, key)
		default:
			cm, err := decodeManifest(cur.value)
			if err != nil {
				return nil, time.Time{}, false, fmt.Errorf("%w: %q: %v", block.ErrNotFound, key, err)
			}
			if !etagMatches(ifMatch, cm.ETag) {
				return nil, time.Time{}, false, fmt.Errorf("%w: %q has ETag %s", ErrPreconditionFailed, key, cm.ETag)
			}
		}
		return value, time.Time{}, true, nil
	}, retire, ifAbsent || ifMatch != "")
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: %q exists", ErrPreconditionFailed, key)
	}
	return nil
}

// unshared returns the segments of old that cur does not name: racing
// completions of one multipart upload write manifests naming the same
// parts' data blocks, and replacing one such manifest by another must not
// retire the blocks the new one reads.
func unshared(old, cur []Segment) []Segment {
	var out []Segment
	for _, g := range old {
		if !slices.ContainsFunc(cur, func(c Segment) bool { return c.Version == g.Version }) {
			out = append(out, g)
		}
	}
	return out
}

// writeSegment streams body into the data blocks of a new segment, put
// with agent hints hints, and returns it with the MD5 of its bytes. On
// error it deletes what it wrote.
func (s *Store) writeSegment(ctx context.Context, n block.Namespace, body io.Reader, limit int64, hints block.PutOptions) (Segment, []byte, error) {
	chunk := s.chunkSize(n)
	seg := Segment{Version: rand.Uint64(), Chunk: chunk}
	sum := md5.New()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		sem   = make(chan []byte, s.cfg.Parallel)
	)
	for range s.cfg.Parallel {
		sem <- nil
	}
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
			cancel()
		}
		mu.Unlock()
	}
	failed := func() error { mu.Lock(); defer mu.Unlock(); return first }
	for i := 0; ; i++ {
		if err := failed(); err != nil {
			break
		}
		buf := <-sem
		if int64(cap(buf)) < chunk {
			buf = getChunk(chunk)
		}
		buf = buf[:chunk]
		k, err := io.ReadFull(body, buf)
		last := err == io.EOF || err == io.ErrUnexpectedEOF
		if err != nil && !last {
			sem <- buf
			fail(err)
			break
		}
		if k > 0 {
			seg.Size += int64(k)
			if limit > 0 && seg.Size > limit {
				sem <- buf
				fail(fmt.Errorf("%w: object over the limit of %d bytes", block.ErrTooLarge, limit))
				break
			}
			if i >= MaxChunksPerSegment {
				sem <- buf
				fail(fmt.Errorf("%w: object over %d chunks of %d bytes", block.ErrTooLarge, MaxChunksPerSegment, chunk))
				break
			}
			sum.Write(buf[:k])
			wg.Add(1)
			go func(i int, data []byte) {
				defer wg.Done()
				if err := s.blocks.Put(ctx, dataKey(n.Name, seg.Version, i), data, withHints(hints, time.Time{})); err != nil {
					fail(err)
				}
				sem <- data[:cap(data)]
			}(i, buf[:k])
		} else {
			sem <- buf
		}
		if last {
			break
		}
	}
	wg.Wait()
	for range s.cfg.Parallel {
		putChunk(<-sem)
	}
	if err := failed(); err != nil {
		_ = s.retire(context.WithoutCancel(ctx), n.Name, []Segment{seg})
		return Segment{}, nil, err
	}
	return seg, sum.Sum(nil), nil
}

// retire deletes the data blocks of segs now (a block already gone is
// fine). It tries every block and returns the first other failure; callers
// that do not keep a record of segs (retired.go) leave such a block to the
// namespace's TTL or eviction.
func (s *Store) retire(ctx context.Context, ns string, segs []Segment) error {
	var first error
	for _, g := range segs {
		for i := range g.Blocks() {
			if err := s.blocks.Delete(ctx, dataKey(ns, g.Version, i)); err != nil && !errors.Is(err, block.ErrNotFound) && first == nil {
				first = err
			}
		}
	}
	return first
}

// manifest reads key's manifest at lvl.
func (s *Store) manifest(ctx context.Context, n block.Namespace, key []byte, lvl ctxstore.ReadLevel) (manifest, error) {
	p, err := s.readPair(ctx, n, s.slotKeys(n, key), lvl)
	if err != nil {
		return manifest{}, err
	}
	v, err := s.take(&p, key)
	if err != nil {
		return manifest{}, err
	}
	defer v.Release()
	m, err := decodeManifest(v.Data)
	if err != nil {
		// A RESP value in an object namespace: not an S3 object.
		return manifest{}, fmt.Errorf("%w: %q: %v", block.ErrNotFound, key, err)
	}
	return m, nil
}

// StatObject returns the metadata of key's object, or block.ErrNotFound,
// read at lvl.
func (s *Store) StatObject(ctx context.Context, ns string, key []byte, lvl ctxstore.ReadLevel) (Meta, error) {
	n, err := s.objectNamespace(ns, key)
	if err != nil {
		return Meta{}, err
	}
	m, err := s.manifest(ctx, n, key, lvl)
	return m.Meta, err
}

// Object is an opened version of an S3 object: its metadata and where its
// bytes are. Reading it after it was replaced fails with ErrObjectChanged.
type Object struct {
	Meta
	s  *Store
	ns string
	m  manifest
}

// OpenObject looks key's object up at lvl. Its data blocks are then read
// from this node's view (Object.WriteRange): at ctxstore.ReadLinearizable
// the view was made current, with the blocks the manifest names, before
// the manifest was read.
func (s *Store) OpenObject(ctx context.Context, ns string, key []byte, lvl ctxstore.ReadLevel) (*Object, error) {
	n, err := s.objectNamespace(ns, key)
	if err != nil {
		return nil, err
	}
	m, err := s.manifest(ctx, n, key, lvl)
	if err != nil {
		return nil, err
	}
	return &Object{Meta: m.Meta, s: s, ns: n.Name, m: m}, nil
}

// PartRange returns the byte range of part n (1-based) of a multipart
// object; a single-PUT object is its own part 1. ok is false for a part
// the object does not have.
func (o *Object) PartRange(n int) (first, length int64, ok bool) {
	if o.Parts == 0 {
		return 0, o.Size, n == 1
	}
	if n < 1 || n > o.Parts || len(o.m.Segments) != o.Parts {
		return 0, 0, false
	}
	for _, g := range o.m.Segments[:n-1] {
		first += g.Size
	}
	return first, o.m.Segments[n-1].Size, true
}

// piece is one data block's share of a range.
type piece struct {
	key      block.Key
	off, len int64
}

// pieces lists the data blocks covering [first, first+length).
func (o *Object) pieces(first, length int64) []piece {
	var out []piece
	base := int64(0)
	end := first + length
	for _, g := range o.m.Segments {
		if base+g.Size <= first || base >= end {
			base += g.Size
			continue
		}
		for i := range g.Blocks() {
			bs, be := base+int64(i)*g.Chunk, min(base+int64(i+1)*g.Chunk, base+g.Size)
			if be <= first || bs >= end {
				continue
			}
			lo, hi := max(bs, first), min(be, end)
			out = append(out, piece{key: dataKey(o.ns, g.Version, i), off: lo - bs, len: hi - lo})
		}
		base += g.Size
	}
	return out
}

// RangeOptions are a WriteRange's options; the zero value has the tiers
// verify every data block.
type RangeOptions struct {
	// ReaderVerifies: whoever receives the bytes checks every one of them
	// against a digest of its own and, on a mismatch, reads the range again
	// without it (an S3 client declaring X-Ctxtier-Reader-Verifies). The
	// data blocks are read with ctxstore.ReadOptions.ReaderVerifies, so the
	// DRAM tier may skip its at-rest check of them. A caller that keeps or
	// copies the bytes itself (CopyObject) leaves it false.
	ReaderVerifies bool
}

// WriteRange writes bytes [first, first+length) of the object to w,
// fetching up to Config.Parallel data blocks ahead in parallel, and returns
// how many bytes it wrote. It writes nothing until the first Parallel
// blocks are leased, so when the version was retired before that it fails
// with ErrObjectChanged having written nothing (a caller may open the key
// again). The data blocks are read from this node's view (see OpenObject),
// with opts.
func (o *Object) WriteRange(ctx context.Context, w io.Writer, first, length int64, opts RangeOptions) (int64, error) {
	if first < 0 || length < 0 || first+length > o.Size {
		return 0, fmt.Errorf("%w: range %d+%d outside %d bytes", block.ErrInvalidArgument, first, length, o.Size)
	}
	ps := o.pieces(first, length)
	type result struct {
		ref *block.Ref
		err error
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := make([]chan result, len(ps))
	for i := range res {
		res[i] = make(chan result, 1)
	}
	sem := make(chan struct{}, o.s.cfg.Parallel)
	go func() {
		for i, p := range ps {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				for j := i; j < len(ps); j++ {
					res[j] <- result{err: ctx.Err()}
				}
				return
			}
			go func() {
				ref, err := o.s.blocks.Read(ctx, p.key, ctxstore.ReadOptions{ReaderVerifies: opts.ReaderVerifies})
				res[i] <- result{ref, err}
			}()
		}
	}()
	var written int64
	var failed error
	// The first Parallel pieces are all leased before a byte is written: a
	// version retired meanwhile fails here, with nothing written.
	head := make([]result, min(len(ps), o.s.cfg.Parallel))
	for i := range head {
		head[i] = <-res[i]
		if failed == nil && head[i].err != nil {
			failed = head[i].err
			if errors.Is(failed, block.ErrNotFound) {
				failed = fmt.Errorf("%w: %s: %v", ErrObjectChanged, ps[i].key, failed)
			}
			cancel()
		}
	}
	// (After a failure the loop below writes nothing and only releases
	// what the fetches it launched return.)
	for i, p := range ps {
		var r result
		if i < len(head) {
			r = head[i]
		} else {
			r = <-res[i]
		}
		if failed == nil && r.err != nil {
			failed = r.err
			if errors.Is(r.err, block.ErrNotFound) {
				failed = fmt.Errorf("%w: %s: %v", ErrObjectChanged, p.key, r.err)
			}
			cancel()
		}
		if failed == nil && int64(len(r.ref.Data)) < p.off+p.len {
			failed = fmt.Errorf("%w: data block %s is %d bytes, want %d", ErrObjectChanged, p.key, len(r.ref.Data), p.off+p.len)
			cancel()
		}
		if failed == nil {
			k, err := w.Write(r.ref.Data[p.off : p.off+p.len])
			written += int64(k)
			if err != nil {
				failed = err
				cancel()
			}
		}
		if r.ref != nil {
			r.ref.Release()
		}
		if failed == nil {
			<-sem
		}
	}
	return written, failed
}

// DeleteObject removes key's object and retires its data blocks; an absent
// object is not an error (S3's DELETE). Its records go lower generation
// first (deleteKey), and each removed manifest's blocks are retired by the
// call whose delete removed it, so a DELETE racing a PUT frees every
// version once.
func (s *Store) DeleteObject(ctx context.Context, ns string, key []byte) error {
	n, err := s.objectNamespace(ns, key)
	if err != nil {
		return err
	}
	_, err = s.deleteKey(ctx, n, key, func(old []byte) {
		if om, err := decodeManifest(old); err == nil {
			s.retireLater(context.WithoutCancel(ctx), n, om.Segments)
		}
	})
	return err
}

// Entry is one object of a listing.
type Entry struct {
	Key string
	Meta
}

// walk calls fn with the key and value of every live record of namespace
// ns that is its key's winning one, in slot order, each key once, read at
// lvl (one sync for the whole walk at ctxstore.ReadLinearizable).
func (s *Store) walk(ctx context.Context, ns string, fn func(key, value []byte) error, lvl ctxstore.ReadLevel) error {
	n, err := s.blocks.Namespace(ns)
	if err != nil {
		return err
	}
	if lvl, err = s.linearize(ctx, lvl); err != nil {
		return err
	}
	after := ""
	now := s.now()
	for {
		infos, err := s.blocks.List(ctx, ns, "", after, 1000, ctxstore.ReadOptions{Level: lvl, Namespace: n})
		if err != nil {
			return err
		}
		lastRead, err := s.eachWinner(ctx, n, infos, now, func(r record) error { return fn(r.key, r.value) })
		if err != nil {
			return err
		}
		if len(infos) < 1000 {
			return nil
		}
		last := infos[len(infos)-1].Key
		after = last.ObjectName()
		if lastRead {
			// The pair's second slot was read with its first.
			after = pastSlot(last.Hash | 1)
		}
	}
}

// ListObjects returns the objects of namespace ns whose keys start with
// prefix, sorted by key. It reads every record of the namespace (a full
// scan: the index is ordered by slot hash, not by key), read at lvl.
func (s *Store) ListObjects(ctx context.Context, ns, prefix string, lvl ctxstore.ReadLevel) ([]Entry, error) {
	if _, err := s.objectNamespace(ns, nil); err != nil {
		return nil, err
	}
	var out []Entry
	err := s.walk(ctx, ns, func(key, value []byte) error {
		if bytes.HasPrefix(key, []byte(reservedPrefix)) || !bytes.HasPrefix(key, []byte(prefix)) {
			return nil
		}
		if m, err := decodeManifest(value); err == nil {
			out = append(out, Entry{Key: string(key), Meta: m.Meta})
		}
		return nil
	}, lvl)
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Key, b.Key) })
	return out, err
}
