//go:build !amd64 || purego

package block

import (
	"hash/crc32"
	"unsafe"
)

// foldSupported is false off amd64: there is no folding kernel, and
// Checksum uses hash/crc32 (which has its own kernels on arm64 and others).
const foldSupported = false

// foldUpdate is never called when foldSupported is false; it exists so the
// dispatch compiles everywhere, and computes the same value the slow way.
func foldUpdate(crc uint32, p *byte, n int, _ *foldTable) uint32 {
	return ^crc32.Update(^crc, castagnoli, unsafe.Slice(p, n))
}

// foldCopy: see foldUpdate.
func foldCopy(crc uint32, dst, src *byte, n int, k *foldTable, _ bool) uint32 {
	copy(unsafe.Slice(dst, n), unsafe.Slice(src, n))
	return foldUpdate(crc, dst, n, k)
}
