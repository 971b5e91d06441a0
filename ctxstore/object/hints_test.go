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

// putLog is a tier that records the options of every block put (a unit-test
// observer; cmd/ctxd's TestCtxdObjectHints observes the hints' effect on
// real ctxd processes).
type putLog struct {
	block.Storage
	mu   sync.Mutex
	opts map[block.Key]block.PutOptions
}

func (p *putLog) Put(ctx context.Context, key block.Key, data []byte, sum uint32, opts block.PutOptions) error {
	err := p.Storage.Put(ctx, key, data, sum, opts)
	if err == nil {
		p.mu.Lock()
		p.opts[key] = opts
		p.mu.Unlock()
	}
	return err
}

// hintsOf returns the agent hints the blocks of ns were put with whose keys
// pick selects, by key.
func (p *putLog) hintsOf(pick func(block.Key) bool) map[block.Key]block.PutOptions {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[block.Key]block.PutOptions{}
	for k, o := range p.opts {
		if pick(k) {
			out[k] = block.PutOptions{Reuse: o.Reuse, Retain: o.Retain, Session: o.Session}
		}
	}
	return out
}

// newLoggedObjectStore is newObjectStore (1 MiB chunks) over a putLog.
func newLoggedObjectStore(t *testing.T) (*Store, *putLog) {
	t.Helper()
	log := &putLog{opts: map[block.Key]block.PutOptions{}}
	bs := newBlockStoreOver(t, func(tier block.Storage) block.Storage {
		log.Storage = tier
		return log
	})
	s, err := New(testObjectConfig(0), bs)
	if err != nil {
		t.Fatal(err)
	}
	return s, log
}

// objectBlocks returns the keys of key's object: its data blocks and the
// slot its manifest is in.
func objectBlocks(t *testing.T, s *Store, key string) map[block.Key]bool {
	t.Helper()
	ctx := context.Background()
	o, err := s.OpenObject(ctx, "obj", []byte(key), ctxstore.ReadLocal)
	if err != nil {
		t.Fatal(err)
	}
	out := map[block.Key]bool{}
	for _, p := range o.pieces(0, o.Size) {
		out[p.key] = true
	}
	n, _ := s.blocks.Namespace("obj")
	p, err := s.readPair(ctx, n, s.slotKeys(n, []byte(key)), ctxstore.ReadLocal)
	if err != nil {
		t.Fatal(err)
	}
	defer p.release()
	c := p.current([]byte(key))
	if c < 0 {
		t.Fatalf("%q: no record", key)
	}
	out[s.slotKeys(n, []byte(key))[c]] = true
	return out
}

// TestObjectHints: the hints of a PutObject, and those an upload was
// created with, reach every data block of the object and its manifest
// record, and no other block (a part's or upload's record, an unhinted
// object's blocks); invalid hints store nothing.
func TestObjectHints(t *testing.T) {
	ctx := context.Background()
	hinted := block.PutOptions{Reuse: block.ReuseSession, Retain: 10 * time.Minute, Session: 42}
	for _, tc := range []struct {
		name      string
		hints     block.PutOptions
		multipart bool
		blocks    int // data blocks + manifest
	}{
		{"put", hinted, false, 5},
		{"put never", block.PutOptions{Reuse: block.ReuseNever}, false, 5},
		{"put unhinted", block.PutOptions{}, false, 5},
		{"multipart", hinted, true, 9},
		{"multipart unhinted", block.PutOptions{}, true, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, log := newLoggedObjectStore(t)
			key := "k/" + tc.name
			var data []byte
			if tc.multipart {
				// Parts of 5 MiB and 2.5 MiB: 5 + 3 data blocks of 1 MiB.
				u, err := s.CreateUpload(ctx, "obj", []byte(key), nil, tc.hints)
				if err != nil {
					t.Fatal(err)
				}
				if got, err := s.GetUpload(ctx, "obj", u.ID, ctxstore.ReadLocal); err != nil || got.Hints != tc.hints {
					t.Fatalf("upload record hints %+v, %v; want %+v", got.Hints, err, tc.hints)
				}
				var list []CompletedPart
				for i, size := range []int{MinPartSize, 5 << 19} {
					part := pattern(size, byte(i))
					data = append(data, part...)
					m, err := s.UploadPart(ctx, "obj", u.ID, i+1, bytes.NewReader(part), 0)
					if err != nil {
						t.Fatal(err)
					}
					list = append(list, CompletedPart{Number: i + 1, ETag: m.ETag})
				}
				if _, err := s.CompleteUpload(ctx, "obj", u.ID, list, false); err != nil {
					t.Fatal(err)
				}
			} else {
				data = pattern(3<<20+5, 9)
				if _, err := s.PutObject(ctx, "obj", []byte(key), bytes.NewReader(data), PutObjectOptions{Hints: tc.hints}); err != nil {
					t.Fatal(err)
				}
			}
			// An unhinted object beside it.
			if _, err := s.PutObject(ctx, "obj", []byte("other"), bytes.NewReader(pattern(2<<20, 3)), PutObjectOptions{}); err != nil {
				t.Fatal(err)
			}
			mine := objectBlocks(t, s, key)
			if len(mine) != tc.blocks {
				t.Fatalf("object is %d blocks, want %d", len(mine), tc.blocks)
			}
			for k, o := range log.hintsOf(func(block.Key) bool { return true }) {
				want := block.PutOptions{}
				if mine[k] {
					want = tc.hints
				}
				if o != want {
					t.Errorf("block %s (of the object: %v) put with hints %+v, want %+v", k, mine[k], o, want)
				}
			}
			o, err := s.OpenObject(ctx, "obj", []byte(key), ctxstore.ReadLocal)
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if _, err := o.WriteRange(ctx, &got, 0, o.Size, RangeOptions{}); err != nil || !bytes.Equal(got.Bytes(), data) {
				t.Fatalf("read back: %v (%d bytes, want %d)", err, got.Len(), len(data))
			}
		})
	}
}

// TestObjectHintsRejected: invalid hints are block.ErrInvalidArgument and
// write no block (PutObject) and create no upload (CreateUpload).
func TestObjectHintsRejected(t *testing.T) {
	ctx := context.Background()
	for _, h := range []block.PutOptions{
		{Reuse: block.MaxReuse + 1},
		{Retain: -time.Second},
		{Retain: block.MaxRetain + time.Millisecond},
		{Reuse: block.ReuseNever, Retain: time.Second},
	} {
		t.Run(fmt.Sprintf("%+v", h), func(t *testing.T) {
			s, log := newLoggedObjectStore(t)
			if _, err := s.PutObject(ctx, "obj", []byte("k"), bytes.NewReader([]byte("abc")), PutObjectOptions{Hints: h}); !errors.Is(err, block.ErrInvalidArgument) {
				t.Fatalf("PutObject: %v", err)
			}
			if _, err := s.CreateUpload(ctx, "obj", []byte("k"), nil, h); !errors.Is(err, block.ErrInvalidArgument) {
				t.Fatalf("CreateUpload: %v", err)
			}
			if n := len(log.hintsOf(func(block.Key) bool { return true })); n != 0 {
				t.Fatalf("%d blocks written", n)
			}
			if ups, err := s.ListUploads(ctx, "obj", "", ctxstore.ReadLocal); err != nil || len(ups) != 0 {
				t.Fatalf("uploads %v, %v", ups, err)
			}
		})
	}
}

// TestUploadRecordFormats: an upload without hints is written in the
// first format (older nodes read it), one with hints in the second, and
// both decode to what was encoded.
func TestUploadRecordFormats(t *testing.T) {
	for _, tc := range []struct {
		hints block.PutOptions
		magic string
	}{
		{block.PutOptions{}, uploadMagic},
		{block.PutOptions{Session: 1}, uploadMagicHints},
		{block.PutOptions{Reuse: block.ReuseShared, Retain: block.MaxRetain, Session: 1<<64 - 1}, uploadMagicHints},
	} {
		u := Upload{ID: "0123456789abcdef", Key: "a", Initiated: time.Unix(3, 0).UTC(), Headers: []Header{{"x-amz-meta-ctx-session", "1"}}, Hints: tc.hints}
		b := u.encode()
		if string(b[:len(tc.magic)]) != tc.magic {
			t.Errorf("%+v: magic %q, want %q", tc.hints, b[:len(tc.magic)], tc.magic)
		}
		got, err := decodeUpload(u.ID, b)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(u) {
			t.Errorf("%+v: decoded %+v, %v", tc.hints, got, err)
		}
	}
	// The hints format with no hints, or invalid ones, is refused.
	bad := appendStr([]byte(uploadMagicHints), "a")
	bad = append(bad, 0, 0) // time 0, no headers
	for _, tail := range [][]byte{
		appendHints(nil, block.PutOptions{}),
		appendHints(nil, block.PutOptions{Reuse: block.ReuseNever, Retain: time.Second}),
		appendHints(nil, block.PutOptions{Reuse: block.MaxReuse + 1, Session: 1}),
	} {
		if _, err := decodeUpload("0123456789abcdef", append(bytes.Clone(bad), tail...)); !errors.Is(err, block.ErrInvalidArgument) {
			t.Errorf("tail %x decoded: %v", tail, err)
		}
	}
}
