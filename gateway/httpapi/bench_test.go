package httpapi

import (
	"context"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/client"
)

// tcpBaseline serves size bytes per 1-byte request over one loopback TCP
// connection: the floor any block protocol on this machine can reach.
func tcpBaseline(b *testing.B, size int) (roundTrip func() error, stop func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, size)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var req [1]byte
		for {
			if _, err := io.ReadFull(c, req[:]); err != nil {
				return
			}
			if _, err := c.Write(payload); err != nil {
				return
			}
		}
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, size)
	return func() error {
			if _, err := conn.Write([]byte{1}); err != nil {
				return err
			}
			_, err := io.ReadFull(conn, buf)
			return err
		}, func() {
			conn.Close()
			ln.Close()
		}
}

// BenchmarkHTTPGetVsTCP measures a whole-block GET through HTTPClient.GetInto
// (checksum verified) against the raw-TCP baseline in the same run, and
// reports the ratio (1.0 = as fast as raw TCP).
func BenchmarkHTTPGetVsTCP(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20, 8 << 20} {
		b.Run(byteSize(size), func(b *testing.B) {
			e := newBenchEnv(b)
			data := make([]byte, size)
			for i := range data {
				data[i] = byte(i * 7)
			}
			cfg := client.HTTPDefaultConfig()
			cfg.BaseURL = e.ts.URL
			c, err := client.NewHTTP(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			k := block.NewKey("default", 1)
			if err := c.Put(ctx, k, data, block.PutOptions{}); err != nil {
				b.Fatal(err)
			}
			rt, stop := tcpBaseline(b, size)
			defer stop()
			buf := make([]byte, size)
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				if err := rt(); err != nil {
					b.Fatal(err)
				}
			}
			tcp := time.Since(start)
			start = time.Now()
			for range b.N {
				if _, err := c.GetInto(ctx, k, buf); err != nil {
					b.Fatal(err)
				}
			}
			httpT := time.Since(start)
			b.ReportMetric(float64(httpT)/float64(tcp), "x_tcp")
			b.ReportMetric(float64(size)*float64(b.N)/httpT.Seconds()/1e9, "http_GB/s")
			b.ReportMetric(float64(size)*float64(b.N)/tcp.Seconds()/1e9, "tcp_GB/s")
		})
	}
}

func byteSize(n int) string {
	if n >= 1<<20 {
		return strconv.Itoa(n>>20) + "MiB"
	}
	return strconv.Itoa(n>>10) + "KiB"
}

// newBenchEnv is newEnv with 64 MiB blocks.
func newBenchEnv(b *testing.B) *env {
	return newEnv(b, func(c *Config) { c.MaxBlockSize = 64 << 20 })
}
