package layers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// controlPaths are the node-to-node HTTP paths, which only the cluster's
// wing (ctxstore/cluster/control) serves and calls: a string literal under
// gateway/ equal to one, or inside /v1/cluster/internal/, breaks the rule
// that the gateway keeps only client- and operator-facing surfaces.
const (
	controlPrefix = "/v1/cluster/internal/"
	controlJoin   = "/v1/cluster/join"
)

// controlPathLiterals returns "file:line: literal" for each string literal
// of src that names a control path (with or without a method pattern).
func controlPathLiterals(fset *token.FileSet, name string, src any) ([]string, error) {
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		v, err := strconv.Unquote(lit.Value)
		if err != nil {
			return true
		}
		path := v
		if i := strings.LastIndexByte(v, ' '); i >= 0 {
			path = v[i+1:] // "POST /v1/cluster/join"
		}
		if strings.Contains(v, controlPrefix) || path == controlJoin || strings.HasPrefix(path, controlJoin+"?") {
			out = append(out, fset.Position(lit.Pos()).String()+": "+lit.Value)
		}
		return true
	})
	return out, nil
}

// TestControlPathsOutsideGateway: no package under gateway/ names a
// node-to-node control path, so none serves or calls join, propose,
// read-index, session end or traffic itself: they are
// ctxstore/cluster/control's (its Path constants), and the cluster API
// reaches them only through that package. Test files are exempt (a test
// may check the mux routes such a path elsewhere).
func TestControlPathsOutsideGateway(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root %s: %v", root, err)
	}
	fset := token.NewFileSet()
	files := 0
	err = filepath.WalkDir(filepath.Join(root, "gateway"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		files++
		found, err := controlPathLiterals(fset, p, nil)
		if err != nil {
			return err
		}
		for _, f := range found {
			t.Errorf("%s: a control path under gateway/ (use ctxstore/cluster/control)", f)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 20 {
		t.Fatalf("walked %d Go files under gateway/: not the repository's", files)
	}
}

// TestControlPathLiteralsFires runs the rule on made-up sources.
func TestControlPathLiteralsFires(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      int
	}{
		{"clean", `package x; const p = "/v1/cluster/status"`, 0},
		{"a comment is no literal", "package x\n// POST /v1/cluster/join\nvar _ = 1", 0},
		{"join", `package x; const p = "/v1/cluster/join"`, 1},
		{"join route", "package x; var p = `POST /v1/cluster/join`", 1},
		{"internal", `package x; func f() { g("/v1/cluster/internal/propose") }; func g(string) {}`, 1},
		{"internal prefix", `package x; var p = "http://" + "h" + "/v1/cluster/internal/"`, 1},
		{"joins", `package x; const p = "/v1/cluster/joins"`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := controlPathLiterals(token.NewFileSet(), "x.go", tc.src)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.want {
				t.Fatalf("found %q, want %d", got, tc.want)
			}
		})
	}
}
