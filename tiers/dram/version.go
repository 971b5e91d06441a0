package dram

import (
	"sync/atomic"

	"github.com/ctxtier/ctxtier/ctxstore/block/descriptor"
)

// Version words: a hash-free check of a co-located reader's copy.
//
// The memory file is the arena followed by the version table: one uint64
// word per arena page (8 bytes per 4 KiB, 1/512 of the arena: 2 MiB per GiB),
// rounded up to a page (to 2 MiB when the arena is a multiple of 2 MiB, so a
// hugetlbfs file keeps a valid size). Every word starts at one random value
// per memory file (written when the tier starts, which touches the table
// once), so a reader still mapping an older memory file at the same path
// sees versions that match the new server's descriptors only by a 2^-64
// accident.
//
// The rule (server): whenever a run of pages goes back to the allocator —
// a block evicted, deleted, expired or dropped after its last lease, or a
// reservation abandoned — the word of the run's first page is atomically
// incremented, then descriptor.Fence() runs, and only then are the pages freed. A block
// stored afterwards at pages that include any of them is written after that
// (in the same goroutine, or in one that took t.mu after the free released
// it). A block's descriptor carries the word of its first page as it was
// when the block was indexed; the word cannot change while the block holds
// that page, since only freeing the block frees it.
//
// The reader (descriptor.CopyVersioned): copy the payload with plain loads, Fence(),
// then atomically load the word of the block's first page and compare it
// with the descriptor's version. If any byte copied was written by a later
// block, that write followed the increment, so the load sees the increment
// (or a later one) and the read is refused. Equal means every byte came from
// the described block. Why each step is needed:
//
//   - amd64 (TSO): stores become visible in program order (the increment is
//     a LOCK XADD, a full barrier anyway), and loads are not reordered with
//     older loads. A plain load-load order would suffice, but memmove may
//     use fast-string instructions (REP MOVS), whose accesses the
//     architecture orders less strictly, so the reader issues MFENCE (tens
//     of cycles per block) rather than rely on memmove's instruction choice.
//   - arm64: Go's atomic load is LDAR, a load-acquire, which orders later
//     accesses after it but not earlier plain loads: without a barrier the
//     copy's last loads could be satisfied after the version load, and see
//     newer bytes than the version admits. The reader therefore issues
//     DMB ISH before the load. On the server, Go's atomic add is LDADDAL (or
//     an LDAXR/STLXR loop on CPUs without LSE), whose store-release part does
//     not keep later stores (the next block's bytes) from becoming visible
//     first, so the server issues DMB ISH after the increment as well (the
//     seqlock writer's smp_wmb).
//   - Other architectures: no fence is implemented; descriptor.CopyVersioned
//     always refuses, and readers verify checksums instead (see
//     descriptor.VersionReads).
//
// A version is 64 bits and only grows, so it does not wrap within a read.

// versionWordSize is the size of one version word.
const versionWordSize = 8

// tableSize is the size of the version table that follows an arena of
// arena bytes.
func tableSize(arena int64) int64 {
	n := arena / PageSize * versionWordSize
	align := int64(PageSize)
	if arena%(2<<20) == 0 {
		align = 2 << 20
	}
	return (n + align - 1) / align * align
}

// freePagesLocked returns a run of pages to the allocator after bumping the
// version word of its first page (see the rule above).
func (t *Tier) freePagesLocked(page, pages uint32) {
	if t.closed {
		return // the arena and its version table are unmapped: nothing to free
	}
	atomic.AddUint64(&t.vers[page], 1)
	descriptor.Fence()
	t.alloc.free(page, pages)
}

// versionOffset is the byte offset of page's version word in the memory file.
func (t *Tier) versionOffset(page uint32) int64 {
	return t.tableOff + int64(page)*versionWordSize
}
