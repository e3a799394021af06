// Command roxrun launches Roxamen SPMD jobs and carries the project's tools.
//
//	roxrun [run] -n N [flags] PROGRAM|GO-PACKAGE-DIR [args]   start a job (run is the default)
//	roxrun info                                               build, backend, ROX_* knobs
//	roxrun bench [-n N] [--json]                              the benchmark suite
//	roxrun litmus [--check] [--mode M] [--run N] FILE...      the memory-model checker
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "run":
			return runMain(args[1:], stdout, stderr)
		case "info":
			return infoMain(args[1:], stdout, stderr)
		case "bench", benchPECommand:
			return benchMain(args, stdout, stderr)
		case "litmus", "litmus-pe":
			return litmusMain(args, stdout, stderr)
		case "help", "-h", "--help", "-help":
			usage(stdout)
			return 0
		}
	}
	return runMain(args, stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage:
  roxrun [run] -n N [flags] PROGRAM|GO-PACKAGE-DIR [args]   start an SPMD job
  roxrun info                                               show the build, the backend and every ROX_* knob
  roxrun bench [-n N] [--json]                              run the benchmark suite in a job of its own
  roxrun litmus [--check] [--mode strict|bypass|both] [--run N] FILE...
                                                            check litmus tests against the memory model (--run: on this backend)

run flags:
`)
	newRunFlags(w).fs.PrintDefaults()
}
