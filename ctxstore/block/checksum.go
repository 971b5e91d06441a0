package block

import (
	"hash/crc32"
	"unsafe"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// useFold selects the folding kernel when the CPU has it; tests turn it off
// to check the hash/crc32 path and on to check the kernel.
var useFold = foldSupported

// foldMin is the shortest input handed to the folding kernel: one step of
// it. Measured with BenchmarkChecksum (docs/benchmarks.md), the kernel
// (plus hash/crc32 for the tail) already beats hash/crc32 alone at 256 to
// 512 bytes on the AMD EPYC this was tuned on, so no longer threshold pays.
const foldMin = foldBytes

// copyNTMin is the shortest copy CopyChecksum's kernel stores past the
// cache (non-temporal stores, as the runtime's memmove does from the same
// size on): a copy this large would evict more than it leaves in cache for
// the reader, and the stores then skip reading dst's lines first.
const copyNTMin = 1 << 20

// copyChunk bounds how many bytes CopyChecksum copies before it checksums
// them when there is no fused kernel, so the checksum reads them from cache.
const copyChunk = 32 << 10

// Checksum is the block checksum used at rest and on the wire: CRC-32C
// (Castagnoli), which detects all burst errors up to 32 bits and is what
// NVMe and iSCSI use for the same job. On CPUs with 512-bit carry-less
// multiply (VPCLMULQDQ) long inputs go through a folding kernel
// (checksum_amd64.s); elsewhere hash/crc32 computes it.
func Checksum(b []byte) uint32 { return UpdateChecksum(0, b) }

// UpdateChecksum continues a running checksum over more bytes, with
// hash/crc32's Update semantics: UpdateChecksum(UpdateChecksum(0, a), b) is
// Checksum of a followed by b.
func UpdateChecksum(sum uint32, b []byte) uint32 {
	if useFold && len(b) >= foldMin {
		n := len(b) &^ (foldBytes - 1)
		sum = ^foldUpdate(^sum, &b[0], n, foldConsts)
		b = b[n:]
	}
	return crc32.Update(sum, castagnoli, b)
}

// CopyChecksum copies src into dst and returns the checksum of src
// continued from sum (as UpdateChecksum(sum, src) would). dst must be at
// least len(src) bytes and must not overlap src; bytes of dst past
// len(src) are left alone. The checksum is of the bytes written to dst:
// when src changes while it is copied (a mapping another process writes),
// a mismatch against the expected sum reports what the caller got. With
// the folding kernel each byte is loaded once, stored and folded in the
// same pass, and copies of 1 MiB or more are stored past the cache as the
// runtime's memmove stores them; otherwise the copy and the checksum
// alternate in chunks small enough to stay in cache.
func CopyChecksum(dst, src []byte, sum uint32) uint32 {
	dst = dst[:len(src)]
	if useFold && len(src) >= foldMin {
		nt := len(src) >= copyNTMin
		if nt {
			// Non-temporal stores need dst 64-byte aligned: copy the
			// head up to the boundary first.
			head := int(-uintptr(unsafe.Pointer(&dst[0])) & 63)
			copy(dst[:head], src[:head])
			sum = crc32.Update(sum, castagnoli, dst[:head])
			dst, src = dst[head:], src[head:]
		}
		n := len(src) &^ (foldBytes - 1)
		sum = ^foldCopy(^sum, &dst[0], &src[0], n, foldConsts, nt)
		copy(dst[n:], src[n:])
		return crc32.Update(sum, castagnoli, dst[n:len(src)])
	}
	for off := 0; off < len(src); off += copyChunk {
		end := min(off+copyChunk, len(src))
		copy(dst[off:end], src[off:end])
		sum = UpdateChecksum(sum, dst[off:end])
	}
	return sum
}
