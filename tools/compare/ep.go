package compare

import _ "embed"

// MPIEP is c/mpi_ep_bench.c: expert-parallel dispatch and combine with MPI_Alltoall and
// MPI_Alltoallv over the routings of roxrun bench's ep rows; arguments ITERS ROUNDS [TESTS], run
// with mpirun -np N, N >= 2.
//
//go:embed c/mpi_ep_bench.c
var MPIEP string
