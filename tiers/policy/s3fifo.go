package policy

import "github.com/ctxtier/ctxtier/ctxstore/block"

// S3-FIFO is the policy of Yang et al., "FIFO queues are all you need for
// cache eviction" (SOSP'23), implemented from the paper's description: a
// small FIFO S (10% of the capacity) that new blocks enter, a main FIFO M,
// and a ghost queue that remembers blocks recently evicted from S. Each block
// has a 2-bit access counter (0..3). A block inserted while the ghost
// remembers it enters M directly. To make room: while S holds at least its
// share, S's oldest block moves to M if it was accessed since insertion
// (counter reset) and is the victim otherwise; else M's oldest block is
// reinserted at M's head with its counter decremented while the counter is
// positive, and is the victim once it is zero.
//
// Differences from the paper, forced by the Policy interface or chosen for
// memory: the ghost is the Bloom-generation ghostSet (it remembers between
// capacity/2 and capacity evictions from S, with ~3% false positives), not an
// exact FIFO of ids; Remove cannot tell an eviction from a deletion, so a
// block of S that is deleted is remembered as well. Priority classes are
// kept apart, as in LRU: each class has its own S, M and ghost, and victims
// come from the lowest class that has an evictable block.
type S3FIFO struct {
	class    []uint8
	q        [block.MaxPriority + 1]*s3queue
	capacity int
}

// s3queue is S3-FIFO within one priority class.
type s3queue struct {
	lists    handleLists // list s3Small and list s3Main, head = newest
	queue    []uint8     // s3Small or s3Main
	freq     []uint8
	fp       []uint32
	seen     []uint32 // Victim call that last skipped the block
	capacity int
	call     uint32
	ghost    *ghostSet
}

const (
	s3Small = 0
	s3Main  = 1
	// s3SmallFraction is the paper's size of S.
	s3SmallFraction = 0.1
	s3MaxFreq       = 3
)

// NewS3FIFO returns an empty S3-FIFO policy for a tier of about
// expectedBlocks blocks.
func NewS3FIFO(expectedBlocks int) Policy {
	return &S3FIFO{capacity: max(expectedBlocks, 1)}
}

// Insert implements Policy.
func (p *S3FIFO) Insert(h Handle, m Meta) {
	for int(h) >= len(p.class) {
		p.class = append(p.class, 0)
	}
	c := min(m.Priority, block.MaxPriority)
	p.class[h] = c
	if p.q[c] == nil {
		p.q[c] = newS3Queue(p.capacity)
	}
	p.q[c].Insert(h, m)
}

// Touch implements Policy.
func (p *S3FIFO) Touch(h Handle) { p.q[p.class[h]].Touch(h) }

// Remove implements Policy.
func (p *S3FIFO) Remove(h Handle) { p.q[p.class[h]].Remove(h) }

// Victim implements Policy.
func (p *S3FIFO) Victim(evictable func(Handle) bool) (Handle, bool) {
	for _, q := range p.q {
		if q == nil {
			continue
		}
		if h, ok := q.Victim(evictable); ok {
			return h, true
		}
	}
	return 0, false
}

// Len implements Policy.
func (p *S3FIFO) Len() int {
	n := 0
	for _, q := range p.q {
		if q != nil {
			n += q.Len()
		}
	}
	return n
}

func newS3Queue(capacity int) *s3queue {
	return &s3queue{lists: newHandleLists(0), capacity: capacity, ghost: newGhostSet(capacity)}
}

func (s *s3queue) grow(h Handle) {
	s.lists.grow(h)
	for int(h) >= len(s.queue) {
		s.queue = append(s.queue, 0)
		s.freq = append(s.freq, 0)
		s.fp = append(s.fp, 0)
		s.seen = append(s.seen, 0)
	}
}

// pushHead links h as the newest entry of queue q.
func (s *s3queue) pushHead(h uint32, q uint8) {
	s.queue[h] = q
	s.lists.pushFront(int(q), h)
}

// unlink takes h out of its queue.
func (s *s3queue) unlink(h uint32) { s.lists.unlink(int(s.queue[h]), h) }

func (s *s3queue) Insert(h Handle, m Meta) {
	s.grow(h)
	s.fp[h] = fingerprint(m.Hash)
	s.freq[h] = 0
	s.seen[h] = 0
	q := uint8(s3Small)
	if s.ghost.contains(s.fp[h]) {
		q = s3Main
	}
	s.pushHead(uint32(h), q)
}

func (s *s3queue) Touch(h Handle) {
	if s.freq[h] < s3MaxFreq {
		s.freq[h]++
	}
}

func (s *s3queue) Remove(h Handle) {
	if s.queue[h] == s3Small {
		s.ghost.add(s.fp[h])
	}
	s.unlink(uint32(h))
}

func (s *s3queue) smallFull() bool {
	return float64(s.lists.count[s3Small]) >= s3SmallFraction*float64(max(s.capacity, s.Len()))
}

// Victim proposes the victim of this class. A block that is not evictable is moved to the
// head of its queue and counted once per call; Victim reports none when every
// block has been skipped.
func (s *s3queue) Victim(evictable func(Handle) bool) (Handle, bool) {
	s.call++
	if s.call == 0 { // wrapped: clear stale marks
		clear(s.seen)
		s.call = 1
	}
	var skipped [2]int
	skip := func(h uint32) {
		q := s.queue[h]
		if s.seen[h] != s.call {
			s.seen[h] = s.call
			skipped[q]++
		}
		s.unlink(h)
		s.pushHead(h, q)
	}
	for {
		smallLeft := s.lists.count[s3Small] > skipped[s3Small]
		mainLeft := s.lists.count[s3Main] > skipped[s3Main]
		switch {
		case smallLeft && (s.smallFull() || !mainLeft):
			t := s.lists.tail[s3Small]
			if evictable != nil && !evictable(Handle(t)) {
				skip(t)
				continue
			}
			if s.freq[t] > 0 {
				s.unlink(t)
				s.freq[t] = 0
				if s.seen[t] == s.call { // counted as a skip of S
					skipped[s3Small]--
					s.seen[t] = 0
				}
				s.pushHead(t, s3Main)
				continue
			}
			return Handle(t), true
		case mainLeft:
			t := s.lists.tail[s3Main]
			if evictable != nil && !evictable(Handle(t)) {
				skip(t)
				continue
			}
			if s.freq[t] > 0 {
				s.freq[t]--
				s.unlink(t)
				s.pushHead(t, s3Main)
				continue
			}
			return Handle(t), true
		default:
			return 0, false
		}
	}
}

func (s *s3queue) Len() int { return s.lists.count[s3Small] + s.lists.count[s3Main] }
