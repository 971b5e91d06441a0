package block

import (
	"hash/crc32"
	"math/bits"
)

// The folding kernel (checksum_amd64.s) computes CRC-32C sixteen bytes per
// lane, sixteen lanes (256 bytes) at a time, with carry-less multiplication.
// Its constants are powers of x reduced modulo the Castagnoli polynomial;
// this file derives every one of them from crc32.Castagnoli at start-up, so
// the assembly holds no numbers of its own.
//
// Notation. A CRC over GF(2) treats the message as a polynomial M(x), the
// first bit of the stream the highest power; the raw (uncomplemented)
// reflected CRC of M is M(x)·x^32 mod P(x). In the reflected layout a
// 128-bit lane loaded little-endian holds, at integer bit i, the coefficient
// of x^(127-i) of that lane's part of M. Its low quadword H (bits 0..63) is
// the earlier half, its high quadword L the later: lane = H·x^64 + L.
//
// Folding a lane forward by D bits (onto a lane D bits later in the stream)
// replaces lane·x^D by a congruent polynomial of degree < 128. The kernel
// multiplies H and L by 64-bit constants kH and kL, each the reduction
// x^e mod P (degree <= 31) stored bit-reflected one place up (integer bit j
// holds the coefficient of x^(32-j)). The carry-less product of H (bit i ~
// x^(63-i)) and such a constant (bit j ~ x^(32-j)) holds at bit k the
// coefficient of x^(95-k) of H·k, which read as a lane (bit k ~ x^(127-k)) is
// x^32·H·k. So x^32·H·kH ≡ H·x^(64+D) needs kH = x^(D+32) mod P, and
// x^32·L·kL ≡ L·x^D needs kL = x^(D-32) mod P. For D = 0 (the last lane of
// the final reduction) kL = x^-32 mod P, which exists because P(0) = 1.

// foldBytes is how many bytes the kernel consumes per step: four 512-bit
// accumulators.
const foldBytes = 256

// foldLanes is the number of 128-bit lanes in those four accumulators.
const foldLanes = foldBytes / 16

// foldTable is what the kernel reads: loop is the pair (kH, kL) that folds
// every lane foldBytes forward (broadcast to all lanes), and final[j] the
// pair that folds lane j of the last foldBytes onto the last lane. Its layout
// is part of the assembly's contract: loop at offset 0, final at offset 16.
type foldTable struct {
	loop  [2]uint64
	final [foldLanes][2]uint64
}

var foldConsts = makeFoldTable(crc32.Castagnoli)

// makeFoldTable derives the kernel's constants for the reflected polynomial
// rev (crc32.Castagnoli's form).
func makeFoldTable(rev uint32) *foldTable {
	p := polyFromReflected(rev)
	t := &foldTable{loop: foldPair(p, foldBytes*8)}
	for j := range foldLanes {
		t.final[j] = foldPair(p, (foldLanes-1-j)*128)
	}
	return t
}

// foldPair is (kH, kL) for a fold of d bits, as the kernel stores them.
func foldPair(p uint64, d int) [2]uint64 {
	return [2]uint64{kernelConst(xPowMod(p, d+32)), kernelConst(xPowMod(p, d-32))}
}

// polyFromReflected turns a reflected 32-bit CRC polynomial (x^32 implied)
// into the normal form used below: bit d holds the coefficient of x^d,
// x^32 included.
func polyFromReflected(rev uint32) uint64 {
	return 1<<32 | uint64(bits.Reverse32(rev))
}

// kernelConst stores r (normal form, degree <= 31) the way the kernel
// multiplies it: bit-reflected and shifted up one, bit j ~ x^(32-j).
func kernelConst(r uint64) uint64 {
	return uint64(bits.Reverse32(uint32(r))) << 1
}

// mulMod is a·b mod p for a and b of degree < 32 and p of degree 32, all in
// normal form: a carry-less shift-and-add multiply, reduced bit by bit.
func mulMod(a, b, p uint64) uint64 {
	var r uint64
	for i := 63; i >= 0; i-- {
		r <<= 1
		if r&(1<<32) != 0 {
			r ^= p
		}
		if b>>uint(i)&1 != 0 {
			r ^= a
		}
	}
	return r
}

// xPowMod is x^e mod p for any integer e; a negative e uses x^-1, which is
// (p - 1)/x because p(x) = x·q(x) + 1 over GF(2).
func xPowMod(p uint64, e int) uint64 {
	base := uint64(2) // x
	if e < 0 {
		base, e = p>>1, -e
	}
	r := uint64(1)
	for ; e > 0; e >>= 1 {
		if e&1 != 0 {
			r = mulMod(r, base, p)
		}
		base = mulMod(base, base, p)
	}
	return r
}
