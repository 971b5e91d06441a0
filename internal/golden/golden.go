// Package golden keeps files that tests generate and other test suites read
// (the shared vectors the Python tests check against the Go code): a test
// computes the file's bytes, and Check compares them with the copy in the
// repository or, under the test's -update flag, rewrites it.
package golden

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Check writes want to path when update is set; otherwise it fails tb
// unless path holds exactly want. regen is the command that rewrites the
// file, named in the failure.
func Check(tb testing.TB, path string, want []byte, update bool, regen string) {
	tb.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(path, want, 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	have, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v (run %s to write it)", err, regen)
	}
	if !bytes.Equal(have, want) {
		tb.Fatalf("%s differs from what the code computes now (stale or edited): check the change, run %s and review the diff", path, regen)
	}
}
