package dl

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestOnlyLoader keeps this package the one purego loader: no other package of the module
// imports purego.
func TestOnlyLoader(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	self, _ := filepath.Abs(".")
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || filepath.Dir(path) == self {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			if strings.Contains(imp.Path.Value, "ebitengine/purego") {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s imports purego: load libraries through internal/dl", rel)
			}
		}
		return nil
	})
	if err != nil || checked < 100 {
		t.Fatalf("walked %d Go files of %s: %v", checked, root, err)
	}
}
