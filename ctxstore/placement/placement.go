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
	"slices"
	"strings"

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

// CapacityWeight is the Weight of a member offering capacity bytes: its
// capacity in GiB. The cluster's placement and the cluster-aware client
// (gateway/client) both weigh members with it, so they pick alike.
func CapacityWeight(capacity int64) float64 { return float64(capacity) / float64(1<<30) }

// Pick returns n distinct nodes for key, best first. Nodes in zones not yet
// used are preferred, so shards spread across failure domains as far as the
// zones allow. It returns an error if fewer than n nodes are given.
func Pick(key block.Key, nodes []Node, n int) ([]Node, error) {
	// Pick runs for every block put: it allocates the ranking and the
	// answer, nothing else.
	return PickReusing(key, nodes, n, &Scratch{ranked: make([]scored, 0, len(nodes)), out: make([]Node, 0, max(n, 0))})
}

// Scratch holds PickReusing's working memory from one call to the next.
// The zero value is ready to use; it is not safe for concurrent use.
type Scratch struct {
	ranked []scored
	out    []Node
}

// PickReusing is Pick with its ranking and its answer in s's memory: the
// answer is valid until the next call with s. A scan that picks for every
// entry of the index (rebalancing) then allocates nothing per entry.
func PickReusing(key block.Key, nodes []Node, n int, s *Scratch) ([]Node, error) {
	if n <= 0 {
		return nil, nil
	}
	if len(nodes) < n {
		return nil, fmt.Errorf("%w: placement of %d shards needs %d nodes, %d available", block.ErrUnavailable, n, n, len(nodes))
	}
	s.ranked = rankInto(s.ranked[:0], key, nodes)
	ranked := s.ranked
	out := s.out[:0]
	// First pass: the best node of each unused zone, in rank order.
	for i := range ranked {
		if len(out) == n {
			break
		}
		if !zoneUsed(out, ranked[i].n.Zone) {
			ranked[i].taken = true
			out = append(out, ranked[i].n)
		}
	}
	// Then the best remaining nodes regardless of zone.
	for i := range ranked {
		if len(out) == n {
			break
		}
		if !ranked[i].taken {
			out = append(out, ranked[i].n)
		}
	}
	s.out = out
	return out, nil
}

// zoneUsed reports whether a node of out is in zone. A linear scan: out
// holds one node per shard of a block, a handful.
func zoneUsed(out []Node, zone string) bool {
	for i := range out {
		if out[i].Zone == zone {
			return true
		}
	}
	return false
}

// scored is a node with its rendezvous score for one key.
type scored struct {
	n     Node
	s     float64
	taken bool // Pick's
}

// rank scores nodes for key and sorts them, highest score first, ties by ID.
func rank(key block.Key, nodes []Node) []scored {
	return rankInto(make([]scored, 0, len(nodes)), key, nodes)
}

// rankInto is rank appending to dst.
func rankInto(dst []scored, key block.Key, nodes []Node) []scored {
	kh := KeyHash(key)
	for _, nd := range nodes {
		dst = append(dst, scored{n: nd, s: score(kh, nd)})
	}
	ss := dst
	slices.SortFunc(ss, func(a, b scored) int {
		switch {
		case a.s > b.s:
			return -1
		case a.s < b.s:
			return 1
		}
		return strings.Compare(a.n.ID, b.n.ID)
	})
	return ss
}

// Rank orders all nodes by their rendezvous score for key, highest first.
func Rank(key block.Key, nodes []Node) []Node {
	ss := rank(key, nodes)
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
