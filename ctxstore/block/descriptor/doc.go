// Package descriptor is the reader's side of a block descriptor
// (block.Descriptor): the formats a co-located process needs to read a
// leased block out of the server's files itself, and nothing of the server.
//
// For an NVMe extent it holds the on-disk extent format (the header page
// that starts every extent, written by tiers/nvme) and ReadExtent, which
// reads one extent with an aligned pread and verifies it. For a DRAM block
// it holds CopyVersioned, the seqlock check of a copy against the block's
// version word, and Fence, the barrier both sides of that check need.
//
// It imports only the standard library, golang.org/x/sys/unix, xxh3 and
// ctxstore/block, so gateway/client (and any program that only wants the
// client) can read descriptors without pulling in the tiers.
package descriptor
