// Package mix spreads 64-bit numbers over all their bits: SplitMix64's
// finaliser (Steele, Lea and Flood, "Fast splittable pseudorandom number
// generators", OOPSLA 2014), for tools that need distinct, well-spread
// hashes from counters or small seeds. It is a bijection on uint64.
package mix

// SplitMix64 returns SplitMix64's output for state x: x plus the golden
// gamma, then the finaliser's two xor-shift-multiply rounds.
func SplitMix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
