package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster"
	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
)

// LeaderHintError is a 503 "not the leader" reply that named the leader:
// retry at LeaderHTTPAddr. errors.Is matches cluster.ErrNotLeader and
// block.ErrUnavailable.
type LeaderHintError struct {
	LeaderID       string
	LeaderHTTPAddr string
	Err            error
}

func (e *LeaderHintError) Error() string {
	return fmt.Sprintf("%v (leader %s at %s)", e.Err, e.LeaderID, e.LeaderHTTPAddr)
}

// Unwrap exposes the server's error and cluster.ErrNotLeader.
func (e *LeaderHintError) Unwrap() []error { return []error{e.Err, cluster.ErrNotLeader} }

// Client calls one node's cluster endpoints over HTTP: its control
// endpoints here (join, session end, traffic), and, through Do, the
// operator endpoints gateway/clusterapi's Client builds on it.
type Client struct {
	base string
	cfg  Config
}

// NewClient returns a client of the node whose HTTP API is at addr
// ("host:port", https:// under WithTLS, or a URL).
func NewClient(addr string, opts ...Option) *Client {
	cfg := build(opts)
	return &Client{base: cfg.baseURL(addr), cfg: cfg}
}

// At returns a client of the node at addr with c's configuration.
func (c *Client) At(addr string) *Client {
	return &Client{base: c.cfg.baseURL(addr), cfg: c.cfg}
}

// Join adds m as a voter (through the leader, wherever this node sends it).
func (c *Client) Join(ctx context.Context, m Member) (Member, error) {
	var out JoinResponse
	err := c.Do(ctx, http.MethodPost, PathJoin, m, &out)
	return out.Member, err
}

// Do sends in (JSON; nil for no body) to path with method, bounded by
// Config.Timeout, and decodes a 200 reply into out. An error reply is
// returned as its sentinel (a *LeaderHintError for a 503 naming the
// leader); transport failures and undecodable replies wrap
// block.ErrUnavailable.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%w: encoding request: %v", block.ErrInvalidArgument, err)
		}
		body = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("%w: %v", block.ErrInvalidArgument, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", httpwire.ContentTypeJSON)
	}
	b, err := send(c.cfg, req)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%w: %s %s: bad reply: %v", block.ErrUnavailable, method, c.base+path, err)
	}
	return nil
}

// send runs req and returns the body of a 200 reply, else the reply's
// error (a *LeaderHintError for a 503 naming the leader). Transport
// failures wrap block.ErrUnavailable.
func send(cfg Config, req *http.Request) ([]byte, error) {
	if cfg.Token != "" {
		req.Header.Set(HeaderToken, cfg.Token)
	}
	target := req.URL.Host
	resp, err := cfg.Client.Do(req)
	if err != nil {
		if cerr := req.Context().Err(); cerr != nil {
			return nil, fmt.Errorf("%w: %s %s: %w", block.ErrUnavailable, req.Method, req.URL, cerr)
		}
		return nil, fmt.Errorf("%w: %s %s: %v", block.ErrUnavailable, req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, cfg.MaxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading reply of %s: %v", block.ErrUnavailable, target, err)
	}
	if int64(len(b)) > cfg.MaxBodyBytes {
		return nil, fmt.Errorf("%w: reply of %s over %d bytes", block.ErrUnavailable, target, cfg.MaxBodyBytes)
	}
	if resp.StatusCode == http.StatusOK {
		return b, nil
	}
	rerr := responseError(resp, b)
	if hint := resp.Header.Get(HeaderLeader); hint != "" && resp.StatusCode == http.StatusServiceUnavailable {
		return nil, &LeaderHintError{LeaderID: resp.Header.Get(HeaderLeaderID), LeaderHTTPAddr: hint, Err: rerr}
	}
	return nil, rerr
}

// permanent reports errors that retrying elsewhere cannot fix.
func permanent(err error) bool {
	for _, s := range []error{block.ErrInvalidArgument, block.ErrUnauthenticated, block.ErrPermissionDenied, block.ErrTooLarge} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// Join adds self to a running cluster: it posts self's member record to
// the join endpoint of each of addrs (HTTP addresses of members) in turn,
// follows a "not the leader" reply's leader hint at once, and otherwise
// backs off (100 ms doubling to 2 s, jittered) between rounds until one
// succeeds or ctx ends. Joining is idempotent, so self may already be a
// member. A bad record, a wrong token or a refused request is returned
// at once. addrs may include self's own address (a node answers 503 until
// it knows a leader).
func Join(ctx context.Context, addrs []string, self cluster.Member, opts ...Option) error {
	if len(addrs) == 0 {
		return fmt.Errorf("%w: join: no addresses", block.ErrInvalidArgument)
	}
	m := FromMember(self)
	m.State = ""
	if _, err := m.FSM(); err != nil {
		return fmt.Errorf("join: %w", err)
	}
	cl := NewClient("", opts...)
	try := func(addr string) error {
		_, err := cl.At(addr).Join(ctx, m)
		return err
	}
	backoff := 100 * time.Millisecond
	var last error
	for {
		for _, addr := range addrs {
			err := try(addr)
			var hint *LeaderHintError
			if errors.As(err, &hint) && hint.LeaderHTTPAddr != "" && !slices.Contains(addrs, hint.LeaderHTTPAddr) {
				err = try(hint.LeaderHTTPAddr)
			}
			if err == nil {
				return nil
			}
			if permanent(err) {
				return fmt.Errorf("join via %s: %w", addr, err)
			}
			last = err
			if ctx.Err() != nil {
				break
			}
		}
		sleep := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: join via %s: %w (last error: %v)", block.ErrUnavailable, strings.Join(addrs, ","), ctx.Err(), last)
		case <-time.After(sleep):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}
