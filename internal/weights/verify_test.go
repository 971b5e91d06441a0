package weights

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

// XXH3-128 in its canonical (big-endian) hex form, as the reference
// implementation's Python binding (xxhash 4.1.0, xxh3_128_hexdigest)
// prints it: the manifest's digests are checkable outside Go.
func TestXXH3Hex(t *testing.T) {
	big := bytes.Repeat(func() []byte {
		b := make([]byte, 256)
		for i := range b {
			b[i] = byte(i)
		}
		return b
	}(), 4096)
	for _, tc := range []struct {
		in   []byte
		want string
	}{
		{nil, "99aa06d3014798d86001c324468d497f"},
		{[]byte("ctxtier weights"), "a919dc064a555124f75ebd249c09196d"},
		{big, "1b208d2839093774d36c0e13a3df139e"},
	} {
		if got := xxh3Hex(tc.in); got != tc.want {
			t.Errorf("xxh3Hex(%d bytes) = %s, want %s", len(tc.in), got, tc.want)
		}
	}
}

// sum (push) records per chunk the SHA-256 and XXH3-128 that a pull's
// one-shot checks compute over the same bytes, and the whole file's SHA-256.
func TestSumRecordsBothDigests(t *testing.T) {
	c := &Client{cfg: DefaultConfig()}
	c.cfg.ChunkSize = 5 << 20
	for _, size := range []int{0, 1, 5 << 20, 12<<20 + 3} {
		b := bytes.Repeat([]byte("weights!"), size/8+1)[:size]
		p := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		var f File
		if err := c.sum(p, &f); err != nil {
			t.Fatal(err)
		}
		n := int(chunkCount(int64(size), c.cfg.ChunkSize))
		if f.Size != int64(size) || len(f.Chunks) != n || len(f.ChunksXXH3) != n || f.SHA256 != sumHex(b) {
			t.Fatalf("size %d: %+v", size, f)
		}
		for i := range n {
			off, m := chunkSpan(c.cfg.ChunkSize, f.Size, i)
			piece := b[off : off+m]
			for _, alg := range []string{VerifyXXH3, VerifySHA256} {
				if !chunkOK(alg, f, i, piece) {
					t.Errorf("size %d chunk %d: %s check fails on the pushed bytes", size, i, alg)
				}
			}
		}
	}
}

// complete (a pull's "already there" check) uses the digest the
// configuration picks: every chunk's XXH3-128, or the whole file's SHA-256
// for VerifySHA256 and for manifests without XXH3-128s. Each case's
// manifest has a wrong value in the digest that must not be used, so a
// check that used it would fail.
func TestCompleteUsesTheChosenDigest(t *testing.T) {
	const chunk = 5 << 20
	data := bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7}, (11<<20)/7)
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var good File
	c := &Client{cfg: DefaultConfig()}
	c.cfg.ChunkSize = chunk
	if err := c.sum(p, &good); err != nil {
		t.Fatal(err)
	}
	badWhole := good
	badWhole.SHA256 = sumHex([]byte("other"))
	badXXH3 := good
	badXXH3.ChunksXXH3 = append([]string{}, good.ChunksXXH3...)
	badXXH3.ChunksXXH3[1] = xxh3Hex([]byte("other"))
	old := badWhole
	old.ChunksXXH3 = nil
	for _, tc := range []struct {
		name   string
		f      File
		verify string
		want   bool
	}{
		{"xxh3, good", good, VerifyXXH3, true},
		{"sha256, good", good, VerifySHA256, true},
		{"xxh3 ignores the whole-file SHA-256", badWhole, VerifyXXH3, true},
		{"sha256 checks the whole-file SHA-256", badWhole, VerifySHA256, false},
		{"xxh3 checks every chunk's XXH3-128", badXXH3, VerifyXXH3, false},
		{"sha256 ignores the XXH3-128s", badXXH3, VerifySHA256, true},
		{"xxh3 on an old manifest falls back to SHA-256", old, VerifyXXH3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, err := complete(p, tc.f, chunk, tc.verify)
			if err != nil || ok != tc.want {
				t.Fatalf("complete = %v, %v; want %v", ok, err, tc.want)
			}
		})
	}
	// A file one byte short or absent is never complete.
	short := good
	short.Size++
	if ok, err := complete(p, short, chunk, VerifyXXH3); ok || err != nil {
		t.Errorf("wrong size: %v %v", ok, err)
	}
	if ok, err := complete(filepath.Join(dir, "none"), good, chunk, VerifyXXH3); ok || err != nil {
		t.Errorf("missing file: %v %v", ok, err)
	}
}

// TestPullVerifiesWithTheChosenDigest: against a real ctxd, a manifest with
// one digest kind spoiled is pulled with each --verify choice; the pull
// fails with ErrChecksum exactly when the chosen digest (SHA-256 when the
// manifest has no XXH3-128s) is the spoiled one, so each check is really
// made, on the bytes that came over the network.
func TestPullVerifiesWithTheChosenDigest(t *testing.T) {
	n := startCtxd(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	src := t.TempDir()
	data := bytes.Repeat([]byte("0123456789abcdef"), (20<<20)/16)
	if err := os.WriteFile(filepath.Join(src, "w.safetensors"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	c := n.client(t, nil)
	m, err := c.Push(ctx, src, "m/v1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if f := m.Files[0]; len(f.ChunksXXH3) != 3 || len(f.Chunks) != 3 {
		t.Fatalf("pushed manifest: %d SHA-256 and %d XXH3-128 chunk sums, want 3 each", len(f.Chunks), len(f.ChunksXXH3))
	}
	other := xxh3Hex([]byte("other"))
	spoil := map[string]func(f *File){
		"none":   func(*File) {},
		"sha256": func(f *File) { f.Chunks[2] = sumHex([]byte("other")) },
		"xxh3":   func(f *File) { f.ChunksXXH3[2] = other },
		"old":    func(f *File) { f.ChunksXXH3 = nil }, // a manifest from before XXH3-128
		"old, sha256 spoiled": func(f *File) {
			f.ChunksXXH3 = nil
			f.Chunks[2] = sumHex([]byte("other"))
		},
	}
	for _, tc := range []struct {
		spoil, verify string
		fails         bool
	}{
		{"none", VerifyXXH3, false},
		{"none", VerifySHA256, false},
		{"sha256", VerifyXXH3, false},
		{"sha256", VerifySHA256, true},
		{"xxh3", VerifyXXH3, true},
		{"xxh3", VerifySHA256, false},
		{"old", VerifyXXH3, false},
		{"old, sha256 spoiled", VerifyXXH3, true},
	} {
		t.Run(tc.spoil+"/"+tc.verify, func(t *testing.T) {
			mm := *m
			mm.Files = []File{m.Files[0]}
			f := &mm.Files[0]
			f.Chunks, f.ChunksXXH3 = append([]string{}, f.Chunks...), append([]string{}, f.ChunksXXH3...)
			spoil[tc.spoil](f)
			b, err := json.Marshal(mm)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.mcs[0].PutObject(ctx, c.cfg.Namespace, c.objectName("m/v1", ManifestName), bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{}); err != nil {
				t.Fatal(err)
			}
			pc := n.client(t, func(cfg *Config) { cfg.Verify, cfg.Retries = tc.verify, 0 })
			dst := t.TempDir()
			st, err := pc.Pull(ctx, "m/v1", dst, nil)
			if tc.fails != errors.Is(err, ErrChecksum) {
				t.Fatalf("pull: %v (stats %+v); want a checksum error: %v", err, st, tc.fails)
			}
			if err == nil {
				got, rerr := os.ReadFile(filepath.Join(dst, "w.safetensors"))
				if rerr != nil || !bytes.Equal(got, data) {
					t.Fatalf("pulled file differs (%v)", rerr)
				}
			}
		})
	}
}
