// Package dl opens C libraries with purego and binds their entry points: the one loader under
// every foreign binding (libpmix, libucp, libhsakmt, libcuda and libamdhip64) and under the tests
// that load a host build of the device library. It owns the search over candidate files (and the
// error naming every file tried), the difference between a required and an optional symbol, and
// the conversions between C and Go strings. No cgo: purego's dlopen and dlsym.
package dl

import (
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Lib is an open library.
type Lib struct {
	Path string // the name that loaded, as it was passed to dlopen
	h    uintptr
}

// OpenError is a library none of whose candidate files loaded.
type OpenError struct {
	Absent []string // files dlopen did not find
	Failed []string // "why" for each file that is there but did not load (dlerror's text)
}

func (e *OpenError) Error() string {
	var parts []string
	if len(e.Absent) > 0 {
		parts = append(parts, "not found: "+strings.Join(e.Absent, ", "))
	}
	return strings.Join(append(parts, e.Failed...), "; ")
}

// SymbolError is a required symbol a library lacks (a library older than the binding).
type SymbolError struct {
	Lib  string
	Name string // the alternatives, "a|b"
}

func (e *SymbolError) Error() string { return e.Lib + " has no " + e.Name }

// Open dlopens the first of names that loads, with RTLD_NOW|RTLD_GLOBAL (a vendor library, whose
// symbols the libraries it loads later may need). None: an *OpenError naming every file tried.
func Open(names ...string) (*Lib, error) { return open(purego.RTLD_NOW|purego.RTLD_GLOBAL, names) }

// OpenLocal is Open with RTLD_LOCAL: for a private copy of a library (one per PE in the host
// harnesses) whose globals must stay its own rather than resolve to another copy's.
func OpenLocal(names ...string) (*Lib, error) { return open(purego.RTLD_NOW|purego.RTLD_LOCAL, names) }

func open(mode int, names []string) (*Lib, error) {
	e := &OpenError{}
	for _, name := range names {
		h, err := purego.Dlopen(name, mode)
		if err == nil {
			return &Lib{Path: name, h: h}, nil
		}
		if strings.Contains(err.Error(), "No such file") {
			e.Absent = append(e.Absent, name)
		} else {
			e.Failed = append(e.Failed, err.Error())
		}
	}
	if len(names) == 0 {
		e.Failed = []string{"no library named"}
	}
	return nil, e
}

// Lookup returns the address of the first of the alternatives names (separated by "|") that the
// library has, and the one found; 0 and "" when it has none.
func (l *Lib) Lookup(names string) (uintptr, string) {
	for n := range strings.SplitSeq(names, "|") {
		if p, err := purego.Dlsym(l.h, n); err == nil && p != 0 {
			return p, n
		}
	}
	return 0, ""
}

// Sym is one entry point to bind: Fn points at a func variable whose type is the C prototype's.
type Sym struct {
	Name     string // the symbol, or alternatives "a|b" tried in order
	Fn       any
	Optional bool // absent: Fn stays nil, and Bind does not fail
	Bound    *string
}

// Bind looks every symbol up and then binds them all; a required symbol missing binds nothing
// and returns a *SymbolError naming it. Where Sym.Bound is set it receives the name that bound
// ("" for an optional symbol absent).
func (l *Lib) Bind(syms ...Sym) error {
	addrs := make([]uintptr, len(syms))
	names := make([]string, len(syms))
	for i, s := range syms {
		addrs[i], names[i] = l.Lookup(s.Name)
		if addrs[i] == 0 && !s.Optional {
			return &SymbolError{Lib: l.Path, Name: s.Name}
		}
	}
	for i, s := range syms {
		if s.Bound != nil {
			*s.Bound = names[i]
		}
		if addrs[i] != 0 {
			purego.RegisterFunc(s.Fn, addrs[i])
		}
	}
	return nil
}

// Func binds the single symbol name into fn (a pointer to a func variable).
func (l *Lib) Func(fn any, name string) error { return l.Bind(Sym{Name: name, Fn: fn}) }

// Map binds a set of symbols, name to func variable, all required.
func (l *Lib) Map(fns map[string]any) error {
	syms := make([]Sym, 0, len(fns))
	for name, fn := range fns {
		syms = append(syms, Sym{Name: name, Fn: fn})
	}
	return l.Bind(syms...)
}

// GoString copies the NUL-terminated C string at p ("" for nil).
func GoString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// CString returns s NUL-terminated in Go memory, for a const char* argument that C does not keep.
func CString(s string) *byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return &b[0]
}

// FixedString returns the string in a fixed-size C char array, up to its first NUL.
func FixedString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// GoBytes copies n bytes of C memory at p (nil for nil or none).
func GoBytes(p *byte, n uint64) []byte {
	if p == nil || n == 0 {
		return nil
	}
	return append([]byte(nil), unsafe.Slice(p, n)...)
}

// OpenCopy loads a private instance of the library at path: a copy named NAME_tag.so in dir,
// opened with RTLD_LOCAL, so that its globals are its own. The host harnesses load one per PE, as
// each PE of a job has its own device library.
func OpenCopy(path, dir, tag string) (*Lib, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cp := filepath.Join(dir, strings.TrimSuffix(filepath.Base(path), ".so")+"_"+tag+".so")
	if err := os.WriteFile(cp, b, 0o755); err != nil {
		return nil, err
	}
	return OpenLocal(cp)
}

// Call calls the C function at fn with integer and pointer arguments and returns its integer
// result: the direct path for calls made per operation, where a bound func's reflection costs
// microseconds.
func Call(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}

// NewCallback returns a C function pointer that calls the Go function fn (purego's callbacks are
// a limited resource: make each once).
func NewCallback(fn any) uintptr { return purego.NewCallback(fn) }
