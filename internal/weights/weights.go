package weights

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// ManifestName is the manifest object's name under MODEL/; no checkpoint
// file may have this name.
const ManifestName = ".ctxtier-weights.json"

// ErrBadManifest: the manifest object is not one this package wrote, or
// lists a file whose path or chunking is unusable.
var ErrBadManifest = errors.New("weights: bad manifest")

// ErrChecksum: bytes read (from the tier or from disk) differ from the
// manifest's checksum.
var ErrChecksum = errors.New("weights: checksum mismatch")

// Config configures a Client.
type Config struct {
	// Endpoints are ctxd S3 endpoints (host:port) of one cluster, in order
	// of preference: pushes use the first; a pull's manifest read or chunk
	// GET that fails moves on to the next (round robin).
	Endpoints []string
	// AccessKey and Secret are an S3 key of the tier (ctxctl keys create).
	AccessKey, Secret string
	// Region is the region requests are signed for.
	Region string
	// TLS talks https to the endpoint.
	TLS bool
	// Namespace is the object namespace (bucket) checkpoints live in.
	Namespace string
	// ChunkSize is the unit of pulls (one ranged GET, one checksum, one
	// resume step) and of push parts.
	ChunkSize int64
	// Parallel is how many chunks (or parts) move at once.
	Parallel int
	// Retries is how many times a failed chunk GET is retried.
	Retries int
	// Verify names the digest each pulled chunk (and each chunk of a file
	// a pull finds on disk) is checked with: VerifyXXH3 (the manifest's
	// XXH3-128, SHA-256 for a manifest without them) or VerifySHA256.
	Verify string
	// Route sends each piece of a chunk that lies in one data block to an
	// endpoint whose node holds the block (route.go), when there are
	// several endpoints; off, every GET goes to the endpoint in use.
	Route bool
	// Join lets a pull that starts while others are pulling the same
	// checkpoint join their stream (join.go): with routing, it asks every
	// node which of the checkpoint's blocks it has in DRAM right now and
	// starts inside the longest run of such chunks, fetching the chunks
	// before it last, instead of starting at the first chunk and reading
	// every block the others already moved past from the lower tiers again.
	Join bool
	// Direct, when set, has one entry per endpoint: the native protocol
	// address (host:port) of that endpoint's node when it runs on this
	// machine, "" when it does not. A routed piece that is a whole
	// replicated block of such a node, in its DRAM, is then read by
	// descriptor, out of the node's memory file, instead of over S3
	// (direct.go); everything else goes over S3 as before.
	Direct []string
}

// DefaultConfig returns the local endpoint, namespace "weights", 16 MiB
// chunks, 4 in parallel, 3 retries, XXH3-128 verification and routing on.
func DefaultConfig() Config {
	return Config{
		Endpoints: []string{"127.0.0.1:7403"},
		Region:    "us-east-1",
		Namespace: "weights",
		ChunkSize: 16 << 20,
		Parallel:  4,
		Retries:   3,
		Verify:    VerifyXXH3,
		Route:     true,
		Join:      true,
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	bad := func(f string, a ...any) error {
		return fmt.Errorf("%w: weights: %s", block.ErrInvalidArgument, fmt.Sprintf(f, a...))
	}
	switch {
	case len(c.Endpoints) == 0 || slices.Contains(c.Endpoints, ""):
		return bad("no endpoint, or an empty one")
	case c.Namespace == "":
		return bad("empty namespace")
	case c.ChunkSize < 5<<20 || c.ChunkSize > 1<<30:
		return bad("chunk size %d out of range 5 MiB..1 GiB", c.ChunkSize)
	case c.Parallel < 1 || c.Parallel > 256:
		return bad("parallel %d out of range 1..256", c.Parallel)
	case c.Retries < 0:
		return bad("negative retries")
	case c.Verify != VerifyXXH3 && c.Verify != VerifySHA256:
		return bad("verify %q: want %s or %s", c.Verify, VerifyXXH3, VerifySHA256)
	case len(c.Direct) > 0 && len(c.Direct) != len(c.Endpoints):
		return bad("%d direct addresses for %d endpoints: want one per endpoint (\"\" for a node on another machine)", len(c.Direct), len(c.Endpoints))
	}
	return nil
}

// File is one checkpoint file in a manifest.
type File struct {
	// Path is the file's slash-separated path under the checkpoint directory.
	Path string `json:"path"`
	Size int64  `json:"size"`
	// SHA256 is the whole file's hex SHA-256.
	SHA256 string `json:"sha256"`
	// Chunks are the hex SHA-256s of the file's ChunkSize pieces, in order.
	Chunks []string `json:"chunk_sha256"`
	// ChunksXXH3 are the same pieces' hex XXH3-128s (canonical, big-endian
	// form), in order; absent from manifests written before they were
	// added (a pull then checks chunks with SHA-256).
	ChunksXXH3 []string `json:"chunk_xxh3_128,omitempty"`
}

// Manifest lists a checkpoint's files.
type Manifest struct {
	Model     string    `json:"model"`
	ChunkSize int64     `json:"chunk_size"`
	Files     []File    `json:"files"`
	Created   time.Time `json:"created"`
}

// Size is the sum of the files' sizes.
func (m *Manifest) Size() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}

// check validates a manifest read from the tier: local, unique paths and
// chunk lists that match the sizes.
func (m *Manifest) check() error {
	if m.ChunkSize < 1 {
		return fmt.Errorf("%w: chunk size %d", ErrBadManifest, m.ChunkSize)
	}
	seen := map[string]bool{}
	for _, f := range m.Files {
		if err := checkPath(f.Path); err != nil {
			return fmt.Errorf("%w: %v", ErrBadManifest, err)
		}
		if seen[f.Path] {
			return fmt.Errorf("%w: %q listed twice", ErrBadManifest, f.Path)
		}
		seen[f.Path] = true
		if f.Size < 0 || int64(len(f.Chunks)) != chunkCount(f.Size, m.ChunkSize) {
			return fmt.Errorf("%w: %q: %d chunk sums for %d bytes", ErrBadManifest, f.Path, len(f.Chunks), f.Size)
		}
		if f.ChunksXXH3 != nil && len(f.ChunksXXH3) != len(f.Chunks) {
			return fmt.Errorf("%w: %q: %d XXH3-128 chunk sums for %d chunks", ErrBadManifest, f.Path, len(f.ChunksXXH3), len(f.Chunks))
		}
	}
	return nil
}

func chunkCount(size, chunk int64) int64 { return (size + chunk - 1) / chunk }

// checkPath accepts a relative, clean, slash-separated path inside the
// checkpoint directory.
func checkPath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") ||
		strings.Contains(p, "\\") || strings.ContainsRune(p, 0) || path.Base(p) == ManifestName {
		return fmt.Errorf("file path %q is not a clean relative path", p)
	}
	return nil
}

// CheckModel validates a model name: a clean relative path, the prefix of
// the checkpoint's objects.
func CheckModel(model string) error {
	if err := checkPath(model); err != nil {
		return fmt.Errorf("%w: model %q must be a clean relative name", block.ErrInvalidArgument, model)
	}
	return nil
}

// Progress counts bytes moved over the network; Total is set once the
// transfer knows its size. Safe to read while a transfer runs.
type Progress struct {
	Total, Done atomic.Int64
}

// Client pushes and pulls checkpoints.
type Client struct {
	cfg Config
	mcs []*minio.Client // one per endpoint
	cur atomic.Int64    // index of the endpoint in use
	rt  *router         // what routing learned (route.go)
	dr  *direct         // native clients of co-located nodes (direct.go)
}

// New returns a Client for cfg.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, rt: &router{down: map[int]time.Time{}}, dr: newDirect(len(cfg.Direct))}
	for _, ep := range cfg.Endpoints {
		mc, err := minio.New(ep, &minio.Options{
			Creds:  credentials.NewStaticV4(cfg.AccessKey, cfg.Secret, ""),
			Secure: cfg.TLS, Region: cfg.Region, BucketLookup: minio.BucketLookupPath,
			MaxRetries: 1, // failures move to the next endpoint instead
		})
		if err != nil {
			return nil, fmt.Errorf("weights: endpoint %s: %w", ep, err)
		}
		c.mcs = append(c.mcs, mc)
	}
	return c, nil
}

// client returns the endpoint in use and its index.
func (c *Client) client() (*minio.Client, int64) {
	i := c.cur.Load()
	return c.mcs[i], i
}

// failed moves off endpoint i after a failure through it (unless another
// caller already did).
func (c *Client) failed(i int64) {
	c.cur.CompareAndSwap(i, (i+1)%int64(len(c.mcs)))
}

func (c *Client) objectName(model, file string) string { return model + "/" + file }

// Manifest reads and checks a model's manifest.
func (c *Client) Manifest(ctx context.Context, model string) (*Manifest, error) {
	if err := CheckModel(model); err != nil {
		return nil, err
	}
	var b []byte
	var err error
	for range c.mcs {
		mc, i := c.client()
		b, err = readAll(ctx, mc, c.cfg.Namespace, c.objectName(model, ManifestName))
		if err == nil {
			break
		}
		if minio.ToErrorResponse(err).Code == "NoSuchKey" {
			return nil, fmt.Errorf("%w: model %q (no manifest in namespace %q)", block.ErrNotFound, model, c.cfg.Namespace)
		}
		c.failed(i)
	}
	if err != nil {
		return nil, fmt.Errorf("weights: manifest of %q: %w", model, err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadManifest, err)
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	return &m, nil
}

func readAll(ctx context.Context, mc *minio.Client, bucket, name string) ([]byte, error) {
	obj, err := mc.GetObject(ctx, bucket, name, minio.GetObjectOptions{})
	if err != nil {
		return nil, err
	}
	defer obj.Close()
	return io.ReadAll(io.LimitReader(obj, 64<<20))
}
