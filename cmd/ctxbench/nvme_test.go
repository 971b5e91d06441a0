package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/internal/testdep"
	"github.com/ctxtier/ctxtier/tiers/nvme"
)

// TestReadChunkedReadsTheSameBytes: the chunked raw read returns exactly
// what one pread returns, for extents below and above the chunking size.
func TestReadChunkedReadsTheSameBytes(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "raw"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data := make([]byte, 3*nvme.ReadChunk+4096)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ off, n int }{
		{0, 4096}, {4096, nvme.ChunkedReadMin - 4096}, {0, nvme.ChunkedReadMin}, {4096, 3 * nvme.ReadChunk}, {0, len(data)},
	} {
		buf := make([]byte, tc.n)
		if err := readChunked(f, buf, int64(tc.off)); err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		if !bytes.Equal(buf, data[tc.off:tc.off+tc.n]) {
			t.Fatalf("%+v: chunked read returned other bytes", tc)
		}
	}
	if err := readChunked(f, make([]byte, nvme.ChunkedReadMin), int64(len(data))); !errors.Is(err, io.EOF) {
		t.Fatalf("read past the end: %v, want EOF", err)
	}
}

// TestNVMeBaselineRefusesMemoryFileSystems: on tmpfs no ratio is reported.
func TestNVMeBaselineRefusesMemoryFileSystems(t *testing.T) {
	var st unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &st); err != nil || st.Type != unix.TMPFS_MAGIC {
		testdep.Missing(t, "tmpfs at /dev/shm", "statfs /dev/shm", "mount a tmpfs at /dev/shm")
	}
	dir, err := os.MkdirTemp("/dev/shm", "ctxbench-nvme-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	err = runNVMeBaseline(context.Background(), []string{"--dir", dir, "--block-size", "1MiB", "--total", "4MiB", "--rounds", "1"})
	if !errors.Is(err, block.ErrInvalidArgument) || !strings.Contains(err.Error(), "memory file system") {
		t.Fatalf("tmpfs: %v, want a refusal", err)
	}
	disk := t.TempDir()
	var dst unix.Statfs_t
	if err := unix.Statfs(disk, &dst); err != nil {
		t.Fatal(err)
	}
	if err := diskBacked(disk); (err == nil) != (dst.Type != unix.TMPFS_MAGIC && dst.Type != unix.RAMFS_MAGIC) {
		t.Fatalf("diskBacked(%s) = %v for file system type %#x", disk, err, dst.Type)
	}
}

// TestNVMeBaselineReportsBothRawReads runs the benchmark small and checks
// that it prints both raw read configurations, alternates the order, and
// reports the ratios.
func TestNVMeBaselineReportsBothRawReads(t *testing.T) {
	dir := t.TempDir()
	if err := diskBacked(dir); err != nil {
		testdep.Missing(t, "a disk-backed TMPDIR", err.Error(), "set TMPDIR to a directory on ext4 or xfs")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	outc := make(chan []byte)
	go func() { b, _ := io.ReadAll(r); outc <- b }()
	err = runNVMeBaseline(context.Background(), []string{"--dir", dir, "--block-size", "2MiB", "--total", "16MiB",
		"--segment-size", "16MiB", "--rounds", "2"})
	os.Stdout = stdout
	w.Close()
	out := <-outc
	if err != nil {
		t.Fatalf("nvme-baseline: %v\n%s", err, out)
	}
	for _, want := range []string{"round 0 (raw first)", "round 1 (tier first)", "raw_read_single=", "raw_read_chunked=",
		"ratio_vs_raw_direct=", "ratio_vs_raw_single_pread=", "ratio_vs_raw_chunked="} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
