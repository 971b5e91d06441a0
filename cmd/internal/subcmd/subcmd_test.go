package subcmd

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	s := New("tool", "mode")
	var got []string
	s.Register("ok", "succeeds", func(_ context.Context, args []string) error { got = args; return nil })
	s.Register("bad", "fails", func(context.Context, []string) error { return errors.New("boom") })
	cases := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"ok", "-x", "1"}, 0, ""},
		{[]string{"bad"}, 1, "tool bad: boom"},
		{[]string{"nope"}, 2, `unknown mode "nope"`},
		{nil, 2, "usage: tool <mode>"},
		{[]string{"-h"}, 2, "fails"},
	}
	for _, tc := range cases {
		var buf bytes.Buffer
		if code := s.Run(context.Background(), tc.args, &buf); code != tc.code || !strings.Contains(buf.String(), tc.out) {
			t.Errorf("Run(%v) = %d, %q; want %d containing %q", tc.args, code, buf.String(), tc.code, tc.out)
		}
	}
	if strings.Join(got, " ") != "-x 1" {
		t.Errorf("subcommand got args %v", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("duplicate registration did not panic")
		}
	}()
	s.Register("ok", "again", nil)
}
