package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/clusterapi"
)

// liveTraffic is a settable TrafficSource.
type liveTraffic struct {
	mu     sync.Mutex
	counts []ctxstore.TrafficCount
}

func (f *liveTraffic) Snapshot() []ctxstore.TrafficCount {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]ctxstore.TrafficCount(nil), f.counts...)
}

func (f *liveTraffic) set(c ...ctxstore.TrafficCount) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts = c
}

// fakeMembers answers for each member from its own TrafficSource; a
// member in slow blocks until its request's deadline, one in fail errs.
// With record, it keeps the ids asked.
type fakeMembers struct {
	mu     sync.Mutex
	of     map[string]TrafficSource
	slow   map[string]bool
	fail   map[string]error
	record bool
	asked  []string
}

func (f *fakeMembers) Traffic(ctx context.Context, m clusterapi.Member) ([]ctxstore.TrafficCount, error) {
	f.mu.Lock()
	if f.record {
		f.asked = append(f.asked, m.ID)
	}
	src, slow, err := f.of[m.ID], f.slow[m.ID], f.fail[m.ID]
	f.mu.Unlock()
	switch {
	case slow:
		<-ctx.Done()
		return nil, ctx.Err()
	case err != nil:
		return nil, err
	case src == nil:
		return nil, errors.New("no such member")
	}
	return src.Snapshot(), nil
}

func (f *fakeMembers) takeAsked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.asked
	f.asked = nil
	return a
}

// TestClusterTraffic sums the members' counters into the cluster's
// traffic and rates: the members that answer are summed, a slow one is
// cut off at MemberTimeout, a dead one is not asked, one that left is not
// counted, each is named; namespaces this node does not know are dropped.
func TestClusterTraffic(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MemberTimeout = 50 * time.Millisecond
	self, n2 := &liveTraffic{}, &liveTraffic{}
	members := &fakeMembers{of: map[string]TrafficSource{"n2": n2}, slow: map[string]bool{"n3": true},
		fail: map[string]error{"n6": errors.New("connection refused")}, record: true}
	status := clusterapi.Status{Members: []clusterapi.Member{
		{ID: "n1", State: "alive", HTTPAddr: "h1"}, {ID: "n2", State: "alive", HTTPAddr: "h2"},
		{ID: "n3", State: "suspect", HTTPAddr: "h3"}, {ID: "n4", State: "dead", HTTPAddr: "h4"},
		{ID: "n5", State: "left", HTTPAddr: "h5"}, {ID: "n6", State: "draining", HTTPAddr: "h6"},
	}}
	cl := &fakeCluster{status: status}
	nss := &fakeNamespaces{list: []block.Namespace{{Name: "a"}, {Name: "b"}}, use: map[string]Usage{}}
	c, err := New(cfg, Deps{NodeID: "n1", Cluster: cl, Gatherer: prometheus.NewRegistry(), Namespaces: nss, Traffic: self, Members: members},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t0 := time.Unix(5000, 0)

	self.set(ctxstore.TrafficCount{Namespace: "a", Gets: 10, Hits: 8, Misses: 2, ReadBytes: 800})
	n2.set(ctxstore.TrafficCount{Namespace: "a", Gets: 5, Hits: 5, ReadBytes: 500},
		ctxstore.TrafficCount{Namespace: "b", Puts: 3, WrittenBytes: 300},
		ctxstore.TrafficCount{Namespace: "gone", Puts: 1000}) // deleted here: dropped
	ov, err := c.build(ctx, t0)
	if err != nil {
		t.Fatal(err)
	}
	asked := members.takeAsked()
	if strings.Join(slices.Sorted(slices.Values(asked)), ",") != "n2,n3,n6" {
		t.Fatalf("asked %v, want n2, n3 and n6 (not self, not dead n4, not n5 that left)", asked)
	}
	tm := ov.TrafficMembers
	if tm == nil || tm.Answered != 2 || tm.Total != 5 {
		t.Fatalf("traffic members %+v, want 2 of 5 answered", tm)
	}
	wantErr := map[string]string{"n3": "deadline", "n4": "not asked: dead", "n6": "connection refused"}
	for _, m := range tm.Members {
		want, missing := wantErr[m.ID]
		if m.Answered == missing || missing && !strings.Contains(m.Error, want) {
			t.Errorf("member %s: answered %v, error %q; want missing=%v with %q", m.ID, m.Answered, m.Error, missing, want)
		}
	}
	views := func(ov Overview) map[string]NamespaceView {
		out := map[string]NamespaceView{}
		for _, v := range ov.Namespaces {
			out[v.Name] = v
		}
		return out
	}
	v := views(ov)
	if got, want := v["a"].ClusterTraffic, (Traffic{Gets: 15, Hits: 13, Misses: 2, ReadBytes: 1300}); got != want {
		t.Errorf("a's cluster traffic %+v, want %+v", got, want)
	}
	if got, want := v["a"].Traffic, (Traffic{Gets: 10, Hits: 8, Misses: 2, ReadBytes: 800}); got != want {
		t.Errorf("a's own traffic %+v, want %+v (this node's only)", got, want)
	}
	if got, want := v["b"].ClusterTraffic, (Traffic{Puts: 3, WrittenBytes: 300}); got != want {
		t.Errorf("b's cluster traffic %+v, want %+v", got, want)
	}
	if _, kept := c.members["n2"].base["gone"]; kept || len(c.members) != 1 {
		t.Errorf("readings kept: %d members, n2's unknown namespace kept %v", len(c.members), kept)
	}
	if v["a"].ClusterRates != (Traffic{}) {
		t.Errorf("rates after one reading: %+v", v["a"].ClusterRates)
	}

	// Five seconds later: rates are each member's, summed.
	self.set(ctxstore.TrafficCount{Namespace: "a", Gets: 60, Hits: 58, Misses: 2, ReadBytes: 5800})
	n2.set(ctxstore.TrafficCount{Namespace: "a", Gets: 30, Hits: 30, ReadBytes: 3000},
		ctxstore.TrafficCount{Namespace: "b", Puts: 13, WrittenBytes: 1300})
	if ov, err = c.build(ctx, t0.Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	v = views(ov)
	if got, want := v["a"].ClusterRates, (Traffic{Gets: 15, Hits: 15, ReadBytes: 1500}); got != want {
		t.Errorf("a's cluster rates %+v, want %+v", got, want)
	}
	if got, want := v["a"].Rates, (Traffic{Gets: 10, Hits: 10, ReadBytes: 1000}); got != want {
		t.Errorf("a's own rates %+v, want %+v", got, want)
	}
	if got, want := v["b"].ClusterRates, (Traffic{Puts: 2, WrittenBytes: 200}); got != want {
		t.Errorf("b's cluster rates %+v, want %+v", got, want)
	}
	for _, m := range ov.TrafficMembers.Members {
		if m.Answered && m.WindowMS != 5000 {
			t.Errorf("member %s rates over %d ms, want 5000", m.ID, m.WindowMS)
		}
	}

	// n2 stops answering: the cluster's numbers are this node's, n2 is
	// named; once n2 is removed from the cluster its readings go.
	members.mu.Lock()
	members.fail["n2"] = errors.New("503 draining")
	members.mu.Unlock()
	if ov, err = c.build(ctx, t0.Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if tm := ov.TrafficMembers; tm.Answered != 1 || tm.Total != 5 {
		t.Errorf("after n2 failed: %+v", tm)
	}
	if got := views(ov)["a"].ClusterTraffic; got != (Traffic{Gets: 60, Hits: 58, Misses: 2, ReadBytes: 5800}) {
		t.Errorf("a's cluster traffic without n2 %+v", got)
	}
	cl.status.Members = status.Members[:1]
	if ov, err = c.build(ctx, t0.Add(15*time.Second)); err != nil {
		t.Fatal(err)
	}
	if tm := ov.TrafficMembers; tm.Answered != 1 || tm.Total != 1 || len(c.members) != 0 {
		t.Errorf("alone: %+v, %d members' readings kept", tm, len(c.members))
	}
}

// TestClusterTrafficBounded: readings keep only the namespaces this node
// knows, so a member reporting many more costs no memory here.
func TestClusterTrafficBounded(t *testing.T) {
	const known, reported = 1000, 5000
	list := make([]block.Namespace, known)
	for i := range list {
		list[i] = block.Namespace{Name: fmt.Sprintf("ns-%04d", i)}
	}
	peers := map[string]TrafficSource{}
	var ms []clusterapi.Member
	for _, id := range []string{"n1", "n2", "n3"} {
		ms = append(ms, clusterapi.Member{ID: id, State: "alive", HTTPAddr: id})
		counts := make(fakeTraffic, reported)
		for i := range counts {
			counts[i] = ctxstore.TrafficCount{Namespace: fmt.Sprintf("ns-%04d", i), Gets: uint64(i)}
		}
		peers[id] = counts
	}
	c, err := New(DefaultConfig(), Deps{NodeID: "n1", Cluster: &fakeCluster{status: clusterapi.Status{Members: ms}}, Gatherer: prometheus.NewRegistry(),
		Namespaces: &fakeNamespaces{list: list}, Traffic: peers["n1"], Members: &fakeMembers{of: peers}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ov, err := c.build(context.Background(), time.Unix(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	if ov.TrafficMembers.Answered != 3 {
		t.Fatalf("%+v", ov.TrafficMembers)
	}
	for id, r := range c.members {
		if len(r.base) != known {
			t.Errorf("member %s: %d namespaces kept, want %d", id, len(r.base), known)
		}
	}
	for _, v := range ov.Namespaces {
		var i int
		if _, err := fmt.Sscanf(v.Name, "ns-%d", &i); err != nil {
			t.Fatal(err)
		}
		if v.ClusterTraffic.Gets != float64(3*i) {
			t.Fatalf("%s: cluster gets %v, want %d", v.Name, v.ClusterTraffic.Gets, 3*i)
		}
	}
}
