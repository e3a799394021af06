// Command gen rebuilds kernels/obj (go generate ./kernels): the runtime kernels for every target.
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
	sm90, _ := build.Lookup("sm_90")
	if err := build.Compile(".", sm90, build.CheckSource, build.CheckOutput); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
