package wire

import (
	"errors"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
)

// Each read flag decodes in the header and is accepted only on the opcodes
// it applies to; anything else is a MalformedFrame that keeps the connection.
func TestReadFlags(t *testing.T) {
	keys := AppendKey(AppendNamespace(nil, "default"), block.NewKey("default", 7))
	pin := AppendKey(le.AppendUint64(AppendNamespace(nil, "default"), 1000), block.NewKey("default", 7))
	bodies := []struct {
		op   Op
		body []byte
	}{
		{OpGet, keys}, {OpExists, keys}, {OpLookup, keys}, {OpDescribe, keys},
		{OpDelete, keys}, {OpPin, pin}, {OpPing, nil},
	}
	for _, fc := range []struct {
		name string
		flag uint8
		ok   map[Op]bool
	}{
		{"linearizable", FlagLinearizable, map[Op]bool{OpGet: true, OpExists: true, OpLookup: true, OpDescribe: true}},
		{"verify at rest", FlagVerifyAtRest, map[Op]bool{OpGet: true}},
		{"both", FlagLinearizable | FlagVerifyAtRest, map[Op]bool{OpGet: true}},
		{"put hints", FlagPutHints, map[Op]bool{}}, // PUT only: put_test.go
	} {
		for _, tc := range bodies {
			h := Header{Length: uint32(len(tc.body)), Op: tc.op, Flags: fc.flag}
			if tc.op != OpPing {
				h.Count = 1
			}
			// The header itself decodes: the flag is known.
			raw := AppendHeader(nil, h)
			dh, err := DecodeHeader(raw, testLimits.MaxFrameSize)
			if err != nil || dh.Flags != fc.flag {
				t.Fatalf("%s, %s: header %+v %v", fc.name, tc.op, dh, err)
			}
			_, err = DecodeRequest(dh, tc.body, testLimits)
			if fc.ok[tc.op] && err != nil {
				t.Errorf("%s on %s: %v", fc.name, tc.op, err)
			}
			if !fc.ok[tc.op] && !errors.Is(err, errcode.ErrMalformedFrame) {
				t.Errorf("%s on %s: %v, want MalformedFrame", fc.name, tc.op, err)
			}
		}
	}
	for _, bit := range []uint8{1 << 6, 1 << 7} {
		if _, err := DecodeHeader(AppendHeader(nil, Header{Op: OpGet, Flags: bit}), testLimits.MaxFrameSize); !errors.Is(err, errcode.ErrMalformedFrame) {
			t.Errorf("unknown flag bit %#02x: %v", bit, err)
		}
	}
}
