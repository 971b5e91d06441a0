package sentinels

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// exempt lists the packages (by folder, relative to the repository root)
// whose sentinel messages are wire text and keep it as it is, with why.
var exempt = map[string]string{
	// The store's error vocabulary: its messages are what a client reads
	// after the code ("-ERR too large: ...", {"message":"block not found: ..."}),
	// documented in docs/api.md and docs/resp.md.
	"ctxstore/block": "wire text",
	// The wire's own errors, sent in error frames like the block ones.
	"gateway/errcode": "wire text",
	// Redis's own error texts, which Redis clients match verbatim.
	"gateway/resp": "Redis text",
}

// sentinel is one package-level error variable.
type sentinel struct {
	pos, pkg, name, msg string
	wraps               bool // fmt.Errorf whose format starts with %w
}

func TestSentinelMessagesNameTheirPackage(t *testing.T) {
	root := repoRoot(t)
	found, err := scan(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) < 50 {
		t.Fatalf("found only %d sentinels under %s; the scan is broken", len(found), root)
	}
	seenExempt := map[string]bool{}
	for _, s := range found {
		dir := filepath.ToSlash(filepath.Dir(s.pos[:strings.Index(s.pos, ":")]))
		if _, ok := exempt[dir]; ok {
			seenExempt[dir] = true
			continue
		}
		if s.wraps {
			continue // "%w: ...": starts with the wrapped sentinel's prefix
		}
		if want := s.pkg + ": "; !strings.HasPrefix(s.msg, want) {
			t.Errorf("%s: %s = %q: the message must start with %q", s.pos, s.name, s.msg, want)
		}
	}
	for dir := range exempt {
		if !seenExempt[dir] {
			t.Errorf("exempt package %s has no sentinel any more: drop it from the list", dir)
		}
	}
}

// TestScanFindsEveryForm checks the scanner itself on a package written here.
func TestScanFindsEveryForm(t *testing.T) {
	dir := t.TempDir()
	src := `package demo

import ("errors"; "fmt")

var ErrA = errors.New("demo: a")

var (
	ErrB = fmt.Errorf("b without prefix")
	errC = fmt.Errorf("%w: c", ErrA)
	notAnError = 3
)

func f() error { var ErrLocal = errors.New("local"); return ErrLocal }
`
	if err := os.MkdirAll(filepath.Join(dir, "demo"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "demo", "demo.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := scan(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []sentinel{
		{pkg: "demo", name: "ErrA", msg: "demo: a"},
		{pkg: "demo", name: "ErrB", msg: "b without prefix"},
		{pkg: "demo", name: "errC", msg: "%w: c", wraps: true},
	}
	if len(got) != len(want) {
		t.Fatalf("scan found %d sentinels, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		g.pos = ""
		if g != w {
			t.Errorf("sentinel %d = %+v, want %+v", i, g, w)
		}
	}
}

// scan parses every non-test Go file under root and returns its
// package-level variables named err*/Err* initialised with errors.New or
// fmt.Errorf and a constant message.
func scan(root string) ([]sentinel, error) {
	var out []sentinel
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		pkg := f.Name.Name
		if pkg == "main" {
			pkg = filepath.Base(filepath.Dir(path)) // cmd/ctxd: "ctxd: ..."
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i >= len(vs.Values) || !(strings.HasPrefix(name.Name, "Err") || strings.HasPrefix(name.Name, "err")) {
						continue
					}
					msg, wraps, ok := message(vs.Values[i])
					if !ok {
						continue
					}
					p := fset.Position(name.Pos())
					out = append(out, sentinel{
						pos: rel + ":" + strconv.Itoa(p.Line), pkg: pkg, name: name.Name, msg: msg, wraps: wraps,
					})
				}
			}
		}
		return nil
	})
	return out, err
}

// message returns the constant message of errors.New("...") or
// fmt.Errorf("...", ...), and whether the latter starts with %w.
func message(e ast.Expr) (msg string, wraps, ok bool) {
	call, isCall := e.(*ast.CallExpr)
	if !isCall || len(call.Args) == 0 {
		return "", false, false
	}
	sel, isSel := call.Fun.(*ast.SelectorExpr)
	if !isSel {
		return "", false, false
	}
	x, isIdent := sel.X.(*ast.Ident)
	if !isIdent || !(x.Name == "errors" && sel.Sel.Name == "New" || x.Name == "fmt" && sel.Sel.Name == "Errorf") {
		return "", false, false
	}
	lit, isLit := call.Args[0].(*ast.BasicLit)
	if !isLit || lit.Kind != token.STRING {
		return "", false, false
	}
	s, err := strconv.Unquote(lit.Value)
	if err != nil {
		return "", false, false
	}
	return s, x.Name == "fmt" && strings.HasPrefix(s, "%w"), true
}

// repoRoot is the repository root: two folders above this file.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("runtime.Caller failed")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}
