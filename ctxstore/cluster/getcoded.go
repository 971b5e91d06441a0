package cluster

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/erasure"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// The erasure-coded half of the read path (blockReader, get.go): k shards
// fetched first, parity after a failure or hedgeDelay, decoded and checked
// against the block's CRC, with a search over the present shards when one
// of them is wrong.

// fetchShards reads the given placement entries in parallel into shards.
// retain is the read's retain window (fetch).
func (rd *blockReader) fetchShards(ctx context.Context, key block.Key, c *erasure.Code, want []fsm.Shard, shards [][]byte, size int, retain time.Duration) {
	var wg sync.WaitGroup
	for _, s := range want {
		if int(s.Index) >= len(shards) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := rd.fetch(ctx, s.NodeID, shardKey(key, c, int(s.Index)), retain)
			if err != nil || len(d) != c.ShardSize(size) {
				rd.met.shardErrors.Inc()
				return
			}
			shards[s.Index] = d
		}()
	}
	wg.Wait()
}

// fetchFirstK reads the data shards and returns once k shards are in hand
// (or every read has ended). Parity shards are asked for too as soon as a
// data shard fails, or when the data shards have not all answered within
// hedgeDelay: a slow or partitioned holder (whose connection has not failed
// yet) costs a quarter second, not the shard timeout. It reports whether a
// parity read was started. Reads still running when it returns are
// cancelled; only this goroutine writes shards.
func (rd *blockReader) fetchFirstK(ctx context.Context, key block.Key, c *erasure.Code, data, parity []fsm.Shard, shards [][]byte, size int, retain time.Duration) bool {
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		idx  int
		data []byte
	}
	answers := make(chan answer, len(data)+len(parity))
	pending := 0
	launch := func(list []fsm.Shard) {
		for _, s := range list {
			if int(s.Index) >= len(shards) {
				continue
			}
			pending++
			go func() {
				d, err := rd.fetch(fctx, s.NodeID, shardKey(key, c, int(s.Index)), retain)
				if err != nil || len(d) != c.ShardSize(size) {
					if fctx.Err() == nil {
						rd.met.shardErrors.Inc()
					}
					d = nil
				}
				answers <- answer{int(s.Index), d}
			}()
		}
	}
	launch(data)
	hedged := false
	hedge := func() {
		if !hedged {
			hedged = true
			launch(parity)
		}
	}
	timer := time.NewTimer(hedgeDelay)
	defer timer.Stop()
	have := 0
	for pending > 0 && have < c.K {
		select {
		case a := <-answers:
			pending--
			if a.data == nil {
				hedge()
				continue
			}
			if shards[a.idx] == nil {
				shards[a.idx] = a.data
				have++
			}
		case <-timer.C:
			hedge()
		case <-ctx.Done():
			return hedged
		}
	}
	return hedged
}

// getCoded reads and decodes an erasure-coded block; retain is the read's
// retain window (0: none), sent with every shard read.
func (rd *blockReader) getCoded(ctx context.Context, key block.Key, e fsm.Entry, c *erasure.Code, retain time.Duration) ([]byte, error) {
	size := int(e.Size)
	shards := make([][]byte, c.N())
	var data, parity []fsm.Shard
	for _, s := range rd.readOrder(e.Placement) {
		if int(s.Index) < c.K {
			if !slices.ContainsFunc(data, func(x fsm.Shard) bool { return x.Index == s.Index }) {
				data = append(data, s)
			}
		} else if int(s.Index) < c.N() {
			parity = append(parity, s)
		}
	}
	usedParity := rd.fetchFirstK(ctx, key, c, data, parity, shards, size, retain)
	if out, ok := tryDecode(c, shards, size, e.Sum); ok {
		if usedParity {
			rd.met.reconstructions.Inc()
		}
		return out, nil
	}
	// A shard is missing or wrong: bring in the rest and search.
	rd.met.reconstructions.Inc()
	var rest []fsm.Shard
	for _, s := range append(data, parity...) {
		if int(s.Index) < len(shards) && shards[s.Index] == nil {
			rest = append(rest, s)
		}
	}
	rd.fetchShards(ctx, key, c, rest, shards, size, retain)
	have := 0
	for _, s := range shards {
		if s != nil {
			have++
		}
	}
	if have < c.K {
		return nil, fmt.Errorf("%w: %s: %d of %d shards readable, need %d", block.ErrUnavailable, key, have, c.N(), c.K)
	}
	if out, ok := tryDecode(c, shards, size, e.Sum); ok {
		return out, nil
	}
	// Some shard is bad: leave out subsets of the present shards (at most m
	// of them) until the block's CRC matches.
	present := []int{}
	for i, s := range shards {
		if s != nil {
			present = append(present, i)
		}
	}
	tries := 0
	var found []byte
	var rec func(start, left int, drop []int) bool
	rec = func(start, left int, drop []int) bool {
		if len(drop) > 0 {
			if tries++; tries > 256 {
				return true
			}
			try := slices.Clone(shards)
			for _, d := range drop {
				try[d] = nil
			}
			if out, ok := tryDecode(c, try, size, e.Sum); ok {
				found = out
				return true
			}
		}
		if left == 0 {
			return false
		}
		for i := start; i < len(present); i++ {
			if rec(i+1, left-1, append(drop, present[i])) {
				return true
			}
		}
		return false
	}
	rec(0, min(c.M, have-c.K), nil)
	if found != nil {
		return found, nil
	}
	return nil, fmt.Errorf("%w: %s: no combination of shards matches the block's crc32c %08x", block.ErrChecksum, key, e.Sum)
}

// tryDecode decodes a copy of shards (Decode fills missing entries) and
// checks the block CRC.
func tryDecode(c *erasure.Code, shards [][]byte, size int, sum uint32) ([]byte, bool) {
	try := slices.Clone(shards)
	out, err := c.Decode(try, size)
	if err != nil || block.Checksum(out) != sum {
		return nil, false
	}
	return out, true
}
