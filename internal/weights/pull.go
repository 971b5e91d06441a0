package weights

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/minio/minio-go/v7"

	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
)

// PullStats says what a pull moved and what it kept.
type PullStats struct {
	// FilesSkipped were already complete and verified in the directory.
	FilesSkipped int
	// FilesFetched were (partly) fetched.
	FilesFetched int
	// ChunksReused were verified in a partial file from an earlier pull.
	ChunksReused int
	// ChunksFetched came over the network.
	ChunksFetched int
	// BytesFetched is the bytes read from the tier (the manifest aside).
	BytesFetched int64
	// BytesDirect is the part of BytesFetched copied out of a co-located
	// node's DRAM by descriptor (Config.Direct) instead of over S3.
	BytesDirect int64
}

// partSuffix names a file being pulled; it is renamed once complete.
const partSuffix = ".ctxpart"

// Pull fetches model's checkpoint into dir. Files already there with the
// manifest's size and digests (every chunk's XXH3-128, or the whole file's
// SHA-256: see complete) are skipped; a FILE.ctxpart left by an
// interrupted pull keeps every chunk that matches its digest, and only the
// others are fetched (ranged GETs, Parallel at a time, each verified
// before it is written). progress may be nil.
func (c *Client) Pull(ctx context.Context, model, dir string, progress *Progress) (PullStats, error) {
	var st PullStats
	m, progress, err := c.begin(ctx, model, progress)
	if err != nil {
		return st, err
	}
	todo := make([][]int, len(m.Files))
	left := make([]int, len(m.Files))
	for fi, f := range m.Files {
		dst := filepath.Join(dir, filepath.FromSlash(f.Path))
		if ok, err := complete(dst, f, m.ChunkSize, c.cfg.Verify); err != nil {
			return st, err
		} else if ok {
			st.FilesSkipped++
			progress.Total.Add(-f.Size)
			continue
		}
		st.FilesFetched++
		if todo[fi], err = c.preparePart(m, f, dst, progress, &st); err != nil {
			return st, err
		}
		if left[fi] = len(todo[fi]); left[fi] == 0 {
			if err := finishPart(dst, nil); err != nil {
				return st, err
			}
		}
	}
	// The chunks go in the plan's order (join.go); a file is renamed into
	// place once its last chunk is in.
	err = c.fetchPlanned(ctx, m, todo, func(seg segment) error {
		f := m.Files[seg.file]
		left[seg.file] -= len(seg.chunks)
		return c.pullSegment(ctx, m, f, filepath.Join(dir, filepath.FromSlash(f.Path)), seg.chunks, left[seg.file] == 0, progress, &st)
	})
	return st, err
}

// preparePart returns the chunks of f that dst's part file still needs:
// all of them when there is none yet, else those an earlier pull did not
// finish (a chunk whose bytes match its digest is kept). An empty file's
// part is made here, ready to be renamed.
func (c *Client) preparePart(m *Manifest, f File, dst string, progress *Progress, st *PullStats) ([]int, error) {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return nil, err
	}
	part := dst + partSuffix
	var todo []int
	if _, err := os.Stat(part); errors.Is(err, os.ErrNotExist) && len(f.Chunks) > 0 {
		// Nothing to keep: no earlier pull left a part. It is made when
		// its first chunks come (pullSegment).
		for i := range f.Chunks {
			todo = append(todo, i)
		}
		return todo, nil
	}
	fh, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	if err := fh.Truncate(f.Size); err != nil {
		return nil, err
	}
	// Keep the chunks an earlier pull finished.
	alg := digest(c.cfg.Verify, f)
	buf := make([]byte, m.ChunkSize)
	for i := range f.Chunks {
		off, n := chunkSpan(m.ChunkSize, f.Size, i)
		if _, err := fh.ReadAt(buf[:n], off); err != nil {
			return nil, fmt.Errorf("weights: read %s: %w", part, err)
		}
		if chunkOK(alg, f, i, buf[:n]) {
			st.ChunksReused++
			progress.Total.Add(-n)
			continue
		}
		todo = append(todo, i)
	}
	return todo, nil
}

// pullSegment fetches chunks of f into dst's part file; last: they are the
// file's last ones, and the part is synced and renamed to dst.
func (c *Client) pullSegment(ctx context.Context, m *Manifest, f File, dst string, chunks []int, last bool, progress *Progress, st *PullStats) error {
	part := dst + partSuffix
	fh, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer fh.Close()
	if err := fh.Truncate(f.Size); err != nil {
		return err
	}
	err = c.fetchChunks(ctx, m, f, chunks, progress, st, func(_ int, off int64, b []byte) error {
		if _, err := fh.WriteAt(b, off); err != nil {
			return fmt.Errorf("weights: write %s: %w", part, err)
		}
		return nil
	})
	if err != nil || !last {
		return err
	}
	return finishPart(dst, fh)
}

// finishPart syncs dst's complete part file (fh, or opened here when nil)
// and renames it to dst.
func finishPart(dst string, fh *os.File) error {
	part := dst + partSuffix
	if fh == nil {
		var err error
		if fh, err = os.OpenFile(part, os.O_RDWR, 0); err != nil {
			return err
		}
		defer fh.Close()
	}
	if err := fh.Sync(); err != nil {
		return err
	}
	return os.Rename(part, dst)
}

// counters count a pull's fetched bytes, and those of them read directly.
type counters struct{ fetched, direct atomic.Int64 }

// fetchChunks fetches the chunks todo of f, Parallel at a time, and hands
// each verified chunk to use (from several goroutines at once; b is reused
// after use returns). The first error cancels the rest.
func (c *Client) fetchChunks(ctx context.Context, m *Manifest, f File, todo []int, progress *Progress, st *PullStats, use func(i int, off int64, b []byte) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan int)
	var (
		wg       sync.WaitGroup
		firstErr error
		errOnce  sync.Once
		cnt      counters
		chunks   atomic.Int64
	)
	fail := func(err error) { errOnce.Do(func() { firstErr = err; cancel() }) }
	var rt *route
	if len(todo) > 0 {
		rt = c.routeFile(ctx, c.objectName(m.Model, f.Path), f.Size)
	}
	for w := 0; w < min(c.cfg.Parallel, len(todo)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := make([]byte, m.ChunkSize)
			for i := range work {
				off, n := chunkSpan(m.ChunkSize, f.Size, i)
				if err := c.fetchChunk(ctx, m.Model, f, rt, i, off, b[:n], &cnt, progress); err != nil {
					fail(err)
					continue
				}
				if err := use(i, off, b[:n]); err != nil {
					fail(err)
					continue
				}
				chunks.Add(1)
			}
		}()
	}
feed:
	for _, i := range todo {
		select {
		case work <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	st.BytesFetched += cnt.fetched.Load()
	st.BytesDirect += cnt.direct.Load()
	st.ChunksFetched += int(chunks.Load())
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// fetchChunk reads chunk i of f into b with ranged GETs (one per span of
// rt, one in all without routing; on the first try, a span that is a
// whole block in a co-located node's DRAM is copied out by descriptor
// instead: Config.Direct, direct.go), retrying a failed or corrupt read (a
// failed one through the next endpoint), and verifies it against the
// manifest. Its GETs declare that the client verifies (readerVerifies), so
// the nodes' DRAM tiers may skip their own check of the bytes; after a
// mismatch the retries declare nothing, and a node then verifies the
// blocks at rest itself (and drops a corrupt one: the read goes to a lower
// tier, or fails).
func (c *Client) fetchChunk(ctx context.Context, model string, f File, rt *route, i int, off int64, b []byte, cnt *counters, progress *Progress) error {
	var last error
	name := c.objectName(model, f.Path)
	alg := digest(c.cfg.Verify, f)
	declare := readerVerifies(alg)
	spans := rt.spans(off, int64(len(b)), len(c.cfg.Direct) > 0)
	for try := 0; try <= c.cfg.Retries; try++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		var err error
		for _, sp := range spans {
			dst := b[sp.off-off : sp.off-off+sp.n]
			if try == 0 && c.readDirect(ctx, sp, dst) {
				// Retries go over S3, whose nodes check the blocks at rest
				// once the client stops declaring that it verifies.
				cnt.fetched.Add(sp.n)
				cnt.direct.Add(sp.n)
				progress.Done.Add(sp.n)
				continue
			}
			if err = c.getSpan(ctx, name, sp, dst, declare, &cnt.fetched, progress); err != nil {
				break
			}
		}
		if err != nil {
			last = err
			continue
		}
		if !chunkOK(alg, f, i, b) {
			last = fmt.Errorf("%w: %s chunk %d", ErrChecksum, f.Path, i)
			declare = ""
			continue
		}
		return nil
	}
	return fmt.Errorf("weights: pull %s chunk %d: %w", f.Path, i, last)
}

// getSpan reads sp into b with one ranged GET: through sp's endpoint when
// it has one that routing may use now, else through the endpoint in use.
// A non-empty declare is sent as httpwire.HeaderReaderVerifies. A failure
// takes the endpoint out of routing for a while and moves the endpoint in
// use on when it was that one.
func (c *Client) getSpan(ctx context.Context, name string, sp span, b []byte, declare string, fetched *atomic.Int64, progress *Progress) error {
	opts := minio.GetObjectOptions{}
	if err := opts.SetRange(sp.off, sp.off+sp.n-1); err != nil {
		return err
	}
	if declare != "" {
		opts.Set(httpwire.HeaderReaderVerifies, declare)
	}
	mc, ep := c.client()
	if sp.ep >= 0 && int64(sp.ep) != ep && c.rt.usable(sp.ep) {
		mc, ep = c.mcs[sp.ep], int64(sp.ep)
	}
	obj, err := mc.GetObject(ctx, c.cfg.Namespace, name, opts)
	if err == nil {
		var n int
		n, err = io.ReadFull(obj, b)
		obj.Close()
		fetched.Add(int64(n))
		progress.Done.Add(int64(n))
	}
	if err != nil && ctx.Err() == nil {
		c.rt.markDown(int(ep))
		c.failed(ep)
	}
	return err
}

func chunkSpan(chunk, size int64, i int) (off, n int64) {
	off = int64(i) * chunk
	return off, min(chunk, size-off)
}

// begin reads model's manifest and sets progress's total to its size
// (progress nil: a fresh one), for Pull and Stream.
func (c *Client) begin(ctx context.Context, model string, progress *Progress) (*Manifest, *Progress, error) {
	if progress == nil {
		progress = &Progress{}
	}
	m, err := c.Manifest(ctx, model)
	if err != nil {
		return nil, progress, err
	}
	if c.cfg.Route && len(c.mcs) > 1 {
		c.learnNodes(ctx, c.objectName(model, ManifestName))
	}
	progress.Total.Store(m.Size())
	return m, progress, nil
}
