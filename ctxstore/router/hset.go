package router

import "math/bits"

// A holder set is the value of one position-map entry: which (worker, medium)
// pairs hold that block. It is one []uint32 in one of two forms:
//
//   - list: the holders themselves (id<<2 | medium), for few holders;
//   - bitset: [bitsetMark, count, words...] where the words are NumMedia
//     bitsets of nw 32-bit words each, medium-major: word m*nw + id/32 holds
//     bit id%32. Blocks many workers share (system prompts) use this form, so
//     a query touches O(workers/32) words at that position, not O(workers).
//
// A set switches to a bitset above toBits holders and back to a list below
// toList. Holder ids are < 1<<30, so no holder equals bitsetMark.
const (
	bitsetMark = ^uint32(0)
	toBits     = 16
	toList     = 8
)

func isBits(hs []uint32) bool { return len(hs) > 0 && hs[0] == bitsetMark }

// bitsWords is nw, the words per medium of a bitset-form set.
func bitsWords(hs []uint32) int { return (len(hs) - 2) / int(NumMedia) }

func newBits(nw int) []uint32 {
	hs := make([]uint32, 2+int(NumMedia)*nw)
	hs[0] = bitsetMark
	return hs
}

// growBits returns a copy of hs with room for worker id.
func growBits(hs []uint32, id uint32) []uint32 {
	nw, nnw := bitsWords(hs), int(id>>5)+1
	nnw = max(nnw, nw+nw/2)
	out := newBits(nnw)
	out[1] = hs[1]
	for m := range int(NumMedia) {
		copy(out[2+m*nnw:], hs[2+m*nw:2+(m+1)*nw])
	}
	return out
}

// hsetAdd adds holder x (not already present).
func hsetAdd(hs []uint32, x holder) []uint32 {
	if !isBits(hs) {
		hs = append(hs, x)
		if len(hs) <= toBits {
			return hs
		}
		maxID := uint32(0)
		for _, y := range hs {
			maxID = max(maxID, y>>2)
		}
		b := newBits(int(maxID>>5) + 1)
		for _, y := range hs {
			b = bitsSet(b, y)
		}
		return b
	}
	return bitsSet(hs, x)
}

func bitsSet(hs []uint32, x holder) []uint32 {
	id, m := x>>2, int(x&3)
	if int(id>>5) >= bitsWords(hs) {
		hs = growBits(hs, id)
	}
	w := &hs[2+m*bitsWords(hs)+int(id>>5)]
	if *w&(1<<(id&31)) == 0 {
		*w |= 1 << (id & 31)
		hs[1]++
	}
	return hs
}

// hsetDel removes holder x; ok is false when the set is now empty.
func hsetDel(hs []uint32, x holder) ([]uint32, bool) {
	if !isBits(hs) {
		for i, y := range hs {
			if y == x {
				last := len(hs) - 1
				hs[i] = hs[last]
				hs = hs[:last]
				break
			}
		}
		return hs, len(hs) > 0
	}
	id, m := x>>2, int(x&3)
	nw := bitsWords(hs)
	if int(id>>5) < nw {
		w := &hs[2+m*nw+int(id>>5)]
		if *w&(1<<(id&31)) != 0 {
			*w &^= 1 << (id & 31)
			hs[1]--
		}
	}
	if hs[1] == 0 {
		return nil, false
	}
	if hs[1] >= toList {
		return hs, true
	}
	list := make([]uint32, 0, toList)
	for m := range int(NumMedia) {
		for k, w := range hs[2+m*nw : 2+(m+1)*nw] {
			for w != 0 {
				b := uint32(bits.TrailingZeros32(w))
				w &= w - 1
				list = append(list, (uint32(k)<<5|b)<<2|uint32(m))
			}
		}
	}
	return list, true
}
