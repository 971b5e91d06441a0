package wire

import (
	"errors"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/gateway/errcode"
)

func TestDecodeDeleteIf(t *testing.T) {
	k1, k2 := block.NewKey("ns", 1), block.NewKey("ns", 2).WithShard(1)
	good := AppendDeleteIfItem(AppendDeleteIfItem(AppendNamespace(nil, "ns"), k1, 0xdeadbeef), k2, 7)
	badKey := AppendNamespace(nil, "ns")
	badKey = AppendDeleteIfItem(badKey, k1, 1)
	badKey[len(badKey)-6] = 0x80 // the key's flags byte: an unknown bit
	for _, tt := range []struct {
		name    string
		count   uint32
		body    []byte
		wantErr error
		keyErr  []bool
	}{
		{"two items", 2, good, nil, nil},
		{"count short of the items", 1, good, errcode.ErrMalformedFrame, nil},
		{"a key without its checksum", 1, AppendKey(AppendNamespace(nil, "ns"), k1), errcode.ErrMalformedFrame, nil},
		{"a bad key is that item's error", 1, badKey, nil, []bool{true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := Header{Length: uint32(len(tt.body)), Op: OpDeleteIf, Count: tt.count}
			r, err := DecodeRequest(h, tt.body, testLimits)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if tt.keyErr != nil {
				for i, bad := range tt.keyErr {
					if (r.KeyErrs != nil && r.KeyErrs[i] != nil) != bad {
						t.Fatalf("item %d: key error %v, want one: %v", i, r.KeyErrs, bad)
					}
				}
				return
			}
			if r.KeyErrs != nil || len(r.Keys) != 2 || r.Keys[0] != k1 || r.Keys[1] != k2 || r.Sums[0] != 0xdeadbeef || r.Sums[1] != 7 {
				t.Fatalf("decoded keys %v sums %v key errors %v", r.Keys, r.Sums, r.KeyErrs)
			}
		})
	}
}
