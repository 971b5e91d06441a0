package trace

import (
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// BlockHint is the agent hint a put of block i of r carries on the wire
// (block.PutOptions.Reuse and Retain): the shared prefix is
// block.ReuseShared, the ephemeral tail block.ReuseNever, a session's other
// blocks block.ReuseSession; a request the harness expects to resend within
// resume_within_ms (and that does not end its session) retains its blocks,
// except the ephemeral ones, for that long plus grace (the call itself),
// scaled by 1/speed for a replay run speed times faster than the trace. The
// own (not shared) blocks a session's last request puts are
// block.ReuseNever. A request without hints gives no hint. A session's end
// releases only the blocks its last request puts: the blocks it put before
// keep their hints (the wire has no per-session release).
func (r *Request) BlockHint(i int, grace time.Duration, speed float64) (block.Reuse, time.Duration) {
	h := r.Hints
	if h == nil || i < 0 || i >= len(r.HashIDs) {
		return block.ReuseUnknown, 0
	}
	reuse := block.ReuseUnknown
	switch {
	case i >= len(r.HashIDs)-h.EphemeralTailBlocks:
		return block.ReuseNever, 0
	case i < h.SharedPrefixBlocks:
		reuse = block.ReuseShared
	case h.SessionEnd:
		return block.ReuseNever, 0 // the session's own block, and the session is over
	case r.Session != "":
		reuse = block.ReuseSession
	}
	var retain time.Duration
	if h.ResumeWithinMs > 0 && !h.SessionEnd {
		retain = time.Duration(float64(time.Duration(h.ResumeWithinMs)*time.Millisecond+grace) / max(speed, 1e-9))
		retain = min(max(retain, time.Millisecond), block.MaxRetain)
	}
	return reuse, retain
}

// ReadRetain is the retain window the reads of r carry when the harness
// says its session's context comes back (block.GetOptions.Retain): the window
// BlockHint gives r's retained blocks (resume_within_ms plus grace, scaled
// by 1/speed), which the simulator's hint policy extends every block r hits
// to. It is 0 for a request without hints, without a resume window, or
// that ends its session.
func (r *Request) ReadRetain(grace time.Duration, speed float64) time.Duration {
	h := r.Hints
	if h == nil || h.ResumeWithinMs <= 0 || h.SessionEnd {
		return 0
	}
	d := time.Duration(float64(time.Duration(h.ResumeWithinMs)*time.Millisecond+grace) / max(speed, 1e-9))
	return min(max(d, time.Millisecond), block.MaxRetain)
}
