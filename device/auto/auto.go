// Package auto picks the device driver: ROX_DEVICE=auto tries cuda, then hip, then host, and
// reports what it found for each, so that `roxrun info` can say why a GPU was not used.
package auto

import (
	"errors"
	"fmt"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/device/cuda"
	"github.com/roxamen/roxamen/device/hip"
	"github.com/roxamen/roxamen/device/host"
	"github.com/roxamen/roxamen/internal/env"
)

// Probe is what trying one driver found.
type Probe struct {
	Driver string // "cuda", "hip" or "host"
	OK     bool
	Detail string // "2 devices (libcuda.so.1)", "libcuda.so.1 not found", "libamdhip64.so.5 loaded, no AMD device"
}

func (p Probe) String() string {
	if p.OK {
		return p.Driver + ": " + p.Detail
	}
	return p.Driver + ": " + p.Detail + " (not used)"
}

// Order is the order auto tries drivers in.
var Order = []string{"cuda", "hip", "host"}

func driver(name string) device.Driver {
	switch name {
	case "cuda":
		return cuda.New()
	case "hip":
		return hip.New()
	case "host":
		return host.New()
	}
	return nil
}

// probe tries one driver.
func probe(name string) (device.Driver, Probe, error) {
	drv := driver(name)
	n, err := drv.Count()
	p := Probe{Driver: name}
	if err != nil {
		p.Detail = explain(name, err)
		return nil, p, err
	}
	p.OK = true
	switch name {
	case "cuda":
		v, _ := cuda.DriverVersion()
		p.Detail = fmt.Sprintf("%d devices (%s, CUDA %d.%d)", n, cuda.Library, v/1000, v%1000/10)
	case "hip":
		p.Detail = fmt.Sprintf("%d devices (%s)", n, hip.Loaded())
	case "host":
		p.Detail = fmt.Sprintf("%d virtual devices on the CPU", n)
	}
	return drv, p, nil
}

// explain turns a Count error into a short line.
func explain(name string, err error) string {
	switch {
	case name == "cuda" && errors.Is(err, device.ErrNoDriver):
		return cuda.Library + " not found"
	case name == "hip" && errors.Is(err, device.ErrNoDriver):
		return "libamdhip64.so not found"
	case name == "cuda" && errors.Is(err, device.ErrNoDevice):
		return cuda.Library + " loaded, no NVIDIA device (" + cause(err) + ")"
	case name == "hip" && errors.Is(err, device.ErrNoDevice):
		return hip.Loaded() + " loaded, no AMD device (" + cause(err) + ")"
	}
	return err.Error()
}

// cause names the failed call and its native status: "hipInit: hipErrorInvalidDevice (101)".
func cause(err error) string {
	var de *device.Error
	if errors.As(err, &de) && de.Err != nil {
		return de.Call + ": " + de.Err.Error()
	}
	return err.Error()
}

// Pick returns the driver want names (auto|cuda|hip|host; "" is auto) and the probes it made.
// auto returns the first of Order with a device. A named driver without a device is an error
// that wraps the driver's own (ErrNoDriver, ErrNoDevice).
func Pick(want string) (device.Driver, []Probe, error) {
	if want == "" {
		want = "auto"
	}
	if want != "auto" {
		if driver(want) == nil {
			return nil, nil, &device.Error{Call: "choosing a backend", Detail: fmt.Sprintf("ROX_DEVICE=%q: want auto|cuda|hip|host", want), Kind: device.ErrInvalid}
		}
		drv, p, err := probe(want)
		if err != nil {
			return nil, []Probe{p}, fmt.Errorf("backend %s: %w", want, err)
		}
		return drv, []Probe{p}, nil
	}
	var probes []Probe
	for _, name := range Order {
		drv, p, err := probe(name)
		probes = append(probes, p)
		if err == nil {
			return drv, probes, nil
		}
	}
	return nil, probes, &device.Error{Call: "choosing a backend", Detail: "ROX_DEVICE=auto: no driver has a device", Kind: device.ErrNoDevice}
}

// FromEnv is Pick(ROX_DEVICE).
func FromEnv() (device.Driver, []Probe, error) {
	want, err := env.Device.String()
	if err != nil {
		return nil, nil, err
	}
	return Pick(want)
}
