package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/internal/testdep"

	"golang.org/x/sys/unix"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/client"
)

// mountTmpfs mounts a tmpfs of size (mount's syntax, "64m") on a fresh
// directory and unmounts it when the test ends. It needs root; without it
// the test is skipped, except in CI (CI=true), where it fails.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput()
	if err != nil {
		msg := fmt.Sprintf("cannot mount a tmpfs (needs root): %v %s", err, out)
		testdep.Missing(t, "a tmpfs mount (root)", msg, "make test-deps (docs/testing.md)")
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

func fsFreeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize) //nolint:unconvert // Statfs_t field types differ between platforms
}

// TestFullDiskProcess (issue 18 item 6): the NVMe tier on a 64 MiB tmpfs
// with a 16 GiB capacity. Puts succeed or answer NoSpace (507), never
// Unavailable; reads return the right bytes or a miss; the tier keeps free
// space on the filesystem for its index; when something else fills the
// disk, ctxd keeps serving; and after a SIGKILL it restarts on the full
// disk and serves the blocks NVMe holds. (ctxd before this fix died of
// SIGBUS in the badger index on every restart.)
func TestFullDiskProcess(t *testing.T) {
	nvmeDir := mountTmpfs(t, "64m")
	dataDir := t.TempDir()
	args := []string{"--data-dir", dataDir, "--nvme-dir", nvmeDir, "--nvme-capacity", "16GiB",
		"--dram-capacity", "16MiB", "--max-block-size", "1MiB", "--nvme-segment-size", "8MiB"}
	p := startCtxd(t, args...)
	ctx := withTimeout(t, 120*time.Second)
	hc := httpClient(t, p.HTTP)
	const size = 512 << 10
	var acked []int
	noSpace := 0
	readAll := func(c *client.HTTPClient, when string) (hits int) {
		t.Helper()
		for _, i := range acked {
			got, err := c.Get(ctx, block.NewKey("default", uint64(i)))
			switch {
			case err == nil && bytes.Equal(got, blockBytes(i, size)):
				hits++
			case err == nil:
				t.Fatalf("%s: block %d: wrong bytes", when, i)
			case !errors.Is(err, block.ErrNotFound):
				t.Fatalf("%s: get %d: %v", when, i, err)
			}
		}
		return hits
	}
	put := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			err := hc.Put(ctx, block.NewKey("default", uint64(i)), blockBytes(i, size), block.PutOptions{})
			switch {
			case err == nil:
				acked = append(acked, i)
			case errors.Is(err, block.ErrNoSpace):
				noSpace++
			default:
				t.Fatalf("put %d: %v (want success or NoSpace)", i, err)
			}
		}
	}
	for round := range 4 { // 200 MiB through 16 MiB of DRAM and 64 MiB of disk
		put(round*100, (round+1)*100)
		readAll(hc, fmt.Sprintf("round %d", round))
	}
	free := fsFreeBytes(t, nvmeDir)
	t.Logf("after %d acknowledged puts (%d NoSpace): %d bytes free on the 64 MiB tmpfs", len(acked), noSpace, free)
	if free < 8<<20 {
		t.Errorf("the tier left %d bytes free, want at least its floor (16 MiB)", free)
	}

	// Something else fills the disk: ctxd keeps serving.
	fillFS(t, nvmeDir)
	put(1000, 1100)
	hits := readAll(hc, "full disk")
	t.Logf("disk full: %d of %d acknowledged blocks served", hits, len(acked))
	select {
	case <-p.exited:
		t.Fatalf("ctxd died on a full disk: %v", p.exitErr)
	default:
	}

	// SIGKILL and restart on the full disk: it serves what NVMe holds.
	p.Kill()
	p = startCtxd(t, args...)
	hc = httpClient(t, p.HTTP)
	hits = readAll(hc, "after restart")
	t.Logf("after a restart on the full disk: %d of %d acknowledged blocks served from NVMe", hits, len(acked))
	if hits == 0 {
		t.Error("the restarted node served nothing from NVMe")
	}
	put(2000, 2050)
	select {
	case <-p.exited:
		t.Fatalf("ctxd died after the restart: %v", p.exitErr)
	default:
	}
}

// fillFS writes dir/filler until the filesystem answers ENOSPC: something
// other than ctxd takes the rest of the disk.
func fillFS(t *testing.T, dir string) {
	t.Helper()
	filler, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer filler.Close()
	chunk := make([]byte, 1<<20)
	for {
		if _, err := filler.Write(chunk); err != nil {
			return // ENOSPC
		}
	}
}
