package s3api

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
	"github.com/ctxtier/ctxtier/internal/weights"
	"github.com/ctxtier/ctxtier/tiers"
	"github.com/ctxtier/ctxtier/tiers/dram"
	"github.com/ctxtier/ctxtier/tiers/nvme"
	"github.com/ctxtier/ctxtier/tiers/tierstest"
)

// markingTier records, for every read of an object's data block (a key
// with a part), whether it reached the tier with ReaderVerifies.
type markingTier struct {
	ctxstore.Tier
	mu    sync.Mutex
	marks []bool
}

func (m *markingTier) Get(ctx context.Context, key block.Key, opts block.GetOptions) (*block.Ref, error) {
	if key.HasPart {
		m.mu.Lock()
		m.marks = append(m.marks, opts.ReaderVerifies)
		m.mu.Unlock()
	}
	return m.Tier.Get(ctx, key, opts)
}

func (m *markingTier) take() []bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.marks
	m.marks = nil
	return out
}

// A GetObject that declares X-Ctxtier-Reader-Verifies with an object
// digest's value (xxh3-128, sha256), whole or ranged, reads its data blocks
// with ReaderVerifies; no header, another value (crc32c: the HTTP API's
// whole-block value) and a CopyObject's read of its source do not.
func TestObjectReaderVerifiesHeader(t *testing.T) {
	var mt *markingTier
	e := newEnvOver(t, 64<<20, func(d ctxstore.Tier) ctxstore.Tier { mt = &markingTier{Tier: d}; return mt },
		func(c *Config) { c.ChunkSize = 1 << 20 }, nil)
	ctx := context.Background()
	mc := minioClient(t, e, e.admin)
	if err := mc.MakeBucket(ctx, "rvb", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	data := payload(3<<20, 9) // three 1 MiB data blocks
	if _, err := mc.PutObject(ctx, "rvb", "obj", bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		value  string
		rng    []int64 // first, last; nil: the whole object
		marked bool
	}{
		{"xxh3-128", httpwire.ReaderVerifiesXXH3, nil, true},
		{"sha256", httpwire.ReaderVerifiesSHA256, nil, true},
		{"xxh3-128, ranged", httpwire.ReaderVerifiesXXH3, []int64{1<<20 - 10, 2<<20 + 9}, true},
		{"no header", "", nil, false},
		{"no header, ranged", "", []int64{0, 99}, false},
		{"crc32c", httpwire.ReaderVerifiesCRC32C, nil, false},
		{"other value", "XXH3", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mt.take()
			opts := minio.GetObjectOptions{}
			want := data
			if tc.rng != nil {
				if err := opts.SetRange(tc.rng[0], tc.rng[1]); err != nil {
					t.Fatal(err)
				}
				want = data[tc.rng[0] : tc.rng[1]+1]
			}
			if tc.value != "" {
				opts.Set(httpwire.HeaderReaderVerifies, tc.value)
			}
			obj, err := mc.GetObject(ctx, "rvb", "obj", opts)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(obj)
			obj.Close()
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("GET: %d bytes, %v; want %d bytes", len(got), err, len(want))
			}
			marks := mt.take()
			if len(marks) == 0 || slices.Contains(marks, !tc.marked) {
				t.Fatalf("data block reads marked %v, want all %v", marks, tc.marked)
			}
		})
	}
	t.Run("copy source", func(t *testing.T) {
		mt.take()
		_, err := mc.CopyObject(ctx, minio.CopyDestOptions{Bucket: "rvb", Object: "copy"},
			minio.CopySrcOptions{Bucket: "rvb", Object: "obj"})
		if err != nil {
			t.Fatal(err)
		}
		if marks := mt.take(); len(marks) == 0 || slices.Contains(marks, true) {
			t.Fatalf("copy's source reads marked %v, want all false", marks)
		}
	})
}

// A data block corrupted in the DRAM arena is never accepted by a weights
// pull: its GETs declare that the client verifies, so the DRAM tier hands
// out the corrupt bytes unchecked, the chunk's XXH3-128 does not match,
// and the retry without the declaration makes the tier check the block,
// count the corruption and drop it; the store then reads the intact copy
// of the write-through namespace from the NVMe tier. The pulled file
// equals the pushed one. The same pull without a lower copy fails instead
// of returning the bad bytes.
func TestCorruptObjectBlockNeverPulled(t *testing.T) {
	for _, lower := range []bool{true, false} {
		name := map[bool]string{true: "nvme copy", false: "dram only"}[lower]
		t.Run(name, func(t *testing.T) {
			log := slog.New(slog.DiscardHandler)
			dcfg := dram.DefaultConfig()
			dcfg.Capacity, dcfg.MaxBlockSize = 64<<20, 8<<20
			var low tiers.Lower
			if lower {
				ncfg := nvme.DefaultConfig()
				ncfg.Dir, ncfg.SegmentSize, ncfg.Capacity, ncfg.MaxBlockSize = t.TempDir(), 16<<20, 128<<20, 8<<20
				ncfg.Index = nvme.IndexConfig{MemTableSize: 1 << 20, NumMemtables: 1, BlockCacheSize: 1 << 20, IndexCacheSize: 1 << 20}
				nt, err := nvme.New(ncfg, log)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { nt.Close() })
				low = nt
			}
			m, err := tiers.New(tiers.DefaultConfig(), dcfg, low, log)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			e := newEnvOn(t, m, func(c *Config) { c.ChunkSize, c.MaxObjectSize = 1<<20, 64<<20 }, nil)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			ns := block.DefaultNamespaceConfig()
			ns.Name, ns.Kind, ns.WriteMode = "weights", block.KindObject, block.WriteThrough
			if err := e.store.CreateNamespace(ctx, ns); err != nil {
				t.Fatal(err)
			}
			src := t.TempDir()
			data := payload(12<<20, 3)
			if err := os.WriteFile(filepath.Join(src, "w.safetensors"), data, 0o644); err != nil {
				t.Fatal(err)
			}
			wc := weights.DefaultConfig()
			wc.Endpoints, wc.AccessKey, wc.Secret = []string{e.addr}, e.admin.AccessKeyID, e.admin.Secret
			wc.ChunkSize, wc.Retries = 6<<20, 2
			c, err := weights.New(wc)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Push(ctx, src, "m", nil); err != nil {
				t.Fatal(err)
			}
			// Corrupt one data block (the second of one part's six).
			infos, err := e.store.List(ctx, "weights", "", "", 1000, ctxstore.ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var victim block.Key
			for _, in := range infos {
				if in.Key.HasPart && in.Size == 1<<20 && in.Key.Part == 1 {
					victim = in.Key
					break
				}
			}
			if !victim.HasPart {
				t.Fatalf("no data block 1 among %d blocks", len(infos))
			}
			tierstest.CorruptDRAM(t, m, victim, 1000)
			before := m.DRAM().Stats()
			dst := t.TempDir()
			_, err = c.Pull(ctx, "m", dst, nil)
			after := m.DRAM().Stats()
			if after.Corruptions != before.Corruptions+1 {
				t.Errorf("DRAM tier counted %d corruptions, want 1", after.Corruptions-before.Corruptions)
			}
			if after.ReaderVerified == before.ReaderVerified {
				t.Error("no read was left to the reader: the pull did not declare")
			}
			got, rerr := os.ReadFile(filepath.Join(dst, "w.safetensors"))
			if lower {
				if err != nil || rerr != nil || !bytes.Equal(got, data) {
					t.Fatalf("pull: %v; file %d bytes (%v), equal: %v", err, len(got), rerr, bytes.Equal(got, data))
				}
				return
			}
			if err == nil || rerr == nil {
				t.Fatalf("pull without an intact copy: %v, file read %v; want the pull to fail and no file", err, rerr)
			}
		})
	}
}
