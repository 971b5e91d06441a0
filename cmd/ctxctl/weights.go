package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ctxtier/ctxtier/internal/weights"
)

func init() {
	register("weights", "weights: push a checkpoint directory to the tier, pull one (resumable)", func(ctx context.Context, args []string) error {
		return runWeights(ctx, args, os.Stdout, os.Stderr)
	})
}

const weightsUsage = `usage:
  ctxctl weights push DIR --name MODEL [flags]
  ctxctl weights pull MODEL DIR [flags]

Moves a model checkpoint between a directory and the tier's S3 endpoint
(--s3, default 127.0.0.1:7403; several, comma-separated, for a pull to fail over): one object per file under MODEL/ in the
object namespace --namespace (default weights, created on first push), and
a manifest of sizes, SHA-256s and per-chunk XXH3-128s. A pull verifies every
chunk (--verify xxh3, the default, or sha256), skips files
already complete, and resumes a file left by an interrupted pull (FILE.ctxpart)
from its verified chunks. With several endpoints a pull sends each ranged GET
to the listed node that holds its blocks (--route=false: all through the first
that works), and a pull that starts while others run joins their stream: it
starts where the nodes hold the checkpoint in DRAM and fetches the chunks
before that last (--join=false: in order from the first). A worker on the
same machine as some of the nodes names their native addresses with --direct
(one entry per --s3 endpoint, empty for a node elsewhere): whole blocks in
those nodes' DRAM are then copied out of their memory files by descriptor
instead of over S3. Credentials: --access-key and --secret (or
CTXTIER_ACCESS_KEY / CTXTIER_SECRET), an S3 key from ctxctl keys create.`

// weightsFlags parses the flags shared by push and pull, after the
// positional arguments, into a client configuration.
func weightsFlags(action string, args []string, errOut io.Writer) (cfg weights.Config, name string, progress bool, rest []string, err error) {
	cfg = weights.DefaultConfig()
	fs := flag.NewFlagSet("weights "+action, flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() { fmt.Fprintln(errOut, weightsUsage) }
	endpoints := fs.String("s3", strings.Join(cfg.Endpoints, ","), "ctxd S3 endpoints (host:port, comma-separated): push uses the first, a pull moves to the next when one fails")
	fs.StringVar(&cfg.AccessKey, "access-key", os.Getenv("CTXTIER_ACCESS_KEY"), "S3 access key id")
	fs.StringVar(&cfg.Secret, "secret", os.Getenv("CTXTIER_SECRET"), "S3 secret")
	fs.StringVar(&cfg.Region, "region", cfg.Region, "region requests are signed for")
	fs.BoolVar(&cfg.TLS, "tls", false, "https to the endpoint")
	fs.StringVar(&cfg.Namespace, "namespace", cfg.Namespace, "object namespace of checkpoints")
	chunkMiB := fs.Int64("chunk-mib", cfg.ChunkSize>>20, "chunk (part, ranged GET, resume unit) size in MiB")
	fs.IntVar(&cfg.Parallel, "parallel", cfg.Parallel, "chunks in flight at once")
	fs.IntVar(&cfg.Retries, "retries", cfg.Retries, "retries of a failed chunk GET")
	fs.StringVar(&cfg.Verify, "verify", cfg.Verify, "pull: the manifest digest every chunk is checked with: xxh3 (XXH3-128; SHA-256 for a manifest without it) or sha256")
	fs.BoolVar(&cfg.Route, "route", cfg.Route, "pull: send each ranged GET to the node holding its blocks (of those listed in --s3), the others being the fallback")
	fs.BoolVar(&cfg.Join, "join", cfg.Join, "pull: with routing, join the stream of pulls already running: start inside the longest run of chunks the nodes hold in DRAM, the chunks before it last")
	direct := fs.String("direct", "", "pull: native addresses (host:port) of the --s3 endpoints' nodes that run on this machine, comma-separated in --s3's order, empty for one elsewhere (\"127.0.0.1:7401,,\"): their DRAM blocks are read by descriptor")
	fs.BoolVar(&progress, "progress", true, "print a progress line to stderr")
	if action == "push" {
		fs.StringVar(&name, "name", "", "MODEL: the checkpoint's name in the tier")
	}
	// Positional arguments come first; flags follow them.
	want := 1
	if action == "pull" {
		want = 2
	}
	for len(rest) < want && len(args) > 0 && (args[0] == "" || args[0][0] != '-') {
		rest, args = append(rest, args[0]), args[1:]
	}
	if err = fs.Parse(args); err != nil {
		return
	}
	rest = append(rest, fs.Args()...)
	if len(rest) != want {
		fmt.Fprintln(errOut, weightsUsage)
		return cfg, name, progress, rest, fmt.Errorf("weights %s: want %d arguments, got %d", action, want, len(rest))
	}
	if action == "push" && name == "" {
		return cfg, name, progress, rest, fmt.Errorf("weights push: --name MODEL is required")
	}
	cfg.ChunkSize = *chunkMiB << 20
	cfg.Endpoints = nil
	for _, e := range strings.Split(*endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			cfg.Endpoints = append(cfg.Endpoints, e)
		}
	}
	if *direct != "" {
		for _, d := range strings.Split(*direct, ",") {
			cfg.Direct = append(cfg.Direct, strings.TrimSpace(d))
		}
	}
	return cfg, name, progress, rest, cfg.Validate()
}

func runWeights(ctx context.Context, args []string, out, errOut io.Writer) error {
	if len(args) == 0 || (args[0] != "push" && args[0] != "pull") {
		fmt.Fprintln(errOut, weightsUsage)
		return fmt.Errorf("weights: missing action (push or pull)")
	}
	action := args[0]
	cfg, name, showProgress, rest, err := weightsFlags(action, args[1:], errOut)
	if err != nil {
		return err
	}
	c, err := weights.New(cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	var p weights.Progress
	stop := make(chan struct{})
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		if !showProgress {
			return
		}
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				fmt.Fprintf(errOut, "\r%s\n", progressLine(action, p.Done.Load(), p.Total.Load(), time.Since(start)))
				return
			case <-t.C:
				fmt.Fprintf(errOut, "\r%s", progressLine(action, p.Done.Load(), p.Total.Load(), time.Since(start)))
			}
		}
	}()
	finish := func() { close(stop); <-done }
	if action == "push" {
		m, err := c.Push(ctx, rest[0], name, &p)
		finish()
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "pushed %s: %d files, %d bytes in %s\n", m.Model, len(m.Files), m.Size(), time.Since(start).Round(time.Millisecond))
		return nil
	}
	st, err := c.Pull(ctx, rest[0], rest[1], &p)
	finish()
	if err != nil {
		return fmt.Errorf("%w (run the same pull again to resume)", err)
	}
	fmt.Fprintf(out, "pulled %s: %d files fetched, %d already complete, %d chunks fetched, %d kept from an earlier pull, %d bytes in %s\n",
		rest[0], st.FilesFetched, st.FilesSkipped, st.ChunksFetched, st.ChunksReused, st.BytesFetched, time.Since(start).Round(time.Millisecond))
	if len(cfg.Direct) > 0 {
		fmt.Fprintf(out, "%d of them by descriptor from co-located nodes' DRAM\n", st.BytesDirect)
		for _, e := range c.DirectProblems() {
			fmt.Fprintf(errOut, "ctxctl: %v (read over S3 instead)\n", e)
		}
	}
	return nil
}

// progressLine is "ACTION  DONE/TOTAL MiB  PCT%  RATE MiB/s".
func progressLine(action string, done, total int64, elapsed time.Duration) string {
	pct := 100.0
	if total > 0 {
		pct = 100 * float64(min(done, total)) / float64(total)
	}
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(done) / (1 << 20) / s
	}
	return fmt.Sprintf("%s %9.1f/%.1f MiB %5.1f%% %8.1f MiB/s", action, float64(done)/(1<<20), float64(total)/(1<<20), pct, rate)
}
