package main

import (
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
)

// infoCommand is info's command with its flags.
type infoCommand struct {
	*command
	scale *bool
	sf    *scaleFlags
}

func newInfoCommand() *command { return newInfoCmd().command }

func newInfoCmd() infoCommand {
	c := newCommand("info", "", `
Show the build, the backend roxrun's PEs would pick here and why, which NIC transports
load, and every ROX_* knob with its value; exit 1 when a knob is malformed or the
backend ROX_DEVICE asks for is unusable. With --scale, start a job of -n PEs instead
that talk in --pattern and print what setup cost them: Init's phases (min, mean and
max over the PEs), Init's CPU time, and the transport connections each PE holds.`)
	scale := c.fs.Bool("scale", false, "run a job and report its setup cost (see -n, --pattern, --timeout)")
	return infoCommand{command: c, scale: scale, sf: addScaleFlags(c.fs)}
}

func infoMain(args []string, stdout, stderr io.Writer) int {
	ic := newInfoCmd()
	c, scale, sf := ic.command, ic.scale, ic.sf
	if ok, status := c.parse(args, stdout, stderr); !ok {
		return status
	}
	if c.fs.NArg() > 0 {
		return c.fail(stderr, "unexpected argument %q (info takes none)", c.fs.Arg(0))
	}
	for _, name := range []string{"n", "pattern", "timeout"} {
		if msg := c.needs(name, "scale"); msg != "" {
			return c.fail(stderr, "%s", msg)
		}
	}
	if *scale {
		return scaleMain(sf, stdout, stderr)
	}
	fmt.Fprintf(stdout, "roxamen: %s, %s %s/%s\n", shmem.Version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	status := 0
	want := env.Device.Raw()
	if err := env.Device.Validate(); err != nil {
		fmt.Fprintln(stdout, err)
		status = 1
	} else {
		drv, probes, err := auto.Pick(want)
		for _, p := range probes {
			mark := "no "
			if p.OK {
				mark = "yes"
			}
			fmt.Fprintf(stdout, "backend %-5s %s  %s\n", p.Driver, mark, p.Detail)
		}
		if err != nil {
			fmt.Fprintf(stdout, "backend: none usable for ROX_DEVICE=%s: %v\n", want, err)
			status = 1
		} else {
			fmt.Fprintf(stdout, "backend: %s (ROX_DEVICE=%s)\n", drv.Name(), want)
		}
	}
	// The NIC path: tcp is built in; ucx needs libucp, and auto stays on tcp without it.
	if v, err := ucx.Version(); err != nil {
		fmt.Fprintf(stdout, "transport tcp   yes  built in\ntransport ucx   no   %v (ROX_TRANSPORT=auto uses tcp)\n", err)
	} else {
		fmt.Fprintf(stdout, "transport tcp   yes  built in\ntransport ucx   yes  libucp.so.0 %s\n", v)
	}
	fmt.Fprintln(stdout, sdmaLine())
	fmt.Fprintln(stdout, bootstrap.Describe(os.Getenv)) // which launcher started this process (PMIx first)
	fmt.Fprintln(stdout, "knobs:")
	for _, k := range env.All() {
		val, src := k.Raw(), "default"
		if k.IsSet() {
			src = "set"
		}
		bad := ""
		if err := k.Validate(); err != nil {
			bad = "  INVALID: " + err.Error()
			status = 1
		}
		fmt.Fprintf(stdout, "  %-16s %-10q (%s) %s%s\n", k.Name, val, src, k.Doc, bad)
	}
	return status
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
