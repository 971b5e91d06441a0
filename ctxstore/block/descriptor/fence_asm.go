//go:build amd64 || arm64

package descriptor

// versionReads: CopyVersioned is implemented (Fence has a hardware barrier).
const versionReads = true

// Fence is a full hardware memory barrier (MFENCE on amd64, DMB ISH on
// arm64): no load or store before it is reordered with one after it, as
// seen by other cores and processes. Being an assembly call, it is also a
// compiler barrier. The DRAM tier issues it after bumping a version word,
// CopyVersioned between its copy and its load of the word.
func Fence()
