package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// node serves GET /ui/api/node[?id=ID]: a node's tiers and counters, this
// node's from its registry, another member's from that member's console.
func (c *Console) node(w http.ResponseWriter, r *http.Request) error {
	id := r.URL.Query().Get("id")
	if id == "" || id == c.deps.NodeID {
		f, err := gather(c.deps.Gatherer)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, nodeView(c.deps.NodeID, f))
		return nil
	}
	var v NodeView
	if err := c.fromPeer(r.Context(), id, "/ui/api/node", &v); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// series serves GET /ui/api/series[?id=ID]: a node's chart ring.
func (c *Console) series(w http.ResponseWriter, r *http.Request) error {
	id := r.URL.Query().Get("id")
	if id == "" || id == c.deps.NodeID {
		writeJSON(w, http.StatusOK, Series{NodeID: c.deps.NodeID, IntervalMS: c.sampler.Interval().Milliseconds(), Samples: c.sampler.Samples()})
		return nil
	}
	var s Series
	if err := c.fromPeer(r.Context(), id, "/ui/api/series", &s); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s)
	return nil
}

// fromPeer GETs path from member id's console (its HTTP address in the
// cluster status) into out.
func (c *Console) fromPeer(ctx context.Context, id, path string, out any) error {
	st, err := c.deps.Cluster.Status(ctx)
	if err != nil {
		return err
	}
	addr := ""
	for _, m := range st.Members {
		if m.ID == id {
			addr = m.HTTPAddr
		}
	}
	if addr == "" {
		return fmt.Errorf("%w: no member %q with an HTTP address", block.ErrNotFound, id)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.PeerTimeout)
	defer cancel()
	scheme := "http"
	if c.deps.PeerTLS != nil {
		scheme = "https"
	}
	u := (&url.URL{Scheme: scheme, Host: addr, Path: path}).String()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("%w: member %s: %v", block.ErrInvalidArgument, id, err)
	}
	resp, err := c.deps.Client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: member %s at %s: %v", block.ErrUnavailable, id, addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("%w: member %s: reading reply: %v", block.ErrUnavailable, id, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: member %s answered HTTP %d", block.ErrUnavailable, id, resp.StatusCode)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("%w: member %s: bad reply: %v", block.ErrUnavailable, id, err)
	}
	return nil
}
