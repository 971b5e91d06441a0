package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseWeightsFlags(t *testing.T) {
	c, err := parseWeightsFlags(strings.Fields("--start --size 64MiB --files 3 --pullers 2 --parallel 3 --chunk-size 8MiB --data-shards 2 --parity-shards 1"), io.Discard)
	if err != nil || c.Size != 64<<20 || c.Files != 3 || c.Pullers != 2 || c.Parallel != 3 || c.ChunkSize != 8<<20 || c.DataShards != 2 || c.ParityShards != 1 {
		t.Fatalf("%+v %v", c, err)
	}
	if c, err := parseWeightsFlags(strings.Fields("--start --profile /tmp/p --profile-seconds 9"), io.Discard); err != nil || c.Profile != "/tmp/p" || c.ProfileSeconds != 9 {
		t.Fatalf("profile: %+v %v", c, err)
	}
	if c, err := parseWeightsFlags(strings.Fields("--start --route=false"), io.Discard); err != nil || c.Route {
		t.Fatalf("--route=false: %+v %v", c, err)
	}
	if c, err := parseWeightsFlags(strings.Fields("--start --verify sha256"), io.Discard); err != nil || c.Verify != "sha256" {
		t.Fatalf("--verify sha256: %+v %v", c, err)
	}
	if c, err := parseWeightsFlags(strings.Fields("--start --late 2500ms --join=false"), io.Discard); err != nil || c.Late != 2500*time.Millisecond || c.Join {
		t.Fatalf("--late --join=false: %+v %v", c, err)
	}
	if c, err := parseWeightsFlags(strings.Fields("--start --direct"), io.Discard); err != nil || !c.Direct {
		t.Fatalf("--direct: %+v %v", c, err)
	}
	if c, err := parseWeightsFlags([]string{"--start"}, io.Discard); err != nil || c.Size != 8<<30 || c.Pullers != 4 || c.Profile != "" || !c.Route || c.Verify != "xxh3" || !c.Join || c.Late != 0 || c.Direct {
		t.Fatalf("defaults: %+v %v", c, err)
	}
	for _, bad := range []string{"", "--start --size lots", "--start --size 1MiB --files 2", "--start --files 0", "--start --pullers 0",
		"--start --parallel 0", "--start --chunk-size 1MiB", "--start --data-shards 2 --parity-shards 2", "--start --dram-capacity x", "--start extra", "--start --profile-seconds 0", "--start --verify crc32", "--start --late -1s", "--start --late 11m", "--start --late soon"} {
		if _, err := parseWeightsFlags(strings.Fields(bad), io.Discard); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestSyntheticSafetensors: every file is a well-formed safetensors file
// whose tensors tile its data exactly, and the sizes add up to what was
// returned, close under the asked size.
func TestSyntheticSafetensors(t *testing.T) {
	dir := t.TempDir()
	const size = 200<<20 + 7
	got, err := writeSafetensors(dir, size, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got > size || got < size-3*64<<10 {
		t.Fatalf("wrote %d bytes, want just under %d", got, size)
	}
	var sum int64
	for i := 1; i <= 3; i++ {
		b, err := os.ReadFile(filepath.Join(dir, "model-0000"+strconv.Itoa(i)+"-of-00003.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		sum += int64(len(b))
		hlen := binary.LittleEndian.Uint64(b)
		if hlen%8 != 0 || 8+hlen > uint64(len(b)) {
			t.Fatalf("file %d: header length %d", i, hlen)
		}
		var hdr map[string]json.RawMessage
		if err := json.Unmarshal(b[8:8+hlen], &hdr); err != nil {
			t.Fatalf("file %d: %v", i, err)
		}
		var covered int64
		for name, raw := range hdr {
			if name == "__metadata__" {
				continue
			}
			var e struct {
				DType   string  `json:"dtype"`
				Shape   []int64 `json:"shape"`
				Offsets []int64 `json:"data_offsets"`
			}
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatal(err)
			}
			if e.DType != "BF16" || len(e.Shape) != 1 || len(e.Offsets) != 2 || e.Offsets[1]-e.Offsets[0] != 2*e.Shape[0] {
				t.Errorf("file %d tensor %s: %+v", i, name, e)
			}
			covered += e.Offsets[1] - e.Offsets[0]
		}
		if covered != int64(len(b))-8-int64(hlen) {
			t.Errorf("file %d: tensors cover %d of %d data bytes", i, covered, int64(len(b))-8-int64(hlen))
		}
	}
	if sum != got {
		t.Errorf("files hold %d bytes, writeSafetensors said %d", sum, got)
	}
}

func TestRawTCP(t *testing.T) {
	d, err := rawTCP(context.Background(), 48<<20+6, 3, 1<<20)
	if err != nil || d <= 0 {
		t.Fatalf("%v %v", d, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := rawTCP(ctx, 1<<30, 2, 1<<20); err == nil {
		t.Fatal("a cancelled baseline reported success")
	}
}

// TestWeightsBenchAgainstRealCluster runs `ctxbench weights --start` with
// 64 MiB: three real ctxd processes and a real versitygw; every chunk every
// worker reads is verified against the manifest's SHA-256 (a mismatch
// fails the run). The result line must carry every field with a positive
// value. The three nodes' DRAM (16 MiB each, 48 MiB together) cannot hold
// the single-copy checkpoint, so some node must demote blocks and NVMe is
// read whatever the placement (with 32 MiB a node, a placement that left
// every node under its DRAM read nothing from NVMe: seen once).
func TestWeightsBenchAgainstRealCluster(t *testing.T) {
	vgw, err := findVersitygw("")
	if err != nil {
		if os.Getenv("CI") == "true" || os.Getenv("CTXTIER_STRICT") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	bin := filepath.Join(t.TempDir(), "ctxd")
	build := exec.Command("go", "build", "-o", bin, "github.com/ctxtier/ctxtier/cmd/ctxd")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building ctxd: %v\n%s", err, out)
	}
	prof := t.TempDir()
	cfg, err := parseWeightsFlags(strings.Fields("--start --ctxd "+bin+" --versitygw "+vgw+" --size 64MiB --dram-capacity 16MiB --nvme-capacity 1GiB --chunk-size 8MiB --pullers 4 --parallel 2 --profile "+prof+" --profile-seconds 1"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, progress bytes.Buffer
	start := time.Now()
	if err := runWeightsWith(ctx, cfg, &out, &progress); err != nil {
		t.Fatalf("%v\nprogress:\n%s", err, progress.String())
	}
	t.Logf("in %v:\n%s%s", time.Since(start).Round(time.Millisecond), progress.String(), out.String())
	vals := map[string]float64{}
	for _, f := range strings.Fields(out.String()) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		if x, err := strconv.ParseFloat(v, 64); err == nil {
			vals[k] = x
		}
	}
	for _, k := range []string{"tier_gb_s", "raw_tcp_gb_s", "ratio_vs_raw_tcp", "lower_tier_bytes_per_served_byte", "lower_tier_bytes_per_checkpoint_byte",
		"last_complete_s", "versitygw_last_complete_s", "speedup_vs_versitygw", "push_gb_s", "promotions", "promotions_direct",
		"node_cpu_s_per_gb", "puller_cpu_s_per_gb", "raw_tcp_cpu_s_per_gb", "local_read_share"} {
		if v, ok := vals[k]; !ok || v <= 0 {
			t.Errorf("%s = %v (present %v), want a positive value", k, v, ok)
		}
	}
	// --route (the default): each ranged GET goes to the holder of its
	// one-copy blocks, so the nodes serve the data from their own tiers;
	// only manifest records (KiB) may come from peers.
	if v := vals["local_read_share"]; v < 0.9 || !strings.Contains(out.String(), " route=true ") {
		t.Errorf("routed run: local_read_share=%v, want >= 0.9 (peer_read_bytes_per_served_byte=%v)", v, vals["peer_read_bytes_per_served_byte"])
	}
	// --verify (the default): the workers check XXH3-128 chunk digests.
	if !strings.Contains(out.String(), " verify=xxh3 ") {
		t.Error("the result line does not say verify=xxh3")
	}
	// --profile: a CPU profile of every node and of the pullers, each a
	// gzipped pprof file.
	for _, name := range []string{"n1", "n2", "n3", "ctxbench"} {
		b, err := os.ReadFile(filepath.Join(prof, name+".pprof"))
		if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			t.Errorf("profile %s: %d bytes, err %v: want a gzipped pprof profile", name, len(b), err)
		}
	}
}
