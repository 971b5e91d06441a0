package resp

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// BenchmarkGet1KiBPipelined measures the small-value GET path the way
// redis-benchmark -d 1024 -P 16 drives it: one op is a pipeline of 16 GETs
// of a 1 KiB value over one TCP connection to a server on a real DRAM tier.
// The baseline, measured in the same run, is a bare TCP server that reads
// the same request bytes and writes the same reply bytes (the socket cost
// alone); ratio_vs_raw_tcp is RESP's time per pipeline over the baseline's.
//
//	go test -run '^$' -bench Get1KiBPipelined -benchtime 20000x -cpuprofile cpu.out ./gateway/resp/
func BenchmarkGet1KiBPipelined(b *testing.B) {
	const depth = 16
	addr, _ := testServer(b, nil)
	value := strings.Repeat("v", 1024)
	c := dialBench(b, addr)
	if _, err := io.WriteString(c, encode("SET", "key:__rand_int__", value)); err != nil {
		b.Fatal(err)
	}
	readN(b, c, len("+OK\r\n"))
	req := strings.Repeat(encode("GET", "key:__rand_int__"), depth)
	reply := []byte(strings.Repeat(bulk(value), depth))

	raw := rawServer(b, len(req), reply)
	rc := dialBench(b, raw)
	pipeline := func(nc net.Conn, buf []byte) {
		if _, err := io.WriteString(nc, req); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(nc, buf); err != nil {
			b.Fatal(err)
		}
	}
	buf := make([]byte, len(reply))
	pipeline(c, buf)
	if !bytes.Equal(buf, reply) {
		b.Fatalf("GET replies differ from the expected %d bytes", len(reply))
	}
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		pipeline(rc, buf)
	}
	base := time.Since(start)
	start = time.Now()
	for range b.N {
		pipeline(c, buf)
	}
	got := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(got.Nanoseconds())/float64(b.N*depth), "ns/GET")
	b.ReportMetric(float64(base.Nanoseconds())/float64(b.N*depth), "raw_ns/GET")
	b.ReportMetric(float64(got)/float64(base), "ratio_vs_raw_tcp")
}

func dialBench(b *testing.B, addr string) net.Conn {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nc.Close() })
	return nc
}

func readN(b *testing.B, r io.Reader, n int) {
	if _, err := io.ReadFull(r, make([]byte, n)); err != nil {
		b.Fatal(err)
	}
}

// rawServer answers every reqLen bytes read with reply.
func rawServer(b *testing.B, reqLen int, reply []byte) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		if tc, ok := nc.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		buf := make([]byte, reqLen)
		for {
			if _, err := io.ReadFull(nc, buf); err != nil {
				return
			}
			if _, err := nc.Write(reply); err != nil {
				return
			}
		}
	}()
	return ln.Addr().String()
}
