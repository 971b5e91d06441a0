package nvme

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// The tier shares its filesystem with its own badger index and with
// whatever else lives there. Badger writes its memtables and tables through
// memory maps of sparse files: when the filesystem fills, a store to such a
// page is a SIGBUS, which kills the process (and kills it again on every
// restart that replays into a full disk). So the tier keeps the
// filesystem's free space above Config.MinFree: a reservation may use only
// what lies above that floor (reclaiming segments to get there, as when the
// tier is at its capacity), reads stop recording accesses in the index
// while the floor is crossed, and a write the kernel refuses with ENOSPC is
// block.ErrNoSpace.

// statfsEvery bounds how often lowSpace asks the filesystem.
const statfsEvery = 100 * time.Millisecond

// minFree is the floor in force: Config.MinFree, or room for the index's
// memtables, one flush and one compaction output.
func (c Config) minFree() int64 {
	if c.MinFree > 0 {
		return c.MinFree
	}
	return c.Index.MemTableSize * int64(c.Index.NumMemtables+2)
}

// fsFree returns the bytes an unprivileged writer may still use on the
// filesystem of dir.
func fsFree(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("nvme: statfs %s: %w", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// fsLimit is the most segment bytes the filesystem allows the tier now:
// what it uses plus what is free above the floor. ok is false when the
// filesystem cannot be asked (the capacity alone then bounds the tier).
// The caller must not hold t.mu.
func (t *Tier) fsLimit() (limit int64, free int64, ok bool) {
	free, err := t.statFree()
	if err != nil {
		t.log.Warn("nvme: cannot check free space", "err", err)
		return 0, 0, false
	}
	t.mu.Lock()
	used := t.used
	t.mu.Unlock()
	return used + free - t.cfg.minFree(), free, true
}

// statFree asks the filesystem (and refreshes lowSpace's cache).
func (t *Tier) statFree() (int64, error) {
	free, err := t.freeFn(t.cfg.Dir)
	if err != nil {
		return 0, err
	}
	t.space.free.Store(free)
	t.space.at.Store(t.now().UnixNano())
	return free, nil
}

// lowSpace reports whether the filesystem's free space is below the
// floor, asking it at most every statfsEvery.
func (t *Tier) lowSpace() bool {
	if t.now().UnixNano()-t.space.at.Load() > int64(statfsEvery) {
		if _, err := t.statFree(); err != nil {
			return false
		}
	}
	return t.space.free.Load() < t.cfg.minFree()
}

// noSpace maps a write the kernel refused for lack of room (ENOSPC, a
// quota) to block.ErrNoSpace, keeping the rest of err.
func noSpace(err error) error {
	if err == nil || errors.Is(err, block.ErrNoSpace) {
		return err
	}
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
		return fmt.Errorf("%w: %w", block.ErrNoSpace, err)
	}
	return err
}
