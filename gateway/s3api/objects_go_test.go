package s3api

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"

	"github.com/ctxtier/ctxtier/ctxstore"
)

// TestMinioObjects drives an object namespace with minio-go: arbitrary
// keys, a 40 MiB PutObject (minio-go's own multipart, 16 MiB parts),
// ranged reads, listings with a delimiter, ComposeObject (UploadPartCopy)
// and removal.
func TestMinioObjects(t *testing.T) {
	e := newEnvSized(t, 256<<20, nil, nil)
	ctx := context.Background()
	mc := minioClient(t, e, e.admin)
	if err := mc.MakeBucket(ctx, "mobj", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	big := payload(40<<20, 7)
	info, err := mc.PutObject(ctx, "mobj", "weights/layer 0/kv.bin", bytes.NewReader(big), int64(len(big)),
		minio.PutObjectOptions{ContentType: "application/x-kv", UserMetadata: map[string]string{"rank": "3"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(info.ETag, "-3") {
		t.Fatalf("40 MiB put: ETag %q, want a 3-part multipart ETag", info.ETag)
	}
	st, err := mc.StatObject(ctx, "mobj", "weights/layer 0/kv.bin", minio.StatObjectOptions{})
	if err != nil || st.Size != int64(len(big)) || st.ContentType != "application/x-kv" || st.UserMetadata["Rank"] != "3" {
		t.Fatalf("stat: %+v %v", st, err)
	}
	for _, r := range [][2]int64{{0, 99}, {16<<20 - 5, 16<<20 + 5}, {int64(len(big)) - 10, int64(len(big)) - 1}} {
		opts := minio.GetObjectOptions{}
		if err := opts.SetRange(r[0], r[1]); err != nil {
			t.Fatal(err)
		}
		o, err := mc.GetObject(ctx, "mobj", "weights/layer 0/kv.bin", opts)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(o)
		o.Close()
		if err != nil || !bytes.Equal(got, big[r[0]:r[1]+1]) {
			t.Fatalf("range %v: %d bytes, %v", r, len(got), err)
		}
	}
	for _, k := range []string{"weights/layer 1/kv.bin", "a", "weights/x"} {
		if _, err := mc.PutObject(ctx, "mobj", k, strings.NewReader(k), int64(len(k)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for o := range mc.ListObjects(ctx, "mobj", minio.ListObjectsOptions{Prefix: "weights/"}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		got = append(got, o.Key)
	}
	slices.Sort(got) // minio-go yields a page's objects before its prefixes
	if fmt.Sprint(got) != "[weights/layer 0/ weights/layer 1/ weights/x]" {
		t.Fatalf("delimited listing: %v", got)
	}
	// ComposeObject: server-side UploadPartCopy of the big object's first
	// 5 MiB and the whole of "a".
	src1 := minio.CopySrcOptions{Bucket: "mobj", Object: "weights/layer 0/kv.bin", MatchRange: true, Start: 0, End: 5<<20 - 1}
	src2 := minio.CopySrcOptions{Bucket: "mobj", Object: "a"}
	if _, err := mc.ComposeObject(ctx, minio.CopyDestOptions{Bucket: "mobj", Object: "composed"}, src1, src2); err != nil {
		t.Fatal(err)
	}
	o, err := mc.GetObject(ctx, "mobj", "composed", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(o)
	o.Close()
	if !bytes.Equal(b, append(bytes.Clone(big[:5<<20]), 'a')) {
		t.Fatalf("composed object: %d bytes", len(b))
	}
	for o := range mc.ListObjects(ctx, "mobj", minio.ListObjectsOptions{Recursive: true}) {
		if err := mc.RemoveObject(ctx, "mobj", o.Key, minio.RemoveObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Removing every object left no manifest behind, only the records of
	// the completed uploads (remembered for object.Config.CompletedTTL, so a
	// repeated completion answers the same) and the retire records of the
	// replaced and removed versions with their data blocks (kept for
	// Config.RetireGrace, so a GET streaming them is served whole). The
	// sweep a bucket deletion runs removes them all.
	ups, _ := e.srv.objs.ListUploads(ctx, "mobj", "", ctxstore.ReadLocal)
	infos, err := e.store.List(ctx, "mobj", "", "", 100000, ctxstore.ReadOptions{})
	if err != nil || len(ups) != 0 {
		t.Fatalf("uploads %v left, %v", ups, err)
	}
	retires := 0
	for _, in := range infos {
		if in.Key.HasPart {
			continue // a data block: gone after the sweep below
		}
		ref, err := e.store.Get(ctx, in.Key)
		if err != nil {
			t.Fatal(err)
		}
		rec := string(ref.Data)
		ref.Release()
		switch {
		case strings.Contains(rec, "\x00retire\x00"):
			retires++
		case !strings.Contains(rec, "\x00done\x00"):
			t.Fatalf("block %v left in the bucket: %q", in.Key, rec)
		}
	}
	if retires == 0 {
		t.Fatal("no retire record pending after the objects were removed")
	}
	if _, err := e.srv.objs.SweepUploads(ctx, "mobj", 0); err != nil {
		t.Fatal(err)
	}
	if infos, err := e.store.List(ctx, "mobj", "", "", 10, ctxstore.ReadOptions{}); err != nil || len(infos) != 0 {
		t.Fatalf("blocks left in the bucket after the sweep: %v %v", infos, err)
	}
	if err := mc.RemoveBucket(ctx, "mobj"); err != nil {
		t.Fatalf("remove the emptied bucket: %v", err)
	}
}

// TestAWSSDKObjects drives an object namespace with aws-sdk-go-v2:
// multipart through the API calls (with S3's error codes for bad
// completions), racing conditional puts, CopyObject.
func TestAWSSDKObjects(t *testing.T) {
	e := newEnvSized(t, 128<<20, nil, nil)
	ctx := context.Background()
	c := awsClient(e, e.admin)
	b := aws.String("sdk-objects")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	key := aws.String("engine/worker-0/0123abcd")
	up, err := c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: b, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	parts := [][]byte{payload(5<<20, 1), payload(5<<20, 2), payload(123, 3)}
	var done []types.CompletedPart
	sums := md5.New()
	var all []byte
	for i, p := range parts {
		out, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: b, Key: key, UploadId: up.UploadId, PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(p)})
		if err != nil {
			t.Fatal(err)
		}
		done = append(done, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: out.ETag})
		s := md5.Sum(p)
		sums.Write(s[:])
		all = append(all, p...)
	}
	bad := []struct {
		name  string
		parts []types.CompletedPart
		code  string
	}{
		{"reversed", []types.CompletedPart{done[1], done[0]}, "InvalidPartOrder"},
		{"missing", []types.CompletedPart{done[0], {PartNumber: aws.Int32(7), ETag: done[1].ETag}}, "InvalidPart"},
		{"small first", []types.CompletedPart{done[2]}, ""},
	}
	for _, tt := range bad[:2] {
		_, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: key, UploadId: up.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: tt.parts}})
		if code, st := awsCode(err); code != tt.code || st != 400 {
			t.Fatalf("%s: %v", tt.name, err)
		}
	}
	out, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: key, UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: done}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `"` + hex.EncodeToString(sums.Sum(nil)) + `-3"`; aws.ToString(out.ETag) != want {
		t.Fatalf("ETag %s, want %s", aws.ToString(out.ETag), want)
	}
	// Completing it again (a retry after a lost response) answers the same.
	again, err := c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: b, Key: key, UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: done}})
	if err != nil {
		t.Fatalf("completing again: %v", err)
	}
	if aws.ToString(again.ETag) != aws.ToString(out.ETag) || aws.ToString(again.Location) != aws.ToString(out.Location) ||
		!strings.HasPrefix(aws.ToString(out.Location), "http://127.0.0.1:") || !strings.HasSuffix(aws.ToString(out.Location), "/"+*b+"/"+*key) {
		t.Fatalf("completed again: ETag %s Location %s; first: ETag %s Location %s", aws.ToString(again.ETag), aws.ToString(again.Location), aws.ToString(out.ETag), aws.ToString(out.Location))
	}
	g, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: b, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(g.Body)
	g.Body.Close()
	if !bytes.Equal(got, all) {
		t.Fatalf("assembled object: %d bytes, want %d", len(got), len(all))
	}
	// GET by part number: part 2's bytes, with the parts count.
	pg, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: b, Key: key, PartNumber: aws.Int32(2)})
	if err != nil {
		t.Fatal(err)
	}
	got, _ = io.ReadAll(pg.Body)
	pg.Body.Close()
	if !bytes.Equal(got, parts[1]) || aws.ToInt32(pg.PartsCount) != 3 {
		t.Fatalf("part 2: %d bytes, parts count %d", len(got), aws.ToInt32(pg.PartsCount))
	}
	if _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: b, Key: key, PartNumber: aws.Int32(4)}); err == nil {
		t.Fatal("part 4 of a 3-part object was served")
	} else if code, st := awsCode(err); code != "InvalidPartNumber" || st != 416 {
		t.Fatalf("part 4: %v", err)
	}
	// Racing If-None-Match: * puts of one lock object: one 200, the rest 412.
	var wg sync.WaitGroup
	codes := make([]int, 6)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("x.lock"), Body: bytes.NewReader(payload(100, byte(i))), IfNoneMatch: aws.String("*")})
			_, codes[i] = awsCode(err)
		}()
	}
	wg.Wait()
	won := 0
	for _, st := range codes {
		switch st {
		case 200:
			won++
		case 412:
		default:
			t.Fatalf("racing conditional puts: %v", codes)
		}
	}
	if won != 1 {
		t.Fatalf("%d winners among %v", won, codes)
	}
	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: b, Key: aws.String("copy of lock"), CopySource: aws.String("sdk-objects/x.lock")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: b, Key: aws.String("x.lock"), CopySource: aws.String("sdk-objects/x.lock")}); err == nil {
		t.Fatal("copying an object onto itself unchanged succeeded")
	}
	l, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: b})
	if err != nil || len(l.Contents) != 3 || aws.ToString(l.Contents[0].Key) != "copy of lock" {
		t.Fatalf("listing: %v %v", l, err)
	}
}

// TestObjectBadInputLeavesNothing: uploads that fail their digests or
// limits after bytes were streamed into data blocks leave no block behind.
func TestObjectBadInputLeavesNothing(t *testing.T) {
	// (A body over MaxPutSize is refused from its Content-Length before a
	// byte is read; ctxstore/object's tests cover a stream that runs over.)
	e := newEnvSized(t, 128<<20, nil, nil)
	ctx := context.Background()
	c := awsClient(e, e.admin)
	b := aws.String("bad-input")
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	body := payload(12<<20, 4) // two chunks are written before the end is reached
	wrongMD5 := md5.Sum([]byte("other"))
	tests := []struct {
		name string
		in   *s3.PutObjectInput
		code string
	}{
		{"wrong Content-MD5", &s3.PutObjectInput{Key: aws.String("a"), Body: bytes.NewReader(body),
			ContentMD5: aws.String(base64.StdEncoding.EncodeToString(wrongMD5[:]))}, "BadDigest"},
		{"wrong CRC32C", &s3.PutObjectInput{Key: aws.String("b"), Body: bytes.NewReader(body), ChecksumCRC32C: aws.String("AAAAAA==")}, "BadDigest"},
		{"NUL in key", &s3.PutObjectInput{Key: aws.String("x\x00y"), Body: bytes.NewReader(body[:10])}, "InvalidArgument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Bucket = b
			_, err := c.PutObject(ctx, tt.in)
			if code, st := awsCode(err); code != tt.code || st != 400 {
				t.Fatalf("%v, want %s", err, tt.code)
			}
			if infos, err := e.store.List(ctx, *b, "", "", 10, ctxstore.ReadOptions{}); err != nil || len(infos) != 0 {
				t.Fatalf("%d blocks left behind (%v)", len(infos), err)
			}
		})
	}
}
