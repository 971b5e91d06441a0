package clusterapi

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

// Client calls one node's cluster API (ctxctl cluster uses it).
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

// Status returns the node's view of the cluster.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var st Status
	err := c.do(ctx, http.MethodGet, PathStatus, nil, &st)
	return st, err
}

// Join adds m as a voter (through the leader, wherever this node sends it).
func (c *Client) Join(ctx context.Context, m Member) (Member, error) {
	var out JoinResponse
	err := c.do(ctx, http.MethodPost, PathJoin, m, &out)
	return out.Member, err
}

// Remove takes member id out of the cluster.
func (c *Client) Remove(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, PathRemove, RemoveRequest{ID: id}, &RemoveResponse{})
}

// ForceRemove takes member id out of the cluster even though the index
// still places shards on it: blocks with parity elsewhere are repaired,
// the others are lost.
func (c *Client) ForceRemove(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, PathRemove, RemoveRequest{ID: id, Force: true}, &RemoveResponse{})
}

// Drain marks member id draining (through the leader) and returns what it
// held when the drain started. See WaitDrained.
func (c *Client) Drain(ctx context.Context, id string) (DrainResponse, error) {
	var out DrainResponse
	err := c.do(ctx, http.MethodPost, PathDrain, DrainRequest{ID: id}, &out)
	return out, err
}

// CancelDrain makes a draining member alive again; what was moved stays.
func (c *Client) CancelDrain(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, PathDrain, DrainRequest{ID: id, Cancel: true}, &DrainResponse{})
}

// ErrDrainStalled is returned (wrapped, with block.ErrUnavailable) by
// WaitDrained when two complete passes of the leader moved nothing off a
// draining member and failed on some of its blocks.
var ErrDrainStalled = errors.New("clusterapi: drain stalled")

// WaitDrained waits until the index places nothing on any of ids, which
// must be draining. Every interval it reads the leader's status (through
// the node this client talks to), calls progress, when set, with each
// member's drain status, and returns nil once every drain is done. It
// fails when the leader says a member is not draining, or when a drain
// stalls (ErrDrainStalled): its remaining blocks cannot be moved while the
// member does not answer, or while no member can take them.
func (c *Client) WaitDrained(ctx context.Context, ids []string, interval time.Duration, progress func(cluster.DrainStatus)) error {
	type seen struct {
		pass    time.Time
		stalled int
	}
	track := map[string]*seen{}
	for _, id := range ids {
		track[id] = &seen{}
	}
	for {
		st, err := c.Status(ctx)
		if err == nil && st.State != "leader" && st.Leader != nil && st.Leader.HTTPAddr != "" {
			if lst, lerr := (&Client{base: c.cfg.baseURL(st.Leader.HTTPAddr), cfg: c.cfg}).Status(ctx); lerr == nil {
				st = lst
			}
		}
		if err == nil {
			done := 0
			for _, id := range ids {
				i := slices.IndexFunc(st.Drains, func(d cluster.DrainStatus) bool { return d.ID == id })
				if i < 0 {
					if st.State == "leader" {
						return fmt.Errorf("%w: %s is not draining (%s)", block.ErrInvalidArgument, id, memberState(st, id))
					}
					continue // a lagging follower: ask again
				}
				d := st.Drains[i]
				if progress != nil {
					progress(d)
				}
				if d.Done {
					done++
					continue
				}
				tr := track[id]
				if d.Active && !d.LastPass.IsZero() && !d.LastPass.Equal(tr.pass) {
					tr.pass = d.LastPass
					if d.Stalled {
						tr.stalled++
					} else {
						tr.stalled = 0
					}
				}
				if tr.stalled >= 2 {
					why := "they could not be read, or written elsewhere"
					if d.Unreachable {
						why = id + " does not answer and they have no other readable copy"
					}
					return fmt.Errorf("%w: %w: %d blocks (%d shards) on %s cannot be moved: %s; bring it back, or remove it with --force to give them up",
						block.ErrUnavailable, ErrDrainStalled, d.Stuck, d.ShardsLeft, id, why)
				}
			}
			if done == len(ids) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: waiting for the drain of %s: %w (last error: %v)", block.ErrUnavailable, strings.Join(ids, ","), ctx.Err(), err)
		case <-time.After(interval):
		}
	}
}

// memberState names id's state in st ("not a member" when absent).
func memberState(st Status, id string) string {
	for _, m := range st.Members {
		if m.ID == id {
			return "state " + m.State
		}
	}
	return "not a member"
}

// TransferLeadership hands leadership to id ("" for any up-to-date voter).
func (c *Client) TransferLeadership(ctx context.Context, id string) (TransferResponse, error) {
	var out TransferResponse
	err := c.do(ctx, http.MethodPost, PathTransfer, TransferRequest{ID: id}, &out)
	return out, err
}

// Repair returns the node's repair progress (block.ErrNotFound when it
// reports none).
func (c *Client) Repair(ctx context.Context) (RepairResponse, error) {
	var out RepairResponse
	err := c.do(ctx, http.MethodGet, PathRepair, nil, &out)
	return out, err
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
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
	cfg := build(opts)
	try := func(addr string) error {
		_, err := (&Client{base: cfg.baseURL(addr), cfg: cfg}).Join(ctx, m)
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

// Forwarder sends proposals from a follower to the leader's
// internal/propose endpoint.
type Forwarder struct {
	cfg Config
}

// NewForwarder returns a forwarder over httpClient (nil: a client with
// the configured timeout). Options set the token and body bound.
func NewForwarder(httpClient *http.Client, opts ...Option) *Forwarder {
	if httpClient != nil {
		opts = append(opts, WithHTTPClient(httpClient))
	}
	return &Forwarder{cfg: build(opts)}
}

// Forward posts req to leader's internal/propose endpoint and returns the
// reply's bytes. Every failure to get an answer from a leader (no HTTP
// address, transport error, timeout, a node that is not the leader, a 5xx
// reply) wraps block.ErrUnavailable, and a 503 naming the current leader
// is a *LeaderHintError (errors.Is cluster.ErrNotLeader). A 4xx reply keeps
// its own sentinel (block.ErrInvalidArgument, block.ErrConflict...): the
// leader ran the proposal and refused it.
func (f *Forwarder) Forward(ctx context.Context, leader cluster.Member, req []byte) ([]byte, error) {
	return f.post(ctx, leader, PathPropose, httpwire.ContentTypeBinary, req)
}

// post sends body to one of leader's internal endpoints and returns the
// reply's bytes, with Forward's error mapping.
func (f *Forwarder) post(ctx context.Context, leader cluster.Member, path, contentType string, body []byte) ([]byte, error) {
	if leader.HTTPAddr == "" {
		return nil, fmt.Errorf("%w: leader %q has no HTTP address", block.ErrUnavailable, leader.ID)
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, f.cfg.baseURL(leader.HTTPAddr)+path, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: leader %s address %q: %v", block.ErrUnavailable, leader.ID, leader.HTTPAddr, err)
	}
	hreq.Header.Set("Content-Type", contentType)
	out, err := send(f.cfg, hreq)
	if err == nil {
		return out, nil
	}
	if errors.Is(err, block.ErrUnavailable) || errors.Is(err, block.ErrNoSpace) || clientError(err) {
		return nil, err
	}
	return nil, fmt.Errorf("%w: %s to leader %s: %w", block.ErrUnavailable, path, leader.ID, err)
}

// clientError reports a 4xx-class error: the leader refused the request.
func clientError(err error) bool {
	for _, s := range []error{block.ErrInvalidArgument, block.ErrInvalidKey, block.ErrConflict, block.ErrNotFound, block.ErrUnknownNamespace,
		block.ErrTooLarge, block.ErrChecksum, block.ErrUnauthenticated, block.ErrPermissionDenied, block.ErrNamespaceExists, block.ErrNamespaceNotEmpty} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}
