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

// maxBaselineBytes caps the memory the baseline's distinct source blocks take.
const maxBaselineBytes = 512 << 20

// rawBaseline measures what loopback TCP alone moves with no protocol: a
// local listener streams blocks over the same number of connections, the
// receivers read every block fully into a buffer. The senders cycle through
// as many distinct blocks as the load's working set (up to
// maxBaselineBytes), so both sides copy from the same memory footprint and
// the ratio isolates the protocol's cost from the cache's.
type rawBaseline struct {
	blockSize int
	conns     int
	blocks    [][]byte
}

func newRawBaseline(ws *workingSet, conns, keys int) *rawBaseline {
	bs := len(ws.base)
	n := max(1, min(keys, maxBaselineBytes/bs))
	b := &rawBaseline{blockSize: bs, conns: conns, blocks: make([][]byte, n)}
	for i := range b.blocks {
		b.blocks[i] = make([]byte, bs)
		ws.fill(b.blocks[i], i)
	}
	return b
}

// run streams for d and returns GB/s received.
func (b *rawBaseline) run(ctx context.Context, d time.Duration) (float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	var senders sync.WaitGroup
	var accepted atomic.Int64
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			j := int(accepted.Add(1))
			senders.Add(1)
			go func() {
				defer senders.Done()
				defer nc.Close()
				for i := j; ; i++ {
					if _, err := nc.Write(b.blocks[i%len(b.blocks)]); err != nil {
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
	errc := make(chan error, b.conns)
	start := time.Now()
	for range b.conns {
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
			buf := make([]byte, b.blockSize)
			for runCtx.Err() == nil {
				if _, err := io.ReadFull(nc, buf); err != nil {
					if runCtx.Err() == nil {
						errc <- err
					}
					return
				}
				total.Add(int64(b.blockSize))
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
