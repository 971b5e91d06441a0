// Package erasure splits a block into n = k + m shards with Reed-Solomon
// (klauspost/reedsolomon) and rebuilds it from any k of them. k=1, m=0 is a
// single copy and k=1, m=r is r+1 replicas: every shard of a k=1 code is the
// whole block, so replication and erasure coding are one mechanism. Each
// shard carries its own CRC-32C so a bad shard is detected and treated as
// missing before reconstruction.
package erasure

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/klauspost/reedsolomon"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// MaxShards bounds k+m.
const MaxShards = 32

// Code is a (k, m) Reed-Solomon code.
type Code struct {
	K, M int
	enc  reedsolomon.Encoder // nil for k=1 (replication)
}

var (
	cacheMu sync.Mutex
	// cache holds the codes built so far, indexed by k and m; read without
	// the lock (every read of a block asks for its namespace's code).
	cache [MaxShards + 1][MaxShards]atomic.Pointer[Code]
)

// New returns the (k, m) code, cached: encoders hold precomputed matrices.
func New(k, m int) (*Code, error) {
	if k < 1 || m < 0 || k+m > MaxShards {
		return nil, fmt.Errorf("%w: erasure code k=%d m=%d: need k>=1, m>=0, k+m<=%d", block.ErrInvalidArgument, k, m, MaxShards)
	}
	slot := &cache[k][m]
	if c := slot.Load(); c != nil {
		return c, nil
	}
	cacheMu.Lock()
	defer cacheMu.Unlock()
	if c := slot.Load(); c != nil {
		return c, nil
	}
	c := &Code{K: k, M: m}
	if k > 1 && m > 0 {
		enc, err := reedsolomon.New(k, m)
		if err != nil {
			return nil, fmt.Errorf("erasure: %w", err)
		}
		c.enc = enc
	}
	slot.Store(c)
	return c, nil
}

// N is the number of shards.
func (c *Code) N() int { return c.K + c.M }

// ShardSize is the size of each shard of a block of size bytes.
func (c *Code) ShardSize(size int) int {
	if c.K == 1 {
		return size
	}
	return (size + c.K - 1) / c.K
}

// Encode returns the n shards of data. For k=1 every shard aliases data (no
// copy). For k>1 the data shards are fresh copies, zero-padded to equal size.
func (c *Code) Encode(data []byte) ([][]byte, error) {
	n := c.N()
	shards := make([][]byte, n)
	if c.K == 1 {
		for i := range shards {
			shards[i] = data
		}
		return shards, nil
	}
	ss := c.ShardSize(len(data))
	buf := make([]byte, ss*n)
	copy(buf, data)
	for i := range shards {
		shards[i] = buf[i*ss : (i+1)*ss : (i+1)*ss]
	}
	if c.enc == nil { // k>1, m=0: striping only
		return shards, nil
	}
	if err := c.enc.Encode(shards); err != nil {
		return nil, fmt.Errorf("erasure encode: %w", err)
	}
	return shards, nil
}

// Decode rebuilds a block of size bytes from its shards; a nil entry is a
// missing shard. It needs any k shards. Data shards are used directly when
// all are present; parity is touched only to reconstruct.
func (c *Code) Decode(shards [][]byte, size int) ([]byte, error) {
	if len(shards) != c.N() {
		return nil, fmt.Errorf("%w: erasure decode: %d shards for a %d+%d code", block.ErrInvalidArgument, len(shards), c.K, c.M)
	}
	if c.K == 1 {
		for _, s := range shards {
			if s != nil {
				if len(s) != size {
					return nil, fmt.Errorf("%w: replica of %d bytes, want %d", block.ErrChecksum, len(s), size)
				}
				return s, nil
			}
		}
		return nil, fmt.Errorf("%w: no replica left", block.ErrUnavailable)
	}
	ss := c.ShardSize(size)
	have := 0
	dataOK := true
	for i, s := range shards {
		if s != nil {
			if len(s) != ss {
				return nil, fmt.Errorf("%w: shard %d has %d bytes, want %d", block.ErrChecksum, i, len(s), ss)
			}
			have++
		} else if i < c.K {
			dataOK = false
		}
	}
	if have < c.K {
		return nil, fmt.Errorf("%w: %d of %d shards available, need %d", block.ErrUnavailable, have, c.N(), c.K)
	}
	if !dataOK {
		if c.enc == nil {
			return nil, fmt.Errorf("%w: a data shard of a striped (m=0) block is missing", block.ErrUnavailable)
		}
		if err := c.enc.ReconstructData(shards); err != nil {
			return nil, fmt.Errorf("erasure reconstruct: %w", err)
		}
	}
	out := make([]byte, 0, ss*c.K)
	for i := 0; i < c.K; i++ {
		out = append(out, shards[i]...)
	}
	return out[:size], nil
}

// Reconstruct fills every missing shard (data and parity), for repair.
func (c *Code) Reconstruct(shards [][]byte, size int) error {
	if c.K == 1 {
		var src []byte
		for _, s := range shards {
			if s != nil {
				src = s
				break
			}
		}
		if src == nil {
			return fmt.Errorf("%w: no replica left", block.ErrUnavailable)
		}
		for i := range shards {
			if shards[i] == nil {
				shards[i] = src
			}
		}
		return nil
	}
	if c.enc == nil {
		for i := range shards {
			if shards[i] == nil {
				return fmt.Errorf("%w: a data shard of a striped (m=0) block is missing", block.ErrUnavailable)
			}
		}
		return nil
	}
	if err := c.enc.Reconstruct(shards); err != nil {
		return fmt.Errorf("%w: erasure reconstruct: %v", block.ErrUnavailable, err)
	}
	return nil
}
