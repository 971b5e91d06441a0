package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"syscall"
	"testing"
)

// TestClientGone: a body write that fails because the client left (reset,
// closed pipe, its context ended) is told apart from a server-side failure,
// which is still logged as a warning.
func TestClientGone(t *testing.T) {
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"broken pipe", context.Background(), fmt.Errorf("write: %w", syscall.EPIPE), true},
		{"reset", context.Background(), &net.OpError{Op: "write", Err: syscall.ECONNRESET}, true},
		{"closed", context.Background(), fmt.Errorf("send: %w", net.ErrClosed), true},
		{"context ended", ended, errors.New("short write"), true},
		{"server-side failure", context.Background(), errors.New("checksum mismatch mid-body"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/v1/blocks/ns/1", nil).WithContext(tc.ctx)
			if got := clientGone(r, errStarted{tc.err}); got != tc.want {
				t.Fatalf("clientGone = %v, want %v", got, tc.want)
			}
		})
	}
}
