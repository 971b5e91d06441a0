package object

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TestCompleteAgain: completing an upload again answers the first
// completion's success (a retry, or completions of one upload at once),
// the object holds the uploaded bytes, nothing leaks, and the completion is
// forgotten after CompletedTTL.
func TestCompleteAgain(t *testing.T) {
	for _, tt := range []struct {
		name string
		at   int // completions at once
	}{
		{"again after the first", 1},
		{"five at once", 5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newObjectStore(t)
			ctx := context.Background()
			u, err := s.CreateUpload(ctx, "obj", []byte("k"), nil, block.PutOptions{})
			if err != nil {
				t.Fatal(err)
			}
			p1, p2 := pattern(MinPartSize, 7), pattern(1234, 8)
			var list []CompletedPart
			for i, p := range [][]byte{p1, p2} {
				m, err := s.UploadPart(ctx, "obj", u.ID, i+1, bytes.NewReader(p), 0)
				if err != nil {
					t.Fatal(err)
				}
				list = append(list, CompletedPart{i + 1, m.ETag})
			}
			etags := make([]string, tt.at)
			errs := make([]error, tt.at)
			var wg sync.WaitGroup
			for i := range tt.at {
				wg.Go(func() {
					m, err := s.CompleteUpload(ctx, "obj", u.ID, list, false)
					etags[i], errs[i] = m.ETag, err
				})
			}
			wg.Wait()
			again, err := s.CompleteUpload(ctx, "obj", u.ID, list, false)
			if err != nil {
				t.Fatalf("completing again: %v", err)
			}
			for i := range tt.at {
				if errs[i] != nil || etags[i] != again.ETag {
					t.Fatalf("completion %d: ETag %s, err %v; again: %s", i, etags[i], errs[i], again.ETag)
				}
			}
			key, m, err := s.CompletedUpload(ctx, "obj", u.ID, ctxstore.ReadLocal)
			if err != nil || key != "k" || m.ETag != again.ETag || m.Size != int64(len(p1)+len(p2)) || m.Parts != 2 {
				t.Fatalf("CompletedUpload: %q %+v %v", key, m, err)
			}
			got, _ := readAll(t, s, "k")
			if !bytes.Equal(got, append(bytes.Clone(p1), p2...)) {
				t.Fatalf("object holds %d bytes, not the parts'", len(got))
			}
			// The manifest, its 5+1 chunks and the completion's record.
			if n := blockCount(t, s, "obj"); n != 8 {
				t.Fatalf("%d blocks after the completions, want 8", n)
			}
			s.now = func() time.Time { return time.Now().Add(s.cfg.CompletedTTL + time.Minute) }
			if _, err := s.CompleteUpload(ctx, "obj", u.ID, list, false); !errors.Is(err, ErrNoSuchUpload) {
				t.Fatalf("completing after CompletedTTL: %v, want NoSuchUpload", err)
			}
			if _, err := s.SweepUploads(ctx, "obj", time.Hour); err != nil {
				t.Fatal(err)
			}
			if n := blockCount(t, s, "obj"); n != 7 {
				t.Fatalf("%d blocks after the sweep, want 7 (the record swept)", n)
			}
			got, _ = readAll(t, s, "k")
			if !bytes.Equal(got, append(bytes.Clone(p1), p2...)) {
				t.Fatal("the sweep changed the object")
			}
		})
	}
}

// TestCompleteAgainIsNotAnotherUpload: only a completed upload's own id is
// answered from its record; another id is still NoSuchUpload.
func TestCompleteAgainIsNotAnotherUpload(t *testing.T) {
	s := newObjectStore(t)
	ctx := context.Background()
	for _, id := range []string{"0123456789abcdef", "not-an-id", ""} {
		if _, err := s.CompleteUpload(ctx, "obj", id, []CompletedPart{{1, `"x"`}}, false); !errors.Is(err, ErrNoSuchUpload) {
			t.Fatalf("%q: %v, want NoSuchUpload", id, err)
		}
		if _, _, err := s.CompletedUpload(ctx, "obj", id, ctxstore.ReadLocal); !errors.Is(err, ErrNoSuchUpload) {
			t.Fatalf("CompletedUpload(%q): %v", id, err)
		}
	}
}

func FuzzDecodeDone(f *testing.F) {
	f.Add(encodeDone("a/b", Meta{Size: 15 << 20, ETag: `"x-3"`, Parts: 3, Modified: time.Unix(5, 0).UTC(), Headers: []Header{{"content-type", "y"}}}))
	f.Add(encodeDone("", Meta{}))
	f.Add([]byte("CTXC\x01\x01k\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		key, m, err := decodeDone(b)
		if err != nil {
			return
		}
		k2, m2, err := decodeDone(encodeDone(key, m))
		if err != nil || k2 != key || fmt.Sprint(m2) != fmt.Sprint(m) {
			t.Fatalf("re-encode: %v\n%q %+v\n%q %+v", err, key, m, k2, m2)
		}
	})
}
