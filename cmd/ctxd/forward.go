package main

// STAND-IN until gateway/clusterapi merges: the proposal-forwarding
// endpoint and its client, implementing the contract agreed with it
// (POST the encoded proposal to leader.HTTPAddr + forwardPath, answer the
// encoded results). clusterapi's Handler and NewForwarder replace both.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster"
	"github.com/ctxtier/ctxtier/gateway/errcode"
	"github.com/ctxtier/ctxtier/raft/fsm"
)

const forwardPath = "/v1/cluster/internal/propose"

// httpForwarder posts proposals to the leader's HTTP listener.
type httpForwarder struct{ c *http.Client }

func newHTTPForwarder() *httpForwarder {
	return &httpForwarder{c: &http.Client{Timeout: 15 * time.Second}}
}

func (f *httpForwarder) Forward(ctx context.Context, leader fsm.Member, req []byte) ([]byte, error) {
	if leader.HTTPAddr == "" {
		return nil, fmt.Errorf("%w: leader %s has no HTTP address", block.ErrUnavailable, leader.ID)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+leader.HTTPAddr+forwardPath, bytes.NewReader(req))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/octet-stream")
	resp, err := f.c.Do(hr)
	if err != nil {
		return nil, fmt.Errorf("%w: forwarding to %s: %v", block.ErrUnavailable, leader.ID, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("%w: forwarding to %s: %v", block.ErrUnavailable, leader.ID, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: leader %s answered %d: %s", block.ErrUnavailable, leader.ID, resp.StatusCode, bytes.TrimSpace(body))
	}
	return body, nil
}

// forwardHandler is the leader's side.
func forwardHandler(b *cluster.Backend) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		req, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out, err := b.HandleForwarded(r.Context(), req)
		if err != nil {
			http.Error(w, err.Error(), errcode.Of(err).HTTPStatus())
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(out)
	})
}
