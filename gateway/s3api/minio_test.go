package s3api

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/lifecycle"
	"github.com/minio/minio-go/v7/pkg/tags"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
)

func minioClient(t *testing.T, e *env, c credential.Credential) *minio.Client {
	t.Helper()
	mc, err := minio.New(e.addr, &minio.Options{
		Creds: credentials.NewStaticV4(c.AccessKeyID, c.Secret, ""), Secure: false,
		Region: "us-east-1", BucketLookup: minio.BucketLookupPath, MaxRetries: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	return mc
}

func minioCode(err error) (string, int) {
	r := minio.ToErrorResponse(err)
	return r.Code, r.StatusCode
}

func TestMinioClient(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	mc := minioClient(t, e, e.admin)

	// Buckets. MakeBucket makes an object namespace; this test drives a
	// block namespace ("models", hex keys), made as engines' operators do.
	if err := mc.MakeBucket(ctx, "objects", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	models := block.DefaultNamespaceConfig()
	models.Name = "models"
	if err := e.store.CreateNamespace(ctx, models); err != nil {
		t.Fatal(err)
	}
	if err := mc.MakeBucket(ctx, "models", minio.MakeBucketOptions{}); err == nil {
		t.Fatal("second MakeBucket succeeded")
	} else if code, st := minioCode(err); code != "BucketAlreadyOwnedByYou" || st != 409 {
		t.Fatalf("second MakeBucket: %s %d", code, st)
	}
	if err := mc.MakeBucket(ctx, "Bad_Name", minio.MakeBucketOptions{}); err == nil {
		t.Fatal("bad bucket name accepted")
	}
	if ok, err := mc.BucketExists(ctx, "models"); !ok || err != nil {
		t.Fatalf("BucketExists: %v %v", ok, err)
	}
	if ok, err := mc.BucketExists(ctx, "nope"); ok || err != nil {
		t.Fatalf("BucketExists(nope): %v %v", ok, err)
	}
	bs, err := mc.ListBuckets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range bs {
		names = append(names, b.Name)
	}
	if strings.Join(names, ",") != "default,models,objects,team-a,team-b" {
		t.Fatalf("ListBuckets: %v", names)
	}

	// Put (minio-go uses STREAMING-AWS4-HMAC-SHA256-PAYLOAD over plain HTTP), idempotent re-put, conflict.
	data := payload(300_000, 1)
	put := func(name string, b []byte) error {
		_, err := mc.PutObject(ctx, "models", name, bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{})
		return err
	}
	if err := put(objName(0xabc), data); err != nil {
		t.Fatal(err)
	}
	if err := put(objName(0xabc), data); err != nil {
		t.Fatalf("idempotent re-put: %v", err)
	}
	if code, st := minioCode(put(objName(0xabc), payload(300_000, 2))); code != "BlockConflict" || st != 409 {
		t.Fatalf("conflicting put: %s %d", code, st)
	}
	if code, st := minioCode(put("not-a-block", data)); code != "InvalidArgument" || st != 400 {
		t.Fatalf("invalid key: %s %d", code, st)
	}
	if code, st := minioCode(put(objName(1), payload(9<<20, 3))); code != "EntityTooLarge" || st != 400 {
		t.Fatalf("oversized put: %s %d", code, st)
	}

	// Stat: size and the ctxtier metadata.
	oi, err := mc.StatObject(ctx, "models", objName(0xabc), minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if oi.Size != int64(len(data)) || oi.Metadata.Get(hdrTier) != "dram" || oi.Metadata.Get(hdrChecksum) == "" || oi.Metadata.Get(hdrLastAccess) == "" {
		t.Fatalf("StatObject: size %d meta %v", oi.Size, oi.Metadata)
	}
	if _, err := mc.StatObject(ctx, "models", objName(0xdead), minio.StatObjectOptions{}); err == nil {
		t.Fatal("stat of absent object succeeded")
	} else if _, st := minioCode(err); st != 404 {
		t.Fatalf("stat absent: %v", err)
	}

	// Get, whole and ranged.
	get := func(opts minio.GetObjectOptions) ([]byte, error) {
		o, err := mc.GetObject(ctx, "models", objName(0xabc), opts)
		if err != nil {
			return nil, err
		}
		defer o.Close()
		return io.ReadAll(o)
	}
	got, err := get(minio.GetObjectOptions{})
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("get: %d bytes, %v", len(got), err)
	}
	var ro minio.GetObjectOptions
	if err := ro.SetRange(1000, 1999); err != nil {
		t.Fatal(err)
	}
	if got, err = get(ro); err != nil || !bytes.Equal(got, data[1000:2000]) {
		t.Fatalf("ranged get: %d bytes, %v", len(got), err)
	}
	ro = minio.GetObjectOptions{}
	_ = ro.SetRange(0, -100) // the last 100 bytes
	if got, err = get(ro); err != nil || !bytes.Equal(got, data[len(data)-100:]) {
		t.Fatalf("suffix get: %d bytes, %v", len(got), err)
	}

	// Listing with pagination: minio-go follows continuation tokens itself.
	for i := uint64(0); i < 7; i++ {
		if err := put(objName(0x100+i)+".0", payload(100, byte(i))); err != nil {
			t.Fatal(err)
		}
	}
	var keys []string
	for o := range mc.ListObjects(ctx, "models", minio.ListObjectsOptions{MaxKeys: 3, Prefix: "00000000000001"}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		keys = append(keys, o.Key)
	}
	if len(keys) != 7 || keys[0] != objName(0x100)+".0" || keys[6] != objName(0x106)+".0" {
		t.Fatalf("ListObjects: %v", keys)
	}
	keys = keys[:0]
	for o := range mc.ListObjects(ctx, "models", minio.ListObjectsOptions{StartAfter: objName(0x104) + ".0"}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		keys = append(keys, o.Key)
	}
	if strings.Join(keys, ",") != objName(0x105)+".0,"+objName(0x106)+".0,"+objName(0xabc) {
		t.Fatalf("ListObjects start-after: %v", keys)
	}

	// Presigned GET and PUT, fetched with a plain HTTP client.
	u, err := mc.PresignedGetObject(ctx, "models", objName(0xabc), time.Minute, url.Values{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(body, data) {
		t.Fatalf("presigned get: %d, %d bytes", resp.StatusCode, len(body))
	}
	pu, err := mc.PresignedPutObject(ctx, "models", objName(0xfeed), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("PUT", pu.String(), bytes.NewReader(data[:5000]))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("presigned put: %d", resp.StatusCode)
	}
	// A tampered presigned URL is refused.
	bad := strings.Replace(u.String(), objName(0xabc), objName(0xabd), 1)
	resp, err = http.Get(bad)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !bytes.Contains(body, []byte("<Code>SignatureDoesNotMatch</Code>")) {
		t.Fatalf("tampered presigned get: %d %s", resp.StatusCode, body)
	}
	// An expired presigned URL is refused.
	e.srv.Verifier().SetClock(func() time.Time { return time.Now().Add(2 * time.Minute) })
	resp, err = http.Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	e.srv.Verifier().SetClock(time.Now)
	if resp.StatusCode != 403 || !bytes.Contains(body, []byte("<Code>AccessDenied</Code>")) || !bytes.Contains(body, []byte("expired")) {
		t.Fatalf("expired presigned get: %d %s", resp.StatusCode, body)
	}

	// Lifecycle sets the TTL; tagging sets the knobs.
	lc := lifecycle.NewConfiguration()
	lc.Rules = []lifecycle.Rule{{ID: "ttl", Status: "Enabled", Expiration: lifecycle.Expiration{Days: 2}}}
	if err := mc.SetBucketLifecycle(ctx, "models", lc); err != nil {
		t.Fatal(err)
	}
	if ns, _ := e.store.Namespace("models"); ns.TTLSeconds != 2*86400 {
		t.Fatalf("TTL after lifecycle: %d", ns.TTLSeconds)
	}
	glc, err := mc.GetBucketLifecycle(ctx, "models")
	if err != nil || len(glc.Rules) != 1 || glc.Rules[0].Expiration.Days != 2 {
		t.Fatalf("GetBucketLifecycle: %+v %v", glc, err)
	}
	tg, _ := tags.NewTags(map[string]string{"priority": "5", "write_mode": "write-through", "max_block_size": "4MiB"}, false)
	if err := mc.SetBucketTagging(ctx, "models", tg); err != nil {
		t.Fatal(err)
	}
	ns, _ := e.store.Namespace("models")
	if ns.Priority != 5 || ns.WriteMode != "write-through" || ns.MaxBlockSize != 4<<20 {
		t.Fatalf("namespace after tagging: %+v", ns)
	}
	gt, err := mc.GetBucketTagging(ctx, "models")
	if err != nil || gt.ToMap()["priority"] != "5" || gt.ToMap()["hash_scheme"] != "dynamo-xxh3" {
		t.Fatalf("GetBucketTagging: %v %v", gt, err)
	}
	badTags, _ := tags.NewTags(map[string]string{"colour": "blue"}, false)
	if code, _ := minioCode(mc.SetBucketTagging(ctx, "models", badTags)); code != "InvalidTag" {
		t.Fatalf("unknown tag: %s", code)
	}

	// Delete: bucket refused while not empty; objects, singly and in bulk.
	if code, st := minioCode(mc.RemoveBucket(ctx, "models")); code != "BucketNotEmpty" || st != 409 {
		t.Fatalf("RemoveBucket non-empty: %s %d", code, st)
	}
	if err := mc.RemoveObject(ctx, "models", objName(0xabc), minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	objs := make(chan minio.ObjectInfo)
	go func() {
		defer close(objs)
		for o := range mc.ListObjects(ctx, "models", minio.ListObjectsOptions{}) {
			objs <- o
		}
	}()
	for re := range mc.RemoveObjects(ctx, "models", objs, minio.RemoveObjectsOptions{}) {
		t.Fatalf("RemoveObjects: %v", re.Err)
	}
	if err := mc.RemoveBucket(ctx, "models"); err != nil {
		t.Fatal(err)
	}
}

func TestMinioIsolationAndBadCredentials(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	admin := minioClient(t, e, e.admin)
	if _, err := admin.PutObject(ctx, "team-b", objName(7), bytes.NewReader([]byte("b's block")), 9, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	a := minioClient(t, e, e.teamA)
	bs, err := a.ListBuckets(ctx)
	if err != nil || len(bs) != 1 || bs[0].Name != "team-a" {
		t.Fatalf("scoped ListBuckets: %v %v", bs, err)
	}
	// team-b exists, zzz does not: a team-a key gets the same 403 for both.
	for _, bucket := range []string{"team-b", "zzz"} {
		if _, err := a.StatObject(ctx, bucket, objName(7), minio.StatObjectOptions{}); err == nil {
			t.Fatalf("%s: stat allowed", bucket)
		} else if _, st := minioCode(err); st != 403 {
			t.Fatalf("%s: stat status %d", bucket, st)
		}
		for o := range a.ListObjects(ctx, bucket, minio.ListObjectsOptions{}) {
			if code, st := minioCode(o.Err); code != "AccessDenied" || st != 403 {
				t.Fatalf("%s: list: %v", bucket, o.Err)
			}
		}
		if _, err := a.GetObject(ctx, bucket, objName(7), minio.GetObjectOptions{}); err != nil {
			t.Fatal(err) // minio-go defers the request to the first read
		}
		o, _ := a.GetObject(ctx, bucket, objName(7), minio.GetObjectOptions{})
		if _, err := io.ReadAll(o); err == nil {
			t.Fatalf("%s: get allowed", bucket)
		} else if code, st := minioCode(err); code != "AccessDenied" || st != 403 {
			t.Fatalf("%s: get: %s %d", bucket, code, st)
		}
		if code, _ := minioCode(a.MakeBucket(ctx, bucket, minio.MakeBucketOptions{})); code != "AccessDenied" {
			t.Fatalf("%s: make bucket: %s", bucket, code)
		}
	}
	if _, err := a.PutObject(ctx, "team-a", objName(8), bytes.NewReader([]byte("a's block")), 9, minio.PutObjectOptions{}); err != nil {
		t.Fatalf("own namespace put: %v", err)
	}

	wrong := e.teamA
	wrong.Secret = "not-the-secret-not-the-secret-not-the-se"
	if code, st := minioCode(func() error { _, err := minioClient(t, e, wrong).ListBuckets(ctx); return err }()); code != "SignatureDoesNotMatch" || st != 403 {
		t.Fatalf("wrong secret: %s %d", code, st)
	}
	unknown := credential.Credential{AccessKeyID: "CTXUNKNOWN0000000000", Secret: "x"}
	if code, st := minioCode(func() error { _, err := minioClient(t, e, unknown).ListBuckets(ctx); return err }()); code != "InvalidAccessKeyId" || st != 403 {
		t.Fatalf("unknown key: %s %d", code, st)
	}
	// A streaming upload with the wrong secret fails at the header signature.
	if _, err := minioClient(t, e, wrong).PutObject(ctx, "team-a", objName(9), bytes.NewReader([]byte("x")), 1, minio.PutObjectOptions{}); err == nil {
		t.Fatal("put with wrong secret succeeded")
	}
	if ok, _ := e.store.Exists(ctx, blockKey("team-a", 9), ctxstore.ReadOptions{}); ok {
		t.Fatal("rejected put stored a block")
	}
}
