package mix

import "testing"

// The first five outputs of the SplitMix64 generator seeded with 1234567,
// as published by Rosetta Code's "Pseudo-random numbers/Splitmix64" task
// (its reference values, reproduced by its many implementations): the
// generator's state advances by the gamma before each output, so output i
// is the finaliser of seed + (i+1)*gamma, that is SplitMix64(seed + i*gamma).
func TestSplitMix64KnownAnswers(t *testing.T) {
	const gamma = 0x9e3779b97f4a7c15
	want := []uint64{6457827717110365317, 3203168211198807973, 9817491932198370423, 4593380528125082431, 16408922859458223821}
	for i, w := range want {
		if got := SplitMix64(1234567 + uint64(i)*gamma); got != w {
			t.Errorf("output %d: %d, want %d", i, got, w)
		}
	}
}

func TestSplitMix64Distinct(t *testing.T) {
	seen := map[uint64]uint64{}
	for x := range uint64(1 << 16) {
		h := SplitMix64(x)
		if y, ok := seen[h]; ok {
			t.Fatalf("SplitMix64(%d) = SplitMix64(%d)", x, y)
		}
		seen[h] = x
	}
}
