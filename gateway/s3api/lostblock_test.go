package s3api

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/ctxtier/ctxtier/ctxstore"
)

// TestGetObjectLostBlock: an object whose data block is gone from the
// store (evicted from the last tier, say) while its manifest remains
// answers a GET with 503 ServiceUnavailable and an error body, not a 200
// that ends before its Content-Length; HEAD still answers (the manifest is
// there), and DELETE removes what is left.
func TestGetObjectLostBlock(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	mc := minioClient(t, e, e.admin)
	if err := mc.MakeBucket(ctx, "lost", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	data := payload(3<<20, 5)
	if _, err := mc.PutObject(ctx, "lost", "obj", bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	get := func() (int, []byte) {
		t.Helper()
		u, err := mc.PresignedGetObject(ctx, "lost", "obj", time.Minute, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get(u.String())
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("GET: status %d, body cut short: %v", resp.StatusCode, err)
		}
		return resp.StatusCode, body
	}
	if st, body := get(); st != http.StatusOK || !bytes.Equal(body, data) {
		t.Fatalf("GET before the loss: %d, %d bytes", st, len(body))
	}
	infos, err := e.store.List(ctx, "lost", "", "", 100, ctxstore.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lost := false
	for _, in := range infos {
		if in.Key.HasPart { // a data block (the manifest's slot has no part)
			if err := e.store.Delete(ctx, in.Key); err != nil {
				t.Fatal(err)
			}
			lost = true
			break
		}
	}
	if !lost {
		t.Fatalf("no data block among %d blocks", len(infos))
	}
	st, body := get()
	if st != http.StatusServiceUnavailable || !strings.Contains(string(body), "<Code>ServiceUnavailable</Code>") {
		t.Fatalf("GET after the loss: %d %s", st, body)
	}
	if _, err := mc.StatObject(ctx, "lost", "obj", minio.StatObjectOptions{}); err != nil {
		t.Fatalf("HEAD after the loss: %v", err)
	}
	if err := mc.RemoveObject(ctx, "lost", "obj", minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if st, _ := get(); st != http.StatusNotFound {
		t.Fatalf("GET after DELETE: %d", st)
	}
}
