package clusterapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/cluster/control"
)

// scripted answers the i-th request with statuses[i] (the last one from
// then on) and records the paths asked.
type scripted struct {
	mu       sync.Mutex
	statuses []int
	paths    []string
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	i := min(len(s.paths), len(s.statuses)-1)
	s.paths = append(s.paths, r.URL.Path)
	st := s.statuses[i]
	s.mu.Unlock()
	if st == http.StatusOK {
		control.WriteJSON(w, st, DrainResponse{ID: "n2", State: "draining"})
		return
	}
	http.Error(w, http.StatusText(st), st)
}

func (s *scripted) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.paths)
}

// TestMembershipCallsRetryUnavailable: remove and drain are made again
// while the node answers 503 (leadership moving), a remove that finds the
// member gone on a retry has done its job, other errors are returned at
// once, and cancelling a drain (not idempotent) is made once.
func TestMembershipCallsRetryUnavailable(t *testing.T) {
	const u, ok, nf, bad = http.StatusServiceUnavailable, http.StatusOK, http.StatusNotFound, http.StatusBadRequest
	tests := []struct {
		name      string
		statuses  []int
		call      func(context.Context, *Client) error
		wantErr   error // nil: success
		wantCalls int
	}{
		{"remove after two 503s", []int{u, u, ok}, func(ctx context.Context, c *Client) error { return c.Remove(ctx, "n2") }, nil, 3},
		{"remove gone after a 503", []int{u, nf}, func(ctx context.Context, c *Client) error { return c.Remove(ctx, "n2") }, nil, 2},
		{"remove not found at once", []int{nf}, func(ctx context.Context, c *Client) error { return c.Remove(ctx, "n2") }, block.ErrNotFound, 1},
		{"remove refused", []int{bad}, func(ctx context.Context, c *Client) error { return c.Remove(ctx, "n2") }, block.ErrInvalidArgument, 1},
		{"remove always 503", []int{u}, func(ctx context.Context, c *Client) error { return c.Remove(ctx, "n2") }, block.ErrUnavailable, membershipCalls},
		{"force remove after a 503", []int{u, ok}, func(ctx context.Context, c *Client) error { return c.ForceRemove(ctx, "n2") }, nil, 2},
		{"drain after a 503", []int{u, ok}, func(ctx context.Context, c *Client) error {
			r, err := c.Drain(ctx, "n2")
			if err == nil && r.State != "draining" {
				return errors.New("drain reply lost")
			}
			return err
		}, nil, 2},
		{"drain not found after a 503", []int{u, nf}, func(ctx context.Context, c *Client) error { _, err := c.Drain(ctx, "n2"); return err }, block.ErrNotFound, 2},
		{"cancel drain not retried", []int{u, ok}, func(ctx context.Context, c *Client) error { return c.CancelDrain(ctx, "n2") }, block.ErrUnavailable, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := &scripted{statuses: tc.statuses}
			hs := httptest.NewServer(srv)
			defer hs.Close()
			err := tc.call(context.Background(), NewClient(hs.URL))
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("err = %v, want success", err)
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if got := srv.calls(); got != tc.wantCalls {
				t.Fatalf("%d calls, want %d", got, tc.wantCalls)
			}
		})
	}
}

// TestMembershipRetryStopsWithContext: a call retried against a node that
// keeps answering 503 returns as soon as the caller's context ends.
func TestMembershipRetryStopsWithContext(t *testing.T) {
	srv := &scripted{statuses: []int{http.StatusServiceUnavailable}}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := NewClient(hs.URL).Remove(ctx, "n2")
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, block.ErrUnavailable) {
		t.Fatalf("err = %v, want the deadline and the last 503", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("returned after %v, long after the context ended", el)
	}
	if n := srv.calls(); n < 1 || n >= membershipCalls {
		t.Fatalf("%d calls before the context ended", n)
	}
}
