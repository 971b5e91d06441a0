package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/client"
)

func blockBytes(i, size int) []byte {
	b := make([]byte, size)
	r := rand.New(rand.NewPCG(uint64(i), 17))
	for j := 0; j+8 <= len(b); j += 8 {
		binary.LittleEndian.PutUint64(b[j:], r.Uint64())
	}
	return b
}

func nvmeArgs(dir string) []string {
	return []string{"--dram-capacity", "8MiB", "--max-block-size", "4MiB", "--nvme-dir", dir, "--nvme-capacity", "256MiB", "--nvme-segment-size", "16MiB"}
}

// TestNVMeWriteBackAndRestart puts four times DRAM's capacity, reads every
// block back (the evicted ones from NVMe), restarts ctxd and reads them again.
func TestNVMeWriteBackAndRestart(t *testing.T) {
	dataDir := t.TempDir()
	nvmeDir := filepath.Join(dataDir, "nvme")
	const n, size = 32, 1 << 20
	args := append([]string{"--data-dir", dataDir}, nvmeArgs(nvmeDir)...)
	p := startCtxd(t, args...)
	ctx := withTimeout(t, 2*time.Minute)
	c, err := client.Dial(ctx, p.Native, client.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := c.Put(ctx, block.NewKey("default", uint64(i)), blockBytes(i, size)); err != nil {
			t.Fatal(err)
		}
	}
	check := func(c *client.Client, when string) {
		t.Helper()
		for i := range n {
			got, err := c.Get(ctx, block.NewKey("default", uint64(i)))
			if err != nil {
				t.Fatalf("%s: block %d: %v", when, i, err)
			}
			if !bytes.Equal(got, blockBytes(i, size)) {
				t.Fatalf("%s: block %d: wrong bytes", when, i)
			}
		}
	}
	check(c, "before restart")
	if v := metricValue(t, p.HTTP, "ctxtier_tiers_demotions_total"); v == 0 {
		t.Fatal("nothing was demoted to NVMe")
	}
	c.Close()
	// DRAM is lost on restart; what was demoted survives. Demote the rest by
	// pushing more blocks through, so every original block is on NVMe.
	c2, _ := client.Dial(ctx, p.Native, client.DefaultOptions())
	for i := n; i < n+16; i++ {
		if err := c2.Put(ctx, block.NewKey("default", uint64(i)), blockBytes(i, size)); err != nil {
			t.Fatal(err)
		}
	}
	c2.Close()
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	p2 := startCtxd(t, args...)
	c3, err := client.Dial(ctx, p2.Native, client.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	check(c3, "after restart")
}

// TestCrashRecoveryKill9 SIGKILLs ctxd during heavy write-through puts at
// several points, restarts it, and reads back every acknowledged block: each
// must come back with the right bytes (a write-through put is acknowledged
// only once NVMe holds it). Nothing wrong may ever be served.
func TestCrashRecoveryKill9(t *testing.T) {
	dataDir := t.TempDir()
	nvmeDir := filepath.Join(dataDir, "nvme")
	args := append([]string{"--data-dir", dataDir}, nvmeArgs(nvmeDir)...)
	ctx := withTimeout(t, 3*time.Minute)
	acked := map[uint64]int{} // key hash → payload seed
	next := 0
	r := rand.New(rand.NewPCG(5, 5))
	const rounds = 4
	for round := range rounds + 1 { // the last round only verifies
		p := startCtxd(t, args...)
		c, err := client.Dial(ctx, p.Native, client.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			hcfg := client.HTTPDefaultConfig()
			hcfg.BaseURL = "http://" + p.HTTP
			hc, err := client.NewHTTP(hcfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := hc.CreateNamespace(ctx, block.Namespace{Name: "wt", WriteMode: block.WriteThrough}); err != nil {
				t.Fatal(err)
			}
		}
		// Every block acknowledged in earlier rounds reads back intact.
		for h, seed := range acked {
			got, err := c.Get(ctx, block.NewKey("wt", h))
			if err != nil {
				t.Fatalf("round %d: acknowledged block %x lost: %v", round, h, err)
			}
			if !bytes.Equal(got, blockBytes(seed, len(got))) || len(got) != 64<<10+seed%4096 {
				t.Fatalf("round %d: block %x served with wrong bytes", round, h)
			}
		}
		if round == rounds {
			p.Stop(30 * time.Second)
			c.Close()
			break
		}
		// Heavy concurrent writes, killed at a random moment.
		var mu sync.Mutex
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					mu.Lock()
					seed := next
					next++
					mu.Unlock()
					h := uint64(seed)*0x9e3779b97f4a7c15 + uint64(w)
					err := c.Put(ctx, block.NewKey("wt", h), blockBytes(seed, 64<<10+seed%4096))
					if err == nil {
						mu.Lock()
						acked[h] = seed
						mu.Unlock()
					} else if !errors.Is(err, block.ErrUnavailable) && !errors.Is(err, block.ErrClosed) {
						t.Errorf("put: %v", err)
						return
					}
				}
			}()
		}
		time.Sleep(time.Duration(300+r.IntN(900)) * time.Millisecond)
		p.Kill()
		close(stop)
		wg.Wait()
		c.Close()
		t.Logf("round %d: killed after %d acknowledged puts in total", round, len(acked))
	}
	if len(acked) < 20 {
		t.Fatalf("only %d puts acknowledged: the test did not write enough", len(acked))
	}
}
