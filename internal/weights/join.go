package weights

import (
	"context"
	"slices"

	"github.com/ctxtier/ctxtier/internal/locations"
)

// Joining a stream. Pullers that start together move through a checkpoint
// together: each block is read from a lower tier once, by its holder, and
// the others are served from the copy that read left in the holder's DRAM
// (the tier manager's single flight and promotion). A puller that starts
// later, from the first chunk, would find those copies evicted and read
// every block from the lower tiers again on its own. With Config.Join a
// pull first asks every node (GetObjectLocations, whose answer marks the
// answering node's own shards that are in its DRAM: Holder.InMemory) which
// of the chunks it needs are in memory where it would read them, finds the
// longest run of such chunks in checkpoint order, and, unless the chunk it
// is at is in memory, starts in the middle of that run (its older half may
// be evicted before the pull gets there); it then goes on in order to the
// end of the checkpoint and fetches the chunks it passed over last. It
// asks again every joinBatch chunks, so a pull that falls behind the
// stream catches up with it again. Pullers that start together see the
// same answers and keep moving together. Chunks are still verified one by
// one, whatever the order.

// segment is a run of chunks of one file, fetched in order.
type segment struct {
	file   int
	chunks []int
}

// position is a chunk of a checkpoint: file index, chunk index.
type position struct{ file, chunk int }

func (p position) before(q position) bool {
	return p.file < q.file || p.file == q.file && p.chunk < q.chunk
}

// joinPlan orders the chunks todo[f] of every file f (each ascending)
// into segments, in checkpoint order from the first chunk at or after
// from, wrapping around to the ones before it; when hot (per file, per
// chunk: in memory where it would be read) has a run of hot chunks in that
// order and the first chunk is not hot, the plan starts in the middle of
// the longest such run instead and wraps around the same way. hot may be
// nil or shorter than todo (missing entries are cold).
func joinPlan(todo [][]int, hot [][]bool, from position) []segment {
	type item = position
	var head, tail []item
	for f, cs := range todo {
		for _, c := range cs {
			if it := (item{f, c}); it.before(from) {
				tail = append(tail, it)
			} else {
				head = append(head, it)
			}
		}
	}
	seq := append(head, tail...)
	isHot := func(it item) bool {
		return it.file < len(hot) && it.chunk < len(hot[it.file]) && hot[it.file][it.chunk]
	}
	bestStart, bestLen, runStart := 0, 0, -1
	for i, it := range seq {
		if !isHot(it) {
			runStart = -1
			continue
		}
		if runStart < 0 {
			runStart = i
		}
		if n := i - runStart + 1; n > bestLen {
			bestStart, bestLen = runStart, n
		}
	}
	start := 0
	if bestLen > 0 && !isHot(seq[0]) {
		// Where the pull is now is cold: jump into the stream. (Where it
		// is hot, the pull is in the stream already and goes on.)
		start = bestStart + bestLen/2
	}
	var out []segment
	if len(seq) == 0 {
		return nil
	}
	for k := range seq {
		it := seq[(start+k)%len(seq)]
		if n := len(out) - 1; n >= 0 && out[n].file == it.file && out[n].chunks[len(out[n].chunks)-1] < it.chunk {
			out[n].chunks = append(out[n].chunks, it.chunk)
			continue
		}
		out = append(out, segment{it.file, []int{it.chunk}})
	}
	return out
}

// joinBatch is how many chunks a joining pull fetches before it asks the
// nodes again where the checkpoint is in memory: a pull that joined a
// stream and then fell behind it (its DRAM copies evicted before it got
// there) jumps ahead to where the stream is now, instead of reading the
// rest from the lower tiers on its own; the chunks it jumps over are
// fetched later, like those before its first start. Each re-plan reads a
// page of block locations per file left, per node: every 32 chunks that
// cost the fan-out benchmark's pullers about a fifth more CPU per byte.
const joinBatch = 128

// joining reports whether pulls plan by what the nodes hold in memory:
// Config.Join with routing in use.
func (c *Client) joining() bool {
	return c.cfg.Join && c.cfg.Route && len(c.mcs) > 1 && len(c.routerInit().endpoints()) > 1
}

// plan returns the order in which to fetch todo (per file of m, the
// chunks it needs) from position from on: joinPlan's by what the nodes
// hold in memory when joining, else (or when a node's answer cannot be
// used: a node down, say) in order.
func (c *Client) plan(ctx context.Context, m *Manifest, todo [][]int, from position) []segment {
	if !c.joining() {
		return joinPlan(todo, nil, from)
	}
	nodes := c.routerInit().endpoints()
	hot := make([][]bool, len(todo))
	for f, cs := range todo {
		if len(cs) > 0 {
			hot[f] = c.hotChunks(ctx, c.objectName(m.Model, m.Files[f].Path), m.Files[f].Size, m.ChunkSize, nodes)
		}
	}
	return joinPlan(todo, hot, from)
}

// fetchPlanned hands fetch the chunks todo in the plan's order, one
// segment (chunks of one file, in order) at a time. When joining it
// re-plans every joinBatch chunks from where it got to, so a pull that
// fell behind the stream it joined catches up with it again; otherwise
// the first plan (in order) is the whole order. todo is consumed.
func (c *Client) fetchPlanned(ctx context.Context, m *Manifest, todo [][]int, fetch func(segment) error) error {
	join := c.joining()
	var from position
	for {
		segs := c.plan(ctx, m, todo, from)
		if len(segs) == 0 {
			return nil
		}
		budget := -1 // all of the plan
		if join {
			budget = joinBatch
		}
		for _, seg := range segs {
			if budget == 0 {
				break
			}
			if budget > 0 && len(seg.chunks) > budget {
				seg.chunks = seg.chunks[:budget]
			}
			if err := fetch(seg); err != nil {
				return err
			}
			todo[seg.file] = slices.DeleteFunc(todo[seg.file], func(c int) bool {
				_, found := slices.BinarySearch(seg.chunks, c)
				return found
			})
			from = position{seg.file, seg.chunks[len(seg.chunks)-1] + 1}
			if budget > 0 {
				budget -= len(seg.chunks)
			}
		}
		if !join {
			return nil
		}
	}
}

// hotChunks asks every node through its endpoint which blocks of the
// object name (size bytes) it has in DRAM, and returns, per chunk of
// chunk bytes, whether every block the chunk overlaps is in memory where
// a routed read takes it from: the holder routing picks (holderEndpoint)
// for a replicated block, every data shard's holder for an erasure-coded
// one. Nil (every chunk cold) when a node's answer cannot be used.
func (c *Client) hotChunks(ctx context.Context, name string, size, chunk int64, nodes map[string]int) []bool {
	type blk struct {
		off, end int64
		need     map[string]bool // holders whose copy the read uses
	}
	var blocks []blk
	inMem := map[string]map[int64]bool{} // node -> block offsets it has in DRAM
	for node, ep := range nodes {
		mine := map[int64]bool{}
		inMem[node] = mine
		first := blocks == nil
		for off, done := int64(0), false; !done; {
			loc, err := c.locations(ctx, ep, name, off, locations.MaxBlocks)
			if err != nil || loc.Node != node {
				return nil
			}
			var rt route
			next, fin, err := rt.add(loc, off, size, nodes)
			if err != nil {
				return nil
			}
			for _, b := range loc.Blocks {
				for _, h := range b.Holders {
					if h.Node == node && h.InMemory {
						mine[b.Offset] = true
					}
				}
				if first {
					need := map[string]bool{}
					if b.DataShards > 1 {
						for _, h := range b.Holders {
							if h.Shard < b.DataShards {
								need[h.Node] = true
							}
						}
					} else if ep := holderEndpoint(nodes, b); ep >= 0 {
						for n, e := range nodes {
							if e == ep {
								need[n] = true
							}
						}
					}
					blocks = append(blocks, blk{b.Offset, b.Offset + b.Length, need})
				}
			}
			off, done = next, fin
		}
	}
	if chunk <= 0 {
		return nil
	}
	// blocks tile the object in order (route.add checked it), so one pass
	// over them serves every chunk.
	blockHot := func(b blk) bool {
		if len(b.need) == 0 {
			return false
		}
		for n := range b.need {
			if !inMem[n][b.off] {
				return false
			}
		}
		return true
	}
	hot := make([]bool, (size+chunk-1)/chunk)
	j := 0
	for i := range hot {
		lo, hi := int64(i)*chunk, min(int64(i+1)*chunk, size)
		for j < len(blocks) && blocks[j].end <= lo {
			j++
		}
		ok := j < len(blocks)
		for k := j; k < len(blocks) && blocks[k].off < hi && ok; k++ {
			ok = blockHot(blocks[k])
		}
		hot[i] = ok
	}
	return hot
}
