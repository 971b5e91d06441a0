package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/gateway/httpapi"
	"github.com/ctxtier/ctxtier/gateway/s3api"
	"github.com/ctxtier/ctxtier/tiers/dram"
)

func init() {
	register("s3-vs-http", "GET/PUT throughput of blocks via the S3 endpoint vs the native HTTP block API (gateway/httpapi), same store, same run", runS3VsHTTP)
}

// runS3VsHTTP builds one in-process store and serves it twice on 127.0.0.1:
// through s3api (SigV4-signed requests, signed by aws-sdk-go-v2's signer in
// the client, verified by the server) and through gateway/httpapi, the
// native HTTP block API ctxd serves (/v1/namespaces/{ns}/blocks/{hash}, no
// auth, as ctxd runs by default). Rounds alternate which protocol goes first.
func runS3VsHTTP(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("s3-vs-http", flag.ContinueOnError)
	size := fs.String("block-size", "2MiB", "block size")
	blocks := fs.Int("blocks", 64, "blocks per round and protocol")
	conc := fs.Int("concurrency", 4, "concurrent clients")
	rounds := fs.Int("rounds", 5, "rounds (each: PUT then GET of every block, both protocols)")
	payloadMode := fs.String("payload", "unsigned", "S3 payload hash: unsigned (UNSIGNED-PAYLOAD) or sha256 (client hashes, server verifies)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	bs, err := block.ParseSize(*size)
	if err != nil {
		return err
	}
	if *payloadMode != "unsigned" && *payloadMode != "sha256" {
		return fmt.Errorf("-payload must be unsigned or sha256")
	}
	log := slog.New(slog.DiscardHandler)
	dcfg := dram.DefaultConfig()
	dcfg.Capacity = int64(*blocks)*4*(bs+dram.PageSize) + 64<<20
	dcfg.MaxBlockSize = max(bs, 1<<20)
	tier, err := dram.New(dcfg, log)
	if err != nil {
		return err
	}
	defer tier.Close()
	cat, err := ctxstore.OpenFileCatalog("")
	if err != nil {
		return err
	}
	store, err := ctxstore.New(ctxstore.DefaultConfig(), cat, tier, log)
	if err != nil {
		return err
	}
	key := credential.Credential{AccessKeyID: "CTXBENCH000000000001", Secret: "bench-secret-bench-secret-bench-secret-0", Namespaces: []string{"*"}}
	scfg := s3api.DefaultConfig()
	scfg.MaxObjectSize = max(bs, 1<<20)
	s3srv, err := s3api.New(scfg, store, credential.Static{key.AccessKeyID: key}, nil, log)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s3ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go s3srv.Serve(sctx, s3ln)
	httpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hcfg := httpapi.DefaultConfig()
	hcfg.MaxBlockSize = max(bs, 1<<20)
	hsrv := httpapi.New(hcfg, store, nil, log)
	go hsrv.Serve(sctx, httpLn)

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *conc * 2, DisableCompression: true}}
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	creds := aws.Credentials{AccessKeyID: key.AccessKeyID, SecretAccessKey: key.Secret}
	data := make([][]byte, *blocks)
	for i := range data {
		data[i] = bytes.Repeat([]byte{byte(i), byte(i >> 8), 0x5a, 0xa5}, int(bs/4)+1)[:bs]
	}

	type proto struct {
		name string
		base string
		sign func(r *http.Request, body []byte) error
	}
	protos := []proto{
		{"http", "http://" + httpLn.Addr().String() + "/v1/namespaces/default/blocks/", func(*http.Request, []byte) error { return nil }},
		{"s3", "http://" + s3ln.Addr().String() + "/default/", func(r *http.Request, body []byte) error {
			ph := "UNSIGNED-PAYLOAD"
			if *payloadMode == "sha256" {
				sum := sha256.Sum256(body) // for GET, body is nil: the empty hash
				ph = hex.EncodeToString(sum[:])
			}
			r.Header.Set("X-Amz-Content-Sha256", ph)
			return signer.SignHTTP(r.Context(), creds, r, ph, "s3", "us-east-1", time.Now())
		}},
	}
	// do runs op on every block with conc workers and returns the elapsed time.
	do := func(p proto, method string, round int) (time.Duration, error) {
		var next atomic.Int64
		var firstErr error
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := time.Now()
		for w := 0; w < *conc; w++ {
			wg.Go(func() {
				for {
					i := int(next.Add(1) - 1)
					if i >= *blocks {
						return
					}
					name := block.FormatHash(uint64(round)<<32 | uint64(i)<<1 | map[string]uint64{"http": 0, "s3": 1}[p.name])
					var body []byte
					if method == http.MethodPut {
						body = data[i]
					}
					err := func() error {
						req, err := http.NewRequestWithContext(ctx, method, p.base+name, bytes.NewReader(body))
						if err != nil {
							return err
						}
						if err := p.sign(req, body); err != nil {
							return err
						}
						resp, err := client.Do(req)
						if err != nil {
							return err
						}
						defer resp.Body.Close()
						n, err := io.Copy(io.Discard, resp.Body)
						if err != nil {
							return err
						}
						if resp.StatusCode/100 != 2 || (method == http.MethodGet && n != bs) {
							return fmt.Errorf("%s %s %s: status %d, %d bytes", p.name, method, name, resp.StatusCode, n)
						}
						return nil
					}()
					if err != nil {
						mu.Lock()
						if firstErr == nil {
							firstErr = err
						}
						mu.Unlock()
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start), firstErr
	}

	elapsed := map[string]time.Duration{}
	for r := 0; r < *rounds; r++ {
		order := protos
		if r%2 == 1 {
			order = []proto{protos[1], protos[0]}
		}
		for _, method := range []string{http.MethodPut, http.MethodGet} {
			for _, p := range order {
				d, err := do(p, method, r)
				if err != nil {
					return err
				}
				if r > 0 || *rounds == 1 { // round 0 warms connections and the arena
					elapsed[p.name+" "+method] += d
				}
			}
		}
		for i := 0; i < *blocks; i++ {
			for tag := uint64(0); tag < 2; tag++ {
				_ = store.Delete(ctx, block.NewKey("default", uint64(r)<<32|uint64(i)<<1|tag))
			}
		}
	}
	counted := *rounds - 1
	if *rounds == 1 {
		counted = 1
	}
	total := float64(int64(counted) * int64(*blocks) * bs)
	fmt.Printf("s3-vs-http: %d x %s blocks, %d clients, %d measured rounds, S3 payload %s\n", *blocks, block.FormatSize(bs), *conc, counted, *payloadMode)
	fmt.Println("baseline: gateway/httpapi (the native HTTP block API) over the same Store")
	fmt.Printf("%-4s %12s %12s %8s\n", "op", "http MB/s", "s3 MB/s", "s3/http")
	for _, method := range []string{http.MethodPut, http.MethodGet} {
		h := total / elapsed["http "+method].Seconds() / 1e6
		s := total / elapsed["s3 "+method].Seconds() / 1e6
		fmt.Printf("%-4s %12.0f %12.0f %8.2f\n", method, h, s, s/h)
	}
	return nil
}
