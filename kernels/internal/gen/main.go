// Command gen rebuilds kernels/obj (go generate ./kernels): the runtime kernels and the workload
// kernels for every target, the device library's bitcode (sm_90, gfx942); and kernels/testkernels/obj, the kernels only tests launch.
package main

import (
	"fmt"
	"os"

	"github.com/roxamen/roxamen/kernels/internal/build"
)

func main() {
	// go generate runs in the package directory, kernels/
	if err := build.All(".", "obj"); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	if err := build.Workloads(".", "obj"); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	if err := build.Bitcodes(".", "obj"); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	if err := build.Tests(".", build.TestObjDir); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	if err := build.CountObjects(".", "testdata/count"); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	sm90, _ := build.Lookup("sm_90")
	for _, c := range build.Checks {
		if err := build.Compile(".", sm90, c[0], c[1]); err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
	}
}
