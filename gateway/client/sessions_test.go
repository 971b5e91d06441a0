package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/router/query"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/tiers/dram"
	"github.com/ctxtier/ctxtier/tiers/policy"
)

// TestAgentSessions: put session ids, read retain windows (GET batches and
// LOOKUP) and END_SESSION travel to the store's tier over the native
// protocol; bad values are refused with InvalidArgument.
func TestAgentSessions(t *testing.T) {
	mt, srv := startMapTier(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := dialNative(t, srv.Addr, 1)
	if !c.SessionsAccepted() || !c.HintsAccepted() {
		t.Fatalf("sessions accepted %v, put hints accepted %v", c.SessionsAccepted(), c.HintsAccepted())
	}
	keys := []block.Key{block.NewKey("default", 1), block.NewKey("default", 2), block.NewKey("default", 3)}
	items := []PutItem{
		{Key: keys[0], Opts: block.PutOptions{Reuse: block.ReuseShared, Session: 42}},
		{Key: keys[1], Opts: block.PutOptions{Reuse: block.ReuseSession, Retain: time.Second, Session: 42}},
		{Key: keys[2], Opts: block.PutOptions{Session: 43}},
	}
	for i := range items {
		items[i].Data = payload(uint64(i), 100)
	}
	if errs, err := c.PutBatch(ctx, items); err != nil || errs[0] != nil || errs[1] != nil || errs[2] != nil {
		t.Fatalf("put: %v %v", errs, err)
	}
	for _, it := range items {
		if got, ok := mt.PutOptions(it.Key); !ok || got.Session != it.Opts.Session || got.Reuse != it.Opts.Reuse {
			t.Fatalf("%s: the tier got %+v, the put sent %+v", it.Key, got, it.Opts)
		}
	}

	for _, tc := range []struct {
		name   string
		retain time.Duration
		want   time.Duration // recorded by the tier (0: none)
	}{
		{"no hint", 0, 0},
		{"20 s", 20 * time.Second, 20 * time.Second},
		{"below a millisecond rounds up", time.Microsecond, time.Millisecond},
		{"negative is not sent", -time.Second, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rctx := ctx
			if tc.retain != 0 {
				rctx = WithRetain(ctx, tc.retain)
			}
			if _, errs, err := c.GetBatch(rctx, keys[:2]); err != nil || errs[0] != nil || errs[1] != nil {
				t.Fatalf("get: %v %v", errs, err)
			}
			got := mt.Retains()
			if got[keys[0]] != tc.want || got[keys[1]] != tc.want || got[keys[2]] != 0 {
				t.Fatalf("get: the tier saw retain windows %v, want %v on the two keys read", got, tc.want)
			}
			// LOOKUP re-arms the present prefix only.
			lk := []block.Key{keys[2], block.NewKey("default", 99), keys[0]}
			if n, err := c.Lookup(rctx, lk); err != nil || n != 1 {
				t.Fatalf("lookup: %d %v", n, err)
			}
			got = mt.Retains()
			if got[keys[2]] != tc.want || len(got) > 1 {
				t.Fatalf("lookup: the tier saw retain windows %v, want %v on %s only", got, tc.want, keys[2])
			}
		})
	}

	if n, err := c.EndSession(ctx, "default", 42); err != nil || n != 2 {
		t.Fatalf("end session 42: %d blocks, %v; want 2", n, err)
	}
	if got, _ := mt.PutOptions(keys[1]); got.Session != 0 {
		t.Fatalf("session 42's block still has session %d", got.Session)
	}
	if got, _ := mt.PutOptions(keys[2]); got.Session != 43 {
		t.Fatalf("session 43's block lost its session: %+v", got)
	}
	if _, err := c.EndSession(ctx, "default", 0); !errors.Is(err, block.ErrInvalidArgument) {
		t.Fatalf("session 0: %v", err)
	}
	if _, err := c.EndSession(ctx, "nosuch", 43); errcode.Of(err) != errcode.UnknownNamespace {
		t.Fatalf("unknown namespace: %v", err)
	}
	if n, err := c.EndSession(ctx, "default", 43); err != nil || n != 1 {
		t.Fatalf("the connection after refusals: %d %v", n, err)
	}
}

// TestAgentSessionsToServerWithoutThem: a server that reads put hints but
// not agent sessions refuses the hello once; the client dials again
// without the session flag only, sends puts with their hints but without
// session ids and reads without the retain record (no frame flag the
// server does not know), and EndSession says it is unsupported.
func TestAgentSessionsToServerWithoutThem(t *testing.T) {
	mt, srv := startMapTier(t)
	addr, refused, badFrames := oldServerHello(t, srv.Addr, 3 /* wire.HelloVerifiesGets | wire.HelloPutHints */)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := dialNative(t, addr, 2)
	if c.SessionsAccepted() || !c.HintsAccepted() || refused.Load() != 1 || !c.noSessions.Load() || c.noPutHints.Load() {
		t.Fatalf("sessions %v, put hints %v, %d refusals", c.SessionsAccepted(), c.HintsAccepted(), refused.Load())
	}
	k := block.NewKey("default", 5)
	data := payload(5, 4096)
	if err := c.PutWithOptions(ctx, k, data, block.PutOptions{Reuse: block.ReuseSession, Retain: time.Minute, Session: 7}); err != nil {
		t.Fatal(err)
	}
	if got, ok := mt.PutOptions(k); !ok || got.Reuse != block.ReuseSession || got.Retain != time.Minute || got.Session != 0 {
		t.Fatalf("stored %v with %+v; want the put hints without the session", ok, got)
	}
	if _, err := c.Get(WithRetain(ctx, time.Minute), k); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Lookup(WithRetain(ctx, time.Minute), []block.Key{k}); err != nil || n != 1 {
		t.Fatalf("lookup: %d %v", n, err)
	}
	if r := mt.Retains(); len(r) != 0 {
		t.Fatalf("the old server saw read hints %v", r)
	}
	// A route query goes without its read hint (this server has no
	// router: it answers InvalidArgument, not a malformed frame).
	if _, err := c.Route(ctx, query.Query{BlockHashes: []uint64{5}, Hints: query.Hints{Retain: time.Minute}}); !errors.Is(err, block.ErrInvalidArgument) {
		t.Fatalf("route with a read hint on an old server: %v", err)
	}
	if _, err := c.EndSession(ctx, "default", 7); !errors.Is(err, ErrSessionsUnsupported) {
		t.Fatalf("end session on an old server: %v", err)
	}
	if badFrames.Load() != 0 || refused.Load() != 1 {
		t.Fatalf("%d frames with unknown flags, %d refusals", badFrames.Load(), refused.Load())
	}
}

// TestHTTPClientAgentSessions: over HTTP, a put's session id reaches the
// DRAM tier (its end releases the session's own blocks, not the shared
// one), reads with a retain window are accepted by the server whatever the
// window's rounding, and bad sessions are InvalidArgument.
func TestHTTPClientAgentSessions(t *testing.T) {
	window, err := policy.Lookup("window") // ctxd's default: it honours hints
	if err != nil {
		t.Fatal(err)
	}
	e := newHTTPTestEnv(t, func(c *dram.Config) { c.Policy = window })
	ctx := context.Background()
	for i, o := range []block.PutOptions{
		{Reuse: block.ReuseSession, Retain: time.Minute, Session: 5},
		{Session: 5},
		{Reuse: block.ReuseShared, Session: 5},
		{Session: 6},
	} {
		if err := e.c.Put(ctx, key(uint64(300+i)), payload(uint64(i), 64), o); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	for _, d := range []time.Duration{time.Microsecond, 1500 * time.Millisecond, 20 * time.Second} {
		rctx := WithRetain(ctx, d)
		if _, err := e.c.Get(rctx, key(300)); err != nil {
			t.Fatalf("get with retain %v: %v", d, err)
		}
		if _, errs, err := e.c.GetBatch(rctx, []block.Key{key(300), key(301)}); err != nil || errs[0] != nil || errs[1] != nil {
			t.Fatalf("batch get with retain %v: %v %v", d, errs, err)
		}
		if n, err := e.c.Lookup(rctx, []block.Key{key(300), key(301)}); err != nil || n != 2 {
			t.Fatalf("lookup with retain %v: %d %v", d, n, err)
		}
	}
	if n, err := e.c.EndSession(ctx, "default", 5); err != nil || n != 2 {
		t.Fatalf("end session 5: %d blocks, %v; want 2", n, err)
	}
	if n, err := e.c.EndSession(ctx, "default", 5); err != nil || n != 0 {
		t.Fatalf("end session 5 again: %d blocks, %v; want 0", n, err)
	}
	if _, err := e.c.EndSession(ctx, "default", 0); !errors.Is(err, block.ErrInvalidArgument) {
		t.Fatalf("session 0: %v", err)
	}
	if _, err := e.c.EndSession(ctx, "nosuch", 5); !errors.Is(err, block.ErrUnknownNamespace) {
		t.Fatalf("unknown namespace: %v", err)
	}
}
