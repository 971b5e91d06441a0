//go:build !amd64 && !arm64

package dram

// versionReads: CopyVersioned always reports false here; readers verify
// checksums instead (see CopyVersioned).
const versionReads = false

// fence is a no-op here: nothing reads version words on this architecture.
func fence() {}
