package clusterapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster"
	"github.com/ctxtier/ctxtier/ctxstore/cluster/control"
)

// Client calls one node's cluster API (ctxctl cluster uses it): the
// operator endpoints here, and the ones a control.Client calls (join,
// session end, traffic) through the control.Client it embeds.
type Client struct {
	*control.Client
}

// NewClient returns a client of the node whose HTTP API is at addr
// ("host:port", https:// under control.WithTLS, or a URL).
func NewClient(addr string, opts ...control.Option) *Client {
	return &Client{control.NewClient(addr, opts...)}
}

// Status returns the node's view of the cluster.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var st Status
	err := c.Do(ctx, http.MethodGet, PathStatus, nil, &st)
	return st, err
}

// Remove takes member id out of the cluster. A 503 (leadership moving) is
// retried (retryMembership); a member already gone on a retry counts as
// removed.
func (c *Client) Remove(ctx context.Context, id string) error {
	return retryMembership(ctx, "remove "+id, true, func() error {
		return c.Do(ctx, http.MethodPost, PathRemove, RemoveRequest{ID: id}, &RemoveResponse{})
	})
}

// ForceRemove takes member id out of the cluster even though the index
// still places shards on it: blocks with parity elsewhere are repaired,
// the others are lost. Retried as Remove is.
func (c *Client) ForceRemove(ctx context.Context, id string) error {
	return retryMembership(ctx, "remove --force "+id, true, func() error {
		return c.Do(ctx, http.MethodPost, PathRemove, RemoveRequest{ID: id, Force: true}, &RemoveResponse{})
	})
}

// Drain marks member id draining (through the leader) and returns what it
// held when the drain started. See WaitDrained. A 503 (leadership moving)
// is retried (retryMembership): draining a draining member answers what it
// still holds.
func (c *Client) Drain(ctx context.Context, id string) (DrainResponse, error) {
	var out DrainResponse
	err := retryMembership(ctx, "drain "+id, false, func() error {
		out = DrainResponse{}
		return c.Do(ctx, http.MethodPost, PathDrain, DrainRequest{ID: id}, &out)
	})
	return out, err
}

// CancelDrain makes a draining member alive again; what was moved stays.
// It is not retried: a second call after one that committed would answer
// that the member is not draining.
func (c *Client) CancelDrain(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodPost, PathDrain, DrainRequest{ID: id, Cancel: true}, &DrainResponse{})
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
			if lst, lerr := (&Client{c.At(st.Leader.HTTPAddr)}).Status(ctx); lerr == nil {
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
	err := c.Do(ctx, http.MethodPost, PathTransfer, TransferRequest{ID: id}, &out)
	return out, err
}

// Repair returns the node's repair progress (block.ErrNotFound when it
// reports none).
func (c *Client) Repair(ctx context.Context) (RepairResponse, error) {
	var out RepairResponse
	err := c.Do(ctx, http.MethodGet, PathRepair, nil, &out)
	return out, err
}
