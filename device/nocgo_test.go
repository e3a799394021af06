package device_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Roxamen binds native libraries with purego only and builds with CGO_ENABLED=0. These tests
// fail when cgo creeps in: in the module's own sources (whatever their build tags) or in
// anything the module's packages build with. The one exception is capi, the C library's export
// layer (built with -buildmode=c-shared): it alone may import "C".

// cgoPackage is the only directory of the module allowed to use cgo.
const cgoPackage = "capi"

// TestNoImportC parses every .go file of the module and fails on import "C".
func TestNoImportC(t *testing.T) {
	root := ".."
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || (strings.HasPrefix(d.Name(), ".") && path != root)) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return nil // not ours to judge here: the build reports syntax errors
		}
		files++
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		for _, imp := range f.Imports {
			if imp.Path.Value == `"C"` && rel != cgoPackage {
				t.Errorf("%s imports \"C\"", path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 10 {
		t.Fatalf("found only %d .go files under %s", files, root)
	}
}

// TestNoCgoDeps lists every package the module builds with under CGO_ENABLED=0 and fails on
// cgo files or on runtime/cgo (purego stands in for it with its own fakecgo).
func TestNoCgoDeps(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found")
	}
	cmd := exec.Command(gobin, "list", "-e", "-deps", "-test", "-f", "{{.ImportPath}}|{{join .CgoFiles \",\"}}", "github.com/roxamen/roxamen/...")
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	pkgs := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, files, _ := strings.Cut(line, "|")
		pkgs++
		if files != "" {
			t.Errorf("package %s uses cgo: %s", path, files)
		}
		if path == "runtime/cgo" {
			t.Errorf("runtime/cgo is in the build")
		}
	}
	if pkgs < 10 {
		t.Fatalf("go list saw only %d packages:\n%s", pkgs, out)
	}
}

// TestCgoOnlyInCapi lists the module's packages as a cgo build sees them and fails on cgo files
// anywhere but capi, and on capi without any (then this test would no longer see cgo at all).
func TestCgoOnlyInCapi(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found")
	}
	cmd := exec.Command(gobin, "list", "-e", "-f", "{{.ImportPath}}|{{join .CgoFiles \",\"}}", "github.com/roxamen/roxamen/...")
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	const capi = "github.com/roxamen/roxamen/" + cgoPackage
	sawCapi := false
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, files, _ := strings.Cut(line, "|")
		switch {
		case path == capi:
			sawCapi = files != ""
		case files != "":
			t.Errorf("package %s uses cgo: %s (only %s may)", path, files, capi)
		}
	}
	if !sawCapi {
		t.Errorf("go list shows no cgo files in %s:\n%s", capi, out)
	}
}
