package fsm

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	hraft "github.com/hashicorp/raft"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

// TestNamespaceOldEncodingDecodes: namespace commands written before the
// extension fields existed (bytes captured from the previous encoder) still
// decode, to namespaces without quotas, and re-encode to the same bytes.
func TestNamespaceOldEncodingDecodes(t *testing.T) {
	want := block.DefaultNamespaceConfig()
	want.Name, want.Model, want.TTLSeconds, want.ParityShards = "tenant-a", "m", 60, 2
	obj := want
	obj.Kind = block.KindObject
	tests := []struct {
		name   string
		hex    string
		action NamespaceAction
		want   block.Namespace
	}{
		{"block namespace", "0301010874656e616e742d61016d80080b64796e616d6f2d78786833008080804000780a77726974652d6261636b0204", NamespaceCreate, want},
		{"object namespace", "0301020874656e616e742d61016d80080b64796e616d6f2d78786833008080804000780a77726974652d6261636b0204066f626a656374", NamespaceUpdate, obj},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := hex.DecodeString(tt.hex)
			if err != nil {
				t.Fatal(err)
			}
			c, err := DecodeCommand(b)
			if err != nil {
				t.Fatalf("old encoding refused: %v", err)
			}
			if c.Namespace.Action != tt.action || c.Namespace.Namespace != tt.want {
				t.Fatalf("decoded %+v, want %+v", c.Namespace, tt.want)
			}
			if !c.Namespace.Namespace.Quota.IsZero() {
				t.Fatalf("an old record decoded with a quota: %+v", c.Namespace.Namespace.Quota)
			}
			if again := EncodeNamespace(c.Namespace); !bytes.Equal(again, b) {
				t.Fatalf("re-encoding changed an old record:\n old %x\n new %x", b, again)
			}
		})
	}
}

// TestNamespaceExtensionsRoundTrip: every optional field (the quotas, and
// S3Disabled, S3TTLSeconds and VLLMHashSeed, which the encoding used to
// drop) survives a command's and a snapshot's round trip, alone and together.
func TestNamespaceExtensionsRoundTrip(t *testing.T) {
	base := block.DefaultNamespaceConfig()
	base.Name = "tenant-b"
	tests := []struct {
		name string
		edit func(*block.Namespace)
	}{
		{"none", func(*block.Namespace) {}},
		{"vllm seed", func(n *block.Namespace) { n.VLLMHashSeed = "42" }},
		{"s3 disabled", func(n *block.Namespace) { n.S3Disabled = true }},
		{"s3 ttl", func(n *block.Namespace) { n.S3TTLSeconds = 3600 }},
		{"dram quota", func(n *block.Namespace) { n.Quota.DRAM = 1 << 30 }},
		{"nvme quota", func(n *block.Namespace) { n.Quota.NVMe = 10 << 30 }},
		{"s3 quota", func(n *block.Namespace) { n.Quota.S3 = 1 << 40 }},
		{"object kind and quotas", func(n *block.Namespace) {
			n.Kind = block.KindObject
			n.Quota = block.Quota{DRAM: 1, NVMe: 2, S3: 3}
		}},
		{"everything", func(n *block.Namespace) {
			n.Kind = block.KindObject
			n.VLLMHashSeed, n.S3Disabled, n.S3TTLSeconds = "seed", true, 7
			n.Quota = block.Quota{DRAM: 4096, NVMe: 1 << 62, S3: 5}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := base
			tt.edit(&ns)
			b := EncodeNamespace(NamespaceCommand{Action: NamespaceCreate, Namespace: ns})
			c, err := DecodeCommand(b)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if c.Namespace.Namespace != ns {
				t.Fatalf("decoded %+v\nwant %+v", c.Namespace.Namespace, ns)
			}
			if !bytes.Equal(EncodeNamespace(c.Namespace), b) {
				t.Fatal("re-encoding differs")
			}
			// Through the FSM and a snapshot.
			f := New(nil)
			if r := f.Apply(&hraft.Log{Index: 1, Type: hraft.LogCommand, Data: b}); r.(*Response).Err != nil {
				t.Fatalf("apply: %v", r.(*Response).Err)
			}
			got, err := f.Namespace(ns.Name)
			if err != nil || got != ns {
				t.Fatalf("fsm holds %+v (%v), want %+v", got, err, ns)
			}
			var buf bytes.Buffer
			if err := writeSnapshot(&buf, f.cur.Load()); err != nil {
				t.Fatal(err)
			}
			st, err := readSnapshot(&buf)
			if err != nil {
				t.Fatalf("snapshot: %v", err)
			}
			if st.namespaces[ns.Name] != ns {
				t.Fatalf("snapshot holds %+v, want %+v", st.namespaces[ns.Name], ns)
			}
		})
	}
}

// TestNamespaceExtensionsOneEncoding: spellings the encoder never writes
// are refused, so a log entry cannot be read two ways.
func TestNamespaceExtensionsOneEncoding(t *testing.T) {
	ns := block.DefaultNamespaceConfig()
	ns.Name = "x"
	plain := EncodeNamespace(NamespaceCommand{Action: NamespaceCreate, Namespace: ns})
	tests := []struct {
		name string
		tail []byte
	}{
		{"empty kind, nothing after", []byte{0}},
		{"block kind with extensions", append([]byte{5}, append([]byte("block"), nsExtQuotaDRAM, 1)...)},
		{"zero quota written out", []byte{0, nsExtQuotaDRAM, 0}},
		{"tags out of order", []byte{0, nsExtQuotaNVMe, 1, nsExtQuotaDRAM, 1}},
		{"tag repeated", []byte{0, nsExtQuotaDRAM, 1, nsExtQuotaDRAM, 2}},
		{"unknown tag", []byte{0, nsExtLast + 1, 1}},
		{"empty seed written out", []byte{0, nsExtVLLMHashSeed, 0}},
		{"value above int64", append([]byte{0, nsExtQuotaS3}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)},
		{"truncated value", []byte{0, nsExtS3TTL}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := append(bytes.Clone(plain), tt.tail...)
			if c, err := DecodeCommand(b); !errors.Is(err, ErrMalformed) {
				t.Fatalf("accepted (%v): %+v", err, c.Namespace.Namespace)
			}
		})
	}
}

// TestNamespaceQuotaUpdate: a quota can be set and changed by an update,
// including back to unlimited.
func TestNamespaceQuotaUpdate(t *testing.T) {
	f := New(nil)
	ns := block.DefaultNamespaceConfig()
	ns.Name = "q"
	steps := []struct {
		action  NamespaceAction
		quota   block.Quota
		wantErr error
		want    block.Quota
	}{
		{NamespaceCreate, block.Quota{DRAM: 1 << 20}, nil, block.Quota{DRAM: 1 << 20}},
		{NamespaceUpdate, block.Quota{DRAM: 2 << 20, NVMe: 8 << 20}, nil, block.Quota{DRAM: 2 << 20, NVMe: 8 << 20}},
		{NamespaceUpdate, block.Quota{NVMe: 8 << 20}, nil, block.Quota{NVMe: 8 << 20}},
		{NamespaceUpdate, block.Quota{}, nil, block.Quota{}},
	}
	for i, s := range steps {
		n := ns
		n.Quota = s.quota
		r := f.Apply(&hraft.Log{Index: uint64(i + 1), Type: hraft.LogCommand, Data: EncodeNamespace(NamespaceCommand{Action: s.action, Namespace: n})})
		if err := r.(*Response).Err; !errors.Is(err, s.wantErr) || (s.wantErr == nil && err != nil) {
			t.Fatalf("step %d: err %v, want %v", i, err, s.wantErr)
		}
		got, err := f.Namespace("q")
		if err != nil || got.Quota != s.want {
			t.Fatalf("step %d: quota %+v (%v), want %+v", i, got.Quota, err, s.want)
		}
	}
}
