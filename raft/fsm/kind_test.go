package fsm

import (
	"bytes"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TestNamespaceKindCodec: the kind survives a command's round trip, and a
// block namespace encodes exactly as before kinds existed (old logs decode).
func TestNamespaceKindCodec(t *testing.T) {
	base := block.DefaultNamespaceConfig()
	base.Name = "bucket-a"
	tests := []struct {
		kind, want block.Kind
	}{
		{"", ""},
		{block.KindObject, block.KindObject},
	}
	for _, tt := range tests {
		ns := base
		ns.Kind = tt.kind
		b := EncodeNamespace(NamespaceCommand{Action: NamespaceCreate, Namespace: ns})
		c, err := DecodeCommand(b)
		if err != nil {
			t.Fatalf("kind %q: %v", tt.kind, err)
		}
		if c.Namespace.Namespace.Kind != tt.want || c.Namespace.Namespace.Name != ns.Name {
			t.Fatalf("kind %q decoded as %+v", tt.kind, c.Namespace.Namespace)
		}
	}
	plain := EncodeNamespace(NamespaceCommand{Action: NamespaceCreate, Namespace: base})
	withBlock := base
	withBlock.Kind = block.KindBlock
	if !bytes.Equal(EncodeNamespace(NamespaceCommand{Action: NamespaceCreate, Namespace: withBlock}), plain) {
		t.Fatal("an explicit block kind changed the encoding")
	}
}
