package block

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"testing"
)

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// noneHash0 is vLLM's NONE_HASH under PYTHONHASHSEED=0: sha256 of the CBOR
// text string "0" (0x61 0x30). The same digest is published as the NONE_HASH
// known answer of a third-party cross-language sha256_cbor check.
const noneHash0 = "4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e"

func TestVLLMNoneHashKnownAnswer(t *testing.T) {
	if got := VLLMNoneHash("0"); got.String() != noneHash0 {
		t.Errorf("VLLMNoneHash(\"0\") = %s, want %s", got, noneHash0)
	}
	if sum := sha256.Sum256(mustHex(t, "6130")); hex.EncodeToString(sum[:]) != noneHash0 {
		t.Errorf("sha256(0x6130) disagrees with the published NONE_HASH")
	}
	// Another seed, CBOR built by hand: text(2) "42".
	if got, want := VLLMNoneHash("42"), sha256.Sum256(mustHex(t, "623432")); got != VLLMHash(want) {
		t.Errorf("VLLMNoneHash(\"42\") = %s, want %x", got, want)
	}
	if VLLMNoneHash(DefaultVLLMHashSeed) != defaultVLLMNoneHash {
		t.Error("defaultVLLMNoneHash is not VLLMNoneHash(DefaultVLLMHashSeed)")
	}
}

func TestVLLMHashUint64IsLowBitsOfBigEndianInt(t *testing.T) {
	// int.from_bytes(digest, "big") & (2**64 - 1) keeps the last 8 bytes.
	var h VLLMHash
	for i := range h {
		h[i] = byte(i + 1)
	}
	if got := h.Uint64(); got != 0x191a1b1c1d1e1f20 {
		t.Errorf("Uint64 = %#x, want 0x191a1b1c1d1e1f20", got)
	}
}

// TestVLLMChainByHand builds the canonical CBOR of each block literally,
// hashes it with crypto/sha256, reduces it to 64 bits, and compares with the
// implementation, for an unsalted and a salted 2-block chain.
func TestVLLMChainByHand(t *testing.T) {
	tokens := []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9} // two blocks of 4; [9] is partial
	for _, tc := range []struct {
		name, salt string
		// block0 is the whole CBOR of block 0: array(3), bytes(32) NONE_HASH,
		// array(4) of 1..4, then extra_keys: null, or (vLLM 0.33) array(1) of
		// the tagged key ("cache_salt", salt), an array(2) of text.
		block0 string
	}{
		{"unsalted", "", "835820" + noneHash0 + "8401020304" + "f6"},
		{"salted", "tenant-a", "835820" + noneHash0 + "8401020304" + "81" + "82" + "6a" + "63616368655f73616c74" + "68" + "74656e616e742d61"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d0 := sha256.Sum256(mustHex(t, tc.block0))
			// Block 1 chains on the full digest of block 0 and has no extra keys.
			d1 := sha256.Sum256(mustHex(t, "835820"+hex.EncodeToString(d0[:])+"8405060708"+"f6"))
			want := []uint64{binary.BigEndian.Uint64(d0[24:]), binary.BigEndian.Uint64(d1[24:])}

			got, err := ChainHashes(SchemeVLLM, 4, tc.salt, tokens)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
				t.Fatalf("ChainHashes = %v, want %v", got, want)
			}

			// The single-step function reproduces the digests themselves.
			var salt []VLLMExtraKey
			if tc.salt != "" {
				salt = []VLLMExtraKey{VLLMCacheSalt(tc.salt)}
			}
			s0 := VLLMBlockHash(VLLMNoneHash("0"), tokens[:4], salt...)
			s1 := VLLMBlockHash(s0, tokens[4:8])
			if s0 != VLLMHash(d0) || s1 != VLLMHash(d1) {
				t.Fatalf("VLLMBlockHash digests = %s, %s; want %x, %x", s0, s1, d0, d1)
			}
		})
	}
}

func TestVLLMBlockCBOR(t *testing.T) {
	var parent VLLMHash
	for i := range parent {
		parent[i] = 0xaa
	}
	head := "835820" + hex.EncodeToString(parent[:])
	seq := func(n int) []uint32 {
		s := make([]uint32, n)
		for i := range s {
			s[i] = 1
		}
		return s
	}
	for _, tc := range []struct {
		name   string
		tokens []uint32
		extra  []VLLMExtraKey
		want   string
	}{
		{"int widths", []uint32{0, 23, 24, 255, 256, 65535, 65536, 0xffffffff}, nil,
			head + "88" + "00" + "17" + "1818" + "18ff" + "190100" + "19ffff" + "1a00010000" + "1affffffff" + "f6"},
		{"lora then salt", []uint32{7}, []VLLMExtraKey{VLLMLoRA("lora-x", "/p"), VLLMCacheSalt("s")},
			head + "8107" + "82" + "83" + "646c6f7261" + "666c6f72612d78" + "622f70" + "82" + "6a63616368655f73616c74" + "6173"},
		{"utf-8 key", []uint32{7}, []VLLMExtraKey{{"é"}}, head + "8107" + "81" + "81" + "62c3a9"},
		{"24 tokens", seq(24), nil, head + "9818" + hex.EncodeToString(bytes.Repeat([]byte{1}, 24)) + "f6"},
		{"512 tokens", seq(512), nil, head + "990200" + hex.EncodeToString(bytes.Repeat([]byte{1}, 512)) + "f6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := appendVLLMBlockCBOR(nil, &parent, tc.tokens, tc.extra)
			if hex.EncodeToString(got) != tc.want {
				t.Fatalf("CBOR\n got %x\nwant %s", got, tc.want)
			}
			if n := vllmBlockCBORLen(tc.tokens, tc.extra); n < len(got) {
				t.Fatalf("vllmBlockCBORLen = %d < actual %d", n, len(got))
			}
			if h := VLLMBlockHash(parent, tc.tokens, tc.extra...); h != VLLMHash(sha256.Sum256(mustHex(t, tc.want))) {
				t.Fatalf("VLLMBlockHash disagrees with sha256 of the literal CBOR")
			}
		})
	}
}

func TestVLLMBlockHashLargeBlock(t *testing.T) {
	// Beyond the stack buffer: 2000 tokens of the widest encoding.
	tokens := make([]uint32, 2000)
	for i := range tokens {
		tokens[i] = 0xffffffff - uint32(i)
	}
	root := VLLMNoneHash("0")
	enc := appendVLLMBlockCBOR(nil, &root, tokens, []VLLMExtraKey{VLLMCacheSalt("s")})
	if got, want := VLLMBlockHash(root, tokens, VLLMCacheSalt("s")), VLLMHash(sha256.Sum256(enc)); got != want {
		t.Fatalf("large block: got %s, want %s", got, want)
	}
}

func TestVLLMHashesDoNotAllocate(t *testing.T) {
	tokens := make([]uint32, 512)
	for i := range tokens {
		tokens[i] = uint32(100000 + i)
	}
	root := VLLMNoneHash("0")
	salt := VLLMCacheSalt("salt")
	var sink VLLMHash
	if n := testing.AllocsPerRun(50, func() {
		sink = VLLMBlockHash(root, tokens, salt)
		sink = VLLMBlockHash(sink, tokens)
	}); n != 0 {
		t.Errorf("VLLMBlockHash: %v allocs per run, want 0", n)
	}
}
