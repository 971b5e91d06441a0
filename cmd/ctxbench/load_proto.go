package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/client"
	"github.com/ctxtier/ctxtier/internal/sigv4"
)

// The protocols `ctxbench load --proto` drives. Each GET is checked end to
// end as that protocol lets a client check it (loadProtos has the words).
const (
	protoNative = "native"
	protoHTTP   = "http"
	protoS3     = "s3"
)

// loadProtos describes what each protocol's GET checks, for --help and the
// printed result.
var loadProtos = map[string]string{
	protoNative: "CRC-32C of the received bytes against the checksum the GET frame carries",
	protoHTTP:   "CRC-32C of the received bytes against the X-Ctxtier-Crc32c response header",
	protoS3:     "CRC-32C of the received bytes against the X-Amz-Checksum-Crc32c response header (asked for with x-amz-checksum-mode: ENABLED)",
}

// blockConn is one load client's connection through one protocol.
type blockConn interface {
	// getInto reads key's block into buf, checked end to end, and returns
	// its size.
	getInto(ctx context.Context, key block.Key, buf []byte) (int, error)
	// put stores data under key with its CRC-32C, which the server checks.
	put(ctx context.Context, key block.Key, data []byte, sum uint32) error
	close()
}

// dialLoad opens one client of cfg.Proto; depth is the requests it will
// have in flight at once.
func dialLoad(ctx context.Context, cfg loadConfig, depth int) (blockConn, error) {
	switch cfg.Proto {
	case protoHTTP:
		hc := client.HTTPDefaultConfig()
		hc.BaseURL = cfg.HTTPURL
		hc.MaxIdleConnsPerHost = depth
		c, err := client.NewHTTP(hc)
		if err != nil {
			return nil, err
		}
		return httpLoadConn{c}, nil
	case protoS3:
		return newS3LoadConn(cfg, depth)
	}
	c, err := client.Dial(ctx, cfg.Addr, client.Options{Conns: 1})
	if err != nil {
		return nil, err
	}
	return nativeLoadConn{c}, nil
}

type nativeLoadConn struct{ c *client.Client }

func (n nativeLoadConn) getInto(ctx context.Context, key block.Key, buf []byte) (int, error) {
	return n.c.GetInto(ctx, key, buf)
}

func (n nativeLoadConn) put(ctx context.Context, key block.Key, data []byte, sum uint32) error {
	return n.c.PutWithOptions(ctx, key, data, block.PutOptions{Sum: sum, HasSum: true})
}

func (n nativeLoadConn) close() { n.c.Close() }

// httpLoadConn is the Go client's HTTP mode: kept-alive connections, the
// body read into the caller's buffer, checked against X-Ctxtier-Crc32c.
type httpLoadConn struct{ c *client.HTTPClient }

func (h httpLoadConn) getInto(ctx context.Context, key block.Key, buf []byte) (int, error) {
	return h.c.GetInto(ctx, key, buf)
}

func (h httpLoadConn) put(ctx context.Context, key block.Key, data []byte, sum uint32) error {
	return h.c.Put(ctx, key, data, block.PutOptions{Sum: sum, HasSum: true})
}

func (h httpLoadConn) close() { h.c.Close() }

// s3LoadConn is a plain S3 client of ctxd's S3 endpoint: a block is the
// object named by its 16-hex-digit hash in the bucket named by its
// namespace; requests are SigV4-signed (UNSIGNED-PAYLOAD) with
// internal/sigv4.
type s3LoadConn struct {
	base   string
	hc     *http.Client
	tr     *http.Transport
	signer *sigv4.Signer
}

func newS3LoadConn(cfg loadConfig, depth int) (*s3LoadConn, error) {
	sc := sigv4.DefaultConfig()
	sc.AccessKeyID, sc.Secret = cfg.S3AccessKey, cfg.S3SecretKey
	signer, err := sigv4.New(sc)
	if err != nil {
		return nil, fmt.Errorf("--proto s3 needs --s3-access-key and --s3-secret-key: %w", err)
	}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: depth,
		DisableCompression:  true,
		ReadBufferSize:      256 << 10,
		WriteBufferSize:     256 << 10,
	}
	return &s3LoadConn{base: strings.TrimRight(cfg.S3URL, "/"), hc: &http.Client{Transport: tr}, tr: tr, signer: signer}, nil
}

func (s *s3LoadConn) request(ctx context.Context, method string, key block.Key, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.base+"/"+key.Namespace+"/"+block.FormatHash(key.Hash), body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Amz-Content-Sha256", sigv4.UnsignedPayload)
	return req, nil
}

func (s *s3LoadConn) do(req *http.Request, want int) (*http.Response, error) {
	if err := s.signer.Sign(req, sigv4.UnsignedPayload, time.Now()); err != nil {
		return nil, err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		resp.Body.Close()
		return nil, fmt.Errorf("s3 %s %s: status %d: %s", req.Method, req.URL.Path, resp.StatusCode, msg)
	}
	return resp, nil
}

func (s *s3LoadConn) getInto(ctx context.Context, key block.Key, buf []byte) (int, error) {
	req, err := s.request(ctx, http.MethodGet, key, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("X-Amz-Checksum-Mode", "ENABLED")
	resp, err := s.do(req, http.StatusOK)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	want, err := parseS3CRC32C(resp.Header.Get("X-Amz-Checksum-Crc32c"))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", key, err)
	}
	size := resp.ContentLength
	if size < 0 || size > int64(len(buf)) {
		return 0, fmt.Errorf("%s: Content-Length %d, buffer of %d", key, size, len(buf))
	}
	n, err := io.ReadFull(resp.Body, buf[:size])
	if err != nil {
		return 0, fmt.Errorf("%s: reading body: %w", key, err)
	}
	if got := block.Checksum(buf[:n]); got != want {
		return 0, fmt.Errorf("%w: %s: X-Amz-Checksum-Crc32c says %08x, received bytes are %08x", block.ErrChecksum, key, want, got)
	}
	return n, nil
}

func (s *s3LoadConn) put(ctx context.Context, key block.Key, data []byte, sum uint32) error {
	req, err := s.request(ctx, http.MethodPut, key, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.ContentLength = int64(len(data))
	req.Header.Set("X-Amz-Checksum-Crc32c", base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, sum)))
	resp, err := s.do(req, http.StatusOK)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

func (s *s3LoadConn) close() { s.tr.CloseIdleConnections() }

// parseS3CRC32C decodes an X-Amz-Checksum-Crc32c value: the big-endian
// CRC-32C in base64.
func parseS3CRC32C(v string) (uint32, error) {
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil || len(b) != 4 {
		return 0, fmt.Errorf("%w: response carries no valid X-Amz-Checksum-Crc32c (%q)", block.ErrChecksum, v)
	}
	return binary.BigEndian.Uint32(b), nil
}

// checkProto validates --proto.
func checkProto(p string) error {
	if _, ok := loadProtos[p]; !ok {
		return fmt.Errorf("--proto %q: want %s, %s or %s", p, protoNative, protoHTTP, protoS3)
	}
	return nil
}
