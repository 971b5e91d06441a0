package router

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/blocktest"
)

// newTier returns an in-memory tier holding blocks hashes of namespace m.
func newTier(t *testing.T, hashes ...uint64) *blocktest.Tier {
	t.Helper()
	tier := blocktest.New()
	for _, h := range hashes {
		data := []byte(fmt.Sprintf("block %d", h))
		if err := tier.Put(context.Background(), block.NewKey("m", h), data, block.Checksum(data), block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return tier
}

type fakeNS struct{}

func (fakeNS) Namespace(name string) (block.Namespace, error) {
	ns := block.DefaultNamespaceConfig()
	switch name {
	case "m":
		ns.Name, ns.BlockTokens = name, 100
	case "t":
		ns.Name, ns.BlockTokens = name, 4
	default:
		return block.Namespace{}, block.ErrUnknownNamespace
	}
	return ns, nil
}

// sumHash is a stand-in hash scheme: block i's hash is the running sum of tokens + 1000*(i+1).
func sumHash(ns block.Namespace, toks []uint32) ([]uint64, error) {
	var out []uint64
	var acc uint64
	for i := 0; i+ns.BlockTokens <= len(toks); i += ns.BlockTokens {
		for _, t := range toks[i : i+ns.BlockTokens] {
			acc += uint64(t)
		}
		out = append(out, acc+1000*uint64(len(out)+1))
	}
	return out, nil
}

// tierIndex is blocktest.Tier as a TierIndex: a Lookup's options carry
// the read retain window the tier notes.
type tierIndex struct{ *blocktest.Tier }

func (t tierIndex) Lookup(ctx context.Context, keys []block.Key, opts ctxstore.ReadOptions) (int, error) {
	return t.LookupRetain(ctx, keys, opts.Retain)
}

func newRouter(t *testing.T, tier *blocktest.Tier) *Router {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Cost = testCost
	cfg.Seed = 1
	r, err := New(cfg, Deps{Tier: tierIndex{tier}, Pinner: tier, Namespaces: fakeNS{}, Hash: sumHash})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRoutePrefersCacheAndTier(t *testing.T) {
	tier := newTier(t, 1, 2, 3)
	r := newRouter(t, tier)
	ctx := context.Background()
	if _, err := r.Apply("m", "hot", []Event{stored(Device, nil, 1, 2, 3, 4)}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply("m", "cold", []Event{stored(Device, nil, 9)}); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	res, err := r.Route(ctx, Query{Namespace: "m", BlockHashes: []uint64{1, 2, 3, 4, 5}, Hints: Hints{PinTTL: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	if res.Recommended != "hot" || res.TierDepth != 3 || res.BlockTokens != 100 {
		t.Fatalf("result %+v", res)
	}
	if res.Workers[0].Worker != "hot" || res.Workers[0].Device != 4 || res.Workers[1].Device != 0 {
		t.Fatalf("workers %+v", res.Workers)
	}
	// cold fetches 3 blocks from the tier and recomputes 2.
	if c := res.Workers[1].Cost; c.FetchBlocks != 3 || c.RecomputeBlocks != 2 {
		t.Fatalf("cold cost %+v", c)
	}
	if res.Pinned != 3 {
		t.Fatalf("pinned %d", res.Pinned)
	}
	for _, h := range []uint64{1, 2, 3} {
		if until := tier.PinnedUntil(block.NewKey("m", h)); until.Before(before.Add(time.Minute)) || until.After(after.Add(time.Minute)) {
			t.Fatalf("block %d pinned until %v, want a minute from the route (%v)", h, until, before)
		}
	}

	// Load on hot outweighs its cache: 20 queued prefill blocks = 2 s.
	if err := r.ReportLoad("m", "hot", Load{PrefillBlocks: 20}); err != nil {
		t.Fatal(err)
	}
	res, err = r.Route(ctx, Query{Namespace: "m", BlockHashes: []uint64{1, 2, 3, 4, 5}})
	if err != nil || res.Recommended != "cold" {
		t.Fatalf("loaded: %+v %v", res, err)
	}

	// A tier failure is reported and routing goes on without it.
	tier.FailLookups(errors.New("tier down"))
	res, err = r.Route(ctx, Query{Namespace: "m", BlockHashes: []uint64{1}})
	if err != nil || res.TierError == "" || res.TierDepth != 0 || res.Recommended == "" {
		t.Fatalf("tier down: %+v %v", res, err)
	}
}

func TestRouteTokensAndCommit(t *testing.T) {
	r := newRouter(t, newTier(t))
	ctx := context.Background()
	toks := []uint32{1, 1, 1, 1, 2, 2, 2, 2, 3} // two whole blocks
	hs, _ := sumHash(block.Namespace{BlockTokens: 4}, toks)
	for _, w := range []string{"a", "b"} {
		if err := r.ReportLoad("t", w, Load{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Apply("t", "b", []Event{stored(Host, nil, hs...)}); err != nil {
		t.Fatal(err)
	}
	res, err := r.Route(ctx, Query{Namespace: "t", TokenIDs: toks, Commit: true, Hints: Hints{ExpectedOutputTokens: 8}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Blocks != 2 || res.Recommended != "b" || res.Workers[0].Host != 2 {
		t.Fatalf("%+v", res)
	}
	// Commit added b's predicted load: 2 prefill (loaded) blocks, 2+2 decode blocks.
	for _, wi := range r.Workers("t") {
		if wi.Worker == "b" && (wi.Load != Load{PrefillBlocks: 2, DecodeBlocks: 4}) {
			t.Fatalf("b load %+v", wi.Load)
		}
	}
	// A load report replaces the prediction.
	_ = r.ReportLoad("t", "b", Load{DecodeBlocks: 1})
	for _, wi := range r.Workers("t") {
		if wi.Worker == "b" && (wi.Load != Load{DecodeBlocks: 1}) {
			t.Fatalf("b load after report %+v", wi.Load)
		}
	}
	// Token queries need the namespace's scheme.
	if _, err := r.Route(ctx, Query{Namespace: "other", TokenIDs: toks}); !errors.Is(err, block.ErrInvalidArgument) {
		t.Fatalf("unknown namespace token query: %v", err)
	}
}

func TestRouteTemperatureSpreads(t *testing.T) {
	r := newRouter(t, newTier(t))
	ctx := context.Background()
	_, _ = r.Apply("m", "a", []Event{stored(Device, nil, 1, 2)})
	_, _ = r.Apply("m", "b", []Event{stored(Device, nil, 1)})
	temp := 2.0
	seen := map[string]int{}
	for range 200 {
		res, err := r.Route(ctx, Query{Namespace: "m", BlockHashes: []uint64{1, 2}, Temperature: &temp})
		if err != nil {
			t.Fatal(err)
		}
		seen[res.Recommended]++
	}
	if seen["a"] <= seen["b"] || seen["b"] == 0 {
		t.Fatalf("sampling %v", seen)
	}
	// Top priority routes greedily whatever the temperature.
	for range 50 {
		res, _ := r.Route(ctx, Query{Namespace: "m", BlockHashes: []uint64{1, 2}, Temperature: &temp, Hints: Hints{Priority: block.MaxPriority}})
		if res.Recommended != "a" {
			t.Fatalf("priority 7 picked %s", res.Recommended)
		}
	}
}

func TestRouteRejects(t *testing.T) {
	r := newRouter(t, newTier(t))
	ctx := context.Background()
	neg := -1.0
	for name, q := range map[string]Query{
		"bad namespace":            {Namespace: "Bad NS"},
		"priority":                 {Namespace: "m", Hints: Hints{Priority: 9}},
		"negative ttl":             {Namespace: "m", Hints: Hints{PinTTL: -time.Second}},
		"negative retain":          {Namespace: "m", Hints: Hints{Retain: -time.Second}},
		"retain above the maximum": {Namespace: "m", Hints: Hints{Retain: block.MaxRetain + time.Millisecond}},
		"temperature":              {Namespace: "m", Temperature: &neg},
		"too many":                 {Namespace: "m", BlockHashes: make([]uint64, 1<<17)},
	} {
		if _, err := r.Route(ctx, q); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := r.ReportLoad("m", "w", Load{PrefillBlocks: -1}); err == nil {
		t.Error("negative load accepted")
	}
	if _, err := New(Config{}, Deps{}); err == nil {
		t.Error("zero config accepted")
	}
}

func TestObserveFetch(t *testing.T) {
	r := newRouter(t, newTier(t))
	before := r.FetchBytesPerSec()
	for range 50 {
		r.ObserveFetch(1e9, time.Second) // 1 GB/s measured
	}
	if got := r.FetchBytesPerSec(); got <= before || got < 0.99e9 {
		t.Fatalf("fetch bandwidth %v -> %v", before, got)
	}
}

// TestRouteListsCheapestAndPricesExactly: with more workers than listed, the
// listed ones are the cheapest in order (ties in worker order), each priced
// exactly as Price does, matched or not, and the recommendation is the
// cheapest at temperature 0.
func TestRouteListsCheapestAndPricesExactly(t *testing.T) {
	r := newRouter(t, newTier(t, 1))
	ctx := context.Background()
	const workers = 50
	for w := range workers {
		name := fmt.Sprintf("w%02d", w)
		if w%3 == 0 {
			hs := []uint64{1, 2, 3, 4}[:1+w%4]
			if _, err := r.Apply("m", name, []Event{stored(Medium(w%2), nil, hs...)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.ReportLoad("m", name, Load{PrefillBlocks: int64(w % 5), DecodeBlocks: int64(w % 4 * 10)}); err != nil {
			t.Fatal(err)
		}
	}
	q := []uint64{1, 2, 3, 4, 5}
	res, err := r.Route(ctx, Query{Namespace: "m", BlockHashes: q, MaxWorkers: 7})
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]Cost{}
	var costs []float64
	for w := range workers {
		name := fmt.Sprintf("w%02d", w)
		d := depths(r.indexes["m"], q...)[name]
		c := r.cfg.Cost.Price(CostInput{Blocks: len(q), BlockTokens: res.BlockTokens, Depth: d, Tier: res.TierDepth,
			Load: Load{PrefillBlocks: int64(w % 5), DecodeBlocks: int64(w % 4 * 10)}, FetchBps: r.FetchBytesPerSec()})
		all[name] = c
		costs = append(costs, c.Seconds)
	}
	if len(res.Workers) != 7 {
		t.Fatalf("%d workers listed", len(res.Workers))
	}
	slices.Sort(costs)
	for i, wr := range res.Workers {
		if wr.Cost != all[wr.Worker] {
			t.Fatalf("%s: cost %+v, Price says %+v", wr.Worker, wr.Cost, all[wr.Worker])
		}
		if wr.Cost.Seconds != costs[i] {
			t.Fatalf("listed #%d %s at %v, want the %d-th cheapest %v", i, wr.Worker, wr.Cost.Seconds, i, costs[i])
		}
		if i > 0 && wr.Cost.Seconds == res.Workers[i-1].Cost.Seconds && wr.Worker < res.Workers[i-1].Worker {
			t.Fatalf("tie out of worker order: %s after %s", wr.Worker, res.Workers[i-1].Worker)
		}
	}
	if res.Recommended != res.Workers[0].Worker || *res.Cost != res.Workers[0].Cost {
		t.Fatalf("recommended %s %+v, cheapest %+v", res.Recommended, res.Cost, res.Workers[0])
	}
}

// TestRouteRetain: a query's read hint (Hints.Retain) travels with the
// tier lookup that finds the prefix ctxtier holds (the store re-arms what
// it finds, as for LOOKUP); a query without it looks up without one.
func TestRouteRetain(t *testing.T) {
	for _, tc := range []struct {
		name   string
		retain time.Duration
	}{
		{"none", 0},
		{"tool call", 20 * time.Second},
		{"maximum", block.MaxRetain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tier := newTier(t, 1, 2)
			r := newRouter(t, tier)
			res, err := r.Route(context.Background(), Query{Namespace: "m", BlockHashes: []uint64{1, 2, 3}, Hints: Hints{Retain: tc.retain}})
			if err != nil {
				t.Fatal(err)
			}
			// The present prefix, blocks 1 and 2, is re-armed with the
			// query's window (none when it has none).
			want := map[block.Key]time.Duration{}
			if tc.retain > 0 {
				want = map[block.Key]time.Duration{block.NewKey("m", 1): tc.retain, block.NewKey("m", 2): tc.retain}
			}
			got := tier.Retains()
			if n := tier.Counts().Lookups; res.TierDepth != 2 || n != 1 || !maps.Equal(got, want) {
				t.Fatalf("tier depth %d, %d lookups re-arming %v; want 2, 1 and %v", res.TierDepth, n, got, want)
			}
		})
	}
}
