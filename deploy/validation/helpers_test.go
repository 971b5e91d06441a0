package validation

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is the directory holding go.mod, found upward from the test's
// working directory (the package directory).
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

func ctxdImage(t *testing.T) Image {
	t.Helper()
	img, err := LoadDockerfile(filepath.Join(repoRoot(t), "deploy/docker/Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// wantError fails unless some error contains want.
func wantError(t *testing.T, errs []error, want string) {
	t.Helper()
	for _, e := range errs {
		if strings.Contains(e.Error(), want) {
			return
		}
	}
	t.Errorf("no error mentions %q; got %d errors: %v", want, len(errs), errs)
}

func noErrors(t *testing.T, errs []error) {
	t.Helper()
	for _, e := range errs {
		t.Error(e)
	}
}
