package client

// This file is the HTTP/1.1 client of ctxd's HTTP API (gateway/httpapi).
// Every package-level name it defines starts with HTTP, because the package
// is shared with the native-protocol client.

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
	"github.com/ctxtier/ctxtier/internal/sigv4"
)

// HTTPConfig configures an HTTPClient.
type HTTPConfig struct {
	// BaseURL is the server's root, e.g. "http://10.0.0.5:8080".
	BaseURL string
	// MaxIdleConnsPerHost is the pool of kept-alive connections per server;
	// it should be at least the number of concurrent callers.
	MaxIdleConnsPerHost int
	// MaxConnsPerHost caps connections per server, 0 for no cap.
	MaxConnsPerHost int
	// IdleConnTimeout closes pooled connections idle this long.
	IdleConnTimeout time.Duration
	// DialTimeout bounds connection setup.
	DialTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for a response's headers after
	// the request was sent, 0 for none (the ctx still applies).
	ResponseHeaderTimeout time.Duration
	// BufferSize is the transport's read and write buffer per connection.
	BufferSize int
	// MaxBlockSize bounds one block the client accepts in a response.
	MaxBlockSize int64
	// MaxBatchBytes bounds the block bytes of one batch-get response.
	MaxBatchBytes int64
	// TLS, when set, is the client configuration for an https:// BaseURL
	// (ctxd --tls-clients): RootCAs must trust the server's certificate.
	TLS *tls.Config
	// AccessKeyID and Secret are the credentials (from `ctxctl keys
	// create`) for a server started with --auth required. Every request is
	// then signed with AWS Signature V4 (UNSIGNED-PAYLOAD: the block's own
	// CRC-32C protects the body), so the secret never crosses the wire.
	// Empty: requests are sent unsigned.
	AccessKeyID string
	Secret      string
	// Region is the SigV4 signing region; it must match the server's
	// (ctxd uses us-east-1). Empty means us-east-1.
	Region string
	// DialContext, when not nil, opens the client's connections instead of
	// a net.Dialer with DialTimeout (a test dials from inside a network
	// namespace with it, internal/netns).
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
}

// HTTPDefaultConfig returns the defaults for a client of BaseURL
// "http://127.0.0.1:8080": 64 pooled connections, 256 KiB buffers.
func HTTPDefaultConfig() HTTPConfig {
	return HTTPConfig{
		BaseURL:               "http://127.0.0.1:8080",
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		DialTimeout:           5 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		BufferSize:            256 << 10,
		MaxBlockSize:          block.HardMaxBlockSize,
		MaxBatchBytes:         4 << 30,
	}
}

// Validate checks the configuration; errors wrap block.ErrInvalidArgument.
func (c HTTPConfig) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: http client: %s", block.ErrInvalidArgument, fmt.Sprintf(format, a...))
	}
	u, err := url.Parse(c.BaseURL)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return bad("BaseURL %q must be http(s)://host[:port]", c.BaseURL)
	case c.MaxIdleConnsPerHost < 1 || c.MaxConnsPerHost < 0:
		return bad("MaxIdleConnsPerHost must be positive and MaxConnsPerHost not negative")
	case c.IdleConnTimeout < 0 || c.DialTimeout < 0 || c.ResponseHeaderTimeout < 0:
		return bad("timeouts must not be negative")
	case c.BufferSize < 4096:
		return bad("BufferSize %d must be at least 4096", c.BufferSize)
	case c.MaxBlockSize < 1 || c.MaxBatchBytes < 1:
		return bad("MaxBlockSize and MaxBatchBytes must be positive")
	case (c.AccessKeyID == "") != (c.Secret == ""):
		return bad("AccessKeyID and Secret go together")
	}
	return nil
}

// HTTPClient talks to ctxd's HTTP API over a pool of kept-alive
// connections. It is safe for concurrent use. Errors carry the server's
// message and match the block sentinels with errors.Is.
type HTTPClient struct {
	cfg    HTTPConfig
	base   string
	hc     *http.Client
	tr     *http.Transport
	signer *sigv4.Signer // nil without credentials
}

// NewHTTP builds a client.
func NewHTTP(cfg HTTPConfig) (*HTTPClient, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dial := cfg.DialContext
	if dial == nil {
		dial = (&net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}).DialContext
	}
	tr := &http.Transport{
		DialContext:           dial,
		MaxIdleConns:          0, // bounded per host below
		MaxIdleConnsPerHost:   cfg.MaxIdleConnsPerHost,
		MaxConnsPerHost:       cfg.MaxConnsPerHost,
		IdleConnTimeout:       cfg.IdleConnTimeout,
		ResponseHeaderTimeout: cfg.ResponseHeaderTimeout,
		WriteBufferSize:       cfg.BufferSize,
		ReadBufferSize:        cfg.BufferSize,
		// Blocks are incompressible binary; and a transparently gunzipped
		// body would lose its Content-Length.
		DisableCompression: true,
		ForceAttemptHTTP2:  false,
		TLSClientConfig:    cfg.TLS,
	}
	c := &HTTPClient{
		cfg:  cfg,
		base: strings.TrimRight(cfg.BaseURL, "/"),
		hc:   &http.Client{Transport: tr},
		tr:   tr,
	}
	if cfg.AccessKeyID != "" {
		// S3-style signing (no double escaping of the path), as the
		// server's verifier (gateway/s3auth) expects.
		sc := sigv4.DefaultConfig()
		sc.AccessKeyID, sc.Secret = cfg.AccessKeyID, cfg.Secret
		if cfg.Region != "" {
			sc.Region = cfg.Region
		}
		signer, err := sigv4.New(sc)
		if err != nil {
			return nil, fmt.Errorf("%w: client: %v", block.ErrInvalidArgument, err)
		}
		c.signer = signer
	}
	return c, nil
}

// sign adds a SigV4 Authorization header when the client has credentials.
func (c *HTTPClient) sign(req *http.Request) error {
	if c.signer == nil {
		return nil
	}
	req.Header.Set("X-Amz-Content-Sha256", sigv4.UnsignedPayload)
	if err := c.signer.Sign(req, sigv4.UnsignedPayload, time.Now()); err != nil {
		return fmt.Errorf("%w: signing %s %s: %v", block.ErrInvalidArgument, req.Method, req.URL.Path, err)
	}
	return nil
}

// Close drops the pooled idle connections.
func (c *HTTPClient) Close() error {
	c.tr.CloseIdleConnections()
	return nil
}

func (c *HTTPClient) blockURL(k block.Key) string {
	return c.base + "/v1/namespaces/" + url.PathEscape(k.Namespace) + "/blocks/" + k.ObjectName()
}

func (c *HTTPClient) nsURL(ns, rest string) string {
	return c.base + "/v1/namespaces/" + url.PathEscape(ns) + rest
}

// httpMaxErrorBody bounds the error body the client reads.
const httpMaxErrorBody = 64 << 10

// do sends req and returns the response when its status is one of ok; any
// other status is turned into the server's error and the body closed.
func (c *HTTPClient) do(req *http.Request, ok ...int) (*http.Response, error) {
	if err := c.sign(req); err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctxErr := req.Context().Err(); ctxErr != nil {
			return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, ctxErr)
		}
		return nil, fmt.Errorf("%w: %s %s: %v", block.ErrUnavailable, req.Method, req.URL.Path, err)
	}
	for _, s := range ok {
		if resp.StatusCode == s {
			return resp, nil
		}
	}
	defer httpDrain(resp)
	return nil, httpResponseError(resp)
}

// httpDrain reads what is left of a small body so the connection is reused.
func httpDrain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, httpMaxErrorBody))
	resp.Body.Close()
}

// httpResponseError maps an error response back to its sentinel: from the
// JSON body's code, else the X-Ctxtier-Error-Code header (HEAD), else the
// status alone (a proxy, or the mux's 404/405).
func httpResponseError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, httpMaxErrorBody))
	var eb httpwire.ErrorBody
	if json.Unmarshal(b, &eb) == nil && eb.Code != "" {
		return httpCodeErr(eb.Code, eb.Message)
	}
	if name := resp.Header.Get(httpwire.HeaderErrorCode); name != "" {
		return httpCodeErr(name, fmt.Sprintf("%s (HTTP %d)", name, resp.StatusCode))
	}
	msg := fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	var code errcode.Code
	switch resp.StatusCode {
	case http.StatusBadRequest:
		code = errcode.InvalidArgument
	case http.StatusNotFound:
		code = errcode.NotFound
	case http.StatusConflict:
		code = errcode.Conflict
	case http.StatusRequestEntityTooLarge:
		code = errcode.TooLarge
	case http.StatusServiceUnavailable, http.StatusBadGateway:
		code = errcode.Unavailable
	case http.StatusUnauthorized:
		code = errcode.Unauthenticated
	case http.StatusForbidden:
		code = errcode.PermissionDenied
	case http.StatusGatewayTimeout:
		code = errcode.DeadlineExceeded
	default:
		code = errcode.Internal
	}
	return code.Err(msg)
}

func httpCodeErr(name, msg string) error {
	code := errcode.FromName(name)
	if code == errcode.OK {
		code = errcode.Internal
	}
	return code.Err(msg)
}

func httpMalformed(format string, a ...any) error {
	return fmt.Errorf("%w: http response: %s", errcode.ErrMalformedFrame, fmt.Sprintf(format, a...))
}

func (c *HTTPClient) newRequest(ctx context.Context, method, u string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", block.ErrInvalidArgument, err)
	}
	if linearizable(ctx) {
		req.Header.Set(httpwire.HeaderRead, httpwire.ReadLinearizable)
	}
	if d := retainFrom(ctx); d > 0 && block.ValidateRetain(d) == nil && readsBlocks(method, u) {
		// Only on reads: on a put the same header is the put's own window.
		ms := (d + time.Millisecond - 1) / time.Millisecond * time.Millisecond //nolint:durationcheck // rounds d up to whole milliseconds
		req.Header.Set(httpwire.HeaderRetain, httpwire.FormatPinTTL(ms))
	}
	return req, nil
}

// readsBlocks reports whether a request reads blocks, so it carries a
// read's retain window (WithRetain): a GET, a lookup or a batch get.
func readsBlocks(method, u string) bool {
	return method == http.MethodGet || strings.HasSuffix(u, "/lookup") || strings.HasSuffix(u, "/batch/get")
}

// EndSession ends an agent session of namespace ns over HTTP (POST
// /v1/namespaces/{ns}/sessions/{id}/end); see Client.EndSession.
func (c *HTTPClient) EndSession(ctx context.Context, ns string, session uint64) (int, error) {
	if session == 0 {
		return 0, fmt.Errorf("%w: session 0 is no session", block.ErrInvalidArgument)
	}
	var resp httpwire.EndSessionResponse
	if _, err := c.postJSON(ctx, c.nsURL(ns, fmt.Sprintf("/sessions/%d/end", session)), struct{}{}, &resp); err != nil {
		return 0, err
	}
	return resp.Released, nil
}

// Put stores one block. The client always sends a CRC-32C (opts.Sum when the
// caller set it, else one computed here), so the server verifies the bytes
// that arrived. A re-put of identical bytes succeeds; other bytes are
// block.ErrConflict.
func (c *HTTPClient) Put(ctx context.Context, key block.Key, data []byte, opts block.PutOptions) error {
	if !opts.HasSum {
		opts.Sum, opts.HasSum = block.Checksum(data), true
	}
	req, err := c.newRequest(ctx, http.MethodPut, c.blockURL(key), bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", httpwire.ContentTypeBinary)
	httpwire.SetPutOptions(req.Header, opts)
	resp, err := c.do(req, http.StatusCreated, http.StatusOK)
	if err != nil {
		return err
	}
	httpDrain(resp)
	return nil
}

// httpGetHeader reads a block response's size and checksum headers.
func (c *HTTPClient) httpBlockHeader(resp *http.Response) (size int64, sum uint32, err error) {
	sum, err = httpwire.ParseSum(resp.Header.Get(httpwire.HeaderCRC))
	if err != nil {
		return 0, 0, fmt.Errorf("%w: response carries no valid checksum header: %v", block.ErrChecksum, err)
	}
	size = resp.ContentLength
	if size > c.cfg.MaxBlockSize {
		return 0, 0, fmt.Errorf("%w: block of %d bytes exceeds the client's limit of %d", block.ErrTooLarge, size, c.cfg.MaxBlockSize)
	}
	return size, sum, nil
}

func httpVerify(key block.Key, data []byte, sum uint32) error {
	if got := block.Checksum(data); got != sum {
		return fmt.Errorf("%w: %s: header says %08x, received bytes are %08x", block.ErrChecksum, key, sum, got)
	}
	return nil
}

// Get fetches a whole block and verifies it against its checksum header.
// It declares that it verifies (httpwire.HeaderReaderVerifies), so the
// server's DRAM tier may skip its own pass; on a mismatch it reads the
// block once more without the declaration, and the tier's check then
// decides (a corrupt block is dropped and answered NotFound).
func (c *HTTPClient) Get(ctx context.Context, key block.Key) ([]byte, error) {
	data, err := c.get(ctx, key, true)
	if errors.Is(err, block.ErrChecksum) {
		data, err = c.get(ctx, key, false)
	}
	return data, err
}

func (c *HTTPClient) get(ctx context.Context, key block.Key, declare bool) ([]byte, error) {
	req, err := c.newBlockGet(ctx, key, declare)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(req, http.StatusOK)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	size, sum, err := c.httpBlockHeader(resp)
	if err != nil {
		return nil, err
	}
	var data []byte
	if size >= 0 {
		data = make([]byte, size)
		_, err = io.ReadFull(resp.Body, data)
	} else {
		data, err = io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxBlockSize))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: reading body: %v", block.ErrUnavailable, key, err)
	}
	if err := httpVerify(key, data, sum); err != nil {
		return nil, err
	}
	return data, nil
}

// GetInto fetches a whole block into buf and returns its size; a buf smaller
// than the block is io.ErrShortBuffer (nothing is read). buf's first n bytes
// are only meaningful when err is nil: a checksum mismatch that a second
// read, verified by the server's tier, does not clear is block.ErrChecksum
// (see Get for the declaration and the second read).
func (c *HTTPClient) GetInto(ctx context.Context, key block.Key, buf []byte) (int, error) {
	n, err := c.getInto(ctx, key, buf, true)
	if errors.Is(err, block.ErrChecksum) {
		n, err = c.getInto(ctx, key, buf, false)
	}
	return n, err
}

// newBlockGet is the GET of a whole block; with declare it carries
// httpwire.HeaderReaderVerifies (the caller checks every byte).
func (c *HTTPClient) newBlockGet(ctx context.Context, key block.Key, declare bool) (*http.Request, error) {
	req, err := c.newRequest(ctx, http.MethodGet, c.blockURL(key), nil)
	if err == nil && declare {
		req.Header.Set(httpwire.HeaderReaderVerifies, httpwire.ReaderVerifiesCRC32C)
	}
	return req, err
}

func (c *HTTPClient) getInto(ctx context.Context, key block.Key, buf []byte, declare bool) (int, error) {
	req, err := c.newBlockGet(ctx, key, declare)
	if err != nil {
		return 0, err
	}
	resp, err := c.do(req, http.StatusOK)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	size, sum, err := c.httpBlockHeader(resp)
	if err != nil {
		return 0, err
	}
	if size < 0 {
		return 0, httpMalformed("%s: no Content-Length", key)
	}
	if size > int64(len(buf)) {
		return 0, fmt.Errorf("%s: block of %d bytes, buffer of %d: %w", key, size, len(buf), io.ErrShortBuffer)
	}
	n, err := io.ReadFull(resp.Body, buf[:size])
	if err != nil {
		return 0, fmt.Errorf("%w: %s: reading body: %v", block.ErrUnavailable, key, err)
	}
	if err := httpVerify(key, buf[:n], sum); err != nil {
		return 0, err
	}
	return n, nil
}

// Stat returns a block's metadata (HEAD): size, checksum, tier, priority,
// creation and pin expiry when the server reports them.
func (c *HTTPClient) Stat(ctx context.Context, key block.Key) (block.Info, error) {
	req, err := c.newRequest(ctx, http.MethodHead, c.blockURL(key), nil)
	if err != nil {
		return block.Info{}, err
	}
	resp, err := c.do(req, http.StatusOK)
	if err != nil {
		return block.Info{}, err
	}
	resp.Body.Close()
	size, sum, err := c.httpBlockHeader(resp)
	if err != nil {
		return block.Info{}, err
	}
	info := block.Info{Key: key, Size: size, Sum: sum, Tier: block.Tier(resp.Header.Get(httpwire.HeaderTier))}
	if v := resp.Header.Get(httpwire.HeaderPriority); v != "" {
		if p, err := httpwire.ParsePriority(v); err == nil {
			info.Priority = p
		}
	}
	if v := resp.Header.Get("Last-Modified"); v != "" {
		if t, err := http.ParseTime(v); err == nil {
			info.Created = t
		}
	}
	if v := resp.Header.Get(httpwire.HeaderPinnedUntil); v != "" {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			info.PinnedUntil = t
		}
	}
	return info, nil
}

// Delete removes a block; block.ErrNotFound when absent.
func (c *HTTPClient) Delete(ctx context.Context, key block.Key) error {
	req, err := c.newRequest(ctx, http.MethodDelete, c.blockURL(key), nil)
	if err != nil {
		return err
	}
	resp, err := c.do(req, http.StatusNoContent, http.StatusOK)
	if err != nil {
		return err
	}
	httpDrain(resp)
	return nil
}

// Pin protects a block from eviction for ttl (the server caps it).
func (c *HTTPClient) Pin(ctx context.Context, key block.Key, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("%w: pin TTL must be positive", block.ErrInvalidArgument)
	}
	u := c.blockURL(key) + "/pin?ttl=" + url.QueryEscape(httpwire.FormatPinTTL(ttl))
	req, err := c.newRequest(ctx, http.MethodPost, u, nil)
	if err != nil {
		return err
	}
	resp, err := c.do(req, http.StatusNoContent, http.StatusOK)
	if err != nil {
		return err
	}
	httpDrain(resp)
	return nil
}

// postJSON sends in as JSON and decodes a 200 JSON answer into out.
func (c *HTTPClient) postJSON(ctx context.Context, u string, in, out any, ok ...int) (int, error) {
	return c.sendJSON(ctx, http.MethodPost, u, in, out, ok...)
}

// sendJSON sends in as a JSON body with method and decodes the answer into out.
func (c *HTTPClient) sendJSON(ctx context.Context, method, u string, in, out any, ok ...int) (int, error) {
	body, err := httpwire.EncodeJSON(in)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", block.ErrInvalidArgument, err)
	}
	req, err := c.newRequest(ctx, method, u, body)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", httpwire.ContentTypeJSON)
	if len(ok) == 0 {
		ok = []int{http.StatusOK}
	}
	resp, err := c.do(req, ok...)
	if err != nil {
		return 0, err
	}
	defer httpDrain(resp)
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return 0, httpMalformed("%s: %v", u, err)
	}
	return resp.StatusCode, nil
}

func (c *HTTPClient) getJSON(ctx context.Context, u string, out any) error {
	req, err := c.newRequest(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := c.do(req, http.StatusOK)
	if err != nil {
		return err
	}
	defer httpDrain(resp)
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return httpMalformed("%s: %v", u, err)
	}
	return nil
}

// CreateNamespace creates ns (idempotent for an identical definition) and
// returns the stored definition, defaults filled in and tenant salt omitted.
// A different definition under the same name is block.ErrNamespaceExists.
func (c *HTTPClient) CreateNamespace(ctx context.Context, ns block.Namespace) (block.Namespace, error) {
	var out block.Namespace
	_, err := c.postJSON(ctx, c.base+"/v1/namespaces", ns, &out, http.StatusCreated, http.StatusOK)
	return out, err
}

// ListNamespaces lists all namespaces (tenant salts omitted).
func (c *HTTPClient) ListNamespaces(ctx context.Context) ([]block.Namespace, error) {
	var out httpwire.NamespaceList
	if err := c.getJSON(ctx, c.base+"/v1/namespaces", &out); err != nil {
		return nil, err
	}
	return out.Namespaces, nil
}

// Namespace returns one namespace's definition (tenant salt omitted).
func (c *HTTPClient) Namespace(ctx context.Context, name string) (block.Namespace, error) {
	var out block.Namespace
	err := c.getJSON(ctx, c.nsURL(name, ""), &out)
	return out, err
}

// NamespaceStatus returns one namespace's definition and the bytes it holds
// in each tier of the node that answered.
func (c *HTTPClient) NamespaceStatus(ctx context.Context, name string) (httpwire.NamespaceStatus, error) {
	var out httpwire.NamespaceStatus
	err := c.getJSON(ctx, c.nsURL(name, ""), &out)
	return out, err
}

// SetQuota replaces a namespace's byte quotas per tier (0: unlimited) and
// returns its new status. It needs an operator's key when auth is on.
func (c *HTTPClient) SetQuota(ctx context.Context, name string, q block.Quota) (httpwire.NamespaceStatus, error) {
	var out httpwire.NamespaceStatus
	_, err := c.sendJSON(ctx, http.MethodPut, c.nsURL(name, "/quota"), q, &out, http.StatusOK)
	return out, err
}

// Ready reports the server's readiness (/readyz): nil when ready, else
// block.ErrUnavailable with the server's reason.
func (c *HTTPClient) Ready(ctx context.Context) error {
	req, err := c.newRequest(ctx, http.MethodGet, c.base+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := c.do(req, http.StatusOK)
	if err != nil {
		return err
	}
	httpDrain(resp)
	return nil
}
