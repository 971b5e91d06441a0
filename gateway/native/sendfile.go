package native

import (
	"errors"
	"io"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// sendfileChunk bounds one sendfile(2) call, so a large block does not
// hold the socket's write path in one syscall.
const sendfileChunk = 4 << 20

// fileSeg says that a response segment's bytes also lie in file fd at off:
// the writer may send them from there with sendfile instead of writing the
// slice. ok is false for segments that are only in memory.
type fileSeg struct {
	fd  int
	off int64
	ok  bool
}

// sendConn returns the socket a connection can sendfile to: plain TCP only
// (a TLS connection must encrypt the bytes in user space), and only when
// cfg.Sendfile is on.
func sendConn(nc net.Conn, on bool) syscall.RawConn {
	if !on {
		return nil
	}
	return rawConn(nc)
}

// sendFile sends n bytes of file fd, starting at off, to the socket behind
// rc with sendfile(2). It passes the offset explicitly, so the file's own
// position is never used and many connections can send from one file at
// once. Partial sends continue where they stopped; EAGAIN (the socket's
// buffer is full) parks the goroutine in the runtime's poller until the
// socket is writable, and the connection's write deadline ends that wait.
// It returns how many bytes were sent.
func sendFile(rc syscall.RawConn, fd int, off, n int64) (int64, error) {
	var sent int64
	var serr error
	err := rc.Write(func(s uintptr) bool {
		for sent < n {
			o := off + sent
			w, err := unix.Sendfile(int(s), fd, &o, int(min(n-sent, sendfileChunk)))
			if w > 0 {
				sent += int64(w)
			}
			switch {
			case err == unix.EAGAIN:
				return false // wait until writable
			case err == unix.EINTR:
				continue
			case err != nil:
				serr = err
				return true
			case w == 0:
				// The file ended before n bytes: the tier's range is wrong.
				serr = io.ErrUnexpectedEOF
				return true
			}
		}
		return true
	})
	if err == nil {
		err = serr
	}
	return sent, err
}

// writeFiles writes segs in order, sending each segment marked in files
// (same length as segs) with sendfile from its file and gathering the
// others into one writev. The file's bytes are the segment's bytes (the
// tier says so with Ref.SetFile), so the peer receives exactly segs.
func (c *conn) writeFiles(rc syscall.RawConn, segs net.Buffers, files []fileSeg, scratch *net.Buffers) error {
	if c.s.cfg.WriteTimeout > 0 {
		c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
	}
	*scratch = (*scratch)[:0]
	flush := func() error {
		if len(*scratch) == 0 {
			return nil
		}
		_, err := scratch.WriteTo(c.nc)
		clear(*scratch)
		*scratch = (*scratch)[:0]
		return err
	}
	for i, seg := range segs {
		if !files[i].ok {
			*scratch = append(*scratch, seg)
			continue
		}
		if err := flush(); err != nil {
			return err
		}
		if c.pipe == nil && !c.noPipe {
			p, err := newPipe()
			if err != nil {
				c.s.log.Debug("no splice pipe; using sendfile", "err", err)
				c.noPipe = true
			}
			c.pipe = p
		}
		var err error
		if c.pipe != nil {
			_, err = spliceFile(rc, c.pipe, files[i].fd, files[i].off, int64(len(seg)))
		} else {
			_, err = sendFile(rc, files[i].fd, files[i].off, int64(len(seg)))
		}
		if err != nil {
			c.s.log.Debug("sendfile failed", "remote", c.nc.RemoteAddr(), "err", err)
			return err
		}
	}
	if err := flush(); err != nil {
		c.s.log.Debug("write failed", "remote", c.nc.RemoteAddr(), "err", err)
		return err
	}
	return nil
}

// pipeSize is the capacity asked for a connection's splice pipe: enough
// for a 1 MiB run of pages per pair of splice calls (the default pipe, 16
// pages, is what sendfile uses internally, and costs two syscalls' worth
// of kernel work per 64 KiB).
const pipeSize = 1 << 20

// pipe is a connection's splice pipe, owned by its writer goroutine.
type pipe struct{ r, w int }

func newPipe() (*pipe, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, err
	}
	// Best effort: a smaller pipe only means more calls.
	_, _ = unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, pipeSize)
	return &pipe{r: p[0], w: p[1]}, nil
}

func (p *pipe) close() {
	unix.Close(p.r)
	unix.Close(p.w)
}

// spliceFile is sendFile through p: the file's pages are spliced into the
// pipe (references, not copies), then from the pipe into the socket. On an
// error the pipe may still hold bytes; the caller drops the connection and
// the pipe with it.
func spliceFile(rc syscall.RawConn, p *pipe, fd int, off, n int64) (int64, error) {
	var sent int64
	for sent < n {
		o := off + sent
		m, err := unix.Splice(fd, &o, p.w, nil, int(min(n-sent, pipeSize)), unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return sent, err
		case m == 0:
			return sent, io.ErrUnexpectedEOF
		}
		inPipe := int(m)
		flags := unix.SPLICE_F_MOVE | unix.SPLICE_F_NONBLOCK
		if sent+int64(inPipe) < n {
			flags |= unix.SPLICE_F_MORE
		}
		var serr error
		err = rc.Write(func(s uintptr) bool {
			for inPipe > 0 {
				w, err := unix.Splice(p.r, nil, int(s), nil, inPipe, flags)
				if w > 0 {
					inPipe -= int(w)
					sent += w
				}
				switch {
				case err == unix.EAGAIN:
					return false
				case err == unix.EINTR:
					continue
				case err != nil:
					serr = err
					return true
				case w == 0:
					serr = io.ErrUnexpectedEOF
					return true
				}
			}
			return true
		})
		if err == nil {
			err = serr
		}
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}
