package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/roxamen/roxamen/device/auto"
	"github.com/roxamen/roxamen/device/hip/kfd"
	"github.com/roxamen/roxamen/internal/bootstrap"
	"github.com/roxamen/roxamen/internal/env"
	"github.com/roxamen/roxamen/nic/ucx"
	"github.com/roxamen/roxamen/shmem"
	"github.com/roxamen/roxamen/tools/bench"
	"github.com/roxamen/roxamen/tools/cli"
	"github.com/roxamen/roxamen/tools/launch"
)

// infoCommand is info's command with its flags.
type infoCommand struct {
	*cli.Command
	scale  *bool
	asJSON *bool
	sf     *bench.ScaleFlags
}

func newInfoCommand() *cli.Command { return newInfoCmd().Command }

func newInfoCmd() infoCommand {
	c := cli.NewCommand("info", "", `
Show the build, the backend roxrun's PEs would pick here and why, which NIC transports
load, and every ROX_* knob with its value; exit 1 when a knob is malformed or the
backend ROX_DEVICE asks for is unusable. With --scale, start a job of -n PEs instead
that talk in --pattern and print what setup cost them: Init's phases (min, mean and
max over the PEs), Init's CPU time, and the transport connections each PE holds.`)
	scale := c.Flags.Bool("scale", false, "run a job and report its setup cost (see -n, --pattern, --timeout)")
	asJSON := c.Flags.Bool("json", false, "print the report as one JSON object, for tools")
	return infoCommand{Command: c, scale: scale, asJSON: asJSON, sf: bench.AddScaleFlags(c.Flags)}
}

func infoMain(args []string, stdout, stderr io.Writer) int {
	ic := newInfoCmd()
	c, scale, sf := ic.Command, ic.scale, ic.sf
	if ok, status := c.Parse(args, stdout, stderr); !ok {
		return status
	}
	if c.Flags.NArg() > 0 {
		return c.Fail(stderr, "unexpected argument %q (info takes none)", c.Flags.Arg(0))
	}
	for _, name := range []string{"n", "pattern", "timeout"} {
		if msg := c.Needs(name, "scale"); msg != "" {
			return c.Fail(stderr, "%s", msg)
		}
	}
	if *scale {
		return bench.Scale(sf, stdout, stderr)
	}
	r := gatherInfo()
	if *ic.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(r)
	} else {
		r.print(stdout)
	}
	if !r.OK {
		return 1
	}
	return 0
}

// infoReport is what `roxrun info` says, for people (print) and tools (--json).
type infoReport struct {
	Version    string      `json:"version"`
	Go         string      `json:"go"`
	Backends   []infoProbe `json:"backends"`
	Backend    string      `json:"backend,omitempty"` // the one PEs would pick; empty when none
	BackendErr string      `json:"backend_error,omitempty"`
	Transports []infoProbe `json:"transports"`
	SDMA       string      `json:"sdma"`
	MPS        string      `json:"mps"` // what a job of 2 PEs on this node would do about CUDA MPS, and why
	Launcher   string      `json:"launcher"`
	Knobs      []infoKnob  `json:"knobs"`
	OK         bool        `json:"ok"` // no knob is malformed and the backend asked for is usable
}

type infoProbe struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

type infoKnob struct {
	Name    string   `json:"name"`
	Value   string   `json:"value"`
	Set     bool     `json:"set"`
	Default string   `json:"default"`
	Type    string   `json:"type"`
	Choices []string `json:"choices,omitempty"`
	Doc     string   `json:"doc"`
	Error   string   `json:"error,omitempty"`
}

func gatherInfo() infoReport {
	r := infoReport{Version: shmem.Version().String(), Go: fmt.Sprintf("%s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH), OK: true}
	if err := env.Device.Validate(); err != nil {
		r.BackendErr, r.OK = err.Error(), false
	} else {
		want, _ := env.Device.String()
		drv, probes, err := auto.Pick(want)
		for _, p := range probes {
			r.Backends = append(r.Backends, infoProbe{p.Driver, p.OK, p.Detail})
		}
		if err != nil {
			r.BackendErr, r.OK = fmt.Sprintf("none usable for ROX_DEVICE=%s: %v", want, err), false
		} else {
			r.Backend = drv.Name()
		}
	}
	// The NIC path: tcp is built in; ucx needs libucp, and auto stays on tcp without it.
	r.Transports = append(r.Transports, infoProbe{"tcp", true, "built in"})
	if v, err := ucx.Version(); err != nil {
		r.Transports = append(r.Transports, infoProbe{"ucx", false, fmt.Sprintf("%v (ROX_TRANSPORT=auto uses tcp)", err)})
	} else {
		r.Transports = append(r.Transports, infoProbe{"ucx", true, "libucp.so.0 " + v})
	}
	r.SDMA = sdmaLine()
	if m, err := launch.NodeMPS(2); err != nil {
		r.MPS, r.OK = err.Error(), false
	} else if m.Start {
		r.MPS = "a job of 2 PEs starts a CUDA MPS daemon of its own: " + m.Why
	} else {
		r.MPS = "a job of 2 PEs runs without a daemon of its own: " + m.Why
	}
	r.Launcher = bootstrap.Describe(os.Getenv) // which launcher started this process (PMIx first)
	for _, k := range env.All() {
		ik := infoKnob{Name: k.Name, Value: k.Raw(), Set: k.IsSet(), Default: k.Default, Type: k.Type, Choices: k.Choices, Doc: k.Doc}
		if err := k.Validate(); err != nil {
			ik.Error, r.OK = err.Error(), false
		}
		r.Knobs = append(r.Knobs, ik)
	}
	return r
}

func (r infoReport) print(w io.Writer) {
	fmt.Fprintf(w, "roxamen: %s, %s\n", r.Version, r.Go)
	for _, p := range r.Backends {
		fmt.Fprintf(w, "backend %-5s %s  %s\n", p.Name, yesNo(p.OK), p.Detail)
	}
	if r.BackendErr != "" {
		fmt.Fprintf(w, "backend: %s\n", r.BackendErr)
	} else {
		fmt.Fprintf(w, "backend: %s (ROX_DEVICE=%s)\n", r.Backend, env.Device.Raw())
	}
	for _, t := range r.Transports {
		fmt.Fprintf(w, "transport %-5s %s  %s\n", t.Name, yesNo(t.OK), t.Detail)
	}
	fmt.Fprintln(w, r.SDMA)
	fmt.Fprintln(w, "mps             "+r.MPS)
	fmt.Fprintln(w, r.Launcher)
	fmt.Fprintln(w, "knobs:")
	for _, k := range r.Knobs {
		src, bad := "default", ""
		if k.Set {
			src = "set"
		}
		if k.Error != "" {
			bad = "  INVALID: " + k.Error
		}
		fmt.Fprintf(w, "  %-16s %-10q (%s) %s%s\n", k.Name, k.Value, src, k.Doc, bad)
	}
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "no "
}

// sdmaLine says whether the AMD SDMA route (device-written copy-engine queues) can run here, and
// on which engines.
func sdmaLine() string {
	k, err := kfd.Open()
	if err != nil {
		return fmt.Sprintf("sdma route      no   %v (AMD GPUs only; copy-engine puts take the proxy)", err)
	}
	defer k.Close()
	var parts []string
	for _, n := range k.GPUs() {
		parts = append(parts, fmt.Sprintf("node %d (device %#x): %d PCIe + %d XGMI engines, %d queues each",
			n.ID, n.DeviceID, n.SDMAEngines, n.SDMAXGMIEngines, n.QueuesPerEngine))
	}
	return "sdma route      yes  " + strings.Join(parts, "; ") + " (ROX_SDMA=" + env.SDMA.Raw() + ")"
}
