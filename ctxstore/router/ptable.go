package router

// ptable is one shard of the position map: an open-addressed, linearly probed
// hash table from (block hash, position) to that key's holder set. Deletion
// shifts the following entries back instead of leaving tombstones, so probe
// lengths stay short under the constant store/remove churn of KV events (Go's
// built-in map keeps tombstones until it grows, and lookups then probe long
// runs of them). Slots hold no pointers, so the garbage collector does not
// scan the table.
//
// A slot keeps up to three holders inline; a key with more holders keeps its
// set in ext, in the list-or-bitset form of hset.go.
type ptable struct {
	slots []pslot // len is a power of two, or 0
	n     int     // keys
	ext   [][]uint32
	free  []uint32 // free ext indices
}

type pslot struct {
	h   uint64
	pos uint32    // position+1; 0: empty slot
	v   [3]uint32 // holders+1, packed at the front (0: none); or v[0] == extMark and v[1] an ext index
}

const (
	pslotSize   = 24 // bytes of a pslot
	extMark     = ^uint32(0)
	ptMinSlots  = 16
	inlineSlots = 3
)

func (t *ptable) home(h uint64, pos uint32) int {
	return int(mix(h, pos)) & (len(t.slots) - 1)
}

// find returns the index of key (h, pos)'s slot, or -1.
func (t *ptable) find(h uint64, pos uint32) int {
	if len(t.slots) == 0 {
		return -1
	}
	mask := len(t.slots) - 1
	p := pos + 1
	for i := t.home(h, pos); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.pos == p && s.h == h {
			return i
		}
		if s.pos == 0 {
			return -1
		}
	}
}

// holders returns the key's holder set as a list (inline slots copied into
// buf) or as the ext set itself (list or bitset form).
func (t *ptable) holders(s *pslot, buf *[inlineSlots]uint32) []uint32 {
	if s.v[0] == extMark {
		return t.ext[s.v[1]]
	}
	n := 0
	for _, v := range s.v {
		if v == 0 {
			break
		}
		buf[n] = v - 1
		n++
	}
	return buf[:n]
}

// add adds holder x (not already present) to key (h, pos) and reports
// whether the key is new.
func (t *ptable) add(h uint64, pos uint32, x holder) bool {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.resize(max(ptMinSlots, 2*len(t.slots)))
	}
	mask := len(t.slots) - 1
	p := pos + 1
	i := t.home(h, pos)
	for ; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.pos == 0 {
			*s = pslot{h: h, pos: p, v: [3]uint32{x + 1}}
			t.n++
			return true
		}
		if s.pos == p && s.h == h {
			break
		}
	}
	s := &t.slots[i]
	if s.v[0] == extMark {
		t.ext[s.v[1]] = hsetAdd(t.ext[s.v[1]], x)
		return false
	}
	for k := range s.v {
		if s.v[k] == 0 {
			s.v[k] = x + 1
			return false
		}
	}
	list := make([]uint32, 0, 2*(inlineSlots+1))
	for _, v := range s.v {
		list = append(list, v-1)
	}
	list = hsetAdd(list, x)
	var e uint32
	if k := len(t.free); k > 0 {
		e = t.free[k-1]
		t.free = t.free[:k-1]
		t.ext[e] = list
	} else {
		e = uint32(len(t.ext))
		t.ext = append(t.ext, list)
	}
	s.v = [3]uint32{extMark, e, 0}
	return false
}

// del removes holder x from key (h, pos) and reports whether the key is gone.
// A key or holder that is not there is left alone (and reported gone only if
// the key is absent).
func (t *ptable) del(h uint64, pos uint32, x holder) bool {
	i := t.find(h, pos)
	if i < 0 {
		return true
	}
	s := &t.slots[i]
	if s.v[0] == extMark {
		e := s.v[1]
		hs, ok := hsetDel(t.ext[e], x)
		switch {
		case !ok:
			t.freeExt(e)
		case !isBits(hs) && len(hs) <= inlineSlots:
			var v [3]uint32
			for k, y := range hs {
				v[k] = y + 1
			}
			t.freeExt(e)
			s.v = v
			return false
		default:
			t.ext[e] = hs
			return false
		}
	} else {
		last := -1
		at := -1
		for k, v := range s.v {
			if v == 0 {
				break
			}
			last = k
			if v == x+1 {
				at = k
			}
		}
		if at < 0 {
			return false
		}
		s.v[at], s.v[last] = s.v[last], 0
		if s.v[0] != 0 {
			return false
		}
	}
	t.deleteSlot(i)
	return true
}

func (t *ptable) freeExt(e uint32) {
	t.ext[e] = nil
	t.free = append(t.free, e)
	if len(t.free) == len(t.ext) {
		t.ext, t.free = nil, nil
	}
}

// deleteSlot empties slot s and shifts back the entries after it that would
// otherwise become unreachable (backward-shift deletion).
func (t *ptable) deleteSlot(i int) {
	mask := len(t.slots) - 1
	for j := (i + 1) & mask; t.slots[j].pos != 0; j = (j + 1) & mask {
		k := t.home(t.slots[j].h, t.slots[j].pos-1)
		// Move j to the hole at i unless its home lies cyclically in (i, j].
		if (j > i && (k <= i || k > j)) || (j < i && k <= i && k > j) {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = pslot{}
	t.n--
	if len(t.slots) > ptMinSlots && t.n*8 < len(t.slots) {
		t.resize(len(t.slots) / 2)
	}
}

func (t *ptable) resize(size int) {
	old := t.slots
	t.slots = make([]pslot, size)
	mask := size - 1
	for i := range old {
		if old[i].pos == 0 {
			continue
		}
		j := t.home(old[i].h, old[i].pos-1)
		for t.slots[j].pos != 0 {
			j = (j + 1) & mask
		}
		t.slots[j] = old[i]
	}
}

// bytes is the table's heap footprint (slots, ext sets).
func (t *ptable) bytes() int64 {
	b := int64(cap(t.slots))*pslotSize + int64(cap(t.ext))*24 + int64(cap(t.free))*4
	for _, hs := range t.ext {
		b += int64(cap(hs)) * 4
	}
	return b
}
