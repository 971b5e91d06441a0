package descriptor

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/zeebo/xxh3"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

func TestHeaderRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		h    Header
	}{
		{"plain", Header{Key: block.Key{Namespace: "default", Hash: 1}, Sum: 7, FP: 9, Length: 1, Gen: 1}},
		{"part", Header{Key: block.Key{Namespace: "ns", Hash: 1 << 63, Part: 65535, HasPart: true}, Priority: 3, Length: 4096, Gen: 2, Created: 5, Expires: 6}},
		{"shard", Header{Key: block.Key{Namespace: "s", Hash: 42, Shard: block.MaxShard}, Length: block.HardMaxBlockSize, Gen: 1 << 60, Created: -1}},
		{"longest namespace", Header{Key: block.Key{Namespace: string(bytes.Repeat([]byte("n"), block.MaxNamespaceLen)), Hash: 3}, Length: 10}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := make([]byte, HeaderSize)
			tc.h.Encode(p)
			got, err := DecodeHeader(p)
			if err != nil {
				t.Fatalf("DecodeHeader: %v", err)
			}
			if got != tc.h {
				t.Fatalf("round trip: got %+v, want %+v", got, tc.h)
			}
		})
	}
}

func TestDecodeHeaderRejects(t *testing.T) {
	good := Header{Key: block.Key{Namespace: "default", Hash: 1}, Length: 100, Gen: 1}
	enc := func(h Header, edit func(p []byte)) []byte {
		p := make([]byte, HeaderSize)
		h.Encode(p)
		if edit != nil {
			edit(p)
			// Re-seal, so only the edited field is wrong.
			binary.LittleEndian.PutUint32(p[headerFields:], block.Checksum(p[:headerFields]))
		}
		return p
	}
	cases := []struct {
		name string
		p    []byte
	}{
		{"empty", nil},
		{"short", enc(good, nil)[:headerFields]},
		{"zero page", make([]byte, HeaderSize)},
		{"bad magic", enc(good, func(p []byte) { p[0] = 'X' })},
		{"flipped bit", func() []byte { p := enc(good, nil); p[9] ^= 1; return p }()},
		{"version", enc(good, func(p []byte) { p[4] = 3 })},
		{"no namespace", enc(good, func(p []byte) { p[6] = 0 })},
		{"namespace too long", enc(good, func(p []byte) { p[6] = block.MaxNamespaceLen + 1 })},
		{"shard flag without shard", enc(good, func(p []byte) { p[7] |= 2 })},
		{"shard out of range", enc(good, func(p []byte) { p[7] |= 2; p[19] = block.MaxShard + 1 })},
		{"zero length", enc(good, func(p []byte) { binary.LittleEndian.PutUint64(p[24:], 0) })},
		{"length too large", enc(good, func(p []byte) { binary.LittleEndian.PutUint64(p[24:], block.HardMaxBlockSize+1) })},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if h, err := DecodeHeader(tc.p); !errors.Is(err, block.ErrChecksum) {
				t.Fatalf("DecodeHeader = %+v, %v; want block.ErrChecksum", h, err)
			}
		})
	}
}

// writeExtent writes one extent of payload under key at a 4 KiB-aligned
// offset of a fresh file and returns the file and its descriptor.
func writeExtent(t *testing.T, key block.Key, payload []byte, at int64) block.Descriptor {
	t.Helper()
	n := int64(len(payload))
	buf := make([]byte, at+ExtentLen(n))
	h := Header{Key: key, Sum: block.Checksum(payload), FP: xxh3.Hash(payload), Length: n, Gen: 5}
	h.Encode(buf[at:])
	copy(buf[at+HeaderSize:], payload)
	path := filepath.Join(t.TempDir(), "seg")
	if err := os.WriteFile(path, buf, 0o600); err != nil {
		t.Fatal(err)
	}
	return block.Descriptor{
		Tier: block.TierNVMe, Path: path, Offset: at, ReadLength: ExtentLen(n),
		DataOffset: at + HeaderSize, Length: n, Sum: h.Sum, Generation: h.Gen,
	}
}

func TestReadExtent(t *testing.T) {
	key := block.Key{Namespace: "default", Hash: 0xfeed}
	payload := bytes.Repeat([]byte("ctxtier!"), 1500) // 12000 bytes: a padded tail
	d := writeExtent(t, key, payload, 2*Align)
	got, err := ReadExtent(key, d)
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("ReadExtent: %v (equal %v)", err, bytes.Equal(got, payload))
	}
	cases := []struct {
		name string
		key  block.Key
		edit func(d *block.Descriptor)
		want error
	}{
		{"other key", block.Key{Namespace: "default", Hash: 0xbeef}, nil, block.ErrChecksum},
		{"other generation", key, func(d *block.Descriptor) { d.Generation++ }, block.ErrChecksum},
		{"other sum", key, func(d *block.Descriptor) { d.Sum++ }, block.ErrChecksum},
		{"misaligned", key, func(d *block.Descriptor) { d.Offset++; d.DataOffset++ }, block.ErrInvalidArgument},
		{"wrong read length", key, func(d *block.Descriptor) { d.ReadLength += Align }, block.ErrInvalidArgument},
		{"wrong data offset", key, func(d *block.Descriptor) { d.DataOffset += Align }, block.ErrInvalidArgument},
		{"negative length", key, func(d *block.Descriptor) { d.Length = -Align; d.ReadLength = 0 }, block.ErrInvalidArgument},
		{"beyond end of file", key, func(d *block.Descriptor) { d.Offset += 4 * Align; d.DataOffset += 4 * Align }, block.ErrChecksum},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dd := d
			if tc.edit != nil {
				tc.edit(&dd)
			}
			if _, err := ReadExtent(tc.key, dd); !errors.Is(err, tc.want) {
				t.Fatalf("ReadExtent: %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("damaged payload", func(t *testing.T) {
		f, err := os.OpenFile(d.Path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte{'X'}, d.DataOffset+d.Length-1); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if _, err := ReadExtent(key, d); !errors.Is(err, block.ErrChecksum) {
			t.Fatalf("ReadExtent of a damaged payload: %v", err)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		dd := d
		dd.Path = filepath.Join(t.TempDir(), "gone")
		if _, err := ReadExtent(key, dd); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("ReadExtent of a missing file: %v", err)
		}
	})
}

// FuzzDecodeHeader checks that any page either fails to decode with
// block.ErrChecksum or decodes to a header that encodes back to the same
// fields and validates as a key of the allowed shape.
func FuzzDecodeHeader(f *testing.F) {
	for _, h := range []Header{
		{Key: block.Key{Namespace: "default", Hash: 1}, Length: 1, Gen: 1},
		{Key: block.Key{Namespace: "ns", Hash: 2, Part: 3, HasPart: true, Shard: 4}, Priority: 2, Sum: 5, FP: 6, Length: 4096, Gen: 7, Created: 8, Expires: 9},
	} {
		p := make([]byte, headerFields+4)
		h.Encode(p)
		f.Add(p)
	}
	f.Add([]byte("CTXN"))
	f.Fuzz(func(t *testing.T, p []byte) {
		h, err := DecodeHeader(p)
		if err != nil {
			if !errors.Is(err, block.ErrChecksum) {
				t.Fatalf("DecodeHeader error %v does not wrap block.ErrChecksum", err)
			}
			return
		}
		if h.Length <= 0 || h.Length > block.HardMaxBlockSize || len(h.Key.Namespace) == 0 ||
			len(h.Key.Namespace) > block.MaxNamespaceLen || h.Key.Shard > block.MaxShard {
			t.Fatalf("decoded an out-of-range header %+v", h)
		}
		q := make([]byte, headerFields+4)
		h.Encode(q)
		h2, err := DecodeHeader(q)
		if err != nil || h2 != h {
			t.Fatalf("re-encoded header %+v decodes to %+v, %v", h, h2, err)
		}
	})
}
