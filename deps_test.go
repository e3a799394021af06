// Package roxamen holds, at the module's root, only the test that keeps its layers: imports point
// down, the commands import no test or example, the memory model and the heap allocator stand on
// the standard library alone, and cgo stays in capi. The layers are written once, in the table
// below; ARCHITECTURE.md draws them.
package roxamen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/roxamen/roxamen"

// A layer is a set of the module's packages. A package may import packages of its own layer and
// of lower ones; an import of a higher layer fails the test.
type layer struct {
	name string
	// pkgs are paths relative to the module: "shmem" is that package only, "shmem/internal/..."
	// every package below it, "device/..." device and every package below it.
	pkgs []string
}

// layers are the module's layers, lowest first. A package that none of them holds fails the test:
// place it here, in the lowest layer whose packages it may import.
var layers = []layer{
	// The memory model and the symmetric heap allocator: checked on their own, they import the
	// standard library only (a rule of its own).
	{"model", []string{"memmodel", "symheap"}},
	// The low level: knobs, rendezvous, PMIx, log rate limits, units, the runtime's test seam, the
	// vector loops, the one error shape, the one C-library loader, the tests' gates, the CUDA MPS log reader.
	// Nothing of the runtime; every layer above may use them. Each package is named: internal/ is
	// where a tool that imports the runtime must not land unnoticed.
	{"base", []string{"internal/env", "internal/units", "internal/ratelog", "internal/pmix", "internal/bootstrap/...", "internal/seam", "internal/simd", "internal/errs", "internal/dl/...", "internal/testkit", "internal/mpslog"}},
	// The drivers under the runtime: GPUs (device), transports and the proxy's ring (nic), device
	// code (kernels). None knows SHMEM's semantics.
	{"drivers", []string{"device/...", "kernels/...", "nic/..."}},
	// The runtime: shmem's API and the engines it is built of (collectives, the GPU runtime).
	{"runtime", []string{"shmem", "shmem/internal/..."}},
	// Libraries over shmem's API: expert-parallel dispatch/combine, the tensor-parallel GEMM.
	{"libraries", []string{"shmem/ep/...", "shmem/tp/..."}},
	// The tools above the runtime: the job launcher, the litmus runner, the benchmark suites and
	// the comparison programs, the CLI's shared parts. Commands and tests use them; the runtime's
	// tests may too (test imports are not layered).
	{"tools", []string{"tools/..."}},
	// What people run or link: the roxrun command, the C API, the examples and the system tests.
	// Nothing imports them (and cmd/ imports no test/ or examples/ package, a rule of its own).
	// "." is the module's root, which holds this test only.
	{"programs", []string{"cmd/...", "capi", "examples/...", "test/...", "."}},
}

// cgoPackage is the one package that may use cgo: the C API, built with -buildmode=c-shared.
// Everything else binds native libraries with purego and builds with CGO_ENABLED=0.
const cgoPackage = "capi"

// pkg is what the rules read of one package of the module (paths relative to the module, other
// modules' and the standard library's as they are).
type pkg struct {
	path        string
	imports     []string // of its non-test files
	testImports []string // of its _test.go files, both packages
	deps        []string // every package its non-test files depend on, transitively
	cgoFiles    []string // files that import "C", under any build constraint
}

// where returns the index of the layer holding path, or -1.
func where(path string) int {
	for i, l := range layers {
		for _, p := range l.pkgs {
			if p == path {
				return i
			}
			if root, ok := strings.CutSuffix(p, "/..."); ok && (path == root || strings.HasPrefix(path, root+"/")) {
				return i
			}
		}
	}
	return -1
}

func describe(i int) string { return fmt.Sprintf("layer %d, %s", i, layers[i].name) }

func standard(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".") && path != "C"
}

// check returns every broken rule of the graph, one message each.
func check(graph []pkg) []string {
	var errs []string
	known := map[string]bool{}
	for _, p := range graph {
		known[p.path] = true
	}
	for _, p := range graph {
		from := where(p.path)
		if from < 0 {
			errs = append(errs, fmt.Sprintf("%s is in no layer: place it in the table of deps_test.go (the lowest layer whose packages it may import)", p.path))
			continue
		}
		for _, imp := range p.imports {
			if !known[imp] {
				continue // the standard library, another module, or "C" (rule cgo)
			}
			if to := where(imp); to > from {
				errs = append(errs, fmt.Sprintf("%s (%s) imports %s (%s): imports point down", p.path, describe(from), imp, describe(to)))
			}
		}
		if strings.HasPrefix(p.path, "cmd/") {
			for _, imp := range append(slices.Clone(p.imports), p.testImports...) {
				if imp == "test" || imp == "examples" || strings.HasPrefix(imp, "test/") || strings.HasPrefix(imp, "examples/") {
					errs = append(errs, fmt.Sprintf("%s (%s) imports %s (%s): a command imports no test or example; move what it needs to tools/", p.path, describe(from), imp, layerOf(imp)))
				}
			}
		}
		if p.path == "memmodel" || p.path == "symheap" {
			for _, d := range p.deps {
				if known[d] || !standard(d) {
					errs = append(errs, fmt.Sprintf("%s (%s) depends on %s (%s): memmodel and symheap use the standard library only", p.path, describe(from), d, layerOf(d)))
				}
			}
		}
		if len(p.cgoFiles) > 0 && p.path != cgoPackage {
			errs = append(errs, fmt.Sprintf("%s (%s) uses cgo in %s: only %s may", p.path, describe(from), strings.Join(p.cgoFiles, ", "), cgoPackage))
		}
	}
	for _, l := range layers {
		for _, p := range l.pkgs {
			if !strings.HasSuffix(p, "/...") && !known[p] {
				errs = append(errs, fmt.Sprintf("the table of deps_test.go names %s (layer %s), which is no package of the module: remove it", p, l.name))
			}
		}
	}
	return errs
}

func layerOf(path string) string {
	if i := where(path); i >= 0 {
		return describe(i)
	}
	if standard(path) {
		return "standard library"
	}
	return "another module"
}

// TestLayers lists the module's packages as a cgo build sees them and checks every rule on them.
func TestLayers(t *testing.T) {
	graph := moduleGraph(t)
	if len(graph) < 20 {
		t.Fatalf("go list saw only %d packages", len(graph))
	}
	for _, e := range check(graph) {
		t.Error(e)
	}
	if p := graph[slices.IndexFunc(graph, func(p pkg) bool { return p.path == cgoPackage })]; len(p.cgoFiles) == 0 {
		t.Errorf("%s imports \"C\" in none of its files: this test would no longer see cgo at all", cgoPackage)
	}
}

// TestPureGoBuild lists every package the module builds with under CGO_ENABLED=0, its tests and
// other modules' packages included, and fails on cgo files or on runtime/cgo (purego stands in
// for it with its own fakecgo).
func TestPureGoBuild(t *testing.T) {
	var all []struct {
		ImportPath string
		CgoFiles   []string
	}
	goList(t, "0", []string{"-deps", "-test"}, func(d *json.Decoder) error {
		var p struct {
			ImportPath string
			CgoFiles   []string
		}
		err := d.Decode(&p)
		all = append(all, p)
		return err
	})
	if len(all) < 50 {
		t.Fatalf("go list saw only %d packages", len(all))
	}
	for _, p := range all {
		if len(p.CgoFiles) > 0 {
			t.Errorf("package %s uses cgo: %s (CGO_ENABLED=0 builds no cgo file)", p.ImportPath, strings.Join(p.CgoFiles, ", "))
		}
		if p.ImportPath == "runtime/cgo" {
			t.Errorf("runtime/cgo is in the build")
		}
	}
}

// moduleGraph lists the module's packages (CGO_ENABLED=1, so that capi's cgo files count) and
// adds, as cgo files, every .go file that imports "C" under a build constraint go list skips.
func moduleGraph(t *testing.T) []pkg {
	var graph []pkg
	goList(t, "1", nil, func(d *json.Decoder) error {
		var p struct {
			ImportPath                         string
			Imports, TestImports, XTestImports []string
			Deps, CgoFiles                     []string
			Error                              *struct{ Err string }
		}
		if err := d.Decode(&p); err != nil {
			return err
		}
		if p.Error != nil && !strings.Contains(p.Error.Err, "build constraints exclude all Go files") {
			return fmt.Errorf("%s: %s", p.ImportPath, p.Error.Err)
		}
		g := pkg{path: rel(p.ImportPath), cgoFiles: p.CgoFiles}
		for _, i := range p.Imports {
			g.imports = append(g.imports, rel(i))
		}
		for _, i := range append(p.TestImports, p.XTestImports...) {
			if i != p.ImportPath {
				g.testImports = append(g.testImports, rel(i))
			}
		}
		for _, i := range p.Deps {
			g.deps = append(g.deps, rel(i))
		}
		graph = append(graph, g)
		return nil
	})
	cgo := importsC(t)
	for i := range graph {
		for _, f := range cgo[graph[i].path] {
			if !slices.Contains(graph[i].cgoFiles, f) {
				graph[i].cgoFiles = append(graph[i].cgoFiles, f)
			}
		}
		delete(cgo, graph[i].path)
	}
	for dir, files := range cgo { // a directory whose every file go list skips
		graph = append(graph, pkg{path: dir, cgoFiles: files})
	}
	return graph
}

func rel(path string) string {
	if path == module {
		return "."
	}
	if r, ok := strings.CutPrefix(path, module+"/"); ok {
		return r
	}
	return path
}

// goList runs go list -e -json with CGO_ENABLED=cgo over the module and decodes its objects.
func goList(t *testing.T, cgo string, flags []string, decode func(*json.Decoder) error) {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found")
	}
	cmd := exec.Command(gobin, append(append([]string{"list", "-e", "-json"}, flags...), "./...")...)
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED="+cgo)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, stderr.Bytes())
	}
	d := json.NewDecoder(bytes.NewReader(out))
	for {
		if err := decode(d); err == io.EOF {
			return
		} else if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
	}
}

// importsC parses every .go file of the module, whatever its build constraints, and returns the
// files that import "C" by directory.
func importsC(t *testing.T) map[string][]string {
	found := map[string][]string{}
	files := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && strings.HasPrefix(d.Name(), ".") {
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
		for _, imp := range f.Imports {
			if imp.Path.Value == `"C"` {
				dir := filepath.ToSlash(filepath.Dir(path))
				found[dir] = append(found[dir], filepath.Base(path))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("found only %d .go files", files)
	}
	return found
}

// The rules fail on a graph that breaks them, each with a message naming both packages and both
// layers; a graph that keeps them passes.
func TestLayersCatchBadGraph(t *testing.T) {
	good := []pkg{
		{path: "."},
		{path: "memmodel", deps: []string{"fmt", "strings"}},
		{path: "symheap", deps: []string{"sort"}},
		{path: "internal/env"},
		{path: "internal/bootstrap", imports: []string{"internal/env"}},
		{path: "internal/units"}, {path: "internal/ratelog"}, {path: "internal/pmix"}, {path: "internal/seam"}, {path: "internal/simd"},
		{path: "internal/errs"}, {path: "internal/dl"}, {path: "internal/testkit"}, {path: "internal/mpslog"},
		{path: "nic", imports: []string{"internal/env"}},
		{path: "shmem", imports: []string{"nic", "internal/seam", "symheap"}, testImports: []string{"tools/launch"}},
		{path: "shmem/internal/coll", imports: []string{"nic"}},
		{path: "shmem/ep", imports: []string{"shmem"}},
		{path: "tools/launch", imports: []string{"internal/bootstrap"}},
		{path: "cmd/roxrun", imports: []string{"tools/launch", "shmem/ep"}},
		{path: "capi", imports: []string{"shmem/ep"}, cgoFiles: []string{"export.go"}},
		{path: "test/soak", imports: []string{"tools/launch"}},
	}
	if errs := check(good); len(errs) > 0 {
		t.Fatalf("a graph that keeps the rules fails them:\n%s", strings.Join(errs, "\n"))
	}
	bad := []struct {
		change func([]pkg) []pkg
		want   string
	}{
		{func(g []pkg) []pkg { return with(g, "shmem", "tools/launch") },
			"shmem (layer 3, runtime) imports tools/launch (layer 5, tools): imports point down"},
		{func(g []pkg) []pkg { return with(g, "internal/env", "shmem") },
			"internal/env (layer 1, base) imports shmem (layer 3, runtime)"},
		{func(g []pkg) []pkg { return with(g, "nic", "shmem/internal/coll") },
			"nic (layer 2, drivers) imports shmem/internal/coll (layer 3, runtime)"},
		{func(g []pkg) []pkg { return with(g, "cmd/roxrun", "test/soak") },
			"cmd/roxrun (layer 6, programs) imports test/soak (layer 6, programs): a command imports no test or example"},
		{func(g []pkg) []pkg {
			g = append(g, pkg{path: "examples/gemm"})
			for i := range g {
				if g[i].path == "cmd/roxrun" {
					g[i].testImports = append(g[i].testImports, "examples/gemm")
				}
			}
			return g
		}, "cmd/roxrun (layer 6, programs) imports examples/gemm (layer 6, programs)"},
		{func(g []pkg) []pkg {
			for i := range g {
				if g[i].path == "memmodel" {
					g[i].imports = append(g[i].imports, "nic")
					g[i].deps = append(g[i].deps, "nic", "internal/env")
				}
			}
			return g
		}, "memmodel (layer 0, model) depends on nic (layer 2, drivers): memmodel and symheap use the standard library only"},
		{func(g []pkg) []pkg {
			for i := range g {
				if g[i].path == "symheap" {
					g[i].deps = append(g[i].deps, "golang.org/x/sys/unix")
				}
			}
			return g
		}, "symheap (layer 0, model) depends on golang.org/x/sys/unix (another module)"},
		{func(g []pkg) []pkg { return append(g, pkg{path: "internal/unplaced"}) },
			"internal/unplaced is in no layer: place it in the table of deps_test.go"},
		{func(g []pkg) []pkg { return append(g, pkg{path: "newroom", imports: []string{"shmem"}}) },
			"newroom is in no layer: place it in the table of deps_test.go"},
		{func(g []pkg) []pkg {
			for i := range g {
				if g[i].path == "nic" {
					g[i].cgoFiles = []string{"ring_cgo.go"}
				}
			}
			return g
		}, "nic (layer 2, drivers) uses cgo in ring_cgo.go: only capi may"},
		{func(g []pkg) []pkg {
			return slices.DeleteFunc(g, func(p pkg) bool { return p.path == "internal/seam" })
		},
			"the table of deps_test.go names internal/seam (layer base), which is no package of the module"},
	}
	for _, c := range bad {
		g := c.change(clone(good))
		errs := check(g)
		if !slices.ContainsFunc(errs, func(e string) bool { return strings.HasPrefix(e, c.want) }) {
			t.Errorf("check passed a broken graph, or said it otherwise; want %q, got:\n%s", c.want, strings.Join(errs, "\n"))
		}
	}
}

// with returns g where from also imports to.
func with(g []pkg, from, to string) []pkg {
	for i := range g {
		if g[i].path == from {
			g[i].imports = append(g[i].imports, to)
		}
	}
	return g
}

func clone(g []pkg) []pkg {
	out := make([]pkg, len(g))
	for i, p := range g {
		out[i] = p
		out[i].imports = slices.Clone(p.imports)
		out[i].testImports = slices.Clone(p.testImports)
		out[i].deps = slices.Clone(p.deps)
		out[i].cgoFiles = slices.Clone(p.cgoFiles)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}
