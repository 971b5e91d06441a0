package httpapi

import (
	"errors"
	"fmt"
	"mime"
	"mime/multipart"
	"net/http"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
)

// decodeJSONRequest decodes a JSON body of at most Config.MaxJSONBytes.
func (s *Server) decodeJSONRequest(w http.ResponseWriter, r *http.Request, v any) error {
	if r.ContentLength > s.cfg.MaxJSONBytes {
		return fmt.Errorf("%w: JSON body of %d bytes exceeds the limit of %d", block.ErrTooLarge, r.ContentLength, s.cfg.MaxJSONBytes)
	}
	if err := httpwire.DecodeJSONBody(http.MaxBytesReader(w, r.Body, s.cfg.MaxJSONBytes), v); err != nil {
		return bodyErr(err)
	}
	return nil
}

// batchKeys decodes a HashesRequest of a known namespace into keys, and
// returns that namespace. Any malformed hash fails the whole request
// before anything happens.
func (s *Server) batchKeys(w http.ResponseWriter, r *http.Request) ([]block.Key, block.Namespace, error) {
	ns, err := s.store.Namespace(r.PathValue("ns"))
	if err != nil {
		return nil, ns, err
	}
	var req httpwire.HashesRequest
	if err := s.decodeJSONRequest(w, r, &req); err != nil {
		return nil, ns, err
	}
	keys, err := httpwire.ParseKeys(ns.Name, req.Hashes, s.cfg.MaxBatchItems)
	return keys, ns, err
}

func (s *Server) lookup(w http.ResponseWriter, r *http.Request, opts ctxstore.ReadOptions) error {
	ns, err := s.store.Namespace(r.PathValue("ns"))
	if err != nil {
		return err
	}
	var req httpwire.LookupRequest
	if err := s.decodeJSONRequest(w, r, &req); err != nil {
		return err
	}
	var resp httpwire.LookupResponse
	var keys []block.Key
	switch {
	case req.Hashes != nil && req.Tokens != nil:
		return fmt.Errorf("%w: send either hashes or tokens, not both", block.ErrInvalidArgument)
	case req.Tokens != nil:
		if limit := s.cfg.MaxLookupBlocks * ns.BlockTokens; len(req.Tokens) > limit {
			return fmt.Errorf("%w: %d tokens exceed the lookup limit of %d (%d blocks of %d tokens)", block.ErrTooLarge, len(req.Tokens), limit, s.cfg.MaxLookupBlocks, ns.BlockTokens)
		}
		if keys, err = ns.ChainKeys(req.Tokens); err != nil {
			return err
		}
		resp.Hashes = httpwire.ObjectNames(keys)
	default:
		if keys, err = httpwire.ParseKeys(ns.Name, req.Hashes, s.cfg.MaxLookupBlocks); err != nil {
			return err
		}
	}
	opts.Namespace = ns
	n, err := s.store.Lookup(r.Context(), keys, opts)
	if err != nil {
		return err
	}
	resp.Prefix, resp.Blocks = n, len(keys)
	if req.Tokens != nil {
		resp.PrefixTokens = n * ns.BlockTokens
	}
	return writeJSON(w, http.StatusOK, resp)
}

func (s *Server) batchExists(w http.ResponseWriter, r *http.Request, opts ctxstore.ReadOptions) error {
	keys, ns, err := s.batchKeys(w, r)
	if err != nil {
		return err
	}
	opts.Namespace = ns
	exists, errs := s.store.ExistsBatch(r.Context(), keys, opts)
	// Exists fails only for the namespace, checked above; a failure here
	// (the namespace deleted meanwhile) fails the request.
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for range keys {
		s.metrics.Block(proto, "exists", errcode.OK)
	}
	return writeJSON(w, http.StatusOK, httpwire.ExistsResponse{Exists: exists})
}

// results renders per-item errors and counts them into metrics.
func (s *Server) results(op string, keys []block.Key, errs []error) httpwire.BatchResponse {
	resp := httpwire.BatchResponse{Results: make([]httpwire.ItemResult, len(keys))}
	for i, k := range keys {
		code := errcode.Of(errs[i])
		s.metrics.Block(proto, op, code)
		it := httpwire.ItemResult{Hash: k.ObjectName(), Code: code.String()}
		if errs[i] != nil {
			it.Message = errs[i].Error()
			resp.Failed++
		}
		resp.Results[i] = it
	}
	return resp
}

func (s *Server) batchDelete(w http.ResponseWriter, r *http.Request) error {
	keys, _, err := s.batchKeys(w, r)
	if err != nil {
		return err
	}
	errs := s.store.DeleteBatch(r.Context(), keys)
	return writeJSON(w, http.StatusOK, s.results("delete", keys, errs))
}

// batchGet streams one multipart/mixed part per requested key, in request
// order, each written straight from the tier's memory and released before the
// next is fetched, so at most one lease is held at a time. Items past
// MaxBatchBytes get a TooLarge part.
func (s *Server) batchGet(w http.ResponseWriter, r *http.Request, opts ctxstore.ReadOptions) error {
	keys, ns, err := s.batchKeys(w, r)
	if err != nil {
		return err
	}
	// One sync for the whole batch when the request asks for linearizable
	// reads (the per-key reads below then read locally).
	opts, err = s.store.Linearize(r.Context(), opts)
	if err != nil {
		return err
	}
	opts.Namespace = ns
	mw := multipart.NewWriter(w)
	w.Header().Set("Content-Type", httpwire.MixedContentType(mw.Boundary()))
	w.WriteHeader(http.StatusOK)
	var total int64
	for _, k := range keys {
		if err := r.Context().Err(); err != nil {
			return errStarted{err}
		}
		ref, gerr := s.store.Read(r.Context(), k, opts)
		if gerr == nil && total+int64(len(ref.Data)) > s.cfg.MaxBatchBytes {
			ref.Release()
			gerr = fmt.Errorf("%w: %s: batch response would exceed the limit of %d bytes; fetch it separately", block.ErrTooLarge, k, s.cfg.MaxBatchBytes)
		}
		s.metrics.Block(proto, "get", errcode.Of(gerr))
		if gerr != nil {
			h, body := httpwire.ErrorPart(k, gerr)
			pw, err := mw.CreatePart(h)
			if err == nil {
				_, err = pw.Write(body)
			}
			if err != nil {
				return errStarted{err}
			}
			continue
		}
		pw, err := mw.CreatePart(httpwire.GetPartHeader(k, len(ref.Data), ref.Sum, ref.Tier))
		if err == nil {
			_, err = pw.Write(ref.Data)
		}
		ref.Release()
		if err != nil {
			return errStarted{err}
		}
		total += int64(len(ref.Data))
		s.metrics.Bytes(proto, 0, int64(len(ref.Data)))
	}
	if err := mw.Close(); err != nil {
		return errStarted{err}
	}
	return nil
}

// batchPut reads the whole multipart body first (bounded by MaxBatchItems and
// MaxBatchBytes), so a malformed or truncated batch stores nothing; then it
// puts each block and reports each item's outcome.
func (s *Server) batchPut(w http.ResponseWriter, r *http.Request) error {
	ns, err := s.store.Namespace(r.PathValue("ns"))
	if err != nil {
		return err
	}
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != httpwire.ContentTypeMixed || params["boundary"] == "" {
		return fmt.Errorf("%w: batch put needs Content-Type: multipart/mixed; boundary=...", block.ErrInvalidArgument) //nolint:revive,staticcheck // "boundary=..." is the header's syntax
	}
	// Framing adds headers per part; allow for them on top of the payload
	// limit, which ReadBatchPut enforces exactly.
	bodyMax := s.cfg.MaxBatchBytes + int64(s.cfg.MaxBatchItems)*4096 + 4096
	if r.ContentLength > bodyMax {
		return fmt.Errorf("%w: batch body of %d bytes exceeds the limit of %d", block.ErrTooLarge, r.ContentLength, bodyMax)
	}
	parts, err := httpwire.ReadBatchPut(http.MaxBytesReader(w, r.Body, bodyMax), params["boundary"], ns.Name, httpwire.Limits{
		MaxItems:      s.cfg.MaxBatchItems,
		MaxBlockSize:  s.maxBlock(ns),
		MaxTotalBytes: s.cfg.MaxBatchBytes,
	})
	if err != nil {
		return bodyErr(err)
	}
	items := make([]ctxstore.PutItem, len(parts))
	keys := make([]block.Key, len(parts))
	var in int64
	for i, p := range parts {
		items[i] = ctxstore.PutItem{Key: p.Key, Data: p.Data, Opts: p.Opts}
		keys[i] = p.Key
		in += int64(len(p.Data))
	}
	s.metrics.Bytes(proto, in, 0)
	errs := s.store.PutBatch(r.Context(), items)
	return writeJSON(w, http.StatusOK, s.results("put", keys, errs))
}
