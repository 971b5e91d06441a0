// Package block is ctxtier's shared vocabulary: block keys, namespaces,
// checksums, the engines' hash schemes, block references and the sentinel
// errors every layer wraps. It is a leaf: it imports nothing from ctxtier, so
// raft/ and tiers/ may depend on it without knowing anything of the store or
// the wire.
//
// Checksum, UpdateChecksum and CopyChecksum compute CRC-32C. On amd64 CPUs
// with 512-bit carry-less multiply (VPCLMULQDQ, AVX-512) inputs of 256 bytes
// or more go through an assembly kernel that folds 256 bytes a step into
// four 512-bit accumulators (checksum_amd64.s); its constants are derived
// from the polynomial at start-up (checksum_fold.go). CopyChecksum's kernel
// stores each 256 bytes it loads and folds them in the same pass (with
// non-temporal stores from 1 MiB on, as the runtime's memmove), so a
// verified copy from memory costs close to a plain copy (from cache the
// multiplies bound it: 0.3-1.0 of a copy, docs/benchmarks.md). Everywhere
// else hash/crc32 computes the same values.
package block
