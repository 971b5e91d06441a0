// Package placement chooses which nodes hold a block's shards, by rendezvous
// (highest-random-weight) hashing over the healthy members: every node
// computes the same answer from the same member list with no coordination,
// and adding or removing one node moves only the shards that node wins or
// held (about 1/N of them), never reshuffling the rest.
package placement

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"

	"github.com/zeebo/xxh3"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Node is a placement candidate.
type Node struct {
	ID   string
	Zone string
	// Weight scales the node's share (for example its capacity in GiB);
	// 0 is treated as 1.
	Weight float64
}

// Pick returns n distinct nodes for key, best first. Nodes in zones not yet
// used are preferred, so shards spread across failure domains as far as the
// zones allow. It returns an error if fewer than n nodes are given.
func Pick(key block.Key, nodes []Node, n int) ([]Node, error) {
	if n <= 0 {
		return nil, nil
	}
	if len(nodes) < n {
		return nil, fmt.Errorf("%w: placement of %d shards needs %d nodes, %d available", block.ErrUnavailable, n, n, len(nodes))
	}
	ranked := Rank(key, nodes)
	out := make([]Node, 0, n)
	used := make(map[string]bool, n)
	taken := make([]bool, len(ranked))
	// First pass: the best node of each unused zone, in rank order.
	for i, nd := range ranked {
		if len(out) == n {
			break
		}
		if !used[nd.Zone] {
			used[nd.Zone] = true
			taken[i] = true
			out = append(out, nd)
		}
	}
	// Then the best remaining nodes regardless of zone.
	for i, nd := range ranked {
		if len(out) == n {
			break
		}
		if !taken[i] {
			out = append(out, nd)
		}
	}
	return out, nil
}

// Rank orders all nodes by their rendezvous score for key, highest first.
func Rank(key block.Key, nodes []Node) []Node {
	type scored struct {
		n Node
		s float64
	}
	kh := KeyHash(key)
	ss := make([]scored, len(nodes))
	for i, nd := range nodes {
		ss[i] = scored{nd, score(kh, nd)}
	}
	sort.Slice(ss, func(i, j int) bool {
		if ss[i].s != ss[j].s {
			return ss[i].s > ss[j].s
		}
		return ss[i].n.ID < ss[j].n.ID
	})
	out := make([]Node, len(ss))
	for i := range ss {
		out[i] = ss[i].n
	}
	return out
}

// KeyHash is the 64-bit hash of a key's namespace, block hash and part (not
// its shard) that rendezvous scores are seeded with. Other uses that must
// agree across nodes on a key's hash (the index's partition of a key,
// ctxstore/partition) use it too.
func KeyHash(k block.Key) uint64 {
	var b [11]byte
	binary.LittleEndian.PutUint64(b[:8], k.Hash)
	binary.LittleEndian.PutUint16(b[8:10], k.Part)
	if k.HasPart {
		b[10] = 1
	}
	return xxh3.HashSeed(b[:], xxh3.HashString(k.Namespace))
}

// score is the weighted rendezvous score: -w / ln(u) with u uniform in (0,1)
// from hash(key, node), which gives each node a share proportional to w.
func score(kh uint64, nd Node) float64 {
	h := xxh3.HashStringSeed(nd.ID, kh)
	u := (float64(h>>11) + 0.5) / (1 << 53) // uniform in (0,1)
	w := nd.Weight
	if w <= 0 {
		w = 1
	}
	return -w / math.Log(u)
}
