package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/client"
	"github.com/ctxtier/ctxtier/sim/policysim"
	"github.com/ctxtier/ctxtier/sim/trace"
)

// ctxdArgs are the flags of `ctxbench sim --ctxd`: the same trace, with
// the simulator's prefix semantics, replayed against a real ctxd.
type ctxdArgs struct {
	addr       string  // native protocol address; empty: no ctxd replay
	namespace  string  // block namespace
	blockBytes int     // bytes per block on the wire
	hints      bool    // send the trace's hints with each put
	sessions   bool    // with hints: also session ids, read retain windows and session ends
	speed      float64 // trace time / real time while hints are sent
	fixedKeys  bool    // keys are the (salted) trace ids as given: --key-salt; else a random salt per run
	prefixOnly bool    // read only the prefix ctxd holds (a lookup, then a get), put the rest, as `ctxbench replay` does
	graceMs    int64   // added to resume_within_ms (the call itself), as the simulator's PinGraceMs
}

// errNotRead marks a block past the prefix ctxd reported (prefixOnly):
// put as a miss; if ctxd holds it, its cluster index absorbs the put.
var errNotRead = errors.New("ctxbench: not read: past the looked-up prefix")

// ctxdResult is a ctxd replay's outcome.
type ctxdResult struct {
	policysim.Result
	wall     time.Duration
	maxLag   time.Duration // most a request started behind its paced time
	checked  int64         // hit blocks whose bytes were compared
	ended    int64         // sessions ended (--ctxd-sessions)
	released int64         // blocks those ends released
}

// ctxdKey is the block key of trace id under a run's salt (fresh keys per
// run, so a ctxd that served an earlier run starts cold for this one).
func ctxdKey(ns string, salt, id uint64) block.Key { return block.NewKey(ns, id^salt) }

// ctxdFill writes the deterministic content of block hash h into b.
func ctxdFill(b []byte, h uint64) {
	var w [8]byte
	for i := 0; i < len(b); i += 8 {
		binary.LittleEndian.PutUint64(w[:], h*0x9e3779b97f4a7c15+uint64(i))
		copy(b[i:], w[:])
	}
}

// replayCtxd replays reqs against ctxd with the simulator's semantics: a
// request's blocks hit until its first miss; all its blocks are read (a
// hit touches the block in ctxd's policy; with prefixOnly only the prefix
// a lookup reports, the rest counts as missing, as `ctxbench replay` does),
// then every missing block is put
// in order with its parent and, with hints, the trace's hint for it
// (trace.Request.BlockHint); with sessions as well, each request's reads
// carry its retain window (trace.Request.ReadRetain), its session's own
// blocks its session id, and a request that ends its session is followed
// by END_SESSION. Without hints it runs as fast as ctxd
// answers; with hints it paces requests at trace time / speed, so retain
// windows (scaled by the same 1/speed) mean what they mean in the trace.
// Every hit's bytes are compared with what was put.
func replayCtxd(ctx context.Context, reqs []trace.Request, a ctxdArgs, progress io.Writer) (ctxdResult, error) {
	c, err := client.Dial(ctx, a.addr, client.Options{Conns: 2})
	if err != nil {
		return ctxdResult{}, err
	}
	defer c.Close()
	name := "ctxd"
	if a.hints {
		name = "ctxd+hints"
		if !c.HintsAccepted() {
			return ctxdResult{}, fmt.Errorf("ctxd at %s does not read put hints", a.addr)
		}
		if a.sessions {
			name = "ctxd+sessions"
			if !c.SessionsAccepted() {
				return ctxdResult{}, fmt.Errorf("ctxd at %s does not read agent sessions", a.addr)
			}
		}
	}
	sessions := map[string]uint64{} // live trace session -> wire session id
	var nextSID uint64
	res := ctxdResult{Result: policysim.Result{Policy: name}}
	salt := rand.Uint64()
	if a.fixedKeys {
		salt = 0
	}
	grace := time.Duration(a.graceMs) * time.Millisecond
	want := make([]byte, a.blockBytes)
	start := time.Now()
	t0 := int64(0)
	if len(reqs) > 0 {
		t0 = reqs[0].TimestampMs
	}
	for ri := range reqs {
		r := &reqs[ri]
		if a.hints && a.speed > 0 {
			due := start.Add(time.Duration(float64(time.Duration(r.TimestampMs-t0)*time.Millisecond) / a.speed))
			if d := time.Until(due); d > 0 {
				time.Sleep(d)
			} else {
				res.maxLag = max(res.maxLag, -d)
			}
		}
		keys := make([]block.Key, len(r.HashIDs))
		for i, id := range r.HashIDs {
			keys[i] = ctxdKey(a.namespace, salt, id)
		}
		var sid uint64
		rctx := ctx
		if a.sessions {
			if r.Session != "" {
				if sid = sessions[r.Session]; sid == 0 {
					nextSID++
					sid = nextSID
					sessions[r.Session] = sid
				}
			}
			if d := r.ReadRetain(grace, a.speed); d > 0 {
				rctx = client.WithRetain(ctx, d)
			}
		}
		read := keys
		if a.prefixOnly {
			d, err := c.Lookup(rctx, keys)
			if err != nil {
				return res, fmt.Errorf("request %d: lookup: %w", ri, err)
			}
			read = keys[:d]
		}
		var data [][]byte
		var errs []error
		if len(read) > 0 {
			if data, errs, err = c.GetBatch(rctx, read); err != nil {
				return res, fmt.Errorf("request %d: get: %w", ri, err)
			}
		}
		var puts []client.PutItem
		miss := false
		for i := range keys {
			res.Total++
			e := errNotRead
			if i < len(errs) {
				e = errs[i]
			}
			switch {
			case e == nil:
				ctxdFill(want, keys[i].Hash)
				if !bytes.Equal(data[i], want) {
					return res, fmt.Errorf("request %d: block %s read back with other bytes", ri, keys[i])
				}
				res.checked++
				if !miss {
					res.Hits++
				}
				continue
			case !errors.Is(e, block.ErrNotFound) && !errors.Is(e, errNotRead):
				return res, fmt.Errorf("request %d: get %s: %w", ri, keys[i], e)
			}
			miss = true
			b := make([]byte, a.blockBytes)
			ctxdFill(b, keys[i].Hash)
			it := client.PutItem{Key: keys[i], Data: b}
			if i > 0 {
				it.Opts.Parent, it.Opts.HasParent = keys[i-1].Hash, true
			}
			if a.hints {
				it.Opts.Reuse, it.Opts.Retain = r.BlockHint(i, grace, a.speed)
				if it.Opts.Reuse != block.ReuseShared && it.Opts.Reuse != block.ReuseNever {
					it.Opts.Session = sid
				}
			}
			puts = append(puts, it)
		}
		if len(puts) > 0 {
			perrs, err := c.PutBatch(ctx, puts)
			if err != nil {
				return res, fmt.Errorf("request %d: put: %w", ri, err)
			}
			for i, e := range perrs {
				if e != nil {
					return res, fmt.Errorf("request %d: put %s: %w", ri, puts[i].Key, e)
				}
			}
		}
		if sid != 0 && r.Hints != nil && r.Hints.SessionEnd {
			n, err := c.EndSession(ctx, a.namespace, sid)
			if err != nil {
				return res, fmt.Errorf("request %d: end session %q: %w", ri, r.Session, err)
			}
			res.released += int64(n)
			res.ended++
			delete(sessions, r.Session)
		}
		if progress != nil && ri%1000 == 999 {
			fmt.Fprintf(progress, "ctxd replay: %d/%d requests, hit ratio so far %.4f\n", ri+1, len(reqs), res.HitRatio())
		}
	}
	res.wall = time.Since(start)
	return res, ctx.Err()
}
