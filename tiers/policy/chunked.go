package policy

// chunkLen is how many per-block records one chunk of a chunked array
// holds.
const chunkLen = 1 << 12

// chunked is a per-handle array kept in fixed chunks, for the larger
// per-block records (Hinted's, Duel's): it grows without copying what it
// holds. A slice grown by append copied every record when it outgrew its
// capacity, and the tier calls a policy under its lock, so filling a tier
// of a million small blocks stalled a put (and the reads queued behind
// it) for tens to hundreds of milliseconds at each growth. Records never
// move: a pointer from at stays valid.
type chunked[T any] struct {
	chunks [][]T
	n      int
}

// at returns handle h's record (h < len()).
func (c *chunked[T]) at(h Handle) *T { return &c.chunks[h/chunkLen][h%chunkLen] }

// len is one more than the highest handle grown to.
func (c *chunked[T]) len() int { return c.n }

// grow makes h a valid handle; new records are zero.
func (c *chunked[T]) grow(h Handle) {
	for int(h) >= c.n {
		if c.n%chunkLen == 0 {
			c.chunks = append(c.chunks, make([]T, chunkLen))
		}
		c.n++
	}
}
