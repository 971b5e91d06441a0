package kvevent

// verdict classifies a batch's sequence number against what came before.
type verdict uint8

const (
	seqFirst     verdict = iota // the first batch seen from this worker
	seqInOrder                  // the expected next batch
	seqGap                      // batches between the last and this one are missing
	seqRestart                  // the sequence went back: the publisher restarted
	seqDuplicate                // the last batch again (a retried HTTP post)
)

func (v verdict) String() string {
	return [...]string{"first", "in_order", "gap", "restart", "duplicate"}[v]
}

// seqState is one worker's sequence position.
type seqState struct {
	started bool
	next    uint64
	stream  string
}

// observe classifies seq (with the publisher's stream id, "" if none) and, on
// a gap, returns the first missing sequence number. It does not advance; call
// advance once the batch is applied.
func (s *seqState) observe(seq uint64, stream string) (verdict, uint64) {
	switch {
	case !s.started:
		return seqFirst, 0
	case stream != s.stream:
		return seqRestart, 0
	case seq == s.next:
		return seqInOrder, 0
	case seq > s.next:
		return seqGap, s.next
	case seq+1 == s.next && seq != 0:
		return seqDuplicate, 0
	}
	return seqRestart, 0
}

func (s *seqState) advance(seq uint64, stream string) {
	s.started, s.next, s.stream = true, seq+1, stream
}
