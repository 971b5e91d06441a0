//go:build amd64 && !purego

package block

import "golang.org/x/sys/cpu"

// foldSupported reports whether this CPU (and OS) can run the folding
// kernel: 512-bit carry-less multiply plus SSE4.2's crc32 for the finish.
var foldSupported = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VPCLMULQDQ &&
	cpu.X86.HasPCLMULQDQ && cpu.X86.HasAVX2 && cpu.X86.HasSSE42

// foldUpdate continues the raw CRC-32C crc over p[:n]; n must be a non-zero
// multiple of foldBytes and foldSupported true.
//
//go:noescape
func foldUpdate(crc uint32, p *byte, n int, k *foldTable) uint32

// foldCopy is foldUpdate over src[:n] that also copies those bytes to dst,
// with non-temporal stores if nt (then dst must be 64-byte aligned).
//
//go:noescape
func foldCopy(crc uint32, dst, src *byte, n int, k *foldTable, nt bool) uint32
