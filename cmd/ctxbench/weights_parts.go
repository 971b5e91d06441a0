package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// writeSafetensors writes a synthetic safetensors checkpoint of at most size
// bytes (headers included; each file a few KiB short of its share) into
// dir as files shards, and returns its size: BF16 tensors of up to
// 64 MiB with random bytes (ChaCha8, seeded, so runs are reproducible),
// each file a valid safetensors file (8-byte little-endian header length,
// JSON header padded to 8 bytes, then the tensors back to back).
func writeSafetensors(dir string, size int64, files int) (int64, error) {
	var written int64
	const tensorMax = 64 << 20
	per := size / int64(files)
	var seed [32]byte
	rng := rand.NewChaCha8(seed)
	buf := make([]byte, 4<<20)
	for fi := range files {
		budget := per
		if fi == files-1 {
			budget = size - per*int64(files-1)
		}
		name := filepath.Join(dir, fmt.Sprintf("model-%05d-of-%05d.safetensors", fi+1, files))
		// The header's length depends on the tensor list, which depends on
		// the room the header leaves: take 160 bytes per tensor (an entry
		// is about 110) and 256 for the metadata.
		headerRoom := 256 + 160*((budget+tensorMax-1)/tensorMax)
		if budget < headerRoom+8+2 {
			return 0, fmt.Errorf("weights checkpoint: %d bytes per file is too small", budget)
		}
		data := budget - headerRoom - 8
		header := map[string]any{"__metadata__": map[string]string{"format": "pt", "source": "ctxbench weights"}}
		var off int64
		for i := 0; off < data; i++ {
			n := min(tensorMax, data-off)
			n -= n % 2 // BF16
			if n == 0 {
				break
			}
			header[fmt.Sprintf("model.layers.%d.mlp.weight", i)] = map[string]any{
				"dtype": "BF16", "shape": []int64{n / 2}, "data_offsets": []int64{off, off + n},
			}
			off += n
		}
		hj, err := json.Marshal(header)
		if err != nil {
			return 0, err
		}
		if int64(len(hj)) > headerRoom {
			return 0, fmt.Errorf("weights checkpoint: header of %d bytes over its %d-byte room", len(hj), headerRoom)
		}
		hlen := (len(hj) + 7) &^ 7 // padded with spaces: tensors start 8-aligned
		hdr := make([]byte, 8+hlen)
		binary.LittleEndian.PutUint64(hdr, uint64(hlen))
		copy(hdr[8:], hj)
		for i := 8 + len(hj); i < len(hdr); i++ {
			hdr[i] = ' '
		}
		fh, err := os.Create(name)
		if err != nil {
			return 0, err
		}
		if _, err := fh.Write(hdr); err != nil {
			fh.Close()
			return 0, err
		}
		for rest := off; rest > 0; {
			b := buf[:min(int64(len(buf)), rest)]
			rng.Read(b)
			if _, err := fh.Write(b); err != nil {
				fh.Close()
				return 0, err
			}
			rest -= int64(len(b))
		}
		if err := fh.Close(); err != nil {
			return 0, err
		}
		written += int64(len(hdr)) + off
	}
	return written, nil
}

// rawTCP moves total bytes over streams loopback TCP connections (each
// total/streams, read in chunk-sized pieces into a buffer, nothing else
// done with them) and returns how long it took: the baseline of the same
// bytes over the same number of streams with no protocol, no storage and
// no checksum.
func rawTCP(ctx context.Context, total int64, streams, chunk int) (time.Duration, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	per := total / int64(streams)
	src := make([]byte, chunk)
	rand.NewChaCha8([32]byte{1}).Read(src)
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				for rest := per; rest > 0; {
					n, err := nc.Write(src[:min(int64(len(src)), rest)])
					if err != nil {
						return
					}
					rest -= int64(n)
				}
			}()
		}
	}()
	conns := make([]net.Conn, streams)
	for i := range conns {
		if conns[i], err = net.Dial("tcp", ln.Addr().String()); err != nil {
			for _, c := range conns[:i] {
				c.Close()
			}
			return 0, err
		}
	}
	var wg sync.WaitGroup
	errc := make(chan error, streams)
	start := time.Now()
	for _, nc := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer nc.Close()
			stop := context.AfterFunc(ctx, func() { nc.SetReadDeadline(time.Unix(1, 0)) })
			defer stop()
			buf := make([]byte, chunk)
			for rest := per; rest > 0; {
				n, err := io.ReadFull(nc, buf[:min(int64(len(buf)), rest)])
				rest -= int64(n)
				if err != nil {
					errc <- fmt.Errorf("raw tcp: %w (%d bytes short)", err, rest)
					return
				}
			}
		}()
	}
	wg.Wait()
	d := time.Since(start)
	close(errc)
	if err := <-errc; err != nil {
		return 0, err
	}
	return d, ctx.Err()
}

// versityServer is a versitygw process (posix backend) the bench runs as
// the plain S3 server workers read the checkpoint from directly.
type versityServer struct {
	addr, dir string
	cmd       *exec.Cmd
	done      chan struct{}
}

// versitygw credentials (scripts/versitygw.sh's defaults).
const (
	versityAccess = "ctxtier-test"
	versitySecret = "ctxtier-test-secret-key"
)

// findVersitygw returns path when set, else $CTXTIER_VERSITYGW, else the
// binary scripts/versitygw.sh install caches.
func findVersitygw(path string) (string, error) {
	if path == "" {
		path = os.Getenv("CTXTIER_VERSITYGW")
	}
	if path == "" {
		cache := os.Getenv("CTXTIER_CACHE")
		if cache == "" {
			home, _ := os.UserHomeDir()
			cache = filepath.Join(home, ".cache", "ctxtier")
		}
		path = filepath.Join(cache, "bin", "versitygw-v1.8.0")
	}
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("versitygw: %w (run scripts/versitygw.sh install, or pass --versitygw)", err)
	}
	return path, nil
}

// startVersity runs versitygw on a free port over dir and waits until it
// listens.
func startVersity(ctx context.Context, bin, dir, log string) (*versityServer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	addrs, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	v := &versityServer{addr: addrs[0], dir: dir, done: make(chan struct{})}
	v.cmd = exec.Command(bin, "--port", v.addr, "--access", versityAccess, "--secret", versitySecret, "posix", dir)
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "AWS_CA_BUNDLE=") { // breaks tools built on the AWS SDK v2
			v.cmd.Env = append(v.cmd.Env, e)
		}
	}
	logf, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	v.cmd.Stdout, v.cmd.Stderr = logf, logf
	err = v.cmd.Start()
	logf.Close()
	if err != nil {
		return nil, fmt.Errorf("starting versitygw: %w", err)
	}
	go func() { v.cmd.Wait(); close(v.done) }()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		select {
		case <-v.done:
			b, _ := os.ReadFile(log)
			return nil, fmt.Errorf("versitygw exited: %s", b)
		default:
		}
		if c, err := net.DialTimeout("tcp", v.addr, 100*time.Millisecond); err == nil {
			c.Close()
			return v, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	v.stop()
	return nil, errors.New("versitygw did not listen within 20s")
}

func (v *versityServer) stop() {
	v.cmd.Process.Kill()
	<-v.done
}
