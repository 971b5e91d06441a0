package wire

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
)

// hintedPut encodes a PUT frame body with the hint flag: one item per opts.
func hintedPut(opts ...block.PutOptions) (Header, []byte) {
	b := AppendNamespace(nil, "default")
	for i, o := range opts {
		d := []byte{byte(i), 1, 2}
		b = AppendPutItem(b, block.NewKey("default", uint64(i+1)), block.Checksum(d), uint32(len(d)), o)
		b = AppendPutHints(b, o)
		b = append(b, d...)
	}
	return Header{Length: uint32(len(b)), Op: OpPut, Flags: FlagPutHints, ID: 1, Count: uint32(len(opts))}, b
}

func TestPutHintsRoundTrip(t *testing.T) {
	in := []block.PutOptions{
		{},
		{Reuse: block.ReuseNever},
		{Reuse: block.ReuseSession, Retain: 30 * time.Second},
		{Reuse: block.ReuseShared, Retain: block.MaxRetain, Priority: 3, HasPriority: true, PinTTL: time.Second, Parent: 9, HasParent: true},
		{Retain: 1500 * time.Millisecond},
	}
	h, body := hintedPut(in...)
	req, err := DecodeRequest(h, body, testLimits)
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range req.Items {
		if it.Err != nil {
			t.Fatalf("item %d: %v", i, it.Err)
		}
		o := it.Opts
		if o.Reuse != in[i].Reuse || o.Retain != in[i].Retain || o.Priority != in[i].Priority || o.PinTTL != in[i].PinTTL || o.Parent != in[i].Parent {
			t.Fatalf("item %d: decoded %+v, sent %+v", i, o, in[i])
		}
		if string(it.Data) != string([]byte{byte(i), 1, 2}) {
			t.Fatalf("item %d: data %x", i, it.Data)
		}
	}
	// A retain window below a millisecond rounds up instead of vanishing.
	if got := le.Uint32(AppendPutHints(nil, block.PutOptions{Retain: time.Microsecond})[4:]); got != 1 {
		t.Fatalf("1µs retain encodes as %d ms", got)
	}
}

// TestPutHintsRejects: a bad hint record fails its own item with
// InvalidArgument and leaves the frame and the other items intact.
func TestPutHintsRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(rec []byte)
	}{
		{"undefined reuse", func(rec []byte) { rec[0] = byte(block.MaxReuse) + 1 }},
		{"reuse 255", func(rec []byte) { rec[0] = 255 }},
		{"reserved byte", func(rec []byte) { rec[2] = 1 }},
		{"retain on reuse never", func(rec []byte) { rec[0] = byte(block.ReuseNever); le.PutUint32(rec[4:], 1000) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, body := hintedPut(block.PutOptions{}, block.PutOptions{Reuse: block.ReuseSession})
			// The second item's hint record follows its 32-byte header.
			first := 1 + len("default") + PutItemSize + PutHintsSize + 3
			tc.mod(body[first+PutItemSize : first+PutItemSize+PutHintsSize])
			req, err := DecodeRequest(h, body, testLimits)
			if err != nil {
				t.Fatalf("the frame failed: %v", err)
			}
			if req.Items[0].Err != nil {
				t.Fatalf("item 0: %v", req.Items[0].Err)
			}
			if err := req.Items[1].Err; !errors.Is(err, block.ErrInvalidArgument) || errcode.Of(err) != errcode.InvalidArgument {
				t.Fatalf("item 1: %v, want InvalidArgument", err)
			}
			if string(req.Items[1].Data) != string([]byte{1, 1, 2}) {
				t.Fatalf("item 1 data %x: the frame was misparsed", req.Items[1].Data)
			}
		})
	}
	// A hinted frame cut inside a hint record is malformed as a whole.
	h, body := hintedPut(block.PutOptions{Reuse: block.ReuseShared})
	short := body[:1+len("default")+PutItemSize+4]
	h.Length = uint32(len(short))
	if _, err := DecodeRequest(h, short, testLimits); !errors.Is(err, errcode.ErrMalformedFrame) {
		t.Fatalf("truncated hint record: %v", err)
	}
	// The flag is for PUT only.
	keys := AppendKey(AppendNamespace(nil, "default"), block.NewKey("default", 7))
	if _, err := DecodeRequest(Header{Length: uint32(len(keys)), Op: OpGet, Flags: FlagPutHints, Count: 1}, keys, testLimits); !errors.Is(err, errcode.ErrMalformedFrame) {
		t.Fatalf("put-hints flag on a GET: %v", err)
	}
}

func TestCheckPutItems(t *testing.T) {
	l := Limits{MaxBlockSize: 8}
	type item struct {
		size int
		opts block.PutOptions
	}
	for _, tc := range []struct {
		name             string
		items            []item
		send             []int
		refused          []int // errs[i] wraps block.ErrTooLarge
		hinted, sessions bool
		wantHead         int64
	}{
		{"plain", []item{{4, block.PutOptions{}}, {8, block.PutOptions{}}}, []int{0, 1}, nil, false, false, PutItemSize},
		{"one too large", []item{{9, block.PutOptions{}}, {1, block.PutOptions{}}}, []int{1}, []int{0}, false, false, PutItemSize},
		{"hints", []item{{1, block.PutOptions{}}, {1, block.PutOptions{Reuse: block.ReuseNever}}}, []int{0, 1}, nil, true, false, PutItemHead(true, false)},
		{"session", []item{{1, block.PutOptions{Reuse: block.ReuseSession, Session: 7}}}, []int{0}, nil, true, true, PutItemSize + PutSessionHintsSize},
		// A refused item's hints do not make the frame carry hint records.
		{"refused hinted", []item{{9, block.PutOptions{Session: 7}}, {1, block.PutOptions{}}}, []int{1}, []int{0}, false, false, PutItemSize},
		{"none", nil, []int{}, nil, false, false, PutItemSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := make([]error, len(tc.items))
			send, hinted, sessions := CheckPutItems(l, len(tc.items), func(i int) (block.Key, int, block.PutOptions) {
				return block.NewKey("ns", uint64(i)), tc.items[i].size, tc.items[i].opts
			}, errs)
			if !slices.Equal(send, tc.send) || hinted != tc.hinted || sessions != tc.sessions {
				t.Fatalf("send %v hinted %v sessions %v, want %v %v %v", send, hinted, sessions, tc.send, tc.hinted, tc.sessions)
			}
			if h := PutItemHead(hinted, sessions); h != tc.wantHead {
				t.Fatalf("item head %d, want %d", h, tc.wantHead)
			}
			for i, err := range errs {
				if want := slices.Contains(tc.refused, i); want != errors.Is(err, block.ErrTooLarge) {
					t.Fatalf("item %d: %v (refusal expected: %v)", i, err, want)
				}
			}
		})
	}
}
