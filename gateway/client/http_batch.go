package client

// Lookup and the batch endpoints of the HTTP client (see http.go).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
)

// httpBatchNS returns the one namespace all keys share.
func httpBatchNS(keys []block.Key) (string, error) {
	if len(keys) == 0 {
		return "", nil
	}
	ns := keys[0].Namespace
	for _, k := range keys[1:] {
		if k.Namespace != ns {
			return "", fmt.Errorf("%w: a batch spans namespaces %q and %q", block.ErrInvalidArgument, ns, k.Namespace)
		}
	}
	return ns, nil
}

// Lookup returns how many leading keys are present (one namespace).
func (c *HTTPClient) Lookup(ctx context.Context, keys []block.Key) (int, error) {
	ns, err := httpBatchNS(keys)
	if err != nil || len(keys) == 0 {
		return 0, err
	}
	var resp httpwire.LookupResponse
	if _, err := c.postJSON(ctx, c.nsURL(ns, "/lookup"), httpwire.LookupRequest{Hashes: httpwire.ObjectNames(keys)}, &resp); err != nil {
		return 0, err
	}
	return resp.Prefix, nil
}

// HTTPLookupResult answers a lookup by token ids.
type HTTPLookupResult struct {
	// Prefix is the number of leading blocks present; PrefixTokens the tokens they cover.
	Prefix       int
	PrefixTokens int
	// Keys is the chain of block keys the server computed from the tokens.
	Keys []block.Key
}

// LookupTokens asks which prefix of a token sequence the namespace holds;
// the server computes the chain with the namespace's hash scheme.
func (c *HTTPClient) LookupTokens(ctx context.Context, ns string, tokens []uint32) (HTTPLookupResult, error) {
	if tokens == nil {
		tokens = []uint32{}
	}
	var resp httpwire.LookupResponse
	if _, err := c.postJSON(ctx, c.nsURL(ns, "/lookup"), httpwire.LookupRequest{Tokens: tokens}, &resp); err != nil {
		return HTTPLookupResult{}, err
	}
	keys, err := httpwire.ParseKeys(ns, resp.Hashes, 0)
	if err != nil {
		return HTTPLookupResult{}, httpMalformed("lookup hashes: %v", err)
	}
	return HTTPLookupResult{Prefix: resp.Prefix, PrefixTokens: resp.PrefixTokens, Keys: keys}, nil
}

// ExistsBatch reports, per key, whether the block is present.
func (c *HTTPClient) ExistsBatch(ctx context.Context, keys []block.Key) ([]bool, error) {
	ns, err := httpBatchNS(keys)
	if err != nil || len(keys) == 0 {
		return []bool{}, err
	}
	var resp httpwire.ExistsResponse
	if _, err := c.postJSON(ctx, c.nsURL(ns, "/batch/exists"), httpwire.HashesRequest{Hashes: httpwire.ObjectNames(keys)}, &resp); err != nil {
		return nil, err
	}
	if len(resp.Exists) != len(keys) {
		return nil, httpMalformed("batch exists: %d answers for %d keys", len(resp.Exists), len(keys))
	}
	return resp.Exists, nil
}

// httpItemErrors maps a batch response's per-item results to errors (nil for OK).
func httpItemErrors(resp httpwire.BatchResponse, keys []block.Key) ([]error, error) {
	if len(resp.Results) != len(keys) {
		return nil, httpMalformed("%d results for %d items", len(resp.Results), len(keys))
	}
	errs := make([]error, len(keys))
	for i, r := range resp.Results {
		if r.Hash != keys[i].ObjectName() {
			return nil, httpMalformed("result %d names %q, want %q", i, r.Hash, keys[i].ObjectName())
		}
		if r.Code != "OK" {
			msg := r.Message
			if msg == "" {
				msg = r.Code
			}
			errs[i] = httpCodeErr(r.Code, msg)
		}
	}
	return errs, nil
}

// DeleteBatch deletes each key and returns one error (or nil) per key; the
// second result is a failure of the whole request.
func (c *HTTPClient) DeleteBatch(ctx context.Context, keys []block.Key) ([]error, error) {
	ns, err := httpBatchNS(keys)
	if err != nil || len(keys) == 0 {
		return []error{}, err
	}
	var resp httpwire.BatchResponse
	if _, err := c.postJSON(ctx, c.nsURL(ns, "/batch/delete"), httpwire.HashesRequest{Hashes: httpwire.ObjectNames(keys)}, &resp); err != nil {
		return nil, err
	}
	return httpItemErrors(resp, keys)
}

// HTTPPutItem is one block of a batch put.
type HTTPPutItem = httpwire.Part

// PutBatch stores items (one namespace) in one request and returns one error
// (or nil) per item; the second result is a failure of the whole request, in
// which case nothing was stored. Each item carries a checksum (computed here
// unless set).
func (c *HTTPClient) PutBatch(ctx context.Context, items []HTTPPutItem) ([]error, error) {
	keys := make([]block.Key, len(items))
	parts := make([]httpwire.Part, len(items))
	for i, it := range items {
		keys[i] = it.Key
		if !it.Opts.HasSum {
			it.Opts.Sum, it.Opts.HasSum = block.Checksum(it.Data), true
		}
		parts[i] = it
	}
	ns, err := httpBatchNS(keys)
	if err != nil || len(items) == 0 {
		return []error{}, err
	}
	boundary := httpwire.NewBoundary()
	body, size := httpwire.EncodeBatchPut(boundary, parts)
	req, err := c.newRequest(ctx, http.MethodPost, c.nsURL(ns, "/batch/put"), body)
	if err != nil {
		return nil, err
	}
	req.ContentLength = size
	req.GetBody = func() (io.ReadCloser, error) {
		b, _ := httpwire.EncodeBatchPut(boundary, parts)
		return io.NopCloser(b), nil
	}
	req.Header.Set("Content-Type", httpwire.MixedContentType(boundary))
	resp, err := c.do(req, http.StatusOK)
	if err != nil {
		return nil, err
	}
	defer httpDrain(resp)
	var br httpwire.BatchResponse
	if err := json.NewDecoder(resp.Body).Decode(&br); err != nil {
		return nil, httpMalformed("batch put: %v", err)
	}
	return httpItemErrors(br, keys)
}

// GetBatch fetches keys (one namespace) in one request. data[i] holds key
// i's verified bytes when errs[i] is nil; the third result is a failure of
// the whole request.
func (c *HTTPClient) GetBatch(ctx context.Context, keys []block.Key) (data [][]byte, errs []error, err error) {
	ns, err := httpBatchNS(keys)
	if err != nil || len(keys) == 0 {
		return [][]byte{}, []error{}, err
	}
	body, err := httpwire.EncodeJSON(httpwire.HashesRequest{Hashes: httpwire.ObjectNames(keys)})
	if err != nil {
		return nil, nil, err
	}
	req, err := c.newRequest(ctx, http.MethodPost, c.nsURL(ns, "/batch/get"), body)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", httpwire.ContentTypeJSON)
	resp, err := c.do(req, http.StatusOK)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	boundary, err := httpMixedBoundary(resp.Header.Get("Content-Type"))
	if err != nil {
		return nil, nil, err
	}
	parts, err := httpwire.ReadBatchGet(resp.Body, boundary, ns, httpwire.Limits{
		MaxItems: len(keys), MaxBlockSize: c.cfg.MaxBlockSize, MaxTotalBytes: c.cfg.MaxBatchBytes,
	})
	if err != nil {
		if errors.Is(err, block.ErrInvalidArgument) || errors.Is(err, block.ErrInvalidKey) {
			return nil, nil, httpMalformed("batch get: %v", err)
		}
		return nil, nil, err
	}
	if len(parts) != len(keys) {
		return nil, nil, httpMalformed("batch get: %d parts for %d keys", len(parts), len(keys))
	}
	data, errs = make([][]byte, len(keys)), make([]error, len(keys))
	for i, p := range parts {
		if p.Key != keys[i] {
			return nil, nil, httpMalformed("batch get: part %d is %s, want %s", i, p.Key, keys[i])
		}
		data[i], errs[i] = p.Data, p.Err
	}
	return data, errs, nil
}

func httpMixedBoundary(ct string) (string, error) {
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != httpwire.ContentTypeMixed || params["boundary"] == "" {
		return "", httpMalformed("content type %q is not multipart/mixed with a boundary", ct)
	}
	return params["boundary"], nil
}
