package policy

import "math/bits"

// Admitter decides whether a block is worth writing to a tier it is not in
// yet (NVMe admission of blocks leaving DRAM, or of blocks written through).
// Record is called on every access to a block, resident or not; Admit is
// asked when the block is a candidate for the tier.
type Admitter interface {
	Record(hash uint64)
	Admit(hash uint64) bool
}

// Sketch is a TinyLFU frequency sketch: a count-min sketch of 4-bit
// counters with conservative update and periodic halving ("aging"), so it
// estimates how often a block hash was accessed within roughly the last
// Sample accesses, including blocks that are no longer resident (it is the
// policy's ghost memory). It costs 4 counters x 4 bits per width slot; with
// the default width of 4 slots per expected block that is 8 bytes per block.
//
// A Sketch is not locked internally; its owner serialises calls.
type Sketch struct {
	rows   [4][]uint64 // 16 counters of 4 bits per word
	mask   uint64      // width-1, width a power of two (in counters)
	adds   int
	sample int
}

// NewSketch returns a sketch sized for about expectedBlocks distinct
// resident blocks. Its memory covers an access history of about
// 8 x expectedBlocks accesses before counts are halved.
func NewSketch(expectedBlocks int) *Sketch {
	width := 1 << bits.Len(uint(max(expectedBlocks, 64)*4-1)) // counters per row
	s := &Sketch{mask: uint64(width - 1), sample: 8 * max(expectedBlocks, 64)}
	for i := range s.rows {
		s.rows[i] = make([]uint64, width/16)
	}
	return s
}

var sketchSeeds = [4]uint64{0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93}

func (s *Sketch) slot(row int, hash uint64) (word uint64, shift uint) {
	h := (hash ^ sketchSeeds[row]) * 0xFF51AFD7ED558CCD
	h ^= h >> 33
	i := h & s.mask
	return i >> 4, uint(i&15) * 4
}

// Estimate is the (over-)estimated access count of hash, 0..15.
func (s *Sketch) Estimate(hash uint64) int {
	m := 15
	for r := range s.rows {
		w, sh := s.slot(r, hash)
		m = min(m, int(s.rows[r][w]>>sh&15))
	}
	return m
}

// Record counts one access to hash. Only the counters equal to the minimum
// are incremented (conservative update), which keeps over-estimates of rare
// blocks low.
func (s *Sketch) Record(hash uint64) {
	m := s.Estimate(hash)
	if m < 15 {
		for r := range s.rows {
			w, sh := s.slot(r, hash)
			if int(s.rows[r][w]>>sh&15) == m {
				s.rows[r][w] += 1 << sh
			}
		}
	}
	s.adds++
	if s.adds >= s.sample {
		s.halve()
	}
}

func (s *Sketch) halve() {
	s.adds /= 2
	for r := range s.rows {
		for i, w := range s.rows[r] {
			s.rows[r][i] = (w >> 1) & 0x7777777777777777
		}
	}
}

// SketchAdmitter admits a block to a lower tier once it has been accessed
// at least MinCount times within the sketch's history: a block seen once is
// most likely never reused (76% of blocks in the Mooncake conversation
// trace), so writing it to NVMe would only wear the device and push out
// blocks that do come back.
type SketchAdmitter struct {
	*Sketch
	MinCount int
}

// NewSketchAdmitter returns an admitter over a fresh sketch sized for
// expectedBlocks, admitting blocks seen at least minCount times (2 admits
// every block that has been reused at least once).
func NewSketchAdmitter(expectedBlocks, minCount int) *SketchAdmitter {
	return &SketchAdmitter{Sketch: NewSketch(expectedBlocks), MinCount: minCount}
}

// Admit implements Admitter.
func (a *SketchAdmitter) Admit(hash uint64) bool { return a.Estimate(hash) >= a.MinCount }
