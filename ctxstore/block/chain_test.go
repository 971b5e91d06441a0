package block

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/zeebo/xxh3"
)

// testTokens returns n deterministic, varied token ids.
func testTokens(n int) []uint32 {
	t := make([]uint32, n)
	for i := range t {
		t[i] = uint32(i*2654435761) % 152000
	}
	return t
}

// mustChain is ChainHashes that fails t on an error or on a chain whose
// length is not one hash per full block.
func mustChain(t *testing.T, scheme HashScheme, blockTokens int, salt string, tokens []uint32) []uint64 {
	t.Helper()
	got, err := ChainHashes(scheme, blockTokens, salt, tokens)
	if err != nil {
		t.Fatalf("%s ChainHashes: %v", scheme, err)
	}
	if want := len(tokens) / blockTokens; len(got) != want {
		t.Fatalf("%s ChainHashes: %d hashes for %d tokens in blocks of %d, want %d", scheme, len(got), len(tokens), blockTokens, want)
	}
	return got
}

func TestChainHashesRejectsBadArguments(t *testing.T) {
	for _, tc := range []struct {
		name        string
		scheme      HashScheme
		blockTokens int
		salt        string
	}{
		{"zero block", SchemeDynamo, 0, ""},
		{"negative block", SchemeVLLM, -16, ""},
		{"huge block", SchemeDynamo, MaxBlockTokens + 1, ""},
		{"unknown scheme", HashScheme("md5"), 16, ""},
		{"empty scheme", HashScheme(""), 16, ""},
		{"vllm salt not utf-8", SchemeVLLM, 16, "\xff\xfe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ChainHashes(tc.scheme, tc.blockTokens, tc.salt, testTokens(64))
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("err = %v, want ErrInvalidArgument", err)
			}
			if got != nil {
				t.Fatalf("hashes = %v alongside an error", got)
			}
		})
	}
	// Any bytes are a valid Dynamo salt.
	if _, err := ChainHashes(SchemeDynamo, 16, "\xff\xfe", testTokens(64)); err != nil {
		t.Fatalf("dynamo with binary salt: %v", err)
	}
}

func TestChainHashesFullBlocksOnly(t *testing.T) {
	for _, scheme := range []HashScheme{SchemeDynamo, SchemeVLLM} {
		for _, tc := range []struct{ tokens, block, want int }{
			{0, 16, 0}, {15, 16, 0}, {16, 16, 1}, {31, 16, 1}, {32, 16, 2}, {1000, 16, 62}, {5, 1, 5},
		} {
			got, err := ChainHashes(scheme, tc.block, "", testTokens(tc.tokens))
			if err != nil {
				t.Fatal(err)
			}
			if got == nil || len(got) != tc.want {
				t.Errorf("%s: %d tokens, block %d: %d hashes (nil=%v), want %d", scheme, tc.tokens, tc.block, len(got), got == nil, tc.want)
			}
		}
	}
}

// TestChainHashesArePrefixStable: a block's hash depends only on its prefix,
// so a longer prompt extends, never changes, a shorter prompt's chain.
func TestChainHashesArePrefixStable(t *testing.T) {
	tokens := testTokens(16 * 10)
	for _, scheme := range []HashScheme{SchemeDynamo, SchemeVLLM} {
		full := mustChain(t, scheme, 16, "s", tokens)
		short := mustChain(t, scheme, 16, "s", tokens[:16*4+3])
		for i := range short {
			if short[i] != full[i] {
				t.Fatalf("%s: block %d differs between prefix and full prompt", scheme, i)
			}
		}
		// Changing one token of block 2 changes blocks 2.. but not 0..1.
		mod := append([]uint32(nil), tokens...)
		mod[16*2+5]++
		other := mustChain(t, scheme, 16, "s", mod)
		for i := range full {
			if (other[i] == full[i]) != (i < 2) {
				t.Fatalf("%s: after editing block 2, block %d equal=%v", scheme, i, other[i] == full[i])
			}
		}
	}
}

// TestChainMatchesSingleSteps: the chain is exactly the exported single-step
// functions applied in order, so a router can recompute it from token_ids.
func TestChainMatchesSingleSteps(t *testing.T) {
	const bt = 32
	tokens := testTokens(bt*6 + 7)
	for _, salt := range []string{"", "tenant-a"} {
		got := mustChain(t, SchemeDynamo, bt, salt, tokens)
		seed := DynamoBlockSeed(salt)
		var seq uint64
		for i := range got {
			local := DynamoLocalHash(tokens[i*bt:(i+1)*bt], seed)
			if i == 0 {
				seq = local
			} else {
				seq = DynamoSequenceHash(seq, local)
			}
			if got[i] != seq {
				t.Fatalf("dynamo salt %q block %d: chain %d, steps %d", salt, i, got[i], seq)
			}
		}

		got = mustChain(t, SchemeVLLM, bt, salt, tokens)
		h := VLLMNoneHash(DefaultVLLMHashSeed)
		for i := range got {
			if i == 0 && salt != "" {
				h = VLLMBlockHash(h, tokens[:bt], VLLMCacheSalt(salt))
			} else {
				h = VLLMBlockHash(h, tokens[i*bt:(i+1)*bt])
			}
			if got[i] != h.Uint64() {
				t.Fatalf("vllm salt %q block %d: chain %d, steps %d", salt, i, got[i], h.Uint64())
			}
		}
	}
}

func TestTenantSaltChangesEveryHash(t *testing.T) {
	tokens := testTokens(16 * 8)
	for _, scheme := range []HashScheme{SchemeDynamo, SchemeVLLM} {
		plain := mustChain(t, scheme, 16, "", tokens)
		a := mustChain(t, scheme, 16, "tenant-a", tokens)
		b := mustChain(t, scheme, 16, "tenant-b", tokens)
		seen := map[uint64]bool{}
		for _, chain := range [][]uint64{plain, a, b} {
			for _, h := range chain {
				if seen[h] {
					t.Fatalf("%s: hash %016x appears under two salts (or twice in a chain)", scheme, h)
				}
				seen[h] = true
			}
		}
	}
}

// TestEmptySaltIsEngineCompatible checks the Dynamo chain against Dynamo's
// published known answers: the constants of lib/llm/src/tokens.rs's tests
// (HASH_1_4 = SEQ_HASH_1_4, SEQ_HASH_5_8, SEQ_HASH_9_12 for tokens 1..12 in
// blocks of 4 with seed 1337, the seed of unsalted requests). The vLLM
// scheme's engine vectors come from vLLM's own functions (a vectors file the
// Python suite writes), not from here.
func TestEmptySaltIsEngineCompatible(t *testing.T) {
	got := mustChain(t, SchemeDynamo, 4, "", []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13})
	want := []uint64{14643705804678351452, 4945711292740353085, 12583592247330656132}
	if got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("dynamo chain = %v, want Dynamo's %v", got, want)
	}
}

// TestVLLMEmptySaltStartsFromNoneHash: with no cache_salt, block 0 has
// extra_keys None (CBOR null), the same digest VLLMBlockHash gives with no
// extra keys, chained from NONE_HASH. This is internal consistency only;
// TestVLLMChainByHand builds the CBOR by hand.
func TestVLLMEmptySaltStartsFromNoneHash(t *testing.T) {
	got := mustChain(t, SchemeVLLM, 4, "", []uint32{1, 2, 3, 4})
	if h := VLLMBlockHash(VLLMNoneHash("0"), []uint32{1, 2, 3, 4}); got[0] != h.Uint64() {
		t.Errorf("vllm chain = %v, want [%d]", got, h.Uint64())
	}
}

func TestChainerVLLMHashSeed(t *testing.T) {
	c, err := NewChainer(SchemeVLLM, 4, "")
	if err != nil {
		t.Fatal(err)
	}
	tokens := []uint32{1, 2, 3, 4}
	def := c.Hashes(tokens)
	c42 := c.WithVLLMHashSeed("42")
	if got, want := c42.Hashes(tokens)[0], VLLMBlockHash(VLLMNoneHash("42"), tokens).Uint64(); got != want {
		t.Errorf("seed 42: got %d, want %d", got, want)
	}
	if c42.Hashes(tokens)[0] == def[0] {
		t.Error("PYTHONHASHSEED did not change the hash")
	}
	if c.WithVLLMHashSeed("0").Hashes(tokens)[0] != def[0] {
		t.Error("explicit seed \"0\" differs from the default")
	}
	d, err := NewChainer(SchemeDynamo, 4, "")
	if err != nil {
		t.Fatal(err)
	}
	if d.WithVLLMHashSeed("42") != d {
		t.Error("WithVLLMHashSeed changed a Dynamo chainer")
	}
	if got := (Chainer{}).AppendHashes(nil, tokens); len(got) != 0 {
		t.Errorf("zero Chainer hashed %v", got)
	}
	if got := (Chainer{}).Hashes(tokens); len(got) != 0 {
		t.Errorf("zero Chainer hashed %v", got)
	}
}

func TestNamespaceChainKeys(t *testing.T) {
	ns := Namespace{Name: "team-a", BlockTokens: 8, HashScheme: SchemeVLLM, TenantSalt: "a"}
	tokens := testTokens(8*3 + 1)
	keys, err := ns.ChainKeys(tokens)
	if err != nil {
		t.Fatal(err)
	}
	hashes := mustChain(t, SchemeVLLM, 8, "a", tokens)
	nsHashes, err := ns.ChainHashes(tokens)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 3 || len(nsHashes) != 3 {
		t.Fatalf("%d keys, %d hashes, want 3", len(keys), len(nsHashes))
	}
	for i, k := range keys {
		if k != NewKey("team-a", hashes[i]) || nsHashes[i] != hashes[i] {
			t.Errorf("key %d = %v, want team-a/%016x", i, k, hashes[i])
		}
	}

	bad := ns
	bad.HashScheme = "nope"
	if _, err := bad.ChainKeys(tokens); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("bad scheme: err = %v", err)
	}
	bad = ns
	bad.BlockTokens = 0
	if _, err := bad.ChainHashes(tokens); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("bad block size: err = %v", err)
	}
	def := DefaultNamespaceConfig()
	if _, err := def.ChainKeys(tokens); err != nil {
		t.Errorf("default namespace: %v", err)
	}
}

func TestChainerAppendDoesNotAllocate(t *testing.T) {
	tokens := testTokens(512 * 4)
	for _, scheme := range []HashScheme{SchemeDynamo, SchemeVLLM} {
		c, err := NewChainer(scheme, 512, "salt")
		if err != nil {
			t.Fatal(err)
		}
		dst := make([]uint64, 0, 4)
		if n := testing.AllocsPerRun(20, func() { dst = c.AppendHashes(dst[:0], tokens) }); n != 0 {
			t.Errorf("%s: AppendHashes %v allocs per run, want 0", scheme, n)
		}
	}
}

func TestChainerConcurrentUse(t *testing.T) {
	tokens := testTokens(64 * 5)
	for _, scheme := range []HashScheme{SchemeDynamo, SchemeVLLM} {
		c, err := NewChainer(scheme, 64, "x")
		if err != nil {
			t.Fatal(err)
		}
		want := c.Hashes(tokens)
		var wg sync.WaitGroup
		errs := make(chan string, 8)
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got := c.Hashes(tokens)
				for i := range want {
					if got[i] != want[i] {
						errs <- "mismatch"
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Fatalf("%s: concurrent Hashes: %s", scheme, e)
		}
	}
}

// BenchmarkBlockHash512 hashes one 512-token block (the default namespace's
// block size) with each scheme, as the second block of a chain (parent set).
// The baselines are the bare primitives over the block's pre-encoded bytes
// (xxh3 over 2 KiB; sha256 over the block's CBOR), measured in the same run;
// each scheme reports its cost as a ratio to its baseline.
func BenchmarkBlockHash512(b *testing.B) {
	tokens := testTokens(512)
	le := make([]byte, 0, 4*len(tokens))
	for _, t := range tokens {
		le = binary.LittleEndian.AppendUint32(le, t)
	}
	root := VLLMNoneHash(DefaultVLLMHashSeed)
	cbor := appendVLLMBlockCBOR(nil, &root, tokens, nil)

	var sink uint64
	// baseline times f over doubling iteration counts until one run lasts
	// 100ms, returning ns per call (testing.Benchmark cannot nest).
	baseline := func(f func()) float64 {
		for n := 1; ; n *= 2 {
			start := time.Now()
			for i := 0; i < n; i++ {
				f()
			}
			if d := time.Since(start); d >= 100*time.Millisecond {
				return float64(d.Nanoseconds()) / float64(n)
			}
		}
	}
	report := func(b *testing.B, base float64) {
		perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		b.ReportMetric(float64(len(tokens))/(perOp/1e9), "tokens/s")
		b.ReportMetric(perOp/base, "x-baseline")
		b.ReportMetric(base, "baseline-ns")
	}

	b.Run("dynamo", func(b *testing.B) {
		base := baseline(func() { sink += xxh3.HashSeed(le, DynamoSeed) })
		for b.Loop() {
			sink += DynamoSequenceHash(sink, DynamoLocalHash(tokens, DynamoSeed))
		}
		report(b, base)
	})
	b.Run("vllm", func(b *testing.B) {
		base := baseline(func() { s := sha256.Sum256(cbor); sink += uint64(s[0]) })
		h := root
		for b.Loop() {
			h = VLLMBlockHash(root, tokens)
		}
		sink += h.Uint64()
		report(b, base)
	})
	_ = sink
}

// BenchmarkChainHashes hashes a 8192-token prompt (16 blocks of 512) into its
// chain, allocating the result, as the router does per request.
func BenchmarkChainHashes(b *testing.B) {
	tokens := testTokens(8192)
	for _, scheme := range []HashScheme{SchemeDynamo, SchemeVLLM} {
		b.Run(string(scheme), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ChainHashes(scheme, 512, "", tokens); err != nil {
					b.Fatal(err)
				}
			}
			perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(float64(len(tokens))/(perOp/1e9), "tokens/s")
		})
	}
}
