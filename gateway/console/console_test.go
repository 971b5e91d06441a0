package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/gateway/clusterapi"
)

// fakeCluster is a unit-test stand-in for the cluster: a fixed status and
// a record of the actions asked of it.
type fakeCluster struct {
	mu      sync.Mutex
	status  clusterapi.Status
	actions []string
	err     error
}

func (f *fakeCluster) Status(context.Context) (clusterapi.Status, error) { return f.status, nil }
func (f *fakeCluster) record(a string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.actions = append(f.actions, a)
	return f.err
}
func (f *fakeCluster) Drain(_ context.Context, id string) error { return f.record("drain " + id) }
func (f *fakeCluster) CancelDrain(_ context.Context, id string) error {
	return f.record("cancel " + id)
}
func (f *fakeCluster) TransferLeadership(_ context.Context, id string) (string, error) {
	return "n2", f.record("transfer " + id)
}

type fakeKeys struct {
	credential.Static
	revoked []string
}

func (k *fakeKeys) List(context.Context) ([]credential.Credential, error) {
	var out []credential.Credential
	for _, c := range k.Static {
		c.Secret = ""
		out = append(out, c)
	}
	return out, nil
}
func (k *fakeKeys) Revoke(_ context.Context, id string) error {
	if _, ok := k.Static[id]; !ok {
		return fmt.Errorf("%w: access key %q", block.ErrNotFound, id)
	}
	delete(k.Static, id)
	k.revoked = append(k.revoked, id)
	return nil
}

type fakeNamespaces struct {
	list  []block.Namespace
	use   map[string]Usage
	scans int
}

func (n *fakeNamespaces) Namespaces() []block.Namespace { return n.list }
func (n *fakeNamespaces) Usage(context.Context) (map[string]Usage, error) {
	n.scans++
	return n.use, nil
}

// tierRegistry registers the tier families ctxd exports, with values.
func tierRegistry(t testing.TB) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	gv := func(name string) *prometheus.GaugeVec {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: name}, []string{"tier"})
		reg.MustRegister(g)
		return g
	}
	gv("ctxtier_tier_allocated_bytes").WithLabelValues("dram").Set(1 << 20)
	gv("ctxtier_tier_capacity_bytes").WithLabelValues("dram").Set(64 << 20)
	res := gv("ctxtier_tier_resident_bytes")
	res.WithLabelValues("nvme").Set(3 << 20)
	gv("ctxtier_tier_blocks").WithLabelValues("nvme").Set(7)
	hits := gv("ctxtier_tier_hits_total")
	hits.WithLabelValues("dram").Set(30)
	hits.WithLabelValues("nvme").Set(0)
	gv("ctxtier_tier_misses_total").WithLabelValues("dram").Set(10)
	gv("ctxtier_tier_evictions_total").WithLabelValues("dram").Set(4)
	gv("ctxtier_tier_corruptions_total").WithLabelValues("nvme").Set(2)
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "ctxtier_tiers_demotions_total", Help: "d"})
	c.Add(5)
	req := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ctxtier_requests_total", Help: "r"}, []string{"op"})
	req.WithLabelValues("get").Add(3)
	req.WithLabelValues("put").Add(2)
	gaps := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ctxtier_kvevent_sequence_gaps_total", Help: "g"}, []string{"namespace", "worker"})
	gaps.WithLabelValues("m", "w1").Add(3)
	healed := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ctxtier_kvevent_gaps_healed_total", Help: "h"}, []string{"namespace", "worker"})
	healed.WithLabelValues("m", "w1").Add(2)
	// w1's newest batch was applied 1.5 s after the engine stamped it;
	// w2 (no gap ever) has only its apply time, its batches no ts.
	lag := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ctxtier_kvevent_lag_seconds", Help: "l"}, []string{"namespace", "worker"})
	lag.WithLabelValues("m", "w1").Set(1.5)
	last := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ctxtier_kvevent_last_applied_timestamp_seconds", Help: "t"}, []string{"namespace", "worker"})
	last.WithLabelValues("m", "w1").Set(1_800_000_000.5)
	last.WithLabelValues("m", "w2").Set(1_800_000_100)
	reg.MustRegister(c, req, gaps, healed, lag, last)
	return reg
}

func TestNodeViewFromRegistry(t *testing.T) {
	f, err := gather(tierRegistry(t))
	if err != nil {
		t.Fatal(err)
	}
	v := nodeView("n1", f)
	if len(v.Tiers) != 2 || v.Tiers[0].Tier != "dram" || v.Tiers[1].Tier != "nvme" {
		t.Fatalf("tiers %+v", v.Tiers)
	}
	d, n := v.Tiers[0], v.Tiers[1]
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"dram used (allocated)", d.UsedBytes, 1 << 20},
		{"dram capacity", d.CapacityBytes, 64 << 20},
		{"dram hit ratio", d.HitRatio, 0.75},
		{"dram evictions", d.Evictions, 4},
		{"nvme used (resident, no allocated)", n.UsedBytes, 3 << 20},
		{"nvme blocks", n.Blocks, 7},
		{"nvme hit ratio without reads", n.HitRatio, -1},
		{"nvme corruptions", n.Corruptions, 2},
		{"demotions", v.Demotions, 5},
		{"requests summed over labels", v.Requests, 5},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	lag := 1.5
	want := []StreamView{
		{Namespace: "m", Worker: "w1", Gaps: 3, Healed: 2, LagSeconds: &lag, LastApplied: 1_800_000_000.5},
		{Namespace: "m", Worker: "w2", LastApplied: 1_800_000_100},
	}
	if !reflect.DeepEqual(v.Streams, want) {
		t.Errorf("streams %s, want %s", jsonOf(t, v.Streams), jsonOf(t, want))
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		mod  func(*Config)
		ok   bool
	}{
		{"default", func(*Config) {}, true},
		{"tiny interval", func(c *Config) { c.SampleInterval = time.Millisecond }, false},
		{"window under interval", func(c *Config) { c.Window = time.Second }, false},
		{"huge ring", func(c *Config) { c.SampleInterval = 100 * time.Millisecond; c.Window = 24 * time.Hour }, false},
		{"negative ttl", func(c *Config) { c.NamespaceTTL = -1 }, false},
		{"zero peer timeout", func(c *Config) { c.PeerTimeout = 0 }, false},
		{"tiny overview interval", func(c *Config) { c.OverviewInterval = time.Millisecond }, false},
		{"overview max age under its interval", func(c *Config) { c.OverviewMaxAge = c.OverviewInterval / 2 }, false},
		{"overview idle under its interval", func(c *Config) { c.OverviewIdle = c.OverviewInterval / 2 }, false},
		{"max age equal to the interval", func(c *Config) { c.OverviewMaxAge = c.OverviewInterval }, true},
		{"zero traffic window", func(c *Config) { c.TrafficWindow = 0 }, false},
		{"zero member timeout", func(c *Config) { c.MemberTimeout = 0 }, false},
		{"small body", func(c *Config) { c.MaxBodyBytes = 10 }, false},
	} {
		cfg := DefaultConfig()
		c.mod(&cfg)
		err := cfg.Validate()
		if (err == nil) != c.ok || err != nil && !errors.Is(err, block.ErrInvalidArgument) {
			t.Errorf("%s: Validate() = %v, want ok=%v", c.name, err, c.ok)
		}
	}
	if n := DefaultConfig().samples(); n != 180 {
		t.Errorf("default ring holds %d samples, want 180 (15 min every 5 s)", n)
	}
}

func TestSamplerRingKeepsTheNewest(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SampleInterval, cfg.Window = time.Second, 4*time.Second
	s := NewSampler(cfg, prometheus.NewRegistry(), nil)
	if got := s.Samples(); len(got) != 0 {
		t.Fatalf("fresh ring has %d samples", len(got))
	}
	for i := range 10 {
		s.Add(Sample{UnixMilli: int64(i)})
		got := s.Samples()
		if want := min(i+1, 4); len(got) != want {
			t.Fatalf("after %d adds: %d samples, want %d", i+1, len(got), want)
		}
		for j, sm := range got {
			if want := int64(i + 1 - len(got) + j); sm.UnixMilli != want {
				t.Fatalf("after %d adds: sample %d is %d, want %d (oldest first)", i+1, j, sm.UnixMilli, want)
			}
		}
	}
	reg := tierRegistry(t)
	s = NewSampler(cfg, reg, nil)
	s.Sample(time.UnixMilli(42))
	got := s.Samples()
	if len(got) != 1 || got[0].UnixMilli != 42 || len(got[0].Tiers) != 2 || got[0].Tiers[0].UsedBytes != 1<<20 || got[0].Demotions != 5 {
		t.Fatalf("sample of the registry: %+v", got)
	}
}

type env struct {
	c    *Console
	cl   *fakeCluster
	keys *fakeKeys
	ns   *fakeNamespaces
	ts   *httptest.Server
}

func newEnv(t testing.TB) *env {
	t.Helper()
	e := &env{
		cl: &fakeCluster{status: clusterapi.Status{NodeID: "n1", State: "leader",
			Members: []clusterapi.Member{{ID: "n1", State: "alive", Capacity: 64 << 20}, {ID: "n2", State: "suspect"}}}},
		keys: &fakeKeys{Static: credential.Static{
			"ADMIN": {AccessKeyID: "ADMIN", Secret: "s3cret", Namespaces: []string{credential.ScopeAll}},
			"TEN":   {AccessKeyID: "TEN", Secret: "tenant", Namespaces: []string{"a"}},
		}},
		ns: &fakeNamespaces{list: []block.Namespace{{Name: "small", DataShards: 1}, {Name: "big", DataShards: 2, ParityShards: 1, TTLSeconds: 60, Quota: block.Quota{DRAM: 1 << 20, NVMe: 8 << 20}}},
			use: map[string]Usage{"small": {Blocks: 1, Bytes: 10}, "big": {Blocks: 5, Bytes: 500, Pinned: 2}}},
	}
	c, err := New(DefaultConfig(), Deps{NodeID: "n1", Cluster: e.cl, Gatherer: tierRegistry(t), Namespaces: e.ns, Keys: e.keys},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	e.c = c
	e.ts = httptest.NewServer(c.Handler())
	t.Cleanup(e.ts.Close)
	return e
}

func (e *env) do(t testing.TB, method, path, key, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, e.ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestPageAndAssetsEmbedded(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct{ path, want string }{
		{"/ui/", "<title>ctxtier console</title>"},
		{"/ui/app.js", "/ui/api/overview"},
		{"/ui/style.css", ".chart"},
	} {
		st, b := e.do(t, "GET", c.path, "", "")
		if st != 200 || !strings.Contains(string(b), c.want) {
			t.Errorf("GET %s: %d, body lacks %q", c.path, st, c.want)
		}
	}
	if st, _ := e.do(t, "POST", "/ui/", "", ""); st != http.StatusMethodNotAllowed {
		t.Errorf("POST /ui/: %d", st)
	}
	if st, b := e.do(t, "GET", "/ui/api/nothing", "", ""); st != 404 || !strings.Contains(string(b), "NotFound") {
		t.Errorf("unknown endpoint: %d %s", st, b)
	}
}

func TestOverview(t *testing.T) {
	e := newEnv(t)
	st, b := e.do(t, "GET", "/ui/api/overview", "", "")
	if st != 200 {
		t.Fatalf("overview: %d %s", st, b)
	}
	var ov Overview
	if err := json.Unmarshal(b, &ov); err != nil {
		t.Fatal(err)
	}
	if ov.NodeID != "n1" || len(ov.Cluster.Members) != 2 || ov.Cluster.Members[1].State != "suspect" {
		t.Errorf("cluster: %+v", ov.Cluster)
	}
	if len(ov.Node.Tiers) != 2 || ov.Node.Tiers[0].CapacityBytes != 64<<20 {
		t.Errorf("tiers: %+v", ov.Node.Tiers)
	}
	want := []NamespaceView{
		{Name: "big", DataShards: 2, ParityShards: 1, TTLSeconds: 60, Quota: block.Quota{DRAM: 1 << 20, NVMe: 8 << 20}, Usage: Usage{Blocks: 5, Bytes: 500, Pinned: 2}},
		{Name: "small", DataShards: 1, Usage: Usage{Blocks: 1, Bytes: 10}},
	}
	if len(ov.Namespaces) != 2 || ov.Namespaces[0] != want[0] || ov.Namespaces[1] != want[1] {
		t.Errorf("namespaces (largest first): %+v", ov.Namespaces)
	}
	// A second request within NamespaceTTL reuses the scan.
	e.do(t, "GET", "/ui/api/overview", "", "")
	if e.ns.scans != 1 {
		t.Errorf("%d index scans for two requests within the TTL, want 1", e.ns.scans)
	}
	if st, b := e.do(t, "GET", "/ui/api/node", "", ""); st != 200 || !strings.Contains(string(b), `"tier":"dram"`) {
		t.Errorf("node: %d %s", st, b)
	}
	if st, b := e.do(t, "GET", "/ui/api/node?id=n2", "", ""); st != 404 {
		t.Errorf("node of a member with no HTTP address: %d %s, want 404", st, b)
	}
}

func TestActionsNeedAnAdminKey(t *testing.T) {
	for _, c := range []struct {
		name, path, key, body string
		status                int
		action                string // what the cluster must have been asked
	}{
		{"no key", "/ui/api/actions/drain", "", `{"id":"n2"}`, 401, ""},
		{"malformed key", "/ui/api/actions/drain", "ADMIN", `{"id":"n2"}`, 401, ""},
		{"wrong secret", "/ui/api/actions/drain", "ADMIN:nope", `{"id":"n2"}`, 401, ""},
		{"unknown key", "/ui/api/actions/drain", "WHO:x", `{"id":"n2"}`, 401, ""},
		{"tenant key", "/ui/api/actions/drain", "TEN:tenant", `{"id":"n2"}`, 403, ""},
		{"admin drain", "/ui/api/actions/drain", "ADMIN:s3cret", `{"id":"n2"}`, 200, "drain n2"},
		{"admin cancel", "/ui/api/actions/cancel-drain", "ADMIN:s3cret", `{"id":"n2"}`, 200, "cancel n2"},
		{"admin transfer", "/ui/api/actions/transfer-leadership", "ADMIN:s3cret", `{"id":""}`, 200, "transfer "},
		{"drain without id", "/ui/api/actions/drain", "ADMIN:s3cret", `{}`, 400, ""},
		{"unknown field", "/ui/api/actions/drain", "ADMIN:s3cret", `{"id":"n2","x":1}`, 400, ""},
		{"not json", "/ui/api/actions/drain", "ADMIN:s3cret", `drain n2`, 400, ""},
		{"trailing data", "/ui/api/actions/drain", "ADMIN:s3cret", `{"id":"n2"}{}`, 400, ""},
		{"unknown action", "/ui/api/actions/reboot", "ADMIN:s3cret", `{"id":"n2"}`, 404, ""},
		{"too large", "/ui/api/actions/drain", "ADMIN:s3cret", `{"id":"` + strings.Repeat("x", 70<<10) + `"}`, 413, ""},
		{"revoke own key", "/ui/api/actions/revoke-key", "ADMIN:s3cret", `{"id":"ADMIN"}`, 400, ""},
		{"revoke unknown", "/ui/api/actions/revoke-key", "ADMIN:s3cret", `{"id":"NOPE"}`, 404, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			st, b := e.do(t, "POST", c.path, c.key, c.body)
			if st != c.status {
				t.Fatalf("%d %s, want %d", st, b, c.status)
			}
			var got []string
			got = append(got, e.cl.actions...)
			if c.action == "" && len(got) != 0 || c.action != "" && (len(got) != 1 || got[0] != c.action) {
				t.Fatalf("cluster asked %q, want %q", got, c.action)
			}
			if len(e.keys.revoked) != 0 {
				t.Fatalf("revoked %v", e.keys.revoked)
			}
		})
	}
	e := newEnv(t)
	if st, b := e.do(t, "POST", "/ui/api/actions/revoke-key", "ADMIN:s3cret", `{"id":"TEN"}`); st != 200 || len(e.keys.revoked) != 1 {
		t.Fatalf("revoke TEN: %d %s %v", st, b, e.keys.revoked)
	}
	if st, _ := e.do(t, "POST", "/ui/api/actions/drain", "TEN:tenant", `{"id":"n2"}`); st != 401 {
		t.Fatalf("a revoked key still works: %d", st)
	}
	if st, b := e.do(t, "GET", "/ui/api/keys", "ADMIN:s3cret", ""); st != 200 || strings.Contains(string(b), "s3cret") || !strings.Contains(string(b), "ADMIN") {
		t.Fatalf("keys: %d %s", st, b)
	}
	if st, _ := e.do(t, "GET", "/ui/api/keys", "", ""); st != 401 {
		t.Fatalf("keys without a key: %d", st)
	}
	if st, b := e.do(t, "POST", "/ui/api/session", "ADMIN:s3cret", ""); st != 200 || !strings.Contains(string(b), `"admin":true`) {
		t.Fatalf("session: %d %s", st, b)
	}
	e.cl.err = fmt.Errorf("%w: no leader", block.ErrUnavailable)
	if st, b := e.do(t, "POST", "/ui/api/actions/drain", "ADMIN:s3cret", `{"id":"n2"}`); st != 503 || !strings.Contains(string(b), "no leader") {
		t.Fatalf("failing drain: %d %s", st, b)
	}
}

func clusterMember(i int) clusterapi.Member {
	return clusterapi.Member{ID: fmt.Sprintf("n%d", i), State: "alive", Zone: fmt.Sprintf("z%d", i), Capacity: 64 << 30, Voter: true}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
