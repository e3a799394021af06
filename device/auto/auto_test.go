package auto

import (
	"errors"
	"strings"
	"testing"

	"github.com/roxamen/roxamen/device"
)

func TestPickHost(t *testing.T) {
	drv, probes, err := Pick("host")
	if err != nil || drv.Name() != "host" || len(probes) != 1 || !probes[0].OK || probes[0].Driver != "host" {
		t.Fatalf("Pick(host) = %v, %v, %v", drv, probes, err)
	}
	if !strings.Contains(probes[0].Detail, "virtual devices") {
		t.Fatalf("host probe detail %q", probes[0].Detail)
	}
}

// TestPickAuto checks the order and that every probe before the chosen one failed with a reason.
func TestPickAuto(t *testing.T) {
	for _, want := range []string{"auto", ""} {
		drv, probes, err := Pick(want)
		if err != nil {
			t.Fatalf("Pick(%q): %v", want, err)
		}
		last := probes[len(probes)-1]
		if !last.OK || last.Driver != drv.Name() {
			t.Fatalf("Pick(%q) chose %s but the last probe is %+v", want, drv.Name(), last)
		}
		for i, p := range probes {
			if p.Driver != Order[i] {
				t.Fatalf("probe %d is %s, want %s (order %v)", i, p.Driver, Order[i], Order)
			}
			if i < len(probes)-1 && (p.OK || p.Detail == "") {
				t.Fatalf("probe %+v before the chosen driver did not fail with a reason", p)
			}
		}
		for _, p := range probes {
			t.Log(p)
		}
	}
}

// TestPickNamed: a named GPU driver without a device is an error that keeps the driver's reason.
func TestPickNamed(t *testing.T) {
	for _, name := range []string{"cuda", "hip"} {
		drv, probes, err := Pick(name)
		if len(probes) != 1 || probes[0].Driver != name {
			t.Fatalf("Pick(%s) probes %v", name, probes)
		}
		if err == nil {
			if drv.Name() != name || !probes[0].OK {
				t.Fatalf("Pick(%s) = %s, %v", name, drv.Name(), probes)
			}
			continue
		}
		if !errors.Is(err, device.ErrNoDriver) && !errors.Is(err, device.ErrNoDevice) {
			t.Fatalf("Pick(%s) error %v is neither ErrNoDriver nor ErrNoDevice", name, err)
		}
		if probes[0].OK || !strings.Contains(probes[0].Detail, "lib") || !strings.Contains(err.Error(), name) {
			t.Fatalf("Pick(%s): probe %+v, error %v", name, probes[0], err)
		}
		if errors.Is(err, device.ErrNoDriver) && !strings.HasSuffix(probes[0].Detail, "not found") {
			t.Fatalf("Pick(%s) detail %q", name, probes[0].Detail)
		}
		if errors.Is(err, device.ErrNoDevice) && !strings.Contains(probes[0].Detail, "loaded, no") {
			t.Fatalf("Pick(%s) detail %q", name, probes[0].Detail)
		}
	}
}

func TestPickBad(t *testing.T) {
	_, _, err := Pick("tpu")
	if !errors.Is(err, device.ErrInvalid) || !strings.Contains(err.Error(), `"tpu"`) {
		t.Fatalf("Pick(tpu) = %v", err)
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv("ROX_DEVICE", "host")
	drv, _, err := FromEnv()
	if err != nil || drv.Name() != "host" {
		t.Fatalf("FromEnv with ROX_DEVICE=host = %v, %v", drv, err)
	}
	t.Setenv("ROX_DEVICE", "gpu")
	if _, _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), "ROX_DEVICE") {
		t.Fatalf("FromEnv with ROX_DEVICE=gpu = %v", err)
	}
}
