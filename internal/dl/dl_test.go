package dl

import (
	"errors"
	"strings"
	"testing"
)

// TestOpenNamesEveryFile: no candidate loads, and the error names each one tried.
func TestOpenNamesEveryFile(t *testing.T) {
	_, err := Open("libroxamen-missing-a.so", "/nonexistent/libroxamen-missing-b.so")
	var oe *OpenError
	if !errors.As(err, &oe) || !strings.Contains(err.Error(), "libroxamen-missing-a.so") ||
		!strings.Contains(err.Error(), "/nonexistent/libroxamen-missing-b.so") {
		t.Fatalf("Open: %v: want an *OpenError naming both files", err)
	}
}

// TestBind binds libc's strlen through a C string, leaves an absent optional symbol nil, and
// refuses an absent required one without binding anything.
func TestBind(t *testing.T) {
	l, err := Open("libroxamen-missing.so", "libc.so.6")
	if err != nil {
		t.Fatal(err)
	}
	if l.Path != "libc.so.6" {
		t.Fatalf("Path %q", l.Path)
	}
	var strlen, absent, other func(*byte) uint64
	var bound string
	if err := l.Bind(Sym{Name: "roxamen_no_such|strlen", Fn: &strlen, Bound: &bound},
		Sym{Name: "roxamen_no_such", Fn: &absent, Optional: true}); err != nil {
		t.Fatal(err)
	}
	if bound != "strlen" || absent != nil {
		t.Fatalf("bound %q, optional bound %v", bound, absent != nil)
	}
	if n := strlen(CString("symmetric")); n != 9 {
		t.Fatalf("strlen = %d", n)
	}
	err = l.Bind(Sym{Name: "strlen", Fn: &other}, Sym{Name: "roxamen_no_such", Fn: &absent})
	var se *SymbolError
	if !errors.As(err, &se) || se.Name != "roxamen_no_such" || other != nil {
		t.Fatalf("Bind: %v (strlen bound: %v): want a *SymbolError and nothing bound", err, other != nil)
	}
}

func TestStrings(t *testing.T) {
	if s := GoString(CString("heap")); s != "heap" {
		t.Errorf("GoString(CString) = %q", s)
	}
	if GoString(nil) != "" || FixedString([]byte("pe\x00junk")) != "pe" || FixedString([]byte("full")) != "full" {
		t.Error("nil or fixed-buffer conversion")
	}
	b := []byte("abc")
	if g := GoBytes(&b[0], 2); string(g) != "ab" || GoBytes(nil, 3) != nil {
		t.Errorf("GoBytes = %q", g)
	}
}
