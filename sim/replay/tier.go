package replay

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TierClient is what the replay needs of a ctxtier client: a prefix lookup,
// a batch get into caller buffers and a batch put, over the real API. The
// native client (gateway/client.Client) and the HTTP client
// (gateway/client.HTTPClient) each fit behind a few lines of adapter.
type TierClient interface {
	// Lookup returns how many leading keys the tier holds (one namespace).
	Lookup(ctx context.Context, keys []block.Key) (int, error)
	// GetBatchInto fetches keys into bufs (one buffer per key, large enough)
	// and returns each block's size and error (block.ErrNotFound when
	// absent); err is a failure of the whole call.
	GetBatchInto(ctx context.Context, keys []block.Key, bufs [][]byte) (sizes []int, errs []error, err error)
	// PutBatch stores data[i] under keys[i] with opts[i] (each block's
	// parent: the previous block of its chain, as an engine sends it) and
	// returns one error per item; err is a failure of the whole call.
	PutBatch(ctx context.Context, keys []block.Key, data [][]byte, opts []block.PutOptions) (errs []error, err error)
}

// blockHeader is the start of every block the replay writes: its hash and
// its size, so a fetched block proves it is the one asked for.
const blockHeader = 16

// fillBlock writes the deterministic content of block hash into b: the
// header, then a xorshift stream seeded by the hash. Equal hashes always get
// equal bytes, so a re-put is idempotent.
func fillBlock(b []byte, hash uint64) {
	binary.LittleEndian.PutUint64(b[0:8], hash)
	binary.LittleEndian.PutUint64(b[8:16], uint64(len(b)))
	x := hash*0x9E3779B97F4A7C15 | 1
	i := blockHeader
	for ; i+8 <= len(b); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(b[i:], x)
	}
	for ; i < len(b); i++ {
		b[i] = byte(x >> (8 * (i & 7)))
	}
}

// ErrWrongBlock reports a fetched block whose content is not the block asked
// for: the replay stops, since a served wrong block is a correctness bug.
var ErrWrongBlock = errors.New("replay: tier served the wrong block")

func checkBlock(b []byte, hash uint64, want int) error {
	if len(b) != want || len(b) < blockHeader {
		return fmt.Errorf("%w: %016x: %d bytes, want %d", ErrWrongBlock, hash, len(b), want)
	}
	if h := binary.LittleEndian.Uint64(b[0:8]); h != hash {
		return fmt.Errorf("%w: asked for %016x, got %016x", ErrWrongBlock, hash, h)
	}
	if n := binary.LittleEndian.Uint64(b[8:16]); n != uint64(want) {
		return fmt.Errorf("%w: %016x: header size %d, want %d", ErrWrongBlock, hash, n, want)
	}
	return nil
}

// tierIO performs and times the shared-tier policy's calls.
type tierIO struct {
	cfg    Config
	client TierClient
	now    func() time.Time
	bufs   [][]byte // reused fetch buffers
	data   [][]byte // reused put buffers
}

func (t *tierIO) keys(hashes []uint64) []block.Key {
	keys := make([]block.Key, len(hashes))
	for i, h := range hashes {
		keys[i] = block.NewKey(t.cfg.Namespace, h)
	}
	return keys
}

// lookup returns the tier's prefix depth for hashes and the call's duration.
func (t *tierIO) lookup(ctx context.Context, hashes []uint64) (int, time.Duration, error) {
	if len(hashes) == 0 {
		return 0, 0, nil
	}
	start := t.now()
	d, err := t.client.Lookup(ctx, t.keys(hashes))
	el := t.now().Sub(start)
	if err != nil {
		return 0, el, fmt.Errorf("tier lookup: %w", err)
	}
	return min(max(d, 0), len(hashes)), el, nil
}

// fetch gets hashes (the blocks of wire sizes sizes) in batches and returns
// how many leading blocks arrived, their wire bytes, and the time taken. A
// block the tier no longer has ends the prefix; anything else is an error.
func (t *tierIO) fetch(ctx context.Context, hashes []uint64, sizes []int64) (got int, wire int64, el time.Duration, err error) {
	start := t.now()
	defer func() { el = t.now().Sub(start) }()
	for lo, hi := 0, 0; lo < len(hashes); lo = hi {
		hi = t.batchEnd(lo, sizes)
		bufs := make([][]byte, 0, hi-lo)
		for i := lo; i < hi; i++ {
			bufs = append(bufs, buffer(&t.bufs, i-lo, int(sizes[i])))
		}
		n, errs, err := t.client.GetBatchInto(ctx, t.keys(hashes[lo:hi]), bufs)
		if err != nil {
			return got, wire, 0, fmt.Errorf("tier get: %w", err)
		}
		if len(n) != hi-lo || len(errs) != hi-lo {
			return got, wire, 0, fmt.Errorf("tier get: %d sizes and %d errors for %d keys", len(n), len(errs), hi-lo)
		}
		for j := range hi - lo {
			if errs[j] != nil {
				if errors.Is(errs[j], block.ErrNotFound) {
					return got, wire, 0, nil
				}
				return got, wire, 0, fmt.Errorf("tier get %016x: %w", hashes[lo+j], errs[j])
			}
			if err := checkBlock(bufs[j][:n[j]], hashes[lo+j], int(sizes[lo+j])); err != nil {
				return got, wire, 0, err
			}
			got++
			wire += int64(n[j])
		}
	}
	return got, wire, 0, nil
}

// batchEnd returns the end of the batch starting at lo: at most MaxBatch
// blocks and MaxBatchBytes wire bytes, and at least one block.
func (t *tierIO) batchEnd(lo int, sizes []int64) int {
	hi, bytes := lo, int64(0)
	for hi < len(sizes) && hi-lo < t.cfg.MaxBatch && (hi == lo || bytes+sizes[hi] <= t.cfg.MaxBatchBytes) {
		bytes += sizes[hi]
		hi++
	}
	return hi
}

// buffer returns (*pool)[i] grown to n bytes.
func buffer(pool *[][]byte, i, n int) []byte {
	for len(*pool) <= i {
		*pool = append(*pool, nil)
	}
	if cap((*pool)[i]) < n {
		(*pool)[i] = make([]byte, n)
	}
	return (*pool)[i][:n]
}

// put stores hashes (wire sizes sizes) in batches and returns the wire bytes
// and the time taken, content generation excluded. Each block goes with its
// parent, the hash before it in the chain: parent for hashes[0] (hasParent
// false when hashes[0] starts the chain), so the tier's policy sees chains
// as it does from an engine.
func (t *tierIO) put(ctx context.Context, hashes []uint64, sizes []int64, parent uint64, hasParent bool) (wire int64, el time.Duration, err error) {
	for lo, hi := 0, 0; lo < len(hashes); lo = hi {
		hi = t.batchEnd(lo, sizes)
		data := make([][]byte, 0, hi-lo)
		opts := make([]block.PutOptions, 0, hi-lo)
		for i := lo; i < hi; i++ {
			b := buffer(&t.data, i-lo, int(sizes[i]))
			fillBlock(b, hashes[i])
			data = append(data, b)
			var o block.PutOptions
			switch {
			case i > 0:
				o.Parent, o.HasParent = hashes[i-1], true
			case hasParent:
				o.Parent, o.HasParent = parent, true
			}
			opts = append(opts, o)
			wire += sizes[i]
		}
		start := t.now()
		errs, err := t.client.PutBatch(ctx, t.keys(hashes[lo:hi]), data, opts)
		el += t.now().Sub(start)
		if err != nil {
			return wire, el, fmt.Errorf("tier put: %w", err)
		}
		for j, e := range errs {
			if e != nil {
				return wire, el, fmt.Errorf("tier put %016x: %w", hashes[lo+j], e)
			}
		}
	}
	return wire, el, nil
}
