package object

import (
	"bytes"
	"context"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/blocktest"
)

// TestReadLevelIsExplicit: every read takes its level as a parameter, and
// syncs once at ctxstore.ReadLinearizable (a listing or a part list too, not
// once per block); the writes read locally except a conditional write and a
// multipart completion, which read linearizable.
func TestReadLevelIsExplicit(t *testing.T) {
	var tier *blocktest.Syncing
	bs := newBlockStoreOver(t, func(st block.Storage) block.Storage {
		tier = &blocktest.Syncing{Storage: st}
		return tier
	})
	s, err := New(testObjectConfig(0), bs)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const lin, local = ctxstore.ReadLinearizable, ctxstore.ReadLocal
	if _, err := s.Set(ctx, "default", []byte("k"), []byte("v"), SetOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutObject(ctx, "obj", []byte("o"), bytes.NewReader([]byte("object")), PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	// upload begins an upload of key with one part.
	upload := func(key string) (Upload, Meta) {
		u, err := s.CreateUpload(ctx, "obj", []byte(key), nil, block.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		part, err := s.UploadPart(ctx, "obj", u.ID, 1, bytes.NewReader([]byte("part")), 0)
		if err != nil {
			t.Fatal(err)
		}
		return u, part
	}
	u, part := upload("m")
	done, donePart := upload("d")
	cases := []struct {
		name  string
		op    func() error
		syncs int64
	}{
		{"get, local", func() error { v, err := s.Get(ctx, "default", []byte("k"), local); v.Release(); return err }, 0},
		{"get", func() error { v, err := s.Get(ctx, "default", []byte("k"), lin); v.Release(); return err }, 1},
		{"exists", func() error { _, err := s.Exists(ctx, "default", []byte("k"), lin); return err }, 1},
		{"scan", func() error { _, _, err := s.Scan(ctx, "default", 0, 10, nil, lin); return err }, 1},
		{"scan, local", func() error { _, _, err := s.Scan(ctx, "default", 0, 10, nil, local); return err }, 0},
		{"count", func() error { _, err := s.Count(ctx, "default", lin); return err }, 1},
		{"stat object", func() error { _, err := s.StatObject(ctx, "obj", []byte("o"), lin); return err }, 1},
		{"open object", func() error { _, err := s.OpenObject(ctx, "obj", []byte("o"), lin); return err }, 1},
		{"list objects", func() error { _, err := s.ListObjects(ctx, "obj", "", lin); return err }, 1},
		{"list objects, local", func() error { _, err := s.ListObjects(ctx, "obj", "", local); return err }, 0},
		{"get upload", func() error { _, err := s.GetUpload(ctx, "obj", u.ID, lin); return err }, 1},
		{"list parts", func() error { _, _, err := s.ListParts(ctx, "obj", u.ID, lin); return err }, 1},
		{"list parts, local", func() error { _, _, err := s.ListParts(ctx, "obj", u.ID, local); return err }, 0},
		{"list uploads", func() error { _, err := s.ListUploads(ctx, "obj", "", lin); return err }, 1},
		{"plain set", func() error { _, err := s.Set(ctx, "default", []byte("k"), []byte("v2"), SetOptions{}); return err }, 0},
		{"set if absent", func() error {
			_, err := s.Set(ctx, "default", []byte("nx"), []byte("v"), SetOptions{Cond: IfAbsent})
			return err
		}, 1},
		{"plain put object", func() error {
			_, err := s.PutObject(ctx, "obj", []byte("o"), bytes.NewReader([]byte("object 2")), PutObjectOptions{})
			return err
		}, 0},
		// The precondition checked before the body is written, then
		// atomically with the manifest's put: two linearizable reads.
		{"put object if absent", func() error {
			_, err := s.PutObject(ctx, "obj", []byte("new"), bytes.NewReader([]byte("object")), PutObjectOptions{IfAbsent: true})
			return err
		}, 2},
		{"complete upload", func() error {
			_, err := s.CompleteUpload(ctx, "obj", done.ID, []CompletedPart{{Number: 1, ETag: donePart.ETag}}, false)
			return err
		}, 1},
		{"completed upload", func() error { _, _, err := s.CompletedUpload(ctx, "obj", done.ID, lin); return err }, 1},
		{"delete", func() error { _, err := s.Delete(ctx, "default", []byte("nx")); return err }, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := tier.Syncs()
			if err := tc.op(); err != nil {
				t.Fatal(err)
			}
			if got := tier.Syncs() - before; got != tc.syncs {
				t.Fatalf("%d syncs, want %d", got, tc.syncs)
			}
		})
	}
	if _, ps, err := s.ListParts(ctx, "obj", u.ID, local); err != nil || len(ps) != 1 || ps[0].ETag != part.ETag {
		t.Fatalf("parts %v, %v", ps, err)
	}
}
