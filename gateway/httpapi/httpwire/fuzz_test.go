package httpwire

import (
	"bytes"
	"io"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
)

const fuzzBoundary = "fuzzb"

var fuzzLimits = Limits{MaxItems: 8, MaxBlockSize: 256, MaxTotalBytes: 1024}

// classified fails the test when err would reach a client as Internal: every
// decoder error must say what was wrong with the input.
func classified(t *testing.T, err error) {
	t.Helper()
	if c := errcode.Of(err); c != errcode.InvalidArgument && c != errcode.InvalidKey && c != errcode.TooLarge {
		t.Fatalf("unclassified decoder error (%s): %v", c, err)
	}
}

// FuzzReadBatchPut feeds arbitrary bodies to the batch-put decoder. A decoded
// batch must respect every limit and survive a re-encode/decode round trip.
func FuzzReadBatchPut(f *testing.F) {
	body, _ := EncodeBatchPut(fuzzBoundary, testParts("ns"))
	raw, _ := io.ReadAll(body)
	f.Add(raw)
	f.Add(raw[:len(raw)/2])
	empty, _ := EncodeBatchPut(fuzzBoundary, nil)
	rawEmpty, _ := io.ReadAll(empty)
	f.Add(rawEmpty)
	f.Add([]byte("--fuzzb\r\nX-Ctxtier-Hash: 0000000000000001.1\r\n\r\nabc\r\n--fuzzb--\r\n"))
	f.Add([]byte("--fuzzb\r\nX-Ctxtier-Hash: 0000000000000001\r\nContent-Length: 3\r\nX-Ctxtier-Pin-Ttl: 5m\r\n\r\nabc\r\n--fuzzb--"))
	f.Add([]byte("--fuzzb\r\nX-Ctxtier-Hash: 0000000000000001\r\nX-Ctxtier-Reuse: session\r\nX-Ctxtier-Retain: 30\r\n\r\nabc\r\n--fuzzb\r\nX-Ctxtier-Hash: 0000000000000002\r\nX-Ctxtier-Reuse: never\r\n\r\nxyz\r\n--fuzzb--\r\n"))
	f.Add([]byte("--fuzzb\r\nX-Ctxtier-Hash: 0000000000000001\r\nX-Ctxtier-Reuse: never\r\nX-Ctxtier-Retain: 1m\r\n\r\nabc\r\n--fuzzb--\r\n"))
	f.Add([]byte("--fuzzb\r\nX-Ctxtier-Hash: 0000000000000001\r\nX-Ctxtier-Reuse: session\r\nX-Ctxtier-Session: 42\r\n\r\nabc\r\n--fuzzb\r\nX-Ctxtier-Hash: 0000000000000002\r\nX-Ctxtier-Session: 0\r\n\r\nxyz\r\n--fuzzb--\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		parts, err := ReadBatchPut(bytes.NewReader(in), fuzzBoundary, "ns", fuzzLimits)
		if err != nil {
			classified(t, err)
			return
		}
		if len(parts) > fuzzLimits.MaxItems {
			t.Fatalf("%d parts over the limit", len(parts))
		}
		var total int64
		for _, p := range parts {
			if int64(len(p.Data)) > fuzzLimits.MaxBlockSize || p.Key.Namespace != "ns" {
				t.Fatalf("bad part %+v", p)
			}
			if err := p.Opts.ValidateHints(); err != nil {
				t.Fatalf("part accepted with invalid hints: %v", err)
			}
			total += int64(len(p.Data))
		}
		if total > fuzzLimits.MaxTotalBytes {
			t.Fatalf("total %d over the limit", total)
		}
		re, _ := EncodeBatchPut(fuzzBoundary, parts)
		again, err := ReadBatchPut(re, fuzzBoundary, "ns", fuzzLimits)
		if err != nil || len(again) != len(parts) {
			t.Fatalf("re-decode: %v (%d vs %d parts)", err, len(again), len(parts))
		}
		for i := range parts {
			if again[i].Key != parts[i].Key || !bytes.Equal(again[i].Data, parts[i].Data) || again[i].Opts != parts[i].Opts {
				t.Fatalf("part %d changed in round trip: %+v vs %+v", i, again[i], parts[i])
			}
		}
	})
}

// FuzzReadBatchGet feeds arbitrary responses to the client's batch-get
// decoder: no panic, limits hold, and no item with bytes fails its checksum.
func FuzzReadBatchGet(f *testing.F) {
	f.Add([]byte("--fuzzb\r\nX-Ctxtier-Hash: 0000000000000001\r\nX-Ctxtier-Crc32c: 3610a686\r\nContent-Length: 5\r\n\r\nhello\r\n--fuzzb--\r\n"))
	f.Add([]byte("--fuzzb\r\nX-Ctxtier-Hash: 0000000000000001\r\nX-Ctxtier-Error-Code: NotFound\r\n\r\n{\"code\":\"NotFound\",\"message\":\"m\"}\r\n--fuzzb--\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		parts, err := ReadBatchGet(bytes.NewReader(in), fuzzBoundary, "ns", fuzzLimits)
		if err != nil {
			classified(t, err)
			return
		}
		if len(parts) > fuzzLimits.MaxItems {
			t.Fatalf("%d parts over the limit", len(parts))
		}
		for _, p := range parts {
			if p.Err == nil && block.Checksum(p.Data) != p.Sum {
				t.Fatalf("unverified part %+v", p)
			}
			if p.Err != nil && p.Data != nil {
				t.Fatalf("failed part kept bytes")
			}
		}
	})
}

// FuzzBatchJSON feeds arbitrary bodies to the JSON batch decoders (hashes
// lists and lookups): no panic, only classified errors, and every accepted
// name is canonical (it renders back to itself).
func FuzzBatchJSON(f *testing.F) {
	f.Add([]byte(`{"hashes":["0000000000000001","00000000000000ff.2"]}`))
	f.Add([]byte(`{"tokens":[1,2,3,4]}`))
	f.Add([]byte(`{"hashes":[]} `))
	f.Add([]byte(`{"hashes":["0000000000000001.01"]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var req HashesRequest
		if err := DecodeJSON(bytes.NewReader(in), &req); err != nil {
			classified(t, err)
		} else if keys, err := ParseKeys("ns", req.Hashes, fuzzLimits.MaxItems); err != nil {
			classified(t, err)
		} else {
			for i, k := range keys {
				if k.ObjectName() != req.Hashes[i] {
					t.Fatalf("non-canonical name accepted: %q -> %q", req.Hashes[i], k.ObjectName())
				}
			}
		}
		var lr LookupRequest
		if err := DecodeJSON(bytes.NewReader(in), &lr); err != nil {
			classified(t, err)
		}
	})
}
