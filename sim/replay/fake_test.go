package replay

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// memTier is an in-memory TierClient for tests: a map with an optional
// capacity in blocks (FIFO eviction), and optional corruption.
type memTier struct {
	mu       sync.Mutex
	blocks   map[block.Key][]byte
	order    []block.Key
	capacity int // 0: unbounded
	corrupt  bool
	lookups  int
	gets     int
	puts     int
	parents  map[block.Key]parentOf // what each put said of its block's parent
	// putDelay holds each put this long before it stores anything (outside
	// the lock, so puts overlap): a slow tier for concurrent runs.
	putDelay    time.Duration
	failPuts    bool // every put fails as a whole
	inFlight    int  // puts in progress
	maxInFlight int  // most puts in progress at once
	readsInPuts int  // lookups and gets made while a put was in progress
}

// parentOf is the parent a put named for its block.
type parentOf struct {
	hash uint64
	has  bool
}

func newMemTier(capacity int) *memTier {
	return &memTier{blocks: map[block.Key][]byte{}, capacity: capacity}
}

func (m *memTier) Lookup(_ context.Context, keys []block.Key) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lookups++
	if m.inFlight > 0 {
		m.readsInPuts++
	}
	for i, k := range keys {
		if _, ok := m.blocks[k]; !ok {
			return i, nil
		}
	}
	return len(keys), nil
}

func (m *memTier) GetBatchInto(_ context.Context, keys []block.Key, bufs [][]byte) ([]int, []error, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gets += len(keys)
	if m.inFlight > 0 {
		m.readsInPuts++
	}
	sizes, errs := make([]int, len(keys)), make([]error, len(keys))
	for i, k := range keys {
		b, ok := m.blocks[k]
		switch {
		case !ok:
			errs[i] = fmt.Errorf("%w: %s", block.ErrNotFound, k)
		case len(b) > len(bufs[i]):
			errs[i] = fmt.Errorf("%w: buffer too small", block.ErrTooLarge)
		default:
			sizes[i] = copy(bufs[i], b)
			if m.corrupt {
				bufs[i][0] ^= 0xff
			}
		}
	}
	return sizes, errs, nil
}

func (m *memTier) PutBatch(_ context.Context, keys []block.Key, data [][]byte, opts []block.PutOptions) ([]error, error) {
	m.mu.Lock()
	m.inFlight++
	m.maxInFlight = max(m.maxInFlight, m.inFlight)
	m.mu.Unlock()
	time.Sleep(m.putDelay)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inFlight--
	if m.failPuts {
		return nil, fmt.Errorf("%w: memTier refuses puts", block.ErrUnavailable)
	}
	m.puts += len(keys)
	for i, k := range keys {
		if m.parents == nil {
			m.parents = map[block.Key]parentOf{}
		}
		m.parents[k] = parentOf{opts[i].Parent, opts[i].HasParent}
	}
	errs := make([]error, len(keys))
	for i, k := range keys {
		if old, ok := m.blocks[k]; ok {
			if string(old) != string(data[i]) {
				errs[i] = fmt.Errorf("%w: %s", block.ErrConflict, k)
			}
			continue
		}
		m.blocks[k] = append([]byte(nil), data[i]...)
		m.order = append(m.order, k)
		for m.capacity > 0 && len(m.blocks) > m.capacity {
			delete(m.blocks, m.order[0])
			m.order = m.order[1:]
		}
	}
	return errs, nil
}
