package policy

import (
	"math/rand/v2"
	"testing"
	"time"
)

// runOps replays a fixed mix (60% touch, 40% insert with eviction) against
// a full policy of n blocks and returns the time per operation.
func runOps(f Factory, n, ops int) time.Duration {
	p := f(n)
	rng := rand.New(rand.NewPCG(3, 4))
	var last uint64
	for h := 0; h < n; h++ {
		last = rng.Uint64()
		p.Insert(Handle(h), Meta{Hash: last})
	}
	start := time.Now()
	for i := 0; i < ops; i++ {
		if rng.IntN(10) < 6 {
			p.Touch(Handle(rng.IntN(n)))
			continue
		}
		v, _ := p.Victim(nil)
		p.Remove(v)
		h := rng.Uint64()
		p.Insert(v, Meta{Hash: h, Parent: last, HasParent: i%8 != 0})
		last = h
	}
	return time.Since(start) / time.Duration(max(ops, 1))
}

// BenchmarkPolicyOps measures the cost of one policy operation for each
// policy and reports it as a ratio to LRU measured in the same run.
func BenchmarkPolicyOps(b *testing.B) {
	const n = 1 << 16
	for _, name := range []string{"lru", "segmented", "window", "duel-nohints"} {
		f, _ := Lookup(name)
		b.Run(name, func(b *testing.B) {
			runOps(NewLRU, n, 100000) // warm up
			base := runOps(NewLRU, n, max(b.N, 200000))
			b.ResetTimer()
			per := runOps(f, n, b.N)
			b.ReportMetric(float64(per.Nanoseconds()), "ns/policy-op")
			b.ReportMetric(float64(per)/float64(base), "x-lru")
		})
	}
}
