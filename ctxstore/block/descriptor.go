package block

import "time"

// Descriptor locates a leased block's bytes in a file that a co-located
// process can read itself (mmap of a memory file, or an O_DIRECT pread of a
// segment file), instead of receiving them over a socket. The reader must
// check the bytes it read against Sum before using them: a descriptor is a
// promise only while its lease lasts, and the server does not re-verify the
// bytes when it hands one out.
//
// DRAM (Tier TierDRAM): Path is the arena's memory file; the payload is
// [DataOffset, DataOffset+Length) and Offset == DataOffset, ReadLength ==
// Length. NVMe (TierNVMe): Path is a segment file; [Offset,
// Offset+ReadLength) is the 4 KiB-aligned extent (header page, payload,
// padding) that one aligned read fetches, the payload starts at DataOffset,
// and Generation identifies the extent (its header carries it too).
//
// A DRAM descriptor may also carry a version word (VersionOffset != 0): a
// 64-bit word of the same memory file that the server increments before the
// block's pages can be reused, and whose value when the block was stored is
// Generation. A reader that copies the payload and then loads the word
// (atomically, after a load fence) and finds Generation has read bytes that
// were not overwritten during the copy, without hashing them: a seqlock
// check, as RDMA key-value stores validate one-sided reads. See
// docs/tiers.md, "Version words".
type Descriptor struct {
	Tier       Tier
	Path       string
	Offset     int64 // start of the range to read
	ReadLength int64 // bytes to read from Offset
	DataOffset int64 // payload start in the file
	Length     int64 // payload bytes
	Sum        uint32
	// Generation is the NVMe extent generation; for DRAM, the version
	// word's value while the block is resident (0 without a version word).
	Generation uint64
	// VersionOffset is the byte offset in Path of the DRAM block's version
	// word (8-byte aligned, outside the payload); 0 means none.
	VersionOffset int64
	Expires       time.Time // the tier's own lease end; zero when the tier sets none
}
