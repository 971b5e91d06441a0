package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/internal/weights"
)

// adminKeyFor makes one admin S3 key and writes its key files into every
// dir (key files are per node, so a cluster's nodes get copies before they
// start).
func adminKeyFor(t *testing.T, dirs ...string) credential.Credential {
	t.Helper()
	seed := t.TempDir()
	keys, err := credential.OpenFile(credential.DefaultConfig(seed))
	if err != nil {
		t.Fatal(err)
	}
	key, err := keys.Create(context.Background(), []string{credential.ScopeAll}, "admin")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		for _, f := range []string{credential.FileName, credential.NodeKeyFile} {
			b, err := os.ReadFile(filepath.Join(seed, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	return key
}

// TestWeightsPullSurvivesNodeKill: a checkpoint pushed into an RS(2,1)
// object namespace of a 3-node cluster of real ctxd processes is pulled
// through node 3 first (endpoints n3, n1, n2); node 3 is SIGKILLed once
// 24 MiB are in. The pull fails over to node 1's endpoint, whose reads of
// the blocks with a data shard on the dead node are decoded from the
// other two holders (degraded reads, counted by
// ctxtier_cluster_reconstructions_total), and completes with the pushed
// bytes (SHA-256 of every file).
func TestWeightsPullSurvivesNodeKill(t *testing.T) {
	ctx := withTimeout(t, 5*time.Minute)
	// A long --dead-after: the kill is survived by degraded reads, not by
	// a repair that finished first.
	nodes, key := startWeightsCluster(ctx, t, 2, 1, "--dead-after", "10m")
	src := t.TempDir()
	files, want := writeWeightsCheckpoint(t, src)
	cfg := func(eps ...*testNode) weights.Config { return weightsConfig(key, eps...) }
	pusher, err := weights.New(cfg(nodes[0]))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pusher.Push(ctx, src, "llama/8b", nil); err != nil {
		t.Fatal(err)
	}

	reconstructions := func() (sum float64) {
		for _, nd := range nodes[:2] {
			v := scrapeMetrics(t, nd.p.HTTP, "ctxtier_cluster_reconstructions_total")["ctxtier_cluster_reconstructions_total"]
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: ctxtier_cluster_reconstructions_total %q: %v", nd.id, v, err)
			}
			sum += f
		}
		return sum
	}
	before := reconstructions()

	// The push went through n1 and n3 is the pull's first endpoint: n3
	// serves the model once its own index has applied the manifest (written
	// last, so every file's record is applied before it). A follower's S3
	// GETs read its local index, which may be a moment behind.
	watcher, err := weights.New(cfg(nodes[2]))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "n3 to serve the model's manifest", func() bool {
		_, err := watcher.Manifest(ctx, "llama/8b")
		return err == nil
	})

	puller, err := weights.New(cfg(nodes[2], nodes[0], nodes[1]))
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, n := range files {
		total += int64(n)
	}
	st, dst, at := pullAcrossKill(ctx, t, puller, nodes[2], total)
	if st.FilesFetched != 3 {
		t.Errorf("pull stats %+v: want 3 files fetched", st)
	}
	checkPulled(t, dst, want)
	if d := reconstructions() - before; d < 1 {
		t.Errorf("no degraded read on the surviving nodes (reconstructions +%v): the dead node's shards were not needed", d)
	} else {
		t.Logf("pulled %d MiB across the kill of node 3 after %d MiB; %v blocks decoded from parity", st.BytesFetched>>20, at>>20, d)
	}
}

// TestWeightsPushSurvivesNodeKill: a push through node 3 first (endpoints
// n3, n1, n2) into an RS(2,1) object namespace of a 3-node cluster; node 3
// is SIGKILLed once 24 MiB are sent, inside the first big file. The push
// starts that file over through node 1 and completes; a pull through the
// two survivors gives the pushed bytes (SHA-256 of every file).
func TestWeightsPushSurvivesNodeKill(t *testing.T) {
	ctx := withTimeout(t, 5*time.Minute)
	nodes, key := startWeightsCluster(ctx, t, 2, 1, "--dead-after", "10m")
	src := t.TempDir()
	files, want := writeWeightsCheckpoint(t, src)
	var total int64
	for _, n := range files {
		total += int64(n)
	}
	pusher, err := weights.New(weightsConfig(key, nodes[2], nodes[0], nodes[1]))
	if err != nil {
		t.Fatal(err)
	}
	var prog weights.Progress
	atKill := killAfter(ctx, &prog, 24<<20, nodes[2])
	m, err := pusher.Push(ctx, src, "llama/8b", &prog)
	at := atKill()
	if err != nil {
		t.Fatalf("push across the kill: %v", err)
	}
	select {
	case <-nodes[2].p.exited:
	default:
		t.Fatal("node 3 still running")
	}
	if at >= total {
		t.Fatalf("node 3 was killed after %d of %d bytes: not mid-push", at, total)
	}
	if got := prog.Done.Load(); got != total || m.Size() != total {
		t.Errorf("progress %d, manifest %d bytes, want %d: a restarted file's bytes must count once", got, m.Size(), total)
	}
	puller, err := weights.New(weightsConfig(key, nodes[0], nodes[1]))
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if _, err := puller.Pull(ctx, "llama/8b", dst, nil); err != nil {
		t.Fatalf("pull through the survivors: %v", err)
	}
	checkPulled(t, dst, want)
	t.Logf("node 3 killed after %d MiB of %d MiB pushed; push and pull completed through the others", at>>20, total>>20)
}

// killAfter SIGKILLs nd once prog has counted n bytes, unless the transfer
// ends first. Call the function it returns when the transfer has ended: it
// waits for the watcher and returns the bytes counted at the kill (0 when
// there was none).
func killAfter(ctx context.Context, prog *weights.Progress, n int64, nd *testNode) func() int64 {
	killed, ended := make(chan struct{}), make(chan struct{})
	var at int64
	go func() {
		defer close(killed)
		for prog.Done.Load() < n && ctx.Err() == nil {
			select {
			case <-ended:
				return // the transfer ended (failed) before the kill point
			case <-time.After(time.Millisecond):
			}
		}
		nd.p.Kill()
		at = prog.Done.Load()
	}()
	return func() int64 {
		close(ended)
		<-killed
		return at
	}
}

// startWeightsCluster starts a 3-node cluster of real ctxd processes
// (extra flags on each) sharing one admin S3 key, and creates the object
// namespace "weights" with the erasure code (k, m).
func startWeightsCluster(ctx context.Context, t *testing.T, k, m int, extra ...string) ([]*testNode, credential.Credential) {
	t.Helper()
	nodes := make([]*testNode, 3)
	var joins, dirs []string
	for i := range nodes {
		nodes[i] = &testNode{id: fmt.Sprintf("n%d", i+1), http: freeAddr(t), raft: freeAddr(t), dataDir: t.TempDir()}
		nodes[i].extra = extra
		joins = append(joins, nodes[i].http)
		dirs = append(dirs, nodes[i].dataDir)
	}
	key := adminKeyFor(t, dirs...)
	join := strings.Join(joins, ",")
	for _, nd := range nodes {
		nd.p = startCtxd(t, nd.args(join)...)
	}
	waitFor(t, 30*time.Second, "a leader", func() bool { _, ok := leaderOf(t, nodes); return ok })
	hc := httpClient(t, nodes[0].p.HTTP)
	waitFor(t, 30*time.Second, "the weights namespace", func() bool {
		_, err := hc.CreateNamespace(ctx, block.Namespace{Name: "weights", Kind: block.KindObject, DataShards: k, ParityShards: m})
		return err == nil
	})
	return nodes, key
}

// writeWeightsCheckpoint writes two safetensors-sized files of random bytes
// and a small one into src, and returns their sizes and SHA-256s.
func writeWeightsCheckpoint(t *testing.T, src string) (map[string]int, map[string][32]byte) {
	t.Helper()
	files := map[string]int{"model-00001-of-00002.safetensors": 64<<20 + 4099, "model-00002-of-00002.safetensors": 40 << 20, "config.json": 777}
	r := rand.New(rand.NewPCG(7, 8))
	want := map[string][32]byte{}
	for p, n := range files {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		if err := os.WriteFile(filepath.Join(src, p), b, 0o644); err != nil {
			t.Fatal(err)
		}
		want[p] = sha256.Sum256(b)
	}
	return files, want
}

// weightsConfig is a weights client configuration for the S3 endpoints of
// eps, in that order: 8 MiB chunks, 2 in parallel.
func weightsConfig(key credential.Credential, eps ...*testNode) weights.Config {
	c := weights.DefaultConfig()
	c.Endpoints = nil
	for _, nd := range eps {
		c.Endpoints = append(c.Endpoints, nd.p.S3)
	}
	c.AccessKey, c.Secret, c.ChunkSize, c.Parallel = key.AccessKeyID, key.Secret, 8<<20, 2
	return c
}

// checkPulled compares every pulled file's SHA-256 with the pushed one's.
func checkPulled(t *testing.T, dst string, want map[string][32]byte) {
	t.Helper()
	for p, sum := range want {
		b, err := os.ReadFile(filepath.Join(dst, p))
		if err != nil {
			t.Fatal(err)
		}
		if got := sha256.Sum256(b); !bytes.Equal(got[:], sum[:]) {
			t.Errorf("%s: SHA-256 of the pulled file differs from the pushed one", p)
		}
	}
}

// TestWeightsPullRouted: in a one-copy object namespace of a 3-node
// cluster, every data block has one holder. The same checkpoint is pulled
// through all three endpoints twice: without routing (every GET through
// n1, which reads the blocks it does not hold from their holders) and with
// it (each ranged GET sent to the block's holder). Both pulls give the
// pushed bytes; the routed one is served from the holders' own tiers: the
// nodes' remote-read bytes (ctxtier_cluster_read_bytes_total{path="remote"})
// stay under 1 MiB (manifest records only; a data block is 8 MiB) where
// the unrouted pull's include data blocks.
func TestWeightsPullRouted(t *testing.T) {
	ctx := withTimeout(t, 5*time.Minute)
	nodes, key := startWeightsCluster(ctx, t, 1, 0)
	total, want := pushToAllNodes(ctx, t, nodes, key, "llama/8b")
	const local, remote = `ctxtier_cluster_read_bytes_total{path="local"}`, `ctxtier_cluster_read_bytes_total{path="remote"}`
	readBytes := func() (loc, rem float64) { return sumMetric(t, nodes, local), sumMetric(t, nodes, remote) }
	for _, tt := range []struct {
		name  string
		route bool
	}{{"unrouted", false}, {"routed", true}} {
		cfg := weightsConfig(key, nodes...)
		cfg.Route = tt.route
		puller, err := weights.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		dst := t.TempDir()
		loc0, rem0 := readBytes()
		st, err := puller.Pull(ctx, "llama/8b", dst, nil)
		if err != nil {
			t.Fatalf("%s pull: %v", tt.name, err)
		}
		loc1, rem1 := readBytes()
		checkPulled(t, dst, want)
		if st.BytesFetched != total {
			t.Errorf("%s pull fetched %d bytes, want %d", tt.name, st.BytesFetched, total)
		}
		dl, dr := loc1-loc0, rem1-rem0
		t.Logf("%s pull of %d MiB: nodes read %.1f MiB locally, %.1f MiB from peers", tt.name, total>>20, dl/(1<<20), dr/(1<<20))
		switch {
		case dl+dr < float64(total):
			t.Errorf("%s: the nodes read %.0f bytes for a %d-byte checkpoint: the read counters miss reads", tt.name, dl+dr, total)
		case tt.route && dr >= 1<<20:
			t.Errorf("routed pull: %.0f bytes read from peers, want only manifest records (< 1 MiB)", dr)
		case !tt.route && dr < 8<<20:
			t.Errorf("unrouted pull through n1: %.0f bytes read from peers, want the blocks n1 does not hold", dr)
		}
	}
}

// TestWeightsPullJoinsTheStream: three nodes whose DRAM holds only a few
// of the checkpoint's 8 MiB blocks, so a pull from the first chunk reads
// the blocks from NVMe. A pull with Config.Join asks the nodes which
// blocks they have in DRAM (GetObjectLocations' InMemory) and starts inside
// that run, fetching the chunks before it last: it reads at least one block
// less from NVMe than a pull in order from the same state, and both give
// the pushed bytes.
func TestWeightsPullJoinsTheStream(t *testing.T) {
	ctx := withTimeout(t, 5*time.Minute)
	// Plain LRU in DRAM, room for two 8 MiB blocks per node: the default
	// policy (duel) keeps some blocks through a scan and adapts to it, so
	// which blocks stay in memory, and what a pull in order finds there,
	// would vary from run to run.
	nodes, key := startWeightsCluster(ctx, t, 1, 0, "--dram-capacity", "16MiB", "--dram-policy", "lru")
	nvmeRead := func() float64 { return sumMetric(t, nodes, `ctxtier_tier_read_bytes_total{tier="nvme"}`) }
	// pull pulls model in order or joining, one chunk at a time (with two
	// in flight, a cold chunk's promotion can evict a hot one the other is
	// about to read, as often as the machine's load decides), and returns
	// the bytes the nodes read from NVMe for it.
	pull := func(model string, join bool, want map[string][32]byte) float64 {
		cfg := weightsConfig(key, nodes...)
		cfg.Join, cfg.Parallel = join, 1
		puller, err := weights.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		dst := t.TempDir()
		before := nvmeRead()
		if _, err := puller.Pull(ctx, model, dst, nil); err != nil {
			t.Fatalf("pull of %s (join %v): %v", model, join, err)
		}
		read := nvmeRead() - before
		checkPulled(t, dst, want)
		t.Logf("pull of %s, join %v: %.1f MiB read from NVMe", model, join, read/(1<<20))
		return read
	}
	// A pull in order leaves the checkpoint's last blocks in the nodes'
	// DRAM, as a stream moving through it would; from that state a second
	// pull in order finds none of them before they are evicted (a cyclic
	// scan of more than DRAM holds), and leaves the same state behind for
	// the joining pull. Unless placement gave a node so few of the 14
	// blocks that they all fit in its DRAM: they then stay there, and both
	// pulls find them; the checkpoint is pushed again under another name
	// (another placement) until no block stays resident.
	for try := 1; try <= 8; try++ {
		model := fmt.Sprintf("llama/8b-%d", try)
		total, want := pushToAllNodes(ctx, t, nodes, key, model)
		pull(model, false, want) // leaves the stream's tail in DRAM
		inOrder := pull(model, false, want)
		if inOrder < float64(total) {
			t.Logf("placement of %s keeps %.1f MiB in DRAM through a scan: pushing again", model, (float64(total)-inOrder)/(1<<20))
			continue
		}
		// The last two chunks read are in DRAM (each node has room for
		// two blocks), so the joining pull finds a run of at least two and
		// reads at least its last 8 MiB chunk from memory; its location
		// queries read a few KiB of object metadata from NVMe on top.
		joined := pull(model, true, want)
		if joined > inOrder-7<<20 {
			t.Fatalf("joining pull read %.0f bytes from NVMe, the pull in order %.0f from the same state: want at least one 8 MiB block less, give or take metadata", joined, inOrder)
		}
		return
	}
	t.Fatal("eight placements in a row kept blocks in DRAM through a scan (each has about one chance in three)")
}

// pullAcrossKill pulls llama/8b (total bytes) with puller into a fresh
// directory, SIGKILLing node nd once 24 MiB are in; the pull must succeed
// and nd must have died mid-transfer. It returns the pull's stats, the
// directory and how many bytes were in at the kill.
func pullAcrossKill(ctx context.Context, t *testing.T, puller *weights.Client, nd *testNode, total int64) (weights.PullStats, string, int64) {
	t.Helper()
	dst := t.TempDir()
	var prog weights.Progress
	atKill := killAfter(ctx, &prog, 24<<20, nd)
	st, err := puller.Pull(ctx, "llama/8b", dst, &prog)
	at := atKill()
	if err != nil {
		t.Fatalf("pull across the kill of %s: %v", nd.id, err)
	}
	select {
	case <-nd.p.exited:
	default:
		t.Fatalf("%s still running", nd.id)
	}
	if at >= total {
		t.Fatalf("%s was killed after %d of %d bytes: not mid-transfer", nd.id, at, total)
	}
	return st, dst, at
}

// sumMetric is the sum over nodes of the metric series name (its name and
// labels as the exposition writes them).
func sumMetric(t *testing.T, nodes []*testNode, name string) float64 {
	t.Helper()
	var sum float64
	for _, nd := range nodes {
		v, err := strconv.ParseFloat(scrapeMetrics(t, nd.p.HTTP, name)[name], 64)
		if err != nil {
			t.Fatalf("%s: %s: %v", nd.id, name, err)
		}
		sum += v
	}
	return sum
}

// pushToAllNodes pushes writeWeightsCheckpoint's checkpoint as model
// through the first node and waits until every node serves its manifest
// (written last: routing learns which endpoint is which member from it);
// it returns the checkpoint's size and its files' SHA-256s.
func pushToAllNodes(ctx context.Context, t *testing.T, nodes []*testNode, key credential.Credential, model string) (int64, map[string][32]byte) {
	t.Helper()
	src := t.TempDir()
	files, want := writeWeightsCheckpoint(t, src)
	var total int64
	for _, n := range files {
		total += int64(n)
	}
	pusher, err := weights.New(weightsConfig(key, nodes[0]))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pusher.Push(ctx, src, model, nil); err != nil {
		t.Fatal(err)
	}
	for _, nd := range nodes {
		w, err := weights.New(weightsConfig(key, nd))
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, nd.id+" to serve the model's manifest", func() bool {
			_, err := w.Manifest(ctx, model)
			return err == nil
		})
	}
	return total, want
}

// TestWeightsPullDirect: a worker on the nodes' machine names their native
// addresses (Config.Direct) and copies whole blocks out of their DRAM by
// descriptor. The nodes' DRAM holds three of the checkpoint's 8 MiB blocks
// each (72 MiB of 104), so at least 32 MiB are on NVMe when a pull asks for
// them; DESCRIBE's promote flag reads each into DRAM first. Every byte comes by descriptor: PullStats
// counts all as direct, the nodes' S3 endpoints send under 1 MiB (the
// manifest), their NVMe reads are at least a quarter of the checkpoint
// (the promotions) and the files are the pushed ones. A direct address where no node listens is reported and the
// pull goes over S3.
func TestWeightsPullDirect(t *testing.T) {
	ctx := withTimeout(t, 5*time.Minute)
	nodes, key := startWeightsCluster(ctx, t, 1, 0, "--dram-capacity", "24MiB", "--dram-policy", "lru")
	total, want := pushToAllNodes(ctx, t, nodes, key, "llama/8b")
	const s3Out, nvme = `ctxtier_payload_bytes_total{dir="out",proto="s3"}`, `ctxtier_tier_read_bytes_total{tier="nvme"}`
	counters := func() (sent, nvmeRead float64) { return sumMetric(t, nodes, s3Out), sumMetric(t, nodes, nvme) }
	pull := func(direct []string) (weights.PullStats, float64, float64, []error) {
		cfg := weightsConfig(key, nodes...)
		cfg.Direct = direct
		puller, err := weights.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer puller.Close()
		dst := t.TempDir()
		c0, n0 := counters()
		st, err := puller.Pull(ctx, "llama/8b", dst, nil)
		if err != nil {
			t.Fatalf("pull (direct %q): %v", direct, err)
		}
		c1, n1 := counters()
		checkPulled(t, dst, want)
		t.Logf("pull (direct %q): %d of %d bytes by descriptor; the nodes sent %.1f MiB over S3 and read %.1f MiB from NVMe", direct, st.BytesDirect, st.BytesFetched, (c1-c0)/(1<<20), (n1-n0)/(1<<20))
		return st, c1 - c0, n1 - n0, puller.DirectProblems()
	}
	st, sent, nvmeRead, probs := pull([]string{nodes[0].p.Native, nodes[1].p.Native, nodes[2].p.Native})
	if st.BytesFetched != total || st.BytesDirect != total || len(probs) > 0 {
		t.Errorf("direct pull: %d bytes fetched, %d by descriptor, want %d both; problems %v", st.BytesFetched, st.BytesDirect, total, probs)
	}
	if sent >= 1<<20 {
		t.Errorf("direct pull: the nodes sent %.0f bytes over S3, want only the manifest (< 1 MiB)", sent)
	}
	if nvmeRead < float64(total)/4 {
		t.Errorf("direct pull: the nodes read %.0f bytes from NVMe of %d: the test means most blocks to be promoted by DESCRIBE", nvmeRead, total)
	}
	st, sent, _, probs = pull([]string{freeAddr(t), "", ""})
	if st.BytesFetched != total || st.BytesDirect != 0 || len(probs) != 1 || sent < float64(total) {
		t.Errorf("direct address with no node: %d bytes fetched, %d by descriptor, %.0f sent over S3, problems %v; want %d over S3 and one problem", st.BytesFetched, st.BytesDirect, sent, probs, total)
	}
}

// TestWeightsPullDirectSurvivesNodeKill: a direct pull (every node's
// native address named) from a namespace of two copies, through node 3
// first; node 3 is SIGKILLed once 24 MiB are in. Its DESCRIBEs and GETs
// fail, the blocks it held come from their other copy over S3, and the
// pull completes with the pushed bytes, part of them by descriptor.
func TestWeightsPullDirectSurvivesNodeKill(t *testing.T) {
	ctx := withTimeout(t, 5*time.Minute)
	nodes, key := startWeightsCluster(ctx, t, 1, 1, "--dead-after", "10m")
	total, want := pushToAllNodes(ctx, t, nodes, key, "llama/8b")
	order := []*testNode{nodes[2], nodes[0], nodes[1]}
	cfg := weightsConfig(key, order...)
	for _, nd := range order {
		cfg.Direct = append(cfg.Direct, nd.p.Native)
	}
	puller, err := weights.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer puller.Close()
	st, dst, at := pullAcrossKill(ctx, t, puller, nodes[2], total)
	checkPulled(t, dst, want)
	if st.BytesFetched != total || st.BytesDirect == 0 {
		t.Errorf("pull stats %+v: want %d bytes fetched, some by descriptor", st, total)
	}
	t.Logf("pulled %d MiB across the kill of node 3 after %d MiB, %d MiB by descriptor", st.BytesFetched>>20, at>>20, st.BytesDirect>>20)
}
