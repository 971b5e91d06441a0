package s3

import (
	"bytes"
	"testing"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

func samplePack() ([]byte, []packEntry) {
	entries := []packEntry{
		{Key: block.NewKey("default", 1), Off: 0, Len: 10, Sum: 7, Expires: 0},
		{Key: block.NewKey("ns-2", 2).WithPart(3), Off: 10, Len: 5, Sum: 9, Expires: 12345},
	}
	data := make([]byte, 15)
	return append(data, encodeIndex(entries, time.Unix(5, 0))...), entries
}

func TestPackIndexRoundTrip(t *testing.T) {
	pack, entries := samplePack()
	size := int64(len(pack))
	tr, err := decodeTrailer(pack[size-trailerSize:], size)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeIndex(pack[size-trailerSize-tr.idxLen:size-trailerSize], tr, size)
	if err != nil || len(got) != 2 || got[0] != entries[0] || got[1] != entries[1] || tr.created != time.Unix(5, 0).UnixNano() {
		t.Fatalf("%+v %+v %v", got, tr, err)
	}

	// Every flipped bit of the index and trailer is caught, except in the
	// created time (trailer bytes 16..23), which no checksum covers: there
	// the pack still decodes, to the same entries and another created time.
	for i := 15; i < len(pack); i++ {
		for bit := 0; bit < 8; bit++ {
			bad := bytes.Clone(pack)
			bad[i] ^= 1 << bit
			entries, tr, err := decodePack(bad)
			if inCreated(i, len(pack)) {
				if err != nil || len(entries) != 2 || entries[0] != got[0] || entries[1] != got[1] || tr.created == time.Unix(5, 0).UnixNano() {
					t.Fatalf("flip in created at %d bit %d: %+v %+v %v", i, bit, entries, tr, err)
				}
				continue
			}
			if err == nil {
				t.Fatalf("flip at byte %d bit %d not detected", i, bit)
			}
		}
	}
}

// decodePack decodes a whole pack's trailer and index.
func decodePack(b []byte) ([]packEntry, trailer, error) {
	size := int64(len(b))
	if size < trailerSize {
		return nil, trailer{}, errRecord
	}
	tr, err := decodeTrailer(b[size-trailerSize:], size)
	if err != nil {
		return nil, tr, err
	}
	entries, err := decodeIndex(b[size-trailerSize-tr.idxLen:size-trailerSize], tr, size)
	return entries, tr, err
}

// inCreated reports whether byte i of a pack of n bytes is in the
// trailer's created time.
func inCreated(i, n int) bool { return i >= n-trailerSize+16 && i < n-trailerSize+24 }

// FuzzPackDamage flips bits of a pack and cuts or extends it: the damage
// must be rejected, unless it only touched the created time (which no
// checksum covers, see TestPackIndexRoundTrip) or the block bytes (covered
// by each block's own CRC-32C, checked on read).
func FuzzPackDamage(f *testing.F) {
	pack, entries := samplePack()
	f.Add(uint16(15), byte(1), uint8(0), uint8(0))
	f.Add(uint16(len(pack)-17), byte(0x80), uint8(0), uint8(0))
	f.Add(uint16(len(pack)-1), byte(0xff), uint8(0), uint8(0))
	f.Add(uint16(0), byte(0), uint8(1), uint8(0))
	f.Add(uint16(0), byte(0), uint8(0), uint8(3))
	f.Fuzz(func(t *testing.T, pos uint16, xor byte, cut, grow uint8) {
		b := bytes.Clone(pack)
		i := int(pos) % len(b)
		b[i] ^= xor
		c := int(cut) % len(b)
		b = b[:len(b)-c]
		b = append(b, make([]byte, grow)...)
		if bytes.Equal(b, pack) || c == 0 && grow == 0 && (i < 15 || inCreated(i, len(pack))) {
			return
		}
		if got, _, err := decodePack(b); err == nil {
			t.Fatalf("damaged pack accepted (byte %d ^%#x, cut %d, grew %d): %+v, was %+v", i, xor, c, grow, got, entries)
		}
	})
}

// FuzzPackIndex feeds arbitrary bytes to the pack trailer and index decoders:
// they must reject or return entries inside the pack, never panic.
func FuzzPackIndex(f *testing.F) {
	pack, _ := samplePack()
	f.Add(pack)
	f.Add(pack[:len(pack)-1])
	f.Fuzz(func(t *testing.T, b []byte) {
		size := int64(len(b))
		if size < trailerSize {
			return
		}
		tr, err := decodeTrailer(b[size-trailerSize:], size)
		if err != nil {
			return
		}
		entries, err := decodeIndex(b[size-trailerSize-tr.idxLen:size-trailerSize], tr, size)
		if err != nil {
			return
		}
		for _, e := range entries {
			if e.Off < 0 || e.Len < 1 || e.Off+e.Len > size-trailerSize-tr.idxLen {
				t.Fatalf("entry outside the data area: %+v", e)
			}
		}
	})
}

// FuzzJournal feeds arbitrary bytes to the index journal reader: it must
// stop at damage and never panic, and the intact prefix it reports must be
// exactly the frames of the records it accepted, re-encoded: decode then
// encode gives back the input, byte for byte.
func FuzzJournal(f *testing.F) {
	var j []byte
	j = append(j, frame(encodePackRecord(packRecord{name: "p/x.pack", size: 100, dataBytes: 15, count: 2,
		entries: []packEntry{{Key: block.NewKey("default", 1), Off: 0, Len: 10, Sum: 1}}}))...)
	j = append(j, frame(encodeDeleteRecord(block.NewKey("default", 1).WithPart(2)))...)
	j = append(j, frame(encodeRemoveRecord("p/x.pack"))...)
	f.Add(j)
	f.Add(j[:len(j)-3])
	f.Fuzz(func(t *testing.T, b []byte) {
		var again []byte
		good, _ := readJournal(bytes.NewReader(b), func(rec record) {
			var enc []byte
			switch rec.kind {
			case recPack:
				enc = encodePackRecord(rec.pack)
			case recDelete:
				enc = encodeDeleteRecord(rec.key)
			case recRemove:
				enc = encodeRemoveRecord(rec.name)
			default:
				t.Fatalf("accepted a record of unknown kind %d", rec.kind)
			}
			again = append(again, frame(enc)...)
		})
		if good > int64(len(b)) {
			t.Fatalf("intact prefix %d longer than input %d", good, len(b))
		}
		if !bytes.Equal(again, b[:good]) {
			t.Fatalf("accepted records re-encode differently:\n in  %x\n out %x", b[:good], again)
		}
	})
}

// TestPackIndexKeepsShards: an erasure shard's number (and the identity
// block's shard 127) survives the pack index, so a rebuilt index returns
// each shard under its own key, never under the whole block's.
func TestPackIndexKeepsShards(t *testing.T) {
	entries := []packEntry{
		{Key: block.NewKey("default", 0), Off: 0, Len: 4, Sum: 1},
		{Key: block.Key{Namespace: "default", Shard: block.MaxShard}, Off: 4, Len: 4, Sum: 2},
		{Key: block.Key{Namespace: "ns", Hash: 9, Shard: 3}, Off: 8, Len: 4, Sum: 3},
		{Key: block.Key{Namespace: "ns", Hash: 9, Shard: 2}.WithPart(5), Off: 12, Len: 4, Sum: 4},
	}
	pack := append(make([]byte, 16), encodeIndex(entries, time.Unix(5, 0))...)
	got, _, err := decodePack(pack)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(entries) {
		t.Fatalf("%d entries, want %d", len(got), len(entries))
	}
	for i := range entries {
		if got[i] != entries[i] {
			t.Errorf("entry %d: %+v, want %+v", i, got[i].Key, entries[i].Key)
		}
	}
}
