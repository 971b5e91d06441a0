package block

import (
	"fmt"
	"hash/crc32"
	"slices"
	"testing"
	"time"
)

// checksumVariants are what BenchmarkChecksum compares at each size: the
// hash/crc32 baseline, this package (folding kernel where supported), the
// fused copy+checksum, its copy-then-checksum baseline, and a copy alone.
var checksumVariants = []struct {
	name string
	run  func(dst, src []byte) uint32
}{
	{"crc32", func(_, src []byte) uint32 { return crc32.Update(0, castagnoli, src) }},
	{"Checksum", func(_, src []byte) uint32 { return Checksum(src) }},
	{"copy", func(dst, src []byte) uint32 { copy(dst, src); return 0 }},
	{"copy+crc32", func(dst, src []byte) uint32 {
		var s uint32
		for off := 0; off < len(src); off += copyChunk {
			end := min(off+copyChunk, len(src))
			copy(dst[off:end], src[off:end])
			s = crc32.Update(s, castagnoli, dst[off:end])
		}
		return s
	}},
	{"CopyChecksum", func(dst, src []byte) uint32 { return CopyChecksum(dst, src, 0) }},
}

var benchSizes = []int{256, 512, 1 << 10, 4 << 10, 64 << 10, 2 << 20}

// BenchmarkChecksum reports each variant's throughput per size.
func BenchmarkChecksum(b *testing.B) {
	for _, n := range benchSizes {
		src, dst := make([]byte, n), make([]byte, n)
		for i := range src {
			src[i] = byte(i * 7)
		}
		for _, v := range checksumVariants {
			b.Run(fmt.Sprintf("%s/%d", v.name, n), func(b *testing.B) {
				b.SetBytes(int64(n))
				for b.Loop() {
					v.run(dst, src)
				}
			})
		}
	}
}

// BenchmarkChecksumRatios measures every variant at each size in the same
// run, alternating them over five rounds of about 40 ms each, and logs the
// median GB/s of each and the ratios that matter: Checksum/crc32, and
// CopyChecksum over copy+crc32 and over copy alone. Run it with
// -benchtime=1x: each iteration is a full measurement.
func BenchmarkChecksumRatios(b *testing.B) {
	const rounds = 5
	for b.Loop() {
		for _, n := range benchSizes[3:] {
			src, dst := make([]byte, n), make([]byte, n)
			gbs := make([][]float64, len(checksumVariants))
			for range rounds {
				for i, v := range checksumVariants {
					gbs[i] = append(gbs[i], measureGBs(func() { v.run(dst, src) }, n))
				}
			}
			med := make([]float64, len(gbs))
			for i := range gbs {
				slices.Sort(gbs[i])
				med[i] = gbs[i][rounds/2]
			}
			b.Logf("%8d B: crc32 %.1f Checksum %.1f copy %.1f copy+crc32 %.1f CopyChecksum %.1f GB/s (medians of %d) | Checksum/crc32 %.2f CopyChecksum/(copy+crc32) %.2f CopyChecksum/copy %.2f (copy+crc32)/copy %.2f",
				n, med[0], med[1], med[2], med[3], med[4], rounds, med[1]/med[0], med[4]/med[3], med[4]/med[2], med[3]/med[2])
		}
	}
}

// measureGBs runs f, which moves n bytes, for about 40 ms and returns GB/s.
func measureGBs(f func(), n int) float64 {
	const window = 40 * time.Millisecond
	f() // warm the caches and the branch predictors
	iters := 0
	start := time.Now()
	for time.Since(start) < window {
		for range 16 {
			f()
		}
		iters += 16
	}
	return float64(iters) * float64(n) / float64(time.Since(start).Nanoseconds())
}
