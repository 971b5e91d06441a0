package router

// wtable is a worker's own map from block hash to what it holds of that
// block (position, media, write sequence): an open-addressed, linearly
// probed table with backward-shift deletion, like ptable and for the same
// reasons (no tombstones under churn, no pointers for the GC to scan).
type wtable struct {
	slots []wslot // len is a power of two, or 0
	n     int
}

// wslot packs a wentry: sm is seq<<4 | media<<1 | 1 (0: empty slot).
type wslot struct {
	h   uint64
	pos uint32
	sm  uint32
}

const (
	wslotSize  = 16 // bytes of a wslot
	wtMinSlots = 16
	// seqMask bounds the write sequence kept per entry (28 bits). Sequences
	// are compared for equality with FIFO records, and a worker's FIFO is
	// compacted long before 1<<28 stores pass, so the wrap is harmless.
	seqMask = 1<<28 - 1
)

// wentry is what a worker holds of one hash.
type wentry struct {
	pos   uint32
	seq   uint32 // the worker's write sequence at the latest store (masked)
	media uint8  // bit per Medium
}

func wpack(e wentry) uint32 { return (e.seq&seqMask)<<4 | uint32(e.media)<<1 | 1 }

func (s *wslot) entry() wentry {
	return wentry{pos: s.pos, seq: s.sm >> 4, media: uint8(s.sm>>1) & 7}
}

func whome(h uint64, mask int) int {
	x := h * 0x9E3779B97F4A7C15
	return int(x>>32^x) & mask
}

func (t *wtable) find(h uint64) int {
	if len(t.slots) == 0 {
		return -1
	}
	mask := len(t.slots) - 1
	for i := whome(h, mask); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.sm == 0 {
			return -1
		}
		if s.h == h {
			return i
		}
	}
}

// get returns the entry for h.
func (t *wtable) get(h uint64) (wentry, bool) {
	i := t.find(h)
	if i < 0 {
		return wentry{}, false
	}
	return t.slots[i].entry(), true
}

// put sets the entry for h (e.media must not be 0).
func (t *wtable) put(h uint64, e wentry) {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.resize(max(wtMinSlots, 2*len(t.slots)))
	}
	mask := len(t.slots) - 1
	for i := whome(h, mask); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.sm == 0 {
			*s = wslot{h: h, pos: e.pos, sm: wpack(e)}
			t.n++
			return
		}
		if s.h == h {
			s.pos, s.sm = e.pos, wpack(e)
			return
		}
	}
}

// del removes h's entry, if any.
func (t *wtable) del(h uint64) {
	i := t.find(h)
	if i < 0 {
		return
	}
	mask := len(t.slots) - 1
	for j := (i + 1) & mask; t.slots[j].sm != 0; j = (j + 1) & mask {
		k := whome(t.slots[j].h, mask)
		if (j > i && (k <= i || k > j)) || (j < i && k <= i && k > j) {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = wslot{}
	t.n--
	if len(t.slots) > wtMinSlots && t.n*8 < len(t.slots) {
		t.resize(len(t.slots) / 2)
	}
}

func (t *wtable) resize(size int) {
	old := t.slots
	t.slots = make([]wslot, size)
	mask := size - 1
	for i := range old {
		if old[i].sm == 0 {
			continue
		}
		j := whome(old[i].h, mask)
		for t.slots[j].sm != 0 {
			j = (j + 1) & mask
		}
		t.slots[j] = old[i]
	}
}

// all calls fn for every entry (the table must not change meanwhile).
func (t *wtable) all(fn func(h uint64, e wentry)) {
	for i := range t.slots {
		if t.slots[i].sm != 0 {
			fn(t.slots[i].h, t.slots[i].entry())
		}
	}
}

func (t *wtable) bytes() int64 { return int64(cap(t.slots)) * wslotSize }
