package main

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/tiers/dram"
	"github.com/ctxtier/ctxtier/tiers/nvme"
	"github.com/ctxtier/ctxtier/tiers/s3"
)

// TestTierCollectorsShareOneRegistry registers every tier's collector on one
// registry, as ctxd does with all tiers enabled: metrics that several tiers
// export (ctxtier_tier_blocks{tier=...} and so on) must agree on their help
// text, or registration panics at startup.
func TestTierCollectorsShareOneRegistry(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dc := dram.DefaultConfig()
	dc.Capacity = 1 << 20
	d, err := dram.New(dc, log)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	nc := nvme.DefaultConfig()
	nc.Dir = filepath.Join(t.TempDir(), "nvme")
	nc.Capacity = 64 << 20
	nc.SegmentSize = 16 << 20
	nc.MaxBlockSize = 1 << 20
	n, err := nvme.New(nc, log)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	sc := s3.DefaultConfig()
	sc.Endpoint = "127.0.0.1:1"
	sc.Bucket = "b"
	sc.AccessKey, sc.SecretKey = "a", "s"
	sc.Dir = t.TempDir()
	sc.Policy = func(string) s3.Policy { return s3.PolicyFor(block.DefaultNamespaceConfig()) }
	st, err := s3.New(sc, log)
	if err != nil {
		// s3.New does not dial: an error here is a real failure, not a
		// missing server.
		t.Fatalf("s3 tier not constructed offline: %v", err)
	}
	defer st.Close()
	reg := prometheus.NewRegistry()
	for _, c := range []prometheus.Collector{s3.NewCollector(st), nvme.NewCollector(n), dram.NewCollector(d)} {
		if err := reg.Register(c); err != nil {
			t.Fatalf("registering %T: %v", c, err)
		}
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}
