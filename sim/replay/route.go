package replay

import (
	"context"
	"fmt"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/router"
)

// RouterClient is the router as the simulated frontend and workers use it:
// the frontend asks for a worker, workers publish their KV events and load.
// LocalRouter serves it in process; a client of ctxd's routing API
// (POST /v1/route/query, /events, /load) serves it over HTTP.
type RouterClient interface {
	// Route returns the worker recommended for a request of these block
	// hashes, and the prefix depth ctxtier holds (0 when the router does not
	// consult the tier).
	Route(ctx context.Context, hashes []uint64) (RouteAnswer, error)
	// Apply publishes a worker's KV events.
	Apply(ctx context.Context, worker string, evs []router.Event) error
	// ReportLoad publishes a worker's load.
	ReportLoad(ctx context.Context, worker string, l router.Load) error
}

// RouteAnswer is a router's answer.
type RouteAnswer struct {
	Worker    string
	TierDepth int
}

// LocalRouter is an in-process router.Router for one namespace.
type LocalRouter struct {
	r  *router.Router
	ns string
}

// tierLookup adapts a TierClient to router.TierIndex. The replay's queries
// carry no read hint, so opts is not sent.
type tierLookup struct{ c TierClient }

func (t tierLookup) Lookup(ctx context.Context, keys []block.Key, _ ctxstore.ReadOptions) (int, error) {
	return t.c.Lookup(ctx, keys)
}

// NewLocalRouter returns a router whose cost model matches cfg: prefill by
// cfg.Prefill (the model the simulated workers are charged with), full-size
// blocks, the tier at cfg.TierBytesPerSec.
// With tier set, queries also ask ctxtier for its prefix depth (a real
// Lookup); without it the router knows only the workers' HBM.
func NewLocalRouter(cfg Config, ns string, tier TierClient) (*LocalRouter, error) {
	rc := router.DefaultConfig()
	rc.Cost.Prefill = cfg.Prefill
	rc.Cost.BlockBytes = cfg.blockFullBytes(cfg.BlockTokens)
	rc.Cost.FetchBytesPerSec = cfg.TierBytesPerSec
	rc.Cost.DecodeBlockSeconds = 0 // prefill workers are not decoding
	rc.DefaultBlockTokens = cfg.BlockTokens
	rc.Temperature = cfg.Temperature
	rc.Seed = 1
	rc.MaxWorkers = 1
	rc.PendingTTL = 0 // loads are reported exactly; nothing is predicted
	deps := router.Deps{}
	if tier != nil {
		deps.Tier = tierLookup{tier}
	}
	r, err := router.New(rc, deps)
	if err != nil {
		return nil, err
	}
	return &LocalRouter{r: r, ns: ns}, nil
}

// Route asks the router; the answer is its recommended worker.
func (l *LocalRouter) Route(ctx context.Context, hashes []uint64) (RouteAnswer, error) {
	res, err := l.r.Route(ctx, router.Query{Namespace: l.ns, BlockHashes: hashes})
	if err != nil {
		return RouteAnswer{}, err
	}
	if res.TierError != "" {
		return RouteAnswer{}, fmt.Errorf("router tier lookup: %s", res.TierError)
	}
	return RouteAnswer{Worker: res.Recommended, TierDepth: res.TierDepth}, nil
}

// Apply feeds a worker's events to the index.
func (l *LocalRouter) Apply(_ context.Context, worker string, evs []router.Event) error {
	_, err := l.r.Apply(l.ns, worker, evs)
	return err
}

// ReportLoad records a worker's load.
func (l *LocalRouter) ReportLoad(_ context.Context, worker string, ld router.Load) error {
	return l.r.ReportLoad(l.ns, worker, ld)
}

// storedEvents are the router events of a worker's HBM change: a BlockStored
// per run of consecutive added positions, then a BlockRemoved of the evicted.
func storedEvents(hashes []uint64, added []int, evicted []uint64, blockTokens int) []router.Event {
	var evs []router.Event
	for i := 0; i < len(added); {
		j := i + 1
		for j < len(added) && added[j] == added[j-1]+1 {
			j++
		}
		a, b := added[i], added[j-1]+1
		ev := router.Event{Kind: router.Stored, Hashes: append([]uint64(nil), hashes[a:b]...),
			Medium: router.Device, BlockSize: blockTokens}
		if a > 0 {
			ev.Parent, ev.HasParent = hashes[a-1], true
		}
		evs = append(evs, ev)
		i = j
	}
	if len(evicted) > 0 {
		evs = append(evs, router.Event{Kind: router.Removed, Hashes: evicted, Medium: router.Device})
	}
	return evs
}
