package kstream_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// outsideRefs are the ways a document could point outside the repository: to the notes
// the project was planned in, or to the machine it was written on.
var outsideRefs = []string{"../shared", "/work/", "DESIGN.md"}

// TestDocsIndex checks that the README's documentation index lists every page of docs/.
func TestDocsIndex(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no docs/*.md found")
	}
	for _, p := range pages {
		if !strings.Contains(string(readme), "`"+filepath.ToSlash(p)+"`") {
			t.Errorf("README.md does not list %s", p)
		}
	}
}

// TestDocsStayInRepository checks that the README, the pages of docs/ and the package doc
// comments do not point outside the repository.
func TestDocsStayInRepository(t *testing.T) {
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]string{}
	for _, f := range append(files, "README.md") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts[f] = string(b)
	}
	fset := token.NewFileSet()
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		if f.Doc != nil {
			texts[path+" (package doc)"] = f.Doc.Text()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(texts) < 10 {
		t.Fatalf("only %d texts found", len(texts))
	}
	for name, text := range texts {
		for _, ref := range outsideRefs {
			if strings.Contains(text, ref) {
				t.Errorf("%s mentions %q, outside the repository", name, ref)
			}
		}
	}
}
