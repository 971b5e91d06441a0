package client

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/descriptor"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/native"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
)

var verifyModes = []VerifyMode{VerifyChecksum, VerifyVersion}

func TestReadDirectVerifyVersion(t *testing.T) {
	if !descriptor.VersionReads {
		t.Skip("no version reads on this architecture")
	}
	ctx := context.Background()
	m := stack(t, 4, true)
	srv, c := startDirect(t, native.DefaultConfig(), m, Options{Conns: 2, DirectVerify: VerifyVersion})
	const n = 8
	for i := range uint64(n) {
		if err := c.Put(ctx, block.NewKey("default", i), payload(i, blockSize)); err != nil {
			t.Fatal(err)
		}
	}
	plain, err := Dial(ctx, srv.Addr, Options{Conns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	buf := make([]byte, blockSize)
	tiersSeen := map[block.Tier]int{}
	for i := range uint64(n) {
		k := block.NewKey("default", i)
		l := describeOne(t, c, k)
		tiersSeen[l.Desc.Tier]++
		if l.Desc.Tier == block.TierDRAM && l.Desc.VersionOffset == 0 {
			t.Fatalf("%s: a dram lease without a version word: %+v", k, l.Desc)
		}
		if l.Desc.Tier == block.TierNVMe && l.Desc.VersionOffset != 0 {
			t.Fatalf("%s: an nvme lease with a version word: %+v", k, l.Desc)
		}
		if got, err := c.ReadLease(l, buf); err != nil || !bytes.Equal(buf[:got], payload(i, blockSize)) {
			t.Fatalf("ReadLease %s (%s): %v", k, l.Desc.Tier, err)
		}
		c.Release(ctx, l)
		clear(buf)
		if got, err := c.ReadDirect(ctx, k, buf); err != nil || !bytes.Equal(buf[:got], payload(i, blockSize)) {
			t.Fatalf("ReadDirect %s: %v", k, err)
		}
		// A checksum-mode client asks for no version word and gets the
		// original descriptor, as an old client does.
		pl := describeOne(t, plain, k)
		if pl.Desc.VersionOffset != 0 || (pl.Desc.Tier == block.TierDRAM && pl.Desc.Generation != 0) {
			t.Fatalf("%s: checksum-mode lease carries a version: %+v", k, pl.Desc)
		}
		plain.Release(ctx, pl)
	}
	if tiersSeen[block.TierDRAM] == 0 || tiersSeen[block.TierNVMe] == 0 {
		t.Fatalf("descriptors by tier %v: want both", tiersSeen)
	}
	if s := c.DirectStats(); s.Direct != n || s.Fallbacks != 0 || s.Mismatches != 0 {
		t.Fatalf("stats %+v", s)
	}
	waitLeases(t, srv, 0)
}

// forceLease makes l look held and unexpired to this client again, as a
// reader that mistakes a lease's end would.
func forceLease(l *Lease) {
	l.released.Store(false)
	l.Expires = time.Now().Add(time.Hour)
}

// TestStaleLeaseReadFails reads through a lease that ended, after its
// block was deleted and its pages reused by other blocks: each mode must
// refuse the read, never return the other blocks' bytes.
func TestStaleLeaseReadFails(t *testing.T) {
	ctx := context.Background()
	for _, mode := range verifyModes {
		t.Run(mode.String(), func(t *testing.T) {
			m := stack(t, 2, false)
			srv, c := startDirect(t, native.DefaultConfig(), m, Options{Conns: 1, DirectVerify: mode})
			k := block.NewKey("default", 1)
			if err := c.Put(ctx, k, payload(1, blockSize)); err != nil {
				t.Fatal(err)
			}
			l := describeOne(t, c, k)
			if (l.Desc.VersionOffset != 0) != (mode == VerifyVersion && descriptor.VersionReads) {
				t.Fatalf("version word %d in %s mode", l.Desc.VersionOffset, mode)
			}
			buf := make([]byte, blockSize)
			if n, err := c.ReadLease(l, buf); err != nil || !bytes.Equal(buf[:n], payload(1, blockSize)) {
				t.Fatalf("read through the live lease: %v", err)
			}
			if errs := c.Release(ctx, l); errs[0] != nil {
				t.Fatal(errs[0])
			}
			waitLeases(t, srv, 0)
			if _, err := c.ReadLease(l, buf); !errors.Is(err, block.ErrUnavailable) {
				t.Fatalf("read through a released lease: %v, want Unavailable", err)
			}
			if err := c.Delete(ctx, k); err != nil {
				t.Fatal(err)
			}
			reused := false
			for i := uint64(10); i < 12; i++ {
				ki := block.NewKey("default", i)
				if err := c.Put(ctx, ki, payload(i, blockSize)); err != nil {
					t.Fatal(err)
				}
				li := describeOne(t, c, ki)
				reused = reused || li.Desc.Offset == l.Desc.Offset
				c.Release(ctx, li)
			}
			if !reused {
				t.Fatal("the test needs the deleted block's pages reused")
			}
			forceLease(l)
			clear(buf)
			n, err := c.ReadLease(l, buf)
			if !errors.Is(err, block.ErrChecksum) {
				t.Fatalf("stale read in %s mode: %d bytes, err %v; want ErrChecksum", mode, n, err)
			}
			// ReadDirect of the deleted block: not found, never the new bytes.
			if _, err := c.ReadDirect(ctx, k, buf); !errors.Is(err, block.ErrNotFound) {
				t.Fatalf("ReadDirect of the deleted block: %v", err)
			}
		})
	}
}

// TestDirectReadsUnderEviction races direct reads against puts and deletes
// that evict blocks and reuse their pages, in both verify modes. Fresh
// ReadDirect and ReadDirectRun calls must return the right bytes (or
// NotFound); reads through
// leases that already ended — pages possibly reused under the copy — may
// fail, but one that succeeds must return the right bytes too.
func TestDirectReadsUnderEviction(t *testing.T) {
	const keys = 24
	for _, mode := range verifyModes {
		t.Run(mode.String(), func(t *testing.T) {
			ctx := context.Background()
			m := stack(t, 4, false)
			srv, w := startDirect(t, native.DefaultConfig(), m, Options{Conns: 2})
			srvAddr := srv.Addr
			blocks := make([][]byte, keys)
			for i := range blocks {
				blocks[i] = payload(uint64(i), blockSize)
			}
			var (
				wg                          sync.WaitGroup
				stop                        atomic.Bool
				fresh, staleOK, staleFailed atomic.Int64
			)
			errs := make(chan error, 16)
			fail := func(err error) {
				select {
				case errs <- err:
				default:
				}
			}
			for g := range 2 { // writers
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(g), 1))
					for !stop.Load() {
						i := r.IntN(keys)
						k := block.NewKey("default", uint64(i))
						if r.IntN(4) == 0 {
							if err := w.Delete(ctx, k); err != nil && !errors.Is(err, block.ErrNotFound) {
								fail(err)
								return
							}
						} else if err := w.Put(ctx, k, blocks[i]); err != nil && !errors.Is(err, block.ErrNoSpace) {
							fail(err)
							return
						}
					}
				}()
			}
			for g := range 2 { // readers
				c, err := Dial(ctx, srvAddr, Options{Conns: 1, DirectVerify: mode})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(g), 2))
					buf := make([]byte, blockSize)
					runBufs := make([][]byte, 5)
					for j := range runBufs {
						runBufs[j] = make([]byte, blockSize)
					}
					for !stop.Load() {
						i := r.IntN(keys)
						k := block.NewKey("default", uint64(i))
						clear(buf)
						if r.IntN(3) == 0 {
							// A run: ReadDirectRun's pipelined batches.
							rk := make([]block.Key, 5)
							ri := make([]int, len(rk))
							for j := range rk {
								ri[j] = r.IntN(keys)
								rk[j] = block.NewKey("default", uint64(ri[j]))
								clear(runBufs[j])
							}
							sizes, rerrs, err := c.ReadDirectRun(ctx, rk, runBufs, 2)
							if err != nil {
								fail(fmt.Errorf("ReadDirectRun: %w", err))
								return
							}
							for j := range rk {
								switch {
								case errors.Is(rerrs[j], block.ErrNotFound):
								case rerrs[j] != nil:
									fail(fmt.Errorf("ReadDirectRun %s: %w", rk[j], rerrs[j]))
									return
								case !bytes.Equal(runBufs[j][:sizes[j]], blocks[ri[j]]):
									fail(fmt.Errorf("ReadDirectRun %s (%s): wrong bytes", rk[j], mode))
									return
								default:
									fresh.Add(1)
								}
							}
							continue
						}
						if r.IntN(2) == 0 {
							n, err := c.ReadDirect(ctx, k, buf)
							switch {
							case errors.Is(err, block.ErrNotFound):
							case err != nil:
								fail(fmt.Errorf("ReadDirect %s: %w", k, err))
								return
							case !bytes.Equal(buf[:n], blocks[i]):
								fail(fmt.Errorf("ReadDirect %s (%s): wrong bytes", k, mode))
								return
							default:
								fresh.Add(1)
							}
							continue
						}
						ls, lerrs, err := c.Describe(ctx, []block.Key{k})
						if err != nil || lerrs[0] != nil {
							continue
						}
						l := ls[0]
						c.Release(ctx, l) // the server may free and reuse the pages from here on
						forceLease(l)
						n, err := c.ReadLease(l, buf)
						switch {
						case errors.Is(err, block.ErrChecksum):
							staleFailed.Add(1)
						case err != nil:
							fail(fmt.Errorf("stale ReadLease %s: %w", k, err))
							return
						case !bytes.Equal(buf[:n], blocks[i]):
							fail(fmt.Errorf("stale ReadLease %s (%s): accepted wrong bytes", k, mode))
							return
						default:
							staleOK.Add(1)
						}
					}
				}()
			}
			deadline := time.Now().Add(1500 * time.Millisecond)
			for time.Now().Before(deadline) && len(errs) == 0 {
				time.Sleep(10 * time.Millisecond)
			}
			stop.Store(true)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			t.Logf("%s: %d fresh reads, stale reads: %d accepted, %d refused", mode, fresh.Load(), staleOK.Load(), staleFailed.Load())
			if fresh.Load() == 0 || staleOK.Load()+staleFailed.Load() == 0 {
				t.Fatal("too few reads to check anything")
			}
		})
	}
}

// oldServerProxy stands between a version-1 client and a real server and
// answers a DESCRIBE that carries the flags word as a server that predates
// it does: MalformedFrame for the whole frame, connection kept open.
func oldServerProxy(t *testing.T, target string) (addr string, refused *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	refused = new(atomic.Int64)
	go func() {
		for {
			cc, err := ln.Accept()
			if err != nil {
				return
			}
			sc, err := net.Dial("tcp", target)
			if err != nil {
				cc.Close()
				return
			}
			go proxyConn(cc, sc, refused)
		}
	}()
	return ln.Addr().String(), refused
}

func proxyConn(cc, sc net.Conn, refused *atomic.Int64) {
	defer cc.Close()
	defer sc.Close()
	var wmu sync.Mutex // frames to the client, whole
	go func() {        // server to client: the hello reply, then whole frames
		defer cc.Close()
		b := make([]byte, wire.HelloReplySize)
		if _, err := io.ReadFull(sc, b); err != nil {
			return
		}
		cc.Write(b)
		for {
			h := make([]byte, wire.HeaderSize)
			if _, err := io.ReadFull(sc, h); err != nil {
				return
			}
			body := make([]byte, binary.LittleEndian.Uint32(h))
			if _, err := io.ReadFull(sc, body); err != nil {
				return
			}
			wmu.Lock()
			_, err := cc.Write(append(h, body...))
			wmu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	b := make([]byte, wire.HelloSize)
	if _, err := io.ReadFull(cc, b); err != nil {
		return
	}
	sc.Write(b)
	for {
		hb := make([]byte, wire.HeaderSize)
		if _, err := io.ReadFull(cc, hb); err != nil {
			return
		}
		h, err := wire.DecodeHeader(hb, 1<<30)
		if err != nil {
			return
		}
		body := make([]byte, h.Length)
		if _, err := io.ReadFull(cc, body); err != nil {
			return
		}
		if h.Op == wire.OpDescribe && len(body) > 0 && len(body) != 1+int(body[0])+int(h.Count)*wire.KeySize {
			refused.Add(1)
			msg := wire.AppendErrorBody(nil, "body inconsistent with count")
			resp := wire.AppendHeader(nil, wire.Header{Length: uint32(len(msg)), Op: h.Op, Flags: wire.FlagResponse,
				Code: errcode.MalformedFrame, ID: h.ID})
			wmu.Lock()
			cc.Write(append(resp, msg...))
			wmu.Unlock()
			continue
		}
		if _, err := sc.Write(append(hb, body...)); err != nil {
			return
		}
	}
}

func TestVerifyVersionAgainstOldServer(t *testing.T) {
	if !descriptor.VersionReads {
		t.Skip("no version reads on this architecture")
	}
	ctx := context.Background()
	m := stack(t, 4, false)
	srv, w := startDirect(t, native.DefaultConfig(), m, Options{Conns: 1})
	keys := []block.Key{block.NewKey("default", 1), block.NewKey("default", 2)}
	for i, k := range keys {
		if err := w.Put(ctx, k, payload(uint64(i), blockSize)); err != nil {
			t.Fatal(err)
		}
	}
	addr, refused := oldServerProxy(t, srv.Addr)
	c, err := Dial(ctx, addr, Options{Conns: 1, DirectVerify: VerifyVersion, version: wire.Version1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bufs := [][]byte{make([]byte, blockSize), make([]byte, blockSize)}
	for range 2 {
		sizes, errs, err := c.ReadDirectBatch(ctx, keys, bufs)
		if err != nil {
			t.Fatal(err)
		}
		for i := range keys {
			if errs[i] != nil || !bytes.Equal(bufs[i][:sizes[i]], payload(uint64(i), blockSize)) {
				t.Fatalf("key %d: %v", i, errs[i])
			}
		}
	}
	// One refusal, then plain DESCRIBEs read by checksum, every one direct.
	if refused.Load() != 1 || !c.direct.noVersions.Load() {
		t.Fatalf("%d describes refused, latched %v", refused.Load(), c.direct.noVersions.Load())
	}
	if s := c.DirectStats(); s.Direct != 4 || s.Fallbacks != 0 {
		t.Fatalf("stats %+v", s)
	}
	waitLeases(t, srv, 0)
}
