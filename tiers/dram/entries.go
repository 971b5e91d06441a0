package dram

// entryChunk is how many entries one chunk of an entryTable holds: 4,096
// entries of 128 bytes, 512 KiB.
const entryChunk = 1 << 12

// entryTable holds the tier's entries by handle in fixed-size chunks. A
// slice that grew by reallocation copied every entry under the tier's
// lock when it did: filling a 6 GiB tier with 4 KiB blocks stalled one put
// (and every read waiting for the lock) for 646 ms at 1.5 million blocks,
// and the stall grows with the tier. Growing by a chunk copies nothing but
// the chunk list. Entries never move, so a pointer from at stays valid
// while the lock is held.
type entryTable struct {
	chunks [][]entry
	n      int
}

// at returns the entry of handle h (h < len()).
func (t *entryTable) at(h uint32) *entry {
	return &t.chunks[h/entryChunk][h%entryChunk]
}

// len is the number of handles ever given out.
func (t *entryTable) len() int { return t.n }

// add gives out the next handle, its entry zero.
func (t *entryTable) add() uint32 {
	if t.n%entryChunk == 0 {
		t.chunks = append(t.chunks, make([]entry, entryChunk))
	}
	h := uint32(t.n)
	t.n++
	return h
}
