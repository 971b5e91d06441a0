package dram

import (
	"os"

	"golang.org/x/sys/unix"
)

// A fresh memory file has no pages: the first write to each 4 KiB page of
// the arena traps into the kernel, which allocates and zeroes a page of the
// file and maps it. On a node that has just started, every put of a new
// block lands on untouched pages and pays that fault inside its copy; once
// the arena has been filled (and blocks are evicted and replaced) pages are
// reused and no put faults. Config.Prefault pays it once, at start-up.

// prefault makes every page of mem resident and writable. It asks the
// kernel to populate the range in one call (MADV_POPULATE_WRITE, Linux
// 5.14+) and falls back to writing a zero byte to each page, which the
// fresh file already holds. It returns which way it went.
func prefault(mem []byte) string {
	if len(mem) == 0 {
		return "empty"
	}
	if err := unix.Madvise(mem, unix.MADV_POPULATE_WRITE); err == nil {
		return "madvise"
	}
	touchPages(mem)
	return "touch"
}

// touchPages writes a zero byte to every page of mem, a fresh (zero) file's
// mapping, which faults each one in.
func touchPages(mem []byte) {
	step := os.Getpagesize()
	for off := 0; off < len(mem); off += step {
		mem[off] = 0
	}
}
