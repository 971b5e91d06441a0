package resp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ctxtier/ctxtier/internal/membudget"
)

// errProtocol marks a request the parser cannot frame: the server answers
// "-ERR Protocol error: ..." and closes the connection, as Redis does.
var errProtocol = errors.New("Protocol error") //nolint:revive,staticcheck // Redis's own text, matched by its clients

// tooLargeError is a well-framed request with an argument (or a total size)
// over the limits. Its bytes were read and dropped, so the connection goes
// on; the request is answered with an error and nothing runs.
type tooLargeError struct {
	arg   int64 // the largest argument's length
	total int64
	lim   Limits
}

func (e *tooLargeError) Error() string {
	if e.arg > e.lim.MaxBulk {
		return fmt.Sprintf("argument of %d bytes exceeds the limit of %d bytes; nothing was stored", e.arg, e.lim.MaxBulk)
	}
	return fmt.Sprintf("request of %d bytes exceeds the limit of %d bytes; nothing was stored", e.total, e.lim.MaxRequest)
}

// Limits bound what one request may make the server hold.
type Limits struct {
	// MaxBulk bounds one argument (a value): longer ones are read and dropped.
	MaxBulk int64
	// MaxRequest bounds one request's arguments together.
	MaxRequest int64
	// MaxDrop bounds an argument the server will read and drop; a longer
	// bulk length is a protocol error (the connection is closed).
	MaxDrop int64
	// MaxArgs bounds a request's number of arguments.
	MaxArgs int
}

// reader frames requests: RESP arrays of bulk strings, or inline commands
// (a line of space-separated words). The arguments of one request live in
// one arena buffer that is reused for the next request.
type reader struct {
	br    *bufio.Reader
	lim   Limits
	pool  *bufPool
	arena *[]byte
	ends  []int
	args  [][]byte

	// The in-flight budget (nil: none) holds the arena bytes of a request
	// beyond smallArena; see reserve.
	budget *membudget.Budget
	// ctx ends when the connection stops reading: it wakes a wait for budget.
	ctx context.Context
	// budgetWait bounds a wait for more budget by a request that already
	// holds some.
	budgetWait time.Duration
	// beforeWait runs before a request waits for its first budget bytes
	// (the connection flushes its replies); afterReserve after any
	// reservation (it moves the read deadline past the wait).
	beforeWait, afterReserve func()
	held                     int64
	releases                 []func()
}

// reserveStep is the granularity of budget reservations: a request of many
// small arguments over smallArena reserves 64 KiB at a time, not per argument.
const reserveStep = 64 << 10

// smallArena is the arena a connection keeps between requests; a larger one
// goes back to the pool once its request is done.
const smallArena = 16 << 10

func newReader(br *bufio.Reader, lim Limits, pool *bufPool) *reader {
	return &reader{br: br, lim: lim, pool: pool}
}

// release returns a large arena to the pool and the request's bytes to the
// budget (call when the request is done).
func (r *reader) release() {
	r.releaseBudget()
	if r.arena != nil && cap(*r.arena) > smallArena {
		r.pool.put(r.arena)
		r.arena = nil
	}
}

// free returns the arena whatever its size (the connection is closing).
func (r *reader) free() {
	r.releaseBudget()
	if r.arena != nil {
		r.pool.put(r.arena)
		r.arena = nil
	}
}

// next reads one request. The arguments stay valid until the next call.
// An empty request (a blank inline line, "*0") yields no arguments.
// Errors: io errors, errProtocol (answer and close), *tooLargeError and
// *busyError (answer and go on), the budget's error when the connection
// stopped reading while it waited (close).
func (r *reader) next() ([][]byte, error) {
	r.releaseBudget()
	b, err := r.br.Peek(1)
	if err != nil {
		return nil, err
	}
	if b[0] != '*' {
		return r.inline()
	}
	line, err := r.line()
	if err != nil {
		return nil, err
	}
	n, ok := parseInt(line[1:])
	if !ok || n > int64(r.lim.MaxArgs) {
		return nil, fmt.Errorf("%w: invalid multibulk length", errProtocol)
	}
	if n <= 0 {
		return nil, nil
	}
	r.ends = r.ends[:0]
	used := 0         // arena bytes: arguments and their CRLFs
	var payload int64 // argument bytes
	var drop *tooLargeError
	var busy error // waiting for more budget timed out: drop the rest
	for range n {
		line, err := r.line()
		if err != nil {
			return nil, err
		}
		if line[0] != '$' {
			return nil, fmt.Errorf("%w: expected '$', got '%s'", errProtocol, printable(line[:1]))
		}
		l, ok := parseInt(line[1:])
		if !ok || l < 0 || l > r.lim.MaxDrop {
			return nil, fmt.Errorf("%w: invalid bulk length", errProtocol)
		}
		payload += l
		if drop != nil || busy != nil || l > r.lim.MaxBulk || payload > r.lim.MaxRequest {
			if drop == nil && busy == nil {
				drop = &tooLargeError{lim: r.lim}
			}
			if drop != nil {
				drop.arg, drop.total = max(drop.arg, l), payload
			}
			if err := r.discard(l); err != nil {
				return nil, err
			}
			continue
		}
		need := used + int(l) + 2
		if err := r.reserve(need); err != nil {
			if r.held == 0 {
				return nil, err // the connection stops reading
			}
			busy = err
			if err := r.discard(l); err != nil {
				return nil, err
			}
			continue
		}
		r.grow(need)
		buf := *r.arena
		if _, err := io.ReadFull(r.br, buf[used:need]); err != nil {
			return nil, unexpected(err)
		}
		if buf[need-2] != '\r' || buf[need-1] != '\n' {
			return nil, fmt.Errorf("%w: bulk string not terminated by CRLF", errProtocol)
		}
		used += int(l)
		r.ends = append(r.ends, used)
		used += 2
	}
	if drop != nil || busy != nil {
		r.releaseBudget()
		if drop != nil {
			return nil, drop
		}
		return nil, &busyError{err: busy}
	}
	r.args = r.args[:0]
	start := 0
	buf := *r.arena
	for _, e := range r.ends {
		r.args = append(r.args, buf[start:e:e])
		start = e + 2
	}
	return r.args, nil
}

// reserve makes sure the request's arena bytes beyond smallArena (what every
// connection may hold without asking) are in the in-flight budget before
// an argument that brings the arena to need bytes is read. Until they are,
// the connection is not read, so TCP pushes back on the sender. A request's
// first reservation waits as long as it takes (or until the connection
// stops reading); a later one, made while the request already holds budget
// bytes, waits at most budgetWait, so requests that each hold part of the
// budget cannot wait on each other for ever.
func (r *reader) reserve(need int) error {
	over := int64(need) - smallArena - r.held
	if r.budget == nil || over <= 0 {
		return nil
	}
	n := max(over, reserveStep)
	ctx := r.ctx
	if r.held == 0 {
		if r.beforeWait != nil {
			r.beforeWait()
		}
	} else {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.budgetWait)
		defer cancel()
	}
	release, err := r.budget.Acquire(ctx, n)
	if err != nil {
		return err
	}
	r.held += n
	r.releases = append(r.releases, release)
	if r.afterReserve != nil {
		r.afterReserve()
	}
	return nil
}

// releaseBudget gives back the budget bytes the current request holds.
func (r *reader) releaseBudget() {
	if r.held == 0 {
		return
	}
	for i, rel := range r.releases {
		rel()
		r.releases[i] = nil
	}
	r.releases = r.releases[:0]
	r.held = 0
}

// busyError is a well-framed request dropped because it could not get
// more of the in-flight budget in time; the connection goes on.
type busyError struct{ err error }

func (e *busyError) Error() string {
	return e.err.Error() + "; the request was dropped, nothing was stored"
}

func (e *busyError) Unwrap() error { return e.err }

// grow makes the arena hold at least n bytes, keeping its contents.
func (r *reader) grow(n int) {
	if r.arena == nil {
		r.arena = r.pool.get(max(n, 1024))
		return
	}
	if cap(*r.arena) >= n {
		*r.arena = (*r.arena)[:cap(*r.arena)]
		return
	}
	nb := r.pool.get(max(n, 2*cap(*r.arena)))
	copy(*nb, *r.arena)
	r.pool.put(r.arena)
	r.arena = nb
}

// discard reads and drops a bulk of l bytes and its CRLF.
func (r *reader) discard(l int64) error {
	for l+2 > 0 {
		n, err := r.br.Discard(int(min(l+2, 1<<20)))
		l -= int64(n)
		if err != nil {
			return unexpected(err)
		}
	}
	return nil
}

// line reads a header line ("*3\r\n", "$5\r\n"); it must fit the reader's
// buffer and end in CRLF.
func (r *reader) line() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return nil, fmt.Errorf("%w: header line too long", errProtocol)
	}
	if err != nil {
		return nil, unexpected(err)
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("%w: header line '%s' not terminated by CRLF", errProtocol, printable(line))
	}
	return line[:len(line)-2], nil
}

// inline reads a line of space-separated words (what telnet sends). Quoting
// is not supported: a word is any run of bytes other than space and tab.
func (r *reader) inline() ([][]byte, error) {
	line, err := r.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return nil, fmt.Errorf("%w: too big inline request", errProtocol)
	}
	if err != nil {
		return nil, unexpected(err)
	}
	line = bytes.TrimRight(line, "\r\n")
	r.grow(len(line))
	buf := (*r.arena)[:0]
	buf = append(buf, line...)
	r.args = r.args[:0]
	for _, f := range bytes.FieldsFunc(buf, func(c rune) bool { return c == ' ' || c == '\t' }) {
		if len(r.args) == r.lim.MaxArgs {
			return nil, fmt.Errorf("%w: too many arguments in an inline request", errProtocol)
		}
		r.args = append(r.args, f[:len(f):len(f)])
	}
	return r.args, nil
}

// unexpected turns an EOF in the middle of a request into io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// parseInt parses a strict decimal integer (an optional '-', 1..18 digits).
func parseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// printable renders bytes for an error message: at most 32 of them, with
// anything outside printable ASCII escaped.
func printable(b []byte) string {
	if len(b) > 32 {
		b = b[:32]
	}
	var sb []byte
	for _, c := range b {
		if c >= 0x20 && c < 0x7f && c != '\\' {
			sb = append(sb, c)
		} else {
			sb = fmt.Appendf(sb, "\\x%02x", c)
		}
	}
	return string(sb)
}
