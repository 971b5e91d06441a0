package nvme

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"
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

// floorFor is the floor on a filesystem of total bytes: Config.MinFree,
// or two memtables' worth (a full memtable and the table it flushes to:
// badger's files grow with what is written, so this covers a memtable of
// index entries going to disk), but at most a quarter of the filesystem.
func (c Config) floorFor(total int64) int64 {
	if c.MinFree > 0 {
		return c.MinFree
	}
	return min(2*c.Index.MemTableSize, total/4)
}

// fsSpace returns the bytes an unprivileged writer may still use on the
// filesystem of dir, and its size.
func fsSpace(dir string) (free, total int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, fmt.Errorf("nvme: statfs %s: %w", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), int64(st.Blocks) * int64(st.Bsize), nil //nolint:unconvert // Statfs_t field types differ between platforms
}

// minFree is the floor in force (fixed when the tier opened).
func (t *Tier) minFree() int64 { return t.floor }

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
	return used + free - t.minFree(), free, true
}

// statFree asks the filesystem (and refreshes lowSpace's cache).
func (t *Tier) statFree() (int64, error) {
	free, _, err := t.spaceFn(t.cfg.Dir)
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
	return t.space.free.Load() < t.minFree()
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

// makeRoom runs before the index opens (badger writes as it opens and
// replays). When the filesystem has less than the floor free (something
// else filled it, or a ctxd without the floor let the tier fill it), it
// removes the oldest segment files until the floor is free again: their
// blocks are a cache, and recovery drops the index entries that pointed
// there. It fails with block.ErrNoSpace, before anything could fault, when
// even removing every segment leaves too little.
func makeRoom(cfg Config, segDir string, space func(string) (int64, int64, error), log *slog.Logger) (floor int64, err error) {
	avail, total, err := space(cfg.Dir)
	if err != nil {
		return 0, err
	}
	need := cfg.floorFor(total)
	removed, freed := 0, int64(0)
	if avail >= need {
		return need, nil
	}
	des, err := os.ReadDir(segDir)
	if err != nil {
		return 0, fmt.Errorf("nvme: %w", err)
	}
	var ids []uint64
	for _, de := range des {
		if id, ok := parseSegName(de.Name()); ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		if avail >= need {
			break
		}
		p := filepath.Join(segDir, segName(id))
		fi, serr := os.Stat(p)
		if serr != nil {
			continue
		}
		if err := os.Remove(p); err != nil {
			return 0, fmt.Errorf("nvme: making room: %w", err)
		}
		removed++
		freed += fi.Size()
		if avail, _, err = space(cfg.Dir); err != nil {
			return 0, err
		}
	}
	if removed > 0 {
		log.Warn("nvme: the filesystem was full: removed the oldest segments so that the index can open (their blocks are dropped)",
			"dir", cfg.Dir, "segments", removed, "bytes", freed, "free", avail, "min_free", need)
	}
	if avail < need {
		return 0, fmt.Errorf("%w: nvme: the filesystem of %s has %d bytes free, and the tier's index needs %d to open safely: free space there or move --nvme-dir",
			block.ErrNoSpace, cfg.Dir, avail, need)
	}
	return need, nil
}

// errIndexFull refuses an index write the filesystem may lack room for.
var errIndexFull = fmt.Errorf("%w: the index's filesystem is below its hard floor", block.ErrNoSpace)

// indexRoom reports whether the filesystem has room for a badger write now:
// at least half the floor free, asked afresh (not lowSpace's cached value:
// another writer can fill the filesystem between two statfs). Half the floor
// is one memtable: what a write may touch in the memtable's memory-mapped
// log plus the table a flush it triggers writes. Below it, a store into a
// page the filesystem cannot back is a SIGBUS that kills the process, so
// every index write goes through indexWrite. When the filesystem cannot be
// asked, the write goes ahead (as before the floor existed).
func (t *Tier) indexRoom() (free int64, ok bool) {
	free, err := t.statFree()
	if err != nil {
		return 0, true
	}
	return free, free >= t.minFree()/2
}

// indexWrite runs fn in a badger read-write transaction if the filesystem
// has room for it (indexRoom), else fails with block.ErrNoSpace and writes
// nothing. Every write to the index goes through here.
func (t *Tier) indexWrite(fn func(txn *badger.Txn) error) error {
	if free, ok := t.indexRoom(); !ok {
		t.st.indexRefused.Add(1)
		return fmt.Errorf("%w (%d bytes free, %d needed for an index write on %s)", errIndexFull, free, t.minFree()/2, t.cfg.Dir)
	}
	return t.db.Update(fn)
}
