package peer

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster"
	"github.com/ctxtier/ctxtier/gateway/native"
	"github.com/ctxtier/ctxtier/raft"
	"github.com/ctxtier/ctxtier/raft/fsm"
	"github.com/ctxtier/ctxtier/raft/tlstest"
	"github.com/ctxtier/ctxtier/tiers"
	"github.com/ctxtier/ctxtier/tiers/dram"
)

// startPeer serves a peer listener over a fresh DRAM tier; with srvTLS it
// speaks TLS, as ctxd's does with --tls-cert.
func startPeer(t *testing.T, srvTLS *tls.Config) (*tiers.Manager, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if srvTLS != nil {
		ln = tls.NewListener(ln, srvTLS)
	}
	stack, _ := servePeer(t, ln)
	return stack, ln.Addr().String()
}

// servePeer serves the native protocol on ln over a fresh DRAM tier until
// stop (or the test's end).
func servePeer(t *testing.T, ln net.Listener) (stack *tiers.Manager, stop func()) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	dc := dram.DefaultConfig()
	dc.Capacity = 16 << 20
	stack, err := tiers.New(tiers.DefaultConfig(), dc, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stack.Close() })
	cat, err := ctxstore.OpenFileCatalog(t.TempDir() + "/ns.json")
	if err != nil {
		t.Fatal(err)
	}
	store, err := ctxstore.New(ctxstore.DefaultConfig(), cat, stack, log)
	if err != nil {
		t.Fatal(err)
	}
	cfg := native.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	srv, err := native.New(cfg, store, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Serve(ctx, ln); close(done) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
			defer c()
			srv.Shutdown(sctx)
			cancel()
			<-done
		})
	}
	t.Cleanup(stop)
	return stack, stop
}

// peerFixture starts a plain peer listener and returns its tiers, a client
// side with member "n2" at its address, and a 10 s context.
func peerFixture(t *testing.T) (*tiers.Manager, *Peers, context.Context, fsm.Member) {
	t.Helper()
	stack, addr := startPeer(t, nil)
	p, err := New(DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return stack, p, ctx, fsm.Member{ID: "n2", DataAddr: addr}
}

func TestShardRoundTrip(t *testing.T) {
	stack, p, ctx, m := peerFixture(t)
	if err := p.Healthy(ctx, m); err != nil {
		t.Fatal(err)
	}
	whole := block.NewKey(block.DefaultNamespace, 42)
	data := []byte("the shard's bytes")
	for i, k := range []block.Key{whole, whole.WithShard(0), whole.WithShard(2)} {
		d := append([]byte{byte(i)}, data...)
		if err := p.PutShard(ctx, m, k, d, block.Checksum(d), block.PutOptions{}); err != nil {
			t.Fatalf("put %v: %v", k, err)
		}
		if !stack.Contains(k) {
			t.Fatalf("%v not in the peer's tiers", k)
		}
		got, sum, err := p.GetShard(ctx, m, k, 0)
		if err != nil || string(got) != string(d) || sum != block.Checksum(d) {
			t.Fatalf("get %v: %q %08x %v", k, got, sum, err)
		}
		if err := p.PinShard(ctx, m, k, time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	// Shard reads are verified at rest by the serving tier, not left to
	// the reading node.
	if s := stack.DRAM().Stats(); s.Hits < 3 || s.ReaderVerified != 0 {
		t.Fatalf("peer tier stats %+v: every shard read must be tier-verified", s)
	}
	// Distinct keys: deleting shard 1 leaves the whole block and shard 3.
	if err := p.DeleteShard(ctx, m, whole.WithShard(0)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.GetShard(ctx, m, whole.WithShard(0), 0); !errors.Is(err, block.ErrNotFound) {
		t.Fatalf("deleted shard: %v", err)
	}
	if !stack.Contains(whole) || !stack.Contains(whole.WithShard(2)) {
		t.Fatal("delete of one shard removed another key")
	}
	bad := []byte("other")
	if err := p.PutShard(ctx, m, whole, bad, block.Checksum(bad), block.PutOptions{}); !errors.Is(err, block.ErrConflict) {
		t.Fatalf("conflicting shard: %v", err)
	}
	if err := p.PutShard(ctx, m, whole.WithShard(5), bad, block.Checksum(bad)^1, block.PutOptions{}); !errors.Is(err, block.ErrChecksum) {
		t.Fatalf("bad checksum: %v", err)
	}
	if err := p.Healthy(ctx, fsm.Member{ID: "gone", DataAddr: "127.0.0.1:1"}); !errors.Is(err, block.ErrUnavailable) {
		t.Fatalf("dead member: %v", err)
	}
}

// A peer listener in mutual TLS serves a client whose certificate chains to
// the same CA and refuses the others with an error that says why.
func TestShardTLS(t *testing.T) {
	ca, other := tlstest.NewCA(t), tlstest.NewCA(t)
	node := &raft.TLS{Certificate: ca.Issue(t, "n1"), RootCAs: ca.Pool(), Mutual: true}
	stack, addr := startPeer(t, node.ServerConfig())
	cases := []struct {
		name    string
		tls     *tls.Config
		wantErr string // "" means the shard round-trips
	}{
		{"same CA", (&raft.TLS{Certificate: ca.Issue(t, "n2"), RootCAs: ca.Pool(), Mutual: true}).ClientConfig(""), ""},
		{"server certificate from another CA", (&raft.TLS{Certificate: ca.Issue(t, "n2"), RootCAs: other.Pool(), Mutual: true}).ClientConfig(""), "certificate signed by unknown authority"},
		{"client certificate from another CA", (&raft.TLS{Certificate: other.Issue(t, "n2"), RootCAs: ca.Pool(), Mutual: true}).ClientConfig(""), "unknown certificate authority"},
		{"no client certificate", (&raft.TLS{RootCAs: ca.Pool()}).ClientConfig(""), "certificate required"},
		{"server name not in the certificate", (&raft.TLS{Certificate: ca.Issue(t, "n2"), RootCAs: ca.Pool(), ServerName: "n9.example", Mutual: true}).ClientConfig(""), "not n9.example"},
		{"plain TCP", nil, "handshake"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := DefaultOptions()
			opts.TLS = tc.tls
			p, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			m := fsm.Member{ID: "n1", DataAddr: addr}
			k := block.NewKey(block.DefaultNamespace, uint64(100+i)).WithShard(1)
			d := []byte("a shard over tls")
			err = p.PutShard(ctx, m, k, d, block.Checksum(d), block.PutOptions{})
			if tc.wantErr != "" {
				t.Logf("refused: %v", err)
				if !errors.Is(err, block.ErrUnavailable) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want unavailable containing %q", err, tc.wantErr)
				}
				if stack.Contains(k) {
					t.Fatal("a refused client stored a shard")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := p.GetShard(ctx, m, k, 0)
			if err != nil || string(got) != string(d) || !stack.Contains(k) {
				t.Fatalf("get over tls: %q %v", got, err)
			}
		})
	}
}

// TestIdentityCheckedOnEveryConnection: a peer whose identity block names
// another member is refused, so a shard meant for a member never lands on
// the node now listening at its old address; a peer with no identity block
// (an older version) is taken at its word.
func TestIdentityCheckedOnEveryConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stack, addr := startPeer(t, nil)
	id := []byte("n3")
	if err := stack.Put(ctx, cluster.IdentityKey, id, block.Checksum(id), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		member string
		wantOK bool
	}{
		{"the member itself", "n3", true},
		{"another member's stale address", "n2", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			m := fsm.Member{ID: tc.member, DataAddr: addr}
			data := []byte("shard bytes")
			err = p.PutShard(ctx, m, block.NewKey("default", 7), data, block.Checksum(data), block.PutOptions{})
			if (err == nil) != tc.wantOK {
				t.Fatalf("put to %s at %s: %v, want ok %v", tc.member, addr, err, tc.wantOK)
			}
			if !tc.wantOK && (!errors.Is(err, block.ErrUnavailable) || !strings.Contains(err.Error(), "stale address")) {
				t.Fatalf("refusal %v, want Unavailable naming the stale address", err)
			}
		})
	}
	if !stack.Contains(block.NewKey("default", 7)) {
		t.Fatal("the member's own put must have landed")
	}
	// Without an identity block: accepted.
	_, old := startPeer(t, nil)
	p, err := New(DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Healthy(ctx, fsm.Member{ID: "n9", DataAddr: old}); err != nil {
		t.Fatalf("peer without identity block: %v", err)
	}
}

// DeleteShardIf over the real peer listener (DELETE_IF) deletes a shard
// only while the peer holds the bytes named by their checksum.
func TestDeleteShardIf(t *testing.T) {
	stack, p, ctx, m := peerFixture(t)
	k := block.NewKey(block.DefaultNamespace, 77).WithShard(1)
	d := []byte("the newer version's shard")
	if err := p.PutShard(ctx, m, k, d, block.Checksum(d), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, st := range []struct {
		name string
		sum  uint32
		want error
		kept bool
	}{
		{"an older version's checksum", block.Checksum([]byte("the older version")), block.ErrNotFound, true},
		{"the held version's checksum", block.Checksum(d), nil, false},
		{"already gone", block.Checksum(d), block.ErrNotFound, false},
	} {
		err := p.DeleteShardIf(ctx, m, k, st.sum)
		if (st.want == nil) != (err == nil) || (st.want != nil && !errors.Is(err, st.want)) {
			t.Fatalf("%s: %v, want %v", st.name, err, st.want)
		}
		if stack.Contains(k) != st.kept {
			t.Fatalf("%s: shard present %v, want %v", st.name, stack.Contains(k), st.kept)
		}
	}
}

// TestPutShardsReportsEachShard: one PutShards to a real peer listener
// stores every good shard (whole blocks and erasure shards) and reports
// exactly the bad ones: a shard whose key holds other bytes (conflict) and
// one whose checksum is wrong; a member that does not answer fails every
// shard with ErrUnavailable.
func TestPutShardsReportsEachShard(t *testing.T) {
	stack, p, ctx, m := peerFixture(t)
	taken := block.NewKey(block.DefaultNamespace, 7)
	old := []byte("bytes already stored")
	if err := p.PutShard(ctx, m, taken, old, block.Checksum(old), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	var shards []cluster.ShardPut
	want := map[int]error{}
	for i := range 40 {
		k := block.NewKey(block.DefaultNamespace, uint64(100+i))
		if i%3 == 1 {
			k = k.WithShard(i % 4)
		}
		d := []byte(strings.Repeat(string(rune('a'+i%26)), 100+i))
		s := cluster.ShardPut{Key: k, Data: d, Sum: block.Checksum(d)}
		switch i {
		case 11:
			s.Key = taken
			want[i] = block.ErrConflict
		case 23:
			s.Sum ^= 1
			want[i] = block.ErrChecksum
		}
		shards = append(shards, s)
	}
	errs := p.PutShards(ctx, m, shards)
	if len(errs) != len(shards) {
		t.Fatalf("%d results for %d shards", len(errs), len(shards))
	}
	for i, s := range shards {
		if w := want[i]; w != nil {
			if !errors.Is(errs[i], w) {
				t.Fatalf("shard %d: %v, want %v", i, errs[i], w)
			}
			continue
		}
		if errs[i] != nil {
			t.Fatalf("shard %d (%v): %v", i, s.Key, errs[i])
		}
		got, sum, err := p.GetShard(ctx, m, s.Key, 0)
		if err != nil || string(got) != string(s.Data) || sum != s.Sum {
			t.Fatalf("shard %d read back: %v", i, err)
		}
	}
	if got, _, err := p.GetShard(ctx, m, taken, 0); err != nil || string(got) != string(old) {
		t.Fatalf("the conflicting shard changed the stored one: %q %v", got, err)
	}
	if stack.Contains(shards[23].Key) {
		t.Fatal("a shard with a wrong checksum was stored")
	}
	for i, err := range p.PutShards(ctx, fsm.Member{ID: "gone", DataAddr: "127.0.0.1:1"}, shards[:3]) {
		if !errors.Is(err, block.ErrUnavailable) {
			t.Fatalf("dead member, shard %d: %v", i, err)
		}
	}
}

// TestLostLinkIsDialedAgainAndChecked: when the member's listener goes
// away, the call that finds the connection broken fails Unavailable and
// drops the link; the next call dials anew and checks the identity again,
// so another member now listening at the old address is refused, and the
// member itself, back at its address, is served.
func TestLostLinkIsDialedAgainAndChecked(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	listenAgain := func() net.Listener {
		t.Helper()
		for {
			ln, err := net.Listen("tcp", addr)
			if err == nil {
				return ln
			}
			if ctx.Err() != nil {
				t.Fatalf("listening again at %s: %v", addr, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	setID := func(stack *tiers.Manager, id string) {
		t.Helper()
		if err := stack.Put(ctx, cluster.IdentityKey, []byte(id), block.Checksum([]byte(id)), block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	stack, stop := servePeer(t, ln)
	setID(stack, "n2")
	p, err := New(DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	m := fsm.Member{ID: "n2", DataAddr: addr}
	if err := p.Healthy(ctx, m); err != nil {
		t.Fatal(err)
	}
	stop()
	// Both pooled connections were open; whichever a call picks, it
	// fails Unavailable (a lost connection, or the dial of a new link).
	if err := p.Healthy(ctx, m); !errors.Is(err, block.ErrUnavailable) {
		t.Fatalf("member gone: %v, want Unavailable", err)
	}
	other, stopOther := servePeer(t, listenAgain())
	setID(other, "n3")
	d := []byte("meant for n2")
	k := block.NewKey(block.DefaultNamespace, 5)
	if err := p.PutShard(ctx, m, k, d, block.Checksum(d), block.PutOptions{}); !errors.Is(err, block.ErrUnavailable) || !strings.Contains(err.Error(), "stale address") {
		t.Fatalf("put to n2 with n3 at its address: %v, want Unavailable naming the stale address", err)
	}
	if other.Contains(k) {
		t.Fatal("a shard meant for n2 landed on n3")
	}
	stopOther()
	back, _ := servePeer(t, listenAgain())
	setID(back, "n2")
	if err := p.PutShard(ctx, m, k, d, block.Checksum(d), block.PutOptions{}); err != nil {
		t.Fatalf("put to n2 back at its address: %v", err)
	}
	if !back.Contains(k) {
		t.Fatal("the shard did not land on n2")
	}
}
