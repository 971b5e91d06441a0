package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"time"
)

// nodeProfiler takes CPU profiles of the nodes a `cluster --start` run
// started with --pprof-listen (and of ctxbench itself) over the same
// window: `--profile DIR` takes them during the batched index run, so the
// profiles show where a node's time goes per block entry. It also saves
// each node's allocation profile (cumulative since the node started) at
// the window's start and end, so that `go tool pprof -base
// DIR/<node>.allocs0.pprof DIR/<node>.allocs.pprof` shows what the node
// allocated in the window.
type nodeProfiler struct {
	dir     string
	seconds int
	// ids and addrs are the nodes' ids and pprof addresses.
	ids, addrs []string
}

// start begins the profiles; the returned function waits for them and
// writes DIR/<node>.pprof, DIR/<node>.allocs0.pprof, DIR/<node>.allocs.pprof
// and DIR/ctxbench.pprof. A nil profiler does nothing.
func (p *nodeProfiler) start(ctx context.Context, progress io.Writer) (wait func() error) {
	if p == nil {
		return func() error { return nil }
	}
	errs := make([]error, len(p.addrs)+1)
	var wg sync.WaitGroup
	for i, a := range p.addrs {
		wg.Go(func() {
			base := filepath.Join(p.dir, p.ids[i])
			err := fetchProfile(ctx, a, "allocs", base+".allocs0.pprof")
			if err == nil {
				err = fetchProfile(ctx, a, fmt.Sprintf("profile?seconds=%d", p.seconds), base+".pprof")
			}
			if err == nil {
				err = fetchProfile(ctx, a, "allocs", base+".allocs.pprof")
			}
			errs[i] = err
		})
	}
	self, err := os.Create(filepath.Join(p.dir, "ctxbench.pprof"))
	if err == nil {
		if err = pprof.StartCPUProfile(self); err != nil {
			self.Close()
		}
	}
	if err != nil {
		errs[len(p.addrs)] = fmt.Errorf("ctxbench's own profile: %w", err)
	} else {
		wg.Go(func() {
			select {
			case <-time.After(time.Duration(p.seconds) * time.Second):
			case <-ctx.Done():
			}
			pprof.StopCPUProfile()
			errs[len(p.addrs)] = self.Close()
		})
	}
	fmt.Fprintf(progress, "profiling %d nodes and ctxbench for %d s into %s\n", len(p.addrs), p.seconds, p.dir)
	return func() error {
		wg.Wait()
		return errors.Join(errs...)
	}
}

// fetchProfile saves addr's /debug/pprof/<which> (a profile's name and
// query, such as "profile?seconds=5" or "allocs") to path.
func fetchProfile(ctx context.Context, addr, which, path string) error {
	url := fmt.Sprintf("http://%s/debug/pprof/%s", addr, which)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profile of %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("profile of %s: %s: %s", addr, resp.Status, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("profile of %s: %w", addr, err)
	}
	return f.Close()
}
