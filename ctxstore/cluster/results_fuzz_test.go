package cluster

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/ctxtier/ctxtier/raft/fsm"
)

// FuzzDecodeResults feeds the forwarded-answer decoder (the bytes a follower
// reads back from the leader) arbitrary input. It must never panic; what it
// accepts must be exactly want results whose encoding is the input itself
// (one answer, one encoding: no longer varints, no trailing bytes); and any
// results built from the input must survive EncodeResults → DecodeResults.
func FuzzDecodeResults(f *testing.F) {
	f.Add(EncodeResults(nil), uint8(0))
	f.Add(EncodeResults([]fsm.OpResult{{Status: fsm.StatusCreated, Generation: 1}}), uint8(1))
	f.Add(EncodeResults([]fsm.OpResult{
		{Status: fsm.StatusExisted, Generation: 1 << 40},
		{Status: fsm.StatusConflict, Generation: 7},
		{Status: fsm.StatusStaleHolder},
	}), uint8(3))
	f.Add([]byte{resultsVersion, 1, byte(fsm.StatusCreated), 0x81, 0x00}, uint8(1)) // generation 1 in two bytes
	f.Add([]byte{resultsVersion, 0x80, 0x00}, uint8(0))                             // count 0 in two bytes
	f.Add([]byte{2, 0}, uint8(0))
	f.Add([]byte{resultsVersion, 2, 1, 1}, uint8(2))
	f.Fuzz(func(t *testing.T, b []byte, want uint8) {
		out, err := DecodeResults(b, int(want))
		if err == nil {
			if len(out) != int(want) {
				t.Fatalf("decoded %d results, want %d", len(out), want)
			}
			if enc := EncodeResults(out); !bytes.Equal(enc, b) {
				t.Fatalf("accepted %x, which re-encodes as %x", b, enc)
			}
		}
		// Results made from the input round-trip.
		var res []fsm.OpResult
		for len(b) >= 9 && len(res) < 64 {
			res = append(res, fsm.OpResult{Status: fsm.Status(b[0]), Generation: binary.LittleEndian.Uint64(b[1:9])})
			b = b[9:]
		}
		got, err := DecodeResults(EncodeResults(res), len(res))
		if err != nil {
			t.Fatalf("decoding an encoding of %d results: %v", len(res), err)
		}
		for i := range res {
			if got[i] != res[i] {
				t.Fatalf("result %d: %+v, want %+v", i, got[i], res[i])
			}
		}
	})
}
