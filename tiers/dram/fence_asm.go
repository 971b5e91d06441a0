//go:build amd64 || arm64

package dram

// versionReads: CopyVersioned is implemented (fence has a hardware barrier).
const versionReads = true

// fence is a full hardware memory barrier (MFENCE on amd64, DMB ISH on
// arm64): no load or store before it is reordered with one after it, as
// seen by other cores and processes. Being an assembly call, it is also a
// compiler barrier.
func fence()
