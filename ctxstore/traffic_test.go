package ctxstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// gatherCounters scrapes reg's ctxtier_namespace_* counters as
// "name-suffix/namespace" -> value.
func gatherCounters(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		name, ok := strings.CutPrefix(mf.GetName(), "ctxtier_namespace_")
		if !ok {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != 1 || m.GetLabel()[0].GetName() != "namespace" {
				t.Fatalf("%s: labels %v", mf.GetName(), m.GetLabel())
			}
			out[name+"/"+m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	return out
}

func countOf(t *testing.T, s *Store, ns string) TrafficCount {
	t.Helper()
	for _, c := range s.Traffic().Snapshot() {
		if c.Namespace == ns {
			return c
		}
	}
	return TrafficCount{Namespace: ns}
}

func TestTrafficCountsEachOutcome(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	if err := s.CreateNamespace(ctx, block.Namespace{Name: "a", BlockTokens: 16}); err != nil {
		t.Fatal(err)
	}
	put := func(ns string, id uint64, data string) error {
		return s.Put(ctx, block.NewKey(ns, id), []byte(data), block.PutOptions{})
	}
	get := func(ns string, id uint64) error {
		ref, err := s.Get(ctx, block.NewKey(ns, id))
		if ref != nil {
			ref.Release()
		}
		return err
	}
	getResolved := func(ns string, id uint64) error {
		n, err := s.Namespace(ns)
		if err != nil {
			return err
		}
		ref, err := s.Read(ctx, block.NewKey(ns, id), ReadOptions{Namespace: n})
		if err == nil && string(ref.Data) != "hello" {
			t.Fatalf("Read %s/%d with its namespace = %q", ns, id, ref.Data)
		}
		if ref != nil {
			ref.Release()
		}
		return err
	}
	steps := []struct {
		name string
		do   func() error
		ok   bool
		want map[string]TrafficCount
	}{
		{"put 5 bytes", func() error { return put("a", 1, "hello") }, true,
			map[string]TrafficCount{"a": {Puts: 1, WrittenBytes: 5}}},
		{"identical re-put counts", func() error { return put("a", 1, "hello") }, true,
			map[string]TrafficCount{"a": {Puts: 2, WrittenBytes: 10}}},
		{"conflicting put is not counted", func() error { return put("a", 1, "other") }, false,
			map[string]TrafficCount{"a": {Puts: 2, WrittenBytes: 10}}},
		{"hit", func() error { return get("a", 1) }, true,
			map[string]TrafficCount{"a": {Puts: 2, WrittenBytes: 10, Gets: 1, Hits: 1, ReadBytes: 5}}},
		{"miss", func() error { return get("a", 2) }, false,
			map[string]TrafficCount{"a": {Puts: 2, WrittenBytes: 10, Gets: 2, Hits: 1, Misses: 1, ReadBytes: 5}}},
		{"other namespace is separate", func() error { return put("default", 7, "xyz") }, true,
			map[string]TrafficCount{"a": {Puts: 2, WrittenBytes: 10, Gets: 2, Hits: 1, Misses: 1, ReadBytes: 5}, "default": {Puts: 1, WrittenBytes: 3}}},
		{"unknown namespace makes no counters", func() error { return get("nope", 1) }, false,
			map[string]TrafficCount{"a": {Puts: 2, WrittenBytes: 10, Gets: 2, Hits: 1, Misses: 1, ReadBytes: 5}, "default": {Puts: 1, WrittenBytes: 3}}},
		{"resolved hit counts as a hit", func() error { return getResolved("a", 1) }, true,
			map[string]TrafficCount{"a": {Puts: 2, WrittenBytes: 10, Gets: 3, Hits: 2, Misses: 1, ReadBytes: 10}, "default": {Puts: 1, WrittenBytes: 3}}},
		{"resolved miss counts as a miss", func() error { return getResolved("a", 3) }, false,
			map[string]TrafficCount{"a": {Puts: 2, WrittenBytes: 10, Gets: 4, Hits: 2, Misses: 2, ReadBytes: 10}, "default": {Puts: 1, WrittenBytes: 3}}},
	}
	for _, st := range steps {
		if err := st.do(); (err == nil) != st.ok {
			t.Fatalf("%s: err %v", st.name, err)
		}
		got := s.Traffic().Snapshot()
		if len(got) != len(st.want) {
			t.Fatalf("%s: %d namespaces counted (%+v), want %d", st.name, len(got), got, len(st.want))
		}
		for _, c := range got {
			w := st.want[c.Namespace]
			w.Namespace = c.Namespace
			if c != w {
				t.Fatalf("%s: %s is %+v, want %+v", st.name, c.Namespace, c, w)
			}
		}
	}
}

func TestTrafficConcurrentCountsAreExact(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	if err := s.Put(ctx, block.NewKey("default", 1), []byte("abcd"), block.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	const workers, each = 8, 200
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				if ref, err := s.Get(ctx, block.NewKey("default", 1)); err == nil {
					ref.Release()
				}
			}
		})
	}
	wg.Wait()
	c := countOf(t, s, "default")
	if c.Gets != workers*each || c.Hits != workers*each || c.ReadBytes != 4*workers*each {
		t.Fatalf("after %d concurrent hits of 4 bytes: %+v", workers*each, c)
	}
}

func TestTrafficCollectorMatchesSnapshotAndForgetsDeleted(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	for _, ns := range []string{"a", "b"} {
		if err := s.CreateNamespace(ctx, block.Namespace{Name: ns, BlockTokens: 16}); err != nil {
			t.Fatal(err)
		}
		if err := s.Put(ctx, block.NewKey(ns, 1), []byte(ns+"-bytes"), block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Get(ctx, block.NewKey("b", 9)); err == nil {
		t.Fatal("get of an absent block succeeded")
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewTrafficCollector(s))
	got := gatherCounters(t, reg)
	want := map[string]float64{}
	for _, ns := range []string{"a", "b"} {
		want["gets_total/"+ns] = 0
		want["hits_total/"+ns] = 0
		want["misses_total/"+ns] = 0
		want["puts_total/"+ns] = 1
		want["read_bytes_total/"+ns] = 0
		want["written_bytes_total/"+ns] = 7
	}
	want["gets_total/b"], want["misses_total/b"] = 1, 1
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("scraped %v\nwant    %v", got, want)
	}
	// A deleted namespace's series go at the next scrape.
	if err := s.Delete(ctx, block.NewKey("a", 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteNamespace(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got := gatherCounters(t, reg); len(got) != 6 || got["puts_total/b"] != 1 {
		t.Fatalf("series after deleting a: %v, want b's 6", got)
	}
	if got := s.Traffic().Snapshot(); len(got) != 1 || got[0].Namespace != "b" {
		t.Fatalf("counters after deleting a: %+v", got)
	}
}

// storeWithTraffic is a store with n namespaces, each with a put and a
// hit counted.
func storeWithTraffic(b *testing.B, n int) *Store {
	s := newStore(b)
	for i := range n {
		ns := fmt.Sprintf("ns-%04d", i)
		if err := s.CreateNamespace(context.Background(), block.Namespace{Name: ns, BlockTokens: 16}); err != nil {
			b.Fatal(err)
		}
		s.traffic.put(ns, 100)
		s.traffic.get(ns, 100, nil)
	}
	return s
}

// BenchmarkGetCounted measures what the counters add to a get: counting
// one hit alone against a whole get through the store (catalog lookup,
// DRAM tier, counters) in the same run, with 1,000 namespaces counted; it
// prints the share.
func BenchmarkGetCounted(b *testing.B) {
	s := storeWithTraffic(b, 1000)
	ctx := context.Background()
	k := block.NewKey("ns-0500", 1)
	if err := s.Put(ctx, k, []byte("0123456789abcdef"), block.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	var count, get float64
	b.Run("count", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s.traffic.get(k.Namespace, 16, nil)
		}
		count = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Run("store-get", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ref, err := s.Get(ctx, k)
			if err != nil {
				b.Fatal(err)
			}
			ref.Release()
		}
		get = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	if get > 0 {
		b.Logf("counting a hit / a whole store get: %.3f (%.1f ns of %.1f ns)", count/get, count, get)
	}
}

// BenchmarkTrafficScrape is what 1,000 namespaces with traffic cost a
// scrape: gathering their 6,000 ctxtier_namespace_* series through
// Prometheus, against reading the same counters with Snapshot (what the
// console does) in the same run; it prints the ratio.
func BenchmarkTrafficScrape(b *testing.B) {
	s := storeWithTraffic(b, 1000)
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewTrafficCollector(s))
	var snap, gather float64
	b.Run("snapshot", func(b *testing.B) {
		for b.Loop() {
			if n := len(s.Traffic().Snapshot()); n != 1000 {
				b.Fatalf("%d namespaces", n)
			}
		}
		snap = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Run("gather", func(b *testing.B) {
		for b.Loop() {
			if _, err := reg.Gather(); err != nil {
				b.Fatal(err)
			}
		}
		gather = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	if snap > 0 {
		b.Logf("1000 namespaces: gather %.2f ms, snapshot %.3f ms (gather/snapshot %.1f)", gather/1e6, snap/1e6, gather/snap)
	}
}
