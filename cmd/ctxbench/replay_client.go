package main

// Adapters that put ctxd's HTTP APIs behind the replay's interfaces: the
// block API (gateway/client.HTTPClient) as a replay.TierClient and the
// routing API (POST /v1/route/query, /events, /load) as a replay.RouterClient.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/router"
	"github.com/ctxtier/ctxtier/gateway/client"
	"github.com/ctxtier/ctxtier/sim/replay"
)

// httpTier serves replay.TierClient over the HTTP block API.
type httpTier struct{ c *client.HTTPClient }

var _ replay.TierClient = httpTier{}

func (t httpTier) Lookup(ctx context.Context, keys []block.Key) (int, error) {
	return t.c.Lookup(ctx, keys)
}

func (t httpTier) GetBatchInto(ctx context.Context, keys []block.Key, bufs [][]byte) ([]int, []error, error) {
	data, errs, err := t.c.GetBatch(ctx, keys)
	if err != nil {
		return nil, nil, err
	}
	sizes := make([]int, len(keys))
	for i, d := range data {
		if errs[i] != nil {
			continue
		}
		if len(d) > len(bufs[i]) {
			errs[i] = fmt.Errorf("%w: %s: block of %d bytes, buffer of %d", block.ErrTooLarge, keys[i], len(d), len(bufs[i]))
			continue
		}
		sizes[i] = copy(bufs[i], d)
	}
	return sizes, errs, nil
}

func (t httpTier) PutBatch(ctx context.Context, keys []block.Key, data [][]byte, opts []block.PutOptions) ([]error, error) {
	items := make([]client.HTTPPutItem, len(keys))
	for i := range keys {
		items[i] = client.HTTPPutItem{Key: keys[i], Data: data[i], Opts: opts[i]}
	}
	return t.c.PutBatch(ctx, items)
}

// nativeTier serves replay.TierClient over the native protocol.
type nativeTier struct{ c *client.Client }

var _ replay.TierClient = nativeTier{}

func (t nativeTier) Lookup(ctx context.Context, keys []block.Key) (int, error) {
	return t.c.Lookup(ctx, keys)
}

func (t nativeTier) GetBatchInto(ctx context.Context, keys []block.Key, bufs [][]byte) ([]int, []error, error) {
	return t.c.GetBatchInto(ctx, keys, bufs)
}

func (t nativeTier) PutBatch(ctx context.Context, keys []block.Key, data [][]byte, opts []block.PutOptions) ([]error, error) {
	items := make([]client.PutItem, len(keys))
	for i := range keys {
		items[i] = client.PutItem{Key: keys[i], Data: data[i], Opts: opts[i]}
	}
	return t.c.PutBatch(ctx, items)
}

// tierClients returns the replay's tier clients: the frontend's (the
// router's lookups; the workers' calls too when concurrency is 1) and,
// with concurrency above 1, one per lane, each with its own connections.
// Over the native protocol when native is set, else over HTTP (hc); close
// releases them all.
func tierClients(ctx context.Context, hc client.HTTPConfig, native string, lanes int) (front replay.TierClient, own []replay.TierClient, closeAll func(), err error) {
	var closers []func() error
	closeAll = func() {
		for _, c := range closers {
			_ = c()
		}
	}
	open := func(conns int) (replay.TierClient, error) {
		if native != "" {
			c, err := client.Dial(ctx, native, client.Options{Conns: conns})
			if err != nil {
				return nil, fmt.Errorf("native %s: %w", native, err)
			}
			closers = append(closers, c.Close)
			return nativeTier{c}, nil
		}
		c, err := client.NewHTTP(hc)
		if err != nil {
			return nil, err
		}
		closers = append(closers, c.Close)
		return httpTier{c}, nil
	}
	if front, err = open(2); err != nil {
		closeAll()
		return nil, nil, nil, err
	}
	for range lanes {
		c, err := open(1)
		if err != nil {
			closeAll()
			return nil, nil, nil, err
		}
		own = append(own, c)
	}
	return front, own, closeAll, nil
}

// httpRouter serves replay.RouterClient over ctxd's routing API at base
// (e.g. http://127.0.0.1:7401/v1/route) for one namespace.
type httpRouter struct {
	base string
	ns   string
	hc   *http.Client
}

var _ replay.RouterClient = (*httpRouter)(nil)

func newHTTPRouter(base, ns string) *httpRouter {
	return &httpRouter{base: strings.TrimRight(base, "/"), ns: ns, hc: &http.Client{}}
}

func (r *httpRouter) post(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%w: router %s: %v", block.ErrUnavailable, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("%w: router %s: %v", block.ErrUnavailable, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("router %s: HTTP %d: %s", path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("router %s: bad answer: %v", path, err)
		}
	}
	return nil
}

func (r *httpRouter) Route(ctx context.Context, hashes []uint64) (replay.RouteAnswer, error) {
	zero := 0.0
	q := map[string]any{"namespace": r.ns, "block_hashes": hashes, "temperature": zero}
	var res struct {
		Recommended string `json:"recommended"`
		TierDepth   int    `json:"tier_depth"`
		TierError   string `json:"tier_error"`
	}
	if err := r.post(ctx, "/query", q, &res); err != nil {
		return replay.RouteAnswer{}, err
	}
	if res.TierError != "" {
		return replay.RouteAnswer{}, fmt.Errorf("router tier lookup: %s", res.TierError)
	}
	return replay.RouteAnswer{Worker: res.Recommended, TierDepth: res.TierDepth}, nil
}

type jsonEvent struct {
	Type      string   `json:"type"`
	Hashes    []uint64 `json:"block_hashes"`
	Parent    *uint64  `json:"parent_block_hash"`
	BlockSize int      `json:"block_size,omitempty"`
	Medium    string   `json:"medium"`
}

func (r *httpRouter) Apply(ctx context.Context, worker string, evs []router.Event) error {
	out := make([]jsonEvent, 0, len(evs))
	for _, e := range evs {
		je := jsonEvent{Hashes: e.Hashes, Medium: "GPU", BlockSize: e.BlockSize}
		switch e.Kind {
		case router.Stored:
			je.Type = "BlockStored"
			if e.HasParent {
				p := e.Parent
				je.Parent = &p
			}
		case router.Removed:
			je.Type = "BlockRemoved"
		case router.Cleared:
			je.Type = "AllBlocksCleared"
		default:
			return fmt.Errorf("router events: unknown kind %v", e.Kind)
		}
		out = append(out, je)
	}
	return r.post(ctx, "/events", map[string]any{"namespace": r.ns, "worker": worker, "events": out}, nil)
}

func (r *httpRouter) ReportLoad(ctx context.Context, worker string, l router.Load) error {
	return r.post(ctx, "/load", map[string]any{"namespace": r.ns, "worker": worker,
		"active_prefill_blocks": l.PrefillBlocks, "active_decode_blocks": l.DecodeBlocks}, nil)
}
