package errcode

import (
	"fmt"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

func TestRESPPrefix(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("x: %w", block.ErrUnauthenticated), "NOAUTH"},
		{fmt.Errorf("x: %w", block.ErrPermissionDenied), "NOPERM"},
		{fmt.Errorf("x: %w", block.ErrTooLarge), "ERR"},
		{fmt.Errorf("x: %w", block.ErrConflict), "ERR"},
		{fmt.Errorf("unmapped"), "ERR"},
	}
	for _, tc := range cases {
		if got := Of(tc.err).RESPPrefix(); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.err, got, tc.want)
		}
	}
}
