package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/tiers/s3"
)

func init() {
	register("s3tier", "S3-tier get throughput (packed objects, ranged GETs, verified) vs raw minio-go GETs of the same bytes, same server, same run", runS3Tier)
}

// runS3Tier demotes blocks into the S3 tier (packed, uploaded), uploads the
// same bytes once more as one plain object per block, then alternates rounds
// of raw minio-go GETs of those objects and tier Gets (a ranged GET of the
// pack plus CRC-32C verification), each with the same concurrency, and
// prints ratio_vs_raw_s3 = raw time / tier time (median of the rounds).
func runS3Tier(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("s3tier", flag.ContinueOnError)
	endpoint := fs.String("endpoint", "", "S3 server host:port (required)")
	bucket := fs.String("bucket", "ctxbench", "bucket (created if missing)")
	access := fs.String("access-key", os.Getenv("CTXD_S3_ACCESS_KEY"), "access key (default $CTXD_S3_ACCESS_KEY)")
	secret := fs.String("secret-key", os.Getenv("CTXD_S3_SECRET_KEY"), "secret key (default $CTXD_S3_SECRET_KEY)")
	useTLS := fs.Bool("tls", false, "use https")
	region := fs.String("region", "us-east-1", "signing region")
	size := fs.String("block-size", "2MiB", "block size")
	blocks := fs.Int("blocks", 128, "blocks")
	conc := fs.Int("concurrency", 8, "concurrent gets")
	rounds := fs.Int("rounds", 5, "rounds (each: raw GETs then tier gets, order alternating)")
	solo := fs.String("solo-size", block.FormatSize(s3.DefaultConfig().SoloSize), "blocks at least this large get a pack of their own, read whole (0: pack every block)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *endpoint == "" {
		return fmt.Errorf("-endpoint is required (scripts/versitygw.sh start PORT DIR runs a local server)")
	}
	bs, err := block.ParseSize(*size)
	if err != nil {
		return err
	}
	soloSize := int64(0)
	if *solo != "0" {
		if soloSize, err = block.ParseSize(*solo); err != nil {
			return err
		}
	}
	if *blocks < 1 || *conc < 1 || *rounds < 1 {
		return fmt.Errorf("blocks, concurrency and rounds must be positive")
	}
	dir, err := os.MkdirTemp("", "ctxbench-s3tier")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	prefix := fmt.Sprintf("ctxbench-%d", time.Now().UnixNano())

	cfg := s3.DefaultConfig()
	cfg.Endpoint, cfg.Bucket, cfg.Prefix = *endpoint, *bucket, prefix+"/packs"
	cfg.AccessKey, cfg.SecretKey, cfg.TLS, cfg.Region = *access, *secret, *useTLS, *region
	cfg.Dir = dir
	cfg.MaxBlockSize = max(bs, 1<<20)
	cfg.SoloSize = soloSize
	cfg.MaxBuffer = max(int64(*blocks)*bs+(64<<20), cfg.MaxBlockSize)
	cfg.GetTimeout, cfg.ResponseTimeout = 30*time.Second, 30*time.Second
	tier, err := s3.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer tier.Close()

	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	raw, err := minio.New(*endpoint, &minio.Options{
		Creds: credentials.NewStaticV4(*access, *secret, ""), Secure: *useTLS, Region: *region,
		Transport: tr, BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		return err
	}

	keys := make([]block.Key, *blocks)
	rawNames := make([]string, *blocks)
	buf := make([]byte, bs)
	rng := rand.New(rand.NewPCG(7, 11))
	for i := range keys {
		for j := range buf {
			buf[j] = byte(rng.Uint32())
		}
		keys[i] = block.NewKey("default", rng.Uint64())
		rawNames[i] = fmt.Sprintf("%s/raw/%06d", prefix, i)
		tier.Demote(keys[i], buf, block.Checksum(buf))
		if _, err := raw.PutObject(ctx, *bucket, rawNames[i], bytes.NewReader(buf), bs, minio.PutObjectOptions{}); err != nil {
			return fmt.Errorf("raw put: %w", err)
		}
	}
	if err := tier.Flush(ctx); err != nil {
		return fmt.Errorf("tier flush: %w", err)
	}
	st := tier.Stats()
	fmt.Printf("s3tier endpoint=%s block_size=%s blocks=%d packs=%d solo_size=%s concurrency=%d rounds=%d\n",
		*endpoint, block.FormatSize(bs), *blocks, st.Packs, *solo, *conc, *rounds)
	defer cleanupPrefix(raw, *bucket, prefix)

	rawGet := func(i int, dst []byte) error {
		obj, err := raw.GetObject(ctx, *bucket, rawNames[i], minio.GetObjectOptions{})
		if err != nil {
			return err
		}
		defer obj.Close()
		_, err = io.ReadFull(obj, dst)
		return err
	}
	// The same bytes, read raw with a ranged GET of the pack: isolates the
	// tier's own cost (index, verification) from the server's cost of
	// ranged reads.
	locs := make([]s3.Location, len(keys))
	for i, k := range keys {
		l, ok := tier.Locate(k)
		if !ok {
			return fmt.Errorf("block %d not located after flush", i)
		}
		locs[i] = l
	}
	rangedGet := func(i int, dst []byte) error {
		var opts minio.GetObjectOptions
		if err := opts.SetRange(locs[i].Offset, locs[i].Offset+locs[i].Length-1); err != nil {
			return err
		}
		obj, err := raw.GetObject(ctx, *bucket, locs[i].Object, opts)
		if err != nil {
			return err
		}
		defer obj.Close()
		_, err = io.ReadFull(obj, dst)
		return err
	}
	tierGet := func(i int, _ []byte) error {
		ref, err := tier.Get(ctx, keys[i], block.GetOptions{})
		if err != nil {
			return err
		}
		ref.Release()
		return nil
	}
	total := int64(*blocks) * bs
	var ratios, rangedRatios []float64
	for r := 0; r < *rounds; r++ {
		// Rotate the order so drift in a shared machine's speed hits all alike.
		phases := []func(int, []byte) error{rawGet, rangedGet, tierGet}
		var d [3]time.Duration
		for j := range phases {
			p := (j + r) % 3
			if d[p], err = timeGets(*blocks, *conc, bs, phases[p]); err != nil {
				return err
			}
		}
		ratios = append(ratios, d[0].Seconds()/d[2].Seconds())
		rangedRatios = append(rangedRatios, d[1].Seconds()/d[2].Seconds())
		fmt.Printf("round %d: raw_get=%.0f raw_ranged_get=%.0f tier_get=%.0f MiB/s ratio=%.3f ratio_ranged=%.3f\n",
			r, mibps(total, d[0]), mibps(total, d[1]), mibps(total, d[2]), ratios[r], rangedRatios[r])
	}
	if s := tier.Stats(); s.Hits != uint64(*blocks**rounds) || s.BufferHits != 0 {
		return fmt.Errorf("tier gets did not all come from S3: %+v", s)
	}
	fmt.Printf("s3tier_get block=%s ratio_vs_raw_ranged_s3=%.3f (tier vs raw ranged GETs of the same packs)\n", block.FormatSize(bs), median(rangedRatios))
	fmt.Printf("s3tier_get block=%s ratio_vs_raw_s3=%.3f (median of %d rounds; target >= 0.8)\n", block.FormatSize(bs), median(ratios), len(ratios))
	return nil
}

// timeGets runs get for every block index with conc workers.
func timeGets(n, conc int, bs int64, get func(i int, dst []byte) error) (time.Duration, error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	start := time.Now()
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dst := make([]byte, bs)
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := get(i, dst); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start), first
}

// cleanupPrefix removes the run's objects (raw copies and packs).
func cleanupPrefix(c *minio.Client, bucket, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	objs := c.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix + "/", Recursive: true})
	for e := range c.RemoveObjects(ctx, bucket, objs, minio.RemoveObjectsOptions{}) {
		fmt.Fprintf(os.Stderr, "cleanup: %s: %v\n", e.ObjectName, e.Err)
	}
}
