package golden

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTB records a failure instead of failing the test.
type fakeTB struct {
	testing.TB
	failed string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, a ...any) {
	f.failed = format
	panic(f)
}
func (f *fakeTB) Fatal(a ...any) { f.failed = "fatal"; panic(f) }

func check(path string, want []byte, update bool) (failed string) {
	f := &fakeTB{}
	defer func() {
		if r := recover(); r != nil && r != any(f) {
			panic(r)
		}
		failed = f.failed
	}()
	Check(f, path, want, update, "go test -update")
	return ""
}

func TestCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "v.json")
	for _, tc := range []struct {
		name   string
		want   string
		update bool
		fails  string
	}{
		{"missing file", "a", false, "to write it"},
		{"update writes it", "a", true, ""},
		{"same bytes pass", "a", false, ""},
		{"other bytes fail", "b", false, "differs"},
		{"update rewrites", "b", true, ""},
		{"then they pass", "b", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := check(path, []byte(tc.want), tc.update)
			if (tc.fails == "") != (got == "") || !strings.Contains(got, tc.fails) {
				t.Fatalf("failure %q, want one containing %q", got, tc.fails)
			}
		})
	}
	if b, _ := os.ReadFile(path); string(b) != "b" {
		t.Fatalf("file holds %q", b)
	}
}
