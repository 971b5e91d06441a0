package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/gateway/s3api"
	"github.com/ctxtier/ctxtier/tiers/dram"
)

func init() {
	register("s3-multipart", "multipart upload and parallel ranged download of one large object through the S3 endpoint vs raw loopback TCP, same run", runS3Multipart)
}

// runS3Multipart uploads one object of -size to an object bucket with
// -concurrency parallel UploadPart requests of -part-size (SigV4,
// UNSIGNED-PAYLOAD), completes it, and downloads it with parallel ranged
// GETs of -part-size; each direction is compared with raw loopback TCP
// moving the same bytes over the same number of connections in the same run.
func runS3Multipart(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("s3-multipart", flag.ContinueOnError)
	sizeFlag := fs.String("size", "1GiB", "object size")
	partFlag := fs.String("part-size", "8MiB", "part size (and ranged-GET size)")
	conc := fs.Int("concurrency", 8, "parallel requests (and raw connections)")
	rounds := fs.Int("rounds", 2, "rounds; the first warms up and is not counted when there are several")
	if err := fs.Parse(args); err != nil {
		return err
	}
	size, err := block.ParseSize(*sizeFlag)
	if err != nil {
		return err
	}
	part, err := block.ParseSize(*partFlag)
	if err != nil {
		return err
	}
	if part < 1 || size < part || *conc < 1 || *rounds < 1 {
		return fmt.Errorf("need 1 <= part-size <= size, concurrency >= 1, rounds >= 1")
	}
	log := slog.New(slog.DiscardHandler)
	dcfg := dram.DefaultConfig()
	dcfg.Capacity = 2*size + 256<<20 // one object, plus a replaced one's blocks in flight
	dcfg.MaxBlockSize = 8 << 20
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
	ns := block.DefaultNamespaceConfig()
	ns.Name, ns.Kind = "bench-objects", block.KindObject
	if err := store.CreateNamespace(ctx, ns); err != nil {
		return err
	}
	key := credential.Credential{AccessKeyID: "CTXBENCH000000000001", Secret: "bench-secret-bench-secret-bench-secret-0", Namespaces: []string{"*"}}
	scfg := s3api.DefaultConfig()
	scfg.MaxObjectSize = 8 << 20
	// Each round replaces the one object and nothing streams the old one:
	// delete its blocks at once, so the DRAM sized above holds every round.
	scfg.RetireGrace = 0
	srv, err := s3api.New(scfg, store, credential.Static{key.AccessKeyID: key}, nil, log)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go srv.Serve(sctx, ln)
	base := "http://" + ln.Addr().String() + "/bench-objects/big-object"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *conc * 2, DisableCompression: true}}
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	creds := aws.Credentials{AccessKeyID: key.AccessKeyID, SecretAccessKey: key.Secret}
	do := func(method, url string, body []byte, hdr map[string]string) (*http.Response, []byte, error) {
		req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
		if err != nil {
			return nil, nil, err
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
		if err := signer.SignHTTP(ctx, creds, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now()); err != nil {
			return nil, nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode/100 != 2 {
			err = fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, b)
		}
		return resp, b, err
	}
	nparts := int((size + part - 1) / part)
	data := make([][]byte, min(nparts, 16)) // distinct part bodies, reused cyclically
	for i := range data {
		data[i] = bytes.Repeat([]byte{byte(i), 0x5a, byte(i >> 3), 0xa5}, int(part/4)+1)[:part]
	}
	partBody := func(i int) []byte {
		n := min(part, size-int64(i)*part)
		return data[i%len(data)][:n]
	}
	parallel := func(n int, fn func(i int) error) error {
		var next atomic.Int64
		var mu sync.Mutex
		var first error
		var wg sync.WaitGroup
		for range *conc {
			wg.Go(func() {
				for {
					i := int(next.Add(1) - 1)
					if i >= n {
						return
					}
					if err := fn(i); err != nil {
						mu.Lock()
						if first == nil {
							first = err
						}
						mu.Unlock()
						return
					}
				}
			})
		}
		wg.Wait()
		return first
	}
	upload := func() error {
		_, b, err := do(http.MethodPost, base+"?uploads", nil, nil) //nolint:bodyclose // do reads and closes the body
		if err != nil {
			return err
		}
		var init struct{ UploadId string }
		if err := xml.Unmarshal(b, &init); err != nil {
			return err
		}
		etags := make([]string, nparts)
		if err := parallel(nparts, func(i int) error {
			resp, _, err := do(http.MethodPut, fmt.Sprintf("%s?partNumber=%d&uploadId=%s", base, i+1, init.UploadId), partBody(i), nil) //nolint:bodyclose // do reads and closes the body
			if err == nil {
				etags[i] = resp.Header.Get("Etag")
			}
			return err
		}); err != nil {
			return err
		}
		var doc bytes.Buffer
		doc.WriteString("<CompleteMultipartUpload>")
		for i, e := range etags {
			fmt.Fprintf(&doc, "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>", i+1, e)
		}
		doc.WriteString("</CompleteMultipartUpload>")
		_, _, err = do(http.MethodPost, base+"?uploadId="+init.UploadId, doc.Bytes(), nil) //nolint:bodyclose // do reads and closes the body
		return err
	}
	download := func() error {
		return parallel(nparts, func(i int) error {
			first := int64(i) * part
			last := min(first+part, size) - 1
			_, b, err := do(http.MethodGet, base, nil, map[string]string{"Range": fmt.Sprintf("bytes=%d-%d", first, last)}) //nolint:bodyclose // do reads and closes the body
			if err == nil && !bytes.Equal(b, partBody(i)) {
				err = fmt.Errorf("range %d-%d: wrong bytes", first, last)
			}
			return err
		})
	}
	var up, down, rawUp time.Duration
	counted := 0
	for r := 0; r < *rounds; r++ {
		t0 := time.Now()
		if err := upload(); err != nil {
			return err
		}
		t1 := time.Now()
		if err := download(); err != nil {
			return err
		}
		t2 := time.Now()
		raw, err := rawLoopback(ctx, *conc, nparts, partBody)
		if err != nil {
			return err
		}
		if r > 0 || *rounds == 1 {
			up += t1.Sub(t0)
			down += t2.Sub(t1)
			rawUp += raw
			counted++
		}
	}
	mb := func(d time.Duration) float64 { return float64(int64(counted)*size) / d.Seconds() / 1e6 }
	fmt.Printf("s3-multipart: %s object, %d parts of %s, %d parallel requests, %d measured rounds\n", block.FormatSize(size), nparts, block.FormatSize(part), *conc, counted)
	fmt.Println("baseline: raw loopback TCP moving the same parts over the same number of connections")
	fmt.Printf("%-26s %10s %10s %8s\n", "op", "raw MB/s", "s3 MB/s", "s3/raw")
	fmt.Printf("%-26s %10.0f %10.0f %8.2f\n", "upload (multipart)", mb(rawUp), mb(up), mb(up)/mb(rawUp))
	fmt.Printf("%-26s %10.0f %10.0f %8.2f\n", "download (ranged GETs)", mb(rawUp), mb(down), mb(down)/mb(rawUp))
	return nil
}

// rawLoopback sends n parts (body(i)) over conc loopback TCP connections,
// each part read fully by the receiver, and returns the elapsed time.
func rawLoopback(ctx context.Context, conc, n int, body func(int) []byte) (time.Duration, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	var got atomic.Int64
	drained := make(chan struct{}, conc) // one per connection the receiver read to EOF
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { drained <- struct{}{} }()
				defer c.Close()
				buf := make([]byte, 1<<20)
				for {
					k, err := c.Read(buf)
					got.Add(int64(k))
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	var want int64
	for i := range n {
		want += int64(len(body(i)))
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	start := time.Now()
	for range conc {
		wg.Go(func() {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if _, err := c.Write(body(i)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	for range conc {
		select {
		case <-drained:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	elapsed := time.Since(start)
	if got.Load() != want {
		return 0, fmt.Errorf("raw loopback: received %d of %d bytes", got.Load(), want)
	}
	return elapsed, nil
}
