package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/roxamen/roxamen/shmem"
)

// TestAddressTable runs the pointer-to-allocation table on a 1-PE job: addresses inside an
// allocation map to it, everything else is an error naming the call, the PE and the address.
func TestAddressTable(t *testing.T) {
	t.Setenv("ROX_DEVICE", "host")
	if err := initEnv(); err != nil {
		t.Fatal(err)
	}
	defer finalize()
	a, err := malloc("roxamen_malloc", 64, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := malloc("roxamen_calloc", 8, 4, true)
	if err != nil {
		t.Fatal(err)
	}
	s, err := symAt[int64]("test", b+8, 3)
	if err != nil || s.Len() != 3 {
		t.Fatalf("symAt inside: %v, %d elements", err, s.Len())
	}
	s.Local()[0] = 42
	whole, err := symAt[int64]("test", b, 4)
	if err != nil {
		t.Fatal(err)
	}
	if got := whole.Local()[1]; got != 42 {
		t.Fatalf("the Sym at b+8 is not the memory at b+8: %d", got)
	}
	for _, c := range []struct {
		p    uintptr
		n    int
		kind error
		text string
	}{
		{b + 16, 3, shmem.ErrBounds, "test on PE 0: outside the symmetric allocation: bytes [16, 40) of a 32-byte allocation"},
		{b + 4, 1, shmem.ErrMisaligned, "4 bytes into its allocation"},
		{a - 8, 1, shmem.ErrNotSymmetric, "is not inside a live symmetric allocation"},
		{b + 32, 1, shmem.ErrNotSymmetric, "is not inside a live symmetric allocation"},
	} {
		_, err := symAt[int64]("test", c.p, c.n)
		if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("symAt(%#x, %d) = %v, want %v containing %q", c.p, c.n, err, c.kind, c.text)
		}
	}
	if err := free(b + 8); codeOf(err) != codeNotSymmetric {
		t.Errorf("free inside an allocation: %v", err)
	}
	if err := free(b); err != nil {
		t.Fatal(err)
	}
	if _, err := symAt[int64]("test", b, 1); !errors.Is(err, shmem.ErrNotSymmetric) {
		t.Errorf("a freed allocation is still in the table: %v", err)
	}
	if codeOf(nil) != codeOK || codeOf(errors.New("other")) != codeOther {
		t.Error("codeOf of nil or a foreign error")
	}
}

// TestUniqueEnv checks what an explicit unique id makes the launcher detection see.
func TestUniqueEnv(t *testing.T) {
	t.Setenv("ROX_PE", "3")
	t.Setenv("PMIX_RANK", "3")
	getenv, err := uniqueEnv("abc@10.0.0.1:4000", 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.1",
		"MASTER_PORT": "3999", "ROX_BOOTSTRAP": "abc@10.0.0.1:4000", "ROX_PE": "", "PMIX_RANK": ""} {
		if got := getenv(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	for _, bad := range []struct {
		uid     string
		pe, npe int
	}{{"10.0.0.1:4000", 0, 2}, {"abc@10.0.0.1", 0, 2}, {"abc@10.0.0.1:4000", 2, 2}, {"abc@:4000", 0, 1}} {
		if _, err := uniqueEnv(bad.uid, bad.pe, bad.npe); !errors.Is(err, shmem.ErrBadArgument) {
			t.Errorf("uniqueEnv(%q, %d, %d) = %v, want ErrBadArgument", bad.uid, bad.pe, bad.npe, err)
		}
	}
	id, err := newUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := uniqueEnv(id, 0, 1); err != nil {
		t.Errorf("newUniqueID's %q: %v", id, err)
	}
}
