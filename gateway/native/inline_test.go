package native_test

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/native"
	"github.com/ctxtier/ctxtier/gateway/native/nativetest"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// putBlocks puts n random blocks of size bytes through r and returns them by key.
func putBlocks(t *testing.T, r *raw, n, size int) ([]block.Key, [][]byte) {
	t.Helper()
	rnd := rand.New(rand.NewSource(int64(n*size + 1)))
	keys := make([]block.Key, n)
	data := make([][]byte, n)
	for i := range keys {
		keys[i] = block.Key{Namespace: "default", Hash: rnd.Uint64()}
		data[i] = make([]byte, size)
		rnd.Read(data[i])
		r.send(frame(wire.OpPut, uint64(i+1), 1, putBody("default", keys[i], data[i], crc32.Checksum(data[i], castagnoli))))
		if resp := r.recv(); resp.Header.Code != errcode.OK || resp.Items[0].Code != errcode.OK {
			t.Fatalf("put %d: %+v", i, resp)
		}
	}
	return keys, data
}

// TestPipelinedGetsSentBeforeReading sends GETs of large blocks, each
// followed by a PUT as large, before reading any response: far more bytes
// than the sockets buffer either way. The reader, which writes responses
// itself while the writer is idle, must never wait on the socket, or it
// would stop reading the PUTs while this client, still sending them, reads
// nothing: each side would wait on the other. Every response arrives in
// order with its block's bytes, and every lease is released.
func TestPipelinedGetsSentBeforeReading(t *testing.T) {
	cfg := smallConfig()
	srv := startServer(t, cfg)
	r, _ := dialRaw(t, srv.Addr, wire.Version)
	r.nc.SetDeadline(time.Now().Add(60 * time.Second))
	keys, data := putBlocks(t, r, 4, 1<<20)
	const pairs = 24 // 24 MiB each way, fewer responses than MaxInFlight
	var frames []byte
	for i := range pairs {
		j := i % len(keys)
		frames = append(frames, frame(wire.OpGet, uint64(100+2*i), 1, keyBody("default", keys[j]))...)
		// The same block again: an idempotent put.
		frames = append(frames, frame(wire.OpPut, uint64(101+2*i), 1,
			putBody("default", keys[j], data[j], crc32.Checksum(data[j], castagnoli)))...)
	}
	// A small receive buffer makes the server's socket fill sooner.
	r.nc.(*net.TCPConn).SetReadBuffer(64 << 10)
	r.nc.SetWriteDeadline(time.Now().Add(20 * time.Second))
	r.send(frames)
	for i := range pairs {
		resp := r.recv()
		if resp.Header.ID != uint64(100+2*i) || resp.Header.Code != errcode.OK || len(resp.Items) != 1 {
			t.Fatalf("get %d: header %+v, %d items", i, resp.Header, len(resp.Items))
		}
		if it := resp.Items[0]; it.Code != errcode.OK || !bytes.Equal(it.Data, data[i%len(keys)]) {
			t.Fatalf("get %d: code %v, %d bytes, not the block's", i, it.Code, len(it.Data))
		}
		resp = r.recv()
		if resp.Header.ID != uint64(101+2*i) || resp.Header.Code != errcode.OK || resp.Items[0].Code != errcode.OK {
			t.Fatalf("put %d: %+v", i, resp)
		}
	}
	waitLeases(t, srv, 0)
}

// TestSlowReaderGetsWholeBlocks reads each large response a few KiB at a
// time, so the reader's own write stops short and the writer finishes it:
// the bytes must still be exactly the block's, and sequential requests on
// the connection must go on being answered in order.
func TestSlowReaderGetsWholeBlocks(t *testing.T) {
	cfg := native.DefaultConfig()
	cfg.MaxBlockSize = 8 << 20 // more than the socket takes at once
	cfg.MaxResponseSize = 16 << 20
	srv := startServer(t, cfg)
	r, _ := dialRaw(t, srv.Addr, wire.Version)
	r.nc.SetDeadline(time.Now().Add(60 * time.Second))
	keys, data := putBlocks(t, r, 2, 8<<20)
	for i := range 4 {
		r.send(frame(wire.OpGet, uint64(200+i), 1, keyBody("default", keys[i%2])))
		time.Sleep(20 * time.Millisecond) // let the server's write stop on a full socket
		var hb [wire.HeaderSize]byte
		if _, err := io.ReadFull(r.br, hb[:]); err != nil {
			t.Fatal(err)
		}
		h, err := wire.DecodeHeader(hb[:], 1<<31)
		if err != nil || h.ID != uint64(200+i) {
			t.Fatalf("header %+v, %v", h, err)
		}
		body := make([]byte, h.Length)
		for got := 0; got < len(body); {
			n, err := r.br.Read(body[got:min(len(body), got+64<<10)])
			if err != nil {
				t.Fatal(err)
			}
			got += n
		}
		resp, err := wire.ReadResponse(bytes.NewReader(body), h, nil)
		if err != nil || resp.Items[0].Code != errcode.OK || !bytes.Equal(resp.Items[0].Data, data[i%2]) {
			t.Fatalf("get %d: %v, not the block's bytes", i, err)
		}
	}
	waitLeases(t, srv, 0)
}

// TestResponseAfterWriteDeadlinePassed: once the writer has written with
// a write deadline, that deadline stays on the socket, and when it has
// passed the reader's own write is refused before any byte is written.
// The response must then go to the writer whole (which sets a new
// deadline), for a small response (no segments) as for a block.
func TestResponseAfterWriteDeadlinePassed(t *testing.T) {
	cfg := native.DefaultConfig()
	cfg.MaxBlockSize = 8 << 20
	cfg.MaxResponseSize = 16 << 20
	// The deadline must pass between requests, so the test sleeps past it
	// four times; it must also be long enough for an 8 MiB response to a
	// reader on a loaded machine under -race (at 300 ms, two of five rounds
	// of a loaded race run were cut off mid-response).
	const writeTimeout = 1500 * time.Millisecond
	cfg.WriteTimeout = writeTimeout
	srv := startServer(t, cfg)
	r, _ := dialRaw(t, srv.Addr, wire.Version)
	r.nc.SetDeadline(time.Now().Add(120 * time.Second))
	keys, data := putBlocks(t, r, 1, 8<<20)
	for i := range 2 {
		// More than the socket takes at once: the writer finishes it,
		// with a write deadline writeTimeout ahead.
		r.send(frame(wire.OpGet, uint64(10+i), 1, keyBody("default", keys[0])))
		if resp := r.recv(); resp.Header.ID != uint64(10+i) || resp.Items[0].Code != errcode.OK || !bytes.Equal(resp.Items[0].Data, data[0]) {
			t.Fatalf("get %d: not the block", i)
		}
		time.Sleep(writeTimeout + 100*time.Millisecond) // the deadline passes
		r.send(frame(wire.OpExists, uint64(20+i), 1, keyBody("default", keys[0])))
		if resp := r.recv(); resp.Header.ID != uint64(20+i) || resp.Header.Code != errcode.OK || !resp.Items[0].Present {
			t.Fatalf("exists %d: %+v", i, resp)
		}
		time.Sleep(writeTimeout + 100*time.Millisecond)
		r.send(frame(wire.OpGet, uint64(30+i), 1, keyBody("default", keys[0])))
		if resp := r.recv(); resp.Header.ID != uint64(30+i) || resp.Items[0].Code != errcode.OK || !bytes.Equal(resp.Items[0].Data, data[0]) {
			t.Fatalf("get %d after the deadline: not the block", i)
		}
	}
	waitLeases(t, srv, 0)
}

func waitLeases(t *testing.T, srv *nativetest.Server, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for srv.Tier.OpenLeases() != want {
		if time.Now().After(deadline) {
			t.Fatalf("open leases %d, want %d", srv.Tier.OpenLeases(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// BenchmarkGet measures one connection's GET round trips (a request, then
// its whole response) of blocks of each size, and the same number of round
// trips against a plain Go TCP server that answers an 8-byte request with
// the block's bytes, in the same run: ratio_vs_raw_tcp is the raw time per
// round trip over ctxtier's (1 would be as fast as raw TCP), and
// cpu_ratio_vs_raw_tcp the same for the process's CPU time. ns/op and
// allocs/op cover the ctxtier round trips only, client and server side.
func BenchmarkGet(b *testing.B) {
	for _, size := range []int{4 << 10, 256 << 10, 2 << 20} {
		b.Run(byteSize(size), func(b *testing.B) {
			cfg := native.DefaultConfig()
			srv, err := nativetest.Start(b, cfg)
			if err != nil {
				b.Fatal(err)
			}
			data := make([]byte, size)
			rand.New(rand.NewSource(1)).Read(data)
			k := block.Key{Namespace: "default", Hash: 42}
			if err := srv.Store.Put(b.Context(), k, data, block.PutOptions{}); err != nil {
				b.Fatal(err)
			}
			nc := benchDial(b, srv.Addr)
			req := frame(wire.OpGet, 1, 1, keyBody("default", k))
			resp := make([]byte, wire.HeaderSize+wire.StatusSize+wire.GetMetaSize+size)
			raw := rawServer(b, data)
			rreq := make([]byte, 8)
			rresp := make([]byte, size)
			roundTrip := func(c net.Conn, q, p []byte) {
				if _, err := c.Write(q); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, p); err != nil {
					b.Fatal(err)
				}
			}
			roundTrip(nc, req, resp) // warm up both
			roundTrip(raw, rreq, rresp)
			if !bytes.Equal(resp[len(resp)-size:], data) {
				b.Fatal("GET returned other bytes")
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			// The two loops run one after the other, each timed in wall
			// and in this process's CPU (client and server together): on
			// a shared machine the CPU figures swing less.
			c0, t0 := cpuTime(), time.Now()
			for i := 0; i < b.N; i++ {
				roundTrip(nc, req, resp)
			}
			c1, t1 := cpuTime(), time.Now()
			b.StopTimer()
			for i := 0; i < b.N; i++ {
				roundTrip(raw, rreq, rresp)
			}
			c2, t2 := cpuTime(), time.Now()
			n := float64(b.N)
			b.ReportMetric(float64(t1.Sub(t0).Nanoseconds())/n, "ns/get")
			b.ReportMetric(float64(t2.Sub(t1).Nanoseconds())/n, "ns/raw")
			b.ReportMetric(float64(t2.Sub(t1))/float64(t1.Sub(t0)), "ratio_vs_raw_tcp")
			b.ReportMetric(float64((c1-c0).Nanoseconds())/n, "cpu-ns/get")
			b.ReportMetric(float64((c2-c1).Nanoseconds())/n, "cpu-ns/raw")
			b.ReportMetric(float64(c2-c1)/float64(c1-c0), "cpu_ratio_vs_raw_tcp")
		})
	}
}

// cpuTime is this process's user plus system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func byteSize(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

// benchDial handshakes anonymously with a version-2 server.
func benchDial(b *testing.B, addr string) net.Conn {
	b.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nc.Close() })
	if _, err := nc.Write(wire.AppendHello(nil, wire.Version, 0)); err != nil {
		b.Fatal(err)
	}
	var rep [wire.HelloReplySize + wire.ChallengeSize]byte
	if _, err := io.ReadFull(nc, rep[:]); err != nil {
		b.Fatal(err)
	}
	if _, err := nc.Write(wire.AppendAuth(nil, wire.Auth{})); err != nil {
		b.Fatal(err)
	}
	var ar [wire.AuthReplySize]byte
	if _, err := io.ReadFull(nc, ar[:]); err != nil {
		b.Fatal(err)
	}
	if rep, err := wire.DecodeAuthReply(ar[:]); err != nil || rep.Code != errcode.OK {
		b.Fatalf("auth reply %+v, %v", rep, err)
	}
	return nc
}

// rawServer answers every 8 bytes it reads with data, on one connection.
func rawServer(b *testing.B, data []byte) net.Conn {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var q [8]byte
		for {
			if _, err := io.ReadFull(c, q[:]); err != nil {
				return
			}
			if _, err := c.Write(data); err != nil {
				return
			}
		}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nc.Close() })
	return nc
}
