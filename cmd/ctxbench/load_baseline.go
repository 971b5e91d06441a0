package main

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// rawTCPBaseline measures what loopback TCP alone moves with no protocol: a
// local listener streams blocks of blockSize over conns connections, the
// receivers read every block fully into a buffer, for d. It returns GB/s
// received. This is the ceiling the native protocol is compared against.
func rawTCPBaseline(ctx context.Context, blockSize, conns int, d time.Duration) (float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	var senders sync.WaitGroup
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			senders.Add(1)
			go func() {
				defer senders.Done()
				defer nc.Close()
				src := make([]byte, blockSize)
				for i := range src {
					src[i] = byte(i * 7)
				}
				for {
					if _, err := nc.Write(src); err != nil {
						return
					}
				}
			}()
		}
	}()
	runCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var total atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, conns)
	start := time.Now()
	for range conns {
		nc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return 0, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer nc.Close()
			stop := context.AfterFunc(runCtx, func() { nc.SetReadDeadline(time.Unix(1, 0)) })
			defer stop()
			buf := make([]byte, blockSize)
			for runCtx.Err() == nil {
				if _, err := io.ReadFull(nc, buf); err != nil {
					if runCtx.Err() == nil {
						errc <- err
					}
					return
				}
				total.Add(int64(blockSize))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	ln.Close()
	senders.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return 0, err
	}
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	if total.Load() == 0 {
		return 0, errors.New("no block received")
	}
	return float64(total.Load()) / elapsed.Seconds() / 1e9, nil
}
