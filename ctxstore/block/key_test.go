package block

import (
	"errors"
	"testing"
)

func TestParseHash(t *testing.T) {
	cases := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"0000000000000000", 0, true},
		{"cb38de07a0c0bf1c", 0xcb38de07a0c0bf1c, true},
		{"ffffffffffffffff", ^uint64(0), true},
		{"CB38DE07A0C0BF1C", 0, false}, // upper case is not canonical
		{"cb38de07a0c0bf1", 0, false},  // 15 digits
		{"cb38de07a0c0bf1c0", 0, false},
		{"0xb38de07a0c0bf1c", 0, false},
		{"cb38de07a0c0bf1g", 0, false},
		{"", 0, false},
	}
	for _, tc := range cases {
		got, err := ParseHash(tc.in)
		if tc.ok != (err == nil) || (tc.ok && got != tc.want) {
			t.Errorf("ParseHash(%q) = %x, %v", tc.in, got, err)
		}
		if err != nil && !errors.Is(err, ErrInvalidKey) {
			t.Errorf("ParseHash(%q) error %v does not wrap ErrInvalidKey", tc.in, err)
		}
		if tc.ok && FormatHash(got) != tc.in {
			t.Errorf("FormatHash(%x) = %q", got, FormatHash(got))
		}
	}
}

func TestParseObjectName(t *testing.T) {
	cases := []struct {
		in   string
		want Key
		ok   bool
	}{
		{"00000000000000ff", NewKey("ns", 0xff), true},
		{"00000000000000ff.0", NewKey("ns", 0xff).WithPart(0), true},
		{"00000000000000ff.7", NewKey("ns", 0xff).WithPart(7), true},
		{"00000000000000ff.65535", NewKey("ns", 0xff).WithPart(65535), true},
		{"00000000000000ff.65536", Key{}, false},
		{"00000000000000ff.", Key{}, false},
		{"00000000000000ff.07", Key{}, false},
		{"00000000000000ff.-1", Key{}, false},
		{"00000000000000ff.1.2", Key{}, false},
		{"zz", Key{}, false},
	}
	for _, tc := range cases {
		got, err := ParseObjectName("ns", tc.in)
		if tc.ok != (err == nil) || got != tc.want {
			t.Errorf("ParseObjectName(%q) = %+v, %v", tc.in, got, err)
		}
		if tc.ok && got.ObjectName() != tc.in {
			t.Errorf("ObjectName round trip %q → %q", tc.in, got.ObjectName())
		}
	}
}

func TestNamespaceValidate(t *testing.T) {
	good := DefaultNamespaceConfig()
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	mut := []func(*Namespace){
		func(n *Namespace) { n.Name = "Bad_Name" },
		func(n *Namespace) { n.Name = "-x" },
		func(n *Namespace) { n.BlockTokens = 0 },
		func(n *Namespace) { n.HashScheme = "md5" },
		func(n *Namespace) { n.MaxBlockSize = HardMaxBlockSize + 1 },
		func(n *Namespace) { n.Priority = MaxPriority + 1 },
		func(n *Namespace) { n.WriteMode = "sometimes" },
		func(n *Namespace) { n.DataShards = 0 },
		func(n *Namespace) { n.TTLSeconds = -1 },
	}
	for i, m := range mut {
		n := good
		m(&n)
		if err := n.Validate(); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("mutation %d: got %v, want ErrInvalidArgument", i, err)
		}
	}
}

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"4096", 4096, true}, {"2MiB", 2 << 20, true}, {"8GiB", 8 << 30, true}, {"1.5GiB", 3 << 29, true},
		{"10MB", 10e6, true}, {"64M", 64 << 20, true}, {"0", 0, true},
		{"-1", 0, false}, {"lots", 0, false}, {"1e400", 0, false}, {"", 0, false},
	}
	for _, tc := range cases {
		got, err := ParseSize(tc.in)
		if tc.ok != (err == nil) || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v", tc.in, got, err)
		}
	}
	if FormatSize(2<<20) != "2MiB" || FormatSize(3<<29) != "1.50GiB" {
		t.Errorf("FormatSize: %s %s", FormatSize(2<<20), FormatSize(3<<29))
	}
}
