// Package testdep decides what a test does when a real dependency it needs
// (a tool such as curl or s3cmd, a server binary such as versitygw, the
// shared traces) is missing.
//
// On a developer's machine the test skips, with a message saying how to get
// the dependency. In CI (CI=true) or when asked to be strict
// (CTXTIER_STRICT=1, which `make test STRICT=1` sets) the test fails instead:
// a run that claims to have exercised the real components must not pass
// with one of them absent.
//
// Use it only for a missing dependency. A skip by design (a helper process
// re-executed by its own test, an architecture the code does not support,
// -short) stays a plain t.Skip; a dependency that is present but broken (a
// trace that does not parse, a binary that does not build) is a failure,
// never a skip.
//
//	curl := testdep.Command(t, "curl", "apt-get install curl")
//	dir := testdep.Path(t, "../shared/traces", "the shared traces", "clone ../shared beside the repository")
package testdep

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Strict reports whether a missing dependency fails the test: CI is "true"
// (or "1"), or CTXTIER_STRICT is set to anything but "" or "0".
func Strict() bool {
	switch strings.ToLower(os.Getenv("CI")) {
	case "true", "1", "yes":
		return true
	}
	s := os.Getenv("CTXTIER_STRICT")
	return s != "" && s != "0"
}

// Missing ends the test because dependency what is unavailable (why says
// what was looked for, how says how to get it): it skips, or fails when
// Strict.
func Missing(t testing.TB, what, why, how string) {
	t.Helper()
	if Strict() {
		t.Fatalf("required test dependency missing: %s (%s); %s [strict: CI=true or CTXTIER_STRICT=1]", what, why, how)
	}
	t.Skipf("dependency missing: %s (%s); %s (CI=true or CTXTIER_STRICT=1 turns this skip into a failure)", what, why, how)
}

// Command returns the path of the executable name found in PATH, or calls
// Missing.
func Command(t testing.TB, name, how string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, name, err.Error(), how)
	}
	return p
}

// Path returns path when it exists, or calls Missing naming it as what.
func Path(t testing.TB, path, what, how string) string {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		Missing(t, what, err.Error(), how)
	}
	return path
}
