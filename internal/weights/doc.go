// Package weights moves model checkpoints (directories of weight files)
// between a local directory and an object namespace of the tier over its
// S3 endpoint: one object per file under MODEL/, plus a manifest object
// listing every file's size, SHA-256 and per-chunk SHA-256s and XXH3-128s.
// Pushes stream files with parallel multipart uploads; pulls fetch chunks
// with parallel ranged GETs, verify each chunk against the manifest
// (XXH3-128 by default, verify.go), and resume: a file already complete is
// skipped, a partial one keeps its verified chunks.
package weights
