package block

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// clmul64 is the software carry-less product of a and b (hi, lo): the
// reference for what VPCLMULQDQ computes on one quadword pair.
func clmul64(a, b uint64) (hi, lo uint64) {
	for i := range 64 {
		if b>>uint(i)&1 != 0 {
			lo ^= a << uint(i)
			if i > 0 {
				hi ^= a >> uint(64-i)
			}
		}
	}
	return hi, lo
}

// refFold is the folding algorithm of checksum_amd64.s in plain Go with a
// software carry-less multiply, lane by lane: raw crc in, raw crc out,
// len(p) a non-zero multiple of foldBytes. It is how the algebra in
// checksum_fold.go is checked independently of the assembly.
func refFold(crc uint32, p []byte, k *foldTable) uint32 {
	var acc [foldLanes][2]uint64
	lane := func(j int, q []byte) [2]uint64 {
		return [2]uint64{binary.LittleEndian.Uint64(q[16*j:]), binary.LittleEndian.Uint64(q[16*j+8:])}
	}
	fold := func(v, c [2]uint64) [2]uint64 {
		h1, l1 := clmul64(v[0], c[0])
		h2, l2 := clmul64(v[1], c[1])
		return [2]uint64{l1 ^ l2, h1 ^ h2}
	}
	for j := range foldLanes {
		acc[j] = lane(j, p)
	}
	acc[0][0] ^= uint64(crc)
	for off := foldBytes; off < len(p); off += foldBytes {
		for j := range foldLanes {
			f, d := fold(acc[j], k.loop), lane(j, p[off:])
			acc[j] = [2]uint64{f[0] ^ d[0], f[1] ^ d[1]}
		}
	}
	var sum [2]uint64
	for j := range foldLanes {
		f := fold(acc[j], k.final[j])
		sum[0] ^= f[0]
		sum[1] ^= f[1]
	}
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:], sum[0])
	binary.LittleEndian.PutUint64(b[8:], sum[1])
	return ^crc32.Update(^uint32(0), castagnoli, b[:])
}

// slowXPow is x^e mod p for e >= 0 by e single shifts: an independent check
// of xPowMod's square-and-multiply.
func slowXPow(p uint64, e int) uint64 {
	r := uint64(1)
	for range e {
		r <<= 1
		if r&(1<<32) != 0 {
			r ^= p
		}
	}
	return r
}

func TestFoldConstants(t *testing.T) {
	p := polyFromReflected(crc32.Castagnoli)
	if p != 0x1_1EDC_6F41 {
		t.Fatalf("Castagnoli polynomial in normal form = %#x, want x^32 + 0x1EDC6F41", p)
	}
	for _, e := range []int{0, 1, 31, 32, 33, 64, 96, 1000, 2048 - 32, 2048 + 32, 4096} {
		if got, want := xPowMod(p, e), slowXPow(p, e); got != want {
			t.Errorf("xPowMod(%d) = %#x, want %#x", e, got, want)
		}
	}
	for _, e := range []int{1, 32, 64, 100} {
		if got := mulMod(xPowMod(p, -e), xPowMod(p, e), p); got != 1 {
			t.Errorf("x^-%d · x^%d = %#x, want 1", e, e, got)
		}
	}
	// The table the kernel reads is the one derived here.
	k := makeFoldTable(crc32.Castagnoli)
	if *k != *foldConsts {
		t.Fatal("foldConsts differs from makeFoldTable(Castagnoli)")
	}
	if k.loop != foldPair(p, foldBytes*8) || k.final[foldLanes-1] != foldPair(p, 0) {
		t.Fatalf("table pairs: loop %x final[15] %x", k.loop, k.final[foldLanes-1])
	}
	for j, c := range append([][2]uint64{k.loop}, k.final[:]...) {
		for _, v := range c {
			if v&1 != 0 || v>>33 != 0 {
				t.Errorf("constant %d = %#x: not a 32-bit reflected value shifted up one", j, v)
			}
		}
	}
}

func TestClmul64(t *testing.T) {
	tests := []struct{ a, b, hi, lo uint64 }{
		{0, 0, 0, 0},
		{1, 1, 0, 1},
		{3, 3, 0, 5},       // (x+1)^2 = x^2+1
		{1 << 63, 2, 1, 0}, // x^63·x = x^64
		{^uint64(0), ^uint64(0), 0x5555555555555555, 0x5555555555555555},
	}
	for _, tt := range tests {
		if hi, lo := clmul64(tt.a, tt.b); hi != tt.hi || lo != tt.lo {
			t.Errorf("clmul64(%#x, %#x) = %#x:%#x, want %#x:%#x", tt.a, tt.b, hi, lo, tt.hi, tt.lo)
		}
	}
}

func TestRefFold(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{256, 512, 768, 1024, 4096, 65536} {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		for _, init := range []uint32{0, 0xFFFFFFFF, rng.Uint32()} {
			want := crc32.Update(init, castagnoli, p)
			if got := ^refFold(^init, p, foldConsts); got != want {
				t.Errorf("refFold(n=%d, init=%#x) = %#x, want %#x", n, init, got, want)
			}
		}
	}
}

// withFold runs f with the folding kernel on and off (on only where the CPU
// has it), naming each run.
func withFold(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	modes := []bool{false}
	if foldSupported {
		modes = append(modes, true)
	} else {
		t.Log("folding kernel not supported on this CPU: testing hash/crc32 only")
	}
	saved := useFold
	defer func() { useFold = saved }()
	for _, on := range modes {
		useFold = on
		t.Run(fmt.Sprintf("fold=%v", on), f)
	}
}

// testLengths is every length up to 4096 and some long ones.
func testLengths() []int {
	var ns []int
	for n := 0; n <= 4096; n++ {
		ns = append(ns, n)
	}
	return append(ns, 64<<10, 64<<10+1, 2<<20, 2<<20+13)
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], rng.Uint64())
		copy(b[i:], w[:])
	}
	return b
}

func TestUpdateChecksumLengths(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	buf := randBytes(rng, 2<<20+13+64)
	withFold(t, func(t *testing.T) {
		for _, n := range testLengths() {
			align := n % 64
			p := buf[align : align+n]
			init := rng.Uint32()
			if got, want := UpdateChecksum(init, p), crc32.Update(init, castagnoli, p); got != want {
				t.Fatalf("UpdateChecksum(%#x, len %d, align %d) = %#x, want %#x", init, n, align, got, want)
			}
			if got, want := Checksum(p), crc32.Checksum(p, castagnoli); got != want {
				t.Fatalf("Checksum(len %d, align %d) = %#x, want %#x", n, align, got, want)
			}
		}
	})
}

func TestUpdateChecksumAlignments(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	buf := randBytes(rng, 64<<10+256)
	withFold(t, func(t *testing.T) {
		for align := range 64 {
			for _, n := range []int{255, 256, 511, 512, 513, 1000, 4096, 4099, 64 << 10} {
				p := buf[align : align+n]
				init := rng.Uint32()
				if got, want := UpdateChecksum(init, p), crc32.Update(init, castagnoli, p); got != want {
					t.Fatalf("UpdateChecksum(len %d, align %d) = %#x, want %#x", n, align, got, want)
				}
			}
		}
	})
}

// checkCopy runs CopyChecksum from src into a dst with guard bytes past
// len(src) and at dstAlign, and checks the copy, the guard and the sum.
func checkCopy(t *testing.T, src []byte, dstAlign int, init uint32) {
	t.Helper()
	const guard = 71
	raw := make([]byte, dstAlign+len(src)+guard)
	for i := range raw {
		raw[i] = 0xA5
	}
	dst := raw[dstAlign:]
	got := CopyChecksum(dst, src, init)
	if want := crc32.Update(init, castagnoli, src); got != want {
		t.Fatalf("CopyChecksum(len %d, src align %d, dst align %d) = %#x, want %#x", len(src), srcAlign(src), dstAlign, got, want)
	}
	if !bytes.Equal(dst[:len(src)], src) {
		t.Fatalf("CopyChecksum(len %d): dst differs from src", len(src))
	}
	for i, b := range raw[dstAlign+len(src):] {
		if b != 0xA5 {
			t.Fatalf("CopyChecksum(len %d): byte %d past len(src) written (%#x)", len(src), i, b)
		}
	}
	for i, b := range raw[:dstAlign] {
		if b != 0xA5 {
			t.Fatalf("CopyChecksum(len %d): byte %d before dst written", len(src), i)
		}
	}
}

func srcAlign(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	return int(unsafePointer(b) % 64)
}

func TestCopyChecksumLengths(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	buf := randBytes(rng, 2<<20+13+64)
	withFold(t, func(t *testing.T) {
		for _, n := range testLengths() {
			align := (n * 7) % 64
			checkCopy(t, buf[align:align+n], n%64, rng.Uint32())
		}
	})
}

func TestCopyChecksumAlignments(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	buf := randBytes(rng, 64<<10+256)
	withFold(t, func(t *testing.T) {
		for align := range 64 {
			for _, n := range []int{0, 1, 255, 256, 511, 512, 513, 1000, 4096, 4099, 64 << 10} {
				checkCopy(t, buf[align:align+n], (align*5)%64, rng.Uint32())
			}
		}
	})
}

// TestCopyChecksumLarge covers the non-temporal kernel (copies of
// copyNTMin bytes or more) at every destination alignment.
func TestCopyChecksumLarge(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	buf := randBytes(rng, 2<<20+13+64)
	withFold(t, func(t *testing.T) {
		for align := range 64 {
			for _, n := range []int{copyNTMin, copyNTMin + 300, 2<<20 + 13} {
				checkCopy(t, buf[(align*3)%64:][:n], align, rng.Uint32())
			}
		}
	})
}

func TestCopyChecksumShortDst(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("CopyChecksum into a shorter dst did not panic")
		}
	}()
	CopyChecksum(make([]byte, 10), make([]byte, 11), 0)
}

// FuzzChecksum checks UpdateChecksum and CopyChecksum against hash/crc32,
// with and without the folding kernel, over data split in two at split.
func FuzzChecksum(f *testing.F) {
	f.Add([]byte("123456789"), uint32(0), uint16(4))
	f.Add(make([]byte, 1024), uint32(0xFFFFFFFF), uint16(300))
	f.Add(bytes.Repeat([]byte{0xA5, 0x5A}, 2000), uint32(12345), uint16(1777))
	f.Fuzz(func(t *testing.T, data []byte, init uint32, split uint16) {
		at := int(split) % (len(data) + 1)
		want := crc32.Update(init, castagnoli, data)
		saved := useFold
		defer func() { useFold = saved }()
		for _, on := range []bool{false, foldSupported} {
			useFold = on
			if got := UpdateChecksum(UpdateChecksum(init, data[:at]), data[at:]); got != want {
				t.Fatalf("fold=%v split %d of %d: UpdateChecksum = %#x, want %#x", on, at, len(data), got, want)
			}
			dst := make([]byte, len(data))
			got := CopyChecksum(dst[at:], data[at:], CopyChecksum(dst, data[:at], init))
			if got != want || !bytes.Equal(dst, data) {
				t.Fatalf("fold=%v split %d of %d: CopyChecksum = %#x, want %#x (copy equal: %v)", on, at, len(data), got, want, bytes.Equal(dst, data))
			}
		}
	})
}

func unsafePointer(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }
