package main

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"
)

func TestResolveNVMe(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	const gib = int64(1) << 30
	for _, tc := range []struct {
		name           string
		dir            string
		capacity, free int64
		wantDir        string // "" : DATA_DIR/nvme
		wantCap        int64
		wantSeg        int64
	}{
		{name: "plenty free: 16GiB cap", free: 100 * gib, wantCap: 16 * gib, wantSeg: 256 << 20},
		{name: "half the free space", free: 10 * gib, wantCap: 5 * gib, wantSeg: 256 << 20},
		{name: "small disk: smaller segments", free: 1 * gib, wantCap: gib / 2, wantSeg: (64 << 20) + 3*4096 - 4096},
		{name: "too little: off", free: 100 << 20, wantDir: nvmeOff},
		{name: "explicit capacity kept", capacity: 3 * gib, free: 1 << 20, wantCap: 3 * gib, wantSeg: 256 << 20},
		{name: "explicit dir", dir: "/elsewhere", capacity: 3 * gib, wantDir: "/elsewhere", wantCap: 3 * gib, wantSeg: 256 << 20},
		{name: "off stays off", dir: nvmeOff, wantDir: nvmeOff},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.DataDir = t.TempDir()
			cfg.NVMeDir, cfg.NVMeCapacity = tc.dir, tc.capacity
			got, err := resolveNVMe(cfg, func(string) (int64, error) { return tc.free, nil }, quiet)
			if err != nil {
				t.Fatal(err)
			}
			wantDir := tc.wantDir
			if wantDir == "" {
				wantDir = filepath.Join(cfg.DataDir, "nvme")
			}
			if got.NVMeDir != wantDir {
				t.Fatalf("dir %q, want %q", got.NVMeDir, wantDir)
			}
			if wantDir == nvmeOff {
				if got.nvmeEnabled() {
					t.Fatal("enabled")
				}
				return
			}
			if got.NVMeCapacity != tc.wantCap || got.NVMeSegment != tc.wantSeg {
				t.Fatalf("capacity %d segment %d, want %d %d", got.NVMeCapacity, got.NVMeSegment, tc.wantCap, tc.wantSeg)
			}
			if got.NVMeCapacity < 3*got.NVMeSegment || got.NVMeSegment < got.MaxBlockSize {
				t.Fatalf("capacity %d cannot hold 3 segments of %d for %d-byte blocks", got.NVMeCapacity, got.NVMeSegment, got.MaxBlockSize)
			}
		})
	}
}
