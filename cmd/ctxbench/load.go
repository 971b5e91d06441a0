package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

func init() {
	register("load", "put/get load against a native-protocol server, with a raw-TCP baseline", runLoad)
}

// loadConfig is the load mode's flags.
type loadConfig struct {
	Addr       string
	Namespace  string
	BlockSize  int
	Clients    int
	Depth      int
	GetRatio   float64
	Duration   time.Duration
	Keys       int
	VsBaseline bool
	JSON       bool
	// Proto is the protocol the load goes through (protoNative, protoHTTP,
	// protoS3); HTTPURL and S3URL are the HTTP API's and the S3 endpoint's
	// base URLs, S3AccessKey and S3SecretKey the S3 credential.
	Proto       string
	HTTPURL     string
	S3URL       string
	S3AccessKey string `json:"-"`
	S3SecretKey string `json:"-"`
	// ServerPID, when set, is the server's process: its CPU time
	// (utime+stime) over the ctxtier rounds is reported per GB served.
	ServerPID int
}

// target is the address or URL the load goes to.
func (c loadConfig) target() string {
	switch c.Proto {
	case protoHTTP:
		return c.HTTPURL
	case protoS3:
		return c.S3URL
	}
	return c.Addr
}

func parseLoadFlags(args []string, errOut io.Writer) (loadConfig, error) {
	var c loadConfig
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(errOut)
	var size string
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:7400", "native protocol address of the server")
	fs.StringVar(&c.Namespace, "namespace", block.DefaultNamespace, "namespace of the blocks")
	fs.StringVar(&size, "block-size", "2MiB", "block size (bytes, or with a KiB/MiB/GiB or KB/MB/GB suffix)")
	fs.IntVar(&c.Clients, "clients", 4, "concurrent clients, one connection each")
	fs.IntVar(&c.Depth, "depth", 1, "requests each client keeps in flight (pipelined on its connection)")
	fs.Float64Var(&c.GetRatio, "get-ratio", 1, "fraction of operations that are gets (the rest are puts), 0..1")
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "how long to run")
	fs.IntVar(&c.Keys, "keys", 64, "working set: distinct blocks put before and touched during the run")
	fs.BoolVar(&c.VsBaseline, "vs-baseline", false, "also run a raw TCP sender/receiver with the same block size, connections and duration; print ratio_vs_raw_tcp last")
	fs.BoolVar(&c.JSON, "json", false, "print the result as JSON")
	fs.StringVar(&c.Proto, "proto", protoNative, "protocol of the load: native (--addr), http (the HTTP block API at --http-url) or s3 (the S3 endpoint at --s3-url); each GET is checked end to end as the protocol allows")
	fs.StringVar(&c.HTTPURL, "http-url", "http://127.0.0.1:7401", "base URL of the HTTP block API (--proto http)")
	fs.StringVar(&c.S3URL, "s3-url", "http://127.0.0.1:7403", "base URL of the S3 endpoint (--proto s3)")
	fs.StringVar(&c.S3AccessKey, "s3-access-key", os.Getenv("CTXBENCH_S3_ACCESS_KEY"), "S3 access key id, from `ctxctl keys create` (--proto s3; or CTXBENCH_S3_ACCESS_KEY)")
	fs.StringVar(&c.S3SecretKey, "s3-secret-key", os.Getenv("CTXBENCH_S3_SECRET_KEY"), "S3 secret (--proto s3; or CTXBENCH_S3_SECRET_KEY)")
	fs.IntVar(&c.ServerPID, "server-pid", 0, "the server's process id on this machine: report its CPU seconds (utime+stime) per GB served during the ctxtier rounds")
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
	if err := checkProto(c.Proto); err != nil {
		return c, err
	}
	switch {
	case c.Proto == protoS3 && (c.S3AccessKey == "" || c.S3SecretKey == ""):
		return c, fmt.Errorf("--proto s3 needs --s3-access-key and --s3-secret-key (or CTXBENCH_S3_ACCESS_KEY and CTXBENCH_S3_SECRET_KEY)")
	case c.ServerPID < 0:
		return c, fmt.Errorf("--server-pid %d must be a process id", c.ServerPID)
	case c.Clients < 1 || c.Clients > 1024:
		return c, fmt.Errorf("--clients %d out of range 1..1024", c.Clients)
	case c.Depth < 1 || c.Depth > 256:
		return c, fmt.Errorf("--depth %d out of range 1..256", c.Depth)
	case c.GetRatio < 0 || c.GetRatio > 1:
		return c, fmt.Errorf("--get-ratio %v out of range 0..1", c.GetRatio)
	case c.Duration <= 0:
		return c, fmt.Errorf("--duration must be positive")
	case c.Keys < 1:
		return c, fmt.Errorf("--keys must be at least 1")
	case c.BlockSize < 8 || c.BlockSize > block.HardMaxBlockSize:
		return c, fmt.Errorf("--block-size %d out of range 8..%d", c.BlockSize, block.HardMaxBlockSize)
	}
	return c, nil
}

// parseSize reads "2MiB", "512KiB", "1GiB", "4096", "2MB" (decimal), "64k" (binary).
func parseSize(s string) (int, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suffix string
		mul    int64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30},
		{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30},
		{"B", 1},
	}
	mul := int64(1)
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mul = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mul
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<40)/mul {
		return 0, fmt.Errorf("bad size %q (want e.g. 4096, 512KiB, 2MiB, 1GiB)", s)
	}
	return int(n * mul), nil
}

func runLoad(ctx context.Context, args []string) error {
	return runParsed(ctx, args, parseLoadFlags, runLoadWith)
}

// loadResult is what a load run measured.
type loadResult struct {
	Ops       int64   `json:"ops"`
	Gets      int64   `json:"gets"`
	Puts      int64   `json:"puts"`
	Errors    int64   `json:"errors"`
	FirstErr  string  `json:"first_error,omitempty"`
	Seconds   float64 `json:"seconds"`
	GBps      float64 `json:"gb_per_s"`
	OpsPerSec float64 `json:"ops_per_s"`
	P50us     float64 `json:"p50_us"`
	P99us     float64 `json:"p99_us"`
	P999us    float64 `json:"p999_us"`
	// RawGBps and Ratio are set with --vs-baseline.
	RawGBps float64 `json:"raw_tcp_gb_per_s,omitempty"`
	Ratio   float64 `json:"ratio_vs_raw_tcp,omitempty"`
	// ServerCPUPerGB is set with --server-pid: the server's CPU seconds
	// per GB served over the ctxtier rounds; ClientCPUPerGB is this
	// process's over the same rounds.
	ServerCPUPerGB float64 `json:"server_cpu_s_per_gb,omitempty"`
	ClientCPUPerGB float64 `json:"client_cpu_s_per_gb,omitempty"`
}

// serverCPUTime is pid's CPU time so far (utime+stime from
// /proc/PID/stat), 0 without a pid.
func serverCPUTime(pid int) (time.Duration, error) {
	if pid <= 0 {
		return 0, nil
	}
	d, err := procCPU(pid)
	if err != nil {
		return 0, fmt.Errorf("--server-pid: %w", err)
	}
	return d, nil
}

// runLoadWith runs the load (and the baseline) and prints to out; the live
// progress line goes to progress.
func runLoadWith(ctx context.Context, cfg loadConfig, out, progress io.Writer) error {
	clients := make([]blockConn, cfg.Clients)
	defer func() {
		for _, c := range clients {
			if c != nil {
				c.close()
			}
		}
	}()
	for i := range clients {
		c, err := dialLoad(ctx, cfg, cfg.Depth)
		if err != nil {
			return err
		}
		clients[i] = c
	}
	ws := newWorkingSet(cfg)
	if cfg.GetRatio > 0 {
		if err := ws.prePut(ctx, clients); err != nil {
			return fmt.Errorf("pre-put of the working set: %w", err)
		}
	}
	// With a baseline, ctxtier and raw TCP alternate in rounds (each gets
	// the full duration in total), so load from other processes on the
	// machine weighs on both sides alike.
	rounds := 1
	if cfg.VsBaseline {
		rounds = max(1, min(5, int(cfg.Duration/(500*time.Millisecond))))
	}
	seg := cfg.Duration / time.Duration(rounds)
	var raw *rawBaseline
	if cfg.VsBaseline {
		raw = newRawBaseline(ws, cfg.Clients, cfg.Keys)
	}
	var st loadStats
	var rawBytes float64
	var rawTime, serverCPU, clientCPU time.Duration
	for r := range rounds {
		d := seg
		if r == rounds-1 {
			d = cfg.Duration - seg*time.Duration(rounds-1)
		}
		s0, err := serverCPUTime(cfg.ServerPID)
		if err != nil {
			return err
		}
		c0 := cpuTime()
		if err := runRound(ctx, cfg, clients, ws, &st, d, progress); err != nil {
			fmt.Fprintf(progress, "\r%60s\r", "")
			return err
		}
		clientCPU += cpuTime() - c0
		s1, err := serverCPUTime(cfg.ServerPID)
		if err != nil {
			return err
		}
		serverCPU += s1 - s0
		if cfg.VsBaseline {
			gbps, err := raw.run(ctx, d)
			if err != nil {
				return fmt.Errorf("raw TCP baseline: %w", err)
			}
			rawBytes += gbps * d.Seconds()
			rawTime += d
		}
	}
	fmt.Fprintf(progress, "\r%60s\r", "")
	res := st.result()
	if gb := float64(st.bytes.Load()) / 1e9; gb > 0 {
		res.ClientCPUPerGB = clientCPU.Seconds() / gb
		if cfg.ServerPID > 0 {
			res.ServerCPUPerGB = serverCPU.Seconds() / gb
		}
	}
	if cfg.VsBaseline {
		res.RawGBps = rawBytes / rawTime.Seconds()
		if res.RawGBps > 0 {
			res.Ratio = res.GBps / res.RawGBps
		}
	}
	if cfg.JSON {
		enc := json.NewEncoder(out)
		if err := enc.Encode(struct {
			Config loadConfig `json:"config"`
			loadResult
		}{cfg, res}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(out, "load: proto=%s (GETs checked by %s)\n", cfg.Proto, loadProtos[cfg.Proto])
		fmt.Fprintf(out, "load: target=%s namespace=%s block=%d clients=%d depth=%d get-ratio=%.2f keys=%d duration=%s\n",
			cfg.target(), cfg.Namespace, cfg.BlockSize, cfg.Clients, cfg.Depth, cfg.GetRatio, cfg.Keys, cfg.Duration)
		fmt.Fprintf(out, "ctxtier: %d ops (%d gets, %d puts, %d errors) in %.2fs: %.3f GB/s, %.0f ops/s; latency p50=%.0fus p99=%.0fus p999=%.0fus\n",
			res.Ops, res.Gets, res.Puts, res.Errors, res.Seconds, res.GBps, res.OpsPerSec, res.P50us, res.P99us, res.P999us)
		if res.FirstErr != "" {
			fmt.Fprintf(out, "first error: %s\n", res.FirstErr)
		}
		fmt.Fprintf(out, "cpu: client %.3f s/GB", res.ClientCPUPerGB)
		if cfg.ServerPID > 0 {
			fmt.Fprintf(out, ", server (pid %d) %.3f s/GB", cfg.ServerPID, res.ServerCPUPerGB)
		}
		fmt.Fprintln(out, " over the ctxtier rounds")
		if cfg.VsBaseline {
			fmt.Fprintf(out, "raw tcp: %.3f GB/s (%d connections, %d distinct %d-byte blocks, no protocol)\n", res.RawGBps, cfg.Clients, len(raw.blocks), cfg.BlockSize)
		}
	}
	if cfg.VsBaseline {
		fmt.Fprintf(out, "ratio_vs_raw_tcp=%.3f\n", res.Ratio)
	}
	if res.Ops == 0 && res.Errors > 0 {
		return fmt.Errorf("every operation failed: %s", res.FirstErr)
	}
	return nil
}

// workingSet is the blocks the run touches: key i holds a shared random
// base with i stamped into its first 8 bytes, so every block differs while
// only one base buffer is kept; the checksums are computed once.
type workingSet struct {
	ns   string
	base []byte
	sums []uint32
	hash uint64
}

func newWorkingSet(cfg loadConfig) *workingSet {
	r := rand.New(rand.NewPCG(uint64(cfg.BlockSize), 1))
	ws := &workingSet{ns: cfg.Namespace, base: make([]byte, cfg.BlockSize), sums: make([]uint32, cfg.Keys)}
	for i := 0; i+8 <= len(ws.base); i += 8 {
		binary.LittleEndian.PutUint64(ws.base[i:], r.Uint64())
	}
	// Keys depend on the block size, so runs with other sizes never conflict.
	ws.hash = 0xc7b0_0000_0000_0000 ^ uint64(cfg.BlockSize)<<16
	buf := make([]byte, cfg.BlockSize)
	for i := range ws.sums {
		ws.fill(buf, i)
		ws.sums[i] = block.Checksum(buf)
	}
	return ws
}

func (ws *workingSet) key(i int) block.Key { return block.NewKey(ws.ns, ws.hash+uint64(i)) }

// fill writes block i into buf.
func (ws *workingSet) fill(buf []byte, i int) {
	copy(buf, ws.base)
	binary.LittleEndian.PutUint64(buf, uint64(i))
}

func (ws *workingSet) prePut(ctx context.Context, clients []blockConn) error {
	var wg sync.WaitGroup
	errc := make(chan error, len(clients))
	for ci, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, len(ws.base))
			for i := ci; i < len(ws.sums); i += len(clients) {
				ws.fill(buf, i)
				if err := c.put(ctx, ws.key(i), buf, ws.sums[i]); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	return <-errc
}

// loadStats accumulates a load run over one or more rounds.
type loadStats struct {
	gets, puts, errs, bytes atomic.Int64
	firstErr                atomic.Value
	lats                    []time.Duration
	elapsed                 time.Duration
}

// runRound runs every client for d, adding to st; the progress line shows
// the totals of all rounds so far.
func runRound(ctx context.Context, cfg loadConfig, clients []blockConn, ws *workingSet, st *loadStats, d time.Duration, progress io.Writer) error {
	workers := cfg.Clients * cfg.Depth
	lats := make([][]time.Duration, workers)
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		c := clients[w%cfg.Clients]
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), uint64(start.UnixNano())))
			buf := make([]byte, cfg.BlockSize)
			lat := make([]time.Duration, 0, 1<<12)
			for runCtx.Err() == nil {
				i := r.IntN(cfg.Keys)
				t0 := time.Now()
				var err error
				isGet := r.Float64() < cfg.GetRatio
				if isGet {
					var n int
					n, err = c.getInto(runCtx, ws.key(i), buf)
					if err == nil && n != cfg.BlockSize {
						err = fmt.Errorf("%s: got %d bytes, want %d", ws.key(i), n, cfg.BlockSize)
					}
				} else {
					ws.fill(buf, i)
					err = c.put(runCtx, ws.key(i), buf, ws.sums[i])
				}
				if err != nil {
					if runCtx.Err() != nil {
						break // the round ended mid-request
					}
					st.errs.Add(1)
					st.firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				lat = append(lat, time.Since(t0))
				st.bytes.Add(int64(cfg.BlockSize))
				if isGet {
					st.gets.Add(1)
				} else {
					st.puts.Add(1)
				}
			}
			lats[w] = lat
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			st.elapsed += time.Since(start)
			for _, l := range lats {
				st.lats = append(st.lats, l...)
			}
			return ctx.Err()
		case <-tick.C:
			s := (st.elapsed + time.Since(start)).Seconds()
			fmt.Fprintf(progress, "\r[%5.1fs] %.3f GB/s  %.0f ops/s  errors=%d ", s, float64(st.bytes.Load())/s/1e9, float64(st.gets.Load()+st.puts.Load())/s, st.errs.Load())
		}
	}
}

// result summarises the rounds run so far.
func (st *loadStats) result() loadResult {
	slices.Sort(st.lats)
	res := loadResult{
		Gets: st.gets.Load(), Puts: st.puts.Load(), Errors: st.errs.Load(), Seconds: st.elapsed.Seconds(),
		P50us: pctMicros(st.lats, 0.50), P99us: pctMicros(st.lats, 0.99), P999us: pctMicros(st.lats, 0.999),
	}
	if v, ok := st.firstErr.Load().(string); ok {
		res.FirstErr = v
	}
	res.Ops = res.Gets + res.Puts
	if sec := st.elapsed.Seconds(); sec > 0 {
		res.GBps = float64(st.bytes.Load()) / sec / 1e9
		res.OpsPerSec = float64(res.Ops) / sec
	}
	return res
}

// pct is the q-quantile of sorted durations, in microseconds.
func pctMicros(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := min(int(q*float64(len(sorted))), len(sorted)-1)
	return float64(sorted[i]) / float64(time.Microsecond)
}
