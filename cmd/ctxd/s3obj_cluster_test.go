package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/ctxtier/ctxtier/ctxstore/credential"
)

// TestClusterS3Objects: a 3-node cluster of real ctxd processes; a 40 MiB
// object (minio-go multipart) uploaded through one node's S3 endpoint into
// a bucket made through S3 (an object namespace: its data blocks are placed
// over the members like any block), then read back whole and by ranges
// through the other two nodes, replaced through a second node, and deleted.
func TestClusterS3Objects(t *testing.T) {
	ctx := withTimeout(t, 3*time.Minute)
	// One access key for every node: the key files are per node, so the
	// first node's are copied to the others.
	seed := t.TempDir()
	keys, err := credential.OpenFile(credential.DefaultConfig(seed))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := keys.Create(ctx, []string{credential.ScopeAll}, "admin")
	if err != nil {
		t.Fatal(err)
	}
	nodes := make([]*testNode, 3)
	var joins []string
	for i := range nodes {
		nodes[i] = &testNode{id: fmt.Sprintf("n%d", i+1), http: freeAddr(t), raft: freeAddr(t), dataDir: t.TempDir()}
		for _, f := range []string{credential.FileName, credential.NodeKeyFile} {
			b, err := os.ReadFile(filepath.Join(seed, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(nodes[i].dataDir, f), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		joins = append(joins, nodes[i].http)
	}
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
	// Replace through node 2; every node reads the new bytes.
	v2 := bytes.Repeat([]byte("v2"), 6<<20)
	if _, err := c2.PutObject(ctx, "cluster-objects", "model/layer 7.kv", bytes.NewReader(v2), int64(len(v2)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	// Replacing is delete-then-put (docs/s3.md, "Object namespaces"): a
	// node that has applied the delete but not yet the put answers
	// NoSuchKey for that moment, so a miss here is retried; old bytes or a
	// mix of versions would still fail the comparison.
	for i, mc := range []*minio.Client{c1, c2, c3} {
		waitFor(t, 10*time.Second, fmt.Sprintf("node %d to serve the replacement", i+1), func() bool {
			o, err := mc.GetObject(ctx, "cluster-objects", "model/layer 7.kv", minio.GetObjectOptions{})
			if err != nil {
				return false
			}
			defer o.Close()
			b, err := io.ReadAll(o)
			if err != nil {
				if minio.ToErrorResponse(err).Code == "NoSuchKey" {
					return false
				}
				t.Fatalf("node %d: %v", i+1, err)
			}
			return bytes.Equal(b, v2)
		})
	}
	if err := c3.RemoveObject(ctx, "cluster-objects", "model/layer 7.kv", minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	// Every data block of both versions is gone: the bucket can be removed.
	waitFor(t, 10*time.Second, "the emptied bucket to be removable", func() bool {
		return c1.RemoveBucket(ctx, "cluster-objects") == nil
	})
}
