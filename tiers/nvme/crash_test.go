package nvme

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

const (
	crashDirEnv  = "CTXTIER_NVME_CRASH_DIR"
	crashSeedEnv = "CTXTIER_NVME_CRASH_SEED"
	crashCapEnv  = "CTXTIER_NVME_CRASH_CAPACITY"
)

func crashSize(h uint64) int { return 1 + int((h*0x9E3779B97F4A7C15>>40)%70000) }

// TestCrashChild is the helper process of TestCrashRecovery: it writes (and
// reads, and deletes) blocks from several goroutines until it is killed,
// printing "ACK <hash>" after every put that returned success and
// "DEL <hash>" before every delete it attempts.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("helper process for TestCrashRecovery")
	}
	seed, _ := strconv.ParseUint(os.Getenv(crashSeedEnv), 10, 64)
	capacity, _ := strconv.ParseInt(os.Getenv(crashCapEnv), 10, 64)
	cfg := testConfig(dir)
	cfg.Capacity = capacity
	tr, err := New(cfg, quiet)
	if err != nil {
		fmt.Printf("ERR %v\n", err)
		os.Exit(3)
	}
	var out sync.Mutex
	say := func(s string) {
		out.Lock()
		os.Stdout.WriteString(s) // one write per line, so a kill never splits one
		out.Unlock()
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			for i := 0; ; i++ {
				h := r.Uint64()
				switch {
				case w == 3 && i%4 == 0: // a reader, so that reclamation also relocates
					if ref, err := tr.Get(ctx, key(h%512+seed<<32), block.GetOptions{}); err == nil {
						ref.Release()
					}
					continue
				case w == 3 && i%4 == 1:
					victim := h%512 + seed<<32
					say(fmt.Sprintf("DEL %x\n", victim))
					_ = tr.Delete(ctx, key(victim))
					continue
				}
				h = h%512 + seed<<32
				d := payload(h, crashSize(h))
				if err := tr.Put(ctx, key(h), d, block.Checksum(d), block.PutOptions{}); err != nil {
					say(fmt.Sprintf("ERR %v\n", err))
					os.Exit(3)
				}
				say(fmt.Sprintf("ACK %x\n", h))
			}
		}()
	}
	wg.Wait()
}

// TestCrashRecovery SIGKILLs a writing child process at random points,
// reopens the tier, and checks that every block acknowledged (and not
// deleted since) reads back with the right bytes, and that every block the
// index holds reads back right: nothing wrong is ever served.
func TestCrashRecovery(t *testing.T) {
	cases := []struct {
		name     string
		capacity int64
		rounds   int
		keep     bool // capacity is large enough that no acked block is evicted
	}{
		{"no eviction", 64 << 20, 4, true},
		{"with reclamation", 4 << 20, 3, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
			acked, deleted := map[uint64]bool{}, map[uint64]bool{}
			for round := range tc.rounds {
				killAfter := 10 + r.IntN(150)
				a, d := runCrashChild(t, dir, uint64(round+1), tc.capacity, killAfter)
				for h := range a {
					acked[h] = true
				}
				for h := range d {
					deleted[h] = true
				}
				cfg := testConfig(dir)
				cfg.Capacity = tc.capacity
				tr := open(t, cfg)
				rep := tr.Recovery()
				t.Logf("round %d: killed after %d acks (%d distinct); recovery %+v", round, killAfter, len(a), rep)
				ctx := context.Background()
				for h := range acked {
					ref, err := tr.Get(ctx, key(h), block.GetOptions{})
					if err != nil {
						if tc.keep && !deleted[h] {
							t.Errorf("acked block %x lost: %v", h, err)
						}
						continue
					}
					if !bytes.Equal(ref.Data, payload(h, crashSize(h))) {
						t.Errorf("block %x: wrong bytes served", h)
					}
					ref.Release()
				}
				infos, err := tr.List(ctx, "ns", "", "", 0)
				if err != nil {
					t.Fatal(err)
				}
				for _, in := range infos {
					ref, err := tr.Get(ctx, in.Key, block.GetOptions{})
					if err != nil {
						t.Errorf("indexed block %s unreadable: %v", in.Key, err)
						continue
					}
					if !bytes.Equal(ref.Data, payload(in.Key.Hash, crashSize(in.Key.Hash))) {
						t.Errorf("block %s: wrong bytes served", in.Key)
					}
					ref.Release()
				}
				if s := tr.Stats(); s.Corruptions != 0 || s.UsedBytes > tc.capacity {
					t.Errorf("after recovery: %+v", s)
				}
				if err := tr.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if len(acked) == 0 {
				t.Fatal("no block was ever acknowledged")
			}
		})
	}
}

// runCrashChild runs TestCrashChild on dir and SIGKILLs it once it has
// acknowledged killAfter puts. It returns the acknowledged hashes and the
// hashes a delete was attempted on.
func runCrashChild(t *testing.T, dir string, seed uint64, capacity int64, killAfter int) (acked, deleted map[uint64]bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashSeedEnv+"="+strconv.FormatUint(seed, 10),
		crashCapEnv+"="+strconv.FormatInt(capacity, 10))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	defer timer.Stop()
	acked, deleted = map[uint64]bool{}, map[uint64]bool{}
	n := 0
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) != 2 || (f[0] != "ACK" && f[0] != "DEL") {
			if strings.HasPrefix(line, "ERR") {
				t.Errorf("child: %s", line)
			}
			continue
		}
		h, err := strconv.ParseUint(f[1], 16, 64)
		if err != nil {
			t.Fatalf("child printed %q", line)
		}
		if f[0] == "DEL" {
			deleted[h] = true
			continue
		}
		acked[h] = true
		if n++; n == killAfter {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die by SIGKILL (after %d acks): %v\n%s", n, err, stderr.String())
	}
	return acked, deleted
}
