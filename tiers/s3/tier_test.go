package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// memStore is an in-memory object store for unit tests only; the
// integration tests run against a real S3 server.
type memStore struct {
	mu      sync.Mutex
	objects map[string][]byte
	down    bool
	reads   int
	heads   int // ReadHead calls (whole-object GETs)
	// listGate, when set, holds List until it is closed.
	listGate chan struct{}
}

func newMemStore() *memStore { return &memStore{objects: map[string][]byte{}} }

var errDown = errors.New("connection refused")

func (m *memStore) setDown(v bool) { m.mu.Lock(); m.down = v; m.mu.Unlock() }

func (m *memStore) Put(_ context.Context, name string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return errDown
	}
	m.objects[name] = append([]byte(nil), data...)
	return nil
}

func (m *memStore) ReadRange(_ context.Context, name string, off int64, dst []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	if m.down {
		return errDown
	}
	o, ok := m.objects[name]
	if !ok {
		return errNoObject
	}
	if off+int64(len(dst)) > int64(len(o)) {
		return fmt.Errorf("range past end")
	}
	copy(dst, o[off:])
	return nil
}

func (m *memStore) ReadHead(ctx context.Context, name string, dst []byte) error {
	m.mu.Lock()
	m.heads++
	m.mu.Unlock()
	return m.ReadRange(ctx, name, 0, dst)
}

func (m *memStore) Remove(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return errDown
	}
	delete(m.objects, name)
	return nil
}

func (m *memStore) List(_ context.Context, prefix string, fn func(string, int64) error) error {
	m.mu.Lock()
	if g := m.listGate; g != nil {
		m.mu.Unlock()
		<-g
		m.mu.Lock()
	}
	if m.down {
		m.mu.Unlock()
		return errDown
	}
	var names []string
	for n := range m.objects {
		if strings.HasPrefix(n, prefix) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	sizes := make([]int64, len(names))
	for i, n := range names {
		sizes[i] = int64(len(m.objects[n]))
	}
	m.mu.Unlock()
	for i, n := range names {
		if err := fn(n, sizes[i]); err != nil {
			return err
		}
	}
	return nil
}

func (m *memStore) count() int { m.mu.Lock(); defer m.mu.Unlock(); return len(m.objects) }

func testConfig(dir string) Config {
	c := DefaultConfig()
	c.Endpoint, c.Bucket, c.Dir, c.Prefix = "unit", "unit", dir, "node1"
	c.PackBlocks = 16
	c.MaxBuffer = 1 << 20
	c.MaxBlockSize = 64 << 10
	c.FlushInterval = time.Hour
	c.MaintainInterval = time.Hour
	c.RetryMin, c.RetryMax = time.Hour, time.Hour // tests drive uploads with Flush
	c.BreakerFailures, c.BreakerCooldown = 2, time.Hour
	return c
}

func blockData(i, size int) []byte {
	b := make([]byte, size)
	for j := range b {
		b[j] = byte(i*31 + j*7 + j>>8)
	}
	return b
}

func key(i int) block.Key { return block.NewKey("default", uint64(i)+1) }

// openTest opens a tier and waits until its index is complete: a tier with
// no journal rebuilds it from the bucket in the background, and until then
// a get of an unknown block answers Unavailable instead of NotFound.
func openTest(t *testing.T, cfg Config, st objectStore) *Tier {
	t.Helper()
	tr := openRebuilding(t, cfg, st)
	deadline := time.Now().Add(5 * time.Second)
	for !tr.Rebuilt() {
		if time.Now().After(deadline) {
			t.Fatal("the tier's index was not rebuilt within 5 s")
		}
		time.Sleep(time.Millisecond)
	}
	return tr
}

// openRebuilding opens a tier without waiting for its index.
func openRebuilding(t *testing.T, cfg Config, st objectStore) *Tier {
	t.Helper()
	tr, err := newTier(cfg, st, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func mustGet(t *testing.T, tr *Tier, i, size int) {
	t.Helper()
	ref, err := tr.Get(context.Background(), key(i), block.GetOptions{})
	if err != nil {
		t.Fatalf("get %d: %v", i, err)
	}
	defer ref.Release()
	if want := blockData(i, size); !bytes.Equal(ref.Data, want) || ref.Sum != block.Checksum(want) {
		t.Fatalf("get %d: wrong bytes", i)
	}
}

func TestPackRoundTrip(t *testing.T) {
	st := newMemStore()
	tr := openTest(t, testConfig(t.TempDir()), st)
	const n, size = 40, 3000
	for i := 0; i < n; i++ {
		d := blockData(i, size)
		tr.Demote(key(i), d, block.Checksum(d))
	}
	mustGet(t, tr, 39, size) // still buffered: served from memory
	if err := tr.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := tr.Stats()
	if s.Uploads != 3 || s.Blocks != n || s.BufferedBytes != 0 || st.count() != 3 {
		t.Fatalf("stats after flush: %+v, objects %d", s, st.count())
	}
	for i := 0; i < n; i++ {
		mustGet(t, tr, i, size)
	}
	loc, ok := tr.Locate(key(17))
	if !ok || loc.Length != size || loc.Offset != int64(1*size) || !strings.HasPrefix(loc.Object, "node1/default/") {
		t.Fatalf("locate: %+v %v", loc, ok)
	}
	// A duplicate demotion is not uploaded again.
	d := blockData(3, size)
	tr.Demote(key(3), d, block.Checksum(d))
	if tr.Stats().Duplicates != 1 || tr.Stats().BufferedBytes != 0 {
		t.Fatalf("duplicate: %+v", tr.Stats())
	}
	if _, err := tr.Get(context.Background(), key(99), block.GetOptions{}); !errors.Is(err, block.ErrNotFound) {
		t.Fatalf("missing key: %v", err)
	}
}

// TestSoloPacks: a block of SoloSize or more gets a pack of its own, read
// back whole, while smaller blocks keep filling the namespace's open pack.
func TestSoloPacks(t *testing.T) {
	st := newMemStore()
	cfg := testConfig(t.TempDir())
	cfg.SoloSize = 8 << 10
	tr := openTest(t, cfg, st)
	sizes := []int{1000, 9000, 2000, 8192, 3000}
	for i, n := range sizes {
		d := blockData(i, n)
		tr.Demote(key(i), d, block.Checksum(d))
	}
	if err := tr.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Two solo packs and one pack of the three small blocks.
	if s := tr.Stats(); s.Uploads != 3 || s.Blocks != 5 || st.count() != 3 {
		t.Fatalf("stats: %+v, objects %d", s, st.count())
	}
	small, _ := tr.Locate(key(2))
	if first, _ := tr.Locate(key(0)); first.Object != small.Object || small.Offset != 1000 {
		t.Fatalf("small blocks not packed together: %+v %+v", first, small)
	}
	for _, i := range []int{1, 3} {
		l, _ := tr.Locate(key(i))
		if l.Offset != 0 || l.Object == small.Object {
			t.Fatalf("block %d not alone: %+v", i, l)
		}
	}
	for i, n := range sizes {
		mustGet(t, tr, i, n)
	}
	if st.heads != 2 || st.reads != 5 {
		t.Fatalf("whole-object reads %d, all reads %d; want 2 and 5", st.heads, st.reads)
	}
	// A dead solo pack is removed outright, with no compaction.
	if err := tr.Delete(context.Background(), key(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Maintain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := tr.Stats(); s.Packs != 2 || s.Compactions != 0 || st.count() != 2 {
		t.Fatalf("after deleting a solo block: %+v, objects %d", s, st.count())
	}
}

// TestRebuildingAnswersUnavailable: while the index is rebuilt from the
// bucket, a block it does not know yet is Unavailable, not NotFound, so the
// cluster index never forgets a block S3 still holds.
func TestRebuildingAnswersUnavailable(t *testing.T) {
	st := newMemStore()
	cfg := testConfig(t.TempDir())
	tr := openTest(t, cfg, st)
	d := blockData(1, 500)
	tr.Demote(key(1), d, block.Checksum(d))
	if err := tr.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	tr.Close()

	gate := make(chan struct{})
	st.mu.Lock()
	st.listGate = gate
	st.mu.Unlock()
	cfg.Dir = t.TempDir() // no journal: rebuild from the bucket
	again := openRebuilding(t, cfg, st)
	if _, err := again.Get(context.Background(), key(1), block.GetOptions{}); !errors.Is(err, block.ErrUnavailable) {
		t.Fatalf("get while rebuilding: %v, want ErrUnavailable", err)
	}
	if _, err := again.Stat(context.Background(), key(1)); !errors.Is(err, block.ErrUnavailable) {
		t.Fatalf("stat while rebuilding: %v, want ErrUnavailable", err)
	}
	if !again.Stats().Rebuilding {
		t.Fatal("stats do not say rebuilding")
	}
	close(gate)
	deadline := time.Now().Add(5 * time.Second)
	for !again.Rebuilt() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	mustGet(t, again, 1, 500)
	if _, err := again.Get(context.Background(), key(2), block.GetOptions{}); !errors.Is(err, block.ErrNotFound) {
		t.Fatalf("get of an unknown block after the rebuild: %v, want ErrNotFound", err)
	}
}

func TestPolicySkipsAndExpires(t *testing.T) {
	st := newMemStore()
	cfg := testConfig(t.TempDir())
	now := time.Unix(1_000_000, 0)
	cfg.Policy = func(ns string) Policy {
		if ns == "private" {
			return Policy{}
		}
		return Policy{Enabled: true, TTL: time.Minute}
	}
	tr := openTest(t, cfg, st)
	tr.setClock(func() time.Time { return now })
	d := blockData(1, 100)
	tr.Demote(block.NewKey("private", 1), d, block.Checksum(d))
	for i := 0; i < 5; i++ {
		d := blockData(i, 100)
		tr.Demote(key(i), d, block.Checksum(d))
	}
	if err := tr.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := tr.Stats(); s.SkippedPolicy != 1 || s.Blocks != 5 {
		t.Fatalf("stats: %+v", s)
	}
	later := now.Add(2 * time.Minute)
	tr.setClock(func() time.Time { return later })
	if tr.Contains(key(0)) {
		t.Fatal("expired block still reported")
	}
	rep, err := tr.Maintain(context.Background())
	if err != nil || rep.Expired != 5 || rep.PacksDeleted != 1 {
		t.Fatalf("maintain: %+v %v", rep, err)
	}
	if st.count() != 0 {
		t.Fatalf("expired pack not deleted: %d objects", st.count())
	}
}

func TestCompactionRepacksLiveBlocks(t *testing.T) {
	st := newMemStore()
	tr := openTest(t, testConfig(t.TempDir()), st)
	ctx := context.Background()
	for i := 0; i < 16; i++ {
		d := blockData(i, 1000)
		tr.Demote(key(i), d, block.Checksum(d))
	}
	if err := tr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	old, _ := tr.Locate(key(0))
	for i := 0; i < 12; i++ { // 4 of 16 left: 25% live
		if err := tr.Delete(ctx, key(i)); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := tr.Maintain(ctx)
	if err != nil || rep.Compacted != 1 || rep.Repacked != 4 {
		t.Fatalf("maintain: %+v %v", rep, err)
	}
	for i := 12; i < 16; i++ {
		mustGet(t, tr, i, 1000)
		if l, _ := tr.Locate(key(i)); l.Object == old.Object {
			t.Fatalf("block %d still in the old pack", i)
		}
	}
	rep, err = tr.Maintain(ctx)
	if err != nil || rep.PacksDeleted != 1 || st.count() != 1 {
		t.Fatalf("second maintain: %+v %v, %d objects", rep, err, st.count())
	}
	if _, err := tr.Get(ctx, key(0), block.GetOptions{}); !errors.Is(err, block.ErrNotFound) {
		t.Fatalf("deleted block: %v", err)
	}
}

func TestS3DownBoundsBufferAndFailsFast(t *testing.T) {
	st := newMemStore()
	cfg := testConfig(t.TempDir())
	cfg.MaxBuffer = 10 * 1000
	cfg.BreakerFailures = 3 // the failed upload, then two failed gets
	tr := openTest(t, cfg, st)
	ctx := context.Background()
	for i := 0; i < 4; i++ {
		d := blockData(i, 1000)
		tr.Demote(key(i), d, block.Checksum(d))
	}
	if err := tr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st.setDown(true)
	// Demotion never blocks: blocks fill the buffer, then are dropped.
	for i := 10; i < 25; i++ {
		d := blockData(i, 1000)
		tr.Demote(key(i), d, block.Checksum(d))
	}
	if s := tr.Stats(); s.Dropped != 5 || s.BufferedBytes != 10*1000 {
		t.Fatalf("buffer: %+v", s)
	}
	if err := tr.Flush(ctx); !errors.Is(err, block.ErrUnavailable) {
		t.Fatalf("flush while down: %v", err)
	}
	mustGet(t, tr, 12, 1000) // buffered blocks stay readable
	// Gets of S3-only blocks fail with ErrUnavailable, then fast.
	for i := 0; i < 2; i++ {
		if _, err := tr.Get(ctx, key(i), block.GetOptions{}); !errors.Is(err, block.ErrUnavailable) {
			t.Fatalf("get while down: %v", err)
		}
	}
	reads := st.reads
	_, err := tr.Get(ctx, key(2), block.GetOptions{})
	if !errors.Is(err, block.ErrUnavailable) || !strings.Contains(err.Error(), "circuit open") || st.reads != reads {
		t.Fatalf("breaker: %v (reads %d→%d)", err, reads, st.reads)
	}
	// At least the last get failed fast; a background upload retry that
	// failed in the meantime may have opened the breaker earlier, making an
	// earlier get fail fast too.
	if s := tr.Stats(); s.FastFails < 1 || !s.BreakerOpen {
		t.Fatalf("stats: %+v", s)
	}
	// S3 returns: the queued packs upload and gets work once the breaker
	// lets a probe through.
	st.setDown(false)
	if err := tr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	tr.setClock(func() time.Time { return time.Now().Add(2 * time.Hour) })
	mustGet(t, tr, 0, 1000)
	mustGet(t, tr, 12, 1000)
	if s := tr.Stats(); s.Blocks != 14 || s.BufferedBytes != 0 || s.BreakerOpen {
		t.Fatalf("after recovery: %+v", s)
	}
}

func TestCorruptBlockIsNeverServed(t *testing.T) {
	st := newMemStore()
	tr := openTest(t, testConfig(t.TempDir()), st)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		d := blockData(i, 500)
		tr.Demote(key(i), d, block.Checksum(d))
	}
	if err := tr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	l, _ := tr.Locate(key(1))
	st.mu.Lock()
	st.objects[l.Object][l.Offset+10] ^= 0xff
	st.mu.Unlock()
	_, err := tr.Get(ctx, key(1), block.GetOptions{})
	if !errors.Is(err, block.ErrNotFound) || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("corrupt get: %v", err)
	}
	if tr.Contains(key(1)) || tr.Stats().Corruptions != 1 {
		t.Fatal("corrupt block still indexed")
	}
	mustGet(t, tr, 2, 500)
}

func TestIndexSurvivesReopenAndRebuilds(t *testing.T) {
	st := newMemStore()
	dir := t.TempDir()
	cfg := testConfig(dir)
	tr, err := newTier(cfg, st, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 20; i++ {
		d := blockData(i, 700)
		tr.Demote(key(i), d, block.Checksum(d))
	}
	if err := tr.Close(); err != nil { // Close flushes
		t.Fatal(err)
	}
	// Reopen from the journal.
	tr2 := openTest(t, cfg, st)
	if tr2.Stats().Blocks != 20 || !tr2.Rebuilt() {
		t.Fatalf("reopen: %+v", tr2.Stats())
	}
	if err := tr2.Delete(ctx, key(5)); err != nil {
		t.Fatal(err)
	}
	mustGet(t, tr2, 7, 700)
	tr2.Close()
	tr3 := openTest(t, cfg, st)
	if tr3.Contains(key(5)) || tr3.Stats().Blocks != 19 {
		t.Fatalf("delete not persisted: %+v", tr3.Stats())
	}
	// A node with no index rebuilds it from the packs.
	fresh := testConfig(t.TempDir())
	tr4 := openTest(t, fresh, st)
	if tr4.Stats().Blocks != 20 {
		t.Fatalf("rebuild: %+v", tr4.Stats())
	}
	mustGet(t, tr4, 19, 700)
}

func TestConfigValidate(t *testing.T) {
	base := testConfig("d")
	cases := []struct {
		name string
		mod  func(*Config)
	}{
		{"no endpoint", func(c *Config) { c.Endpoint = "" }},
		{"no bucket", func(c *Config) { c.Bucket = "" }},
		{"no dir", func(c *Config) { c.Dir = "" }},
		{"small part", func(c *Config) { c.PartSize = 1 << 20 }},
		{"buffer below a block", func(c *Config) { c.MaxBuffer = c.MaxBlockSize - 1 }},
		{"compact ratio", func(c *Config) { c.CompactBelow = 1 }},
		{"retry", func(c *Config) { c.RetryMax = c.RetryMin - 1 }},
		{"abs prefix", func(c *Config) { c.Prefix = "/x" }},
	}
	if err := base.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		c := base
		tc.mod(&c)
		if err := c.Validate(); !errors.Is(err, block.ErrInvalidArgument) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
