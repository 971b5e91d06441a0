package native

import (
	"errors"
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// maxIOV is the most segments one writev(2) takes (Linux's IOV_MAX).
const maxIOV = 1024

// rawConn returns the plain TCP socket behind nc, for the reader's
// non-blocking writes and for sendfile, or nil (TLS, or not TCP).
func rawConn(nc net.Conn) syscall.RawConn {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// respond hands a response to the connection's writer, or, when the writer
// has nothing queued or unwritten (queued is 0), writes it from the reader
// goroutine itself with non-blocking writev calls: a request answered that
// way costs no goroutine handoff, so the scheduler wakes nobody. Whatever
// the socket does not take at once (its buffer is full), and any error,
// goes to the writer with the rest of the response, which then writes it
// as before (waiting, with the write deadline, and closing the connection
// on an error). The reader never waits on the socket, so a client that
// sends a long pipeline before reading cannot deadlock the connection.
// Responses sent with sendfile, and closing ones, always go to the writer.
func (c *conn) respond(r *response) {
	if c.rc == nil || r.files != nil || r.closeAfter || c.queued.Load() != 0 {
		c.enqueue(r)
		return
	}
	segs := r.segs
	if segs == nil {
		c.one[0] = r.buf
		segs = c.one[:]
	}
	n := c.tryWrite(segs)
	rest := skip(segs, n)
	if len(rest) == 0 {
		c.one[0] = nil
		r.finish(c.s)
		return
	}
	// The writer owns the rest; the response keeps its leases until then.
	// Copied before c.one is cleared: with nothing written, rest is c.one.
	r.segs = append(net.Buffers(nil), rest...)
	c.one[0] = nil
	c.enqueue(r)
}

// enqueue hands r to the writer.
func (c *conn) enqueue(r *response) {
	c.queued.Add(1)
	c.out <- r
}

// tryWrite writes as much of segs as the socket takes without waiting and
// returns how many bytes that was. Errors end the attempt; the writer meets
// them again and handles them.
func (c *conn) tryWrite(segs net.Buffers) int64 {
	if c.writeFn == nil {
		// Made once: a closure per call would be an allocation per response.
		c.writeFn = c.writeSome
	}
	c.wsegs, c.wrote = segs, 0
	// The deadline check inside Write may refuse (an old write deadline has
	// passed): then nothing is written here and the writer sets a new one.
	_ = c.rc.Write(c.writeFn)
	c.wsegs = nil
	return c.wrote
}

// writeSome is tryWrite's callback: writev until c.wsegs is written, the
// socket is full or an error, counting the bytes in c.wrote. It never asks
// to wait.
func (c *conn) writeSome(fd uintptr) bool {
	rest := c.wsegs
	for len(rest) > 0 {
		n, err := c.writev(fd, rest[:min(len(rest), maxIOV)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n <= 0 {
			return true
		}
		c.wrote += n
		rest = skip(rest, n)
	}
	return true
}

// writev is one writev(2) of segs (at most maxIOV) on fd, with the
// connection's iovec array reused rather than one allocated per call.
func (c *conn) writev(fd uintptr, segs net.Buffers) (int64, error) {
	iov := c.iov[:0]
	for _, b := range segs {
		if len(b) == 0 {
			continue
		}
		v := unix.Iovec{Base: &b[0]}
		v.SetLen(len(b))
		iov = append(iov, v)
	}
	c.iov = iov
	if len(iov) == 0 {
		return 0, nil
	}
	n, _, errno := unix.Syscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
	clear(iov) // drop the references to the blocks' memory
	if errno != 0 {
		return 0, errno
	}
	return int64(n), nil
}

// skip returns segs without their first n bytes; the slices are shared.
func skip(segs net.Buffers, n int64) net.Buffers {
	for len(segs) > 0 && n >= int64(len(segs[0])) {
		n -= int64(len(segs[0]))
		segs = segs[1:]
	}
	if len(segs) > 0 && n > 0 {
		segs = append(net.Buffers{segs[0][n:]}, segs[1:]...)
	}
	return segs
}
