package native

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// memFile returns a memfd holding n random bytes.
func memFile(t *testing.T, n int) (*os.File, []byte) {
	t.Helper()
	fd, err := unix.MemfdCreate("sendfile-test", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "sendfile-test")
	t.Cleanup(func() { f.Close() })
	data := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(n), 3))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	return f, data
}

// tcpPair returns both ends of a loopback TCP connection; the sender's
// send buffer is made small so that sends of a few MiB are partial and
// meet EAGAIN many times.
func tcpPair(t *testing.T) (send *net.TCPConn, recv net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	st := s.(*net.TCPConn)
	if err := st.SetWriteBuffer(16 << 10); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).SetReadBuffer(16 << 10); err != nil {
		t.Fatal(err)
	}
	return st, c
}

// TestSendFile sends ranges of a memory file through a small socket
// buffer to a slow reader: every byte must arrive in order, whatever the
// offset and length, and the file's own position must not move (many
// connections send from one file at once).
func TestSendFile(t *testing.T) {
	f, data := memFile(t, 3<<20)
	cases := []struct {
		name   string
		off, n int64
	}{
		{"one byte", 0, 1},
		{"unaligned offset", 4096 + 123, 100_000},
		{"2 MiB and a bit, partial sends", 777, 2<<20 + 5},
		{"to the file's end", 3<<20 - 4096, 4096},
	}
	for _, tc := range cases {
		for _, how := range senders(t) {
			t.Run(how.name+"/"+tc.name, func(t *testing.T) {
				snd, rcv := tcpPair(t)
				rc, err := snd.SyscallConn()
				if err != nil {
					t.Fatal(err)
				}
				got := make(chan []byte, 1)
				go func() {
					b := make([]byte, tc.n)
					var off int
					for off < len(b) {
						// Read in small steps so the sender keeps hitting a full buffer.
						m, err := rcv.Read(b[off:min(len(b), off+8<<10)])
						off += m
						if err != nil {
							break
						}
					}
					got <- b[:off]
				}()
				snd.SetWriteDeadline(time.Now().Add(20 * time.Second))
				sent, err := how.send(rc, int(f.Fd()), tc.off, tc.n)
				if err != nil || sent != tc.n {
					t.Fatalf("sent %d of %d: %v", sent, tc.n, err)
				}
				if b := <-got; !bytes.Equal(b, data[tc.off:tc.off+tc.n]) {
					t.Fatalf("received %d bytes that differ from the file's range", len(b))
				}
				if pos, _ := f.Seek(0, io.SeekCurrent); pos != 0 {
					t.Fatalf("the file's position moved to %d", pos)
				}
			})
		}
	}
}

type sender struct {
	name string
	send func(rc syscall.RawConn, fd int, off, n int64) (int64, error)
}

// senders are the two ways to send a file range: sendfile, and splice
// through a pipe of the connection's own.
func senders(t *testing.T) []sender {
	p, err := newPipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)
	return []sender{
		{"sendfile", sendFile},
		{"splice", func(rc syscall.RawConn, fd int, off, n int64) (int64, error) { return spliceFile(rc, p, fd, off, n) }},
	}
}

// TestSendFileErrors: a reader that never reads ends the send at the write
// deadline with the bytes sent so far; a range past the file's end is an
// error, not a hang or a short success.
func TestSendFileErrors(t *testing.T) {
	f, _ := memFile(t, 3<<20)
	for _, how := range senders(t) {
		t.Run(how.name+"/deadline", func(t *testing.T) {
			snd, _ := tcpPair(t)
			rc, _ := snd.SyscallConn()
			snd.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
			sent, err := how.send(rc, int(f.Fd()), 0, 3<<20)
			if !errors.Is(err, os.ErrDeadlineExceeded) || sent <= 0 || sent >= 3<<20 {
				t.Fatalf("sent %d, err %v; want a partial send ended by the deadline", sent, err)
			}
		})
	}
	// A fresh pipe each: the deadline case leaves bytes in the shared one.
	for _, how := range senders(t) {
		t.Run(how.name+"/past the end", func(t *testing.T) {
			snd, rcv := tcpPair(t)
			go io.Copy(io.Discard, rcv)
			rc, _ := snd.SyscallConn()
			snd.SetWriteDeadline(time.Now().Add(10 * time.Second))
			sent, err := how.send(rc, int(f.Fd()), 3<<20-10, 100)
			if !errors.Is(err, io.ErrUnexpectedEOF) || sent != 10 {
				t.Fatalf("sent %d, err %v; want 10 and ErrUnexpectedEOF", sent, err)
			}
		})
	}
}
