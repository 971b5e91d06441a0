package object

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TestObjectSpans: an object of three multipart parts (segments of 5, 6 and
// 1 blocks of 1 MiB, the second ending in a 3-byte block) lists its blocks
// contiguously, each block holding exactly the object's bytes at its span,
// and paging from any offset gives the same list.
func TestObjectSpans(t *testing.T) {
	s := newObjectStore(t)
	ctx := context.Background()
	u, err := s.CreateUpload(ctx, "obj", []byte("big"), nil, block.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	parts := [][]byte{pattern(MinPartSize, 1), pattern(MinPartSize+3, 2), pattern(1000, 3)}
	var done []CompletedPart
	for i, p := range parts {
		m, err := s.UploadPart(ctx, "obj", u.ID, i+1, bytes.NewReader(p), 0)
		if err != nil {
			t.Fatal(err)
		}
		done = append(done, CompletedPart{i + 1, m.ETag})
	}
	if _, err := s.CompleteUpload(ctx, "obj", u.ID, done, false); err != nil {
		t.Fatal(err)
	}
	whole := bytes.Join(parts, nil)
	o, err := s.OpenObject(ctx, "obj", []byte("big"), ctxstore.ReadLocal)
	if err != nil {
		t.Fatal(err)
	}
	all, next, err := o.Spans(0, 0)
	if err != nil || next != -1 {
		t.Fatalf("spans: next %d, %v", next, err)
	}
	if len(all) != 5+6+1 {
		t.Fatalf("%d spans, want 12", len(all))
	}
	var at int64
	keys := map[block.Key]bool{}
	for i, sp := range all {
		if sp.Offset != at || sp.Length < 1 || keys[sp.Key] {
			t.Fatalf("span %d = %+v at %d (keys seen %d)", i, sp, at, len(keys))
		}
		keys[sp.Key] = true
		ref, err := s.blocks.Get(ctx, sp.Key)
		if err != nil {
			t.Fatalf("span %d block: %v", i, err)
		}
		if !bytes.Equal(ref.Data, whole[sp.Offset:sp.Offset+sp.Length]) {
			t.Fatalf("span %d: block bytes differ from the object's at %d+%d", i, sp.Offset, sp.Length)
		}
		ref.Release()
		at += sp.Length
	}
	if at != int64(len(whole)) || all[10].Length != 3 {
		t.Fatalf("spans cover %d of %d bytes; block 10 has %d bytes, want 3", at, len(whole), all[10].Length)
	}
	for _, tt := range []struct {
		name  string
		from  int64
		limit int
		first int // index in all of the first span returned
	}{
		{"all pages of 4", 0, 4, 0},
		{"pages of 1", 0, 1, 0},
		{"mid block", 3<<20 + 5, 5, 3},
		{"block edge", 5 << 20, 2, 5},
		{"last byte", int64(len(whole)) - 1, 3, 11},
		{"inside the 3-byte block", 10<<20 + 1, 0, 10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []Span
			for from := tt.from; from != -1; {
				page, next, err := o.Spans(from, tt.limit)
				if err != nil {
					t.Fatal(err)
				}
				if len(page) == 0 || (tt.limit > 0 && len(page) > tt.limit) || (next != -1 && next <= from) {
					t.Fatalf("page from %d: %d spans, next %d", from, len(page), next)
				}
				got = append(got, page...)
				from = next
			}
			if want := all[tt.first:]; len(got) != len(want) || got[0] != want[0] || got[len(got)-1] != want[len(want)-1] {
				t.Fatalf("%d spans from %d, want %d starting at %d", len(got), tt.from, len(want), tt.first)
			}
		})
	}
	for _, from := range []int64{-1, int64(len(whole)), 1 << 40} {
		if _, _, err := o.Spans(from, 0); !errors.Is(err, block.ErrInvalidArgument) {
			t.Fatalf("from %d: %v, want ErrInvalidArgument", from, err)
		}
	}
}
