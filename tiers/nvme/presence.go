package nvme

import (
	"hash/maphash"
	"sync/atomic"
)

// presence is an in-memory counting filter over the keys of the badger
// index: a slot per hash of the index key counts the indexed keys that hash
// there. A slot at zero proves the key is not indexed, so lookup answers a
// miss without reading badger: a put of a new block (tiers.Manager.Put asks
// the lower tier whether it already holds the key) then costs no index
// read. A slot above zero only says "maybe": lookup reads badger as before.
//
// Invariant (no false negative): a key that is in the index always has a
// slot above zero. add runs before the index write that makes a key present
// and remove after the index delete that makes it absent, so a lookup that
// sees zero ran before the key became present or after it left; add and
// remove pair up one to one with the index's absent→present and
// present→absent changes (commitNew of a new key, dropIf, and at open
// checkIndex and scanTail). Slots are computed from the index key's bytes,
// so two block.Keys that share an index entry share a slot.
//
// A nil presence (Config.PresenceSlots 0) answers "maybe" for every key.
type presence struct {
	seed  maphash.Seed
	mask  uint64
	slots []atomic.Uint32
	skips atomic.Uint64 // lookups answered from the filter
}

func newPresence(slots int) *presence {
	if slots <= 0 {
		return nil
	}
	return &presence{seed: maphash.MakeSeed(), mask: uint64(slots - 1), slots: make([]atomic.Uint32, slots)}
}

func (p *presence) slot(ik []byte) *atomic.Uint32 {
	return &p.slots[maphash.Bytes(p.seed, ik)&p.mask]
}

// add counts an index key that is about to become present.
func (p *presence) add(ik []byte) {
	if p != nil {
		p.slot(ik).Add(1)
	}
}

// remove uncounts an index key that has left the index.
func (p *presence) remove(ik []byte) {
	if p != nil {
		p.slot(ik).Add(^uint32(0))
	}
}

// absent reports whether the index key is certainly not in the index.
func (p *presence) absent(ik []byte) bool {
	if p == nil || p.slot(ik).Load() != 0 {
		return false
	}
	p.skips.Add(1)
	return true
}

// skipped is the number of lookups answered from the filter.
func (p *presence) skipped() uint64 {
	if p == nil {
		return 0
	}
	return p.skips.Load()
}
