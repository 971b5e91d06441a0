package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// TestClusterS3Objects: a 3-node cluster of real ctxd processes; a 40 MiB
// object (minio-go multipart) uploaded through one node's S3 endpoint into
// a bucket made through S3 (an object namespace: its data blocks are placed
// over the members like any block), then read back whole and by ranges
// through the other two nodes, replaced through a second node while readers
// loop GET and HEAD (never NoSuchKey), and deleted.
func TestClusterS3Objects(t *testing.T) {
	ctx := withTimeout(t, 3*time.Minute)
	// One access key for every node: the key files are per node, so the
	// same ones are copied into every node's data directory.
	nodes := make([]*testNode, 3)
	var joins, dirs []string
	for i := range nodes {
		nodes[i] = &testNode{id: fmt.Sprintf("n%d", i+1), http: freeAddr(t), raft: freeAddr(t), dataDir: t.TempDir()}
		joins = append(joins, nodes[i].http)
		dirs = append(dirs, nodes[i].dataDir)
	}
	admin := adminKeyFor(t, dirs...)
	join := strings.Join(joins, ",")
	for _, nd := range nodes {
		nd.extra = []string{"--dram-capacity", "256MiB"}
		nd.p = startCtxd(t, nd.args(join)...)
	}
	waitFor(t, 30*time.Second, "a leader", func() bool { _, ok := leaderOf(t, nodes); return ok })
	client := func(nd *testNode) *minio.Client {
		mc, err := minio.New(nd.p.S3, &minio.Options{Creds: credentials.NewStaticV4(admin.AccessKeyID, admin.Secret, ""),
			Region: "us-east-1", BucketLookup: minio.BucketLookupPath, MaxRetries: 1})
		if err != nil {
			t.Fatal(err)
		}
		return mc
	}
	c1, c2, c3 := client(nodes[0]), client(nodes[1]), client(nodes[2])
	waitFor(t, 30*time.Second, "a bucket created through node 1", func() bool {
		return c1.MakeBucket(ctx, "cluster-objects", minio.MakeBucketOptions{}) == nil
	})
	data := bytes.Repeat([]byte("0123456789abcdefghijklmnopqrstuvwxyz!"), 40<<20/37+1)[:40<<20]
	info, err := c1.PutObject(ctx, "cluster-objects", "model/layer 7.kv", bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(info.ETag, "-3") {
		t.Fatalf("ETag %q: want minio-go's 3-part upload", info.ETag)
	}
	read := func(mc *minio.Client, first, last int64) []byte {
		t.Helper()
		opts := minio.GetObjectOptions{}
		if last >= 0 {
			if err := opts.SetRange(first, last); err != nil {
				t.Fatal(err)
			}
		}
		o, err := mc.GetObject(ctx, "cluster-objects", "model/layer 7.kv", opts)
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		b, err := io.ReadAll(o)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for i, mc := range []*minio.Client{c2, c3} {
		if got := read(mc, 0, -1); !bytes.Equal(got, data) {
			t.Fatalf("node %d: whole object differs (%d bytes)", i+2, len(got))
		}
		if got := read(mc, 8<<20-3, 24<<20+3); !bytes.Equal(got, data[8<<20-3:24<<20+4]) {
			t.Fatalf("node %d: range across chunks differs", i+2)
		}
	}
	// Replace through node 2 while readers on node 2 loop GET and HEAD: a
	// replace is one step for readers (docs/s3.md, "Replace, and what a
	// reader sees"), so every read is the old object or the new one, never
	// NoSuchKey, and never cut short: a GET that was streaming the 40 MiB
	// old version, larger than the 32 MiB a GET leases before its first
	// byte, still gets it whole, since the old blocks are retired only
	// after s3api.Config.RetireGrace (2 minutes).
	v2 := bytes.Repeat([]byte("v2"), 6<<20)
	var stop atomic.Bool
	var olds, news, heads, newHeads atomic.Int64
	fail := make(chan string, 2)
	var rwg sync.WaitGroup
	rwg.Go(func() {
		for !stop.Load() {
			o, err := c2.GetObject(ctx, "cluster-objects", "model/layer 7.kv", minio.GetObjectOptions{})
			if err != nil {
				fail <- fmt.Sprintf("GET during the replace: %v", err)
				return
			}
			b, err := io.ReadAll(o)
			o.Close()
			switch {
			case err != nil && minio.ToErrorResponse(err).Code == "NoSuchKey":
				fail <- "GET during the replace: NoSuchKey"
				return
			case err != nil:
				fail <- fmt.Sprintf("GET during the replace cut short after %d bytes: %v", len(b), err)
				return
			case bytes.Equal(b, data):
				olds.Add(1)
			case bytes.Equal(b, v2):
				news.Add(1)
			default:
				fail <- fmt.Sprintf("GET during the replace: %d bytes of neither version", len(b))
				return
			}
		}
	})
	rwg.Go(func() {
		for !stop.Load() {
			st, err := c2.StatObject(ctx, "cluster-objects", "model/layer 7.kv", minio.StatObjectOptions{})
			if err != nil {
				fail <- fmt.Sprintf("HEAD during the replace: %v", err)
				return
			}
			switch st.Size {
			case int64(len(data)):
			case int64(len(v2)):
				newHeads.Add(1)
			default:
				fail <- fmt.Sprintf("HEAD during the replace: size %d", st.Size)
				return
			}
			heads.Add(1)
		}
	})
	time.Sleep(200 * time.Millisecond) // the readers are under way
	_, err = c2.PutObject(ctx, "cluster-objects", "model/layer 7.kv", bytes.NewReader(v2), int64(len(v2)), minio.PutObjectOptions{})
	// The readers go on until both have read the new version (or failed).
	saw := func() bool { return len(fail) > 0 || (news.Load() > 0 && newHeads.Load() > 0) }
	for end := time.Now().Add(30 * time.Second); err == nil && !saw() && time.Now().Before(end); {
		time.Sleep(50 * time.Millisecond)
	}
	stop.Store(true)
	rwg.Wait()
	close(fail)
	if err != nil {
		t.Fatal(err)
	}
	for msg := range fail {
		t.Fatal(msg)
	}
	t.Logf("during the replace: %d GETs of the old object, %d of the new; %d HEADs (%d of the new)", olds.Load(), news.Load(), heads.Load(), newHeads.Load())
	if news.Load() == 0 || newHeads.Load() == 0 {
		t.Fatal("the readers on the writing node never saw the new version")
	}
	// Every node serves the new bytes: node 2 (which took the write) at
	// once; the others once they apply it (reads are local). A node may
	// still serve the old version for that moment, or fail a read of it
	// whose blocks were retired, but never answers NoSuchKey.
	for i, mc := range []*minio.Client{c2, c1, c3} {
		waitFor(t, 10*time.Second, fmt.Sprintf("node %d to serve the replacement", []int{2, 1, 3}[i]), func() bool {
			o, err := mc.GetObject(ctx, "cluster-objects", "model/layer 7.kv", minio.GetObjectOptions{})
			if err != nil {
				t.Fatalf("node %d: %v", []int{2, 1, 3}[i], err)
			}
			defer o.Close()
			b, err := io.ReadAll(o)
			if err != nil && minio.ToErrorResponse(err).Code == "NoSuchKey" {
				t.Fatalf("node %d: NoSuchKey after the replace", []int{2, 1, 3}[i])
			}
			if i == 0 && (err != nil || !bytes.Equal(b, v2)) {
				t.Fatalf("node 2 (the writer) right after the replace: %d bytes, %v", len(b), err)
			}
			return err == nil && bytes.Equal(b, v2)
		})
	}
	if err := c3.RemoveObject(ctx, "cluster-objects", "model/layer 7.kv", minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	// The sweep the bucket deletion runs deletes the data blocks of both
	// versions (retired, not yet due) with their retire records: the
	// bucket can be removed.
	waitFor(t, 10*time.Second, "the emptied bucket to be removable", func() bool {
		return c1.RemoveBucket(ctx, "cluster-objects") == nil
	})
}
