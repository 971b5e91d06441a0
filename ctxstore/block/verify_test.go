package block

import (
	"context"
	"testing"
)

func TestReaderVerifiesContext(t *testing.T) {
	bg := context.Background()
	cases := []struct {
		name string
		ctx  context.Context
		want bool
	}{
		{"plain", bg, false},
		{"with", WithReaderVerify(bg), true},
		{"with, then without", WithoutReaderVerify(WithReaderVerify(bg)), false},
		{"without only", WithoutReaderVerify(bg), false},
		{"without, then with", WithReaderVerify(WithoutReaderVerify(WithReaderVerify(bg))), true},
	}
	for _, tc := range cases {
		if got := ReaderVerifies(tc.ctx); got != tc.want {
			t.Errorf("%s: ReaderVerifies = %v, want %v", tc.name, got, tc.want)
		}
	}
	if WithoutReaderVerify(bg) != bg {
		t.Error("WithoutReaderVerify of an unmarked context must return it unchanged")
	}
}
