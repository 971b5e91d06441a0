package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/client"
)

func init() {
	register("descriptor", "direct reads through leased descriptors vs a plain memcpy and the TCP GET path", runDescriptor)
}

// descConfig is the descriptor mode's flags.
type descConfig struct {
	Addr      string
	Namespace string
	BlockSize int
	Clients   int
	Duration  time.Duration
	Keys      int
	Batch     int
	// Run, when set, makes every call read a run of Run blocks (a prefix):
	// the descriptor path as Run/Batch DESCRIBE+copy steps one after the
	// other, and a fourth path with client.ReadDirectRun, which pipelines
	// them; memcpy and tcp move Run blocks a call too.
	Run    int
	Verify client.VerifyMode
	// Rounds is how many times the paths alternate (0: one round per
	// 500 ms of Duration, at most 5).
	Rounds int
	// ServerPID, when set, is ctxd's process: each path's CPU per GB then
	// counts ctxd's CPU time (utime+stime) as well as this process's.
	ServerPID int
}

// perCall is how many blocks one call of each path moves.
func (c descConfig) perCall() int {
	if c.Run > 0 {
		return c.Run
	}
	return c.Batch
}

func parseDescFlags(args []string, errOut io.Writer) (descConfig, error) {
	var c descConfig
	fs := flag.NewFlagSet("descriptor", flag.ContinueOnError)
	fs.SetOutput(errOut)
	var size, verify string
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:7400", "native protocol address of a ctxd on this machine")
	fs.StringVar(&c.Namespace, "namespace", block.DefaultNamespace, "namespace of the blocks")
	fs.StringVar(&size, "block-size", "2MiB", "block size (bytes, or with a KiB/MiB/GiB suffix)")
	fs.IntVar(&c.Clients, "clients", 4, "concurrent readers, one connection each")
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "measuring time of each path (memcpy, descriptor, tcp), in alternating rounds")
	fs.IntVar(&c.Keys, "keys", 64, "working set: distinct blocks, all DRAM-resident (keys x block-size must fit the server's DRAM)")
	fs.IntVar(&c.Batch, "batch", 1, "blocks per request on the descriptor and tcp paths (one DESCRIBE or GET round trip for all)")
	fs.IntVar(&c.Run, "run", 0, "blocks per call read as a run in batches of --batch, also through client.ReadDirectRun (the next batch's DESCRIBE in flight while one is copied); 0: one batch per call, no pipelined path")
	fs.IntVar(&c.Rounds, "rounds", 0, "rounds the paths alternate in (0: one per 500ms of --duration, at most 5); more, shorter rounds let a baseline and a path see the same background load")
	fs.IntVar(&c.ServerPID, "server-pid", 0, "ctxd's process id: add its CPU time to each path's CPU seconds per GB")
	fs.StringVar(&verify, "verify", "checksum", "how a descriptor read checks a DRAM block: checksum (CRC-32C of the copy) or version (the block's version word after a plain copy)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	n, err := parseSize(size)
	if err != nil {
		return c, err
	}
	c.BlockSize = n
	if c.Verify, err = client.ParseVerifyMode(verify); err != nil {
		return c, fmt.Errorf("--verify: %w", err)
	}
	switch {
	case c.Clients < 1 || c.Clients > 1024:
		return c, fmt.Errorf("--clients %d out of range 1..1024", c.Clients)
	case c.Duration <= 0:
		return c, fmt.Errorf("--duration must be positive")
	case c.Keys < 1:
		return c, fmt.Errorf("--keys must be at least 1")
	case c.Batch < 1 || c.Batch > c.Keys:
		return c, fmt.Errorf("--batch %d out of range 1..--keys", c.Batch)
	case c.ServerPID < 0:
		return c, fmt.Errorf("--server-pid %d must be a process id", c.ServerPID)
	case c.Rounds < 0 || c.Rounds > 1000:
		return c, fmt.Errorf("--rounds %d out of range 0..1000", c.Rounds)
	case c.Run != 0 && (c.Run < c.Batch || c.Run > 4096):
		return c, fmt.Errorf("--run %d out of range --batch..4096 (or 0)", c.Run)
	case c.BlockSize < 8 || c.BlockSize > block.HardMaxBlockSize:
		return c, fmt.Errorf("--block-size %d out of range 8..%d", c.BlockSize, block.HardMaxBlockSize)
	}
	return c, nil
}

func runDescriptor(ctx context.Context, args []string) error {
	cfg, err := parseDescFlags(args, os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	return runDescriptorWith(ctx, cfg, os.Stdout)
}

// pathStats is what one path moved.
type pathStats struct {
	ops, bytes atomic.Int64
	elapsed    time.Duration
	// Descriptor breakdown (nanoseconds summed over reads): DESCRIBE round
	// trip, and copy + check (checksum or version) out of the mapping.
	describeNs, readNs atomic.Int64
	// CPU time used while the path ran: this process's, and the server's
	// with --server-pid.
	clientCPU, serverCPU time.Duration
}

// cpuPerGB is the CPU seconds (this process's plus the server's) the path
// spent per GB it moved: unlike GB/s, it does not depend on how much of
// the machine other processes took.
func (p *pathStats) cpuPerGB() float64 {
	if gb := float64(p.bytes.Load()) / 1e9; gb > 0 {
		return (p.clientCPU + p.serverCPU).Seconds() / gb
	}
	return 0
}

func (p *pathStats) gbps() float64 {
	if p.elapsed <= 0 {
		return 0
	}
	return float64(p.bytes.Load()) / p.elapsed.Seconds() / 1e9
}

// runDescriptorWith puts a DRAM-resident working set, then measures in
// alternating rounds: (1) memcpy: each reader copies random blocks out of an
// mmap'd region of the same size as the working set into its buffer; (2)
// descriptor: ReadDirect's steps (DESCRIBE, copy out of the mapped memory
// file checked by CRC-32C or by version word as cfg.Verify says,
// asynchronous RELEASE), timed each, where any fallback to GET is an error;
// with cfg.Run, (2b) the same runs read with client.ReadDirectRun; (3) tcp:
// client.GetBatchInto over the native protocol. It prints ratio_vs_memcpy
// and ratio_vs_tcp of (2), and with cfg.Run ratio_vs_memcpy_run of (2b).
func runDescriptorWith(ctx context.Context, cfg descConfig, out io.Writer) error {
	clients := make([]*client.Client, cfg.Clients)
	defer func() {
		for _, c := range clients {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i := range clients {
		c, err := client.Dial(ctx, cfg.Addr, client.Options{Conns: 1, DirectVerify: cfg.Verify})
		if err != nil {
			return err
		}
		clients[i] = c
	}
	ws := newWorkingSet(loadConfig{Namespace: cfg.Namespace, BlockSize: cfg.BlockSize, Keys: cfg.Keys})
	conns := make([]blockConn, len(clients))
	for i, c := range clients {
		conns[i] = nativeLoadConn{c}
	}
	if err := ws.prePut(ctx, conns); err != nil {
		return fmt.Errorf("put of the working set: %w", err)
	}
	// Every block must be DRAM-resident and readable through a descriptor.
	keys := make([]block.Key, cfg.Keys)
	for i := range keys {
		keys[i] = ws.key(i)
	}
	leases, errs, err := clients[0].Describe(ctx, keys)
	if err != nil {
		return err
	}
	buf := make([]byte, cfg.BlockSize)
	for i, l := range leases {
		if errs[i] != nil {
			return fmt.Errorf("describe %s: %w", keys[i], errs[i])
		}
		if l.Desc.Tier != block.TierDRAM {
			return fmt.Errorf("%s is in %s, not DRAM: use fewer --keys or a larger --dram-capacity", keys[i], l.Desc.Tier)
		}
		if cfg.Verify == client.VerifyVersion && l.Desc.VersionOffset == 0 {
			return fmt.Errorf("--verify version: the server described %s without a version word (an older ctxd, or no version reads on this architecture)", keys[i])
		}
		if _, err := clients[0].ReadLease(l, buf); err != nil {
			return fmt.Errorf("read through a descriptor: %w", err)
		}
	}
	clients[0].Release(ctx, leases...)

	region, err := unix.Mmap(-1, 0, cfg.Keys*cfg.BlockSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return fmt.Errorf("memcpy baseline region: %w", err)
	}
	defer unix.Munmap(region)
	for i := range cfg.Keys {
		ws.fill(region[i*cfg.BlockSize:(i+1)*cfg.BlockSize], i)
	}

	var mem, desc, run, tcp pathStats
	rounds := max(1, min(5, int(cfg.Duration/(500*time.Millisecond))))
	if cfg.Rounds > 0 {
		rounds = cfg.Rounds
	}
	seg := cfg.Duration / time.Duration(rounds)
	for r := range rounds {
		d := seg
		if r == rounds-1 {
			d = cfg.Duration - seg*time.Duration(rounds-1)
		}
		pick := func(r *rand.Rand) []block.Key {
			ks := make([]block.Key, cfg.perCall())
			for j := range ks {
				ks[j] = ws.key(r.IntN(cfg.Keys))
			}
			return ks
		}
		paths := []struct {
			st  *pathStats
			run func(ctx context.Context, w int, r *rand.Rand, bufs [][]byte, st *pathStats) error
		}{
			{&mem, func(_ context.Context, _ int, r *rand.Rand, bufs [][]byte, _ *pathStats) error {
				for _, buf := range bufs {
					i := r.IntN(cfg.Keys)
					copy(buf, region[i*cfg.BlockSize:(i+1)*cfg.BlockSize])
				}
				return nil
			}},
			{&desc, func(ctx context.Context, w int, r *rand.Rand, bufs [][]byte, st *pathStats) error {
				keys := pick(r)
				for lo := 0; lo < len(keys); lo += cfg.Batch {
					hi := min(lo+cfg.Batch, len(keys))
					if err := readDirectTimed(ctx, clients[w], keys[lo:hi], bufs[lo:hi], st); err != nil {
						return err
					}
				}
				return nil
			}},
			{&tcp, func(ctx context.Context, w int, r *rand.Rand, bufs [][]byte, _ *pathStats) error {
				_, errs, err := clients[w].GetBatchInto(ctx, pick(r), bufs)
				return errors.Join(append(errs, err)...)
			}},
		}
		if cfg.Run > 0 {
			paths = slices.Insert(paths, 2, struct {
				st  *pathStats
				run func(ctx context.Context, w int, r *rand.Rand, bufs [][]byte, st *pathStats) error
			}{&run, func(ctx context.Context, w int, r *rand.Rand, bufs [][]byte, _ *pathStats) error {
				return readDirectRun(ctx, clients[w], pick(r), bufs, cfg.Batch)
			}})
		}
		for _, p := range paths {
			if err := measure(ctx, cfg, d, p.st, p.run); err != nil {
				return err
			}
		}
	}
	per := func(p *pathStats) float64 { // mean microseconds per block per reader
		if n := p.ops.Load(); n > 0 {
			return p.elapsed.Seconds() * 1e6 * float64(cfg.Clients) / float64(n)
		}
		return 0
	}
	fmt.Fprintf(out, "descriptor: addr=%s block=%d clients=%d batch=%d run=%d keys=%d (working set %d MiB) verify=%s duration=%s per path in %d rounds\n",
		cfg.Addr, cfg.BlockSize, cfg.Clients, cfg.Batch, cfg.Run, cfg.Keys, cfg.Keys*cfg.BlockSize>>20, cfg.Verify, cfg.Duration, rounds)
	fmt.Fprintf(out, "memcpy:     %.3f GB/s  %.1f us/block  (%d blocks)\n", mem.gbps(), per(&mem), mem.ops.Load())
	fmt.Fprintf(out, "descriptor: %.3f GB/s  %.1f us/block  (%d blocks, every one read directly and verified by %s)\n",
		desc.gbps(), per(&desc), desc.ops.Load(), cfg.Verify)
	if n := desc.ops.Load(); n > 0 {
		step := "copy+crc32c"
		if cfg.Verify == client.VerifyVersion {
			step = "copy+version check"
		}
		fmt.Fprintf(out, "  where the time goes: describe round trip %.1f us, %s %.1f us, rest %.1f us per block\n",
			float64(desc.describeNs.Load())/float64(n)/1e3, step, float64(desc.readNs.Load())/float64(n)/1e3,
			per(&desc)-float64(desc.describeNs.Load()+desc.readNs.Load())/float64(n)/1e3)
	}
	if cfg.Run > 0 {
		fmt.Fprintf(out, "descriptor run (ReadDirectRun, runs of %d in batches of %d, pipelined): %.3f GB/s  %.1f us/block  (%d blocks)\n",
			cfg.Run, cfg.Batch, run.gbps(), per(&run), run.ops.Load())
	}
	fmt.Fprintf(out, "tcp get:    %.3f GB/s  %.1f us/block  (%d blocks)\n", tcp.gbps(), per(&tcp), tcp.ops.Load())
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	who := "ctxbench"
	if cfg.ServerPID > 0 {
		who = "ctxbench + ctxd"
	}
	fmt.Fprintf(out, "cpu s/GB (%s): memcpy %.3f, descriptor %.3f", who, mem.cpuPerGB(), desc.cpuPerGB())
	if cfg.Run > 0 {
		fmt.Fprintf(out, ", descriptor run %.3f", run.cpuPerGB())
	}
	fmt.Fprintf(out, ", tcp get %.3f\n", tcp.cpuPerGB())
	// memcpy's CPU per GB over the path's: the ratio_vs_memcpy that CPU
	// time gives, which other load on the machine moves far less.
	fmt.Fprintf(out, "cpu_ratio_vs_memcpy=%.3f", ratio(mem.cpuPerGB(), desc.cpuPerGB()))
	if cfg.Run > 0 {
		fmt.Fprintf(out, " cpu_ratio_vs_memcpy_run=%.3f", ratio(mem.cpuPerGB(), run.cpuPerGB()))
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "ratio_vs_tcp=%.3f\n", ratio(desc.gbps(), tcp.gbps()))
	if cfg.Run > 0 {
		fmt.Fprintf(out, "ratio_run_vs_batches=%.3f\n", ratio(run.gbps(), desc.gbps()))
		fmt.Fprintf(out, "ratio_vs_memcpy_run=%.3f (verify=%s, ReadDirectRun)\n", ratio(run.gbps(), mem.gbps()), cfg.Verify)
	}
	fmt.Fprintf(out, "ratio_vs_memcpy=%.3f (verify=%s)\n", ratio(desc.gbps(), mem.gbps()), cfg.Verify)
	return nil
}

// readDirectTimed is client.ReadDirectBatch split into its steps so the
// time of each can be reported: DESCRIBE, ReadLease (copy + check) of each
// block, ReleaseAsync. Anything but a clean direct read is an error here.
func readDirectTimed(ctx context.Context, c *client.Client, keys []block.Key, bufs [][]byte, st *pathStats) error {
	t0 := time.Now()
	ls, errs, err := c.Describe(ctx, keys)
	if err != nil {
		c.ReleaseAsync(ls...)
		return err
	}
	t1 := time.Now()
	for i, l := range ls {
		if errs[i] != nil {
			err = errs[i]
			break
		}
		var n int
		if n, err = c.ReadLease(l, bufs[i]); err != nil {
			break
		}
		if n != len(bufs[i]) {
			err = fmt.Errorf("%s: read %d bytes, want %d", keys[i], n, len(bufs[i]))
			break
		}
	}
	t2 := time.Now()
	c.ReleaseAsync(ls...)
	if err != nil {
		return err
	}
	st.describeNs.Add(int64(t1.Sub(t0)))
	st.readNs.Add(int64(t2.Sub(t1)))
	return nil
}

// readDirectRun is client.ReadDirectRun where anything but a clean direct
// read of every block is an error.
func readDirectRun(ctx context.Context, c *client.Client, keys []block.Key, bufs [][]byte, batch int) error {
	before := c.DirectStats()
	sizes, errs, err := c.ReadDirectRun(ctx, keys, bufs, batch)
	if err != nil {
		return err
	}
	for i := range keys {
		switch {
		case errs[i] != nil:
			return errs[i]
		case sizes[i] != len(bufs[i]):
			return fmt.Errorf("%s: read %d bytes, want %d", keys[i], sizes[i], len(bufs[i]))
		}
	}
	if after := c.DirectStats(); after.Fallbacks != before.Fallbacks {
		return fmt.Errorf("ReadDirectRun fell back to GET for %d blocks", after.Fallbacks-before.Fallbacks)
	}
	return nil
}

// measure runs cfg.Clients readers doing op (cfg.perCall() blocks a call) for d
// and adds to st.
func measure(ctx context.Context, cfg descConfig, d time.Duration, st *pathStats,
	op func(ctx context.Context, w int, r *rand.Rand, bufs [][]byte, st *pathStats) error) error {
	s0, err := serverCPUTime(cfg.ServerPID)
	if err != nil {
		return err
	}
	c0 := cpuTime()
	defer func() {
		st.clientCPU += cpuTime() - c0
		if s1, err := serverCPUTime(cfg.ServerPID); err == nil {
			st.serverCPU += s1 - s0
		}
	}()
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	for w := range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), uint64(start.UnixNano())))
			bufs := make([][]byte, cfg.perCall())
			for j := range bufs {
				bufs[j] = make([]byte, cfg.BlockSize)
			}
			for runCtx.Err() == nil {
				if err := op(runCtx, w, r, bufs, st); err != nil {
					if runCtx.Err() == nil {
						firstErr.CompareAndSwap(nil, err)
						cancel()
					}
					return
				}
				st.ops.Add(int64(cfg.perCall()))
				st.bytes.Add(int64(cfg.perCall() * cfg.BlockSize))
			}
		}()
	}
	wg.Wait()
	st.elapsed += time.Since(start)
	if err, ok := firstErr.Load().(error); ok {
		return err
	}
	return ctx.Err()
}
