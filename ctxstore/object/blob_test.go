package object

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/tiers/dram"
)

// newObjectStore builds a Store with an object namespace "obj" over a real
// DRAM tier, cutting objects into 1 MiB chunks and retiring replaced
// objects' blocks at once (retired_test.go covers RetireGrace).
func newObjectStore(t *testing.T) *Store {
	t.Helper()
	s, err := New(testObjectConfig(0), newBlockStore(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testObjectConfig is the tests' object configuration: 1 MiB chunks.
func testObjectConfig(grace time.Duration) Config {
	oc := DefaultConfig()
	oc.ChunkSize = 1 << 20
	oc.RetireGrace = grace
	return oc
}

// newBlockStore builds a block store with an object namespace "obj" over a
// real DRAM tier.
func newBlockStore(t testing.TB) *ctxstore.Store { return newBlockStoreOver(t, nil) }

// newBlockStoreOver is newBlockStore with the DRAM tier seen through wrap
// (nil: as it is), e.g. a tier that records puts.
func newBlockStoreOver(t testing.TB, wrap func(block.Storage) block.Storage) *ctxstore.Store {
	t.Helper()
	cat, err := ctxstore.OpenFileCatalog(filepath.Join(t.TempDir(), "namespaces.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := dram.DefaultConfig()
	cfg.Capacity = 96 << 20
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
	ns := block.DefaultNamespaceConfig()
	ns.Name, ns.Kind = "obj", block.KindObject
	if err := bs.CreateNamespace(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return bs
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x = x*1664525 + 1013904223
		b[i] = byte(x >> 24)
	}
	return b
}

// blockCount counts the blocks namespace ns holds (records and data).
func blockCount(t *testing.T, s *Store, ns string) int {
	t.Helper()
	infos, err := s.blocks.List(context.Background(), ns, "", "", 100000, ctxstore.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return len(infos)
}

func readAll(t *testing.T, s *Store, key string) ([]byte, Meta) {
	t.Helper()
	o, err := s.OpenObject(context.Background(), "obj", []byte(key), ctxstore.ReadLocal)
	if err != nil {
		t.Fatalf("open %q: %v", key, err)
	}
	var buf bytes.Buffer
	if n, err := o.WriteRange(context.Background(), &buf, 0, o.Size, RangeOptions{}); err != nil || n != o.Size {
		t.Fatalf("read %q: %d bytes, %v", key, n, err)
	}
	return buf.Bytes(), o.Meta
}

func TestPutObjectRoundTrip(t *testing.T) {
	s := newObjectStore(t)
	ctx := context.Background()
	for _, size := range []int{0, 1, 1<<20 - 1, 1 << 20, 3<<20 + 12345} {
		key := fmt.Sprintf("dir/ü %d/..x\x01y", size)
		data := pattern(size, byte(size))
		hdrs := []Header{{"Content-Type", "text/plain"}, {"X-Amz-Meta-A", "b"}}
		m, err := s.PutObject(ctx, "obj", []byte(key), bytes.NewReader(data), PutObjectOptions{Headers: hdrs})
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		sum := md5.Sum(data)
		if want := `"` + hex.EncodeToString(sum[:]) + `"`; m.ETag != want || m.Size != int64(size) {
			t.Fatalf("size %d: meta %+v, want ETag %s", size, m, want)
		}
		got, gm := readAll(t, s, key)
		if !bytes.Equal(got, data) || gm.ETag != m.ETag || len(gm.Headers) != 2 || gm.Headers[1] != hdrs[1] {
			t.Fatalf("size %d: read back %d bytes, meta %+v", size, len(got), gm)
		}
		o, _ := s.OpenObject(ctx, "obj", []byte(key), ctxstore.ReadLocal)
		for _, r := range [][2]int64{{0, 0}, {0, 1}, {int64(size) / 3, int64(size) / 2}, {int64(size) - 1, 1}} {
			if r[0] < 0 || r[0]+r[1] > int64(size) || (size == 0 && r[1] > 0) {
				continue
			}
			var b bytes.Buffer
			if _, err := o.WriteRange(ctx, &b, r[0], r[1], RangeOptions{}); err != nil || !bytes.Equal(b.Bytes(), data[r[0]:r[0]+r[1]]) {
				t.Fatalf("size %d range %v: %v", size, r, err)
			}
		}
	}
}

func TestPutObjectReplaceRetiresOldBlocks(t *testing.T) {
	s := newObjectStore(t)
	ctx := context.Background()
	if _, err := s.PutObject(ctx, "obj", []byte("k"), bytes.NewReader(pattern(3<<20+1, 1)), PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := blockCount(t, s, "obj"); n != 5 { // manifest + 4 chunks
		t.Fatalf("%d blocks after the first put, want 5", n)
	}
	v2 := pattern(1<<20+7, 2)
	if _, err := s.PutObject(ctx, "obj", []byte("k"), bytes.NewReader(v2), PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := readAll(t, s, "k"); !bytes.Equal(got, v2) {
		t.Fatal("replace did not return the new bytes")
	}
	if n := blockCount(t, s, "obj"); n != 3 {
		t.Fatalf("%d blocks after the replace, want 3 (the old version's chunks retired)", n)
	}
	if err := s.DeleteObject(ctx, "obj", []byte("k")); err != nil {
		t.Fatal(err)
	}
	if n := blockCount(t, s, "obj"); n != 0 {
		t.Fatalf("%d blocks after delete, want 0", n)
	}
	if _, err := s.StatObject(ctx, "obj", []byte("k"), ctxstore.ReadLocal); !errors.Is(err, block.ErrNotFound) {
		t.Fatalf("stat after delete: %v", err)
	}
	if err := s.DeleteObject(ctx, "obj", []byte("k")); err != nil {
		t.Fatalf("deleting an absent object: %v", err)
	}
}

// failingReader fails after n bytes, as a verifying body does on a bad digest.
type failingReader struct {
	r   io.Reader
	n   int
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, f.err
	}
	if len(p) > f.n {
		p = p[:f.n]
	}
	k, err := f.r.Read(p)
	f.n -= k
	return k, err
}

func TestPutObjectBadInputLeavesNothing(t *testing.T) {
	s := newObjectStore(t)
	ctx := context.Background()
	bad := errors.New("digest mismatch")
	tests := []struct {
		name string
		body io.Reader
		opts PutObjectOptions
		want error
	}{
		{"body fails late", &failingReader{r: bytes.NewReader(pattern(5<<20, 3)), n: 3<<20 + 5, err: bad}, PutObjectOptions{}, bad},
		{"over the limit", bytes.NewReader(pattern(3<<20, 3)), PutObjectOptions{Limit: 2<<20 + 1}, block.ErrTooLarge},
		{"if-match on a missing object", bytes.NewReader([]byte("x")), PutObjectOptions{IfMatch: `"abc"`}, block.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.PutObject(ctx, "obj", []byte("k"), tt.body, tt.opts); !errors.Is(err, tt.want) {
				t.Fatalf("err %v, want %v", err, tt.want)
			}
			if n := blockCount(t, s, "obj"); n != 0 {
				t.Fatalf("%d blocks left behind", n)
			}
		})
	}
	if _, err := s.PutObject(ctx, "default", []byte("k"), bytes.NewReader([]byte("x")), PutObjectOptions{}); !errors.Is(err, ErrNotObjectNamespace) {
		t.Fatalf("put into a block namespace: %v", err)
	}
}

func TestPutObjectConditions(t *testing.T) {
	s := newObjectStore(t)
	ctx := context.Background()
	// Racing If-None-Match: * writers (KVBM's lock objects): exactly one wins.
	const writers = 8
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.PutObject(ctx, "obj", []byte("h.lock"), bytes.NewReader(pattern(1<<20+10, byte(i))), PutObjectOptions{IfAbsent: true})
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, ErrPreconditionFailed):
			t.Fatalf("loser's error %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d writers won, want exactly 1", won)
	}
	if n := blockCount(t, s, "obj"); n != 3 {
		t.Fatalf("%d blocks, want the winner's 3 (losers' chunks retired)", n)
	}
	m, _ := s.StatObject(ctx, "obj", []byte("h.lock"), ctxstore.ReadLocal)
	if _, err := s.PutObject(ctx, "obj", []byte("h.lock"), bytes.NewReader([]byte("x")), PutObjectOptions{IfMatch: `"0000"`}); !errors.Is(err, ErrPreconditionFailed) {
		t.Fatalf("if-match with a stale ETag: %v", err)
	}
	if _, err := s.PutObject(ctx, "obj", []byte("h.lock"), bytes.NewReader([]byte("x")), PutObjectOptions{IfMatch: m.ETag}); err != nil {
		t.Fatalf("if-match with the current ETag: %v", err)
	}
}

func TestListObjectsSortedWithoutUploads(t *testing.T) {
	s := newObjectStore(t)
	ctx := context.Background()
	keys := []string{"b/2", "a", "b/1", "c", "ab"}
	for _, k := range keys {
		if _, err := s.PutObject(ctx, "obj", []byte(k), bytes.NewReader([]byte(k)), PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CreateUpload(ctx, "obj", []byte("b/3"), nil, block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		prefix string
		want   []string
	}{
		{"", []string{"a", "ab", "b/1", "b/2", "c"}},
		{"b/", []string{"b/1", "b/2"}},
		{"zz", nil},
	}
	for _, tt := range tests {
		es, err := s.ListObjects(ctx, "obj", tt.prefix, ctxstore.ReadLocal)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range es {
			got = append(got, e.Key)
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Fatalf("prefix %q: %v, want %v", tt.prefix, got, tt.want)
		}
	}
}

func TestMultipartUpload(t *testing.T) {
	s := newObjectStore(t)
	ctx := context.Background()
	u, err := s.CreateUpload(ctx, "obj", []byte("big"), []Header{{"Content-Type", "x/y"}}, block.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p1, p2, p3 := pattern(MinPartSize, 1), pattern(MinPartSize+3, 2), pattern(1000, 3)
	var etags [4]string
	for i, p := range [][]byte{p1, p2, p3} {
		m, err := s.UploadPart(ctx, "obj", u.ID, i+1, bytes.NewReader(p), 0)
		if err != nil {
			t.Fatal(err)
		}
		etags[i+1] = m.ETag
	}
	// Part 9 is uploaded but left out of the completion: it is retired.
	if _, err := s.UploadPart(ctx, "obj", u.ID, 9, bytes.NewReader([]byte("spare")), 0); err != nil {
		t.Fatal(err)
	}
	if _, ps, err := s.ListParts(ctx, "obj", u.ID, ctxstore.ReadLocal); err != nil || len(ps) != 4 || ps[3].Number != 9 {
		t.Fatalf("list parts: %v %v", ps, err)
	}
	bad := []struct {
		name string
		list []CompletedPart
		want error
	}{
		{"empty", nil, ErrInvalidPart},
		{"order", []CompletedPart{{2, etags[2]}, {1, etags[1]}}, ErrInvalidPartOrder},
		{"missing part", []CompletedPart{{1, etags[1]}, {4, etags[2]}}, ErrInvalidPart},
		{"etag mismatch", []CompletedPart{{1, etags[2]}, {2, etags[2]}}, ErrInvalidPart},
		{"too small", []CompletedPart{{3, etags[3]}, {9, `"` + hex.EncodeToString(md5Of("spare")) + `"`}}, ErrEntityTooSmall},
		{"too many", make([]CompletedPart, MaxParts+1), ErrInvalidPart},
	}
	for _, tt := range bad {
		if _, err := s.CompleteUpload(ctx, "obj", u.ID, tt.list, false); !errors.Is(err, tt.want) {
			t.Fatalf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	m, err := s.CompleteUpload(ctx, "obj", u.ID, []CompletedPart{{1, etags[1]}, {2, etags[2]}, {3, etags[3]}}, false)
	if err != nil {
		t.Fatal(err)
	}
	h := md5.New()
	for _, p := range [][]byte{p1, p2, p3} {
		h.Write(md5Of(string(p)))
	}
	if want := `"` + hex.EncodeToString(h.Sum(nil)) + `-3"`; m.ETag != want || m.Parts != 3 {
		t.Fatalf("multipart ETag %s parts %d, want %s", m.ETag, m.Parts, want)
	}
	got, gm := readAll(t, s, "big")
	if !bytes.Equal(got, append(append(bytes.Clone(p1), p2...), p3...)) || gm.Headers[0].Value != "x/y" {
		t.Fatalf("assembled object differs (%d bytes, %+v)", len(got), gm.Headers)
	}
	// Only the object's manifest, its 5+6+1 chunks and the record of the
	// completion (completed.go) remain.
	if n := blockCount(t, s, "obj"); n != 14 {
		t.Fatalf("%d blocks after completion, want 14", n)
	}
	if _, err := s.UploadPart(ctx, "obj", u.ID, 1, bytes.NewReader([]byte("x")), 0); !errors.Is(err, ErrNoSuchUpload) {
		t.Fatalf("part of a completed upload: %v", err)
	}
	// An abandoned upload is swept once past its TTL, with its parts.
	u2, _ := s.CreateUpload(ctx, "obj", []byte("gone"), nil, block.PutOptions{})
	if _, err := s.UploadPart(ctx, "obj", u2.ID, 1, bytes.NewReader(pattern(2<<20, 5)), 0); err != nil {
		t.Fatal(err)
	}
	if n, err := s.SweepUploads(ctx, "obj", time.Hour); err != nil || n != 0 {
		t.Fatalf("sweep of a fresh upload: %d %v", n, err)
	}
	s.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	if n, err := s.SweepUploads(ctx, "obj", time.Hour); err != nil || n != 1 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	// The completion's record went with the sweep too (older than
	// CompletedTTL).
	if n := blockCount(t, s, "obj"); n != 13 {
		t.Fatalf("%d blocks after the sweep, want 13", n)
	}
	if ups, _ := s.ListUploads(ctx, "obj", "", ctxstore.ReadLocal); len(ups) != 0 {
		t.Fatalf("uploads left: %v", ups)
	}
}

func md5Of(s string) []byte { h := md5.Sum([]byte(s)); return h[:] }

func FuzzDecodeManifest(f *testing.F) {
	f.Add(manifest{Meta: Meta{Size: 5, ETag: `"x"`, Headers: []Header{{"a", "b"}}}, Segments: []Segment{{1, 5, 4}}}.encode())
	f.Add(manifest{}.encode())
	f.Add([]byte("CTXM\x01\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeManifest(b)
		if err != nil {
			return
		}
		var total int64
		for _, g := range m.Segments {
			if g.Chunk < 1 || g.Blocks() > MaxChunksPerSegment {
				t.Fatalf("accepted segment %+v", g)
			}
			total += g.Size
		}
		if total != m.Size {
			t.Fatalf("segments sum %d, size %d", total, m.Size)
		}
		m2, err := decodeManifest(m.encode())
		if err != nil || fmt.Sprint(m2) != fmt.Sprint(m) {
			t.Fatalf("re-encode: %v\n%+v\n%+v", err, m, m2)
		}
	})
}

func FuzzDecodeUpload(f *testing.F) {
	f.Add(Upload{Key: "a/b", Initiated: time.Unix(5, 0), Headers: []Header{{"x-amz-meta-a", "b"}}}.encode())
	f.Add([]byte("CTXU\x01"))
	f.Add(Upload{Key: "k", Initiated: time.Unix(7, 0), Hints: block.PutOptions{Reuse: block.ReuseSession, Retain: time.Minute, Session: 9}}.encode())
	f.Add([]byte("CTXU\x02\x01k\x00\x00\x01\x80\x01\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := decodeUpload("0123456789abcdef", b)
		if err != nil {
			return
		}
		if err := u.Hints.ValidateHints(); err != nil {
			t.Fatalf("accepted invalid hints %+v: %v", u.Hints, err)
		}
		if u.Hints.Priority != 0 || u.Hints.PinTTL != 0 || !u.Hints.Expires.IsZero() {
			t.Fatalf("decoded more than hints: %+v", u.Hints)
		}
		if hinted := string(b[:5]) == uploadMagicHints; hinted != u.Hints.HasHints() {
			t.Fatalf("format %q decoded hints %+v", b[:5], u.Hints)
		}
		u2, err := decodeUpload(u.ID, u.encode())
		if err != nil || fmt.Sprint(u2) != fmt.Sprint(u) {
			t.Fatalf("re-encode: %v\n%+v\n%+v", err, u, u2)
		}
	})
}
