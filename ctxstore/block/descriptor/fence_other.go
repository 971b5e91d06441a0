//go:build !amd64 && !arm64

package descriptor

// versionReads: CopyVersioned always reports false here; readers verify
// checksums instead (see CopyVersioned).
const versionReads = false

// Fence is a no-op here: nothing reads version words on this architecture.
func Fence() {}
