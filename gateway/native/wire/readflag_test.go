package wire

import (
	"errors"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
)

func TestLinearizableFlag(t *testing.T) {
	keys := AppendKey(AppendNamespace(nil, "default"), block.NewKey("default", 7))
	pin := AppendKey(le.AppendUint64(AppendNamespace(nil, "default"), 1000), block.NewKey("default", 7))
	for _, tc := range []struct {
		op   Op
		body []byte
		ok   bool
	}{
		{OpGet, keys, true}, {OpExists, keys, true}, {OpLookup, keys, true}, {OpDescribe, keys, true},
		{OpDelete, keys, false}, {OpPin, pin, false}, {OpPing, nil, false},
	} {
		h := Header{Length: uint32(len(tc.body)), Op: tc.op, Flags: FlagLinearizable}
		if tc.op != OpPing {
			h.Count = 1
		}
		// The header itself decodes: the flag is known.
		raw := AppendHeader(nil, h)
		dh, err := DecodeHeader(raw, testLimits.MaxFrameSize)
		if err != nil || dh.Flags != FlagLinearizable {
			t.Fatalf("%s: header %+v %v", tc.op, dh, err)
		}
		_, err = DecodeRequest(dh, tc.body, testLimits)
		if tc.ok && err != nil {
			t.Errorf("%s with the flag: %v", tc.op, err)
		}
		if !tc.ok && !errors.Is(err, errcode.ErrMalformedFrame) {
			t.Errorf("%s with the flag: %v, want MalformedFrame", tc.op, err)
		}
	}
	if _, err := DecodeHeader(AppendHeader(nil, Header{Op: OpGet, Flags: 1 << 2}), testLimits.MaxFrameSize); !errors.Is(err, errcode.ErrMalformedFrame) {
		t.Errorf("an unknown flag bit: %v", err)
	}
}
