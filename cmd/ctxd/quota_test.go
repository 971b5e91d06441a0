package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/client"
	"github.com/ctxtier/ctxtier/tiers/s3/s3test"
)

func nsBytesSeries(ns string, tier block.Tier) string {
	return fmt.Sprintf(`ctxtier_namespace_bytes{namespace=%q,tier=%q}`, ns, tier)
}

func nsQuotaSeries(ns string, tier block.Tier) string {
	return fmt.Sprintf(`ctxtier_namespace_quota_bytes{namespace=%q,tier=%q}`, ns, tier)
}

// TestQuotaTenantIsolation (issue 18, quotas): on one ctxd with DRAM and
// NVMe, tenant-a has a 1 MiB DRAM quota and floods 16 MiB of puts, twice
// DRAM's whole capacity; tenant-b's 4 MiB stays in DRAM to the byte, and
// none of its blocks is evicted. tenant-a's over-quota blocks are demoted
// to NVMe and read back bit-exact; a block above the quota is refused with
// QuotaExceeded (HTTP 507); the quota survives a restart and is enforced
// after it.
func TestQuotaTenantIsolation(t *testing.T) {
	dataDir := t.TempDir()
	args := append([]string{"--data-dir", dataDir}, nvmeArgs(filepath.Join(dataDir, "nvme"))...)
	p := startCtxd(t, args...)
	ctx := withTimeout(t, 4*time.Minute)
	hc := httpClient(t, p.HTTP)
	const quota = 1 << 20
	const bs = 256 << 10
	if _, err := hc.CreateNamespace(ctx, block.Namespace{Name: "tenant-a", Quota: block.Quota{DRAM: quota}}); err != nil {
		t.Fatal(err)
	}
	if _, err := hc.CreateNamespace(ctx, block.Namespace{Name: "tenant-b"}); err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(ctx, p.Native, client.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const nB, nA = 16, 64
	for i := range nB {
		if err := c.Put(ctx, block.NewKey("tenant-b", uint64(i)), blockBytes(1000+i, bs)); err != nil {
			t.Fatal(err)
		}
	}
	evictedBefore := metricValue(t, p.HTTP, `ctxtier_tier_evictions_total{tier="dram"}`)
	for i := range nA {
		if err := c.Put(ctx, block.NewKey("tenant-a", uint64(i)), blockBytes(i, bs)); err != nil {
			t.Fatalf("tenant-a put %d: %v", i, err)
		}
		if got := metricValue(t, p.HTTP, nsBytesSeries("tenant-a", block.TierDRAM)); got > quota {
			t.Fatalf("after put %d tenant-a holds %v bytes of DRAM, quota %d", i, got, quota)
		}
	}
	if got := metricValue(t, p.HTTP, nsBytesSeries("tenant-b", block.TierDRAM)); got != nB*bs {
		t.Fatalf("tenant-b holds %v bytes of DRAM, want all %d", got, nB*bs)
	}
	if got := metricValue(t, p.HTTP, nsBytesSeries("tenant-b", block.TierNVMe)); got != 0 {
		t.Fatalf("tenant-b has %v bytes on NVMe: some of it was evicted from DRAM", got)
	}
	if got := metricValue(t, p.HTTP, nsBytesSeries("tenant-a", block.TierNVMe)); got < (nA-quota/bs)*bs {
		t.Fatalf("tenant-a has only %v bytes on NVMe; its over-quota blocks must be demoted", got)
	}
	if got := metricValue(t, p.HTTP, nsQuotaSeries("tenant-a", block.TierDRAM)); got != quota {
		t.Fatalf("quota metric %v, want %d", got, quota)
	}
	evicted := metricValue(t, p.HTTP, `ctxtier_tier_evictions_total{tier="dram"}`) - evictedBefore
	if evicted < nA-quota/bs {
		t.Fatalf("%v DRAM evictions during the flood, want at least %d", evicted, nA-quota/bs)
	}
	t.Logf("flood: %v DRAM evictions, all of tenant-a", evicted)
	for i := range nB {
		got, err := c.Get(ctx, block.NewKey("tenant-b", uint64(i)))
		if err != nil || !bytes.Equal(got, blockBytes(1000+i, bs)) {
			t.Fatalf("tenant-b block %d: %v", i, err)
		}
	}
	for i := range nA {
		got, err := c.Get(ctx, block.NewKey("tenant-a", uint64(i)))
		if err != nil || !bytes.Equal(got, blockBytes(i, bs)) {
			t.Fatalf("tenant-a block %d (demoted to NVMe): %v", i, err)
		}
	}
	// Reading tenant-a's blocks back promoted some into DRAM: still within
	// the quota, and tenant-b untouched.
	if got := metricValue(t, p.HTTP, nsBytesSeries("tenant-a", block.TierDRAM)); got > quota {
		t.Fatalf("promotions took tenant-a to %v bytes of DRAM, quota %d", got, quota)
	}
	if got := metricValue(t, p.HTTP, nsBytesSeries("tenant-b", block.TierDRAM)); got != nB*bs {
		t.Fatalf("promotions of tenant-a evicted tenant-b: %v bytes left", got)
	}
	// A block above the quota: QuotaExceeded, on both protocols.
	big := blockBytes(99, 2<<20)
	if err := c.Put(ctx, block.NewKey("tenant-a", 1<<40), big); !errors.Is(err, block.ErrQuotaExceeded) {
		t.Fatalf("a 2 MiB block under a 1 MiB quota: %v, want QuotaExceeded", err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, "http://"+p.HTTP+"/v1/namespaces/tenant-a/blocks/00000000000fffff", bytes.NewReader(big))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInsufficientStorage || resp.Header.Get("X-Ctxtier-Error-Code") != "QuotaExceeded" {
		t.Fatalf("HTTP put over the quota: %d %q", resp.StatusCode, resp.Header.Get("X-Ctxtier-Error-Code"))
	}
	c.Close()

	// Restart: the quota is in Raft, and is enforced again.
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	p = startCtxd(t, args...)
	hc = httpClient(t, p.HTTP)
	ns, err := hc.Namespace(ctx, "tenant-a")
	if err != nil || ns.Quota.DRAM != quota {
		t.Fatalf("after restart tenant-a's quota is %+v (%v)", ns.Quota, err)
	}
	c2, err := client.Dial(ctx, p.Native, client.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	for i := nA; i < nA+16; i++ {
		if err := c2.Put(ctx, block.NewKey("tenant-a", uint64(i)), blockBytes(i, bs)); err != nil {
			t.Fatal(err)
		}
	}
	if got := metricValue(t, p.HTTP, nsBytesSeries("tenant-a", block.TierDRAM)); got > quota || got == 0 {
		t.Fatalf("after restart tenant-a holds %v bytes of DRAM, quota %d", got, quota)
	}
	for i := range nA + 16 {
		got, err := c2.Get(ctx, block.NewKey("tenant-a", uint64(i)))
		if err != nil || !bytes.Equal(got, blockBytes(i, bs)) {
			t.Fatalf("after restart tenant-a block %d: %v", i, err)
		}
	}
}

// TestQuotaClusterEveryNode (issue 18, quotas): a quota set through one
// node of a three-node cluster reaches every node's catalog and is
// enforced by every node's DRAM tier for a namespace of three replicas;
// lowered, it is reached on every node without a put.
func TestQuotaClusterEveryNode(t *testing.T) {
	nodes, _ := startCluster(t, 3)
	ctx := withTimeout(t, 3*time.Minute)
	replicated(t, nodes[0], "tenant-a")
	replicated(t, nodes[0], "tenant-b")
	const quota = 512 << 10
	const bs = 64 << 10
	if _, err := httpClient(t, nodes[0].http).SetQuota(ctx, "tenant-a", block.Quota{DRAM: quota}); err != nil {
		t.Fatal(err)
	}
	for _, nd := range nodes {
		hc := httpClient(t, nd.http)
		waitFor(t, 10*time.Second, "the quota on "+nd.id, func() bool {
			ns, err := hc.Namespace(context.Background(), "tenant-a")
			return err == nil && ns.Quota.DRAM == quota
		})
	}
	hb := httpClient(t, nodes[2].http)
	for i := range 8 {
		if err := hb.Put(ctx, block.NewKey("tenant-b", uint64(i)), blockBytes(500+i, bs), block.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ha := httpClient(t, nodes[1].http)
	const nA = 40
	for i := range nA {
		if err := ha.Put(ctx, block.NewKey("tenant-a", uint64(i)), blockBytes(i, bs), block.PutOptions{}); err != nil {
			t.Fatalf("tenant-a put %d: %v", i, err)
		}
	}
	for _, nd := range nodes {
		a := metricValue(t, nd.http, nsBytesSeries("tenant-a", block.TierDRAM))
		b := metricValue(t, nd.http, nsBytesSeries("tenant-b", block.TierDRAM))
		q := metricValue(t, nd.http, nsQuotaSeries("tenant-a", block.TierDRAM))
		t.Logf("%s: tenant-a %v bytes (quota %v), tenant-b %v bytes", nd.id, a, q, b)
		if q != quota || a > quota || a == 0 {
			t.Fatalf("%s: tenant-a holds %v bytes of DRAM under a quota of %v (want %d)", nd.id, a, q, quota)
		}
		if b != 8*bs {
			t.Fatalf("%s: tenant-b holds %v bytes of DRAM, want all %d", nd.id, b, 8*bs)
		}
	}
	for i := range 8 {
		got, err := ha.Get(ctx, block.NewKey("tenant-b", uint64(i)))
		if err != nil || !bytes.Equal(got, blockBytes(500+i, bs)) {
			t.Fatalf("tenant-b block %d: %v", i, err)
		}
	}
	// The newest tenant-a blocks (within the quota) are still readable.
	for i := nA - 4; i < nA; i++ {
		got, err := ha.Get(ctx, block.NewKey("tenant-a", uint64(i)))
		if err != nil || !bytes.Equal(got, blockBytes(i, bs)) {
			t.Fatalf("tenant-a block %d: %v", i, err)
		}
	}
	// Lowered (through the leader), the quota takes effect on every node
	// without a put; tenant-b keeps its DRAM everywhere.
	const lowered = 2 * bs
	if _, err := httpClient(t, nodes[0].http).SetQuota(ctx, "tenant-a", block.Quota{DRAM: lowered}); err != nil {
		t.Fatal(err)
	}
	for _, nd := range nodes {
		waitFor(t, 60*time.Second, "tenant-a under its lowered quota on "+nd.id, func() bool {
			return metricValue(t, nd.http, nsBytesSeries("tenant-a", block.TierDRAM)) <= lowered
		})
		if b := metricValue(t, nd.http, nsBytesSeries("tenant-b", block.TierDRAM)); b != 8*bs {
			t.Fatalf("%s: after lowering tenant-a's quota tenant-b holds %v bytes of DRAM, want %d", nd.id, b, 8*bs)
		}
	}
}

// TestQuotaS3Tenant (issue 18, quotas): on one ctxd over DRAM, NVMe and S3
// (a real versitygw; S3 needs NVMe below DRAM), both tenants have small
// DRAM and NVMe quotas, so their blocks go on to S3. tenant-a, with a 4 MiB
// S3 quota, floods 24 MiB: its S3 bytes never pass the quota (its own least
// recently used blocks are forgotten, and the node's index learns they are
// gone), while every one of tenant-b's blocks, most of them in S3 only,
// reads back bit-exact.
func TestQuotaS3Tenant(t *testing.T) {
	gw := s3test.Start(t)
	dataDir := t.TempDir()
	p := startCtxd(t, "--data-dir", dataDir, "--node-id", "quota-s3",
		"--dram-capacity", "8MiB", "--max-block-size", "2MiB",
		"--nvme-dir", filepath.Join(dataDir, "nvme"), "--nvme-capacity", "64MiB", "--nvme-segment-size", "4MiB",
		"--s3-endpoint", gw.Addr, "--s3-bucket", "ctxd-quota", "--s3-prefix", "q",
		"--s3-access-key", s3test.Access, "--s3-secret-key", s3test.Secret)
	ctx := withTimeout(t, 4*time.Minute)
	hc := httpClient(t, p.HTTP)
	const bs = 256 << 10
	const s3Quota = 4 << 20
	small := block.Quota{DRAM: 2 * bs, NVMe: 2 * bs}
	if _, err := hc.CreateNamespace(ctx, block.Namespace{Name: "tenant-a", Quota: block.Quota{DRAM: small.DRAM, NVMe: small.NVMe, S3: s3Quota}}); err != nil {
		t.Fatal(err)
	}
	if _, err := hc.CreateNamespace(ctx, block.Namespace{Name: "tenant-b", Quota: small}); err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(ctx, p.Native, client.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const nB, nA = 24, 96
	for i := range nB {
		if err := c.Put(ctx, block.NewKey("tenant-b", uint64(i)), blockBytes(1000+i, bs)); err != nil {
			t.Fatal(err)
		}
	}
	s3a := nsBytesSeries("tenant-a", block.TierS3)
	for i := range nA {
		if err := c.Put(ctx, block.NewKey("tenant-a", uint64(i)), blockBytes(i, bs)); err != nil {
			t.Fatalf("tenant-a put %d: %v", i, err)
		}
		if got := metricValue(t, p.HTTP, s3a); got > s3Quota {
			t.Fatalf("after put %d tenant-a holds %v bytes in S3, quota %d", i, got, s3Quota)
		}
	}
	inS3 := metricValue(t, p.HTTP, s3a)
	bInS3 := metricValue(t, p.HTTP, nsBytesSeries("tenant-b", block.TierS3))
	if got := metricValue(t, p.HTTP, nsQuotaSeries("tenant-a", block.TierS3)); got != s3Quota {
		t.Fatalf("S3 quota metric %v, want %d", got, s3Quota)
	}
	// tenant-a reached its S3 quota (the flood is 6 times it), and
	// tenant-b's blocks went to S3 too: all but the 4 its DRAM and NVMe keep.
	if inS3 < s3Quota-2*bs || bInS3 < (nB-4)*bs {
		t.Fatalf("tenant-a has %v bytes in S3, tenant-b %v: the flood did not reach S3", inS3, bInS3)
	}
	t.Logf("after the flood: tenant-a %v bytes in S3 (quota %d), tenant-b %v", inS3, s3Quota, bInS3)
	for i := range nB {
		got, err := c.Get(ctx, block.NewKey("tenant-b", uint64(i)))
		if err != nil || !bytes.Equal(got, blockBytes(1000+i, bs)) {
			t.Fatalf("tenant-b block %d: %v", i, err)
		}
	}
	// tenant-a's newest blocks are kept (DRAM, NVMe, S3); its oldest were
	// forgotten by S3 and are gone from the node: NotFound, never wrong bytes.
	for i := nA - 8; i < nA; i++ {
		got, err := c.Get(ctx, block.NewKey("tenant-a", uint64(i)))
		if err != nil || !bytes.Equal(got, blockBytes(i, bs)) {
			t.Fatalf("tenant-a block %d: %v", i, err)
		}
	}
	gone := 0
	for i := range 8 {
		got, err := c.Get(ctx, block.NewKey("tenant-a", uint64(i)))
		switch {
		case errors.Is(err, block.ErrNotFound):
			gone++
		case err != nil:
			t.Fatalf("tenant-a block %d: %v", i, err)
		case !bytes.Equal(got, blockBytes(i, bs)):
			t.Fatalf("tenant-a block %d: wrong bytes", i)
		}
	}
	if gone != 8 {
		t.Fatalf("%d of tenant-a's 8 oldest blocks are gone; the S3 quota should have forgotten all of them", gone)
	}
}

// TestQuotaLoweredTakesEffect (issue 18, quotas): lowering tenant-a's DRAM
// quota through the HTTP API brings its DRAM bytes under the new quota
// without any put (demoted to NVMe, all readable bit-exact); tenant-b,
// without a quota, keeps every byte of its DRAM.
func TestQuotaLoweredTakesEffect(t *testing.T) {
	dataDir := t.TempDir()
	p := startCtxd(t, append([]string{"--data-dir", dataDir}, nvmeArgs(filepath.Join(dataDir, "nvme"))...)...)
	ctx := withTimeout(t, 3*time.Minute)
	hc := httpClient(t, p.HTTP)
	for _, ns := range []string{"tenant-a", "tenant-b"} {
		if _, err := hc.CreateNamespace(ctx, block.Namespace{Name: ns}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.Dial(ctx, p.Native, client.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const bs = 128 << 10
	const nA, nB = 24, 8 // 3 MiB and 1 MiB: both fit in 8 MiB of DRAM
	for i := range nA {
		if err := c.Put(ctx, block.NewKey("tenant-a", uint64(i)), blockBytes(i, bs)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range nB {
		if err := c.Put(ctx, block.NewKey("tenant-b", uint64(i)), blockBytes(500+i, bs)); err != nil {
			t.Fatal(err)
		}
	}
	dramA, dramB := nsBytesSeries("tenant-a", block.TierDRAM), nsBytesSeries("tenant-b", block.TierDRAM)
	if a, b := metricValue(t, p.HTTP, dramA), metricValue(t, p.HTTP, dramB); a != nA*bs || b != nB*bs {
		t.Fatalf("before: tenant-a %v bytes of DRAM, tenant-b %v; want %d and %d", a, b, nA*bs, nB*bs)
	}
	const quota = 512 << 10
	if _, err := hc.SetQuota(ctx, "tenant-a", block.Quota{DRAM: quota}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitFor(t, 60*time.Second, "tenant-a's DRAM bytes under the lowered quota", func() bool {
		return metricValue(t, p.HTTP, dramA) <= quota
	})
	t.Logf("tenant-a came down to its lowered DRAM quota in %v, without a put", time.Since(start).Round(10*time.Millisecond))
	if got := metricValue(t, p.HTTP, nsBytesSeries("tenant-a", block.TierNVMe)); got < (nA*bs - quota) {
		t.Fatalf("tenant-a has %v bytes on NVMe; the trimmed blocks must be demoted there", got)
	}
	if got := metricValue(t, p.HTTP, dramB); got != nB*bs {
		t.Fatalf("tenant-b holds %v bytes of DRAM, want all %d", got, nB*bs)
	}
	if got := metricValue(t, p.HTTP, `ctxtier_tiers_quota_trimmed_bytes_total`); got < nA*bs-quota {
		t.Fatalf("quota_trimmed_bytes_total %v, want at least %d", got, nA*bs-quota)
	}
	for i := range nA {
		got, err := c.Get(ctx, block.NewKey("tenant-a", uint64(i)))
		if err != nil || !bytes.Equal(got, blockBytes(i, bs)) {
			t.Fatalf("tenant-a block %d: %v", i, err)
		}
	}
}
