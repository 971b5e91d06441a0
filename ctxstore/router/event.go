package router

import (
	"fmt"
	"strings"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// Medium is where a worker holds a block. Depths in query results are
// cumulative: a block on a faster medium also counts for the slower ones.
type Medium uint8

// The media, fastest first.
const (
	Device Medium = iota // accelerator memory (vLLM "GPU")
	Host                 // host DRAM (vLLM "CPU", offloading connectors)
	Disk                 // local or attached storage (vLLM "STORAGE", "DISK", ...)
	NumMedia
)

var mediumNames = [NumMedia]string{"device", "host", "disk"}

func (m Medium) String() string {
	if m < NumMedia {
		return mediumNames[m]
	}
	return fmt.Sprintf("Medium(%d)", uint8(m))
}

// ParseMedium maps an engine's medium string to a Medium. The names are those
// vLLM and Dynamo put on the wire; matching ignores case. An empty string (the
// field absent or null) is Device, as in both engines. Remote or shared media
// ("EXTERNAL", "REMOTE", ...) count as Disk: reachable by the worker, but at
// storage speed. Anything else is an error.
func ParseMedium(s string) (Medium, error) {
	switch strings.ToUpper(s) {
	case "", "GPU", "DEVICE", "CUDA", "HBM":
		return Device, nil
	case "CPU", "HOST", "CPU_PINNED", "CPU_TIER1", "DRAM":
		return Host, nil
	case "CPU_TIER2", "DISK", "NVME", "SSD", "STORAGE", "LOCALDISK", "LOCAL_DISK",
		"EXTERNAL", "NETWORK", "REMOTE", "SHARED":
		return Disk, nil
	}
	return 0, fmt.Errorf("%w: unknown KV medium %q", block.ErrInvalidArgument, s)
}

// EventKind is the kind of a KV event.
type EventKind uint8

// The event kinds of vLLM's KVEventBatch.
const (
	Stored  EventKind = iota + 1 // BlockStored
	Removed                      // BlockRemoved
	Cleared                      // AllBlocksCleared
)

func (k EventKind) String() string {
	switch k {
	case Stored:
		return "BlockStored"
	case Removed:
		return "BlockRemoved"
	case Cleared:
		return "AllBlocksCleared"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is one decoded KV event, independent of its wire form.
type Event struct {
	Kind EventKind
	// Hashes are the blocks' chained hashes, in prefix order (Stored, Removed).
	Hashes []uint64
	// Parent is the hash of the block before Hashes[0]; HasParent is false when
	// Hashes[0] is the first block of a sequence (Stored only).
	Parent    uint64
	HasParent bool
	Medium    Medium
	// BlockSize is the engine's block size in tokens (Stored; 0 if unknown).
	BlockSize int
}
