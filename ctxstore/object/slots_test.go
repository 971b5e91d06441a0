package object

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// encodeRecordV1 builds a record in format 1, as written before records had
// generations (18-byte header, no generation field).
func encodeRecordV1(key, value []byte, expires time.Time) []byte {
	b := make([]byte, headerSizeV1+len(key)+len(value))
	copy(b, recordMagic)
	b[4] = recordFormatV1
	binary.LittleEndian.PutUint32(b[6:], uint32(len(key)))
	if !expires.IsZero() {
		binary.LittleEndian.PutUint64(b[10:], uint64(expires.UnixMilli()))
	}
	copy(b[headerSizeV1:], key)
	copy(b[headerSizeV1+len(key):], value)
	return b
}

// deleteLog is a tier (a mock around the real DRAM tier) that records the
// order of deletes.
type deleteLog struct {
	block.Storage
	mu      sync.Mutex
	deleted []block.Key
}

func (d *deleteLog) Delete(ctx context.Context, key block.Key) error {
	err := d.Storage.Delete(ctx, key)
	if err == nil {
		d.mu.Lock()
		d.deleted = append(d.deleted, key)
		d.mu.Unlock()
	}
	return err
}

// newLoggedStore is newStore over a deleteLog.
func newLoggedStore(t *testing.T) (*Store, *deleteLog, *time.Time) {
	t.Helper()
	var log *deleteLog
	s, now := newStoreOver(t, func(tier block.Storage) block.Storage {
		log = &deleteLog{Storage: tier}
		return log
	})
	return s, log, now
}

// slotGens returns what key's two slots hold: the generation of a record of
// key, -1 for an empty slot, -2 for anything else.
func slotGens(t *testing.T, s *Store, key []byte) [2]int64 {
	t.Helper()
	ctx := context.Background()
	n, _ := s.blocks.Namespace("default")
	var out [2]int64
	for i, bk := range s.slotKeys(n, key) {
		sl, err := s.readSlot(ctx, n, bk)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case sl.ref == nil:
			out[i] = -1
		case sl.holds(key):
			out[i] = int64(sl.rec.gen)
		default:
			out[i] = -2
		}
		sl.release()
	}
	return out
}

// TestSlotStates puts each state a key's two slots can be in straight into
// the blocks, then checks what GET, SET and DEL do with it.
func TestSlotStates(t *testing.T) {
	key := []byte("k")
	type put struct {
		slot int
		rec  func(now time.Time) []byte
	}
	rec := func(value string, gen uint64) func(time.Time) []byte {
		return func(time.Time) []byte { return encodeRecord(key, []byte(value), time.Time{}, gen) }
	}
	expired := func(k []byte, value string, gen uint64) func(time.Time) []byte {
		return func(now time.Time) []byte { return encodeRecord(k, []byte(value), now.Add(-time.Second), gen) }
	}
	cases := []struct {
		name string
		puts []put
		// get is the value GET returns ("" with absent).
		get    string
		absent bool
		// setErr is SET's error; after it the slots hold afterSet.
		setErr   error
		afterSet [2]int64
		// del is what DEL reports; deleted the slots it deletes, in order.
		del     bool
		deleted []int
	}{
		{name: "empty", absent: true, afterSet: [2]int64{1, -1}},
		{name: "slot 0 only", puts: []put{{0, rec("old", 1)}}, get: "old", afterSet: [2]int64{-1, 2}, del: true, deleted: []int{0}},
		{name: "slot 1 only", puts: []put{{1, rec("old", 4)}}, get: "old", afterSet: [2]int64{5, -1}, del: true, deleted: []int{1}},
		{name: "both, slot 1 newer (a writer between put and delete)", puts: []put{{0, rec("older", 1)}, {1, rec("newer", 2)}},
			get: "newer", afterSet: [2]int64{3, -1}, del: true, deleted: []int{0, 1}},
		{name: "both, slot 0 newer", puts: []put{{0, rec("newer", 7)}, {1, rec("older", 6)}},
			get: "newer", afterSet: [2]int64{-1, 8}, del: true, deleted: []int{1, 0}},
		{name: "format 1 record", puts: []put{{0, func(time.Time) []byte { return encodeRecordV1(key, []byte("v1"), time.Time{}) }}},
			get: "v1", afterSet: [2]int64{-1, 1}, del: true, deleted: []int{0}},
		{name: "format 1 beside a newer record", puts: []put{{0, func(time.Time) []byte { return encodeRecordV1(key, []byte("v1"), time.Time{}) }}, {1, rec("v2", 1)}},
			get: "v2", afterSet: [2]int64{2, -1}, del: true, deleted: []int{0, 1}},
		{name: "newer expired, older live: absent, never the older", puts: []put{{0, rec("older", 1)}, {1, expired(key, "newer", 2)}},
			absent: true, afterSet: [2]int64{3, -1}, del: false, deleted: []int{0, 1}},
		{name: "another key live in slot 1", puts: []put{{1, func(time.Time) []byte { return encodeRecord([]byte("other"), []byte("o"), time.Time{}, 1) }}},
			absent: true, setErr: ErrKeyCollision, afterSet: [2]int64{-1, -2}},
		{name: "another key expired in slot 0", puts: []put{{0, expired([]byte("other"), "o", 3)}},
			absent: true, afterSet: [2]int64{1, -1}},
		{name: "an engine block in slot 1", puts: []put{{1, func(time.Time) []byte { return []byte("not a record") }}},
			absent: true, setErr: ErrKeyCollision, afterSet: [2]int64{-1, -2}},
	}
	// seed stores puts in key's slots and clears the delete log.
	seed := func(t *testing.T, puts []put) (*Store, *deleteLog, [2]block.Key) {
		t.Helper()
		s, log, now := newLoggedStore(t)
		n, _ := s.blocks.Namespace("default")
		k := s.slotKeys(n, key)
		for _, p := range puts {
			if err := s.blocks.Put(context.Background(), k[p.slot], p.rec(*now), block.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		log.mu.Lock()
		log.deleted = nil
		log.mu.Unlock()
		return s, log, k
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _ := seed(t, tc.puts)
			ctx := context.Background()
			got, ok := get(t, s, "default", string(key))
			if ok == tc.absent || got != tc.get {
				t.Fatalf("GET = %q, %v; want %q, %v", got, ok, tc.get, !tc.absent)
			}
			stored, err := s.Set(ctx, "default", key, []byte("new"), SetOptions{})
			if !errors.Is(err, tc.setErr) || (err == nil) != stored {
				t.Fatalf("SET = %v, %v; want %v", stored, err, tc.setErr)
			}
			if g := slotGens(t, s, key); g != tc.afterSet {
				t.Fatalf("slots after SET %v; want %v", g, tc.afterSet)
			}
			if tc.setErr == nil {
				if got, ok := get(t, s, "default", string(key)); !ok || got != "new" {
					t.Fatalf("GET after SET = %q, %v", got, ok)
				}
			}
		})
		t.Run(tc.name+"/DEL", func(t *testing.T) {
			s, log, k := seed(t, tc.puts)
			ctx := context.Background()
			ok, err := s.Delete(ctx, "default", key)
			if err != nil || ok != tc.del {
				t.Fatalf("DEL = %v, %v; want %v", ok, err, tc.del)
			}
			var want []block.Key
			for _, i := range tc.deleted {
				want = append(want, k[i])
			}
			log.mu.Lock()
			defer log.mu.Unlock()
			if fmt.Sprint(log.deleted) != fmt.Sprint(want) {
				t.Fatalf("DEL deleted %v; want %v (lower generation first)", log.deleted, want)
			}
			if _, ok := get(t, s, "default", string(key)); ok {
				t.Fatal("key readable after DEL")
			}
		})
	}
}

// TestReplaceRetiresOnlyTheVersionItRead: a writer that read version g
// never deletes a newer record put in that slot since (DeleteIf), so a
// replace that is late to retire its old slot cannot remove the key.
func TestReplaceRetiresOnlyTheVersionItRead(t *testing.T) {
	s, _, _ := newLoggedStore(t)
	ctx := context.Background()
	n, _ := s.blocks.Namespace("default")
	key := []byte("k")
	k := s.slotKeys(n, key)
	if _, err := s.Set(ctx, "default", key, []byte("g1"), SetOptions{}); err != nil {
		t.Fatal(err)
	}
	// A slow writer read g1 in slot 0; meanwhile two replaces moved the key
	// to slot 1 (g2) and back to slot 0 (g3).
	stale, err := s.readSlot(ctx, n, k[0])
	if err != nil || stale.rec.gen != 1 {
		t.Fatalf("slot 0: gen %d, %v", stale.rec.gen, err)
	}
	for _, v := range []string{"g2", "g3"} {
		if _, err := s.Set(ctx, "default", key, []byte(v), SetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if g := slotGens(t, s, key); g != [2]int64{3, -1} {
		t.Fatalf("slots %v", g)
	}
	retired := 0
	if err := s.drop(ctx, &stale, key, func([]byte) { retired++ }); err != nil {
		t.Fatal(err)
	}
	if got, ok := get(t, s, "default", "k"); !ok || got != "g3" || retired != 0 {
		t.Fatalf("after a stale retire: %q %v, retired %d", got, ok, retired)
	}
}

// TestReadersNeverSeeAMissOrAMix: readers loop GET of a key while writers
// replace it; every read returns one whole value a writer wrote.
func TestReadersNeverSeeAMissOrAMix(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	key := []byte("hot")
	value := func(w, i int) []byte {
		return bytes.Repeat(fmt.Appendf(nil, "[w%d i%04d]", w, i), 100)
	}
	if _, err := s.Set(ctx, "default", key, value(0, 0), SetOptions{}); err != nil {
		t.Fatal(err)
	}
	const writers, readers, rounds = 3, 3, 150
	var stop atomic.Bool
	var reads, gaveUp atomic.Int64
	errs := make(chan error, writers+readers)
	var wg sync.WaitGroup
	for r := range readers {
		wg.Go(func() {
			for !stop.Load() {
				v, err := s.Get(ctx, "default", key, ctxstore.ReadLocal)
				if err != nil {
					errs <- fmt.Errorf("reader %d: %w", r, err)
					return
				}
				d := v.Data
				unit := d[:bytes.IndexByte(d, ']')+1]
				if !bytes.Equal(d, bytes.Repeat(unit, 100)) {
					errs <- fmt.Errorf("reader %d: a mixed value %q...", r, d[:min(len(d), 40)]) //nolint:revive // the ellipsis marks a truncated value
					v.Release()
					return
				}
				v.Release()
				reads.Add(1)
			}
		})
	}
	var ww sync.WaitGroup
	for w := 1; w <= writers; w++ {
		ww.Go(func() {
			for i := range rounds {
				if _, err := s.Set(ctx, "default", key, value(w, i), SetOptions{}); errors.Is(err, block.ErrUnavailable) {
					gaveUp.Add(1)
				} else if err != nil {
					errs <- fmt.Errorf("writer %d: %w", w, err)
					return
				}
			}
		})
	}
	ww.Wait()
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if reads.Load() == 0 {
		t.Fatal("no read completed")
	}
	if g := slotGens(t, s, key); (g[0] < 0) == (g[1] < 0) {
		t.Fatalf("slots after the writers: %v; want exactly one", g)
	}
	t.Logf("%d reads during %d replaces (%d gave up)", reads.Load(), writers*rounds, gaveUp.Load())
}

// TestScanDuringASwapReturnsTheKeyOnce: with both slots of a key occupied
// (a writer between its put and its delete), SCAN, DBSIZE and listings
// return the key once, with the newer value, at every page size.
func TestScanDuringASwapReturnsTheKeyOnce(t *testing.T) {
	s := newObjectStore(t)
	ctx := context.Background()
	n, _ := s.blocks.Namespace("obj")
	for i := range 20 {
		if _, err := s.PutObject(ctx, "obj", fmt.Appendf(nil, "o%02d", i), bytes.NewReader([]byte("x")), PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Key o07 mid-swap: its newer manifest put beside the older one.
	key := []byte("o07")
	cur, err := s.manifest(ctx, n, key, ctxstore.ReadLocal)
	if err != nil {
		t.Fatal(err)
	}
	cur.ETag = `"newer"`
	k := s.slotKeys(n, key)
	p, _ := s.readPair(ctx, n, k, ctxstore.ReadLocal)
	c := p.current(key)
	gen := p[c].rec.gen
	p.release()
	if err := s.blocks.Put(ctx, k[1-c], encodeRecord(key, cur.encode(), time.Time{}, gen+1), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, count := range []int{1, 2, 3, 1000} {
		seen := map[string]int{}
		cursor := uint64(0)
		for {
			keys, next, err := s.Scan(ctx, "obj", cursor, count, nil, ctxstore.ReadLocal)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				seen[string(k)]++
			}
			if next == 0 {
				break
			}
			cursor = next
		}
		if len(seen) != 20 || seen["o07"] != 1 {
			t.Fatalf("count %d: scan saw %d keys, o07 %d times", count, len(seen), seen["o07"])
		}
	}
	if c, err := s.Count(ctx, "obj", ctxstore.ReadLocal); err != nil || c != 20 {
		t.Fatalf("Count %d, %v", c, err)
	}
	list, err := s.ListObjects(ctx, "obj", "", ctxstore.ReadLocal)
	if err != nil || len(list) != 20 || list[7].Key != "o07" || list[7].ETag != `"newer"` {
		t.Fatalf("listing: %d entries, %v (o07: %+v)", len(list), err, list[7])
	}
}

// TestRacingCompletionsOfOneUploadKeepTheParts: completions of one upload
// racing each other write manifests naming the same parts' data blocks;
// replacing one by another retires none of them, so the object reads whole,
// and every completion succeeds (one that finds the records dropped answers
// from the completion's record, completed.go).
func TestRacingCompletionsOfOneUploadKeepTheParts(t *testing.T) {
	s := newObjectStore(t)
	ctx := context.Background()
	u, err := s.CreateUpload(ctx, "obj", []byte("raced"), nil, block.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data := pattern(3<<20+17, 9) // 4 data blocks of 1 MiB
	m, err := s.UploadPart(ctx, "obj", u.ID, 1, bytes.NewReader(data), 0)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var done atomic.Int64
	errs := make(chan error, 5)
	for range 5 {
		wg.Go(func() {
			_, err := s.CompleteUpload(ctx, "obj", u.ID, []CompletedPart{{1, m.ETag}}, false)
			if err != nil {
				errs <- err
				return
			}
			done.Add(1)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if done.Load() != 5 {
		t.Fatalf("%d of 5 completions succeeded", done.Load())
	}
	got, _ := readAll(t, s, "raced")
	if !bytes.Equal(got, data) {
		t.Fatalf("object after %d racing completions: %d bytes, want %d intact", done.Load(), len(got), len(data))
	}
	// One manifest record, the part's 4 data blocks and the completion's
	// record are left.
	if n := blockCount(t, s, "obj"); n != 6 {
		t.Fatalf("%d blocks left, want 6", n)
	}
}

// TestSetOfTheSameValueWritesNothing: SET of the value (and expiry) a key
// already holds succeeds without a new generation, as many clients setting
// one key to one value (redis-benchmark, LMCache re-putting a chunk) do.
func TestSetOfTheSameValueWritesNothing(t *testing.T) {
	s, now := newStore(t)
	ctx := context.Background()
	key := []byte("same")
	steps := []struct {
		name  string
		value string
		opts  SetOptions
		gens  [2]int64
	}{
		{"first", "v", SetOptions{}, [2]int64{1, -1}},
		{"same value", "v", SetOptions{}, [2]int64{1, -1}},
		{"same value, KEEPTTL", "v", SetOptions{KeepTTL: true}, [2]int64{1, -1}},
		{"same value, another expiry", "v", SetOptions{Expires: now.Add(time.Hour)}, [2]int64{-1, 2}},
		{"other value", "w", SetOptions{Expires: now.Add(time.Hour)}, [2]int64{3, -1}},
	}
	for _, st := range steps {
		if ok, err := s.Set(ctx, "default", key, []byte(st.value), st.opts); !ok || err != nil {
			t.Fatalf("%s: Set = %v, %v", st.name, ok, err)
		}
		if g := slotGens(t, s, key); g != st.gens {
			t.Fatalf("%s: slots %v, want %v", st.name, g, st.gens)
		}
	}
}
