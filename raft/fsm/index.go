package fsm

import (
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// The block index: per namespace, a copy-on-write B+tree of compact slots
// ordered by (hash, part). A slot holds an entry in 64 bytes with no
// pointer (member IDs are interned: a placement is node numbers into the
// state's name table, its shards after the first a run in the state's
// refArena), so the collector never scans a leaf's slots, and the tree's
// leaves are arrays of slots, so an entry costs about 64 B / fill factor
// of Go heap instead of a radix node, a leaf, a channel and a placement
// slice each. An apply copies only the nodes on the paths it changes
// (nodes it already copied in this batch are changed in place), so every
// published state stays immutable and readers and snapshots take no lock.

const (
	leafMax  = 64 // slots per leaf before it splits
	innerMax = 64 // children per inner node before it splits
)

// ikey is a block key within its namespace's tree.
type ikey struct {
	hash uint64
	part uint32 // 0: the whole block; 1<<16 | part for part `part`
}

func keyOf(k block.Key) ikey {
	if k.HasPart {
		return ikey{hash: k.Hash, part: 1<<16 | uint32(k.Part)}
	}
	return ikey{hash: k.Hash}
}

func (a ikey) less(b ikey) bool { return a.hash < b.hash || a.hash == b.hash && a.part < b.part }

// blockKey rebuilds the block key of ik in namespace ns.
func (a ikey) blockKey(ns string) block.Key {
	k := block.Key{Namespace: ns, Hash: a.hash}
	if a.part != 0 {
		k = k.WithPart(uint16(a.part))
	}
	return k
}

// shardRef is one shard of a placement: an interned node and the shard number.
type shardRef struct {
	node  uint32
	index uint16
}

// slot is one index entry in its compact form.
type slot struct {
	hash    uint64
	gen     uint64
	created int64 // Unix nanoseconds; 0 for the zero time
	pin     int64 // likewise
	size    int64
	more    uint32 // where the placement's shards after the first start in the state's refArena
	sum     uint32
	first   shardRef
	part    uint32
	shards  uint16 // shards in the placement: 0 none, 1 first only, more: first and shards-1 from more
	hints   TierHints
}

func (s *slot) key() ikey { return ikey{hash: s.hash, part: s.part} }

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.Unix(0, v).UTC()
}

// toSlot packs e under k, interning its placement's node IDs in s.
func (s *state) toSlot(k ikey, e Entry) slot {
	sl := slot{hash: k.hash, part: k.part, gen: e.Generation, created: unixNano(e.Created), pin: unixNano(e.PinUntil),
		size: e.Size, sum: e.Sum, hints: e.TierHints}
	sl.setPlacement(s, e.Placement)
	return sl
}

// setPlacement sets sl's placement to p, appending the shards after the
// first to s's arena. The caller releases the placement sl had, if any
// slot still names it (refArena.release).
func (sl *slot) setPlacement(s *state, p []Shard) { //nolint:revive,staticcheck // s is the *state parameter
	sl.shards, sl.more, sl.first = 0, 0, shardRef{}
	if len(p) == 0 {
		return
	}
	sl.first, sl.shards = shardRef{node: s.intern(p[0].NodeID), index: p[0].Index}, uint16(len(p))
	if len(p) > 1 {
		off, more := s.refs.alloc(len(p) - 1)
		for i, x := range p[1:] {
			more[i] = shardRef{node: s.intern(x.NodeID), index: x.Index}
		}
		sl.more = off
	}
}

// entry unpacks sl, a slot of state s.
func (sl *slot) entry(s *state) Entry { //nolint:revive,staticcheck // sl, as setPlacement
	return sl.entryInto(s, nil)
}

// entryInto is entry with the placement appended to buf[:0] (a new slice
// when buf is nil).
func (sl *slot) entryInto(s *state, buf []Shard) Entry { //nolint:revive,staticcheck // sl, as setPlacement
	e := Entry{Size: sl.size, Sum: sl.sum, TierHints: sl.hints, PinUntil: fromUnixNano(sl.pin), Generation: sl.gen, Created: fromUnixNano(sl.created)}
	if sl.shards == 0 {
		return e
	}
	if buf == nil {
		buf = make([]Shard, 0, sl.shards)
	}
	names := s.nodeNames
	e.Placement = append(buf[:0], Shard{NodeID: names[sl.first.node], Index: sl.first.index})
	if sl.shards > 1 {
		for _, x := range s.refs.get(sl.more, int(sl.shards)-1) {
			e.Placement = append(e.Placement, Shard{NodeID: names[x.node], Index: x.index})
		}
	}
	return e
}

// intern returns id's number in the state's name table, adding it. Only
// the writer (under FSM.wmu) calls it: it appends past the end of the
// names every published state sees, and the id map is the writer's alone.
func (s *state) intern(id string) uint32 {
	if n, ok := s.nodeIDs[id]; ok {
		return n
	}
	n := uint32(len(s.nodeNames))
	s.nodeNames = append(s.nodeNames, id)
	s.nodeIDs[id] = n
	return n
}

// node is a B+tree node: a leaf (kids nil) holds slots in key order; an
// inner node holds len(kids)-1 keys, keys[i] no greater than every key
// under kids[i+1] and greater than every key under kids[i].
type node struct {
	gen   uint64 // the transaction that made it, the only one that may change it
	keys  []ikey
	kids  []*node
	slots []slot
}

// tree is one namespace's index: immutable once published.
type tree struct {
	root *node
	n    int
}

// txnGen numbers transactions, so a node knows whether the running one made it.
var txnGen atomic.Uint64

func childIndex(keys []ikey, k ikey) int {
	return sort.Search(len(keys), func(i int) bool { return k.less(keys[i]) })
}

func slotIndex(slots []slot, k ikey) (int, bool) {
	i := sort.Search(len(slots), func(i int) bool { return !slots[i].key().less(k) })
	return i, i < len(slots) && slots[i].key() == k
}

func (t *tree) get(k ikey) (*slot, bool) {
	if t == nil || t.root == nil {
		return nil, false
	}
	n := t.root
	for n.kids != nil {
		n = n.kids[childIndex(n.keys, k)]
	}
	i, ok := slotIndex(n.slots, k)
	if !ok {
		return nil, false
	}
	return &n.slots[i], true
}

// own returns n if transaction gen made it, else a copy gen may change
// (with room for one more element, the common case of an insert).
func own(gen uint64, n *node) *node {
	if n.gen == gen {
		return n
	}
	c := &node{gen: gen}
	if n.kids != nil {
		c.keys = append(make([]ikey, 0, len(n.keys)+1), n.keys...)
		c.kids = append(make([]*node, 0, len(n.kids)+1), n.kids...)
	} else {
		c.slots = append(make([]slot, 0, len(n.slots)+1), n.slots...)
	}
	return c
}

// set inserts or replaces s in t (which transaction gen may change) and
// reports whether it was added.
func (t *tree) set(gen uint64, s slot) bool {
	if t.root == nil {
		t.root, t.n = &node{gen: gen, slots: []slot{s}}, 1
		return true
	}
	root, right, sep, added := set(gen, t.root, s)
	if right != nil {
		root = &node{gen: gen, keys: []ikey{sep}, kids: []*node{root, right}}
	}
	t.root = root
	if added {
		t.n++
	}
	return added
}

func set(gen uint64, n *node, s slot) (nn, right *node, sep ikey, added bool) {
	n = own(gen, n)
	k := s.key()
	if n.kids == nil {
		i, found := slotIndex(n.slots, k)
		if found {
			n.slots[i] = s
			return n, nil, ikey{}, false
		}
		n.slots = insertSlot(n.slots, i, s)
		if len(n.slots) <= leafMax {
			return n, nil, ikey{}, true
		}
		if i == len(n.slots)-1 {
			// Keys arriving in order fill leaves instead of halving them:
			// the full left part keeps its array (one spare slot), and
			// the new right leaf, where the next keys in order go, starts
			// with room for a few (insertSlot grows it from there).
			r := &node{gen: gen, slots: append(make([]slot, 0, 8), s)}
			n.slots = n.slots[:i:i]
			return n, r, s.key(), true
		}
		at := len(n.slots) / 2
		r := &node{gen: gen, slots: slices.Clone(n.slots[at:])}
		n.slots = slices.Clone(n.slots[:at])
		return n, r, r.slots[0].key(), true
	}
	i := childIndex(n.keys, k)
	c, r, csep, added := set(gen, n.kids[i], s)
	n.kids[i] = c
	if r == nil {
		return n, nil, ikey{}, added
	}
	n.keys = slices.Insert(n.keys, i, csep)
	n.kids = slices.Insert(n.kids, i+1, r)
	if len(n.kids) <= innerMax {
		return n, nil, ikey{}, added
	}
	at := len(n.kids) / 2
	rn := &node{gen: gen, keys: slices.Clone(n.keys[at:]), kids: slices.Clone(n.kids[at:])}
	up := n.keys[at-1]
	n.keys, n.kids = slices.Clone(n.keys[:at-1]), slices.Clone(n.kids[:at])
	return n, rn, up, added
}

// insertSlot inserts s at i in a leaf's slots that this transaction owns.
// A full array doubles, as slices.Insert would, but never past a leaf's
// split size (leafMax+1), so a leaf published after several inserts in one
// apply holds at most a leaf's worth of slots; a key that goes at the end
// of a full array (keys in order: the next ones follow it here) grows it
// to that size at once.
func insertSlot(slots []slot, i int, s slot) []slot {
	n := len(slots)
	if n == cap(slots) {
		c := min(max(2*n, 8), leafMax+1)
		if i == n {
			c = leafMax + 1
		}
		grown := make([]slot, n, c)
		copy(grown, slots)
		slots = grown
	}
	slots = slots[:n+1]
	copy(slots[i+1:], slots[i:n])
	slots[i] = s
	return slots
}

// delete removes k from t (which transaction gen may change) and reports
// whether it was there. A leaf that empties leaves the tree; leaves are
// not merged, so a tree thinned by deletes keeps part-empty leaves until
// their keys come back.
func (t *tree) delete(gen uint64, k ikey) bool {
	if t.root == nil {
		return false
	}
	root, ok := del(gen, t.root, k)
	if !ok {
		return false
	}
	for root != nil && root.kids != nil && len(root.kids) == 1 {
		root = root.kids[0]
	}
	t.root = root
	t.n--
	return true
}

// del returns n after removing k (nil when n emptied) and whether k was there.
func del(gen uint64, n *node, k ikey) (*node, bool) {
	if n.kids == nil {
		i, found := slotIndex(n.slots, k)
		if !found {
			return n, false
		}
		if len(n.slots) == 1 {
			return nil, true
		}
		n = own(gen, n)
		n.slots = slices.Delete(n.slots, i, i+1)
		return n, true
	}
	i := childIndex(n.keys, k)
	c, ok := del(gen, n.kids[i], k)
	if !ok {
		return n, false
	}
	if c == nil && len(n.kids) == 1 {
		return nil, true
	}
	n = own(gen, n)
	if c != nil {
		n.kids[i] = c
		return n, true
	}
	n.kids = slices.Delete(n.kids, i, i+1)
	if i == 0 {
		n.keys = slices.Delete(n.keys, 0, 1)
	} else {
		n.keys = slices.Delete(n.keys, i-1, i)
	}
	return n, true
}

// ascend calls fn on every slot from key `from` on, in key order, until fn
// returns false; it reports whether it ran to the end.
func (t *tree) ascend(from ikey, fn func(*slot) bool) bool {
	if t == nil || t.root == nil {
		return true
	}
	return ascend(t.root, from, fn)
}

func ascend(n *node, from ikey, fn func(*slot) bool) bool {
	if n.kids == nil {
		i, _ := slotIndex(n.slots, from)
		for ; i < len(n.slots); i++ {
			if !fn(&n.slots[i]) {
				return false
			}
		}
		return true
	}
	for i := childIndex(n.keys, from); i < len(n.kids); i++ {
		if !ascend(n.kids[i], from, fn) {
			return false
		}
	}
	return true
}

// indexTxn changes a state's index: the trees it touches are copied once
// and changed in place; commit publishes them into the state.
type indexTxn struct {
	s     *state
	gen   uint64
	trees map[string]*tree
}

func (s *state) indexTxn() *indexTxn {
	return &indexTxn{s: s, gen: txnGen.Add(1)}
}

// tree returns ns's tree for changing (created when absent).
func (x *indexTxn) tree(ns string) *tree {
	if t, ok := x.trees[ns]; ok {
		return t
	}
	t := &tree{}
	if old := x.s.index[ns]; old != nil {
		*t = *old
	}
	if x.trees == nil {
		x.trees = map[string]*tree{}
	}
	x.trees[ns] = t
	return t
}

// get reads ns's tree as this transaction left it.
func (x *indexTxn) get(ns string, k ikey) (*slot, bool) {
	if t, ok := x.trees[ns]; ok {
		return t.get(k)
	}
	return x.s.index[ns].get(k)
}

func (x *indexTxn) commit() {
	if len(x.trees) == 0 {
		return
	}
	idx := make(map[string]*tree, len(x.s.index)+len(x.trees))
	for ns, t := range x.s.index {
		idx[ns] = t
	}
	for ns, t := range x.trees {
		if t.n == 0 {
			delete(idx, ns)
		} else {
			idx[ns] = t
		}
	}
	x.s.index = idx
}

// indexLen counts the entries of every namespace.
func (s *state) indexLen() int {
	n := 0
	for _, t := range s.index {
		n += t.n
	}
	return n
}
