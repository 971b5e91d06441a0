package raft

import (
	"bytes"
	"errors"
	"testing"
)

// countingReader counts the bytes taken from it.
type countingReader struct {
	r *bytes.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// FuzzHandshakeFrame checks the handshake frame decoder on any bytes:
// decoding from a slice and reading from a stream agree; an accepted frame
// is of a known kind with that kind's payload length, at most maxFrameLen
// bytes, and encodes back to exactly the bytes it came from; the stream
// reader never takes more than the frame it returns (the Raft bytes after
// the handshake stay unread), nor more than maxFrameLen when it refuses;
// every refusal is ErrPeerAuth.
func FuzzHandshakeFrame(f *testing.F) {
	f.Add(frame{kindHello, make([]byte, nonceLen)}.encode(nil))
	f.Add(frame{kindProof, bytes.Repeat([]byte{1}, macLen)}.encode(nil))
	f.Add(frame{kindAccept, bytes.Repeat([]byte{2}, macLen)}.encode(nil))
	f.Add(frame{kindRefuse, []byte("cluster secret mismatch")}.encode(nil))
	f.Add(append(frame{kindHello, make([]byte, nonceLen)}.encode(nil), 0x01, 0x82))
	f.Add(append([]byte(frameMagic), kindRefuse, 0xff))
	f.Add(append([]byte(frameMagic), kindHello, 3, 1, 2, 3))
	f.Add([]byte{1, 0x81, 0xa4, 'T', 'e', 'r', 'm', 0x63})
	f.Add([]byte(frameMagic))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, n, err := decodeFrame(data)
		cr := &countingReader{r: bytes.NewReader(data)}
		sf, serr := readFrame(cr)
		if cr.n > maxFrameLen {
			t.Fatalf("stream reader took %d bytes (limit %d)", cr.n, maxFrameLen)
		}
		if err != nil {
			if !errors.Is(err, ErrPeerAuth) {
				t.Fatalf("decode error %v is not ErrPeerAuth", err)
			}
			if serr == nil {
				t.Fatalf("stream reader accepted %x that decode refused (%v)", data, err)
			}
			return
		}
		if serr != nil {
			t.Fatalf("stream reader refused %x that decode accepted: %v", data, serr)
		}
		if cr.n != n || sf.kind != fr.kind || !bytes.Equal(sf.payload, fr.payload) {
			t.Fatalf("stream reader (%d bytes, %+v) and decode (%d bytes, %+v) disagree", cr.n, sf, n, fr)
		}
		if n > maxFrameLen || n > len(data) || n != frameHeaderLen+len(fr.payload) {
			t.Fatalf("frame of %d bytes with a %d-byte payload from %d bytes", n, len(fr.payload), len(data))
		}
		want, ok := payloadLen(fr.kind)
		if !ok || want >= 0 && len(fr.payload) != want || len(fr.payload) > maxFramePayload {
			t.Fatalf("accepted kind %d with a %d-byte payload", fr.kind, len(fr.payload))
		}
		if enc := fr.encode(nil); !bytes.Equal(enc, data[:n]) {
			t.Fatalf("re-encoded %x, decoded from %x", enc, data[:n])
		}
	})
}
