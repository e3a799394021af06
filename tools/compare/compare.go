// Package compare holds the comparison programs that `roxrun bench --compare oshmem|mpi` builds
// and runs beside Roxamen's own rows: C programs that measure what roxrun bench measures, with
// OpenSHMEM (oshcc, oshrun) and with MPI (mpicc, mpirun), and print their figures as roxrun bench
// --json rows (median, min and max over rounds). roxrun carries their sources, so it needs no
// checkout to run them.
package compare

import _ "embed"

// OSHMEM is c/oshmem_bench.c: arguments ITERS ROUNDS [TESTS]; run with oshrun -np 2 (or more:
// PE 0 and the last PE are the pair).
//
//go:embed c/oshmem_bench.c
var OSHMEM string

// MPI is c/mpi_bench.c: arguments ITERS ROUNDS [TESTS]; run with mpirun -np N, N >= 2.
//
//go:embed c/mpi_bench.c
var MPI string

// NVSHMEM is cu/nvshmem_bench.cu: the GPU suite's point-to-point rows with NVSHMEM, built with
// nvcc against the NVSHMEM the machine has; arguments ITERS ROUNDS TESTS UIDFILE HBM_BASE_MIB, one
// process per PE with ROX_PE and ROX_NPES set (a roxrun job).
//
//go:embed cu/nvshmem_bench.cu
var NVSHMEM string
