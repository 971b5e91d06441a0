package subcmd

import (
	"slices"
	"testing"
)

func TestSplitList(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{" , ,", nil},
		{"a", []string{"a"}},
		{"a,b", []string{"a", "b"}},
		{" a , ,b, ", []string{"a", "b"}},
		{"127.0.0.1:7400,127.0.0.1:7401", []string{"127.0.0.1:7400", "127.0.0.1:7401"}},
	}
	for _, tc := range cases {
		if got := SplitList(tc.in); !slices.Equal(got, tc.want) || (tc.want == nil) != (got == nil) {
			t.Errorf("SplitList(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
