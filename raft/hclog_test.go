package raft

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestHCLogBridge(t *testing.T) {
	var buf bytes.Buffer
	l := NewHCLog(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), "raft")
	tests := []struct {
		log  func()
		want string
	}{
		{func() { l.Info("hello", "k", 1) }, `level=INFO msg=hello logger=raft k=1`},
		{func() { l.Named("wal").With("seg", 3).Warn("rotated") }, `level=WARN msg=rotated logger=raft.wal seg=3`},
		{func() { l.Error("boom", "error", "x") }, `level=ERROR msg=boom logger=raft error=x`},
		{func() { l.Debug("dbg") }, `level=DEBUG msg=dbg`},
		{func() { l.Trace("trace is below the handler's level") }, ``},
		{func() { l.StandardLogger(nil).Print("[WARN] from std") }, `level=WARN msg="from std"`},
	}
	for i, tc := range tests {
		buf.Reset()
		tc.log()
		got := strings.TrimSpace(buf.String())
		if tc.want == "" {
			if got != "" {
				t.Errorf("case %d: logged %q", i, got)
			}
			continue
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("case %d: %q does not contain %q", i, got, tc.want)
		}
	}
	l.SetLevel(hclog.Error)
	buf.Reset()
	l.Warn("dropped")
	if buf.Len() != 0 || l.IsWarn() || !l.IsError() || l.GetLevel() != hclog.Error {
		t.Fatalf("SetLevel(Error) did not filter: %q", buf.String())
	}
}
