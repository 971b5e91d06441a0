package nvme

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/zeebo/xxh3"
)

// TestReadHashed: the chunked, parallel read returns the file's bytes and
// the xxh3-64 of exactly buf[from:to], for extents that are and are not a
// multiple of the chunk, with the range ending inside, at and before the
// last chunk.
func TestReadHashed(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct{ size, from, to int }{
		{2*readChunk + HeaderSize, HeaderSize, 2*readChunk + HeaderSize},
		{4 * readChunk, HeaderSize, 4*readChunk - 100},
		{3*readChunk + 4096, HeaderSize, readChunk + 17},
		{2 * readChunk, 0, 2 * readChunk},
	} {
		data := make([]byte, tc.size+8192)
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, tc.size)
		fp, err := readHashed(f, buf, 4096, tc.from, tc.to)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if string(buf) != string(data[4096:4096+tc.size]) {
			t.Fatalf("%+v: wrong bytes", tc)
		}
		if want := xxh3.Hash(data[4096+tc.from : 4096+tc.to]); fp != want {
			t.Fatalf("%+v: fingerprint %016x, want %016x", tc, fp, want)
		}
	}
	// A read past the end fails.
	f, _ := os.Open(filepath.Join(dir, "f"))
	defer f.Close()
	if _, err := readHashed(f, make([]byte, 8*readChunk), 0, 0, 8*readChunk); err == nil {
		t.Fatal("a read past the end of the file succeeded")
	}
}
