// Package chunked provides an array indexed by dense handles that grows in
// fixed-size chunks, so growing never copies what it holds.
//
// The DRAM tier and its replacement policies keep a record per block
// handle and run under the tier's lock. As slices grown by append, each
// reallocation copied every record under that lock: filling a 6 GiB tier
// with 4 KiB blocks stalled a put (and every read queued behind it) for
// 0.5-0.65 s at 1.5 million blocks. An Array copies only its chunk list.
// Records never move, so a pointer from At stays valid.
package chunked

// ChunkLen is how many records one chunk holds.
const ChunkLen = 1 << 12

// Array is a growable array of T by handle. The zero value is empty and
// ready to use. It is not safe for concurrent use.
type Array[T any] struct {
	chunks [][]T
	n      int
}

// At returns the record of handle h, which must be below Len.
func (a *Array[T]) At(h uint32) *T { return &a.chunks[h/ChunkLen][h%ChunkLen] }

// Len is one more than the highest handle grown to.
func (a *Array[T]) Len() int { return a.n }

// Add grows the array by one zero record and returns its handle.
func (a *Array[T]) Add() uint32 {
	if a.n%ChunkLen == 0 {
		a.chunks = append(a.chunks, make([]T, ChunkLen))
	}
	a.n++
	return uint32(a.n - 1)
}

// Grow makes h a valid handle; new records are zero.
func (a *Array[T]) Grow(h uint32) {
	for int(h) >= a.n {
		a.Add()
	}
}
