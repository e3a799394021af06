// Package bench owns `roxrun bench` and `roxrun info --scale`: the benchmark suites (p2p, the
// collectives, the tcp rails, the GPU suite, expert-parallel dispatch/combine and the
// tensor-parallel GEMM), the comparison programs' runs beside them (tools/compare), their tables,
// JSON rows and plots, and the setup-cost job. Each suite runs as a job of roxrun itself: Main is
// both the command and the hidden PE commands (PECommand, ScalePECommand) cmd/roxrun dispatches to
// it. It sits above the runtime, so that cmd/roxrun stays the launcher and its CLI.
package bench
