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
	// Any flipped bit in the index or trailer is caught.
	for i := 15; i < len(pack); i++ {
		bad := bytes.Clone(pack)
		bad[i] ^= 1
		tr, err := decodeTrailer(bad[size-trailerSize:], size)
		if err != nil {
			continue
		}
		if _, err := decodeIndex(bad[size-trailerSize-tr.idxLen:size-trailerSize], tr, size); err == nil && i < int(size)-trailerSize+12 {
			t.Fatalf("flip at %d not detected", i)
		}
	}
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
// stop at damage, never panic, and re-encode what it accepts identically.
func FuzzJournal(f *testing.F) {
	var j []byte
	j = append(j, frame(encodePackRecord(packRecord{name: "p/x.pack", size: 100, dataBytes: 15, count: 2,
		entries: []packEntry{{Key: block.NewKey("default", 1), Off: 0, Len: 10, Sum: 1}}}))...)
	j = append(j, frame(encodeDeleteRecord(block.NewKey("default", 1).WithPart(2)))...)
	j = append(j, frame(encodeRemoveRecord("p/x.pack"))...)
	f.Add(j)
	f.Add(j[:len(j)-3])
	f.Fuzz(func(t *testing.T, b []byte) {
		good, _ := readJournal(bytes.NewReader(b), func(rec record) {
			var enc []byte
			switch rec.kind {
			case recPack:
				enc = encodePackRecord(rec.pack)
			case recDelete:
				enc = encodeDeleteRecord(rec.key)
			case recRemove:
				enc = encodeRemoveRecord(rec.name)
			}
			if again, err := decodeRecord(enc); err != nil || again.kind != rec.kind {
				t.Fatalf("accepted record does not round-trip: %v", err)
			}
		})
		if good > int64(len(b)) {
			t.Fatalf("intact prefix %d longer than input %d", good, len(b))
		}
	})
}
