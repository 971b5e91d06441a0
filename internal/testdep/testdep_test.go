package testdep

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestStrict(t *testing.T) {
	for _, tc := range []struct {
		ci, strict string
		want       bool
	}{
		{"", "", false},
		{"false", "", false},
		{"true", "", true},
		{"1", "", true},
		{"", "1", true},
		{"", "0", false},
		{"false", "yes", true},
	} {
		t.Setenv("CI", tc.ci)
		t.Setenv("CTXTIER_STRICT", tc.strict)
		if got := Strict(); got != tc.want {
			t.Errorf("CI=%q CTXTIER_STRICT=%q: Strict() = %v, want %v", tc.ci, tc.strict, got, tc.want)
		}
	}
}

// TestMissingOutcome runs a child test (this binary, -test.run
// TestHelperMissing) with and without strictness and checks that the same
// missing dependency skips in one and fails in the other.
func TestMissingOutcome(t *testing.T) {
	if os.Getenv("TESTDEP_HELPER") != "" {
		t.Skip("helper process for TestMissingOutcome")
	}
	for _, tc := range []struct {
		name     string
		env      []string
		wantFail bool
		wantOut  string
	}{
		{"lenient", []string{"CI=", "CTXTIER_STRICT="}, false, "--- SKIP: TestHelperMissing"},
		{"ci", []string{"CI=true", "CTXTIER_STRICT="}, true, "--- FAIL: TestHelperMissing"},
		{"strict", []string{"CI=", "CTXTIER_STRICT=1"}, true, "--- FAIL: TestHelperMissing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run", "^TestHelperMissing$", "-test.v")
			cmd.Env = append(append(os.Environ(), "TESTDEP_HELPER=1"), tc.env...)
			out, err := cmd.CombinedOutput()
			if failed := err != nil; failed != tc.wantFail {
				t.Fatalf("child failed=%v, want %v:\n%s", failed, tc.wantFail, out)
			}
			if !strings.Contains(string(out), tc.wantOut) {
				t.Fatalf("child output lacks %q:\n%s", tc.wantOut, out)
			}
			if !strings.Contains(string(out), "no-such-tool-ctxtier") {
				t.Fatalf("child output does not name the missing tool:\n%s", out)
			}
		})
	}
}

// TestHelperMissing is the child of TestMissingOutcome.
func TestHelperMissing(t *testing.T) {
	if os.Getenv("TESTDEP_HELPER") == "" {
		t.Skip("helper process for TestMissingOutcome")
	}
	Command(t, "no-such-tool-ctxtier", "it never exists")
	t.Log("reached after a missing command")
}

func TestPresent(t *testing.T) {
	if p := Command(t, "sh", "install a shell"); p == "" {
		t.Fatal("sh not resolved")
	}
	dir := t.TempDir()
	if got := Path(t, dir, "a temp dir", "-"); got != dir {
		t.Fatalf("Path = %q, want %q", got, dir)
	}
}
