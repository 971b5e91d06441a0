package weights

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// writeCheckpoint writes a small checkpoint directory: a config, a nested
// tokenizer file and one 70 MiB weights file (over 64 MiB: several chunks
// and multipart parts). It returns the file sizes by path.
func writeCheckpoint(t *testing.T, dir string) map[string]int {
	t.Helper()
	files := map[string]int{
		"config.json":          1234,
		"model.safetensors":    70<<20 + 12345,
		"tokenizer/vocab.json": 300 << 10,
	}
	r := rand.New(rand.NewPCG(1, 2))
	for p, n := range files {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

func sameTree(t *testing.T, want, got string, files map[string]int) {
	t.Helper()
	for p := range files {
		a, err := os.ReadFile(filepath.Join(want, p))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(got, p))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s: pulled bytes differ from pushed ones", p)
		}
		if _, err := os.Stat(filepath.Join(got, p) + partSuffix); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: partial file left behind (%v)", p, err)
		}
	}
}

// pushPullFixture starts a ctxd and writes a checkpoint (writeCheckpoint)
// into a fresh source directory; it returns a context bounded to 3 minutes,
// a client of the node, the source and an empty destination directory, the
// files' sizes and their total.
func pushPullFixture(t *testing.T) (context.Context, *Client, string, string, map[string]int, int64) {
	t.Helper()
	n := startCtxd(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	src, dst := t.TempDir(), t.TempDir()
	files := writeCheckpoint(t, src)
	var total int64
	for _, s := range files {
		total += int64(s)
	}
	return ctx, n.client(t, nil), src, dst, files, total
}

// TestPushPullResume: a checkpoint pushed to a real ctxd comes back byte
// for byte; a pull cancelled inside the big file is resumed by a second
// pull that skips the finished files, keeps the finished chunks and
// fetches only the rest; a third pull fetches nothing.
func TestPushPullResume(t *testing.T) {
	ctx, c, src, dst, files, total := pushPullFixture(t)
	var pp Progress
	m, err := c.Push(ctx, src, "llama/7b", &pp)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Files) != 3 || m.Size() != total || pp.Done.Load() < total {
		t.Fatalf("push: %d files, %d bytes, progress %d; want 3, %d", len(m.Files), m.Size(), pp.Done.Load(), total)
	}

	// First pull, cancelled once 24 MiB of the big file are in.
	pctx, pcancel := context.WithCancel(ctx)
	var prog Progress
	stop := make(chan struct{})
	go func() {
		for prog.Done.Load() < 1234+24<<20 {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
		pcancel()
	}()
	st1, err := c.Pull(pctx, "llama/7b", dst, &prog)
	close(stop)
	pcancel()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted pull: %v (stats %+v)", err, st1)
	}
	if _, err := os.Stat(filepath.Join(dst, "config.json")); err != nil {
		t.Fatalf("first file not complete after the interrupted pull: %v", err)
	}
	if st1.ChunksFetched < 2 {
		t.Fatalf("interrupted pull finished only %d chunks; the test needs some to resume from", st1.ChunksFetched)
	}

	// Second pull: config.json is skipped, the big file's finished chunks kept.
	st2, err := c.Pull(ctx, "llama/7b", dst, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("interrupted pull: %+v; resumed pull: %+v", st1, st2)
	if st2.FilesSkipped != 1 || st2.ChunksReused < st1.ChunksFetched-1 {
		t.Errorf("resumed pull skipped %d files and kept %d chunks; want 1 file and the %d chunks (config.json's among them) done before",
			st2.FilesSkipped, st2.ChunksReused, st1.ChunksFetched)
	}
	big := int64(files["model.safetensors"])
	if limit := total - 1234 - int64(st2.ChunksReused-1)*8<<20; st2.BytesFetched > limit {
		t.Errorf("resumed pull fetched %d bytes; at most %d were missing", st2.BytesFetched, limit)
	}
	if st2.BytesFetched >= big {
		t.Errorf("resumed pull fetched %d bytes, the whole big file (%d) again", st2.BytesFetched, big)
	}
	sameTree(t, src, dst, files)

	// Third pull: everything is there.
	st3, err := c.Pull(ctx, "llama/7b", dst, nil)
	if err != nil || st3.FilesSkipped != 3 || st3.BytesFetched != 0 {
		t.Fatalf("pull of a complete directory: %+v %v", st3, err)
	}

	// A corrupted local file is detected and fetched again.
	bigPath := filepath.Join(dst, "model.safetensors")
	fh, err := os.OpenFile(bigPath, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fh.WriteAt([]byte{0xff, 0x00, 0xff}, 40<<20)
	fh.Close()
	os.Rename(bigPath, bigPath+partSuffix)
	st4, err := c.Pull(ctx, "llama/7b", dst, nil)
	if err != nil || st4.ChunksFetched != 1 || st4.BytesFetched != 8<<20 {
		t.Fatalf("pull over a partial file with one bad chunk: %+v %v; want exactly that chunk fetched", st4, err)
	}
	sameTree(t, src, dst, files)
}

func TestPullErrors(t *testing.T) {
	n := startCtxd(t, "")
	ctx := context.Background()
	c := n.client(t, nil)
	if _, err := c.Pull(ctx, "no/such/model", t.TempDir(), nil); err == nil {
		t.Fatal("pull of a missing model succeeded")
	}
	for _, bad := range []string{"", "/abs", "a/../b", "..", "x/" + ManifestName} {
		if _, err := c.Pull(ctx, bad, t.TempDir(), nil); !errors.Is(err, block.ErrInvalidArgument) {
			t.Errorf("model %q: %v, want ErrInvalidArgument", bad, err)
		}
	}
	empty := t.TempDir()
	if _, err := c.Push(ctx, empty, "m", nil); err == nil {
		t.Error("push of an empty directory succeeded")
	}
}

func TestManifestCheck(t *testing.T) {
	good := File{Path: "a", Size: 10, Chunks: []string{"x", "y"}}
	tests := []struct {
		name string
		m    Manifest
		ok   bool
	}{
		{"good", Manifest{ChunkSize: 5, Files: []File{good}}, true},
		{"zero chunk", Manifest{ChunkSize: 0, Files: []File{good}}, false},
		{"escape", Manifest{ChunkSize: 5, Files: []File{{Path: "../etc/passwd", Size: 1, Chunks: []string{"x"}}}}, false},
		{"absolute", Manifest{ChunkSize: 5, Files: []File{{Path: "/etc/passwd", Size: 1, Chunks: []string{"x"}}}}, false},
		{"duplicate", Manifest{ChunkSize: 5, Files: []File{good, good}}, false},
		{"chunk count", Manifest{ChunkSize: 5, Files: []File{{Path: "a", Size: 11, Chunks: []string{"x", "y"}}}}, false},
		{"negative size", Manifest{ChunkSize: 5, Files: []File{{Path: "a", Size: -1}}}, false},
		{"xxh3 sums", Manifest{ChunkSize: 5, Files: []File{{Path: "a", Size: 10, Chunks: []string{"x", "y"}, ChunksXXH3: []string{"p", "q"}}}}, true},
		{"xxh3 sum count", Manifest{ChunkSize: 5, Files: []File{{Path: "a", Size: 10, Chunks: []string{"x", "y"}, ChunksXXH3: []string{"p"}}}}, false},
		{"xxh3 sums empty", Manifest{ChunkSize: 5, Files: []File{{Path: "a", Size: 10, Chunks: []string{"x", "y"}, ChunksXXH3: []string{}}}}, false},
	}
	for _, tc := range tests {
		if err := tc.m.check(); (err == nil) != tc.ok {
			t.Errorf("%s: check = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

// TestPullFailsOverWhenANodeDies: a pull through two endpoints that both
// serve the checkpoint completes, with the same bytes, when the endpoint in
// use is killed (SIGKILL) in the middle of the big file.
func TestPullFailsOverWhenANodeDies(t *testing.T) {
	a := startCtxd(t, "")
	b := startCtxd(t, a.dataDir) // same access key as a
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	src, dst := t.TempDir(), t.TempDir()
	files := writeCheckpoint(t, src)
	var total int64
	for _, s := range files {
		total += int64(s)
	}
	for _, n := range []*node{a, b} {
		if _, err := n.client(t, nil).Push(ctx, src, "llama/7b", nil); err != nil {
			t.Fatal(err)
		}
	}
	c := a.client(t, func(cfg *Config) { cfg.Endpoints = []string{a.s3, b.s3} })
	var prog Progress
	killedAt := make(chan int64, 1)
	go func() {
		for prog.Done.Load() < 1234+16<<20 {
			time.Sleep(time.Millisecond)
		}
		killedAt <- prog.Done.Load()
		a.kill()
	}()
	st, err := c.Pull(ctx, "llama/7b", dst, &prog)
	if err != nil {
		t.Fatalf("pull with the first endpoint killed: %v", err)
	}
	select {
	case <-a.done:
	default:
		t.Fatal("the pull ended before the first endpoint was killed")
	}
	at := <-killedAt
	if at >= total {
		t.Fatalf("node killed after %d of %d bytes: not mid-transfer", at, total)
	}
	t.Logf("first endpoint killed after %d of %d bytes; pull: %+v", at, total, st)
	sameTree(t, src, dst, files)
}

// TestPushSkipsFilesAlreadyPushed: a second push of the same checkpoint
// sends nothing but the manifest; after one file changes (same size, other
// bytes), a push sends that file alone, and a pull gives the new bytes.
func TestPushSkipsFilesAlreadyPushed(t *testing.T) {
	ctx, c, src, dst, files, total := pushPullFixture(t)
	var first Progress
	if _, err := c.Push(ctx, src, "llama/7b", &first); err != nil {
		t.Fatal(err)
	}
	if first.Total.Load() != total || first.Done.Load() < total {
		t.Fatalf("first push: total %d, done %d; want %d sent", first.Total.Load(), first.Done.Load(), total)
	}
	var again Progress
	m, err := c.Push(ctx, src, "llama/7b", &again)
	if err != nil {
		t.Fatal(err)
	}
	if again.Total.Load() != 0 || again.Done.Load() != 0 || m.Size() != total {
		t.Fatalf("second push of the same files: total %d, done %d, manifest %d bytes; want nothing sent, %d in the manifest",
			again.Total.Load(), again.Done.Load(), m.Size(), total)
	}
	// config.json changes, keeping its size.
	cfgPath := filepath.Join(src, "config.json")
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] ^= 0x5a
	}
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var changed Progress
	if _, err := c.Push(ctx, src, "llama/7b", &changed); err != nil {
		t.Fatal(err)
	}
	if changed.Total.Load() != int64(len(b)) || changed.Done.Load() < int64(len(b)) || changed.Done.Load() > 2*int64(len(b)) {
		t.Fatalf("push after one file changed: total %d, done %d; want that file's %d bytes sent", changed.Total.Load(), changed.Done.Load(), len(b))
	}
	if _, err := c.Pull(ctx, "llama/7b", dst, nil); err != nil {
		t.Fatal(err)
	}
	sameTree(t, src, dst, files)
}
