package object

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/tiers/dram"
)

// newStore builds an object store over a real DRAM tier, with a settable clock.
func newStore(t *testing.T) (*Store, *time.Time) {
	t.Helper()
	return newStoreOver(t, nil)
}

// newStoreOver is newStore with the DRAM tier seen through wrap (nil: as
// it is), e.g. a tier that records deletes.
func newStoreOver(t *testing.T, wrap func(block.Storage) block.Storage) (*Store, *time.Time) {
	t.Helper()
	cat, err := ctxstore.OpenFileCatalog(filepath.Join(t.TempDir(), "namespaces.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := dram.DefaultConfig()
	cfg.Capacity = 16 << 20
	cfg.MaxBlockSize = 4 << 20
	tier, err := dram.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tier.Close() })
	var storage block.Storage = tier
	if wrap != nil {
		storage = wrap(tier)
	}
	bs, err := ctxstore.New(ctxstore.DefaultConfig(), cat, storage, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	small := block.DefaultNamespaceConfig()
	small.Name, small.MaxBlockSize = "small", 100
	if err := bs.CreateNamespace(context.Background(), small); err != nil {
		t.Fatal(err)
	}
	s, err := New(DefaultConfig(), bs)
	if err != nil {
		t.Fatal(err)
	}
	// The tiers expire blocks on the real clock, so the test clock starts
	// at the real time (on a millisecond, the records' resolution) and only
	// moves forward.
	now := time.Now().Truncate(time.Millisecond)
	s.now = func() time.Time { return now }
	return s, &now
}

func get(t *testing.T, s *Store, ns, key string) (string, bool) {
	t.Helper()
	v, err := s.Get(context.Background(), ns, []byte(key), ctxstore.ReadLocal)
	if errors.Is(err, block.ErrNotFound) {
		return "", false
	}
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	defer v.Release()
	if string(v.Key) != key {
		t.Fatalf("get %q returned the record of %q", key, v.Key)
	}
	return string(v.Data), true
}

func TestSetGetReplace(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	steps := []struct {
		name    string
		key     string
		value   string
		opts    SetOptions
		stored  bool
		wantVal string
		wantOK  bool
	}{
		{"first set", "a", "one", SetOptions{}, true, "one", true},
		{"same bytes again", "a", "one", SetOptions{}, true, "one", true},
		{"other bytes replace", "a", "two", SetOptions{}, true, "two", true},
		{"NX on present key", "a", "three", SetOptions{Cond: IfAbsent}, false, "two", true},
		{"XX on present key", "a", "four", SetOptions{Cond: IfPresent}, true, "four", true},
		{"XX on absent key", "b", "x", SetOptions{Cond: IfPresent}, false, "", false},
		{"NX on absent key", "b", "y", SetOptions{Cond: IfAbsent}, true, "y", true},
		{"empty value", "c", "", SetOptions{}, true, "", true},
		{"binary key", "k\x00\xff\r\n", "bin", SetOptions{}, true, "bin", true},
	}
	for _, st := range steps {
		ok, err := s.Set(ctx, "default", []byte(st.key), []byte(st.value), st.opts)
		if err != nil || ok != st.stored {
			t.Fatalf("%s: Set = %v, %v; want %v", st.name, ok, err, st.stored)
		}
		got, found := get(t, s, "default", st.key)
		if found != st.wantOK || got != st.wantVal {
			t.Fatalf("%s: Get = %q, %v; want %q, %v", st.name, got, found, st.wantVal, st.wantOK)
		}
	}
	// The replaced value's block is retired: exactly one block per key.
	infos, err := s.Blocks().List(ctx, "default", "", "", 100, ctxstore.ReadOptions{})
	if err != nil || len(infos) != 4 {
		t.Fatalf("blocks after replaces: %d, %v; want 4", len(infos), err)
	}
}

func TestExpiry(t *testing.T) {
	s, now := newStore(t)
	ctx := context.Background()
	k := []byte("ttl")
	if _, err := s.Set(ctx, "default", k, []byte("v1"), SetOptions{Expires: now.Add(10 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	v, err := s.Get(ctx, "default", k, ctxstore.ReadLocal)
	if err != nil || !v.Expires.Equal(now.Add(10*time.Second)) {
		t.Fatalf("expires %v, %v", v, err)
	}
	v.Release()
	// KEEPTTL keeps it across a replace; a plain Set clears it.
	if _, err := s.Set(ctx, "default", k, []byte("v2"), SetOptions{KeepTTL: true}); err != nil {
		t.Fatal(err)
	}
	if v, err = s.Get(ctx, "default", k, ctxstore.ReadLocal); err != nil || !v.Expires.Equal(now.Add(10*time.Second)) || string(v.Data) != "v2" {
		t.Fatalf("after KEEPTTL: %+v, %v", v, err)
	}
	v.Release()
	*now = now.Add(11 * time.Second)
	if _, ok := get(t, s, "default", "ttl"); ok {
		t.Fatal("expired key still readable")
	}
	if ok, _ := s.Exists(ctx, "default", k, ctxstore.ReadLocal); ok {
		t.Fatal("expired key exists")
	}
	// An expired key is absent for NX, and its slot is reused.
	if ok, err := s.Set(ctx, "default", k, []byte("v3"), SetOptions{Cond: IfAbsent}); !ok || err != nil {
		t.Fatalf("NX over expired: %v %v", ok, err)
	}
	// SetExpiry: persist, set, and a past time deletes.
	if ok, err := s.SetExpiry(ctx, "default", k, now.Add(time.Minute)); !ok || err != nil {
		t.Fatalf("expire: %v %v", ok, err)
	}
	if v, err = s.Get(ctx, "default", k, ctxstore.ReadLocal); err != nil || string(v.Data) != "v3" || !v.Expires.Equal(now.Add(time.Minute)) {
		t.Fatalf("after expire: %+v %v", v, err)
	}
	v.Release()
	if ok, err := s.SetExpiry(ctx, "default", k, time.Time{}); !ok || err != nil {
		t.Fatalf("persist: %v %v", ok, err)
	}
	if v, err = s.Get(ctx, "default", k, ctxstore.ReadLocal); err != nil || !v.Expires.IsZero() {
		t.Fatalf("after persist: %+v %v", v, err)
	}
	v.Release()
	if ok, err := s.SetExpiry(ctx, "default", k, now.Add(-time.Second)); !ok || err != nil {
		t.Fatalf("expire in the past: %v %v", ok, err)
	}
	if _, ok := get(t, s, "default", "ttl"); ok {
		t.Fatal("expire in the past did not delete")
	}
	if ok, err := s.SetExpiry(ctx, "default", []byte("nope"), now.Add(time.Minute)); ok || err != nil {
		t.Fatalf("expire of absent key: %v %v", ok, err)
	}
}

func TestCollisionIsAClearErrorAndKeepsTheFirstKey(t *testing.T) {
	s, now := newStore(t)
	ctx := context.Background()
	s.hash = func(string, []byte) uint64 { return 7 } // every key in one slot
	if _, err := s.Set(ctx, "default", []byte("first"), []byte("first's bytes"), SetOptions{Expires: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	for _, opts := range []SetOptions{{}, {Cond: IfAbsent}, {Cond: IfPresent}, {KeepTTL: true}} {
		ok, err := s.Set(ctx, "default", []byte("second"), []byte("second's bytes"), opts)
		if ok || !errors.Is(err, ErrKeyCollision) || !errors.Is(err, block.ErrConflict) {
			t.Fatalf("colliding Set %+v = %v, %v; want ErrKeyCollision", opts, ok, err)
		}
	}
	if _, ok := get(t, s, "default", "second"); ok {
		t.Fatal("the colliding key reads something")
	}
	if ok, _ := s.Exists(ctx, "default", []byte("second"), ctxstore.ReadLocal); ok {
		t.Fatal("the colliding key exists")
	}
	if ok, err := s.Delete(ctx, "default", []byte("second")); ok || err != nil {
		t.Fatalf("delete of the colliding key: %v %v", ok, err)
	}
	if got, ok := get(t, s, "default", "first"); !ok || got != "first's bytes" {
		t.Fatalf("first key = %q %v", got, ok)
	}
	// Once the first key expires its slot is free for the second.
	*now = now.Add(2 * time.Minute)
	if ok, err := s.Set(ctx, "default", []byte("second"), []byte("second's bytes"), SetOptions{}); !ok || err != nil {
		t.Fatalf("set after expiry: %v %v", ok, err)
	}
	if got, ok := get(t, s, "default", "second"); !ok || got != "second's bytes" {
		t.Fatalf("second key = %q %v", got, ok)
	}
}

func TestEngineBlockInSlotIsNeverReplaced(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	n, _ := s.Blocks().Namespace("default")
	k := []byte("key")
	kv := []byte("an engine's KV block, not a record")
	if err := s.Blocks().Put(ctx, s.SlotKey(n, k), kv, block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := get(t, s, "default", "key"); ok {
		t.Fatal("an engine block reads as a value")
	}
	if _, err := s.Set(ctx, "default", k, []byte("v"), SetOptions{}); !errors.Is(err, ErrKeyCollision) {
		t.Fatalf("set over an engine block: %v", err)
	}
	ref, err := s.Blocks().Get(ctx, s.SlotKey(n, k))
	if err != nil || !bytes.Equal(ref.Data, kv) {
		t.Fatalf("engine block changed: %v", err)
	}
	ref.Release()
}

func TestLimitsStoreNothing(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	n, _ := s.Blocks().Namespace("small")
	limit := s.MaxValueSize(n, 1)
	if limit != 100-HeaderSize-1 {
		t.Fatalf("limit %d", limit)
	}
	cases := []struct {
		name  string
		key   []byte
		value []byte
		want  error
	}{
		{"value one past the limit", []byte("k"), make([]byte, limit+1), block.ErrTooLarge},
		{"key too long", make([]byte, DefaultConfig().MaxKeyLen+1), []byte("v"), block.ErrInvalidKey},
	}
	for _, tc := range cases {
		ok, err := s.Set(ctx, "small", tc.key, tc.value, SetOptions{})
		if ok || !errors.Is(err, tc.want) {
			t.Fatalf("%s: %v %v; want %v", tc.name, ok, err, tc.want)
		}
	}
	if ok, err := s.Set(ctx, "small", []byte("k"), make([]byte, limit), SetOptions{}); !ok || err != nil {
		t.Fatalf("value at the limit: %v %v", ok, err)
	}
	// The node's own limit bounds records when it is below the namespace's.
	s.cfg.MaxBlockSize = 50
	if got := s.MaxValueSize(n, 1); got != 50-HeaderSize-1 {
		t.Fatalf("limit under the node's max block size: %d", got)
	}
	if _, err := s.Set(ctx, "small", []byte("j"), make([]byte, 50-HeaderSize), SetOptions{}); !errors.Is(err, block.ErrTooLarge) {
		t.Fatalf("value over the node's limit: %v", err)
	}
	s.cfg.MaxBlockSize = 0
	if _, err := s.Set(ctx, "nope", []byte("k"), []byte("v"), SetOptions{}); !errors.Is(err, block.ErrUnknownNamespace) {
		t.Fatalf("unknown namespace: %v", err)
	}
	infos, _ := s.Blocks().List(ctx, "small", "", "", 10, ctxstore.ReadOptions{})
	if len(infos) != 1 {
		t.Fatalf("%d blocks stored, want 1", len(infos))
	}
}

func TestScanReturnsEveryLiveKeyOnce(t *testing.T) {
	s, now := newStore(t)
	ctx := context.Background()
	want := map[string]bool{}
	for i := range 57 {
		k := fmt.Sprintf("key:%02d", i)
		var exp time.Time
		if i%10 == 0 {
			exp = now.Add(time.Second) // expires before the scan
		} else {
			want[k] = true
		}
		if _, err := s.Set(ctx, "default", []byte(k), []byte("v"), SetOptions{Expires: exp}); err != nil {
			t.Fatal(err)
		}
	}
	*now = now.Add(2 * time.Second)
	for _, count := range []int{1, 7, 1000} {
		seen := map[string]bool{}
		cursor, calls := uint64(0), 0
		for {
			keys, next, err := s.Scan(ctx, "default", cursor, count, nil, ctxstore.ReadLocal)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				if seen[string(k)] {
					t.Fatalf("count %d: %q returned twice", count, k)
				}
				seen[string(k)] = true
			}
			calls++
			if next == 0 {
				break
			}
			if next <= cursor {
				t.Fatalf("cursor went from %d to %d", cursor, next)
			}
			cursor = next
		}
		if len(seen) != len(want) {
			t.Fatalf("count %d: scan saw %d keys in %d calls, want %d", count, len(seen), calls, len(want))
		}
		for k := range want {
			if !seen[k] {
				t.Fatalf("count %d: %q missing", count, k)
			}
		}
	}
	keys, _, err := s.Scan(ctx, "default", 0, 1000, func(k []byte) bool { return bytes.HasSuffix(k, []byte("7")) }, ctxstore.ReadLocal)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, k := range keys {
		got = append(got, string(k))
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"key:07", "key:17", "key:27", "key:37", "key:47"}) {
		t.Fatalf("match: %v", got)
	}
	if n, err := s.Count(ctx, "default", ctxstore.ReadLocal); err != nil || n != int64(len(want)) {
		t.Fatalf("count %d %v, want %d", n, err, len(want))
	}
}

func TestConcurrentSetsEndOnOneValue(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	k := []byte("contended")
	var wg sync.WaitGroup
	var unavailable atomic.Int64
	errs := make(chan error, 8*20)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				_, err := s.Set(ctx, "default", k, fmt.Appendf(nil, "writer %d value %d", w, i), SetOptions{})
				if errors.Is(err, block.ErrUnavailable) {
					unavailable.Add(1)
				} else if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent set: %v", err)
	}
	// The key holds one whole value some writer wrote (a writer that gave
	// up with Unavailable never retired the value without putting its own:
	// a replace puts before it deletes).
	got, ok := get(t, s, "default", "contended")
	var w, i int
	if !ok {
		t.Fatalf("key absent after concurrent sets (%d gave up)", unavailable.Load())
	}
	if n, err := fmt.Sscanf(got, "writer %d value %d", &w, &i); n != 2 || err != nil || got != fmt.Sprintf("writer %d value %d", w, i) {
		t.Fatalf("final value %q is not one a writer wrote", got)
	}
	// Every replaced record was retired: one block (one slot) is left.
	infos, _ := s.Blocks().List(ctx, "default", "", "", 10, ctxstore.ReadOptions{})
	if len(infos) != 1 {
		t.Fatalf("%d blocks for one key", len(infos))
	}
}

func TestRecordDecodeRejectsDamage(t *testing.T) {
	good := encodeRecord([]byte("key"), []byte("value"), time.UnixMilli(5), 9)
	v1 := encodeRecordV1([]byte("key"), []byte("value"), time.UnixMilli(5))
	cases := []struct {
		name string
		b    []byte
		ok   bool
		gen  uint64
	}{
		{"good", good, true, 9},
		{"format 1 (before generations)", v1, true, 0},
		{"short", good[:HeaderSize-1], false, 0},
		{"format 1 short", v1[:headerSizeV1-1], false, 0},
		{"format 2 header cut to format 1's size", good[:headerSizeV1+3], false, 0},
		{"bad magic", append([]byte("XXXX"), good[4:]...), false, 0},
		{"bad version", append(append([]byte{}, good[:4]...), append([]byte{9}, good[5:]...)...), false, 0},
		{"key length past the end", append(append([]byte{}, good[:6]...), append([]byte{0xff, 0xff, 0, 0}, good[10:]...)...), false, 0},
	}
	for _, tc := range cases {
		r, err := decodeRecord(tc.b)
		if (err == nil) != tc.ok {
			t.Fatalf("%s: err %v", tc.name, err)
		}
		if tc.ok && (string(r.key) != "key" || string(r.value) != "value" || r.expires.UnixMilli() != 5 || r.gen != tc.gen) {
			t.Fatalf("%s: %+v", tc.name, r)
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(encodeRecord([]byte("key"), []byte("value"), time.Time{}, 1))
	f.Add(encodeRecord(nil, nil, time.UnixMilli(1), 1<<63))
	f.Add(encodeRecordV1([]byte("key"), []byte("value"), time.UnixMilli(7)))
	f.Add([]byte("CTXO\x01\x00\xff\xff\xff\xff"))
	f.Add([]byte("CTXO\x02\x00\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00key"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord(b)
		if err != nil {
			return
		}
		// A decoded record re-encodes to the same bytes (flags aside), in
		// its own format; format 1 has generation 0.
		again := encodeRecord(r.key, r.value, r.expires, r.gen)
		if b[4] == recordFormatV1 {
			if r.gen != 0 {
				t.Fatalf("format 1 record decoded with generation %d", r.gen)
			}
			again = encodeRecordV1(r.key, r.value, r.expires)
		}
		want := append([]byte{}, b...)
		want[5] = 0
		if !bytes.Equal(again, want) {
			t.Fatalf("re-encoding %x gave %x", want, again)
		}
	})
}

// TestSlotsDependOnTheSalt: the same key has another slot under another
// tenant salt, and the same slot under the same salt every time.
func TestSlotsDependOnTheSalt(t *testing.T) {
	cases := []struct {
		saltA, saltB string
		same         bool
	}{{"", "", true}, {"tenant-a", "tenant-a", true}, {"tenant-a", "tenant-b", false}, {"", "x", false}}
	for _, tc := range cases {
		a, b := slotHash(tc.saltA, []byte("key")), slotHash(tc.saltB, []byte("key"))
		if (a == b) != tc.same {
			t.Errorf("salts %q, %q: slots %x, %x", tc.saltA, tc.saltB, a, b)
		}
	}
}
