package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/internal/testdep"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/gateway/clusterapi"
)

// chromiumPath finds Debian's chromium ($CTXTIER_CHROMIUM overrides). Under
// CI=true a missing browser fails the test: CI installs it (.ci/run).
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CTXTIER_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testdep.Missing(t, "chromium", "chromium is not installed (apt-get install chromium)", "make test-deps (docs/testing.md)")
	return ""
}

// browser starts a headless Chromium with a fresh profile.
func browser(t *testing.T, ctx context.Context) context.Context {
	t.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1440, 900))
	t.Cleanup(cancelAlloc)
	bctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	return bctx
}

// screenshotDir is where the test saves its screenshots:
// $CTXTIER_SCREENSHOTS, else a temporary directory.
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("CTXTIER_SCREENSHOTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

func screenshot(t *testing.T, bctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s (%d bytes)", p, len(png))
}

// pageView is what the page shows, read from its DOM.
type pageView struct {
	Leader  string            `json:"leader"`
	Term    string            `json:"term"`
	Commit  string            `json:"commit"`
	Applied string            `json:"applied"`
	States  map[string]string `json:"states"`
	Zones   map[string]string `json:"zones"`
	Caps    map[string]string `json:"caps"`
	Tiers   map[string]struct {
		Used, Capacity, Blocks string
	} `json:"tiers"`
	Drains map[string]struct {
		Left, Status string
	} `json:"drains"`
	Namespaces map[string]string `json:"namespaces"`
	// Traffic is each namespace row's traffic cells: the totals
	// (data-total) and the gets/s rate (data-value).
	Traffic map[string]struct {
		Gets, HitsMisses, Puts, Read, Written, GetsRate string
	} `json:"traffic"`
	// Order is the namespace rows top to bottom.
	Order []string `json:"order"`
	// Rebalance is the Rebalance fact's data-value: the leader's pending
	// shards, "" on a follower's page.
	Rebalance string `json:"rebalance"`
	// Members is the namespace table's line on whose traffic it sums
	// (empty attributes in the node scope).
	Members struct {
		Answered, Total, Missing string
	} `json:"members"`
	// Scope is the traffic scope the table says it shows.
	Scope string `json:"scope"`
	// Streams are the KV-event streams' lag and last-batch cells
	// (data-value: seconds, Unix seconds), by "namespace/worker".
	Streams map[string]struct {
		Lag, Last string
	} `json:"streams"`
}

const readPage = `JSON.stringify((() => {
  const v = (sel, root) => { const e = (root || document).querySelector(sel); return e ? (e.dataset.value ?? e.textContent) : ""; };
  const out = { leader: v("#leader"), term: v("#term"), commit: v("#commit"), applied: v("#applied"), rebalance: v("#rebalance"),
    states: {}, zones: {}, caps: {}, tiers: {}, drains: {}, namespaces: {}, traffic: {}, order: [], streams: {},
    scope: document.getElementById("ns-scope-name").textContent };
  const mp = document.getElementById("ns-members");
  out.members = { Answered: mp.dataset.answered, Total: mp.dataset.total, Missing: mp.dataset.missing };
  for (const tr of document.querySelectorAll("#streams tr[data-stream]")) {
    out.streams[tr.dataset.stream] = { Lag: tr.querySelector('[data-field="lag"]').dataset.value, Last: tr.querySelector('[data-field="last"]').dataset.value };
  }
  for (const tr of document.querySelectorAll("#members tr[data-member]")) {
    const id = tr.dataset.member, td = tr.querySelectorAll("td");
    out.states[id] = td[0].dataset.value; out.zones[id] = td[1].dataset.value; out.caps[id] = td[2].dataset.value;
  }
  for (const tr of document.querySelectorAll("#tier-table tr[data-tier]")) {
    const td = tr.querySelectorAll("td");
    out.tiers[tr.dataset.tier] = { Used: td[0].dataset.value, Capacity: td[1].dataset.value, Blocks: td[2].dataset.value };
  }
  for (const tr of document.querySelectorAll("#drains tr[data-drain]")) {
    const td = tr.querySelectorAll("td");
    out.drains[tr.dataset.drain] = { Left: td[0].dataset.value, Status: tr.querySelector(".drain-status").dataset.value };
  }
  for (const tr of document.querySelectorAll("#ns-table tr[data-ns]")) {
    const td = tr.querySelectorAll("td");
    out.namespaces[tr.dataset.ns] = td[0].dataset.value;
    out.traffic[tr.dataset.ns] = { Gets: td[2].dataset.total, HitsMisses: td[3].dataset.total, Puts: td[4].dataset.total,
      Read: td[5].dataset.total, Written: td[6].dataset.total, GetsRate: td[2].dataset.value };
    out.order.push(tr.dataset.ns);
  }
  return out;
})())`

func readView(t *testing.T, bctx context.Context) pageView {
	t.Helper()
	s, err := chromedp.Run(bctx, chromedp.Evaluate[string](readPage))
	if err != nil {
		t.Fatalf("reading the page: %v", err)
	}
	var v pageView
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("page view %s: %v", s, err)
	}
	return v
}

// scrapeMetrics reads gauge values from a node's /metrics.
func scrapeMetrics(t *testing.T, addr string, names ...string) map[string]string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		for _, n := range names {
			if name == n {
				f, err := strconv.ParseFloat(val, 64)
				if err != nil {
					t.Fatalf("%s: %v", sc.Text(), err)
				}
				out[n] = strconv.FormatFloat(f, 'f', -1, 64)
			}
		}
	}
	return out
}

// sumMetrics adds the values of the named samples over several nodes'
// /metrics (a sample a node lacks counts 0), formatted as scrapeMetrics
// formats them.
func sumMetrics(t *testing.T, addrs []string, names ...string) map[string]string {
	t.Helper()
	sum := map[string]float64{}
	for _, a := range addrs {
		for n, v := range scrapeMetrics(t, a, names...) {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			sum[n] += f
		}
	}
	out := map[string]string{}
	for _, n := range names {
		out[n] = strconv.FormatFloat(sum[n], 'f', -1, 64)
	}
	return out
}

// setScope picks the namespace table's traffic scope ("cluster" or
// "node") as a user does, with the radio button.
func setScope(t *testing.T, bctx context.Context, scope string) {
	t.Helper()
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`input[name="ns-scope"][value="`+scope+`"]`))); err != nil {
		t.Fatalf("picking the %s traffic scope: %v", scope, err)
	}
}

// postEvents posts one KV-event batch (JSON, POST /v1/route/events) to a
// node.
func postEvents(t *testing.T, addr string, batch map[string]any) {
	t.Helper()
	b, err := json.Marshal(batch)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+addr+"/v1/route/events", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/route/events: %d %s", resp.StatusCode, body)
	}
}

// ctxctlStatus runs the real `ctxctl cluster status --json`.
func ctxctlStatus(t *testing.T, bin, addr string) clusterapi.Status {
	t.Helper()
	out, err := exec.Command(bin, "cluster", "status", "--addr", addr, "--json").Output()
	if err != nil {
		t.Fatalf("ctxctl cluster status: %v", err)
	}
	var st clusterapi.Status
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("ctxctl output %s: %v", out, err)
	}
	return st
}

// n1's counters of namespace r2 in /metrics.
const (
	r2Gets    = `ctxtier_namespace_gets_total{namespace="r2"}`
	r2Hits    = `ctxtier_namespace_hits_total{namespace="r2"}`
	r2Misses  = `ctxtier_namespace_misses_total{namespace="r2"}`
	r2Puts    = `ctxtier_namespace_puts_total{namespace="r2"}`
	r2Read    = `ctxtier_namespace_read_bytes_total{namespace="r2"}`
	r2Written = `ctxtier_namespace_written_bytes_total{namespace="r2"}`
)

// TestConsoleBrowser drives the console at /ui/ in headless Chromium
// against three real ctxd processes: the page loads, its numbers match
// /metrics and `ctxctl cluster status --json`, an admin drains a node from
// the page (confirmation dialog included) and watches the drain end, and a
// SIGKILLed node turns suspect, then dead, on the page.
func TestConsoleBrowser(t *testing.T) {
	chromiumPath(t) // fail or skip before starting any process
	start := time.Now()
	ctx := withTimeout(t, 3*time.Minute)
	ctxctl := filepath.Join(t.TempDir(), "ctxctl")
	if out, err := exec.Command("go", "build", "-o", ctxctl, "../ctxctl").CombinedOutput(); err != nil {
		t.Fatalf("building ctxctl: %v\n%s", err, out)
	}
	const deadAfter = 10 * time.Second
	nodes, _ := startClusterWith(t, 3, func(string) []string { return []string{"--dead-after", deadAfter.String()} })
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	keys, err := credential.OpenFile(credential.DefaultConfig(n1.dataDir))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := keys.Create(ctx, []string{credential.ScopeAll}, "console test admin")
	if err != nil {
		t.Fatal(err)
	}
	tenant, err := keys.Create(ctx, []string{"r2"}, "a tenant's key, revoked from the page")
	if err != nil {
		t.Fatal(err)
	}
	hc := httpClient(t, n1.http)
	if _, err := hc.CreateNamespace(ctx, block.Namespace{Name: "r2", DataShards: 1, ParityShards: 1}); err != nil {
		t.Fatal(err)
	}
	const blocks = 40
	var written, read int
	for i := range blocks {
		data := []byte(strings.Repeat(fmt.Sprint(i), 4096))
		if err := hc.Put(ctx, block.NewKey("r2", uint64(i+1)), data, block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		written += len(data)
	}
	// Reads of r2 through n1: hits of the blocks put, and misses.
	const hits, misses = 15, 5
	for i := range hits + misses {
		id := uint64(i%blocks + 1)
		if i >= hits {
			id = uint64(1000 + i)
		}
		data, err := hc.Get(ctx, block.NewKey("r2", id))
		if (err == nil) != (i < hits) {
			t.Fatalf("get %d of r2 (hit expected: %v): %v", id, i < hits, err)
		}
		read += len(data)
	}
	// More traffic of r2 through n2: the cluster's traffic on n1's page
	// is both nodes' counters summed.
	hc2 := httpClient(t, n2.http)
	const puts2, hits2, misses2 = 10, 6, 2
	for i := range puts2 {
		data := []byte(strings.Repeat("n2", 1000+i))
		if err := hc2.Put(ctx, block.NewKey("r2", uint64(500+i)), data, block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range hits2 + misses2 {
		id := uint64(500 + i)
		if i >= hits2 {
			id = uint64(2000 + i)
		}
		if _, err := hc2.Get(ctx, block.NewKey("r2", id)); (err == nil) != (i < hits2) {
			t.Fatalf("get %d of r2 through n2 (hit expected: %v): %v", id, i < hits2, err)
		}
	}
	// A KV-event stream on n1 whose engine stamped its batch 42.5 s ago
	// (as an engine whose events reach the router late): its lag is at
	// least that.
	const engineBehind = 42.5
	postEvents(t, n1.http, map[string]any{"namespace": "r2", "worker": "vllm-lag", "seq": 0,
		"ts":     float64(time.Now().UnixNano())/1e9 - engineBehind,
		"events": []map[string]any{{"type": "BlockStored", "block_hashes": []uint64{11, 12}, "parent_block_hash": nil, "block_size": 16}}})
	t.Logf("cluster of 3 up with %d blocks after %v", blocks, time.Since(start).Round(time.Millisecond))

	shots := screenshotDir(t)
	bctx := browser(t, ctx)
	loadStart := time.Now()
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(1440, 900), chromedp.Navigate("http://"+n1.http+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="true"]`))); err != nil {
		t.Fatalf("loading the console: %v", err)
	}
	t.Logf("page loaded and rendered in %v", time.Since(loadStart).Round(time.Millisecond))

	// The page's numbers equal ctxctl's and /metrics' (read around one
	// poll: retried until the page and the sources agree, which they must
	// within a few polls once nothing changes).
	var diffs []string
	defer func() {
		if t.Failed() && len(diffs) > 0 {
			t.Logf("last differences between the page and its sources: %v", diffs)
		}
	}()
	waitFor(t, 40*time.Second, "the page to match ctxctl and /metrics", func() bool {
		v := readView(t, bctx)
		st := ctxctlStatus(t, ctxctl, n1.http)
		m := scrapeMetrics(t, n1.http, `ctxtier_tier_capacity_bytes{tier="dram"}`, `ctxtier_tier_blocks{tier="dram"}`, `ctxtier_tier_allocated_bytes{tier="dram"}`,
			r2Gets, r2Hits, r2Misses, r2Puts, r2Read, r2Written)
		diffs = nil
		check := func(what, page, want string) {
			if page != want {
				diffs = append(diffs, fmt.Sprintf("%s: page %q, source %q", what, page, want))
			}
		}
		if st.Leader == nil {
			diffs = append(diffs, "ctxctl: no leader")
			return false
		}
		check("leader", v.Leader, st.Leader.ID)
		check("term", v.Term, strconv.FormatUint(st.Raft.Term, 10))
		check("commit index", v.Commit, strconv.FormatUint(st.Raft.CommitIndex, 10))
		check("applied index", v.Applied, strconv.FormatUint(st.Raft.AppliedIndex, 10))
		if st.Leader.ID == n1.id {
			rb, err := ctxctlRebalance(t, ctxctl, n1.http)
			if err != nil {
				diffs = append(diffs, err.Error())
				return false
			}
			check("rebalance pending", v.Rebalance, strconv.Itoa(rb.Pending))
		} else {
			check("rebalance on a follower's page", v.Rebalance, "")
		}
		check("members", strconv.Itoa(len(v.States)), strconv.Itoa(len(st.Members)))
		for _, mb := range st.Members {
			check(mb.ID+" state", v.States[mb.ID], mb.State)
			check(mb.ID+" zone", v.Zones[mb.ID], mb.Zone)
			check(mb.ID+" capacity", v.Caps[mb.ID], strconv.FormatInt(mb.Capacity, 10))
		}
		dram := v.Tiers["dram"]
		check("dram capacity", dram.Capacity, m[`ctxtier_tier_capacity_bytes{tier="dram"}`])
		check("dram blocks", dram.Blocks, m[`ctxtier_tier_blocks{tier="dram"}`])
		check("dram used", dram.Used, m[`ctxtier_tier_allocated_bytes{tier="dram"}`])
		check("r2 blocks in the index", v.Namespaces["r2"], strconv.Itoa(blocks+puts2))
		// r2's traffic on the page is, by default, the cluster's: the sum
		// of every member's ctxtier_namespace_* counters, which count
		// exactly the requests made above through n1 and n2.
		sum := sumMetrics(t, []string{n1.http, n2.http, n3.http}, r2Gets, r2Hits, r2Misses, r2Puts, r2Read, r2Written)
		tr := v.Traffic["r2"]
		check("r2 cluster gets", tr.Gets, sum[r2Gets])
		check("r2 cluster hits/misses", tr.HitsMisses, sum[r2Hits]+"/"+sum[r2Misses])
		check("r2 cluster puts", tr.Puts, sum[r2Puts])
		check("r2 cluster bytes read", tr.Read, sum[r2Read])
		check("r2 cluster bytes written", tr.Written, sum[r2Written])
		check("r2 gets summed over /metrics", sum[r2Gets], strconv.Itoa(hits+misses+hits2+misses2))
		check("r2 puts summed over /metrics", sum[r2Puts], strconv.Itoa(blocks+puts2))
		check("members summed", v.Members.Answered+" of "+v.Members.Total+" missing "+v.Members.Missing, "3 of 3 missing ")
		check("scope", v.Scope, "the cluster's")
		// The KV-event stream's lag on the page is /metrics' gauge.
		lag := scrapeMetrics(t, n1.http, `ctxtier_kvevent_lag_seconds{namespace="r2",worker="vllm-lag"}`,
			`ctxtier_kvevent_last_applied_timestamp_seconds{namespace="r2",worker="vllm-lag"}`)
		st2 := v.Streams["r2/vllm-lag"]
		check("stream lag", st2.Lag, lag[`ctxtier_kvevent_lag_seconds{namespace="r2",worker="vllm-lag"}`])
		check("stream last batch", st2.Last, lag[`ctxtier_kvevent_last_applied_timestamp_seconds{namespace="r2",worker="vllm-lag"}`])
		if l, err := strconv.ParseFloat(st2.Lag, 64); err != nil || l < engineBehind || l > engineBehind+120 {
			diffs = append(diffs, fmt.Sprintf("stream lag %q: want the engine's %v s behind plus the post's time", st2.Lag, engineBehind))
		}
		check("r2 gets in n1's /metrics", m[r2Gets], strconv.Itoa(hits+misses))
		check("r2 hits/misses in /metrics", m[r2Hits]+"/"+m[r2Misses], fmt.Sprintf("%d/%d", hits, misses))
		check("r2 puts in /metrics", m[r2Puts], strconv.Itoa(blocks))
		check("r2 bytes read in /metrics", m[r2Read], strconv.Itoa(read))
		check("r2 bytes written in /metrics", m[r2Written], strconv.Itoa(written))
		return len(diffs) == 0
	})
	t.Logf("page matches ctxctl cluster status --json and /metrics (%v since start)", time.Since(start).Round(time.Millisecond))
	screenshot(t, bctx, shots, "console-cluster.png")

	// This node's scope: r2's traffic is n1's own counters.
	setScope(t, bctx, "node")
	waitFor(t, 20*time.Second, "n1's own traffic on the page", func() bool {
		v := readView(t, bctx)
		m := scrapeMetrics(t, n1.http, r2Gets, r2Hits, r2Misses, r2Puts, r2Read, r2Written)
		tr := v.Traffic["r2"]
		diffs = nil
		if got, want := fmt.Sprint(v.Scope, tr.Gets, " ", tr.HitsMisses, " ", tr.Puts, " ", tr.Read, " ", tr.Written),
			fmt.Sprint("this node's ("+n1.id+")", m[r2Gets], " ", m[r2Hits]+"/"+m[r2Misses], " ", m[r2Puts], " ", m[r2Read], " ", m[r2Written]); got != want {
			diffs = append(diffs, fmt.Sprintf("node scope: page %q, n1's /metrics %q", got, want))
		}
		return len(diffs) == 0
	})
	setScope(t, bctx, "cluster")

	// Sort the namespaces by gets/s from the keyboard, then read r2 while
	// the page watches: it shows a rate and puts r2 on top.
	if err := chromedp.Do(bctx, chromedp.Focus(chromedp.CSS(`#ns-table button[data-sort="gets"]`)), chromedp.KeyEvent(kb.Enter)); err != nil {
		t.Fatalf("sorting by gets/s: %v", err)
	}
	if sorted, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector('#ns-table button[data-sort="gets"]').parentElement.getAttribute("aria-sort")`)); err != nil || sorted != "descending" {
		t.Fatalf("gets/s column aria-sort %q (%v), want descending", sorted, err)
	}
	readStart := time.Now()
	waitFor(t, 30*time.Second, "a gets/s rate for r2, on top of the table", func() bool {
		if _, err := hc.Get(ctx, block.NewKey("r2", 1)); err != nil {
			t.Fatal(err)
		}
		v := readView(t, bctx)
		rate, _ := strconv.ParseFloat(v.Traffic["r2"].GetsRate, 64)
		return rate > 0 && len(v.Order) > 0 && v.Order[0] == "r2"
	})
	t.Logf("r2's gets/s shown and sorted first %v after the reads began", time.Since(readStart).Round(time.Millisecond))

	// Another member's tiers come from that member's console: pick n3
	// and compare with n3's own /metrics.
	pick := func(id string) {
		t.Helper()
		if err := chromedp.Do(bctx, chromedp.Evaluate[chromedp.Void](`(() => { const s = document.getElementById("node-pick");
			s.value = "`+id+`"; s.dispatchEvent(new Event("change")); })()`)); err != nil {
			t.Fatalf("picking %s: %v", id, err)
		}
	}
	pick(n3.id)
	waitFor(t, 15*time.Second, "n3's tiers on the page to match n3's /metrics", func() bool {
		caption, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById("tier-node").textContent`))
		if err != nil {
			t.Fatal(err)
		}
		m := scrapeMetrics(t, n3.http, `ctxtier_tier_blocks{tier="dram"}`, `ctxtier_tier_allocated_bytes{tier="dram"}`)
		d := readView(t, bctx).Tiers["dram"]
		return caption == n3.id && d.Blocks == m[`ctxtier_tier_blocks{tier="dram"}`] && d.Used == m[`ctxtier_tier_allocated_bytes{tier="dram"}`]
	})
	pick(n1.id)

	// Actions are refused until an admin key unlocks them.
	if dis, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.querySelector('#members button[data-action="drain"]').disabled`)); err != nil || !dis {
		t.Fatalf("drain button enabled without a key (%v)", err)
	}
	if err := chromedp.Do(bctx, chromedp.SendKeys(chromedp.ID("key"), admin.AccessKeyID+":"+admin.Secret),
		chromedp.Click(chromedp.ID("login-btn"))); err != nil {
		t.Fatalf("unlocking actions: %v", err)
	}
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.getElementById("mode").textContent === "actions unlocked"`,
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("actions not unlocked: %v", err)
	}

	// The charts are drawn from the sampler's ring.
	waitFor(t, 15*time.Second, "the charts", func() bool {
		n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("#charts figure.chart").length`))
		if err != nil {
			t.Fatal(err)
		}
		return n >= 7
	})

	// Drain n3 from the page: the dialog asks; from the keyboard, Enter
	// on the button opens it and Escape dismisses it; Cancel does
	// nothing either; Confirm starts the drain; the page shows the drain
	// and then its end.
	drainBtn := chromedp.CSS(`#members button[data-action="drain"][data-id="` + n3.id + `"]`)
	dialogOpen := func() bool {
		open, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.getElementById("confirm").open`))
		if err != nil {
			t.Fatal(err)
		}
		return open
	}
	// The live refresh re-renders the members table: an action can find
	// its button replaced between the query and the action ("Could not find
	// node with given id"); such an action did nothing, so it is tried again.
	onFreshButton := func(actions ...chromedp.Action[chromedp.Void]) error {
		var err error
		for range 5 {
			err = chromedp.Do(bctx, actions...)
			if err == nil || !strings.Contains(err.Error(), "Could not find node with given id") {
				return err
			}
		}
		return err
	}
	if err := onFreshButton(chromedp.Focus(drainBtn), chromedp.KeyEvent(kb.Enter)); err != nil {
		t.Fatalf("opening the drain dialog from the keyboard: %v", err)
	}
	waitFor(t, 5*time.Second, "the dialog to open on Enter", dialogOpen)
	if err := chromedp.Do(bctx, chromedp.KeyEvent(kb.Escape)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the dialog to close on Escape", func() bool { return !dialogOpen() })
	clickDialog := func(answer string) error {
		return onFreshButton(chromedp.Click(drainBtn), chromedp.WaitVisible(chromedp.ID("confirm")), chromedp.Click(chromedp.ID(answer)))
	}
	if err := clickDialog("confirm-no"); err != nil {
		t.Fatalf("cancelling the drain dialog: %v", err)
	}
	time.Sleep(500 * time.Millisecond)
	if st := ctxctlStatus(t, ctxctl, n1.http); len(st.Drains) != 0 {
		t.Fatalf("a dismissed dialog started a drain: %+v", st.Drains)
	}
	drainStart := time.Now()
	if err := clickDialog("confirm-yes"); err != nil {
		t.Fatalf("confirming the drain: %v", err)
	}
	var firstLeft string
	waitFor(t, 15*time.Second, "the drain on the page", func() bool {
		d, ok := readView(t, bctx).Drains[n3.id]
		firstLeft = d.Left
		return ok
	})
	t.Logf("drain of %s shown after %v with %s shards left", n3.id, time.Since(drainStart).Round(time.Millisecond), firstLeft)
	screenshot(t, bctx, shots, "console-drain.png")
	waitFor(t, 60*time.Second, "the drain to end on the page", func() bool {
		d := readView(t, bctx).Drains[n3.id]
		return d.Status == "done" && d.Left == "0"
	})
	t.Logf("drain of %s done on the page after %v", n3.id, time.Since(drainStart).Round(time.Millisecond))
	if st := ctxctlStatus(t, ctxctl, n1.http); len(st.Drains) != 1 || !st.Drains[0].Done || st.Drains[0].ShardsLeft != 0 {
		t.Fatalf("ctxctl after the drain: %+v", st.Drains)
	}

	// Revoke the tenant's key from the page.
	revokeBtn := chromedp.CSS(`#keys button[data-action="revoke-key"][data-id="` + tenant.AccessKeyID + `"]`)
	if err := chromedp.Do(bctx, chromedp.Click(revokeBtn), chromedp.WaitVisible(chromedp.ID("confirm")),
		chromedp.Click(chromedp.ID("confirm-yes"))); err != nil {
		t.Fatalf("revoking a key from the page: %v", err)
	}
	waitFor(t, 10*time.Second, "the key to be revoked", func() bool {
		_, err := keys.Lookup(tenant.AccessKeyID)
		return err != nil
	})
	if _, err := keys.Lookup(admin.AccessKeyID); err != nil {
		t.Fatalf("the admin key went too: %v", err)
	}

	// Transfer leadership from the page (to the most up-to-date follower).
	var before string
	waitFor(t, 20*time.Second, "a leader", func() bool {
		if st := ctxctlStatus(t, ctxctl, n1.http); st.Leader != nil {
			before = st.Leader.ID
		}
		return before != ""
	})
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.ID("transfer-btn")), chromedp.WaitVisible(chromedp.ID("confirm")),
		chromedp.Click(chromedp.ID("confirm-yes"))); err != nil {
		t.Fatalf("transferring leadership from the page: %v", err)
	}
	waitFor(t, 20*time.Second, "a new leader on the page and in ctxctl", func() bool {
		st := ctxctlStatus(t, ctxctl, n1.http)
		return st.Leader != nil && st.Leader.ID != before && readView(t, bctx).Leader == st.Leader.ID
	})
	t.Logf("leadership moved from %s to %s from the page", before, readView(t, bctx).Leader)

	// SIGKILL n2: the page shows it suspect, then dead.
	n2.p.Kill()
	killed := time.Now()
	var suspectAt, deadAt time.Duration
	waitFor(t, 4*deadAfter, n2.id+" dead on the page", func() bool {
		switch readView(t, bctx).States[n2.id] {
		case "suspect":
			if suspectAt == 0 {
				suspectAt = time.Since(killed)
			}
		case "dead":
			deadAt = time.Since(killed)
			return true
		}
		return false
	})
	if suspectAt == 0 {
		t.Fatalf("%s went dead (%v after the kill) without being shown suspect", n2.id, deadAt)
	}
	t.Logf("%s SIGKILLed: suspect on the page after %v, dead after %v (detector: suspect %v, dead %v)",
		n2.id, suspectAt.Round(time.Millisecond), deadAt.Round(time.Millisecond), deadAfter/2, deadAfter)
	waitFor(t, 20*time.Second, "the cluster's traffic without "+n2.id, func() bool {
		mb := readView(t, bctx).Members
		return mb.Answered == "2" && mb.Total == "3" && mb.Missing == n2.id
	})
	t.Logf("the namespace table names %s as missing from the cluster's traffic", n2.id)
	screenshot(t, bctx, shots, "console-dead.png")
	t.Logf("console browser test took %v", time.Since(start).Round(time.Millisecond))
}
