package block

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

var sizeUnits = []struct {
	suffix string
	mult   float64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	{"B", 1},
}

// ParseSize parses a byte size: a plain number of bytes, or a number with a
// unit: KiB/MiB/GiB/TiB (powers of 1024), KB/MB/GB/TB (powers of 1000), or the
// bare K/M/G/T (powers of 1024). "2MiB", "8GiB", "1.5GiB" and "4096" are valid.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := 1.0
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) || v*mult > math.MaxInt64/2 {
		return 0, fmt.Errorf("%w: size %q: want a number of bytes, optionally with KiB, MiB, GiB, TiB, KB, MB, GB or TB", ErrInvalidArgument, s)
	}
	return int64(v * mult), nil
}

// FormatSize renders n in the largest binary unit that divides it exactly
// ("2MiB"), or with two decimals otherwise ("1.50GiB").
func FormatSize(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i, v := 0, float64(n)
	for i < len(units)-1 && v >= 1024 {
		v /= 1024
		i++
	}
	if v == math.Trunc(v) {
		return strconv.FormatFloat(v, 'f', 0, 64) + units[i]
	}
	return strconv.FormatFloat(v, 'f', 2, 64) + units[i]
}
