package prefill

import (
	"errors"
	"math"
	"testing"
)

// small is a model small enough to compute costs by hand: 2 layers of
// width 5 (4 x L x d = 40 attention FLOPs per token per context position),
// 50 parameters (100 linear FLOPs per token), calibrated to 3 tokens/s on a
// 10-token prompt. That prompt costs 10 x 100 + 40 x 10 x 5 = 3000 FLOPs in
// 10/3 s, so the effective rate is 900 FLOP/s.
func small() Config {
	return Config{TokensPerSec: 3, PassSeconds: 0.5, Attention: true, Layers: 2, Dim: 5, Params: 50, RefTokens: 10}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestSecondsByHand(t *testing.T) {
	def := DefaultConfig()
	// Llama-3.1-8B defaults: F = 25000 x (2 x 8e9 + 4 x 32 x 4096 x 6000)
	// = 4.786432e14 FLOP/s.
	const defF = 25000 * (16e9 + 4*32*4096*6000.0)
	linear := small()
	linear.Attention = false
	for _, tc := range []struct {
		name string
		cfg  Config
		p, n int
		want float64
	}{
		{"empty pass", small(), 0, 0, 0.5},
		{"reference length runs at the calibrated rate", small(), 0, 10, 0.5 + 10.0/3},
		{"one token, no prefix", small(), 0, 1, 0.5 + (100+40*0.5)/900.0},
		{"ten after ten", small(), 10, 10, 0.5 + (1000+40*10*15)/900.0},
		{"one after a long prefix", small(), 100, 1, 0.5 + (100+40*100.5)/900.0},
		{"negative prefix reads as empty", small(), -5, 1, 0.5 + (100+40*0.5)/900.0},
		{"term off is linear", linear, 100, 1, 0.5 + 1.0/3},
		{"defaults: 12k-token reference", def, 0, 12000, 0.005 + 12000/25000.0},
		{"defaults: one block from empty", def, 0, 512, 0.005 + (512*16e9+4*32*4096*512*256.0)/defF},
		{"defaults: one block after 100k", def, 100_000, 512, 0.005 + (512*16e9+4*32*4096*512*100_256.0)/defF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			if got := tc.cfg.Seconds(tc.p, tc.n); !near(got, tc.want) {
				t.Fatalf("Seconds(%d, %d) = %.12g, want %.12g", tc.p, tc.n, got, tc.want)
			}
			if got := tc.cfg.ComputeSeconds(tc.p, tc.n); !near(got, tc.want-tc.cfg.PassSeconds) {
				t.Fatalf("ComputeSeconds(%d, %d) = %.12g, want %.12g", tc.p, tc.n, got, tc.want-tc.cfg.PassSeconds)
			}
		})
	}
	// The term makes a block after a long prefix dearer than one from empty.
	if a, b := def.ComputeSeconds(100_000, 512), def.ComputeSeconds(0, 512); a < 2*b {
		t.Fatalf("a block after 100k tokens costs %v, from empty %v: want the attention term to dominate", a, b)
	}
}

// TestComputeIsAdditive: computing a prompt block by block costs what it
// costs at once, which lets the router price blocks one at a time.
func TestComputeIsAdditive(t *testing.T) {
	for _, c := range []Config{small(), DefaultConfig()} {
		for _, p := range []int{0, 7, 4096} {
			whole := c.ComputeSeconds(p, 12*16)
			var parts float64
			for j := range 12 {
				parts += c.ComputeSeconds(p+j*16, 16)
			}
			if !near(parts, whole) {
				t.Fatalf("%+v p %d: blocks sum to %v, whole %v", c, p, parts, whole)
			}
		}
	}
}

func TestBlockSecondsByHand(t *testing.T) {
	// small(), blocks of 2 tokens: block j costs (2 x 100 + 40 x 2 x (2j + 1)) / 900
	// = (280 + 160 j) / 900 s: 0.3111, 0.4889, 0.6667, 0.8444, ...
	blk := func(j int) float64 { return (280 + 160*float64(j)) / 900 }
	linear := small()
	linear.Attention = false // 2 tokens at 3/s: 2/3 s per block
	for _, tc := range []struct {
		name string
		cfg  Config
		a, b int
		alt  float64
		want float64
	}{
		{"empty range", small(), 3, 3, 0.1, 0},
		{"all recomputed: alt dearer than every block", small(), 0, 4, 10, blk(0) + blk(1) + blk(2) + blk(3)},
		{"none recomputed: alt cheaper than the first", small(), 0, 4, 0.1, 4 * 0.1},
		{"split: blocks 0 and 1 recomputed, 2 and 3 at alt", small(), 0, 4, 0.6, blk(0) + blk(1) + 2*0.6},
		{"split from an offset", small(), 1, 5, 0.7, blk(1) + blk(2) + 2*0.7},
		{"tie takes alt", small(), 0, 3, blk(1), blk(0) + 2*blk(1)},
		{"linear: alt cheaper", linear, 2, 6, 0.5, 4 * 0.5},
		{"linear: recompute cheaper", linear, 2, 6, 1, 4 * 2.0 / 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.cfg.BlockSeconds(tc.a, tc.b, 2, tc.alt)
			if !near(got, tc.want) {
				t.Fatalf("BlockSeconds(%d, %d, 2, %v) = %.12g, want %.12g", tc.a, tc.b, tc.alt, got, tc.want)
			}
			// The closed form against the sum of per-block minima.
			var loop float64
			for j := tc.a; j < tc.b; j++ {
				loop += min(tc.alt, tc.cfg.ComputeSeconds(2*j, 2))
			}
			if !near(got, loop) {
				t.Fatalf("closed form %v, per-block loop %v", got, loop)
			}
		})
	}
}

// TestBlockSecondsMatchesLoop checks the closed form against the per-block
// sum over many ranges and alternatives with the default model.
func TestBlockSecondsMatchesLoop(t *testing.T) {
	c := DefaultConfig()
	for _, alt := range []float64{0, 1e-4, 0.02, 0.021, 0.05, 0.2, 1} {
		for _, r := range [][2]int{{0, 1}, {0, 300}, {17, 250}, {200, 201}, {0, 2000}} {
			got := c.BlockSeconds(r[0], r[1], 512, alt)
			var loop float64
			for j := r[0]; j < r[1]; j++ {
				loop += min(alt, c.ComputeSeconds(512*j, 512))
			}
			if !near(got, loop) {
				t.Fatalf("alt %v range %v: closed form %.12g, loop %.12g", alt, r, got, loop)
			}
		}
	}
}

func TestValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	noTerm := Config{TokensPerSec: 1} // shape unused without the term
	if err := noTerm.Validate(); err != nil {
		t.Fatalf("linear model without a shape: %v", err)
	}
	for name, mod := range map[string]func(*Config){
		"rate":   func(c *Config) { c.TokensPerSec = math.Inf(1) },
		"zero":   func(c *Config) { c.TokensPerSec = 0 },
		"pass":   func(c *Config) { c.PassSeconds = -1 },
		"nan":    func(c *Config) { c.PassSeconds = math.NaN() },
		"layers": func(c *Config) { c.Layers = 0 },
		"dim":    func(c *Config) { c.Dim = -1 },
		"params": func(c *Config) { c.Params = math.NaN() },
		"ref":    func(c *Config) { c.RefTokens = 0 },
	} {
		c := DefaultConfig()
		mod(&c)
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}

func TestParse(t *testing.T) {
	def := DefaultConfig()
	qwen := def
	qwen.Layers, qwen.Dim, qwen.Params, qwen.TokensPerSec = 64, 5120, 31e9, 6000
	linear := def
	linear.Attention = false
	for _, tc := range []struct {
		spec string
		want Config
	}{
		{"", def},
		{"  ", def},
		{"layers=64, dim=5120 ,params=31e9,tokens_per_sec=6000", qwen},
		{"attention=false", linear},
		{"pass_seconds=0,ref_tokens=12000", func() Config { c := def; c.PassSeconds = 0; return c }()},
	} {
		got, err := Parse(tc.spec)
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tc.spec, got, err, tc.want)
		}
	}
	for _, spec := range []string{
		"layers",            // no value
		"layers=",           // empty value
		"=3",                // no key
		"heads=8",           // unknown key
		"layers=x",          // not a number
		"attention=maybe",   // not a bool
		"layers=0",          // parses, fails Validate
		"tokens_per_sec=-1", // likewise
		"params=NaN",
		"dim=64,,layers=2", // empty item
	} {
		if _, err := Parse(spec); !errors.Is(err, ErrConfig) {
			t.Errorf("Parse(%q): %v, want ErrConfig", spec, err)
		}
	}
}
