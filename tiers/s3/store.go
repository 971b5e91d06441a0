package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// objectStore is the little of S3 the tier uses. minioStore implements it
// over minio-go; unit tests use an in-memory one.
type objectStore interface {
	// Put uploads data as object name (multipart above the part size).
	Put(ctx context.Context, name string, data []byte) error
	// ReadRange fills dst with the len(dst) bytes of object name at off.
	ReadRange(ctx context.Context, name string, off int64, dst []byte) error
	// ReadHead fills dst with the first len(dst) bytes of object name read
	// with a plain, unranged GET, and discards the (short) rest. Servers
	// serve whole objects on their fastest path: versitygw hands the file
	// to sendfile, while a range goes through a buffered copy.
	ReadHead(ctx context.Context, name string, dst []byte) error
	// Remove deletes object name; a missing object is not an error.
	Remove(ctx context.Context, name string) error
	// List calls fn for every object under prefix.
	List(ctx context.Context, prefix string, fn func(name string, size int64) error) error
}

// errNoObject marks a ReadRange of an object that does not exist.
var errNoObject = errors.New("s3: no such object")

type minioStore struct {
	c        *minio.Client
	bucket   string
	partSize uint64
	threads  uint
}

// newMinioStore builds the minio-go client for cfg (no request is made).
func newMinioStore(cfg Config) (*minioStore, error) {
	tr := &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   cfg.DialTimeout,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   cfg.DialTimeout,
		ExpectContinueTimeout: time.Second,
		ResponseHeaderTimeout: cfg.ResponseTimeout,
		DisableCompression:    true,
	}
	c, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:     credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure:    cfg.TLS,
		Region:    cfg.Region,
		Transport: tr,
		// Path-style requests: works with every S3-compatible server and any
		// bucket name.
		BucketLookup: minio.BucketLookupPath,
		// One attempt per request: the tier retries uploads itself with
		// backoff, and a get must fail fast rather than retry into a stall.
		MaxRetries: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("s3: client for %s: %w", cfg.Endpoint, err)
	}
	return &minioStore{c: c, bucket: cfg.Bucket, partSize: uint64(cfg.PartSize), threads: uint(cfg.UploadThreads)}, nil
}

func (s *minioStore) Put(ctx context.Context, name string, data []byte) error {
	_, err := s.c.PutObject(ctx, s.bucket, name, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{
		ContentType: "application/octet-stream",
		PartSize:    s.partSize,
		NumThreads:  s.threads,
	})
	return err
}

func (s *minioStore) ReadRange(ctx context.Context, name string, off int64, dst []byte) error {
	var opts minio.GetObjectOptions
	if err := opts.SetRange(off, off+int64(len(dst))-1); err != nil {
		return err
	}
	obj, err := s.c.GetObject(ctx, s.bucket, name, opts)
	if err != nil {
		return classify(err)
	}
	defer obj.Close()
	if _, err := io.ReadFull(obj, dst); err != nil {
		return classify(err)
	}
	return nil
}

// maxHeadTail bounds what ReadHead discards after dst: a one-block pack's
// index and trailer. More means the object is not what the index says.
const maxHeadTail = 64 << 10

func (s *minioStore) ReadHead(ctx context.Context, name string, dst []byte) error {
	obj, err := s.c.GetObject(ctx, s.bucket, name, minio.GetObjectOptions{})
	if err != nil {
		return classify(err)
	}
	defer obj.Close()
	if _, err := io.ReadFull(obj, dst); err != nil {
		return classify(err)
	}
	// Read the tail to EOF so the connection goes back to the pool.
	n, err := io.Copy(io.Discard, io.LimitReader(obj, maxHeadTail+1))
	if err != nil {
		return classify(err)
	}
	if n > maxHeadTail {
		return fmt.Errorf("s3: %s: more than %d bytes follow the block; not a one-block pack", name, maxHeadTail)
	}
	return nil
}

func (s *minioStore) Remove(ctx context.Context, name string) error {
	err := s.c.RemoveObject(ctx, s.bucket, name, minio.RemoveObjectOptions{})
	if err != nil && minio.ToErrorResponse(err).Code == minio.NoSuchKey {
		return nil
	}
	return err
}

func (s *minioStore) List(ctx context.Context, prefix string, fn func(string, int64) error) error {
	for o := range s.c.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			return o.Err
		}
		if err := fn(o.Key, o.Size); err != nil {
			return err
		}
	}
	return nil
}

// EnsureBucket creates the bucket if it does not exist.
func (s *minioStore) EnsureBucket(ctx context.Context, region string) error {
	ok, err := s.c.BucketExists(ctx, s.bucket)
	if err != nil {
		return err
	}
	if ok {
		return nil
	}
	err = s.c.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{Region: region})
	if err != nil {
		code := minio.ToErrorResponse(err).Code
		if code == "BucketAlreadyOwnedByYou" || code == "BucketAlreadyExists" {
			return nil
		}
	}
	return err
}

// classify turns "no such key" into errNoObject.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if minio.ToErrorResponse(err).Code == minio.NoSuchKey {
		return fmt.Errorf("%w: %v", errNoObject, err)
	}
	return err
}
