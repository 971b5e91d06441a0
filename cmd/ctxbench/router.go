package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/router"
	"github.com/ctxtier/ctxtier/sim/trace"
)

func init() {
	register("router-bench", "replay Mooncake traces as KV events plus lookups against the router index", runRouterBench)
}

// rbEvent is one generated event for one simulated worker.
type rbEvent struct {
	worker int
	ev     router.Event
}

func runRouterBench(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("router-bench", flag.ContinueOnError)
	tracePath := fs.String("trace", "", "Mooncake trace (.jsonl); default: every trace in ../shared/traces")
	workersFlag := fs.String("workers", "100,1000", "simulated worker counts, comma separated")
	capacity := fs.Int("capacity", 1024, "blocks each simulated worker holds before it evicts (LRU)")
	rounds := fs.Int("rounds", 8, "times the trace is replayed (each round with fresh hashes)")
	writers := fs.Int("writers", runtime.GOMAXPROCS(0), "event writer goroutines (each owns a set of workers)")
	readers := fs.Int("readers", runtime.GOMAXPROCS(0), "lookup goroutines")
	top := fs.Int("top", 16, "lookups ask for the top deepest workers (0: every worker holding the first block)")
	repeat := fs.Int("repeat", 3, "runs per configuration (best and median are summarised)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var counts []int
	for _, s := range strings.Split(*workersFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return fmt.Errorf("bad --workers %q", *workersFlag)
		}
		counts = append(counts, n)
	}
	if *capacity <= 0 || *rounds <= 0 || *writers <= 0 || *readers <= 0 || *repeat <= 0 || *top < 0 {
		return errors.New("--capacity, --rounds, --writers, --readers and --repeat must be positive, --top not negative")
	}
	paths := []string{*tracePath}
	if *tracePath == "" {
		m, _ := filepath.Glob(filepath.Join("..", "shared", "traces", "*.jsonl"))
		if len(m) == 0 {
			return errors.New("no --trace given and no traces in ../shared/traces")
		}
		paths = m
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	fmt.Printf("router-bench: GOMAXPROCS=%d NumCPU=%d writers=%d readers=%d capacity=%d rounds=%d top=%d repeat=%d\n",
		runtime.GOMAXPROCS(0), runtime.NumCPU(), *writers, *readers, *capacity, *rounds, *top, *repeat)
	for _, p := range paths {
		reqs, err := trace.ReadFile(p)
		if err != nil {
			return err
		}
		for _, w := range counts {
			if err := ctx.Err(); err != nil {
				return err
			}
			benchOne(filepath.Base(p), reqs, w, *capacity, *rounds, *writers, *readers, *top, *repeat)
		}
	}
	return nil
}

// salt gives round r its own hashes while keeping the trace's sharing.
func salt(h uint64, r int) uint64 { return h ^ uint64(r)*0x9E3779B97F4A7C15 }

// generate assigns requests round-robin to workers and turns each into the
// events a vLLM worker with an LRU cache of capacity blocks would publish:
// BlockStored for the blocks past its cached prefix, BlockRemoved for what
// its cache evicts. It also returns each request's hashes, for lookups.
func generate(reqs []trace.Request, workers, capacity, rounds int) ([]rbEvent, [][]uint64, int) {
	type lru struct {
		at    map[uint64]int // hash -> last use
		clock int
	}
	caches := make([]lru, workers)
	for i := range caches {
		caches[i].at = map[uint64]int{}
	}
	var evs []rbEvent
	var queries [][]uint64
	blockOps := 0
	n := 0
	for r := range rounds {
		for _, q := range reqs {
			if len(q.HashIDs) == 0 {
				continue
			}
			hs := make([]uint64, len(q.HashIDs))
			for i, h := range q.HashIDs {
				hs[i] = salt(h, r)
			}
			queries = append(queries, hs)
			w := n % workers
			n++
			c := &caches[w]
			d := 0
			for d < len(hs) {
				if _, ok := c.at[hs[d]]; !ok {
					break
				}
				d++
			}
			for _, h := range hs {
				c.clock++
				c.at[h] = c.clock
			}
			if d < len(hs) {
				ev := router.Event{Kind: router.Stored, Hashes: hs[d:], Medium: router.Device}
				if d > 0 {
					ev.Parent, ev.HasParent = hs[d-1], true
				}
				evs = append(evs, rbEvent{w, ev})
				blockOps += len(hs) - d
			}
			if over := len(c.at) - capacity; over > 0 {
				type kv struct {
					h  uint64
					at int
				}
				all := make([]kv, 0, len(c.at))
				for h, at := range c.at {
					all = append(all, kv{h, at})
				}
				slices.SortFunc(all, func(a, b kv) int { return a.at - b.at })
				// Evict down to 90% so that eviction runs in batches, as vLLM's does.
				k := over + capacity/10
				gone := make([]uint64, 0, k)
				for _, e := range all[:min(k, len(all))] {
					gone = append(gone, e.h)
					delete(c.at, e.h)
				}
				evs = append(evs, rbEvent{w, router.Event{Kind: router.Removed, Hashes: gone, Medium: router.Device}})
				blockOps += len(gone)
			}
		}
	}
	return evs, queries, blockOps
}

func heapNow() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// rbResult is one run of one configuration.
type rbResult struct {
	apply, base         float64 // block ops/s
	applyCPU            float64 // block ops per CPU-second of the process
	lookup, lookupCPU   float64 // lookups/s, per CPU-second
	lp50, lp99          time.Duration
	route               float64 // Route calls/s
	rp50, rp99          time.Duration
	mixed, mixedCPU     float64 // block ops + lookups per s, per CPU-second
	mixedBlk, mixedLook float64
	mp50, mp99          time.Duration
	load                string
}

type rbSetup struct {
	evs       []rbEvent
	queries   [][]uint64
	blockOps  int
	names     []string
	top       int
	nWriters  int
	nReaders  int
	heapBytes int64
	footprint int64
	st        router.IndexStats
}

func benchOne(name string, reqs []trace.Request, workers, capacity, rounds, nWriters, nReaders, top, repeat int) {
	evs, queries, blockOps := generate(reqs, workers, capacity, rounds)
	su := &rbSetup{evs: evs, queries: queries, blockOps: blockOps, top: top, nWriters: nWriters, nReaders: nReaders}
	su.names = make([]string, workers)
	for i := range su.names {
		su.names[i] = fmt.Sprintf("worker-%04d", i)
	}
	fmt.Printf("\n== %s, %d workers: %d requests x %d rounds, %d events, %d block ops, %d lookups (avg %.1f blocks), top %d\n",
		name, workers, len(reqs), rounds, len(evs), blockOps, len(queries), avgLen(queries), top)
	var runs []rbResult
	for r := range repeat {
		res := benchRun(su, r == 0)
		runs = append(runs, res)
		fmt.Printf("run %d  [load %s]\n", r+1, res.load)
		fmt.Printf("  apply   %9.0f block ops/s (%d writers; %9.0f per CPU-s; plain-map baseline %.0f ops/s, ratio %.2f)\n",
			res.apply, nWriters, res.applyCPU, res.base, res.apply/res.base)
		fmt.Printf("  lookup  %9.0f lookups/s   (%d readers; %9.0f per CPU-s) p50 %v p99 %v\n",
			res.lookup, nReaders, res.lookupCPU, res.lp50, res.lp99)
		fmt.Printf("  route   %9.0f routes/s    (%d readers; Router.Route, cost over all workers) p50 %v p99 %v\n",
			res.route, nReaders, res.rp50, res.rp99)
		fmt.Printf("  mixed   %9.0f ops/s       (1 writer + 1 reader: %.0f block ops/s + %.0f lookups/s; %9.0f per CPU-s) lookup p50 %v p99 %v\n",
			res.mixed, res.mixedBlk, res.mixedLook, res.mixedCPU, res.mp50, res.mp99)
	}
	if repeat > 1 {
		sum := func(label string, get func(rbResult) float64, lowBest bool) {
			v := make([]float64, len(runs))
			for i, r := range runs {
				v[i] = get(r)
			}
			slices.Sort(v)
			best := v[len(v)-1]
			if lowBest {
				best = v[0]
			}
			fmt.Printf("  %-22s best %12.1f  median %12.1f\n", label, best, v[len(v)/2])
		}
		fmt.Printf("summary over %d runs:\n", repeat)
		sum("apply block ops/s", func(r rbResult) float64 { return r.apply }, false)
		sum("apply/baseline ratio", func(r rbResult) float64 { return r.apply / r.base }, false)
		sum("lookups/s", func(r rbResult) float64 { return r.lookup }, false)
		sum("lookup p99 us", func(r rbResult) float64 { return float64(r.lp99) / 1e3 }, true)
		sum("routes/s", func(r rbResult) float64 { return r.route }, false)
		sum("route p99 us", func(r rbResult) float64 { return float64(r.rp99) / 1e3 }, true)
		sum("mixed ops/s", func(r rbResult) float64 { return r.mixed }, false)
		sum("mixed ops per CPU-s", func(r rbResult) float64 { return r.mixedCPU }, false)
		sum("mixed lookup p99 us", func(r rbResult) float64 { return float64(r.mp99) / 1e3 }, true)
	}
	st := su.st
	fmt.Printf("memory  %d keys, %d residencies: heap %d B = %.1f B/residency, %.1f B/key; tables %d B = %.1f B/residency (accounted %d B, %.2fx of heap)\n",
		st.Keys, st.Residencies, su.heapBytes, float64(su.heapBytes)/float64(max(st.Residencies, 1)),
		float64(su.heapBytes)/float64(max(st.Keys, 1)), su.footprint, float64(su.footprint)/float64(max(st.Residencies, 1)),
		st.Bytes, float64(st.Bytes)/float64(max(su.heapBytes, 1)))
	if os.Getenv("CTXBENCH_VERBOSE") != "" {
		fmt.Printf("stats   %+v\n", st)
	}
}

// loadAvg is the machine's 1/5/15-minute load average, when known.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// applyAll applies every event, writers owning disjoint worker sets, each
// in trace order (one writer per worker); it returns the block ops applied.
func applyAll(idx *router.Index, su *rbSetup, writers int) int64 {
	var wg sync.WaitGroup
	var total atomic.Int64
	for wr := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			batch := make([]router.Event, 1)
			var ops int64
			for _, e := range su.evs {
				if e.worker%writers != wr {
					continue
				}
				batch[0] = e.ev
				_, _ = idx.Apply(su.names[e.worker], batch)
				ops += int64(len(e.ev.Hashes))
			}
			total.Add(ops)
		}()
	}
	wg.Wait()
	return total.Load()
}

func benchRun(su *rbSetup, measureHeap bool) rbResult {
	var res rbResult
	res.load = loadAvg()
	cfg := router.DefaultConfig()
	cfg.Index.MaxBytes = 0 // measure the index unbounded; eviction is tested apart
	cfg.MaxWorkers = max(su.top, 1)

	// 1. Apply only.
	var before uint64
	if measureHeap {
		before = heapNow()
	}
	rt, err := router.New(cfg, router.Deps{})
	if err != nil {
		panic(err)
	}
	idx, _ := rt.Index("bench", true)
	c0 := cpuTime()
	t0 := time.Now()
	applyAll(idx, su, su.nWriters)
	applyDur := time.Since(t0)
	applyCPU := cpuTime() - c0
	res.apply = float64(su.blockOps) / applyDur.Seconds()
	res.applyCPU = float64(su.blockOps) / applyCPU.Seconds()
	if measureHeap {
		su.heapBytes = int64(heapNow()) - int64(before)
		su.st = idx.Stats()
		su.footprint = idx.Footprint()
	}

	// 2. Lookups only (MatchN, the top deepest workers), on the populated index.
	c0 = cpuTime()
	lookupDur, lat := runReaders(su.queries, su.nReaders, func(q []uint64, buf []router.Match) []router.Match {
		return idx.MatchN(q, su.top, buf[:0])
	})
	lookupCPU := cpuTime() - c0
	res.lookup = float64(len(su.queries)) / lookupDur.Seconds()
	res.lookupCPU = float64(len(su.queries)) / lookupCPU.Seconds()
	res.lp50, res.lp99 = pct(lat, 50), pct(lat, 99)

	// 3. Full routing queries: match, cost of every worker, choice.
	ctx := context.Background()
	routeDur, rlat := runReaders(su.queries, su.nReaders, func(q []uint64, buf []router.Match) []router.Match {
		_, _ = rt.Route(ctx, router.Query{Namespace: "bench", BlockHashes: q})
		return buf
	})
	res.route = float64(len(su.queries)) / routeDur.Seconds()
	res.rp50, res.rp99 = pct(rlat, 50), pct(rlat, 99)

	// 4. Mixed: the same events applied again into a fresh index by one
	// writer while one reader looks up concurrently.
	idx2, _ := router.NewIndex(cfg.Index)
	var mixedEvents int64
	stop := make(chan struct{})
	c0 = cpuTime()
	mixedStart := time.Now()
	var lookups atomic.Int64
	var rw sync.WaitGroup
	var ml []time.Duration
	rw.Add(1)
	go func() {
		defer rw.Done()
		buf := make([]router.Match, 0, 64)
		for i := 0; ; i++ {
			select {
			case <-stop:
				lookups.Add(int64(len(ml)))
				return
			default:
			}
			q := su.queries[i%len(su.queries)]
			t0 := time.Now()
			buf = idx2.MatchN(q, su.top, buf[:0])
			ml = append(ml, time.Since(t0))
		}
	}()
	mixedEvents = applyAll(idx2, su, 1)
	close(stop)
	rw.Wait()
	mixedDur := time.Since(mixedStart)
	mixedCPU := cpuTime() - c0
	slices.Sort(ml)
	res.mixedBlk = float64(mixedEvents) / mixedDur.Seconds()
	res.mixedLook = float64(lookups.Load()) / mixedDur.Seconds()
	res.mixed = res.mixedBlk + res.mixedLook
	res.mixedCPU = float64(mixedEvents+lookups.Load()) / mixedCPU.Seconds()
	res.mp50, res.mp99 = pct(ml, 50), pct(ml, 99)

	// Baseline: the same block operations on one plain Go map, one goroutine.
	base := map[uint64]uint32{}
	baseStart := time.Now()
	for _, e := range su.evs {
		for _, h := range e.ev.Hashes {
			if e.ev.Kind == router.Stored {
				base[h] = uint32(e.worker)
			} else {
				delete(base, h)
			}
		}
	}
	res.base = float64(su.blockOps) / time.Since(baseStart).Seconds()
	runtime.KeepAlive(idx)
	runtime.KeepAlive(idx2)
	return res
}

// runReaders runs fn for every query across readers and returns the wall
// time and the sorted per-call latencies.
func runReaders(queries [][]uint64, readers int, fn func(q []uint64, buf []router.Match) []router.Match) (time.Duration, []time.Duration) {
	lats := make([][]time.Duration, readers)
	start := time.Now()
	var wg sync.WaitGroup
	for rd := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]router.Match, 0, 64)
			lat := make([]time.Duration, 0, len(queries)/readers+1)
			for i := rd; i < len(queries); i += readers {
				t0 := time.Now()
				buf = fn(queries[i], buf)
				lat = append(lat, time.Since(t0))
			}
			lats[rd] = lat
		}()
	}
	wg.Wait()
	d := time.Since(start)
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	slices.Sort(all)
	return d, all
}

func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

func avgLen(qs [][]uint64) float64 {
	n := 0
	for _, q := range qs {
		n += len(q)
	}
	return float64(n) / float64(max(len(qs), 1))
}
