package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/tiers/nvme"
)

func init() {
	register("nvme-baseline", "NVMe tier put/get vs raw O_DIRECT I/O in the same directory", runNVMeBaseline)
}

type nvmeBench struct {
	dir        string
	bs, total  int64
	conc       int
	segSize    int64
	churn      int64
	unaligned  bool
	verifyOpen bool
	n          int
	src        []byte
	sum        uint32
	log        *slog.Logger
	cpuprofile string
	rounds     int
}

func runNVMeBaseline(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("nvme-baseline", flag.ContinueOnError)
	dir := fs.String("dir", "", "directory on the disk under test (must support O_DIRECT; required)")
	bsS := fs.String("block-size", "2MiB", "block size")
	totS := fs.String("total", "1GiB", "bytes written and read by each phase")
	conc := fs.Int("concurrency", 1, "parallel readers/writers in every phase (raw and tier alike)")
	segS := fs.String("segment-size", "256MiB", "tier segment size")
	churnS := fs.String("churn", "0", "after the ratios: bytes to write through a tier of capacity --total, sampling RSS (0 = skip)")
	unaligned := fs.Bool("unaligned-source", true, "also measure puts from a buffer that is not page-aligned (copied into an aligned one)")
	verify := fs.Bool("verify-open", false, "also time a reopen that reads every extent header")
	cpu := fs.String("cpuprofile", "", "write a CPU profile of the tier phases to this file")
	verbose := fs.Bool("v", false, "log the tier's messages")
	rounds := fs.Int("rounds", 3, "alternating raw/tier rounds; the ratios are their medians")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return fmt.Errorf("%w: --dir is required", block.ErrInvalidArgument)
	}
	b := &nvmeBench{dir: *dir, conc: max(1, *conc), rounds: max(1, *rounds), unaligned: *unaligned, verifyOpen: *verify, cpuprofile: *cpu}
	var err error
	for _, p := range []struct {
		s string
		v *int64
	}{{*bsS, &b.bs}, {*totS, &b.total}, {*segS, &b.segSize}, {*churnS, &b.churn}} {
		if *p.v, err = block.ParseSize(p.s); err != nil {
			return err
		}
	}
	if b.bs <= 0 || b.total < b.bs {
		return fmt.Errorf("%w: need 0 < block-size <= total", block.ErrInvalidArgument)
	}
	b.n = int(b.total / b.bs)
	b.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	if *verbose {
		b.log = slog.Default()
	}
	b.src = alignedBuf(int(b.bs))
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b.src {
		b.src[i] = byte(r.Uint32())
	}
	b.sum = block.Checksum(b.src)
	return b.run(ctx)
}

func alignedBuf(n int) []byte {
	n = (n + nvme.Align - 1) &^ (nvme.Align - 1)
	buf := make([]byte, n+nvme.Align)
	off := int(-uintptr(unsafe.Pointer(&buf[0])) & (nvme.Align - 1))
	return buf[off : off+n]
}

func mibps(bytes int64, d time.Duration) float64 { return float64(bytes) / (1 << 20) / d.Seconds() }

func (b *nvmeBench) run(ctx context.Context) error {
	fmt.Printf("nvme-baseline dir=%s block_size=%s total=%s blocks=%d concurrency=%d segment_size=%s rounds=%d go=%s\n",
		b.dir, block.FormatSize(b.bs), block.FormatSize(int64(b.n)*b.bs), b.n, b.conc, block.FormatSize(b.segSize), b.rounds, runtime.Version())
	if b.cpuprofile != "" {
		f, err := os.Create(b.cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	tierDir := filepath.Join(b.dir, "ctxbench-nvme-tier")
	cfg := nvme.DefaultConfig()
	cfg.Dir = tierDir
	cfg.SegmentSize = b.segSize
	cfg.MaxBlockSize = b.bs
	cfg.Capacity = 2*b.total + 4*b.segSize
	if err := diskBacked(b.dir); err != nil {
		return err
	}
	bytes := int64(b.n) * b.bs
	var wr, rr, rrSingle, rrChunked []float64
	for round := range b.rounds {
		last := round == b.rounds-1
		// Raw and tier phases alternate, and which goes first alternates
		// between rounds, so drift in a shared disk's speed hits both alike.
		r, err := b.round(ctx, cfg, round%2 == 1, last)
		if err != nil {
			return err
		}
		// The reported read baseline is the faster raw configuration: one
		// pread per block, or the tier's own chunking (ReadChunk pieces in
		// flight at once, the same queue depth as a tier get).
		rawR := min(r.rawRSingle, r.rawRChunked)
		wr = append(wr, r.rawW.Seconds()/r.put.Seconds())
		rr = append(rr, rawR.Seconds()/r.get.Seconds())
		rrSingle = append(rrSingle, r.rawRSingle.Seconds()/r.get.Seconds())
		rrChunked = append(rrChunked, r.rawRChunked.Seconds()/r.get.Seconds())
		fmt.Printf("round %d (%s first): raw_write=%.0f tier_put=%.0f raw_read_single=%.0f raw_read_chunked=%.0f tier_get=%.0f MiB/s  write_ratio=%.3f read_ratio=%.3f (vs single %.3f, vs chunked %.3f)\n",
			round, r.first, mibps(bytes, r.rawW), mibps(bytes, r.put), mibps(bytes, r.rawRSingle), mibps(bytes, r.rawRChunked), mibps(bytes, r.get),
			wr[round], rr[round], rrSingle[round], rrChunked[round])
	}
	fmt.Printf("tier_put block=%s write_ratio_vs_raw_direct=%.3f (median of %d rounds; target >= 0.75)\n", block.FormatSize(b.bs), median(wr), len(wr))
	fmt.Printf("tier_get block=%s ratio_vs_raw_direct=%.3f (median of %d rounds, against the faster raw read of each round; target >= 0.85)\n", block.FormatSize(b.bs), median(rr), len(rr))
	fmt.Printf("tier_get block=%s ratio_vs_raw_single_pread=%.3f ratio_vs_raw_chunked=%.3f (medians; chunked = %s preads in flight at once, as the tier reads)\n",
		block.FormatSize(b.bs), median(rrSingle), median(rrChunked), block.FormatSize(nvme.ReadChunk))
	if b.churn > 0 {
		return b.churnRSS(ctx, cfg)
	}
	return nil
}

// diskBacked refuses a directory whose file system keeps files in memory
// (tmpfs, ramfs): O_DIRECT there, where the kernel takes it at all, is a
// memory copy, and a ratio against it says nothing about a disk.
func diskBacked(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", dir, err)
	}
	switch st.Type {
	case unix.TMPFS_MAGIC, unix.RAMFS_MAGIC:
		return fmt.Errorf("%w: %s is on a memory file system (tmpfs or ramfs): no ratio is reported; use a directory on the disk under test",
			block.ErrInvalidArgument, dir)
	}
	return nil
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// roundResult is one round's phase times.
type roundResult struct {
	first                         string // "raw" or "tier"
	rawW, rawRSingle, rawRChunked time.Duration
	put, get                      time.Duration
}

// round measures raw O_DIRECT writes, tier puts, raw reads (one pread per
// block, and in the tier's chunks) and tier gets of the same blocks, on a
// fresh file and a fresh tier; tierFirst puts the tier phase before the
// raw one of each pair. On the last round it also measures puts from an
// unaligned source and the tier's reopen time. A tier that falls back to
// buffered I/O ends the run: no ratio is reported against it.
func (b *nvmeBench) round(ctx context.Context, cfg nvme.Config, tierFirst, last bool) (res roundResult, err error) {
	os.RemoveAll(cfg.Dir)
	defer os.RemoveAll(cfg.Dir)
	p := filepath.Join(b.dir, "ctxbench-raw-direct.bin")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_TRUNC|unix.O_DIRECT, 0o640)
	if err != nil {
		return res, fmt.Errorf("raw O_DIRECT file (does %s support O_DIRECT?): %w", b.dir, err)
	}
	defer os.Remove(p)
	defer f.Close()
	tr, err := nvme.New(cfg, b.log)
	if err != nil {
		return res, err
	}
	defer func() {
		if tr != nil {
			tr.Close()
		}
	}()
	if !tr.DirectIO() {
		return res, fmt.Errorf("the tier fell back to buffered I/O in %s: its reads may come from the page cache, so no ratio is reported", cfg.Dir)
	}
	stride := int64(len(b.src))
	bufs := sync.Pool{New: func() any { return alignedBuf(len(b.src)) }}
	rawWrite := func() (err error) {
		res.rawW, err = b.parallel(ctx, func(i int) error {
			_, err := f.WriteAt(b.src, int64(i)*stride)
			return err
		})
		return wrap("raw write", err)
	}
	tierPut := func() (err error) {
		res.put, err = b.parallel(ctx, func(i int) error {
			return tr.Put(ctx, block.NewKey("bench", uint64(i)), b.src, b.sum, block.PutOptions{})
		})
		return wrap("tier put", err)
	}
	rawRead := func() (err error) {
		if res.rawRSingle, err = b.parallel(ctx, func(i int) error {
			buf := bufs.Get().([]byte)
			defer bufs.Put(buf) //nolint:staticcheck // SA6002: equal-size buffers; the slice header's allocation is noise next to the read
			_, err := f.ReadAt(buf, int64(i)*stride)
			return err
		}); err != nil {
			return wrap("raw read", err)
		}
		res.rawRChunked, err = b.parallel(ctx, func(i int) error {
			buf := bufs.Get().([]byte)
			defer bufs.Put(buf) //nolint:staticcheck // SA6002: equal-size buffers; the slice header's allocation is noise next to the read
			return readChunked(f, buf, int64(i)*stride)
		})
		return wrap("raw chunked read", err)
	}
	tierGet := func() (err error) {
		res.get, err = b.parallel(ctx, func(i int) error {
			ref, err := tr.Get(ctx, block.NewKey("bench", uint64(i)), block.GetOptions{})
			if err != nil {
				return err
			}
			defer ref.Release()
			if len(ref.Data) != int(b.bs) {
				return fmt.Errorf("%w: short block", block.ErrChecksum)
			}
			return nil
		})
		return wrap("tier get", err)
	}
	phases := []func() error{rawWrite, tierPut, rawRead, tierGet}
	res.first = "raw"
	if tierFirst {
		phases = []func() error{tierPut, rawWrite, tierGet, rawRead}
		res.first = "tier"
	}
	for _, ph := range phases {
		if err := ph(); err != nil {
			return res, err
		}
	}
	rawW := res.rawW
	if !last {
		return res, nil
	}
	bytes := int64(b.n) * b.bs
	if b.unaligned {
		src := make([]byte, b.bs+1)[1:] // deliberately not page-aligned: the tier copies it
		copy(src, b.src)
		d, err := b.parallel(ctx, func(i int) error {
			return tr.Put(ctx, block.NewKey("bench", uint64(b.n+i)), src, b.sum, block.PutOptions{})
		})
		if err != nil {
			return res, fmt.Errorf("tier put (unaligned source): %w", err)
		}
		fmt.Printf("tier_put_unaligned_source MiB/s=%.0f write_ratio_vs_raw_direct=%.3f (last round's raw write)\n",
			mibps(bytes, d), rawW.Seconds()/d.Seconds())
	}
	st := tr.Stats()
	err = tr.Close()
	tr = nil
	if err != nil {
		return res, err
	}
	for _, verify := range []bool{false, b.verifyOpen} {
		c := cfg
		c.VerifyOnOpen = verify
		t2, err := nvme.New(c, b.log)
		if err != nil {
			return res, err
		}
		fmt.Printf("startup blocks=%d bytes=%s segments=%d verify_headers=%v open_time=%s\n",
			st.Blocks, block.FormatSize(st.ResidentBytes), st.Segments, verify, t2.Recovery().Duration)
		t2.Close()
		if !b.verifyOpen {
			break
		}
	}
	return res, nil
}

// wrap names the phase that failed.
func wrap(phase string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", phase, err)
}

// readChunked reads buf from f at off as the tier reads a large extent: one
// pread per nvme.ReadChunk, all in flight at once (extents below
// nvme.ChunkedReadMin in one pread).
func readChunked(f *os.File, buf []byte, off int64) error {
	if len(buf) < nvme.ChunkedReadMin {
		_, err := f.ReadAt(buf, off)
		return err
	}
	n := (len(buf) + nvme.ReadChunk - 1) / nvme.ReadChunk
	errs := make(chan error, n)
	for i := range n {
		go func() {
			pos := i * nvme.ReadChunk
			_, err := f.ReadAt(buf[pos:min(pos+nvme.ReadChunk, len(buf))], off+int64(pos))
			errs <- err
		}()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// parallel runs fn(0..n-1) on b.conc goroutines, in order of i within the
// shared counter, and returns the wall time.
func (b *nvmeBench) parallel(ctx context.Context, fn func(i int) error) (time.Duration, error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	start := time.Now()
	for range b.conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= b.n || ctx.Err() != nil {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return time.Since(start), first
}

// churnRSS writes b.churn bytes through a tier of capacity b.total (so it
// reclaims continuously), reading back one block in four, and samples the
// process RSS: it must level off instead of growing with the data written.
func (b *nvmeBench) churnRSS(ctx context.Context, base nvme.Config) error {
	cfg := base
	cfg.Capacity = max(b.total, 4*cfg.SegmentSize)
	tr, err := nvme.New(cfg, b.log)
	if err != nil {
		return err
	}
	defer os.RemoveAll(cfg.Dir)
	defer tr.Close()
	n := int(b.churn / b.bs)
	samples := 10
	fmt.Printf("churn capacity=%s written=%s blocks=%d\n", block.FormatSize(cfg.Capacity), block.FormatSize(int64(n)*b.bs), n)
	start := time.Now()
	for i := 0; i < n; i++ {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		k := block.NewKey("churn", uint64(i))
		if err := tr.Put(ctx, k, b.src, b.sum, block.PutOptions{}); err != nil {
			return fmt.Errorf("churn put %d: %w", i, err)
		}
		if i%4 == 0 {
			if ref, err := tr.Get(ctx, k, block.GetOptions{}); err == nil {
				ref.Release()
			} else if !errors.Is(err, block.ErrNotFound) {
				return err
			}
		}
		if (i+1)%max(1, n/samples) == 0 || i == n-1 {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			s := tr.Stats()
			fmt.Printf("churn written=%s rss=%s heap_inuse=%s used=%s blocks=%d reclaimed=%d relocated=%d evicted=%d elapsed=%s\n",
				block.FormatSize(int64(i+1)*b.bs), block.FormatSize(rss()), block.FormatSize(int64(ms.HeapInuse)),
				block.FormatSize(s.UsedBytes), s.Blocks, s.Reclaimed, s.Relocations, s.Evictions, time.Since(start).Round(time.Millisecond))
		}
	}
	return nil
}

// rss is the resident set size of this process, from /proc/self/status.
func rss() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return -1
			}
			return kb << 10
		}
	}
	return -1
}
