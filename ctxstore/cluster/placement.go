package cluster

import (
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/erasure"
	"github.com/ctxtier/ctxtier/ctxstore/placement"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

// Where shards go: the namespace's erasure code, a shard's key on its
// holder, and the members that take new shards (placement.Pick chooses
// among them).

// code returns the erasure code of a namespace, looked up in the FSM.
func (b *Backend) code(ns string) (*erasure.Code, error) {
	b.nsLookups.Add(1)
	return namespaceCode(b.node.FSM(), ns)
}

// codeOf is the erasure code of namespace ns for a read with opts: from
// opts.Namespace when the caller resolved it (no second lookup; erasure.New
// is cached per (k, m)), from the FSM otherwise.
func (b *Backend) codeOf(ns string, opts *block.GetOptions) (*erasure.Code, error) {
	if opts.Resolved(ns) {
		return erasure.New(opts.Namespace.DataShards, opts.Namespace.ParityShards)
	}
	return b.code(ns)
}

// putCode is codeOf for a put: the erasure code of the namespace the Store
// resolved for it (PutOptions.Namespace), else of ns looked up in the index.
func (b *Backend) putCode(ns string, opts *block.PutOptions) (*erasure.Code, error) {
	if opts.Resolved(ns) {
		return erasure.New(opts.Namespace.DataShards, opts.Namespace.ParityShards)
	}
	return b.code(ns)
}

// namespaceCode returns the erasure code of namespace ns in f.
func namespaceCode(f *fsm.FSM, ns string) (*erasure.Code, error) {
	n, err := f.Namespace(ns)
	if err != nil {
		return nil, err
	}
	return erasure.New(n.DataShards, n.ParityShards)
}

// shardKey names shard i of key on a node: a replica (k=1) is the block
// itself, an erasure shard carries its index.
func shardKey(key block.Key, c *erasure.Code, i int) block.Key {
	if c.K == 1 {
		return key.Block()
	}
	return key.WithShard(i)
}

// candidates are the members that take new shards: alive ones, minus exclude.
func (b *Backend) candidates(exclude map[string]bool) []placement.Node {
	return candidatesOf(b.node.FSM(), exclude)
}

// candidatesOf is candidates in the index f.
func candidatesOf(f *fsm.FSM, exclude map[string]bool) []placement.Node {
	var out []placement.Node
	f.EachMember(func(m fsm.Member) bool {
		if m.State == fsm.MemberAlive && !exclude[m.ID] {
			out = append(out, placement.Node{ID: m.ID, Zone: m.Zone, Weight: placement.CapacityWeight(m.Capacity)})
		}
		return true
	})
	return out
}
