package resp

import (
	"bufio"
	"strconv"
	"strings"
)

// writer encodes replies into a connection's buffered writer, in RESP2 or,
// after HELLO 3, RESP3 (nulls, maps).
type writer struct {
	bw    *bufio.Writer
	proto int
	num   [24]byte
}

func (w *writer) line(prefix byte, s string) {
	w.bw.WriteByte(prefix)
	w.bw.WriteString(s)
	w.bw.WriteString("\r\n")
}

func (w *writer) count(prefix byte, n int64) {
	w.bw.WriteByte(prefix)
	w.bw.Write(strconv.AppendInt(w.num[:0], n, 10))
	w.bw.WriteString("\r\n")
}

// ok writes +OK.
func (w *writer) ok() { w.bw.WriteString("+OK\r\n") }

// simple writes a simple string (no CR or LF inside).
func (w *writer) simple(s string) { w.line('+', s) }

// err writes an error reply: prefix (ERR, NOAUTH, ...) and a message with
// any CR or LF replaced, so a message can never break the framing.
func (w *writer) err(prefix, msg string) {
	msg = strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, msg)
	w.line('-', prefix+" "+msg)
}

// int writes an integer.
func (w *writer) int(n int64) { w.count(':', n) }

// bulk writes a bulk string.
func (w *writer) bulk(b []byte) {
	w.count('$', int64(len(b)))
	w.bw.Write(b)
	w.bw.WriteString("\r\n")
}

// bulkString writes a bulk string from a string.
func (w *writer) bulkString(s string) {
	w.count('$', int64(len(s)))
	w.bw.WriteString(s)
	w.bw.WriteString("\r\n")
}

// null writes a null bulk string (RESP2 $-1, RESP3 _).
func (w *writer) null() {
	if w.proto == 3 {
		w.bw.WriteString("_\r\n")
		return
	}
	w.bw.WriteString("$-1\r\n")
}

// array writes an array header of n elements.
func (w *writer) array(n int) { w.count('*', int64(n)) }

// mapHeader writes a map of n pairs: RESP3 %n, RESP2 an array of 2n.
func (w *writer) mapHeader(n int) {
	if w.proto == 3 {
		w.count('%', int64(n))
		return
	}
	w.count('*', int64(2*n))
}
