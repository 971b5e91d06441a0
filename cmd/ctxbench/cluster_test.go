package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseClusterFlags(t *testing.T) {
	c, err := parseClusterFlags(strings.Fields("--addrs 127.0.0.1:1,,127.0.0.1:2 --block-size 1MiB --blocks 8 --rounds 2 --concurrency 3 --index-blocks 0"), io.Discard)
	if err != nil || len(c.Addrs) != 2 || c.BlockSize != 1<<20 || c.Blocks != 8 || c.Rounds != 2 || c.Concurrency != 3 || c.IndexBlocks != 0 || c.IndexBlockSize != 4<<10 || c.Read != "linearizable" {
		t.Fatalf("%+v %v", c, err)
	}
	if c, err := parseClusterFlags(strings.Fields("--index-batch 64 --native-addrs 127.0.0.1:3,127.0.0.1:4"), io.Discard); err != nil || c.IndexBatch != 64 || len(c.NativeAddrs) != 2 {
		t.Fatalf("--index-batch 64: %+v %v", c, err)
	}
	if c, err := parseClusterFlags(strings.Fields("--start --profile /tmp/p --profile-seconds 3"), io.Discard); err != nil || c.Profile != "/tmp/p" || c.ProfileSeconds != 3 {
		t.Fatalf("--profile: %+v %v", c, err)
	}
	if c, err := parseClusterFlags([]string{"--start", "--dram-prefault"}, io.Discard); err != nil || !c.DRAMPrefault {
		t.Fatalf("--dram-prefault: %+v %v", c, err)
	}
	if c, err := parseClusterFlags([]string{"--read", "local"}, io.Discard); err != nil || c.Read != "local" {
		t.Fatalf("--read local: %+v %v", c, err)
	}
	for _, bad := range []string{"--addrs ,", "--blocks 0", "--rounds 0", "--concurrency 0", "--index-concurrency 2000",
		"--block-size 4", "--index-block-size 1", "--index-blocks -1", "--dram-capacity lots", "--read strong", "--read-ops -1", "--read-concurrency 0", "extra",
		"--index-batch 0", "--index-batch 5000", "--index-batch 2 --native-addrs ,",
		"--profile /tmp/p", "--start --profile /tmp/p --profile-seconds 0", "--start --profile-seconds 601"} {
		if _, err := parseClusterFlags(strings.Fields(bad), io.Discard); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestClusterPayloadCheck: a read is accepted only when it is exactly the
// block that was put.
func TestClusterPayloadCheck(t *testing.T) {
	p := newPayload(64, 7)
	good := p.fill(make([]byte, 64), 42)
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 1
		return b
	}
	tests := []struct {
		name string
		got  []byte
		ok   bool
	}{
		{"same", good, true},
		{"other block", p.fill(make([]byte, 64), 43), false},
		{"flipped byte", flip(63), false},
		{"short", good[:63], false},
		{"long", append(bytes.Clone(good), 0), false},
	}
	for _, tc := range tests {
		if err := p.check(tc.got, 42); (err == nil) != tc.ok {
			t.Errorf("%s: check = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
	if s := p.sums([]uint64{42, 43}); s[0] == s[1] {
		t.Errorf("blocks 42 and 43 have the same checksum %08x", s[0])
	}
}

func TestClusterPromSamples(t *testing.T) {
	text := `# HELP ctxtier_raft_batch_ops Index operations per group-committed Raft log entry.
ctxtier_raft_batch_ops_bucket{node_id="n1",le="1"} 3
ctxtier_raft_batch_ops_sum{node_id="n1"} 120
ctxtier_raft_batch_ops_count{node_id="n1"} 12
ctxtier_raft_batch_ops_sum{node_id="n2"} 7
ctxtier_raft_batch_ops_sum_extra 9
ctxtier_up 1
`
	for _, tc := range []struct {
		name, label string
		want        float64
		ok          bool
	}{
		{"ctxtier_raft_batch_ops_sum", `node_id="n1"`, 120, true},
		{"ctxtier_raft_batch_ops_count", `node_id="n1"`, 12, true},
		{"ctxtier_raft_batch_ops_sum", "", 127, true},
		{"ctxtier_raft_batch_ops_sum", `node_id="n3"`, 0, false},
		{"ctxtier_up", "", 1, true},
	} {
		got, ok := promSamples(text, tc.name, tc.label)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s %s = %v %v, want %v %v", tc.name, tc.label, got, ok, tc.want, tc.ok)
		}
	}
}

// TestClusterBenchAgainstRealCluster runs `ctxbench cluster --start` with
// tiny sizes: three real ctxd processes, both namespaces, the index phase.
// Every get is compared byte for byte with what was put (a mismatch fails
// the run); the output must carry every field with a positive value. The
// index phase puts native batches of 16 beside single-block batches.
func TestClusterBenchAgainstRealCluster(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "ctxd")
	build := exec.Command("go", "build", "-o", bin, "github.com/ctxtier/ctxtier/cmd/ctxd")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building ctxd: %v\n%s", err, out)
	}
	const blocks, rounds = 12, 2
	profDir := t.TempDir()
	cfg, err := parseClusterFlags(strings.Fields("--start --ctxd "+bin+" --dram-capacity 64MiB --dram-prefault --block-size 64KiB --blocks 12 --rounds 2 --concurrency 3 --index-blocks 320 --index-batch 16 --index-concurrency 16 --read-ops 400 --read-concurrency 8 --profile "+profDir+" --profile-seconds 1"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, progress bytes.Buffer
	start := time.Now()
	if err := runClusterWith(ctx, cfg, &out, &progress); err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	t.Logf("in %v:\n%s", time.Since(start).Round(time.Millisecond), out.String())
	vals := map[string]float64{}
	for _, line := range strings.Split(out.String(), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.ContainsAny(k, " :") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		vals[k] = f
	}
	for _, k := range []string{
		"one_copy_put_mb_s", "one_copy_put_ops_s", "one_copy_get_mb_s", "one_copy_get_ops_s",
		"rs21_put_mb_s", "rs21_put_ops_s", "rs21_get_mb_s", "rs21_get_ops_s",
		"ratio_rs21_vs_one_copy_put", "ratio_rs21_vs_one_copy_get",
		"index_commit_entries_per_s", "index_batch1_commit_entries_per_s", "ratio_index_batch_vs_batch1", "verified_reads",
		"exists_local_ops_s", "exists_linearizable_ops_s", "ratio_linearizable_vs_local_exists",
	} {
		if v, ok := vals[k]; !ok || v <= 0 {
			t.Errorf("%s = %v (present %v), want a positive value", k, v, ok)
		}
	}
	// The leader's log statistics are printed only for a phase in which the
	// leader stayed put (ctxbench says so in its progress otherwise: on a
	// loaded machine an election can fall inside a phase). Where a phase has
	// them, they must show the batches committed as one entry each.
	leaderMoved := strings.Contains(progress.String(), "index: the leader changed during the phase") ||
		strings.Contains(progress.String(), "index: no leader statistics")
	for _, k := range []string{"index_raft_log_entries", "index_entries_per_log_entry", "index_batch1_raft_log_entries"} {
		v, ok := vals[k]
		switch {
		case !ok && leaderMoved:
			t.Logf("%s absent: ctxbench reported a leader change or no leader statistics in its phase:\n%s", k, progress.String())
		case v <= 0:
			t.Errorf("%s = %v (present %v), want a positive value", k, v, ok)
		}
	}
	// 320 puts in batches of 16 are at most 20 index proposals (plus the
	// odd member or incarnation entry): clearly more than one block entry
	// per log entry.
	if v, ok := vals["index_entries_per_log_entry"]; ok && v < 4 {
		t.Errorf("index_entries_per_log_entry = %v with batches of 16: the batches were not committed as one entry each", v)
	}
	if v := vals["index_batch"]; v != 16 {
		t.Errorf("index_batch = %v, want 16", v)
	}
	// The nodes' put halves are timed (real durations: above zero), and
	// CPU per entry is read for both runs (10 ms ticks: a short run may
	// read zero, never less).
	for _, k := range []string{"index_put_shards_ms_mean", "index_put_commit_ms_mean", "index_batch1_put_shards_ms_mean", "index_batch1_put_commit_ms_mean"} {
		if v, ok := vals[k]; !ok || v <= 0 {
			t.Errorf("%s = %v (present %v), want a positive value", k, v, ok)
		}
	}
	// Each block went to its owner (--index-route, the default): the
	// nodes forwarded (almost) no shards to peers, where batches sent to
	// any node forward about two shard batches per request.
	if req, fw := vals["index_node_requests"], vals["index_peer_shard_batches"]; req < 1 || fw >= req/2 {
		t.Errorf("index_node_requests = %v, index_peer_shard_batches = %v: routed to owners, want under one forward per two requests", req, fw)
	}
	for _, k := range []string{"index_node_cpu_us_per_entry", "index_bench_cpu_us_per_entry", "index_batch1_node_cpu_us_per_entry", "index_batch1_bench_cpu_us_per_entry"} {
		if v, ok := vals[k]; !ok || v < 0 {
			t.Errorf("%s = %v (present %v), want a value >= 0", k, v, ok)
		}
	}
	// --profile left a CPU profile (gzip-compressed protobuf) per node
	// and of ctxbench, and each node's allocation profiles at the
	// window's start and end.
	for _, name := range []string{"n1", "n2", "n3", "ctxbench", "n1.allocs0", "n1.allocs", "n3.allocs0", "n3.allocs"} {
		b, err := os.ReadFile(filepath.Join(profDir, name+".pprof"))
		if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			t.Errorf("profile %s: %d bytes, err %v: want a gzip-compressed pprof profile", name, len(b), err)
		}
	}
	// Every round's gets in both namespaces were verified (plus the
	// warm-up's and the index phase's sample).
	if v := vals["verified_reads"]; v < 2*blocks*rounds {
		t.Errorf("verified_reads = %v, want at least %d", v, 2*blocks*rounds)
	}
}

func TestParseProcStatCPU(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       time.Duration
		bad        bool
	}{
		{"plain", "4242 (ctxd) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 31 0 0 20 0 12 0 100 0 0", 2810 * time.Millisecond, false},
		{"name with spaces and parens", "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 5 0 0", 100 * time.Millisecond, false},
		{"no name", "7 a R 1 7 7 0 -1 0 0 0 0 0 7 3", 0, true},
		{"too short", "7 (x) R 1 2 3", 0, true},
		{"not a number", "7 (x) R 1 7 7 0 -1 0 0 0 0 0 x 3 0 0", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProcStatCPU(tc.line)
			if (err != nil) != tc.bad || got != tc.want {
				t.Fatalf("parseProcStatCPU = %v, %v; want %v (error: %v)", got, err, tc.want, tc.bad)
			}
		})
	}
}

// This process's own CPU time, read through /proc, grows with work done.
func TestProcCPUOfSelf(t *testing.T) {
	before, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for x := uint64(1); ; x = x*6364136223846793005 + 1 {
		after, err := procCPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if after > before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU time stayed at %v for 30 s of spinning (x=%d)", after, x)
		}
	}
}
