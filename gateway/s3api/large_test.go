package s3api

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"net/http"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

// genReader yields n deterministic pseudo-random bytes without holding them.
type genReader struct {
	left int64
	x    uint64
	buf  [8]byte
	off  int // unread bytes at the end of buf
}

func (g *genReader) Read(p []byte) (int, error) {
	if g.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > g.left {
		p = p[:g.left]
	}
	n := 0
	for n < len(p) {
		if g.off == 0 {
			g.x = g.x*6364136223846793005 + 1442695040888963407
			binary.LittleEndian.PutUint64(g.buf[:], g.x)
			g.off = 8
		}
		c := copy(p[n:], g.buf[8-g.off:])
		g.off -= c
		n += c
	}
	g.left -= int64(n)
	return n, nil
}

// heapPeak samples the Go heap's live-and-unswept object bytes until stop.
type heapPeak struct {
	peak atomic.Uint64
	stop chan struct{}
	wg   sync.WaitGroup
}

func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func startHeapPeak() *heapPeak {
	h := &heapPeak{stop: make(chan struct{})}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			if v := heapObjects(); v > h.peak.Load() {
				h.peak.Store(v)
			}
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
		}
	}()
	return h
}

func (h *heapPeak) done() uint64 { close(h.stop); h.wg.Wait(); return h.peak.Load() }

// TestLargeObjectStreamsWithBoundedHeap: a 256 MiB object goes into an
// object namespace with one PutObject and comes back with a GetObject and
// a ranged GET, while the Go heap (server and client in this process) never
// grows by more than a fraction of the object: bodies stream in and out in
// data blocks, never whole. The DRAM tier holds the blocks off the Go heap
// (an mmap), so heap growth is what the request paths buffer.
func TestLargeObjectStreamsWithBoundedHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("256 MiB object")
	}
	const size = 256 << 20
	const bound = 64 << 20 // a quarter of the object
	e := newEnvSized(t, 320<<20, nil, nil)
	ctx := context.Background()
	mc := minioClient(t, e, e.admin)
	if err := mc.MakeBucket(ctx, "big", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	want := sha256.New()
	if _, err := io.Copy(want, &genReader{left: size, x: 42}); err != nil {
		t.Fatal(err)
	}

	runtime.GC()
	base := heapObjects()
	hp := startHeapPeak()
	req := e.signedPutPath(t, "/big/model/shard-0.safetensors", &genReader{left: size, x: 42}, size)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	putPeak := hp.done()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("put: %s", resp.Status)
	}
	t.Logf("PUT 256 MiB: heap peak %d MiB over a base of %d MiB", (putPeak-base)>>20, base>>20)
	if putPeak > base+bound {
		t.Errorf("PUT of %d MiB grew the heap by %d MiB (bound %d MiB): the body is buffered", size>>20, (putPeak-base)>>20, bound>>20)
	}

	runtime.GC()
	base = heapObjects()
	hp = startHeapPeak()
	obj, err := mc.GetObject(ctx, "big", "model/shard-0.safetensors", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := sha256.New()
	n, err := io.Copy(got, obj)
	obj.Close()
	getPeak := hp.done()
	if err != nil || n != size {
		t.Fatalf("get: %d bytes, %v", n, err)
	}
	if string(got.Sum(nil)) != string(want.Sum(nil)) {
		t.Fatal("GET returned different bytes than were put")
	}
	t.Logf("GET 256 MiB: heap peak %d MiB over a base of %d MiB", (getPeak-base)>>20, base>>20)
	if getPeak > base+bound {
		t.Errorf("GET of %d MiB grew the heap by %d MiB (bound %d MiB): the body is buffered", size>>20, (getPeak-base)>>20, bound>>20)
	}

	// A ranged GET across a data-block boundary deep in the object.
	opts := minio.GetObjectOptions{}
	const off = 200<<20 - 3
	if err := opts.SetRange(off, off+9); err != nil {
		t.Fatal(err)
	}
	obj, err = mc.GetObject(ctx, "big", "model/shard-0.safetensors", opts)
	if err != nil {
		t.Fatal(err)
	}
	part, err := io.ReadAll(obj)
	obj.Close()
	if err != nil {
		t.Fatal(err)
	}
	g := &genReader{left: size, x: 42}
	if _, err := io.CopyN(io.Discard, g, off); err != nil {
		t.Fatal(err)
	}
	exp := make([]byte, 10)
	io.ReadFull(g, exp)
	if string(part) != string(exp) {
		t.Fatalf("range %d..%d: %x, want %x", off, off+9, part, exp)
	}
}
