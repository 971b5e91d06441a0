package block

import (
	"errors"
	"testing"
	"time"
)

func TestParseReuse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Reuse
		err  bool
	}{
		{"", ReuseUnknown, false},
		{"never", ReuseNever, false},
		{"session", ReuseSession, false},
		{"shared", ReuseShared, false},
		{"Never", 0, true},
		{"always", 0, true},
		{"1", 0, true},
	} {
		got, err := ParseReuse(tc.in)
		if tc.err {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("ParseReuse(%q) = %v, %v; want ErrInvalidArgument", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseReuse(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if got.String() != tc.in {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), tc.in)
		}
	}
}

func TestValidateHints(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    PutOptions
		ok   bool
	}{
		{"none", PutOptions{}, true},
		{"never", PutOptions{Reuse: ReuseNever}, true},
		{"session with retain", PutOptions{Reuse: ReuseSession, Retain: 30 * time.Second}, true},
		{"retain alone", PutOptions{Retain: time.Second}, true},
		{"shared at max retain", PutOptions{Reuse: ReuseShared, Retain: MaxRetain}, true},
		{"undefined reuse", PutOptions{Reuse: MaxReuse + 1}, false},
		{"negative retain", PutOptions{Retain: -time.Millisecond}, false},
		{"retain above max", PutOptions{Retain: MaxRetain + time.Millisecond}, false},
		{"never with retain", PutOptions{Reuse: ReuseNever, Retain: time.Second}, false},
	} {
		err := tc.o.ValidateHints()
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidArgument)) {
			t.Errorf("%s: ValidateHints = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if got := tc.o.HasHints(); got != (tc.o.Reuse != 0 || tc.o.Retain != 0) {
			t.Errorf("%s: HasHints = %v", tc.name, got)
		}
	}
}
