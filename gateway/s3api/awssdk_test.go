package s3api

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
)

func awsClient(e *env, c credential.Credential) *s3.Client {
	return s3.New(s3.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String("http://" + e.addr),
		UsePathStyle:     true,
		Credentials:      credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.Secret, ""),
		RetryMaxAttempts: 1,
	})
}

// awsCode returns the S3 error code and HTTP status of an SDK error.
func awsCode(err error) (string, int) {
	if err == nil {
		return "", 200
	}
	code, status := "", 0
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	return code, status
}

func TestAWSSDK(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := awsClient(e, e.admin)
	b := aws.String("kv-cache")

	// CreateBucket makes an object namespace; this test drives a block
	// namespace (hex keys, immutable blocks), made as engines' operators do.
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("kv-objects")}); err != nil {
		t.Fatal(err)
	}
	if ns, err := e.store.Namespace("kv-objects"); err != nil || !ns.IsObject() {
		t.Fatalf("CreateBucket made %+v, %v; want an object namespace", ns, err)
	}
	kv := block.DefaultNamespaceConfig()
	kv.Name = *b
	if err := e.store.CreateNamespace(ctx, kv); err != nil {
		t.Fatal(err)
	}
	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("nope")}); err == nil {
		t.Fatal("HeadBucket of absent bucket succeeded")
	} else if _, st := awsCode(err); st != 404 {
		t.Fatalf("HeadBucket absent: %v", err)
	}
	lb, err := c.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil || len(lb.Buckets) != 5 {
		t.Fatalf("ListBuckets: %v %v", lb, err)
	}

	// Put a few blocks (the SDK signs the payload's SHA-256 and adds a CRC32 checksum).
	data := payload(2<<20, 9)
	for i := uint64(0); i < 12; i++ {
		body := data
		if i > 0 {
			body = payload(1000+int(i), byte(i))
		}
		if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String(objName(0x500 + i)), Body: bytes.NewReader(body)}); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	// Idempotent and conflicting re-puts, invalid key, wrong checksum.
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String(objName(0x500)), Body: bytes.NewReader(data)}); err != nil {
		t.Fatalf("idempotent re-put: %v", err)
	}
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String(objName(0x500)), Body: bytes.NewReader(data[1:])})
	if code, st := awsCode(err); code != "BlockConflict" || st != 409 {
		t.Fatalf("conflicting put: %v", err)
	}
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("ABCDEF0123456789"), Body: bytes.NewReader(data[:10])})
	if code, st := awsCode(err); code != "InvalidArgument" || st != 400 {
		t.Fatalf("upper-case key: %v", err)
	}
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String(strings.Repeat("a", 1100)), Body: bytes.NewReader(data[:10])})
	if code, _ := awsCode(err); code != "KeyTooLongError" {
		t.Fatalf("long key: %v", err)
	}
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String(objName(0x600)), Body: bytes.NewReader(data[:10]),
		ChecksumCRC32C: aws.String("AAAAAA==")})
	if code, st := awsCode(err); code != "BadDigest" || st != 400 {
		t.Fatalf("wrong crc32c: %v", err)
	}

	// Head: size, checksum, tier, last access.
	ho, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String(objName(0x500))})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToInt64(ho.ContentLength) != int64(len(data)) || ho.Metadata["ctx-tier"] != "dram" || ho.Metadata["ctx-checksum-crc32c"] == "" || ho.Metadata["ctx-last-access"] == "" {
		t.Fatalf("HeadObject: %d %v", aws.ToInt64(ho.ContentLength), ho.Metadata)
	}
	_, err = c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: b, Key: aws.String(objName(0x999))})
	if _, st := awsCode(err); st != 404 {
		t.Fatalf("HeadObject absent: %v", err)
	}

	// Get, whole (with checksum validation) and ranged; bad range.
	get := func(rng string) ([]byte, error) {
		in := &s3.GetObjectInput{Bucket: b, Key: aws.String(objName(0x500)), ChecksumMode: types.ChecksumModeEnabled}
		if rng != "" {
			in.Range = aws.String(rng)
		}
		out, err := c.GetObject(ctx, in)
		if err != nil {
			return nil, err
		}
		defer out.Body.Close()
		return io.ReadAll(out.Body)
	}
	if got, err := get(""); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("get: %d %v", len(got), err)
	}
	if got, err := get("bytes=100-"); err != nil || !bytes.Equal(got, data[100:]) {
		t.Fatalf("get open range: %d %v", len(got), err)
	}
	if got, err := get("bytes=5-9"); err != nil || !bytes.Equal(got, data[5:10]) {
		t.Fatalf("get range: %d %v", len(got), err)
	}
	if _, err := get("bytes=99999999-"); err == nil {
		t.Fatal("unsatisfiable range served")
	} else if code, st := awsCode(err); code != "InvalidRange" || st != 416 {
		t.Fatalf("bad range: %v", err)
	}
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: b, Key: aws.String(objName(0x999))})
	if code, st := awsCode(err); code != "NoSuchKey" || st != 404 {
		t.Fatalf("get absent: %v", err)
	}
	_, err = c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("nope"), Key: aws.String(objName(1))})
	if code, st := awsCode(err); code != "NoSuchBucket" || st != 404 {
		t.Fatalf("get from absent bucket: %v", err)
	}

	// ListObjectsV2 with a paginator over max-keys 5; prefix; start-after.
	var keys []string
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: b, MaxKeys: aws.Int32(5)})
	pages := 0
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	if pages != 3 || len(keys) != 12 || keys[0] != objName(0x500) || keys[11] != objName(0x50b) {
		t.Fatalf("paginated list: %d pages, %v", pages, keys)
	}
	out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: b, Prefix: aws.String(objName(0x50a)[:15]), StartAfter: aws.String(objName(0x509))})
	if err != nil || len(out.Contents) != 2 || aws.ToString(out.Contents[0].Key) != objName(0x50a) {
		t.Fatalf("prefix+start-after list: %d entries, %v", len(out.Contents), err)
	}
	_, err = c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: b, ContinuationToken: aws.String("!!")})
	if code, _ := awsCode(err); code != "InvalidArgument" {
		t.Fatalf("bad continuation token: %v", err)
	}

	// Presigned GET and PUT.
	pc := s3.NewPresignClient(c)
	pg, err := pc.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: b, Key: aws.String(objName(0x501))}, s3.WithPresignExpires(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(got, payload(1001, 1)) {
		t.Fatalf("presigned get: %d %d bytes", resp.StatusCode, len(got))
	}
	pp, err := pc.PresignPutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String(objName(0x700))}, s3.WithPresignExpires(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(pp.Method, pp.URL, bytes.NewReader([]byte("presigned block")))
	for k, v := range pp.SignedHeader {
		if k != "Host" {
			req.Header[k] = v
		}
	}
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("presigned put: %d", resp.StatusCode)
	}

	// Lifecycle and tagging.
	_, err = c.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: b,
		LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{{
			ID: aws.String("ttl"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("")},
			Expiration: &types.LifecycleExpiration{Days: aws.Int32(3)},
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	gl, err := c.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: b})
	if err != nil || len(gl.Rules) != 1 || aws.ToInt32(gl.Rules[0].Expiration.Days) != 3 {
		t.Fatalf("GetBucketLifecycleConfiguration: %v %v", gl, err)
	}
	_, err = c.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: b,
		LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{{
			ID: aws.String("filtered"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("00")},
			Expiration: &types.LifecycleExpiration{Days: aws.Int32(3)},
		}}}})
	if code, _ := awsCode(err); code != "InvalidArgument" {
		t.Fatalf("filtered lifecycle rule: %v", err)
	}
	if _, err := c.DeleteBucketLifecycle(ctx, &s3.DeleteBucketLifecycleInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: b})
	if code, st := awsCode(err); code != "NoSuchLifecycleConfiguration" || st != 404 {
		t.Fatalf("lifecycle after delete: %v", err)
	}
	_, err = c.PutBucketTagging(ctx, &s3.PutBucketTaggingInput{Bucket: b, Tagging: &types.Tagging{TagSet: []types.Tag{
		{Key: aws.String("data_shards"), Value: aws.String("4")}, {Key: aws.String("parity_shards"), Value: aws.String("2")},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if ns, _ := e.store.Namespace("kv-cache"); ns.DataShards != 4 || ns.ParityShards != 2 {
		t.Fatalf("k/m after tagging: %+v", ns)
	}
	_, err = c.PutBucketTagging(ctx, &s3.PutBucketTaggingInput{Bucket: b, Tagging: &types.Tagging{TagSet: []types.Tag{
		{Key: aws.String("block_tokens"), Value: aws.String("16")},
	}}})
	if code, _ := awsCode(err); code != "InvalidTag" {
		t.Fatalf("changing block_tokens: %v", err)
	}
	gtag, err := c.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: b})
	if err != nil || len(gtag.TagSet) < 5 {
		t.Fatalf("GetBucketTagging: %v %v", gtag, err)
	}

	// Deletes.
	_, err = c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: b})
	if code, st := awsCode(err); code != "BucketNotEmpty" || st != 409 {
		t.Fatalf("delete non-empty bucket: %v", err)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String(objName(0x500))}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: b, Key: aws.String(objName(0x500))}); err != nil {
		t.Fatalf("delete of absent object: %v", err)
	}
	var ids []types.ObjectIdentifier
	for i := uint64(1); i < 12; i++ {
		ids = append(ids, types.ObjectIdentifier{Key: aws.String(objName(0x500 + i))})
	}
	ids = append(ids, types.ObjectIdentifier{Key: aws.String(objName(0x700))}, types.ObjectIdentifier{Key: aws.String("junk")})
	do, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: b, Delete: &types.Delete{Objects: ids}})
	if err != nil {
		t.Fatal(err)
	}
	if len(do.Deleted) != 12 || len(do.Errors) != 1 || aws.ToString(do.Errors[0].Code) != "InvalidArgument" {
		t.Fatalf("DeleteObjects: %d deleted, errors %+v", len(do.Deleted), do.Errors)
	}
	if _, err := c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	_, err = c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String("default")})
	if code, _ := awsCode(err); code != "InvalidArgument" {
		t.Fatalf("delete default namespace: %v", err)
	}
}

func TestAWSSDKIsolationAndBadCredentials(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := awsClient(e, e.admin).PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("team-b"), Key: aws.String(objName(1)),
		Body: bytes.NewReader([]byte("secret block"))}); err != nil {
		t.Fatal(err)
	}
	a := awsClient(e, e.teamA)
	lb, err := a.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil || len(lb.Buckets) != 1 || aws.ToString(lb.Buckets[0].Name) != "team-a" {
		t.Fatalf("scoped ListBuckets: %v %v", lb, err)
	}
	for _, bucket := range []string{"team-b", "no-such-bucket"} {
		bk := aws.String(bucket)
		checks := map[string]error{}
		_, checks["HeadBucket"] = a.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: bk})
		_, checks["ListObjectsV2"] = a.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: bk})
		_, checks["GetObject"] = a.GetObject(ctx, &s3.GetObjectInput{Bucket: bk, Key: aws.String(objName(1))})
		_, checks["HeadObject"] = a.HeadObject(ctx, &s3.HeadObjectInput{Bucket: bk, Key: aws.String(objName(1))})
		_, checks["PutObject"] = a.PutObject(ctx, &s3.PutObjectInput{Bucket: bk, Key: aws.String(objName(2)), Body: bytes.NewReader([]byte("x"))})
		_, checks["DeleteObject"] = a.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: bk, Key: aws.String(objName(1))})
		_, checks["DeleteBucket"] = a.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: bk})
		_, checks["GetBucketTagging"] = a.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: bk})
		for op, err := range checks {
			if _, st := awsCode(err); st != 403 {
				t.Errorf("%s on %s with a team-a key: %v (want 403)", op, bucket, err)
			}
		}
	}
	if ok, _ := e.store.Exists(ctx, blockKey("team-b", 1), ctxstore.ReadOptions{}); !ok {
		t.Fatal("team-b block deleted by a team-a key")
	}

	wrong := e.teamA
	wrong.Secret += "x"
	_, err = awsClient(e, wrong).ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("team-a")})
	if code, st := awsCode(err); code != "SignatureDoesNotMatch" || st != 403 {
		t.Fatalf("wrong secret: %v", err)
	}
	unknown := credential.Credential{AccessKeyID: "CTXNOBODY00000000000", Secret: "x"}
	_, err = awsClient(e, unknown).ListBuckets(ctx, &s3.ListBucketsInput{})
	if code, st := awsCode(err); code != "InvalidAccessKeyId" || st != 403 {
		t.Fatalf("unknown key: %v", err)
	}
	// A request signed 20 minutes in the past.
	e.srv.Verifier().SetClock(func() time.Time { return time.Now().Add(20 * time.Minute) })
	_, err = a.ListBuckets(ctx, &s3.ListBucketsInput{})
	e.srv.Verifier().SetClock(time.Now)
	if code, st := awsCode(err); code != "RequestTimeTooSkewed" || st != 403 {
		t.Fatalf("skewed request: %v", err)
	}
}
