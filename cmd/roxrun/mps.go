package main

import (
	"os"

	"github.com/roxamen/roxamen/device/cuda"
	"github.com/roxamen/roxamen/internal/env"
	"github.com/roxamen/roxamen/tools/launch"
)

// planMPS is whether a job of pes PEs on this node gets a CUDA MPS daemon of its own (ROX_MPS).
func planMPS(pes int) (launch.MPS, error) {
	mode, _ := env.MPS.String()
	return launch.PlanMPS(mode, pes, nvidiaGPUs(), launch.MPSRunning(os.Getenv), launch.MPSControlFound())
}

// nvidiaGPUs counts this node's NVIDIA GPUs where the PEs would use them (0 without a driver,
// or when ROX_DEVICE picks another backend).
func nvidiaGPUs() int {
	if d, _ := env.Device.String(); d != "auto" && d != "cuda" {
		return 0
	}
	n, err := cuda.New().Count()
	if err != nil {
		return 0
	}
	return n
}

// jobMPS is planMPS for the jobs roxrun's own commands start (bench, litmus): a plan that cannot
// start (ROX_MPS=on without a GPU) leaves the job time-sliced, and the job says what fails.
func jobMPS(pes int) launch.MPS {
	m, err := planMPS(pes)
	if err != nil {
		return launch.MPS{}
	}
	return m
}
