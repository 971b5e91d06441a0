// Package s3api serves ctxtier over the S3 REST API on its own port, so
// operators administer the tier with S3 tools and engines' S3 connectors can
// use it as a data path. A bucket is a namespace. In a block namespace an
// object is a block, named by its 16-hex-digit sequence hash plus ".N" for
// tensor-parallel part N; in an object namespace (every bucket created
// through S3) an object is any S3 key, stored by ctxstore/object, with
// multipart uploads, CopyObject and conditional writes.
// Requests are authenticated with SigV4 (gateway/s3auth) against namespace-
// scoped access keys (ctxstore/credential). Path-style addressing
// (http://host:port/bucket/key) is always served; virtual-hosted-style
// (http://bucket.domain:port/key) for the base domains in Config.Domains.
package s3api

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/ctxstore/object"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/metrics"
	"github.com/ctxtier/ctxtier/gateway/s3auth"
	"github.com/ctxtier/ctxtier/internal/httpdrain"
	"github.com/ctxtier/ctxtier/internal/membudget"
)

// readLevel is the level of every read the S3 API makes: this node's own
// view (ctxstore.ReadLocal). S3 has no read-level header; a client that
// needs linearizable reads uses the HTTP API's X-Ctxtier-Read.
const readLevel = ctxstore.ReadLocal

const proto = "s3"

// Config configures the S3 server.
type Config struct {
	// Addr is the listen address (used by ListenAndServe callers; Serve takes a listener).
	Addr string
	// Region is the region clients must sign for.
	Region string
	// MaxObjectSize bounds a PutObject body, before the namespace's own max_block_size.
	MaxObjectSize int64
	// MaxClockSkew bounds the difference between a signed request's time and the server's clock.
	MaxClockSkew time.Duration
	// MaxPresignExpiry bounds a presigned URL's X-Amz-Expires.
	MaxPresignExpiry time.Duration
	// MaxKeys caps max-keys in listings (and is the default).
	MaxKeys int
	// MaxXMLBody bounds request bodies that carry XML (tagging, lifecycle, delete).
	MaxXMLBody int64
	// ReadHeaderTimeout and IdleTimeout configure the HTTP server.
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
	// Budget, when set, is the node's in-flight budget: a PutObject body is
	// read only once its bytes are in it (nil: no bound).
	Budget *membudget.Budget
	// MaxPutSize bounds one PutObject or UploadPart body in an object
	// namespace (S3's 5 GiB); objects are cut into data blocks.
	MaxPutSize int64
	// ChunkSize is the data block size of objects in object namespaces
	// (bounded by MaxObjectSize and the namespace's max block size).
	ChunkSize int64
	// UploadTTL is how long a multipart upload may stay open; older ones are
	// aborted, with their parts, every UploadSweepEvery.
	UploadTTL        time.Duration
	UploadSweepEvery time.Duration
	// RetireGrace is how long a replaced or deleted object's data blocks
	// are kept, so a GET already streaming the old version gets it whole;
	// the upload sweep deletes them after it (object.Config.RetireGrace).
	// 0 deletes them at once.
	RetireGrace time.Duration
	// Domains are the base domains of virtual-hosted-style requests: a
	// request whose Host (port aside) is "<bucket>.<domain>" addresses that
	// bucket, and its whole path is the object key. Any other Host is path
	// style. Empty: path style only.
	Domains []string
}

// DefaultConfig returns port 9000, us-east-1, 64 MiB objects, 15 minutes of
// skew, 7-day presigned URLs and 1000 keys per listing.
func DefaultConfig() Config {
	return Config{
		Addr:              ":9000",
		Region:            "us-east-1",
		MaxObjectSize:     block.DefaultMaxBlockSize,
		MaxClockSkew:      15 * time.Minute,
		MaxPresignExpiry:  7 * 24 * time.Hour,
		MaxKeys:           1000,
		MaxXMLBody:        1 << 20,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxPutSize:        5 << 30,
		ChunkSize:         8 << 20,
		UploadTTL:         24 * time.Hour,
		UploadSweepEvery:  time.Minute,
		RetireGrace:       2 * time.Minute,
	}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	bad := func(f string, a ...any) error {
		return fmt.Errorf("%w: s3api: %s", block.ErrInvalidArgument, fmt.Sprintf(f, a...))
	}
	switch {
	case c.Region == "":
		return bad("empty region")
	case c.MaxObjectSize < 1 || c.MaxObjectSize > block.HardMaxBlockSize:
		return bad("max object size %d out of range 1..%d", c.MaxObjectSize, block.HardMaxBlockSize)
	case c.MaxClockSkew <= 0 || c.MaxPresignExpiry <= 0:
		return bad("clock skew and presign expiry must be positive")
	case c.MaxKeys < 1:
		return bad("max keys must be positive")
	case c.MaxXMLBody < 1024:
		return bad("max XML body below 1 KiB")
	case c.ReadHeaderTimeout <= 0 || c.IdleTimeout <= 0:
		return bad("timeouts must be positive")
	case c.MaxPutSize < 1:
		return bad("max put size must be positive")
	case c.ChunkSize < 1 || c.ChunkSize > block.HardMaxBlockSize:
		return bad("chunk size %d out of range 1..%d", c.ChunkSize, block.HardMaxBlockSize)
	case c.UploadTTL <= 0 || c.UploadSweepEvery <= 0:
		return bad("upload TTL and sweep interval must be positive")
	case c.RetireGrace < 0:
		return bad("retire grace %v is negative", c.RetireGrace)
	}
	for _, d := range c.Domains {
		if err := validDomain(d); err != nil {
			return bad("%v", err)
		}
	}
	return nil
}

// validDomain checks a virtual-host base domain: DNS labels of a-z, 0-9 and
// '-', no port, no leading or trailing dot.
func validDomain(d string) error {
	if d == "" || len(d) > 253 {
		return fmt.Errorf("domain %q must be 1..253 characters", d)
	}
	for _, label := range strings.Split(d, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("domain %q: empty, over-long or dash-edged label", d)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z') && !(c >= '0' && c <= '9') && c != '-' {
				return fmt.Errorf("domain %q: only lower-case a-z, 0-9, '-' and '.' (and no port)", d)
			}
		}
	}
	return nil
}

// hostBucket returns the bucket a virtual-hosted-style Host names, or ""
// for path style.
func (s *Server) hostBucket(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, d := range s.cfg.Domains {
		if b, ok := strings.CutSuffix(host, "."+d); ok && b != "" {
			return b
		}
	}
	return ""
}

// Server is the S3 endpoint.
type Server struct {
	cfg     Config
	store   *ctxstore.Store
	objs    *object.Store
	verify  *s3auth.Verifier
	metrics *metrics.Metrics
	log     *slog.Logger
	started time.Time
	reqID   atomic.Uint64
	bufs    sync.Pool

	mu  sync.Mutex
	srv *http.Server
	// drain counts the handlers in flight, for Shutdown.
	drain httpdrain.Tracker
}

// New builds a server over store, authenticating against keys. m may be nil.
func New(cfg Config, store *ctxstore.Store, keys credential.Lookuper, m *metrics.Metrics, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if store == nil || keys == nil {
		return nil, fmt.Errorf("%w: s3api needs a store and a credential lookup", block.ErrInvalidArgument)
	}
	if log == nil {
		log = slog.Default()
	}
	acfg := s3auth.DefaultConfig()
	acfg.Region, acfg.MaxSkew, acfg.MaxPresignExpiry = cfg.Region, cfg.MaxClockSkew, cfg.MaxPresignExpiry
	v, err := s3auth.New(acfg, keys)
	if err != nil {
		return nil, err
	}
	ocfg := object.DefaultConfig()
	ocfg.MaxKeyLen = 2 * maxKeyLen // S3 keys, and the reserved keys of uploads and parts
	ocfg.ChunkSize = min(cfg.ChunkSize, cfg.MaxObjectSize)
	ocfg.MaxBlockSize = cfg.MaxObjectSize
	ocfg.RetireGrace = cfg.RetireGrace
	// S3's racing PUTs of one key all succeed (the last wins): let each
	// retry the manifest swap until it lands rather than give up.
	ocfg.ReplaceAttempts = 1000
	objs, err := object.New(ocfg, store)
	if err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, store: store, objs: objs, verify: v, metrics: m, log: log, started: time.Now().UTC()}, nil
}

// Verifier exposes the signature verifier (tests set its clock).
func (s *Server) Verifier() *s3auth.Verifier { return s.verify }

// Serve serves on ln until ctx is done or Shutdown is called. It returns nil
// after a clean shutdown.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.drain.Wrap(s),
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ConnState: func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				s.metrics.ConnOpened(proto)
			case http.StateClosed, http.StateHijacked:
				s.metrics.ConnClosed(proto)
			}
		},
	}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	sweepCtx, endSweep := context.WithCancel(ctx)
	defer endSweep()
	go s.sweepUploads(sweepCtx)
	stop := context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := s.drain.Shutdown(sctx, srv, httpdrain.DefaultGrace); err != nil {
			s.log.Warn("s3 api shutdown", "err", err)
		}
	})
	defer stop()
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting requests and waits for those in flight until ctx
// ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	// Then the connections close and their handlers are waited for (up to
	// httpdrain.DefaultGrace): none may hold a tier lease once the tiers
	// close.
	return s.drain.Shutdown(ctx, srv, httpdrain.DefaultGrace)
}

// request is one request's routing and accounting state.
type request struct {
	w       http.ResponseWriter
	r       *http.Request
	id      string
	bucket  string
	key     string
	op      string
	auth    *s3auth.Auth
	status  int
	in, out int64
}

// ServeHTTP routes, authenticates, authorizes and dispatches one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	q := &request{w: w, r: r, id: strconv.FormatUint(s.reqID.Add(1), 16)}
	w.Header().Set("X-Amz-Request-Id", q.id)
	w.Header().Set("Server", "ctxtier")
	path := strings.TrimPrefix(r.URL.Path, "/")
	if b := s.hostBucket(r.Host); b != "" {
		q.bucket, q.key = b, path
	} else {
		q.bucket, q.key, _ = strings.Cut(path, "/")
	}
	handler := s.route(q)
	err := s.serve(q, handler)
	code := errcode.OK
	if err != nil {
		code = errcode.Of(err)
		s.writeError(q, err)
	}
	s.metrics.Request(proto, q.op, code, time.Since(start))
	s.metrics.Bytes(proto, q.in, q.out)
}

func (s *Server) serve(q *request, handler func(*request) error) error {
	a, err := s.verify.Verify(q.r)
	if err != nil {
		// s3auth's errors never carry a secret or a signature (tested).
		s.log.Debug("s3 authentication failed", "op", q.op, "bucket", q.bucket, "remote", q.r.RemoteAddr, "err", err)
		return err
	}
	q.auth = a
	if q.bucket != "" && !a.Credential.Allows(q.bucket) {
		// Same answer whether or not the bucket exists: a key cannot probe
		// namespaces outside its scope.
		return errAccessDenied(q.bucket)
	}
	return handler(q)
}

// route picks the operation from method, path and query.
func (s *Server) route(q *request) func(*request) error {
	r, qs := q.r, q.r.URL.Query()
	set := func(op string, h func(*request) error) func(*request) error { q.op = op; return h }
	if q.bucket == "" {
		if r.Method == http.MethodGet {
			return set("ListBuckets", s.listBuckets)
		}
		return set("Unknown", methodNotAllowed)
	}
	if q.key == "" {
		switch r.Method {
		case http.MethodGet:
			switch {
			case qs.Has("lifecycle"):
				return set("GetBucketLifecycleConfiguration", s.getLifecycle)
			case qs.Has("tagging"):
				return set("GetBucketTagging", s.getTagging)
			case qs.Has("location"):
				return set("GetBucketLocation", s.getLocation)
			case qs.Has("versioning"):
				return set("GetBucketVersioning", s.getVersioning)
			case qs.Has("uploads"):
				return set("ListMultipartUploads", s.listUploads)
			case qs.Has("acl"), qs.Has("policy"), qs.Has("cors"), qs.Has("website"), qs.Has("logging"),
				qs.Has("replication"), qs.Has("encryption"), qs.Has("object-lock"), qs.Has("notification"),
				qs.Has("requestPayment"), qs.Has("accelerate"), qs.Has("ownershipControls"), qs.Has("policyStatus"):
				return set("GetBucketSubresource", s.bucketNotImplemented)
			case qs.Get("list-type") == "2":
				return set("ListObjectsV2", s.listObjectsV2)
			default:
				return set("ListObjects", s.listObjectsV1)
			}
		case http.MethodPut:
			switch {
			case qs.Has("lifecycle"):
				return set("PutBucketLifecycleConfiguration", s.putLifecycle)
			case qs.Has("tagging"):
				return set("PutBucketTagging", s.putTagging)
			case len(qs) > 0:
				return set("PutBucketSubresource", s.bucketNotImplemented)
			}
			return set("CreateBucket", s.createBucket)
		case http.MethodHead:
			return set("HeadBucket", s.headBucket)
		case http.MethodDelete:
			switch {
			case qs.Has("lifecycle"):
				return set("DeleteBucketLifecycle", s.deleteLifecycle)
			case qs.Has("tagging"):
				return set("DeleteBucketTagging", s.deleteTagging)
			case len(qs) > 0:
				return set("DeleteBucketSubresource", s.bucketNotImplemented)
			}
			return set("DeleteBucket", s.deleteBucket)
		case http.MethodPost:
			if qs.Has("delete") {
				return set("DeleteObjects", s.deleteObjects)
			}
		}
		return set("Unknown", methodNotAllowed)
	}
	switch {
	case r.Method == http.MethodPost && qs.Has("uploads"):
		return set("CreateMultipartUpload", s.objectsOnly(s.createUpload))
	case qs.Has("uploadId"):
		switch r.Method {
		case http.MethodPut:
			if r.Header.Get("X-Amz-Copy-Source") != "" {
				return set("UploadPartCopy", s.objectsOnly(s.uploadPartCopy))
			}
			return set("UploadPart", s.objectsOnly(s.uploadPart))
		case http.MethodPost:
			return set("CompleteMultipartUpload", s.objectsOnly(s.completeUpload))
		case http.MethodDelete:
			return set("AbortMultipartUpload", s.objectsOnly(s.abortUpload))
		case http.MethodGet:
			return set("ListParts", s.objectsOnly(s.listParts))
		}
		return set("Unknown", methodNotAllowed)
	case qs.Has("uploads"):
		return set("MultipartUpload", notImplemented)
	}
	if qs.Has("tagging") || qs.Has("acl") || qs.Has("retention") || qs.Has("legal-hold") || qs.Has("attributes") {
		return set("ObjectSubresource", notImplemented)
	}
	switch r.Method {
	case http.MethodGet:
		if qs.Has(LocationsQuery) {
			return set("GetObjectLocations", s.objectsOnly(s.getLocations))
		}
		return set("GetObject", s.byKind(s.getObject, s.getObjectNS))
	case http.MethodHead:
		return set("HeadObject", s.byKind(s.headObject, s.headObjectNS))
	case http.MethodPut:
		if r.Header.Get("X-Amz-Copy-Source") != "" {
			return set("CopyObject", s.objectsOnly(s.copyObject))
		}
		return set("PutObject", s.byKind(s.putObject, s.putObjectNS))
	case http.MethodDelete:
		return set("DeleteObject", s.byKind(s.deleteObject, s.deleteObjectNS))
	}
	return set("Unknown", methodNotAllowed)
}

func notImplemented(q *request) error {
	return errNotImplemented(q.op + " (" + q.r.Method + " " + q.r.URL.RawQuery + ")")
}

// bucketNotImplemented answers a bucket sub-resource ctxtier does not
// implement: 404 NoSuchBucket first, as S3 checks the bucket before the
// operation, then 501.
func (s *Server) bucketNotImplemented(q *request) error {
	if _, err := s.store.Namespace(q.bucket); err != nil {
		return err
	}
	return notImplemented(q)
}

func methodNotAllowed(q *request) error {
	return newErr("MethodNotAllowed", http.StatusMethodNotAllowed, block.ErrInvalidArgument, "%s is not allowed on this resource", q.r.Method)
}

func (s *Server) writeError(q *request, err error) {
	ae := toAPI(err)
	if ae.Status >= 500 {
		s.log.Warn("s3 request failed", "op", q.op, "bucket", q.bucket, "key", q.key, "err", err)
	}
	if q.status != 0 {
		// The response was already started (a failed body write); nothing more can be said.
		return
	}
	h := q.w.Header()
	h.Del("Content-Length")
	h.Del("Etag")
	q.status = ae.Status
	if q.r.Method == http.MethodHead {
		q.w.WriteHeader(ae.Status)
		return
	}
	body, _ := xml.Marshal(xmlError{Code: ae.Code, Message: ae.Msg, Resource: q.r.URL.Path, RequestID: q.id, Key: q.key, Bucket: q.bucket,
		HeadersNotSigned: ae.HeadersNotSigned, Extra: ae.Extra})
	h.Set("Content-Type", "application/xml")
	h.Set("Content-Length", strconv.Itoa(len(xml.Header)+len(body)))
	q.w.WriteHeader(ae.Status)
	_, _ = q.w.Write([]byte(xml.Header))
	_, _ = q.w.Write(body)
}

// writeXML writes a 200 response with v as its XML body.
func (q *request) writeXML(v any) error {
	body, err := xml.Marshal(v)
	if err != nil {
		return fmt.Errorf("%w: %v", errcode.ErrInternal, err)
	}
	h := q.w.Header()
	h.Set("Content-Type", "application/xml")
	h.Set("Content-Length", strconv.Itoa(len(xml.Header)+len(body)))
	q.status = http.StatusOK
	q.w.WriteHeader(http.StatusOK)
	_, _ = q.w.Write([]byte(xml.Header))
	_, _ = q.w.Write(body)
	return nil
}

// writeEmpty writes a status with no body.
func (q *request) writeEmpty(status int) error {
	q.status = status
	if status != http.StatusNoContent && status != http.StatusNotModified {
		q.w.Header().Set("Content-Length", "0")
	}
	q.w.WriteHeader(status)
	return nil
}
