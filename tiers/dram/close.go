package dram

import (
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// closeWarnEvery is how often Close logs while it waits for work outside
// the lock (in practice: a Demote that does not return).
const closeWarnEvery = 10 * time.Second

// enterLocked enters the gate that Close drains before unmapping the arena:
// the caller, holding t.mu, is about to touch arena bytes with the lock
// released, and must call t.busy.Done when it no longer does. It reports
// false, entering nothing, once the tier is closed.
//
// Adding to busy only under t.mu while !t.closed is what makes the
// WaitGroup's rule hold: every Add happens before Close's Wait starts (Close
// sets closed under t.mu first), so the counter never goes up from zero
// while Close waits.
func (t *Tier) enterLocked() bool {
	if t.closed {
		return false
	}
	t.busy.Add(1)
	return true
}

// Close stops the tier and unmaps the arena. Calls that start after it
// answer block.ErrClosed. It first waits for the work already touching
// arena bytes outside the lock to finish: puts copying in, verified reads
// hashing, and Demote calls (so Close blocks as long as a Demote does, and
// logs every closeWarnEvery while it waits; Demote must honour its context
// and must not call back into the tier, see Config.Demote).
//
// Outstanding Refs are the caller's: they must not be read after Close (the
// bytes are unmapped, a read faults); releasing one after Close is safe and
// frees nothing (see releaseLocked and freePagesLocked). Close logs how
// many leases were still held.
func (t *Tier) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.mu.Unlock()

	t.waitIdle()

	t.mu.Lock()
	defer t.mu.Unlock()
	leased := 0
	for i := range t.entries.Len() {
		if t.entries.At(uint32(i)).leases > 0 {
			leased++
		}
	}
	if leased > 0 {
		t.log.Warn("dram tier closed with blocks still leased; their Refs must not be read again", "blocks", leased)
	}
	err := unix.Munmap(t.mem)
	t.mem, t.arena, t.vers = nil, nil, nil
	if cerr := t.file.Close(); err == nil {
		err = cerr
	}
	if t.cfg.MemFile != "" {
		if rerr := os.Remove(t.cfg.MemFile); err == nil && !errors.Is(rerr, os.ErrNotExist) {
			err = rerr
		}
	}
	return err
}

// waitIdle waits until the gate is empty, logging while it takes long.
func (t *Tier) waitIdle() {
	done := make(chan struct{})
	go func() {
		t.busy.Wait()
		close(done)
	}()
	tk := time.NewTicker(closeWarnEvery)
	defer tk.Stop()
	start := time.Now()
	for {
		select {
		case <-done:
			return
		case <-tk.C:
			t.log.Warn("dram tier close still waiting for work outside its lock (a put's copy, a read's check or a Demote call)",
				"waited", time.Since(start).Round(time.Second))
		}
	}
}
