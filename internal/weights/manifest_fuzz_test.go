package weights

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

// FuzzManifest: a manifest read from the tier that check accepts is safe to
// act on: every path stays inside the pull directory, no path repeats, none
// is the manifest itself, and each file's chunk list covers its size
// exactly, and its XXH3-128 list, when there is one, has one sum per
// chunk. check never panics.
func FuzzManifest(f *testing.F) {
	good, _ := json.Marshal(Manifest{Model: "m", ChunkSize: 4, Files: []File{
		{Path: "a/b.safetensors", Size: 9, SHA256: "00", Chunks: []string{"1", "2", "3"}, ChunksXXH3: []string{"4", "5", "6"}},
		{Path: "config.json", Size: 0},
	}})
	f.Add(good)
	f.Add([]byte(`{"chunk_size":1,"files":[{"path":"../x","size":1,"chunk_sha256":["a"]}]}`))
	f.Add([]byte(`{"chunk_size":1,"files":[{"path":"x/./y","size":1,"chunk_sha256":["a"]}]}`))
	f.Add([]byte(`{"chunk_size":0,"files":[]}`))
	f.Add([]byte(`{"chunk_size":2,"files":[{"path":"x","size":-3}]}`))
	f.Add([]byte(`{"chunk_size":2,"files":[{"path":"x","size":3,"chunk_sha256":["a","b"],"chunk_xxh3_128":["c"]}]}`))
	f.Add([]byte(`{"chunk_size":2,"files":[{"path":"x","size":3,"chunk_sha256":["a","b"],"chunk_xxh3_128":[]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m Manifest
		if json.Unmarshal(b, &m) != nil {
			return
		}
		if m.check() != nil {
			return
		}
		seen := map[string]bool{}
		for _, fl := range m.Files {
			if !filepath.IsLocal(filepath.FromSlash(fl.Path)) {
				t.Fatalf("accepted path %q leaves the directory", fl.Path)
			}
			if seen[fl.Path] || filepath.Base(fl.Path) == ManifestName {
				t.Fatalf("accepted repeated or reserved path %q", fl.Path)
			}
			seen[fl.Path] = true
			n := int64(len(fl.Chunks))
			covers := (fl.Size == 0 && n == 0) || (fl.Size > 0 && (n-1)*m.ChunkSize < fl.Size && fl.Size <= n*m.ChunkSize)
			if !covers {
				t.Fatalf("%q: %d chunks of %d do not cover %d bytes exactly", fl.Path, n, m.ChunkSize, fl.Size)
			}
			if x := int64(len(fl.ChunksXXH3)); fl.ChunksXXH3 != nil && x != n {
				t.Fatalf("%q: %d XXH3-128 sums for %d chunks accepted", fl.Path, x, n)
			}
		}
	})
}
