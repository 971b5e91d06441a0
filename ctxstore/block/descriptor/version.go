package descriptor

import (
	"sync/atomic"
	"unsafe"
)

// versionWordSize is the size of one DRAM version word.
const versionWordSize = 8

// VersionReads reports whether CopyVersioned is available on this
// architecture (amd64 and arm64). Elsewhere it always reports a mismatch,
// and readers should check the block's checksum instead.
const VersionReads = versionReads

// CopyVersioned copies the n bytes at off of mem, a mapping of a DRAM
// tier's memory file from its start, into dst, then checks that the version
// word at verOff still holds want (a DRAM descriptor's Generation and
// VersionOffset). It reports false when the word differs — the block's pages
// were freed, perhaps reused, during or before the copy, so dst may hold
// other bytes — when an argument is out of range or misaligned, and always
// where VersionReads is false. True means dst holds the block's bytes as
// they were stored. It reads mem only; the caller keeps mem mapped. The
// protocol (the server's side and why each fence is needed) is described in
// tiers/dram/version.go and docs/tiers.md, "Version words".
func CopyVersioned(dst, mem []byte, off, n, verOff int64, want uint64) bool {
	switch {
	case !versionReads,
		off < 0 || n < 0 || off > int64(len(mem))-n || int64(len(dst)) < n,
		verOff < 0 || verOff > int64(len(mem))-versionWordSize || verOff%versionWordSize != 0:
		return false
	}
	w := (*uint64)(unsafe.Pointer(&mem[verOff]))
	if uintptr(unsafe.Pointer(w))%versionWordSize != 0 {
		return false
	}
	copy(dst[:n], mem[off:off+n])
	Fence()
	return atomic.LoadUint64(w) == want
}
