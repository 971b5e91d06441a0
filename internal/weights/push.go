package weights

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/zeebo/xxh3"
)

// Push uploads every regular file under dir as model's checkpoint, then
// its manifest (last, so a reader never sees a manifest whose files are
// not all there). A file the tier already holds with the same size and
// SHA-256 (an earlier push's, interrupted or complete) is not sent again,
// and leaves progress's total. progress may be nil.
func (c *Client) Push(ctx context.Context, dir, model string, progress *Progress) (*Manifest, error) {
	if err := CheckModel(model); err != nil {
		return nil, err
	}
	if progress == nil {
		progress = &Progress{}
	}
	m := &Manifest{Model: model, ChunkSize: c.cfg.ChunkSize}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if err := checkPath(rel); err != nil {
			return fmt.Errorf("weights: push %s: %w", p, err)
		}
		m.Files = append(m.Files, File{Path: rel})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(m.Files) == 0 {
		return nil, fmt.Errorf("weights: push: no files under %s", dir)
	}
	sort.Slice(m.Files, func(i, j int) bool { return m.Files[i].Path < m.Files[j].Path })
	// Checksums first (one local read per file), so the total is known.
	for i := range m.Files {
		if err := c.sum(filepath.Join(dir, filepath.FromSlash(m.Files[i].Path)), &m.Files[i]); err != nil {
			return nil, err
		}
	}
	progress.Total.Store(m.Size())
	if err := c.ensureNamespace(ctx); err != nil {
		return nil, err
	}
	for _, f := range m.Files {
		if c.pushed(ctx, model, f) {
			// A push that was interrupted, or a new version of a checkpoint
			// that shares files with the old one, sends only what changed.
			progress.Total.Add(-f.Size)
			continue
		}
		if err := c.putFile(ctx, filepath.Join(dir, filepath.FromSlash(f.Path)), model, f, progress); err != nil {
			return nil, err
		}
	}
	m.Created = time.Now().UTC()
	b, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return nil, err
	}
	err = c.onEndpoints(ctx, func(mc *minio.Client) error {
		_, err := mc.PutObject(ctx, c.cfg.Namespace, c.objectName(model, ManifestName), bytes.NewReader(b), int64(len(b)),
			minio.PutObjectOptions{ContentType: "application/json"})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("weights: push manifest: %w", err)
	}
	return m, nil
}

// sum fills f's size and checksums from the file at p.
func (c *Client) sum(p string, f *File) error {
	fh, err := os.Open(p)
	if err != nil {
		return err
	}
	defer fh.Close()
	whole := sha256.New()
	buf := make([]byte, 1<<20)
	for {
		h, x := sha256.New(), xxh3.New128()
		n, err := io.CopyBuffer(io.MultiWriter(whole, h, x), io.LimitReader(fh, c.cfg.ChunkSize), buf)
		if err != nil {
			return fmt.Errorf("weights: read %s: %w", p, err)
		}
		if n == 0 {
			break
		}
		f.Size += n
		f.Chunks = append(f.Chunks, hex.EncodeToString(h.Sum(nil)))
		xs := x.Sum128().Bytes()
		f.ChunksXXH3 = append(f.ChunksXXH3, hex.EncodeToString(xs[:]))
		if n < c.cfg.ChunkSize {
			break
		}
	}
	f.SHA256 = hex.EncodeToString(whole.Sum(nil))
	return nil
}

// onEndpoints runs op through the endpoint in use and, after a failure that
// another endpoint may not have (no answer, a broken connection, a 5xx),
// through the next ones, each endpoint at most once. Any other failure (a
// refused key, a missing namespace) is op's answer.
func (c *Client) onEndpoints(ctx context.Context, op func(mc *minio.Client) error) error {
	var err error
	for range c.mcs {
		mc, i := c.client()
		if err = op(mc); err == nil || ctx.Err() != nil || !endpointFailure(err) {
			return err
		}
		c.failed(i)
	}
	return err
}

// endpointFailure reports whether err says that the endpoint, not the
// request, failed: no S3 error reply at all, or a server-side one.
func endpointFailure(err error) bool {
	r := minio.ToErrorResponse(err)
	return r.Code == "" || r.StatusCode >= 500
}

func (c *Client) ensureNamespace(ctx context.Context) error {
	var ok bool
	err := c.onEndpoints(ctx, func(mc *minio.Client) error {
		var err error
		ok, err = mc.BucketExists(ctx, c.cfg.Namespace)
		return err
	})
	if err != nil {
		return fmt.Errorf("weights: namespace %q: %w", c.cfg.Namespace, err)
	}
	if ok {
		return nil
	}
	err = c.onEndpoints(ctx, func(mc *minio.Client) error {
		return mc.MakeBucket(ctx, c.cfg.Namespace, minio.MakeBucketOptions{Region: c.cfg.Region})
	})
	if err != nil {
		if code := minio.ToErrorResponse(err).Code; code != "BucketAlreadyOwnedByYou" && code != "BucketAlreadyExists" {
			return fmt.Errorf("weights: create namespace %q: %w", c.cfg.Namespace, err)
		}
	}
	return nil
}

// putFile uploads one file with parallel multipart parts read straight from
// the file (an io.ReaderAt: nothing is buffered whole), after checking that
// the file did not change size since it was summed. An upload whose endpoint
// fails (a node killed mid-push) starts over through the next endpoint: the
// object becomes visible only when a complete upload finishes, so a reader
// never sees the half sent to the dead node, and the progress counts the
// file's bytes once.
func (c *Client) putFile(ctx context.Context, p, model string, f File, progress *Progress) error {
	fh, err := os.Open(p)
	if err != nil {
		return err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return err
	}
	if st.Size() != f.Size {
		return fmt.Errorf("weights: %s changed size during push (%d, was %d)", p, st.Size(), f.Size)
	}
	done := progress.Done.Load()
	err = c.onEndpoints(ctx, func(mc *minio.Client) error {
		progress.Done.Store(done)
		if _, err := fh.Seek(0, io.SeekStart); err != nil {
			return err
		}
		_, err := mc.PutObject(ctx, c.cfg.Namespace, c.objectName(model, f.Path), fh, f.Size, minio.PutObjectOptions{
			ContentType:  "application/octet-stream",
			UserMetadata: map[string]string{metaSHA256: f.SHA256},
			PartSize:     uint64(c.cfg.ChunkSize),
			NumThreads:   uint(c.cfg.Parallel),
			Progress:     progressReader{progress},
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("weights: push %s: %w", f.Path, err)
	}
	return nil
}

// metaSHA256 is the user metadata (x-amz-meta-ctxtier-sha256) every pushed
// file carries: the whole file's SHA-256, so that a later push of the same
// bytes skips it.
const metaSHA256 = "Ctxtier-Sha256"

// pushed reports whether the tier already holds f's bytes under model: an
// object of f's size whose recorded SHA-256 is f's. An object appears only
// once its upload completed, so a file whose push was interrupted is not
// there. Any failure to tell (other than the endpoints' own, which fail
// over) counts as not pushed: the file is sent.
func (c *Client) pushed(ctx context.Context, model string, f File) bool {
	var info minio.ObjectInfo
	err := c.onEndpoints(ctx, func(mc *minio.Client) error {
		var err error
		info, err = mc.StatObject(ctx, c.cfg.Namespace, c.objectName(model, f.Path), minio.StatObjectOptions{})
		return err
	})
	return err == nil && info.Size == f.Size && info.Metadata.Get("X-Amz-Meta-"+metaSHA256) == f.SHA256
}

// progressReader is minio-go's progress hook: it reads every byte sent.
type progressReader struct{ p *Progress }

func (r progressReader) Read(b []byte) (int, error) {
	r.p.Done.Add(int64(len(b)))
	return len(b), nil
}
