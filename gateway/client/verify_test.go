package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/block/blocktest"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/httpapi"
	"github.com/ctxtier/ctxtier/gateway/native"
	"github.com/ctxtier/ctxtier/gateway/native/nativetest"
	"github.com/ctxtier/ctxtier/gateway/native/wire"
	"github.com/ctxtier/ctxtier/tiers/tierstest"
)

// A block corrupted in the DRAM arena is never returned, whoever reads it:
// a declaring native client (its CRC-32C check fails, it re-reads with
// verification at rest), a client that leaves verification to the tier,
// and the HTTP client (it declares with X-Ctxtier-Reader-Verifies and
// re-reads without it on a mismatch). Each time the tier counts the corruption and drops the
// block; the other blocks of a batch arrive intact.
func TestCorruptAtRestNeverServed(t *testing.T) {
	m := stack(t, 64, false)
	srv, w := startDirect(t, native.DefaultConfig(), m, Options{Conns: 1, TierVerify: true})
	declared, err := Dial(context.Background(), srv.Addr, Options{Conns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer declared.Close()
	ts := httptest.NewServer(httpapi.New(httpapi.DefaultConfig(), srv.Store, nil, quietLog).Handler())
	defer ts.Close()
	hcfg := HTTPDefaultConfig()
	hcfg.BaseURL = ts.URL
	hc, err := NewHTTP(hcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	for _, s := range declared.slots {
		if !s.c.declared {
			t.Fatal("a new client against a new server must declare")
		}
	}
	if w.slots[0].c.declared {
		t.Fatal("a TierVerify client must not declare")
	}

	read := map[string]func(ctx context.Context, keys []block.Key) ([][]byte, []error){
		"get": func(ctx context.Context, keys []block.Key) ([][]byte, []error) {
			out := make([][]byte, len(keys))
			errs := make([]error, len(keys))
			for i, k := range keys {
				out[i], errs[i] = declared.Get(ctx, k)
			}
			return out, errs
		},
		"get batch": func(ctx context.Context, keys []block.Key) ([][]byte, []error) {
			out, errs, err := declared.GetBatch(ctx, keys)
			if err != nil {
				t.Fatal(err)
			}
			return out, errs
		},
		"get batch into": func(ctx context.Context, keys []block.Key) ([][]byte, []error) {
			bufs := make([][]byte, len(keys))
			for i := range bufs {
				bufs[i] = make([]byte, blockSize+10)
			}
			sizes, errs, err := declared.GetBatchInto(ctx, keys, bufs)
			if err != nil {
				t.Fatal(err)
			}
			out := make([][]byte, len(keys))
			for i := range keys {
				if errs[i] == nil {
					out[i] = bufs[i][:sizes[i]]
				}
			}
			return out, errs
		},
		"tier verifies": func(ctx context.Context, keys []block.Key) ([][]byte, []error) {
			out, errs, err := w.GetBatch(ctx, keys)
			if err != nil {
				t.Fatal(err)
			}
			return out, errs
		},
		"http": func(ctx context.Context, keys []block.Key) ([][]byte, []error) {
			out := make([][]byte, len(keys))
			errs := make([]error, len(keys))
			for i, k := range keys {
				out[i], errs[i] = hc.Get(ctx, k)
			}
			return out, errs
		},
	}
	seed := uint64(100)
	for _, name := range []string{"get", "get batch", "get batch into", "tier verifies", "http"} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			keys := make([]block.Key, 3)
			want := make([][]byte, 3)
			for i := range keys {
				seed++
				keys[i], want[i] = block.NewKey("default", seed), payload(seed, blockSize)
				if err := w.Put(ctx, keys[i], want[i]); err != nil {
					t.Fatal(err)
				}
			}
			// Normal reads are unchanged.
			before := m.DRAM().Stats()
			out, errs := read[name](ctx, keys)
			for i := range keys {
				if errs[i] != nil || !bytes.Equal(out[i], want[i]) {
					t.Fatalf("intact block %d: %v", i, errs[i])
				}
			}
			skipped := m.DRAM().Stats().ReaderVerified - before.ReaderVerified
			if declaring := name != "tier verifies"; declaring != (skipped == 3) || !declaring && skipped != 0 {
				t.Fatalf("%d of 3 reads left to the reader", skipped)
			}

			tierstest.CorruptDRAM(t, m, keys[1], blockSize/2)
			before = m.DRAM().Stats()
			out, errs = read[name](ctx, keys)
			if !errors.Is(errs[1], block.ErrNotFound) || out[1] != nil {
				t.Fatalf("corrupt block: %d bytes, err %v; want no bytes and NotFound", len(out[1]), errs[1])
			}
			for _, i := range []int{0, 2} {
				if errs[i] != nil || !bytes.Equal(out[i], want[i]) {
					t.Fatalf("intact block %d beside the corrupt one: %v", i, errs[i])
				}
			}
			if s := m.DRAM().Stats(); s.Corruptions != before.Corruptions+1 || m.Contains(keys[1]) {
				t.Fatalf("the corruption must be counted once and the block dropped: %+v, held %v", s, m.Contains(keys[1]))
			}
			if _, err := declared.Get(ctx, keys[1]); !errors.Is(err, block.ErrNotFound) {
				t.Fatalf("dropped block: %v", err)
			}
		})
	}
}

// flakyTier serves a key's CRC-32C wrong for its first bad[k] reads, as a
// fault between the tier and the client would (the bytes are right).
type flakyTier struct {
	*blocktest.Tier
	mu  sync.Mutex
	bad map[block.Key]int
}

func (f *flakyTier) Get(ctx context.Context, k block.Key, opts block.GetOptions) (*block.Ref, error) {
	ref, err := f.Tier.Get(ctx, k, opts)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil || f.bad[k] == 0 {
		return ref, err
	}
	f.bad[k]--
	return block.NewRef(ref.Data, ref.Sum^1, ref.Tier, ref.Release), nil
}

func (f *flakyTier) spoil(k block.Key, reads int) {
	f.mu.Lock()
	f.bad[k] = reads
	f.mu.Unlock()
	f.TakeReaderMarks()
}

// A block that fails the client's check is read once more, asking the
// server to verify at rest (on a declaring connection); if the second copy
// verifies, the damage was on the way and it is returned; a second
// mismatch is ErrChecksum. A non-declaring client re-reads too, plainly.
func TestGetRereadsAfterMismatch(t *testing.T) {
	ft := &flakyTier{Tier: blocktest.New(), bad: map[block.Key]int{}}
	srv, err := nativetest.StartWithTier(t, native.DefaultConfig(), ft)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	k, other := block.NewKey("default", 1), block.NewKey("default", 2)
	data := payload(1, 5000)
	for _, key := range []block.Key{k, other} {
		if err := ft.Put(ctx, key, data, block.Checksum(data), block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name      string
		opts      Options
		badReads  int
		wantErr   error
		wantMarks []bool // the first frame's two reads (damaged, intact), then the re-read
	}{
		{"declared, damaged once", Options{Conns: 1}, 1, nil, []bool{true, true, false}},
		{"declared, damaged twice", Options{Conns: 1}, 2, block.ErrChecksum, []bool{true, true, false}},
		{"tier verifies, damaged once", Options{Conns: 1, TierVerify: true}, 1, nil, []bool{false, false, false}},
		{"tier verifies, damaged twice", Options{Conns: 1, TierVerify: true}, 2, block.ErrChecksum, []bool{false, false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Dial(ctx, srv.Addr, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ft.spoil(k, tc.badReads)
			out, errs, err := c.GetBatch(ctx, []block.Key{k, other})
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantErr == nil && (errs[0] != nil || !bytes.Equal(out[0], data)) {
				t.Fatalf("damaged on the way once: %v", errs[0])
			}
			if tc.wantErr != nil && (!errors.Is(errs[0], tc.wantErr) || out[0] != nil) {
				t.Fatalf("damaged twice: %d bytes, %v; want %v", len(out[0]), errs[0], tc.wantErr)
			}
			if errs[1] != nil || !bytes.Equal(out[1], data) {
				t.Fatalf("intact block: %v", errs[1])
			}
			// The re-read asks for the damaged key alone.
			if got := ft.TakeReaderMarks(); !slices.Equal(got, tc.wantMarks) {
				t.Fatalf("store reads marked %v, want %v", got, tc.wantMarks)
			}
			// The connection survived.
			if err := c.Ping(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// oldServerHello stands between a client and a real server and behaves as
// a server that knows only the hello flags in known (0: older than hello
// flags): it refuses a hello with any other flag (MalformedFrame, then
// closes), and closes the connection on a request frame with a flag bit it
// does not know (response and linearizable, and verify at rest when it
// knows wire.HelloVerifiesGets).
func oldServerHello(t *testing.T, target string, known uint16) (addr string, refused, badFrames *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	refused, badFrames = new(atomic.Int64), new(atomic.Int64)
	go func() {
		for {
			cc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer cc.Close()
				hello := make([]byte, wire.HelloSize)
				if _, err := io.ReadFull(cc, hello); err != nil {
					return
				}
				if (uint16(hello[6])|uint16(hello[7])<<8)&^known != 0 {
					refused.Add(1)
					cc.Write(wire.AppendHelloReply(nil, wire.HelloReply{Version: wire.Version, Code: errcode.MalformedFrame}))
					return
				}
				sc, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer sc.Close()
				go func() { io.Copy(cc, sc); cc.Close() }()
				sc.Write(hello)
				// The version-2 auth message, then frames.
				head := make([]byte, 2)
				if _, err := io.ReadFull(cc, head); err != nil {
					return
				}
				auth := make([]byte, wire.AuthSize(int(head[0])))
				copy(auth, head)
				if _, err := io.ReadFull(cc, auth[2:]); err != nil {
					return
				}
				sc.Write(auth)
				for {
					hb := make([]byte, wire.HeaderSize)
					if _, err := io.ReadFull(cc, hb); err != nil {
						return
					}
					frameFlags := wire.FlagResponse | wire.FlagLinearizable
					if known&wire.HelloVerifiesGets != 0 {
						frameFlags |= wire.FlagVerifyAtRest
					}
					if known&wire.HelloPutHints != 0 {
						frameFlags |= wire.FlagPutHints
					}
					if known&wire.HelloAgentSessions != 0 {
						frameFlags |= wire.FlagReadHints | wire.FlagPutSession
					}
					if hb[5]&^frameFlags != 0 {
						badFrames.Add(1)
						return
					}
					body := make([]byte, int(hb[0])|int(hb[1])<<8|int(hb[2])<<16|int(hb[3])<<24)
					if _, err := io.ReadFull(cc, body); err != nil {
						return
					}
					if _, err := sc.Write(append(hb, body...)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), refused, badFrames
}

// A new client meets an old server: the refused hello is retried without
// the put-hints flag, then without any (once; later connections go without
// at once), nothing the old server does not know is sent, and a block
// failing the client's check is still never returned. A client that does
// not declare asks only for put hints, and then goes without.
func TestOldServerNewClient(t *testing.T) {
	ft := &flakyTier{Tier: blocktest.New(), bad: map[block.Key]int{}}
	srv, err := nativetest.StartWithTier(t, native.DefaultConfig(), ft)
	if err != nil {
		t.Fatal(err)
	}
	addr, refused, badFrames := oldServerHello(t, srv.Addr, 0)
	ctx := context.Background()
	c, err := Dial(ctx, addr, Options{Conns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Refused three times: with every flag, without the session flag, then with the verify flag alone.
	if refused.Load() != 3 || !c.noHelloFlags.Load() {
		t.Fatalf("%d hellos refused, latched %v; want three refusals, then plain hellos", refused.Load(), c.noHelloFlags.Load())
	}
	for _, s := range c.slots {
		if s.c.declared {
			t.Fatal("a connection to an old server must not count as declared")
		}
	}
	k := block.NewKey("default", 3)
	data := payload(3, 20000)
	if err := c.Put(ctx, k, data); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(ctx, k); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("get: %v", err)
	}
	ft.spoil(k, 1)
	if got, err := c.Get(ctx, k); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("get damaged once: %v", err)
	}
	ft.spoil(k, 2)
	if got, err := c.Get(ctx, k); !errors.Is(err, block.ErrChecksum) || got != nil {
		t.Fatalf("get damaged twice: %d bytes, %v; want ErrChecksum", len(got), err)
	}
	// A redial after a broken connection goes without the flag at once.
	c.slots[0].c.nc.Close()
	for range 4 {
		if _, err := c.Get(ctx, k); err != nil && !errors.Is(err, block.ErrUnavailable) {
			t.Fatal(err)
		}
	}
	if refused.Load() != 3 || badFrames.Load() != 0 {
		t.Fatalf("%d hellos refused, %d frames with unknown flags", refused.Load(), badFrames.Load())
	}
	for _, m := range ft.TakeReaderMarks() {
		if m {
			t.Fatal("a non-declaring connection's read reached the store marked")
		}
	}

	old, err := Dial(ctx, addr, Options{Conns: 1, TierVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	// It still asks for put hints and sessions: two refusals, then a plain hello.
	if got, err := old.Get(ctx, k); err != nil || !bytes.Equal(got, data) || refused.Load() != 5 || !old.noHelloFlags.Load() {
		t.Fatalf("a client that does not declare: %v, %d refusals", err, refused.Load())
	}
}
