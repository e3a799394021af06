package shmem

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/roxamen/roxamen/device"
)

// On the host backend code objects and stream-ordered operations are refused with an error that
// says why, and Device addresses are the host addresses of the heap.
func TestModulesNeedAGPU(t *testing.T) {
	job(t, 1, func(w *World) error {
		if w.Device().Driver != "host" {
			t.Skip("runs on the host backend")
		}
		_, err := w.LoadModule([]byte("anything"))
		if !errors.Is(err, ErrBadArgument) || !errors.Is(err, device.ErrNotSupported) {
			t.Errorf("LoadModule on the host backend = %v, want ErrBadArgument and device.ErrNotSupported", err)
		}
		s, err := Alloc[uint64](w, 4)
		if err != nil {
			return err
		}
		if got, want := uintptr(s.Device()), uintptr(unsafe.Pointer(&s.Local()[0])); got != want {
			t.Errorf("Sym.Device() = %#x, want the host address %#x", got, want)
		}
		if s.Mem().Device() != s.Device() {
			t.Errorf("Mem.Device() = %#x, Sym.Device() = %#x", s.Mem().Device(), s.Device())
		}
		err = PutOnStream[uint64](nil, s, 0, 0, 1, 0)
		if !errors.Is(err, ErrBadArgument) {
			t.Errorf("PutOnStream on the host backend = %v, want ErrBadArgument", err)
		}
		if err := w.QuietOnStream(nil); !errors.Is(err, ErrBadArgument) {
			t.Errorf("QuietOnStream on the host backend = %v, want ErrBadArgument", err)
		}
		return nil
	})
}
