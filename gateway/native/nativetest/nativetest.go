// Package nativetest starts native-protocol servers for tests: an in-memory
// map tier behind a real ctxstore.Store and a real native.Server on a
// loopback port, torn down with the test.
package nativetest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/router"
	"github.com/ctxtier/ctxtier/gateway/native"
)

// MapTier is a ctxstore.Tier over a Go map. Put copies the bytes into a
// memory file (a memfd, mapped, like the DRAM tier's arena); Get hands out
// the mapped slice itself under a lease that the tier counts, so tests can
// check that every lease is released, and says where it lies in the file
// (block.Ref.SetFile), so a server's sendfile path is exercised.
type MapTier struct {
	mu   sync.RWMutex
	m    map[block.Key]*entry
	mu2  sync.Mutex
	open int
	// marks records, per Get, whether its options said the reader
	// verifies (block.GetOptions.ReaderVerifies, TakeReaderMarks).
	marks []bool
	// retains records each Get's and Retain's read retain window
	// (block.GetOptions.Retain) by key, the last one (Retains).
	retains map[block.Key]time.Duration

	file *os.File // the memory file; nil until the first Put
	end  int64    // its size: where the next Put's bytes go
}

type entry struct {
	data   []byte // a mapping of the memory file at off
	off    int64
	sum    uint32
	pinned time.Time
	info   block.Info
	opts   block.PutOptions // as the put gave them
}

// NewMapTier returns an empty tier.
func NewMapTier() *MapTier { return &MapTier{m: map[block.Key]*entry{}} }

// Put stores a copy of data.
func (t *MapTier) Put(_ context.Context, key block.Key, data []byte, sum uint32, opts block.PutOptions) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.m[key]; ok {
		if e.sum == sum && bytes.Equal(e.data, data) {
			return nil
		}
		return fmt.Errorf("%w: %s", block.ErrConflict, key)
	}
	now := time.Now()
	off, mapped, err := t.storeLocked(data)
	if err != nil {
		return err
	}
	e := &entry{data: mapped, off: off, sum: sum, info: block.Info{Key: key, Size: int64(len(data)), Sum: sum, Tier: block.TierDRAM, Priority: opts.Priority, Created: now, LastAccess: now}}
	if opts.PinTTL > 0 {
		e.pinned = now.Add(opts.PinTTL)
	}
	e.opts = opts
	t.m[key] = e
	return nil
}

// PutOptions returns the options key was stored with (as the store passed
// them to the tier), and whether it is stored.
func (t *MapTier) PutOptions(key block.Key) (block.PutOptions, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	e, ok := t.m[key]
	if !ok {
		return block.PutOptions{}, false
	}
	return e.opts, true
}

// Get returns a lease on the stored bytes.
func (t *MapTier) Get(_ context.Context, key block.Key, opts block.GetOptions) (*block.Ref, error) {
	t.mu2.Lock()
	t.marks = append(t.marks, opts.ReaderVerifies)
	if d := opts.Retain; d > 0 {
		t.noteRetainLocked(key, d)
	}
	t.mu2.Unlock()
	t.mu.RLock()
	e, ok := t.m[key]
	t.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: %s", block.ErrNotFound, key)
	}
	t.mu2.Lock()
	t.open++
	t.mu2.Unlock()
	ref := block.NewRef(e.data, e.sum, block.TierDRAM, func() {
		t.mu2.Lock()
		t.open--
		t.mu2.Unlock()
	})
	// Entries are never rewritten in place (Put appends), so sending from
	// the file needs nothing from the tier afterwards.
	ref.SetFile(int(t.file.Fd()), e.off, nil)
	return ref, nil
}

// storeLocked appends data to the memory file, page-aligned, and returns
// where it went and a shared mapping of those bytes. Space is never reused.
func (t *MapTier) storeLocked(data []byte) (int64, []byte, error) {
	if t.file == nil {
		fd, err := unix.MemfdCreate("nativetest", unix.MFD_CLOEXEC)
		if err != nil {
			return 0, nil, fmt.Errorf("nativetest: memfd_create: %w", err)
		}
		t.file = os.NewFile(uintptr(fd), "nativetest")
	}
	off := t.end
	if len(data) == 0 {
		return off, []byte{}, nil
	}
	page := int64(os.Getpagesize())
	size := (int64(len(data)) + page - 1) / page * page
	if err := t.file.Truncate(off + size); err != nil {
		return 0, nil, fmt.Errorf("nativetest: grow memory file: %w", err)
	}
	m, err := unix.Mmap(int(t.file.Fd()), off, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return 0, nil, fmt.Errorf("nativetest: mmap: %w", err)
	}
	copy(m, data)
	t.end = off + size
	return off, m[:len(data):len(data)], nil
}

// Stat returns the block's metadata.
func (t *MapTier) Stat(_ context.Context, key block.Key) (block.Info, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	e, ok := t.m[key]
	if !ok {
		return block.Info{}, fmt.Errorf("%w: %s", block.ErrNotFound, key)
	}
	info := e.info
	info.PinnedUntil = e.pinned
	return info, nil
}

// Contains reports presence.
func (t *MapTier) Contains(key block.Key) bool {
	t.mu.RLock()
	_, ok := t.m[key]
	t.mu.RUnlock()
	return ok
}

// Delete removes key.
func (t *MapTier) Delete(_ context.Context, key block.Key) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.m[key]; !ok {
		return fmt.Errorf("%w: %s", block.ErrNotFound, key)
	}
	delete(t.m, key)
	return nil
}

// Pin extends key's pin to until.
func (t *MapTier) Pin(_ context.Context, key block.Key, until time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.m[key]
	if !ok {
		return fmt.Errorf("%w: %s", block.ErrNotFound, key)
	}
	if until.After(e.pinned) {
		e.pinned = until
	}
	return nil
}

// Len is the number of stored blocks.
func (t *MapTier) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.m)
}

// TakeReaderMarks returns, for every Get since the last call, whether its
// options said the reader verifies the bytes itself
// (block.GetOptions.ReaderVerifies), in call order, and forgets them.
func (t *MapTier) TakeReaderMarks() []bool {
	t.mu2.Lock()
	defer t.mu2.Unlock()
	out := t.marks
	t.marks = nil
	return out
}

// OpenLeases is the number of Refs handed out and not yet released.
func (t *MapTier) OpenLeases() int {
	t.mu2.Lock()
	defer t.mu2.Unlock()
	return t.open
}

// PinnedUntil returns key's pin expiry (zero when not pinned or absent).
func (t *MapTier) PinnedUntil(key block.Key) time.Time {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if e, ok := t.m[key]; ok {
		return e.pinned
	}
	return time.Time{}
}

// Server is a running native server over a MapTier.
type Server struct {
	Addr   string
	Tier   *MapTier
	Store  *ctxstore.Store
	Server *native.Server
	done   chan error
	once   sync.Once
	err    error
}

// Start serves a fresh store (catalog with the default namespace plus any
// extra namespaces) on a loopback port. If tb is not nil the server is shut
// down when the test ends; otherwise call Close.
func Start(tb testing.TB, cfg native.Config, extra ...block.Namespace) (*Server, error) {
	return StartWithTier(tb, cfg, NewMapTier(), extra...)
}

// StartWithTier is Start over a given tier; Server.Tier is set when tier is
// a *MapTier.
func StartWithTier(tb testing.TB, cfg native.Config, tier ctxstore.Tier, extra ...block.Namespace) (*Server, error) {
	return StartWithOptions(tb, cfg, tier, nil, extra...)
}

// StartWithOptions is StartWithTier with server options (native.WithAuth).
func StartWithOptions(tb testing.TB, cfg native.Config, tier ctxstore.Tier, opts []native.Option, extra ...block.Namespace) (*Server, error) {
	cat, err := ctxstore.OpenFileCatalog("")
	if err != nil {
		return nil, err
	}
	for _, ns := range extra {
		if err := cat.CreateNamespace(context.Background(), ns); err != nil {
			return nil, err
		}
	}
	st, err := ctxstore.New(ctxstore.DefaultConfig(), cat, tier, nil)
	if err != nil {
		return nil, err
	}
	srv, err := native.New(cfg, st, nil, nil, opts...)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	mt, _ := tier.(*MapTier)
	s := &Server{Addr: ln.Addr().String(), Tier: mt, Store: st, Server: srv, done: make(chan error, 1)}
	go func() { s.done <- srv.Serve(context.Background(), ln) }()
	if tb != nil {
		tb.Cleanup(func() { s.Close() })
	}
	return s, nil
}

// Close shuts the server down gracefully (5 s at most) and waits for Serve.
func (s *Server) Close() error {
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.err = s.Server.Shutdown(ctx)
		if serr := <-s.done; s.err == nil {
			s.err = serr
		}
	})
	return s.err
}

// WaitLeases waits up to d for every lease to be released (a server releases
// a lease just after writing the response, so a client may see the answer a
// moment before) and returns how many are still open.
func (t *MapTier) WaitLeases(d time.Duration) int {
	deadline := time.Now().Add(d)
	for {
		n := t.OpenLeases()
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(time.Millisecond)
	}
}

// List returns up to limit blocks of ns in object-name order.
func (t *MapTier) List(_ context.Context, ns, prefix, after string, limit int) ([]block.Info, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []block.Info
	for k, e := range t.m {
		if n := k.ObjectName(); k.Namespace == ns && n > after && strings.HasPrefix(n, prefix) {
			out = append(out, e.info)
		}
	}
	slices.SortFunc(out, func(a, b block.Info) int { return strings.Compare(a.Key.ObjectName(), b.Key.ObjectName()) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// LateRouter is a native.Router whose router is set after the server
// started, since a router over the server's own store needs the store first.
// Until Set, ROUTE answers Unavailable.
type LateRouter struct{ r atomic.Pointer[router.Router] }

// Set installs r.
func (l *LateRouter) Set(r *router.Router) { l.r.Store(r) }

// Route asks the installed router.
func (l *LateRouter) Route(ctx context.Context, q router.Query) (router.Result, error) {
	r := l.r.Load()
	if r == nil {
		return router.Result{}, fmt.Errorf("%w: no router yet", block.ErrUnavailable)
	}
	return r.Route(ctx, q)
}

// StartRouter is StartWithOptions (over a MapTier) plus a router wired as
// ctxd wires it: the store is its tier index, pinner and namespace resolver,
// token ids hash with each namespace's scheme, and the server answers ROUTE
// with it.
func StartRouter(tb testing.TB, cfg native.Config, rcfg router.Config, opts []native.Option, extra ...block.Namespace) (*Server, *router.Router, error) {
	late := &LateRouter{}
	s, err := StartWithOptions(tb, cfg, NewMapTier(), append(slices.Clip(opts), native.WithRouter(late)), extra...)
	if err != nil {
		return nil, nil, err
	}
	rt, err := router.New(rcfg, router.Deps{Tier: s.Store, Pinner: s.Store, Namespaces: s.Store,
		Hash: func(ns block.Namespace, t []uint32) ([]uint64, error) { return ns.ChainHashes(t) }})
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	late.Set(rt)
	return s, rt, nil
}

func (t *MapTier) noteRetainLocked(key block.Key, d time.Duration) {
	if t.retains == nil {
		t.retains = map[block.Key]time.Duration{}
	}
	t.retains[key] = d
}

// Retain records a LOOKUP's read retain window (ctxstore.Retainer).
func (t *MapTier) Retain(key block.Key, d time.Duration) bool {
	t.mu2.Lock()
	t.noteRetainLocked(key, d)
	t.mu2.Unlock()
	return t.Contains(key)
}

// Retains returns and forgets the read retain windows recorded by key.
func (t *MapTier) Retains() map[block.Key]time.Duration {
	t.mu2.Lock()
	defer t.mu2.Unlock()
	r := t.retains
	t.retains = nil
	return r
}

// ReleaseSession implements block.SessionReleaser: it counts the stored
// blocks put with session in ns, and forgets their session and retain
// window (a map keeps no eviction order).
func (t *MapTier) ReleaseSession(_ context.Context, ns string, session uint64) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for k, e := range t.m {
		if k.Namespace == ns && e.opts.Session == session {
			e.opts.Session, e.opts.Retain = 0, 0
			n++
		}
	}
	return n, nil
}
