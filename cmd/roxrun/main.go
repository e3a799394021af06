// Command roxrun launches Roxamen SPMD jobs and carries the project's tools: this package is the
// launcher and the command line; the benchmarks (tools/bench) and the litmus runner
// (tools/litmusrun) live above the runtime and are dispatched to from here.
//
//	roxrun [run] [flags] PROGRAM|GO-PACKAGE-DIR [args]   start a job (run is the default)
//	roxrun info                                          build, backend, transports, ROX_* knobs
//	roxrun bench [flags]                                 the benchmark suite, with --compare
//	roxrun litmus [flags] FILE...                        the memory-model checker and runner
//	roxrun version                                       module, commit and device code of this build
//
// `roxrun --help` prints every command's usage; `roxrun COMMAND --help` prints one.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/roxamen/roxamen/shmem"
	"github.com/roxamen/roxamen/tools/bench"
	"github.com/roxamen/roxamen/tools/cli"
	"github.com/roxamen/roxamen/tools/litmusrun"
)

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		// Nothing to run: say how, where errors go.
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "run":
		return runMain(args[1:], stdout, stderr)
	case "info":
		return infoMain(args[1:], stdout, stderr)
	case bench.ScalePECommand:
		return bench.ScalePE(args[1:], stdout, stderr)
	case "bench", bench.PECommand:
		return bench.Main(args, stdout, stderr)
	case "litmus", litmusrun.PECommand:
		return litmusrun.Main(args, stdout, stderr)
	case "version", "-version", "--version", "-v":
		fmt.Fprintln(stdout, "roxrun", shmem.Version())
		return 0
	case "help":
		if len(args) > 1 {
			for _, c := range commands() {
				if c.Name == args[1] {
					c.Usage(stdout)
					return 0
				}
			}
			fmt.Fprintf(stderr, "roxrun help: no command %q (run, info, bench, litmus)\n", args[1])
			return 2
		}
		usage(stdout)
		return 0
	case "-h", "--help", "-help", "--h":
		usage(stdout)
		return 0
	}
	return runMain(args, stdout, stderr)
}

// commands are the user-facing subcommands, in the order the usage lists them.
func commands() []*cli.Command {
	return []*cli.Command{newRunFlags().cmd, newInfoCommand(), bench.Command(), litmusrun.Command()}
}

// usage is the top-level help: an overview, then each command's own usage, verbatim.
func usage(w io.Writer) {
	fmt.Fprint(w, `usage: roxrun COMMAND [flags] [args]

Roxamen's launcher and tools. COMMAND is run (the default: "roxrun -n 4 ./prog" is
"roxrun run -n 4 ./prog"), info, bench, litmus or version; "roxrun COMMAND --help" prints
the usage of one command, "roxrun help COMMAND" too; "roxrun version" (or --version) the build. Flags take one dash or two (-n 4, --hosts a:2).
`)
	for _, c := range commands() {
		fmt.Fprintln(w)
		c.Usage(w)
	}
}
