package gpudrv_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/device/cuda"
	"github.com/roxamen/roxamen/device/hip"
	"github.com/roxamen/roxamen/device/internal/gpudrv"
	"github.com/roxamen/roxamen/internal/testkit"
)

// vendors are the two tables over the one implementation, as their packages export them.
var vendors = []struct {
	name    string
	drv     device.Driver
	libs    []string
	version func() (int, error)
	env     string // set where a device of this vendor must be usable
	maker   string
}{
	{"cuda", cuda.New(), []string{cuda.Library}, cuda.DriverVersion, testkit.GPU, "NVIDIA"},
	{"hip", hip.New(), hip.Libraries, hip.RuntimeVersion, "ROX_TEST_HIP", "AMD"},
}

// TestAbsentOrPresent: without the vendor's library (libcuda.so.1 in CI) every entry point
// reports ErrNoDriver naming the files tried; with it (Debian's libamdhip64.so.5 in CI) but no
// device, ErrNoDevice naming the failed call, which binding every symbol must have preceded.
// Never a panic. A machine with a device skips: the GPU tests cover it.
func TestAbsentOrPresent(t *testing.T) {
	for _, v := range vendors {
		t.Run(v.name, func(t *testing.T) {
			if got := v.drv.Name(); got != v.name {
				t.Fatalf("Name() = %q", got)
			}
			dr := v.drv.(*gpudrv.Driver)
			n, err := v.drv.Count()
			if err == nil {
				if n <= 0 {
					t.Fatalf("Count() = %d with no error", n)
				}
				t.Skipf("%s reports %d devices: the GPU tests cover it", dr.Loaded(), n)
			}
			t.Logf("Count(): %v", err)
			var de *device.Error
			if !errors.As(err, &de) {
				t.Fatalf("Count() error %T (%v) is not a *device.Error", err, err)
			}
			switch {
			case errors.Is(err, device.ErrNoDriver):
				if dr.Loaded() != "" {
					t.Fatalf("ErrNoDriver but %s loaded", dr.Loaded())
				}
				for _, lib := range v.libs {
					if !strings.Contains(err.Error(), lib) {
						t.Fatalf("error %q does not name %s", err, lib)
					}
				}
			case errors.Is(err, device.ErrNoDevice):
				if dr.Loaded() == "" {
					t.Fatal("ErrNoDevice but no library loaded")
				}
				// Init ran, so every symbol of the table was found in the library.
				for _, want := range []string{dr.Loaded(), "no " + v.maker + " device"} {
					if !strings.Contains(err.Error(), want) {
						t.Fatalf("error %q does not say %q", err, want)
					}
				}
				if de.Err == nil || !strings.HasPrefix(de.Call, v.name[:2]) {
					t.Fatalf("error %q does not name the vendor's call and status", err)
				}
			default:
				t.Fatalf("Count() error %v is neither ErrNoDriver nor ErrNoDevice", err)
			}
			if _, err2 := v.drv.Open(0); err2 == nil || err2.Error() != err.Error() {
				t.Fatalf("Open(0) = %v, want the same error as Count: %v", err2, err)
			}
			if _, err2 := v.version(); err2 == nil {
				t.Fatal("the version call succeeded without a usable library")
			}
			if testkit.Required(v.env) {
				t.Fatalf("%s is set but there is no usable %s device: %v", v.env, v.maker, err)
			}
		})
	}
}

// TestResult: a failed call is a *device.Error that names the call, its arguments and the
// status by the vendor's name, and matches the vendor's status value and the device sentinel,
// never the other vendor's value of the same number.
func TestResult(t *testing.T) {
	cases := []struct {
		drv    device.Driver
		status error // the vendor's exported value
		other  error // the other vendor's value of the same number
		op     string
		name   string
		kind   error
	}{
		{cuda.New(), cuda.ErrorInvalidValue, hip.ErrorInvalidValue, "cuMemAlloc_v2", "CUDA_ERROR_INVALID_VALUE", device.ErrInvalid},
		{cuda.New(), cuda.ErrorNoDevice, hip.ErrorNoDevice, "cuInit", "CUDA_ERROR_NO_DEVICE", device.ErrNoDevice},
		{cuda.New(), cuda.ErrorNotReady, hip.ErrorNotReady, "cuStreamQuery", "CUDA_ERROR_NOT_READY", device.ErrNotReady},
		{cuda.New(), cuda.ErrorNotSupported, hip.ErrorNotSupported, "cuMemAlloc_v2", "CUDA_ERROR_NOT_SUPPORTED", device.ErrNotSupported},
		{cuda.New(), cuda.ErrorOutOfMemory, hip.ErrorOutOfMemory, "cuMemAlloc_v2", "CUDA_ERROR_OUT_OF_MEMORY", nil},
		{hip.New(), hip.ErrorInvalidValue, cuda.ErrorInvalidValue, "hipMalloc", "hipErrorInvalidValue", device.ErrInvalid},
		{hip.New(), hip.ErrorNoDevice, cuda.ErrorNoDevice, "hipInit", "hipErrorNoDevice", device.ErrNoDevice},
		{hip.New(), hip.ErrorInvalidDevice, cuda.ErrorInvalidDevice, "hipInit", "hipErrorInvalidDevice", device.ErrNoDevice},
		{hip.New(), hip.ErrorNotReady, cuda.ErrorNotReady, "hipStreamQuery", "hipErrorNotReady", device.ErrNotReady},
		{hip.New(), hip.ErrorNotSupported, cuda.ErrorNotSupported, "hipMalloc", "hipErrorNotSupported", device.ErrNotSupported},
	}
	for _, c := range cases {
		dr := c.drv.(*gpudrv.Driver)
		if dr.Check(c.op, 0, "") != nil {
			t.Fatalf("%s: Check of status 0 is an error", c.drv.Name())
		}
		code := statusCode(c.status)
		err := dr.Check(c.op, code, "size=0")
		if !errors.Is(err, c.status) || errors.Is(err, c.other) || (c.kind != nil && !errors.Is(err, c.kind)) {
			t.Errorf("%v: errors.Is wrong for %v / %v (not %T)", err, c.status, c.kind, c.other)
		}
		if c.kind == nil && errors.Is(err, device.ErrInvalid) {
			t.Errorf("%v matches ErrInvalid", err)
		}
		for _, want := range []string{c.op, "size=0", c.name} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q lacks %q", err, want)
			}
		}
	}
	if s := cuda.Result(12345).Error(); !strings.Contains(s, "12345") {
		t.Errorf("unknown CUresult prints %q", s)
	}
	if s := hip.Result(12345).Error(); !strings.Contains(s, "hipError_t(12345)") {
		t.Errorf("unknown hipError_t prints %q", s)
	}
}

func statusCode(err error) int32 {
	switch r := err.(type) {
	case cuda.Result:
		return int32(r)
	case hip.Result:
		return int32(r)
	}
	panic(err)
}

// TestTableChecked: a vendor table that cannot work is refused when the package initializes,
// naming what is wrong.
func TestTableChecked(t *testing.T) {
	for _, c := range []struct {
		v    gpudrv.Vendor
		want string
	}{
		{gpudrv.Vendor{Name: "x", Maker: "X", Libraries: []string{"libx.so"}, Context: gpudrv.CurrentDevice}, "exactly one of the pair"},
		{gpudrv.Vendor{Name: "x"}, "a context model"},
	} {
		func() {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, c.want) || !strings.Contains(s, `"x"`) {
					t.Errorf("New(%+v) panicked with %v, want %q", c.v, r, c.want)
				}
			}()
			gpudrv.New(c.v)
		}()
	}
}
