package dram

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// shmemTHPFile is where Linux says whether shared memory (the memfd or
// tmpfs file behind the arena) may use transparent huge pages.
const shmemTHPFile = "/sys/kernel/mm/transparent_hugepage/shmem_enabled"

// adviseHugePages asks the kernel to back arena with 2 MiB pages
// (madvise MADV_HUGEPAGE on the shared mapping of the memory file). The
// kernel honours it for a memfd or tmpfs file only when shmem_enabled is
// advise, always, within_size or force; the returned string says which
// setting was found, for the start-up log. Huge pages cut the TLB misses
// of the copies into sockets and into descriptor readers' buffers
// (docs/benchmarks.md, "A huge-page arena"). Pages handed to sendfile are
// punched out of the file when freed (releaseLocked), which splits the
// huge page they were in: with --sendfile an arena loses its huge pages
// as blocks are freed.
func adviseHugePages(arena []byte) (setting string, err error) {
	setting = shmemTHPSetting(shmemTHPFile)
	if err := unix.Madvise(arena, unix.MADV_HUGEPAGE); err != nil {
		return setting, fmt.Errorf("dram: madvise(MADV_HUGEPAGE): %w", err)
	}
	return setting, nil
}

// shmemTHPSetting returns the selected value of a transparent_hugepage
// setting file ("never", "advise", ...; the one in brackets), or
// "unknown" when it cannot be read.
func shmemTHPSetting(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	return selectedSetting(string(b))
}

// selectedSetting picks the bracketed word of a sysfs choice list such as
// "always within_size [advise] never deny force".
func selectedSetting(s string) string {
	for _, w := range strings.Fields(s) {
		if len(w) > 2 && w[0] == '[' && w[len(w)-1] == ']' {
			return w[1 : len(w)-1]
		}
	}
	return "unknown"
}

// hugePagesHonoured reports whether shmem_enabled lets a madvised shared
// mapping get huge pages.
func hugePagesHonoured(setting string) bool {
	switch setting {
	case "advise", "always", "within_size", "force":
		return true
	}
	return false
}
