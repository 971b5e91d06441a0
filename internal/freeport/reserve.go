package freeport

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// lockName is the file whose bytes stand for ports: byte N locked by a
// process means that process handed out port N.
const lockName = "ctxtier-freeport.lock"

var (
	lockOnce sync.Once
	lockFile *os.File // kept open for the process's life: closing it would drop every lock
)

// reserve takes port addr's byte of the shared lock file for this process
// and reports whether it got it: false when another live process holds it.
// Without the file (an unwritable temporary directory) it reserves
// nothing and answers true, leaving the probe to decide. Called with mu
// held.
func reserve(addr string) bool {
	lockOnce.Do(func() {
		f, err := os.OpenFile(filepath.Join(os.TempDir(), lockName), os.O_RDWR|os.O_CREATE, 0o666)
		if err == nil {
			lockFile = f
		}
	})
	if lockFile == nil {
		return true
	}
	_, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	port, err := strconv.Atoi(ps)
	if err != nil {
		return false
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: int64(port), Len: 1}
	return unix.FcntlFlock(lockFile.Fd(), unix.F_SETLK, &lk) == nil
}
