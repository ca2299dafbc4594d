package kstream_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// A test whose subtests call t.Parallel() calls it too, in every package of the module.
// go test runs a test that does not call it alone: its parallel subtests then run only
// with each other, and every other test of the package waits for them. Fifteen such
// parents once made the root package's tests take 139 s instead of 70. A test that must
// run alone (it measures the whole process) says so with "Not parallel" in a comment of
// its body or its doc comment.
func TestParallelSubtestsHaveParallelParents(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Test") {
				continue
			}
			tv := testingTParam(fn.Type)
			if tv == "" {
				continue
			}
			checked++
			if callsParallel(fn.Body, tv) || !hasParallelSubtest(fn.Body, tv) || saysNotParallel(f, fn) {
				continue
			}
			t.Errorf("%s: %s has subtests that call t.Parallel() but does not call it itself: call it first thing (or, if it must run alone, say \"Not parallel\" and why in a comment)", fset.Position(fn.Pos()), fn.Name.Name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked %d tests: the walk of the module's test files found too few", checked)
	}
}

// testingTParam returns the name of a function's *testing.T parameter, or "".
func testingTParam(ft *ast.FuncType) string {
	for _, p := range ft.Params.List {
		star, ok := p.Type.(*ast.StarExpr)
		if !ok {
			continue
		}
		sel, ok := star.X.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "T" {
			continue
		}
		if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "testing" && len(p.Names) == 1 {
			return p.Names[0].Name
		}
	}
	return ""
}

// callsParallel reports whether body calls tv.Parallel() outside of any function literal.
func callsParallel(body *ast.BlockStmt, tv string) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case *ast.CallExpr:
			found = found || isMethodCall(n, tv, "Parallel")
		}
		return !found
	})
	return found
}

// hasParallelSubtest reports whether body calls tv.Run with a function literal that calls
// Parallel on its own *testing.T.
func hasParallelSubtest(body *ast.BlockStmt, tv string) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || found || !isMethodCall(call, tv, "Run") || len(call.Args) != 2 {
			return !found
		}
		if lit, ok := call.Args[1].(*ast.FuncLit); ok {
			if sub := testingTParam(lit.Type); sub != "" && callsParallel(lit.Body, sub) {
				found = true
			}
		}
		return !found
	})
	return found
}

// isMethodCall reports whether call is recv.method(...).
func isMethodCall(call *ast.CallExpr, recv, method string) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != method {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == recv
}

// saysNotParallel reports whether fn's doc comment or a comment in its body says "Not
// parallel".
func saysNotParallel(f *ast.File, fn *ast.FuncDecl) bool {
	if fn.Doc != nil && strings.Contains(fn.Doc.Text(), "Not parallel") {
		return true
	}
	for _, cg := range f.Comments {
		if cg.Pos() >= fn.Body.Lbrace && cg.End() <= fn.Body.Rbrace && strings.Contains(cg.Text(), "Not parallel") {
			return true
		}
	}
	return false
}
