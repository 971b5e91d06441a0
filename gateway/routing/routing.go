// Package routing serves the router over HTTP/JSON: routing queries, the
// HTTP form of engines' KV events, and worker load reports. Handler returns
// one http.Handler for all of it, to mount on ctxd's HTTP server.
package routing

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/router"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
	"github.com/ctxtier/ctxtier/gateway/kvevent"
)

// MaxQueryBody bounds a query's JSON body.
const MaxQueryBody = 16 << 20

// Handler serves, under prefix (e.g. "/v1/route", or "" when the caller
// strips the prefix itself):
//
//	POST {prefix}/query    a routing query (QueryRequest) -> router.Result
//	POST {prefix}/events   KV events, load and dumps (kvevent.Envelope JSON)
//	POST {prefix}/load     a load report (LoadRequest)
//	GET  {prefix}/workers  ?namespace=NAME: the namespace's workers
//	GET  {prefix}/stats    index sizes per namespace
//
// Errors are {"code": NAME, "message": TEXT} with the status errcode maps.
func Handler(prefix string, r *router.Router, in *kvevent.Ingestor, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	prefix = strings.TrimSuffix(prefix, "/")
	h := &handler{r: r, in: in, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+prefix+"/query", h.query)
	mux.HandleFunc("POST "+prefix+"/events", h.events)
	mux.HandleFunc("POST "+prefix+"/load", h.load)
	mux.HandleFunc("GET "+prefix+"/workers", h.workers)
	mux.HandleFunc("GET "+prefix+"/stats", h.stats)
	return mux
}

type handler struct {
	r   *router.Router
	in  *kvevent.Ingestor
	log *slog.Logger
}

// QueryRequest is the JSON body of a routing query. Give block_hashes, or
// token_ids for the server to hash with the namespace's scheme.
type QueryRequest struct {
	Namespace   string         `json:"namespace"`
	BlockHashes []kvevent.Hash `json:"block_hashes"`
	TokenIDs    []uint32       `json:"token_ids"`
	Temperature *float64       `json:"temperature"`
	MaxWorkers  int            `json:"max_workers"`
	Commit      bool           `json:"commit"`
	Hints       struct {
		Priority             uint8         `json:"priority"`
		ExpectedOutputTokens int           `json:"expected_output_tokens"`
		CacheControl         *CacheControl `json:"cache_control"`
		// Retain is a read hint: "30s" or 30 (seconds), as the HTTP
		// API's X-Ctxtier-Retain on a read; the prefix the tier holds is
		// re-armed for that long (router.Hints.Retain).
		Retain json.RawMessage `json:"retain"`
	} `json:"hints"`
}

// parseRetain reads hints.retain: a JSON string or number, parsed by the
// HTTP API's X-Ctxtier-Retain parser; absent or null is none, and a
// window that is not positive is InvalidArgument.
func parseRetain(raw json.RawMessage) (time.Duration, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return 0, fmt.Errorf("%w: hints.retain %s must be seconds or a duration like \"30s\"", block.ErrInvalidArgument, raw)
		}
		s = n.String()
	}
	d, err := httpwire.ParseRetain(s)
	if err == nil {
		err = block.ValidateRetain(d)
	}
	if err != nil {
		return 0, fmt.Errorf("hints.retain: %w", err)
	}
	return d, nil
}

// CacheControl is an agent's cache_control hint: {"type": "ephemeral",
// "ttl": "5m"} (a Go duration, or "ttl_seconds": 300). It pins the prefix
// ctxtier holds for that long.
type CacheControl struct {
	Type       string `json:"type"`
	TTL        string `json:"ttl"`
	TTLSeconds int64  `json:"ttl_seconds"`
}

func (c *CacheControl) duration() (time.Duration, error) {
	if c == nil {
		return 0, nil
	}
	if c.Type != "" && c.Type != "ephemeral" {
		return 0, fmt.Errorf("%w: cache_control type %q (only \"ephemeral\")", block.ErrInvalidArgument, c.Type)
	}
	switch {
	case c.TTL != "" && c.TTLSeconds != 0:
		return 0, fmt.Errorf("%w: cache_control has both ttl and ttl_seconds", block.ErrInvalidArgument)
	case c.TTL != "":
		d, err := time.ParseDuration(c.TTL)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("%w: cache_control ttl %q is not a positive duration", block.ErrInvalidArgument, c.TTL)
		}
		return d, nil
	case c.TTLSeconds > 0:
		return time.Duration(c.TTLSeconds) * time.Second, nil
	case c.TTLSeconds < 0:
		return 0, fmt.Errorf("%w: cache_control ttl_seconds is negative", block.ErrInvalidArgument)
	}
	return 5 * time.Minute, nil // the ephemeral default
}

func (h *handler) query(w http.ResponseWriter, req *http.Request) {
	var q QueryRequest
	if err := decodeJSON(w, req, MaxQueryBody, &q); err != nil {
		writeErr(w, err)
		return
	}
	if q.Namespace == "" {
		q.Namespace = block.DefaultNamespace
	}
	ttl, err := q.Hints.CacheControl.duration()
	if err != nil {
		writeErr(w, err)
		return
	}
	retain, err := parseRetain(q.Hints.Retain)
	if err != nil {
		writeErr(w, err)
		return
	}
	rq := router.Query{
		Namespace: q.Namespace, TokenIDs: q.TokenIDs, Temperature: q.Temperature,
		MaxWorkers: q.MaxWorkers, Commit: q.Commit,
		Hints: router.Hints{Priority: q.Hints.Priority, ExpectedOutputTokens: q.Hints.ExpectedOutputTokens, PinTTL: ttl, Retain: retain},
	}
	if len(q.BlockHashes) > 0 {
		rq.BlockHashes = make([]uint64, len(q.BlockHashes))
		for i, x := range q.BlockHashes {
			rq.BlockHashes[i] = uint64(x)
		}
	}
	res, err := h.r.Route(req.Context(), rq)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (h *handler) events(w http.ResponseWriter, req *http.Request) {
	env, err := kvevent.DecodeJSON(http.MaxBytesReader(w, req.Body, int64(h.in.Config().MaxPayload)+1), h.in.Config().MaxPayload)
	if err != nil {
		writeErr(w, err)
		return
	}
	var res kvevent.Result
	switch {
	case env.Dump:
		res, err = h.in.ApplyDump(env.Source, env.Seq, env.HasSeq, env.Stream, env.Batch)
	case len(env.Batch.Events) > 0 || env.Batch.Skipped > 0 || env.HasSeq:
		res, err = h.in.Ingest(req.Context(), env.Source, env.Seq, env.HasSeq, env.Stream, env.Batch, nil)
	}
	if err == nil && env.Load != nil {
		err = h.in.ReportLoad(env.Source, *env.Load)
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// LoadRequest is a worker's load report.
type LoadRequest struct {
	Namespace string `json:"namespace"`
	Worker    string `json:"worker"`
	router.Load
}

func (h *handler) load(w http.ResponseWriter, req *http.Request) {
	var l LoadRequest
	if err := decodeJSON(w, req, 1<<16, &l); err != nil {
		writeErr(w, err)
		return
	}
	if l.Namespace == "" {
		l.Namespace = block.DefaultNamespace
	}
	if err := block.ValidNamespaceName(l.Namespace); err != nil {
		writeErr(w, err)
		return
	}
	if err := h.in.ReportLoad(kvevent.Source{Proto: "http", Namespace: l.Namespace, Worker: l.Worker}, l.Load); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *handler) workers(w http.ResponseWriter, req *http.Request) {
	ns := req.URL.Query().Get("namespace")
	if ns == "" {
		ns = block.DefaultNamespace
	}
	if err := block.ValidNamespaceName(ns); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"namespace": ns, "workers": h.r.Workers(ns)})
}

func (h *handler) stats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"namespaces":          h.r.Stats(),
		"fetch_bytes_per_sec": h.r.FetchBytesPerSec(),
	})
}

func decodeJSON(w http.ResponseWriter, req *http.Request, max int64, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, req.Body, max))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			return fmt.Errorf("%w: body over %d bytes", block.ErrTooLarge, max)
		}
		return fmt.Errorf("%w: JSON body: %v", block.ErrInvalidArgument, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: JSON body: trailing data", block.ErrInvalidArgument)
	}
	return nil
}

type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func writeErr(w http.ResponseWriter, err error) {
	c := errcode.Of(err)
	writeJSON(w, c.HTTPStatus(), errorBody{Code: c.String(), Message: err.Error()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
