package raft

import (
	"bytes"
	"context"
	"io"
	"log"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// levelTrace is slog's level for hclog's Trace (below Debug).
const levelTrace = slog.LevelDebug - 4

// hclogAdapter implements hclog.Logger on top of a *slog.Logger, so Raft
// and raft-wal log through the process's slog handler.
type hclogAdapter struct {
	log     *slog.Logger
	name    string
	implied []interface{}
	level   *atomic.Int32 // hclog.Level, shared with derived loggers
}

// NewHCLog returns an hclog.Logger that writes to l. Its level starts at
// hclog.Debug; records below it are dropped before reaching slog (whose
// handler applies its own level too).
func NewHCLog(l *slog.Logger, name string) hclog.Logger {
	if l == nil {
		l = slog.Default()
	}
	lv := new(atomic.Int32)
	lv.Store(int32(hclog.Debug))
	return &hclogAdapter{log: l, name: name, level: lv}
}

func toSlog(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return levelTrace
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

func (a *hclogAdapter) enabled(l hclog.Level) bool {
	if l == hclog.Off || hclog.Level(a.level.Load()) == hclog.Off || l < hclog.Level(a.level.Load()) {
		return false
	}
	return a.log.Enabled(context.Background(), toSlog(l))
}

func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...interface{}) {
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	if !a.enabled(level) {
		return
	}
	attrs := make([]interface{}, 0, len(a.implied)+len(args)+2)
	if a.name != "" {
		attrs = append(attrs, "logger", a.name)
	}
	attrs = append(attrs, a.implied...)
	attrs = append(attrs, args...)
	a.log.Log(context.Background(), toSlog(level), msg, attrs...)
}

func (a *hclogAdapter) Trace(msg string, args ...interface{}) { a.Log(hclog.Trace, msg, args...) }
func (a *hclogAdapter) Debug(msg string, args ...interface{}) { a.Log(hclog.Debug, msg, args...) }
func (a *hclogAdapter) Info(msg string, args ...interface{})  { a.Log(hclog.Info, msg, args...) }
func (a *hclogAdapter) Warn(msg string, args ...interface{})  { a.Log(hclog.Warn, msg, args...) }
func (a *hclogAdapter) Error(msg string, args ...interface{}) { a.Log(hclog.Error, msg, args...) }
func (a *hclogAdapter) IsTrace() bool                         { return a.enabled(hclog.Trace) }
func (a *hclogAdapter) IsDebug() bool                         { return a.enabled(hclog.Debug) }
func (a *hclogAdapter) IsInfo() bool                          { return a.enabled(hclog.Info) }
func (a *hclogAdapter) IsWarn() bool                          { return a.enabled(hclog.Warn) }
func (a *hclogAdapter) IsError() bool                         { return a.enabled(hclog.Error) }
func (a *hclogAdapter) ImpliedArgs() []interface{}            { return a.implied }
func (a *hclogAdapter) Name() string                          { return a.name }
func (a *hclogAdapter) SetLevel(l hclog.Level)                { a.level.Store(int32(l)) }
func (a *hclogAdapter) GetLevel() hclog.Level                 { return hclog.Level(a.level.Load()) }

func (a *hclogAdapter) With(args ...interface{}) hclog.Logger {
	c := *a
	c.implied = append(append([]interface{}(nil), a.implied...), args...)
	return &c
}

func (a *hclogAdapter) Named(name string) hclog.Logger {
	c := *a
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	return &c
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	c := *a
	c.name = name
	return &c
}

func (a *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

func (a *hclogAdapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return stdWriter{a}
}

// stdWriter turns lines of the standard library logger into records,
// reading hclog's "[ERR]"-style prefixes as levels.
type stdWriter struct{ a *hclogAdapter }

func (w stdWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		s := strings.TrimSpace(string(line))
		lv := hclog.Info
		for prefix, l := range map[string]hclog.Level{"[TRACE]": hclog.Trace, "[DEBUG]": hclog.Debug, "[INFO]": hclog.Info, "[WARN]": hclog.Warn, "[ERR]": hclog.Error, "[ERROR]": hclog.Error} {
			if strings.HasPrefix(s, prefix) {
				lv, s = l, strings.TrimSpace(s[len(prefix):])
				break
			}
		}
		w.a.Log(lv, s)
	}
	return len(p), nil
}
