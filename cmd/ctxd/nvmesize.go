package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/ctxtier/ctxtier/tiers/nvme"
)

// nvmeOff is the --nvme-dir value that disables the NVMe tier.
const nvmeOff = "off"

// Automatic NVMe sizing (--nvme-capacity 0, the default): half of what the
// filesystem has free, at most autoNVMeMax.
const autoNVMeMax = 16 << 30

// nvmeEnabled reports whether the node runs an NVMe tier.
func (c Config) nvmeEnabled() bool { return c.NVMeDir != nvmeOff }

// resolveNVMe settles the NVMe tier's directory (default DATA_DIR/nvme)
// and, when --nvme-capacity is 0, its capacity: min(16GiB, half the free
// space of the directory's filesystem), with segments small enough that
// the tier holds at least 8 of them. When the filesystem has too little
// free for even three segments of a max-size block, the tier is turned off
// (and the log says so) rather than failing to start. free (nil: statfs)
// reports the free bytes of a directory.
func resolveNVMe(cfg Config, free func(dir string) (int64, error), log *slog.Logger) (Config, error) {
	if !cfg.nvmeEnabled() {
		return cfg, nil
	}
	if cfg.NVMeDir == "" {
		cfg.NVMeDir = filepath.Join(cfg.DataDir, "nvme")
	}
	if cfg.NVMeCapacity != 0 {
		return cfg, nil
	}
	if free == nil {
		free = statfsFree
	}
	if err := os.MkdirAll(cfg.NVMeDir, 0o750); err != nil {
		return cfg, fmt.Errorf("nvme-dir: %w", err)
	}
	avail, err := free(cfg.NVMeDir)
	if err != nil {
		return cfg, fmt.Errorf("nvme-dir: sizing the tier: %w", err)
	}
	capacity := min(int64(autoNVMeMax), avail/2)
	seg := cfg.NVMeSegment
	// Keep at least 8 segments, but a segment must hold a max-size block.
	minSeg := (cfg.MaxBlockSize + 2*nvme.Align + nvme.Align - 1) &^ (nvme.Align - 1)
	if capacity/8 < seg {
		seg = max(minSeg, (capacity/8)&^(nvme.Align-1))
	}
	capacity &^= nvme.Align - 1
	if capacity < 3*seg {
		log.Warn("the NVMe tier is off: its filesystem has too little free space (set --nvme-capacity, or --nvme-dir off to silence this)",
			"nvme_dir", cfg.NVMeDir, "free", avail, "needed", 6*seg, "note", "the tier needs at least 3 segments and takes at most half the free space")
		cfg.NVMeDir = nvmeOff
		return cfg, nil
	}
	cfg.NVMeCapacity, cfg.NVMeSegment = capacity, seg
	log.Info("nvme tier sized from the free space of its filesystem: min(16GiB, half the free space)",
		"nvme_dir", cfg.NVMeDir, "capacity", capacity, "segment_size", seg, "free", avail)
	return cfg, nil
}

// statfsFree returns the bytes an unprivileged writer may use on dir's
// filesystem.
func statfsFree(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil //nolint:unconvert // Statfs_t field types differ between platforms
}
