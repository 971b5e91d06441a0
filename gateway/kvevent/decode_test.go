package kvevent

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/router"
	"github.com/ctxtier/ctxtier/gateway/errcode"
)

// hx joins hex pieces (spaces and comments after '#' on each piece ignored)
// into bytes: the frames below are written out byte by byte, laid out as
// msgspec encodes vLLM's structs.
func hx(t testing.TB, pieces ...string) []byte {
	t.Helper()
	var sb strings.Builder
	for _, p := range pieces {
		if i := strings.IndexByte(p, '#'); i >= 0 {
			p = p[:i]
		}
		sb.WriteString(strings.ReplaceAll(p, " ", ""))
	}
	b, err := hex.DecodeString(sb.String())
	if err != nil {
		t.Fatalf("bad hex in test: %v", err)
	}
	return b
}

func str(s string) string { // msgpack fixstr
	return fmt.Sprintf("%02x%s", 0xa0|len(s), hex.EncodeToString([]byte(s)))
}

// legacyBatch is KVEventBatch(ts=1718000000.5, events=[
//
//	BlockStored(block_hashes=[1, 2], parent_block_hash=None,
//	            token_ids=[10, 11, 12, 13], block_size=2, lora_id=None,
//	            medium="GPU", lora_name=None),
//	BlockRemoved(block_hashes=[1], medium="GPU"),
//	AllBlocksCleared()], data_parallel_rank=0)
//
// with every struct array_like=True and the events tag=True: each event is
// an array whose first element is the class name; defaulted trailing fields
// (extra_keys, group_idx, ...) are omitted.
func legacyBatch(t testing.TB) []byte {
	return hx(t,
		"93",                     // batch: array of 3
		"cb 41d999a660200000",    // ts: float64 1718000000.5
		"93",                     // events: array of 3
		"98", str("BlockStored"), // BlockStored: 8 elements, tag first
		"92 01 02",       // block_hashes [1, 2]
		"c0",             // parent_block_hash None
		"94 0a 0b 0c 0d", // token_ids
		"02",             // block_size 2
		"c0",             // lora_id None
		str("GPU"),       // medium
		"c0",             // lora_name None
		"93", str("BlockRemoved"), "91 01", str("GPU"),
		"91", str("AllBlocksCleared"),
		"00", // data_parallel_rank 0
	)
}

func TestDecodeLegacyArrayLike(t *testing.T) {
	b, err := DecodeBatch(legacyBatch(t))
	if err != nil {
		t.Fatal(err)
	}
	want := Batch{TS: 1718000000.5, HasDPRank: true, Events: []router.Event{
		{Kind: router.Stored, Hashes: []uint64{1, 2}, Medium: router.Device, BlockSize: 2},
		{Kind: router.Removed, Hashes: []uint64{1}, Medium: router.Device},
		{Kind: router.Cleared},
	}}
	if fmt.Sprint(b) != fmt.Sprint(want) {
		t.Fatalf("got  %+v\nwant %+v", b, want)
	}
}

// sha is a 32-byte hash whose last 8 bytes are 0x0102030405060708.
const sha = "c4 20 " + "aaaaaaaaaaaaaaaa bbbbbbbbbbbbbbbb cccccccccccccccc 0102030405060708"

func TestDecodeTaggedMapEventsAndBytesHashes(t *testing.T) {
	// Newer vLLM: the batch stays array_like, events are tagged maps
	// {"type": ..., fields...}; hashes are raw bytes (sha256), medium "CPU";
	// an unknown future field is present; dp rank 1.
	frame := hx(t,
		"93", "cb 41d999a660200000",
		"92",
		"88", // BlockStored as a map of 8 entries
		str("type"), str("BlockStored"),
		str("block_hashes"), "92", sha, "c4 08 0000000000000009",
		str("parent_block_hash"), "c4 04 deadbeef",
		str("token_ids"), "90",
		str("block_size"), "10",
		str("lora_id"), "c0",
		str("medium"), str("CPU"),
		str("future_field"), "92 01 a1 78", // skipped
		"83", // BlockRemoved, map of 3
		str("type"), str("BlockRemoved"),
		str("block_hashes"), "91", sha,
		str("medium"), "c0", // None: the device
		"01",
	)
	b, err := DecodeBatch(frame)
	if err != nil {
		t.Fatal(err)
	}
	want := Batch{TS: 1718000000.5, DPRank: 1, HasDPRank: true, Events: []router.Event{
		{Kind: router.Stored, Hashes: []uint64{0x0102030405060708, 9}, Parent: 0xdeadbeef, HasParent: true, Medium: router.Host, BlockSize: 16},
		{Kind: router.Removed, Hashes: []uint64{0x0102030405060708}, Medium: router.Device},
	}}
	if fmt.Sprint(b) != fmt.Sprint(want) {
		t.Fatalf("got  %+v\nwant %+v", b, want)
	}
}

func TestDecodeIntegerWidthsAndMapBatch(t *testing.T) {
	// Batch as a map (no array_like), the dp rank under Dynamo's alias and
	// None; hashes as uint64, negative int64 (Dynamo's signed producers),
	// uint32 and int8.
	frame := hx(t,
		"83",
		str("ts"), "cb 41d999a660200000",
		str("events"), "91",
		"97", str("BlockStored"),
		"94 cf ffffffffffffffff d3 fffffffffffffffe ce 00010000 d0 fb",
		"cf 8000000000000000", // parent, above int64 max
		"90", "10", "c0", "c0",
		str("dp_rank"), "c0",
	)
	b, err := DecodeBatch(frame)
	if err != nil {
		t.Fatal(err)
	}
	ev := b.Events[0]
	wantHashes := []uint64{^uint64(0), ^uint64(1), 0x10000, ^uint64(4)}
	if fmt.Sprint(ev.Hashes) != fmt.Sprint(wantHashes) || !ev.HasParent || ev.Parent != 1<<63 || b.HasDPRank {
		t.Fatalf("got %+v (batch %+v)", ev, b)
	}
}

func TestDecodeSkipsUnknownAndOtherGroups(t *testing.T) {
	frame := hx(t,
		"92", "cb 41d999a660200000",
		"93",
		"92", str("BlockPinned"), "90", // an event kind from a newer engine
		"9a", str("BlockStored"), "91 05", "c0", "90", "10", "c0", str("GPU"), "c0", "c0", "01", // group_idx 1
		"94", str("BlockRemoved"), "91 05", str("GPU"), "00", // group 0: kept
	)
	b, err := DecodeBatch(frame)
	if err != nil {
		t.Fatal(err)
	}
	if b.Skipped != 2 || len(b.Events) != 1 || b.Events[0].Kind != router.Removed {
		t.Fatalf("%+v", b)
	}
}

func TestDecodeRejects(t *testing.T) {
	good := legacyBatch(t)
	tests := map[string][]byte{
		"empty":           {},
		"not a batch":     hx(t, "2a"),
		"short array":     hx(t, "91 cb 41d999a660200000"),
		"events not list": hx(t, "92 cb 41d999a660200000 2a"),
		"truncated":       good[:len(good)-5],
		"trailing bytes":  append(append([]byte{}, good...), 0x00),
		"event no tag":    hx(t, "92 00 91 90"),
		"tag not string":  hx(t, "92 00 91 91 05"),
		"hash is string":  hx(t, "92 00 91 92", str("BlockRemoved"), "91", str("ab")),
		"hash is float":   hx(t, "92 00 91 92", str("BlockRemoved"), "91 cb 3ff0000000000000"),
		"empty bytes":     hx(t, "92 00 91 92", str("BlockRemoved"), "91 c4 00"),
		"unknown medium":  hx(t, "92 00 91 93", str("BlockRemoved"), "91 01", str("TAPE")),
		"huge count":      hx(t, "92 00 dd 7fffffff"),
		"map no events":   hx(t, "81", str("ts"), "00"),
		"hash list nil":   hx(t, "92 00 91 92", str("BlockRemoved"), "c0"),
		"bad dp rank":     hx(t, "93 00 90 ff"),
		"negative size":   hx(t, "92 00 91 95", str("BlockStored"), "90 c0 90 ff"),
	}
	for name, frame := range tests {
		if _, err := DecodeBatch(frame); !errors.Is(err, errcode.ErrMalformedFrame) {
			t.Errorf("%s: err %v, want ErrMalformedFrame", name, err)
		}
	}
}

func TestHashFromBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
	}{
		{"01", 1},
		{"0102", 0x0102},
		{"0102030405060708", 0x0102030405060708},
		{"ff0102030405060708", 0x0102030405060708}, // int.from_bytes(...) & (2**64-1)
	} {
		b, _ := hex.DecodeString(tc.in)
		if got := HashFromBytes(b); got != tc.want {
			t.Errorf("%s: %x want %x", tc.in, got, tc.want)
		}
	}
}

func TestParseFrames(t *testing.T) {
	seq := hx(t, "000000000000002a")
	f, err := ParseFrames([][]byte{[]byte("kv@w0"), seq, {0x90}})
	if err != nil || f.Topic != "kv@w0" || f.Seq != 42 || f.Stream != "" || len(f.Payload) != 1 {
		t.Fatalf("%+v %v", f, err)
	}
	stream := strings.Repeat("s", 16)
	f, err = ParseFrames([][]byte{{}, append(append([]byte{}, seq...), stream...), {0x90}})
	if err != nil || f.Seq != 42 || f.Stream != stream {
		t.Fatalf("with stream id: %+v %v", f, err)
	}
	for name, frames := range map[string][][]byte{
		"one frame":  {{1}},
		"four":       {{}, seq, {}, {}},
		"short seq":  {{}, {1, 2, 3}, {}},
		"9-byte seq": {{}, make([]byte, 9), {}},
	} {
		if _, err := ParseFrames(frames); !errors.Is(err, errcode.ErrMalformedFrame) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add(legacyBatch(f))
	f.Add(hx(f, "92 00 91 92", str("BlockRemoved"), "91 c4 02 0102"))
	f.Add(hx(f, "81", str("events"), "90"))
	f.Fuzz(func(t *testing.T, b []byte) {
		batch, err := DecodeBatch(b)
		if err != nil {
			if !errors.Is(err, errcode.ErrMalformedFrame) {
				t.Fatalf("error not ErrMalformedFrame: %v", err)
			}
			return
		}
		for _, ev := range batch.Events {
			if ev.Medium >= router.NumMedia || ev.Kind < router.Stored || ev.Kind > router.Cleared {
				t.Fatalf("bad event %+v", ev)
			}
		}
	})
}
