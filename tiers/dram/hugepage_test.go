package dram

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

func TestSelectedSetting(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		honoured bool
	}{
		{"always within_size advise [never] deny force\n", "never", false},
		{"always within_size [advise] never deny force\n", "advise", true},
		{"[always] within_size advise never deny force", "always", true},
		{"always [within_size] advise never", "within_size", true},
		{"always within_size advise never [deny] force", "deny", false},
		{"always advise never", "unknown", false},
		{"", "unknown", false},
		{"[] x", "unknown", false},
	} {
		if got := selectedSetting(tc.in); got != tc.want {
			t.Errorf("selectedSetting(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := hugePagesHonoured(selectedSetting(tc.in)); got != tc.honoured {
			t.Errorf("hugePagesHonoured(%q) = %v, want %v", tc.in, got, tc.honoured)
		}
	}
	if got := shmemTHPSetting(filepath.Join(t.TempDir(), "absent")); got != "unknown" {
		t.Errorf("unreadable setting file: %q, want unknown", got)
	}
}

// A tier with HugePages stores and serves blocks exactly as one without;
// where the kernel allows huge pages for shared memory, the arena's
// mapping is backed by them once written.
func TestHugePagesArena(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Capacity = 64 << 20
	cfg.HugePages = true
	var logs bytes.Buffer
	tr, err := New(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ctx := context.Background()
	blocks := map[block.Key][]byte{}
	for i := range 12 {
		d := payload(uint64(i), 4<<20+i*4096)
		k := block.NewKey("default", uint64(i))
		if err := tr.Put(ctx, k, d, block.Checksum(d), block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		blocks[k] = d
	}
	for k, d := range blocks {
		readBack(t, tr, k, d)
	}
	setting := shmemTHPSetting(shmemTHPFile)
	if !hugePagesHonoured(setting) {
		if !strings.Contains(logs.String(), "does not allow them") {
			t.Fatalf("shmem_enabled=%s: no warning in the log:\n%s", setting, logs.String())
		}
		t.Logf("shmem_enabled=%s here: the arena uses 4 KiB pages (warned); the huge-page backing is not checked", setting)
		return
	}
	pmd, err := shmemPmdMapped(uintptr(unsafe.Pointer(&tr.arena[0])))
	if err != nil {
		t.Fatal(err)
	}
	// 48 MiB were written through the mapping; at least some 2 MiB
	// aligned stretches of it must be mapped by huge pages.
	if pmd < 2<<20 {
		t.Fatalf("shmem_enabled=%s: the arena's mapping has %d bytes mapped by huge pages, want at least one huge page", setting, pmd)
	}
	t.Logf("shmem_enabled=%s: %d MiB of the arena mapped by huge pages", setting, pmd>>20)
}

// shmemPmdMapped returns the ShmemPmdMapped bytes of this process's
// mapping that contains addr (/proc/self/smaps).
func shmemPmdMapped(addr uintptr) (int64, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x ", &lo, &hi); n == 2 { // a mapping's header line
			in = addr >= lo && addr < hi
			continue
		}
		if in && strings.HasPrefix(line, "ShmemPmdMapped:") {
			f := strings.Fields(line)
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no mapping containing %#x in /proc/self/smaps", addr)
}
