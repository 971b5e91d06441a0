package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/router"
	"github.com/ctxtier/ctxtier/ctxstore/trace"
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
	if *capacity <= 0 || *rounds <= 0 || *writers <= 0 || *readers <= 0 {
		return errors.New("--capacity, --rounds, --writers and --readers must be positive")
	}
	paths := []string{*tracePath}
	if *tracePath == "" {
		m, _ := filepath.Glob(filepath.Join("..", "shared", "traces", "*.jsonl"))
		if len(m) == 0 {
			return errors.New("no --trace given and no traces in ../shared/traces")
		}
		paths = m
	}
	fmt.Printf("router-bench: GOMAXPROCS=%d writers=%d readers=%d capacity=%d rounds=%d\n",
		runtime.GOMAXPROCS(0), *writers, *readers, *capacity, *rounds)
	for _, p := range paths {
		reqs, err := trace.ReadFile(p)
		if err != nil {
			return err
		}
		for _, w := range counts {
			if err := ctx.Err(); err != nil {
				return err
			}
			benchOne(filepath.Base(p), reqs, w, *capacity, *rounds, *writers, *readers)
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

func benchOne(name string, reqs []trace.Request, workers, capacity, rounds, nWriters, nReaders int) {
	evs, queries, blockOps := generate(reqs, workers, capacity, rounds)
	names := make([]string, workers)
	for i := range names {
		names[i] = fmt.Sprintf("worker-%04d", i)
	}
	cfg := router.DefaultIndexConfig()
	cfg.MaxBytes = 0 // measure the index unbounded; eviction is tested apart

	// 1. Apply only: writers own disjoint worker sets, each applies its
	// workers' events in trace order (one writer per worker).
	before := heapNow()
	idx, _ := router.NewIndex(cfg)
	applyStart := time.Now()
	var wg sync.WaitGroup
	for wr := range nWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			batch := make([]router.Event, 1)
			for _, e := range evs {
				if e.worker%nWriters != wr {
					continue
				}
				batch[0] = e.ev
				_, _ = idx.Apply(names[e.worker], batch)
			}
		}()
	}
	wg.Wait()
	applyDur := time.Since(applyStart)
	after := heapNow()
	st := idx.Stats()
	heap := int64(after) - int64(before)

	// 2. Lookups only, on the populated index.
	lookupDur, lat := runLookups(idx, queries, nReaders, nil)

	// 3. Mixed: the same events applied again into a fresh index while
	// readers look up concurrently.
	idx2, _ := router.NewIndex(cfg)
	var mixedEvents atomic.Int64
	stop := make(chan struct{})
	mixedStart := time.Now()
	var mw sync.WaitGroup
	nw := max(1, nWriters/2)
	for wr := range nw {
		mw.Add(1)
		go func() {
			defer mw.Done()
			batch := make([]router.Event, 1)
			var ops int64
			for _, e := range evs {
				if e.worker%nw != wr {
					continue
				}
				batch[0] = e.ev
				_, _ = idx2.Apply(names[e.worker], batch)
				ops += int64(len(e.ev.Hashes))
			}
			mixedEvents.Add(ops)
		}()
	}
	var lookups atomic.Int64
	var rw sync.WaitGroup
	mixedLat := make([][]time.Duration, max(1, nReaders/2))
	for rd := range mixedLat {
		rw.Add(1)
		go func() {
			defer rw.Done()
			buf := make([]router.Match, 0, 64)
			var lat []time.Duration
			for i := rd; ; i += len(mixedLat) {
				select {
				case <-stop:
					mixedLat[rd] = lat
					lookups.Add(int64(len(lat)))
					return
				default:
				}
				q := queries[i%len(queries)]
				t0 := time.Now()
				buf = idx2.Match(q, buf[:0])
				lat = append(lat, time.Since(t0))
			}
		}()
	}
	mw.Wait()
	close(stop)
	rw.Wait()
	mixedDur := time.Since(mixedStart)
	var ml []time.Duration
	for _, l := range mixedLat {
		ml = append(ml, l...)
	}
	slices.Sort(ml)

	// Baseline: the same block operations on one plain Go map, one goroutine.
	base := map[uint64]uint32{}
	baseStart := time.Now()
	for _, e := range evs {
		for _, h := range e.ev.Hashes {
			if e.ev.Kind == router.Stored {
				base[h] = uint32(e.worker)
			} else {
				delete(base, h)
			}
		}
	}
	baseDur := time.Since(baseStart)

	applyOps := float64(blockOps) / applyDur.Seconds()
	baseOps := float64(blockOps) / baseDur.Seconds()
	fmt.Printf("\n== %s, %d workers: %d requests x %d rounds, %d events, %d block ops, %d lookups\n",
		name, workers, len(reqs), rounds, len(evs), blockOps, len(queries))
	fmt.Printf("apply   %10.0f block ops/s  (%d writers; plain-map baseline %.0f ops/s, ratio %.2f)\n",
		applyOps, nWriters, baseOps, applyOps/baseOps)
	fmt.Printf("lookup  %10.0f lookups/s    (%d readers) p50 %v p99 %v max %v, avg %.1f blocks/query\n",
		float64(len(queries))/lookupDur.Seconds(), nReaders, pct(lat, 50), pct(lat, 99), lat[len(lat)-1], avgLen(queries))
	mixedOps := float64(mixedEvents.Load()+lookups.Load()) / mixedDur.Seconds()
	fmt.Printf("mixed   %10.0f ops/s        (%d writers + %d readers: %.0f block ops/s + %.0f lookups/s) lookup p50 %v p99 %v\n",
		mixedOps, nw, len(mixedLat), float64(mixedEvents.Load())/mixedDur.Seconds(),
		float64(lookups.Load())/mixedDur.Seconds(), pct(ml, 50), pct(ml, 99))
	fmt.Printf("memory  %d keys, %d residencies: heap %d B = %.1f B/residency, %.1f B/key (accounted %d B, %.2fx of heap)\n",
		st.Keys, st.Residencies, heap, float64(heap)/float64(max(st.Residencies, 1)),
		float64(heap)/float64(max(st.Keys, 1)), st.Bytes, float64(st.Bytes)/float64(max(heap, 1)))
	runtime.KeepAlive(idx)
	runtime.KeepAlive(idx2)
	if os.Getenv("CTXBENCH_VERBOSE") != "" {
		fmt.Printf("stats   %+v\n", st)
	}
}

// runLookups matches every query across readers and returns the wall time
// and the sorted per-lookup latencies.
func runLookups(idx *router.Index, queries [][]uint64, readers int, _ any) (time.Duration, []time.Duration) {
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
				buf = idx.Match(queries[i], buf[:0])
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
