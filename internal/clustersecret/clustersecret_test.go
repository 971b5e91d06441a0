package clustersecret

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ctxtier/ctxtier/ctxstore/block"
)

func TestGenerateValid(t *testing.T) {
	a, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Generate()
	if a == b {
		t.Fatal("two secrets are equal")
	}
	if err := Validate(a); err != nil {
		t.Fatal(err)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		s  string
		ok bool
	}{
		{"0123456789abcdef", true},
		{"0123456789abcde", false},
		{"0123456789 abcdef", false},
		{"0123456789abcdef\n", false},
		{string(bytes.Repeat([]byte("a"), MaxLen)), true},
		{string(bytes.Repeat([]byte("a"), MaxLen+1)), false},
	} {
		if err := Validate(tc.s); (err == nil) != tc.ok {
			t.Errorf("Validate(%q) = %v, want ok %v", tc.s, err, tc.ok)
		} else if err != nil && !errors.Is(err, block.ErrInvalidArgument) {
			t.Errorf("Validate(%q) = %v, want ErrInvalidArgument", tc.s, err)
		}
	}
}

func TestSaveLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	if _, err := Load(path); !errors.Is(err, ErrMissing) {
		t.Fatalf("missing file: %v", err)
	}
	if err := Save(path, "short"); err == nil {
		t.Fatal("saved an invalid secret")
	}
	if err := Save(path, "0123456789abcdefXYZ"); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v %v, want 0600", st.Mode().Perm(), err)
	}
	if s, err := Load(path); err != nil || s != "0123456789abcdefXYZ" {
		t.Fatalf("load %q %v", s, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil {
		t.Fatal("loaded a world-readable secret file")
	}
}

func TestResolve(t *testing.T) {
	const s1, s2 = "first-secret-0123456789", "second-secret-0123456789"
	for _, tc := range []struct {
		name        string
		kept, given string
		mayCreate   bool
		want        string // "" with wantErr; "new" for a generated one
		wantErr     error
	}{
		{name: "bootstrap creates", mayCreate: true, want: "new"},
		{name: "joiner without secret", wantErr: ErrMissing},
		{name: "joiner given", given: s1, want: s1},
		{name: "restart keeps", kept: s1, want: s1},
		{name: "restart same given", kept: s1, given: s1, want: s1},
		{name: "restart other given", kept: s1, given: s2, wantErr: block.ErrInvalidArgument},
		{name: "bootstrap given", given: s2, mayCreate: true, want: s2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.kept != "" {
				if err := Save(filepath.Join(dir, FileName), tc.kept); err != nil {
					t.Fatal(err)
				}
			}
			got, created, err := Resolve(tc.given, dir, tc.mayCreate)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if created != (tc.want == "new") {
				t.Fatalf("created %v", created)
			}
			if tc.want != "new" && got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			kept, err := Load(filepath.Join(dir, FileName))
			if err != nil || kept != got {
				t.Fatalf("kept %q %v, want %q", kept, err, got)
			}
			// A second start with nothing given finds the same secret.
			again, created, err := Resolve("", dir, tc.mayCreate)
			if err != nil || again != got || created {
				t.Fatalf("restart: %q %v %v", again, created, err)
			}
		})
	}
}

func TestSealingKey(t *testing.T) {
	a, err := SealingKey("0123456789abcdef")
	if err != nil || len(a) != 32 {
		t.Fatalf("%d %v", len(a), err)
	}
	b, _ := SealingKey("0123456789abcdef")
	c, _ := SealingKey("0123456789abcdeg")
	if !bytes.Equal(a, b) || bytes.Equal(a, c) {
		t.Fatal("sealing key is not a function of the secret")
	}
}
