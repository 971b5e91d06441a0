package resp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/object"
	"github.com/ctxtier/ctxtier/tiers/dram"
)

// testServer runs a Server over a real DRAM tier on 127.0.0.1 and returns
// its address. Namespace "small" has a 1 KiB max block size; "other" is a
// second database.
func testServer(t testing.TB, mod func(*Config), opts ...Option) (string, *Server) {
	t.Helper()
	cat, err := ctxstore.OpenFileCatalog(filepath.Join(t.TempDir(), "namespaces.json"))
	if err != nil {
		t.Fatal(err)
	}
	dcfg := dram.DefaultConfig()
	dcfg.Capacity = 64 << 20
	dcfg.MaxBlockSize = 8 << 20
	tier, err := dram.New(dcfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tier.Close() })
	bs, err := ctxstore.New(ctxstore.DefaultConfig(), cat, tier, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []block.Namespace{{Name: "small", MaxBlockSize: 1024}, {Name: "other"}} {
		if err := bs.CreateNamespace(context.Background(), ns.WithDefaults()); err != nil {
			t.Fatal(err)
		}
	}
	objs, err := object.New(object.DefaultConfig(), bs)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Databases = []string{"default", "small", "other"}
	cfg.MaxBulk = 4 << 20
	cfg.MaxRequest = 16 << 20
	if mod != nil {
		mod(&cfg)
	}
	srv, err := New(cfg, objs, nil, slog.New(slog.DiscardHandler), opts...)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String(), srv
}

// client is a bare RESP connection for unit tests: it writes raw bytes and
// reads replies back in their wire form.
type client struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	return &client{t: t, nc: nc, br: bufio.NewReader(nc)}
}

// encode builds a RESP request from its arguments.
func encode(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

func (c *client) send(raw string) {
	c.t.Helper()
	if _, err := io.WriteString(c.nc, raw); err != nil {
		c.t.Fatal(err)
	}
}

// sendAsync is send for a goroutine: a failed write marks the test failed
// with t.Error (t.Fatal must stay on the test's own goroutine).
func (c *client) sendAsync(raw string) {
	if _, err := io.WriteString(c.nc, raw); err != nil {
		c.t.Error(err)
	}
}

// do sends one command and returns its reply in wire form.
func (c *client) do(args ...string) string {
	c.t.Helper()
	c.send(encode(args...))
	return c.reply()
}

// reply reads one whole reply (nested aggregates included) in wire form.
func (c *client) reply() string {
	c.t.Helper()
	s, err := readReply(c.br)
	if err != nil {
		c.t.Fatalf("reading reply: %v (so far %q)", err, s)
	}
	return s
}

func readReply(br *bufio.Reader) (string, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return line, err
	}
	if len(line) < 3 {
		return line, fmt.Errorf("short line %q", line)
	}
	n, _ := strconv.Atoi(line[1 : len(line)-2])
	switch line[0] {
	case '$', '=':
		if n < 0 {
			return line, nil
		}
		body := make([]byte, n+2)
		if _, err := io.ReadFull(br, body); err != nil {
			return line, err
		}
		return line + string(body), nil
	case '*', '~', '>', '%':
		if line[0] == '%' {
			n *= 2
		}
		out := line
		for range max(n, 0) {
			s, err := readReply(br)
			out += s
			if err != nil {
				return out, err
			}
		}
		return out, nil
	}
	return line, nil
}

// closed reports whether the server closed the connection within a second
// (EOF, or a reset when it closed with our bytes unread).
func (c *client) closed() bool {
	c.nc.SetReadDeadline(time.Now().Add(time.Second))
	_, err := c.br.ReadByte()
	return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}

func bulk(s string) string { return fmt.Sprintf("$%d\r\n%s\r\n", len(s), s) }
