package httpwire

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
)

func TestSumRoundTrip(t *testing.T) {
	for _, v := range []uint32{0, 1, 0xdeadbeef, 0xffffffff} {
		got, err := ParseSum(FormatSum(v))
		if err != nil || got != v {
			t.Fatalf("ParseSum(FormatSum(%x)) = %x, %v", v, got, err)
		}
	}
	if v, err := ParseSum("DEADBEEF"); err != nil || v != 0xdeadbeef {
		t.Fatalf("upper case: %x %v", v, err)
	}
	for _, bad := range []string{"", "1234567", "123456789", "0x123456", "1234567g", "+1234567"} {
		if _, err := ParseSum(bad); !errors.Is(err, block.ErrInvalidArgument) {
			t.Errorf("ParseSum(%q) = %v, want ErrInvalidArgument", bad, err)
		}
	}
}

func TestParsePinTTL(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"300", 300 * time.Second, true},
		{"0", 0, true},
		{"5m", 5 * time.Minute, true},
		{"1h30m", 90 * time.Minute, true},
		{"1.5s", 1500 * time.Millisecond, true},
		{"-1", 0, false},
		{"-5m", 0, false},
		{"", 0, false},
		{"abc", 0, false},
		{"99999999999999999999", 0, false},
		{"9000h", 0, false},
	}
	for _, tc := range tests {
		got, err := ParsePinTTL(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("ParsePinTTL(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
		if tc.ok {
			back, err := ParsePinTTL(FormatPinTTL(got))
			if err != nil || back != got {
				t.Errorf("round trip %v: %v %v", got, back, err)
			}
		}
	}
}

func TestPutOptionsRoundTrip(t *testing.T) {
	for _, in := range []block.PutOptions{
		{Sum: 0xabcdef01, HasSum: true, Priority: 3, HasPriority: true, PinTTL: 90 * time.Second, Parent: 42, HasParent: true},
		{Reuse: block.ReuseShared, Retain: 10 * time.Minute},
		{Reuse: block.ReuseSession, Retain: 1500 * time.Millisecond},
		{Reuse: block.ReuseNever},
		{Retain: 30 * time.Second},
	} {
		h := http.Header{}
		SetPutOptions(h, in)
		out, err := ParsePutOptions(h)
		if err != nil || out != in {
			t.Fatalf("round trip: %+v %v, want %+v", out, err, in)
		}
	}
	if h := (http.Header{HeaderReuse: {"session"}, HeaderRetain: {"45"}}); true {
		if o, err := ParsePutOptions(h); err != nil || o.Reuse != block.ReuseSession || o.Retain != 45*time.Second {
			t.Fatalf("reuse session, retain 45: %+v %v", o, err)
		}
	}
	for _, tc := range []struct{ k, v string }{
		{HeaderCRC, "xyz"}, {HeaderPriority, "8"}, {HeaderPriority, "-1"}, {HeaderPinTTL, "-3"}, {HeaderParent, "ABCDEF0123456789"},
		{HeaderReuse, "always"}, {HeaderReuse, "Session"}, {HeaderReuse, ""}, {HeaderRetain, "-5"}, {HeaderRetain, "soon"}, {HeaderRetain, ""},
		{HeaderRetain, "1000000h"},
	} {
		h := http.Header{}
		h.Set(tc.k, tc.v)
		_, err := ParsePutOptions(h)
		hint := tc.k == HeaderReuse || tc.k == HeaderRetain
		if err == nil || errcode.Of(err) == errcode.Internal || hint && errcode.Of(err) != errcode.InvalidArgument {
			t.Errorf("%s: %q: err %v, want a classified error (InvalidArgument for a hint)", tc.k, tc.v, err)
		}
	}
	// A retain window on a block that will never be read again contradicts.
	h := http.Header{HeaderReuse: {"never"}, HeaderRetain: {"10"}}
	if _, err := ParsePutOptions(h); errcode.Of(err) != errcode.InvalidArgument {
		t.Errorf("reuse never with a retain window: %v", err)
	}
}

func TestDecodeJSON(t *testing.T) {
	tests := []struct {
		body string
		ok   bool
	}{
		{`{"hashes":["0000000000000001"]}`, true},
		{`{"hashes":[]}`, true},
		{``, false},
		{`{"hashes":["a"]} {}`, false},
		{`{"hashes":["a"]} x`, false},
		{`{"hashes":"x"}`, false},
		{`{"hashez":[]}`, false},
		{`{"hashes":[`, false},
	}
	for _, tc := range tests {
		var req HashesRequest
		err := DecodeJSON(strings.NewReader(tc.body), &req)
		if (err == nil) != tc.ok {
			t.Errorf("DecodeJSON(%q) = %v, want ok=%v", tc.body, err, tc.ok)
		}
		if err != nil && !errors.Is(err, block.ErrInvalidArgument) {
			t.Errorf("DecodeJSON(%q) = %v, want ErrInvalidArgument", tc.body, err)
		}
	}
	// A reader error passes through unclassified as JSON.
	sentinel := errors.New("limit hit")
	err := DecodeJSONBody(io.MultiReader(strings.NewReader(`{"hashes":[`), errAfter{sentinel}), &HashesRequest{})
	if !errors.Is(err, sentinel) || errors.Is(err, block.ErrInvalidArgument) {
		t.Fatalf("reader error: %v", err)
	}
}

type errAfter struct{ err error }

func (e errAfter) Read([]byte) (int, error) { return 0, e.err }

func TestParseKeys(t *testing.T) {
	keys, err := ParseKeys("ns", []string{"0000000000000001", "00000000000000ff.3"}, 2)
	if err != nil || len(keys) != 2 || keys[1] != block.NewKey("ns", 255).WithPart(3) {
		t.Fatalf("ParseKeys: %v %v", keys, err)
	}
	if _, err := ParseKeys("ns", []string{"0000000000000001", "bad"}, 0); !errors.Is(err, block.ErrInvalidKey) || !strings.Contains(err.Error(), "item 1") {
		t.Fatalf("bad key: %v", err)
	}
	if _, err := ParseKeys("ns", make([]string, 3), 2); !errors.Is(err, block.ErrTooLarge) {
		t.Fatalf("too many: %v", err)
	}
}

func testParts(ns string) []Part {
	return []Part{
		{Key: block.NewKey(ns, 1), Data: []byte("hello"), Opts: block.PutOptions{Sum: block.Checksum([]byte("hello")), HasSum: true}},
		{Key: block.NewKey(ns, 2).WithPart(7), Data: bytes.Repeat([]byte{0, '\r', '\n', '-'}, 100), Opts: block.PutOptions{Priority: 5, HasPriority: true, PinTTL: time.Minute}},
		{Key: block.NewKey(ns, 3), Data: []byte("x")},
	}
}

func TestBatchPutRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 3} {
		parts := testParts("ns")[:n]
		b := NewBoundary()
		body, size := EncodeBatchPut(b, parts)
		raw, _ := io.ReadAll(body)
		if int64(len(raw)) != size {
			t.Fatalf("n=%d: size %d, body %d bytes", n, size, len(raw))
		}
		got, err := ReadBatchPut(bytes.NewReader(raw), b, "ns", Limits{MaxItems: 3, MaxBlockSize: 1000, MaxTotalBytes: 2000})
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if len(got) != n {
			t.Fatalf("n=%d: got %d parts", n, len(got))
		}
		for i := range got {
			if got[i].Key != parts[i].Key || !bytes.Equal(got[i].Data, parts[i].Data) || got[i].Opts != parts[i].Opts {
				t.Fatalf("part %d: got %+v want %+v", i, got[i], parts[i])
			}
		}
	}
}

func TestReadBatchPutErrors(t *testing.T) {
	b := "BOUNDARY"
	body, _ := EncodeBatchPut(b, testParts("ns"))
	raw, _ := io.ReadAll(body)
	part := func(hdr, data string) string {
		return "--" + b + "\r\n" + hdr + "\r\n" + data + "\r\n--" + b + "--\r\n"
	}
	tests := []struct {
		name string
		body string
		lim  Limits
		want error
	}{
		{"truncated", string(raw[:len(raw)-20]), Limits{}, block.ErrInvalidArgument},
		{"truncated in data", string(raw[:200]), Limits{}, block.ErrInvalidArgument},
		{"no closing", string(raw[:len(raw)-len(b)-6]), Limits{}, block.ErrInvalidArgument},
		{"garbage", "hello world", Limits{}, block.ErrInvalidArgument},
		{"too many", string(raw), Limits{MaxItems: 2}, block.ErrTooLarge},
		{"block too big", string(raw), Limits{MaxBlockSize: 100}, block.ErrTooLarge},
		{"batch too big", string(raw), Limits{MaxTotalBytes: 300}, block.ErrTooLarge},
		{"missing hash", part("Content-Length: 1\r\n", "x"), Limits{}, block.ErrInvalidArgument},
		{"bad hash", part("X-Ctxtier-Hash: 12\r\n", "x"), Limits{}, block.ErrInvalidKey},
		{"bad crc", part("X-Ctxtier-Hash: 0000000000000001\r\nX-Ctxtier-Crc32c: zz\r\n", "x"), Limits{}, block.ErrInvalidArgument},
		{"long body", part("X-Ctxtier-Hash: 0000000000000001\r\nContent-Length: 1\r\n", "xy"), Limits{}, block.ErrInvalidArgument},
		{"short body", part("X-Ctxtier-Hash: 0000000000000001\r\nContent-Length: 5\r\n", "xy"), Limits{}, block.ErrInvalidArgument},
		{"bad length", part("X-Ctxtier-Hash: 0000000000000001\r\nContent-Length: -1\r\n", "xy"), Limits{}, block.ErrInvalidArgument},
		{"no length too big", part("X-Ctxtier-Hash: 0000000000000001\r\n", "xyz"), Limits{MaxBlockSize: 2}, block.ErrTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadBatchPut(strings.NewReader(tc.body), b, "ns", tc.lim)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := ReadBatchPut(strings.NewReader(string(raw)), "", "ns", Limits{}); !errors.Is(err, block.ErrInvalidArgument) {
		t.Fatalf("empty boundary: %v", err)
	}
}

func TestReadBatchGet(t *testing.T) {
	var buf bytes.Buffer
	b := "XYZ"
	buf.WriteString("--" + b + "\r\n")
	for k, v := range GetPartHeader(block.NewKey("ns", 1), 5, block.Checksum([]byte("hello")), block.TierDRAM) {
		buf.WriteString(k + ": " + v[0] + "\r\n")
	}
	buf.WriteString("\r\nhello\r\n--" + b + "\r\n")
	h, eb := ErrorPart(block.NewKey("ns", 2), block.ErrNotFound)
	for k, v := range h {
		buf.WriteString(k + ": " + v[0] + "\r\n")
	}
	buf.WriteString("\r\n")
	buf.Write(eb)
	buf.WriteString("\r\n--" + b + "\r\n")
	for k, v := range GetPartHeader(block.NewKey("ns", 3), 5, 1234, block.TierDRAM) {
		buf.WriteString(k + ": " + v[0] + "\r\n")
	}
	buf.WriteString("\r\nhello\r\n--" + b + "--\r\n")
	parts, err := ReadBatchGet(&buf, b, "ns", Limits{MaxItems: 3})
	if err != nil || len(parts) != 3 {
		t.Fatalf("ReadBatchGet: %v %d", err, len(parts))
	}
	if string(parts[0].Data) != "hello" || parts[0].Err != nil || parts[0].Tier != block.TierDRAM {
		t.Fatalf("part 0: %+v", parts[0])
	}
	if !errors.Is(parts[1].Err, block.ErrNotFound) {
		t.Fatalf("part 1: %+v", parts[1])
	}
	if !errors.Is(parts[2].Err, block.ErrChecksum) || parts[2].Data != nil {
		t.Fatalf("part 2: %+v", parts[2])
	}
}

// TestParseHintsNamed reads the agent hints from whichever headers names
// gives (the S3 endpoint's user metadata) exactly as from the HTTP API's,
// ignores the other set, and names the header at fault in every error.
func TestParseHintsNamed(t *testing.T) {
	meta := HintHeaders{Reuse: "X-Amz-Meta-Ctx-Reuse", Retain: "X-Amz-Meta-Ctx-Retain", Session: "X-Amz-Meta-Ctx-Session"}
	for _, tc := range []struct {
		name    string
		h       http.Header
		want    block.PutOptions
		badName string // the header an error must name; "" when valid
	}{
		{"none", http.Header{}, block.PutOptions{}, ""},
		{"all", http.Header{meta.Reuse: {"session"}, meta.Retain: {"90"}, meta.Session: {"42"}},
			block.PutOptions{Reuse: block.ReuseSession, Retain: 90 * time.Second, Session: 42}, ""},
		{"duration and shared", http.Header{meta.Reuse: {"shared"}, meta.Retain: {"2m30s"}},
			block.PutOptions{Reuse: block.ReuseShared, Retain: 150 * time.Second}, ""},
		{"the HTTP API's headers are not these", http.Header{HeaderReuse: {"never"}, HeaderSession: {"9"}}, block.PutOptions{}, ""},
		{"bad reuse", http.Header{meta.Reuse: {"always"}}, block.PutOptions{}, meta.Reuse},
		{"empty reuse", http.Header{meta.Reuse: {""}}, block.PutOptions{}, meta.Reuse},
		{"bad retain", http.Header{meta.Retain: {"soon"}}, block.PutOptions{}, meta.Retain},
		{"retain above the maximum", http.Header{meta.Retain: {"100000h"}}, block.PutOptions{}, meta.Retain},
		{"session 0", http.Header{meta.Session: {"0"}}, block.PutOptions{}, meta.Session},
		{"session not a number", http.Header{meta.Session: {"s1"}}, block.PutOptions{}, meta.Session},
		{"retain on never", http.Header{meta.Reuse: {"never"}, meta.Retain: {"30"}}, block.PutOptions{}, "retain window"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o block.PutOptions
			err := ParseHints(tc.h, meta, &o)
			if tc.badName != "" {
				if !errors.Is(err, block.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.badName) {
					t.Fatalf("error %v, want InvalidArgument naming %s", err, tc.badName)
				}
				return
			}
			if err != nil || o != tc.want {
				t.Fatalf("ParseHints = %+v, %v; want %+v", o, err, tc.want)
			}
		})
	}
}
