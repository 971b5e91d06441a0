package main

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/client"
)

// TestCtxdSendfile runs a real ctxd with --sendfile and a DRAM tier 16x
// smaller than what is put through it, so blocks sent from the arena's
// memory file are evicted and their pages reused by later puts while GETs
// keep coming. Every GET must return the bytes put (the client checks the
// CRC-32C recorded at put on each), and the server must never have had to
// re-read a block because the client's check failed (its warning log line):
// freed pages that were sent by reference are punched out, not rewritten.
// With --dram-hugepages too, where the kernel gives shared memory huge
// pages, those punches split huge pages under sockets still sending them.
func TestCtxdSendfile(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"4KiB pages", nil},
		{"huge pages", []string{"--dram-hugepages"}},
	} {
		t.Run(tc.name, func(t *testing.T) { testCtxdSendfile(t, tc.args...) })
	}
}

func testCtxdSendfile(t *testing.T, extra ...string) {
	p := startCtxd(t, append([]string{"--dram-capacity", "16MiB", "--sendfile"}, extra...)...)
	// 256 puts and up to 768 GETs of 1 MiB: a few seconds on a quiet
	// machine; the bound only stops a hung server, on a loaded one too.
	ctx := withTimeout(t, 5*time.Minute)
	c, err := client.Dial(ctx, p.Native, client.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	blockOf := func(i int) []byte {
		return bytes.Repeat([]byte(fmt.Sprintf("block %06d ", i)), (1<<20)/13)
	}
	const n = 256 // 256 MiB through a 16 MiB arena
	for i := range n {
		k := block.NewKey("default", uint64(1000+i))
		if err := c.Put(ctx, k, blockOf(i)); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		for _, j := range []int{i, i - 4, i - 12} {
			if j < 0 {
				continue
			}
			got, err := c.Get(ctx, block.NewKey("default", uint64(1000+j)))
			if errors.Is(err, block.ErrNotFound) && j != i {
				continue // evicted, and not kept by a lower tier
			}
			if err != nil || !bytes.Equal(got, blockOf(j)) {
				t.Fatalf("get %d after put %d: %d bytes, %v", j, i, len(got), err)
			}
		}
	}
	if err := p.Stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	if log := p.Log(); strings.Contains(log, "re-read with at-rest verification") || strings.Contains(log, "punch out pages") {
		t.Fatalf("the server saw a failed end-to-end check or a failed punch:\n%s", log)
	}
	if len(extra) > 0 {
		log := p.Log()
		if !strings.Contains(log, "huge pages advised") && !strings.Contains(log, "does not allow them") {
			t.Fatalf("--dram-hugepages: the log says neither that huge pages were advised nor why not:\n%s", log)
		}
		t.Logf("huge pages advised: %v", strings.Contains(log, "huge pages advised"))
	}
}
