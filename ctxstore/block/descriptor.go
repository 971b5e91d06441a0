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
type Descriptor struct {
	Tier       Tier
	Path       string
	Offset     int64 // start of the range to read
	ReadLength int64 // bytes to read from Offset
	DataOffset int64 // payload start in the file
	Length     int64 // payload bytes
	Sum        uint32
	Generation uint64    // NVMe extent generation; 0 for DRAM
	Expires    time.Time // the tier's own lease end; zero when the tier sets none
}
