package s3api

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// locatingTier is a unit-test stand-in for the cluster backend's
// ctxstore.Locator over a real DRAM tier: data block part i of any object
// is "held" by n(i%3+1) as shard i (so a test can tell which block an
// answer describes), and by n9, dead, as shard 200. gone makes it answer
// NotFound, as the cluster does for a block retired meanwhile.
type locatingTier struct {
	ctxstore.Tier
	gone atomic.Bool
}

func (l *locatingTier) Locate(_ context.Context, key block.Key) (ctxstore.Location, error) {
	if l.gone.Load() {
		return ctxstore.Location{}, fmt.Errorf("%w: %s", block.ErrNotFound, key)
	}
	return ctxstore.Location{Size: 1, DataShards: 1, Holders: []ctxstore.Holder{
		{Node: fmt.Sprintf("n%d", key.Part%3+1), Shard: int(key.Part), State: "alive"},
		{Node: "n9", Shard: 200, State: "dead"},
	}}, nil
}

func (l *locatingTier) LocalNode() string { return "n1" }

// keyHash is the hash of b's Key (the object version's data blocks share it).
func keyHash(t *testing.T, b LocatedBlock) uint64 {
	t.Helper()
	k, err := block.ParseObjectName("x", b.Key)
	if err != nil {
		t.Fatalf("key %q: %v", b.Key, err)
	}
	return k.Hash
}

// getLocations sends a signed GetObjectLocations and decodes a 200 answer.
func getLocations(t *testing.T, e *env, target string) (int, string, Locations) {
	t.Helper()
	st, body := do(t, rawSigned(t, e, e.admin, http.MethodGet, target, nil, time.Now(), nil, nil))
	var out Locations
	if st == http.StatusOK {
		if err := xmlUnmarshal([]byte(body), &out); err != nil {
			t.Fatalf("%s: %v in %s", target, err, body)
		}
	}
	return st, body, out
}

// TestGetObjectLocations: an object of six 1 MiB data blocks (the last
// half full) is listed block by block with each block's holders, paged by
// max-blocks and offset; bad arguments, missing objects and buckets,
// strangers and block namespaces get S3 errors.
func TestGetObjectLocations(t *testing.T) {
	var lt *locatingTier
	e := newEnvOver(t, 64<<20, func(d ctxstore.Tier) ctxstore.Tier { lt = &locatingTier{Tier: d}; return lt },
		func(c *Config) { c.ChunkSize = 1 << 20 }, nil)
	ctx := context.Background()
	mc := minioClient(t, e, e.admin)
	if err := mc.MakeBucket(ctx, "wobj", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	size := int64(5<<20 + 512<<10)
	if _, err := mc.PutObject(ctx, "wobj", "m/a b.safetensors", bytes.NewReader(payload(int(size), 3)), size, minio.PutObjectOptions{DisableMultipart: true}); err != nil {
		t.Fatal(err)
	}
	const obj = "/wobj/m/a%20b.safetensors?" + LocationsQuery
	st, body, all := getLocations(t, e, obj)
	if st != http.StatusOK || all.Node != "n1" || all.Size != size || all.ETag == "" || all.Truncated || all.NextOffset != nil || len(all.Blocks) != 6 {
		t.Fatalf("whole object: %d %+v\n%s", st, all, body)
	}
	for i, b := range all.Blocks {
		// Key names the data block itself: the tier holds it, at its length.
		k, err := block.ParseObjectName("wobj", b.Key)
		if err != nil || !k.HasPart || int(k.Part) != i || k.Hash != keyHash(t, all.Blocks[0]) {
			t.Fatalf("block %d: key %q (%v): want part %d of the object's version", i, b.Key, err, i)
		}
		if info, err := lt.Tier.Stat(ctx, k); err != nil || info.Size != b.Length {
			t.Fatalf("block %d: the tier's %s: %+v, %v; want %d bytes", i, k, info, err, b.Length)
		}
		b.Key = ""
		want := LocatedBlock{Offset: int64(i) << 20, Length: min(1<<20, size-int64(i)<<20), DataShards: 1, Holders: []LocatedHolder{
			{Node: fmt.Sprintf("n%d", i%3+1), Shard: i, State: "alive"}, {Node: "n9", Shard: 200, State: "dead"}}}
		if fmt.Sprint(b) != fmt.Sprint(want) {
			t.Fatalf("block %d: %+v, want %+v", i, b, want)
		}
	}
	pages := []struct {
		name      string
		query     string
		first, n  int
		nextBlock int // -1: not truncated
	}{
		{"first page", "&max-blocks=4", 0, 4, 4},
		{"second page", "&max-blocks=4&offset=4194304", 4, 2, -1},
		{"mid block", "&offset=1572864&max-blocks=1", 1, 1, 2},
		{"last byte", fmt.Sprintf("&offset=%d", size-1), 5, 1, -1},
	}
	for _, p := range pages {
		t.Run(p.name, func(t *testing.T) {
			st, body, got := getLocations(t, e, obj+p.query)
			if st != http.StatusOK || len(got.Blocks) != p.n || got.Blocks[0].Offset != all.Blocks[p.first].Offset {
				t.Fatalf("%d %+v\n%s", st, got, body)
			}
			if (p.nextBlock < 0) != (got.NextOffset == nil) || got.Truncated != (p.nextBlock >= 0) ||
				(p.nextBlock >= 0 && *got.NextOffset != all.Blocks[p.nextBlock].Offset) {
				t.Fatalf("truncated %v next %v, want next block %d", got.Truncated, got.NextOffset, p.nextBlock)
			}
		})
	}
	bad := []struct {
		name   string
		target string
		status int
		code   string
	}{
		{"negative offset", obj + "&offset=-1", 400, "InvalidArgument"},
		{"offset not a number", obj + "&offset=x", 400, "InvalidArgument"},
		{"offset past the end", obj + fmt.Sprintf("&offset=%d", size), 400, "InvalidArgument"},
		{"max-blocks 0", obj + "&max-blocks=0", 400, "InvalidArgument"},
		{"max-blocks too many", obj + "&max-blocks=1001", 400, "InvalidArgument"},
		{"no such key", "/wobj/nope?" + LocationsQuery, 404, "NoSuchKey"},
		{"no such bucket", "/nobucket/x?" + LocationsQuery, 404, "NoSuchBucket"},
		{"block namespace", "/team-a/" + objName(1) + "?" + LocationsQuery, 501, "NotImplemented"},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			st, body, _ := getLocations(t, e, b.target)
			if st != b.status || !strings.Contains(body, "<Code>"+b.code+"</Code>") {
				t.Fatalf("%d %s, want %d %s", st, body, b.status, b.code)
			}
		})
	}
	t.Run("key scoped to another bucket", func(t *testing.T) {
		st, body := do(t, rawSigned(t, e, e.teamA, http.MethodGet, obj, nil, time.Now(), nil, nil))
		if st != http.StatusForbidden || !strings.Contains(body, "AccessDenied") {
			t.Fatalf("%d %s", st, body)
		}
	})
	t.Run("anonymous", func(t *testing.T) {
		resp, err := http.Get("http://" + e.addr + obj)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("anonymous: %d", resp.StatusCode)
		}
	})
	t.Run("block retired while located", func(t *testing.T) {
		lt.gone.Store(true)
		defer lt.gone.Store(false)
		st, body, _ := getLocations(t, e, obj)
		if st != http.StatusServiceUnavailable || !strings.Contains(body, "ask again") {
			t.Fatalf("%d %s", st, body)
		}
	})
}

// TestGetObjectLocationsUnclustered: a single node lists the blocks with
// no holders and no node name: it holds them all.
func TestGetObjectLocationsUnclustered(t *testing.T) {
	e := newEnvWith(t, func(c *Config) { c.ChunkSize = 1 << 20 }, nil)
	ctx := context.Background()
	mc := minioClient(t, e, e.admin)
	if err := mc.MakeBucket(ctx, "wobj", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.PutObject(ctx, "wobj", "k", bytes.NewReader(payload(3<<20, 1)), 3<<20, minio.PutObjectOptions{DisableMultipart: true}); err != nil {
		t.Fatal(err)
	}
	st, body, got := getLocations(t, e, "/wobj/k?"+LocationsQuery)
	if st != http.StatusOK || got.Node != "" || len(got.Blocks) != 3 {
		t.Fatalf("%d %+v\n%s", st, got, body)
	}
	for i, b := range got.Blocks {
		if b.Offset != int64(i)<<20 || b.Length != 1<<20 || len(b.Holders) != 0 {
			t.Fatalf("block %d: %+v", i, b)
		}
	}
}
