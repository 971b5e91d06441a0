package dram

import (
	"bytes"
	"log/slog"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// resident counts the pages of mem that are in memory (mincore).
func resident(t *testing.T, mem []byte) int {
	t.Helper()
	vec := make([]byte, (len(mem)+os.Getpagesize()-1)/os.Getpagesize())
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

func TestPrefaultMakesTheArenaResident(t *testing.T) {
	const capacity = 8 << 20
	pages := capacity / os.Getpagesize()
	cases := []struct {
		name     string
		prefault bool
		memFile  bool
		min, max int // resident arena pages before any put
	}{
		{"memfd, not prefaulted", false, false, 0, 0},
		{"memfd, prefaulted", true, false, pages, pages},
		{"memory file, prefaulted", true, true, pages, pages},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Capacity = capacity
			cfg.Prefault = tc.prefault
			if tc.memFile {
				cfg.MemFile = t.TempDir() + "/arena"
			}
			tr, err := New(cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			if got := resident(t, tr.arena); got < tc.min || got > tc.max {
				t.Fatalf("%d of %d arena pages resident, want %d..%d", got, pages, tc.min, tc.max)
			}
			// The arena reads as zeroes and still stores and serves blocks.
			if !bytes.Equal(tr.arena[:PageSize], make([]byte, PageSize)) {
				t.Fatal("prefaulted arena is not zero")
			}
			data := payload(uint64(i), 3*PageSize+5)
			if err := put(t, tr, key(i), data, block.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			readBack(t, tr, key(i), data)
		})
	}
}

func TestPrefaultFallbackTouchesEveryPage(t *testing.T) {
	// The fallback path alone, on a fresh shared mapping of a memfd.
	const size = 1 << 20
	fd, err := unix.MemfdCreate("prefault-test", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, size); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	if got := resident(t, mem); got != 0 {
		t.Fatalf("fresh mapping has %d resident pages", got)
	}
	touchPages(mem)
	if got, want := resident(t, mem), size/os.Getpagesize(); got != want {
		t.Fatalf("%d of %d pages resident after touching", got, want)
	}
	if prefault(nil) != "empty" {
		t.Fatal("prefault of nothing did something")
	}
}
