package launch

import (
	"os"

	"github.com/roxamen/roxamen/device/cuda"
	"github.com/roxamen/roxamen/internal/env"
)

// NodeMPS is whether a job of pes PEs on this node gets a CUDA MPS daemon of its own: PlanMPS
// for ROX_MPS, this node's NVIDIA GPUs and the daemon already running here, if any.
func NodeMPS(pes int) (MPS, error) {
	mode, _ := env.MPS.String()
	return PlanMPS(mode, pes, nvidiaGPUs(), MPSRunning(os.Getenv), MPSControlFound())
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

// JobMPS is NodeMPS for the jobs roxrun's own tools start (bench, litmus): a plan that cannot
// start (ROX_MPS=on without a GPU) leaves the job time-sliced, and the job says what fails.
func JobMPS(pes int) MPS {
	m, err := NodeMPS(pes)
	if err != nil {
		return MPS{}
	}
	return m
}
