package shmem

// WithLauncherEnv makes Init find the job through getenv instead of the process environment
// (the launcher's variables only: ROX_PE, PMIx, Open MPI, PMI, Slurm, torchrun and ROX_BOOTSTRAP).
// The C library uses it to join a job from an explicit unique id, rank and size without changing
// the environment of the program it is loaded into.
func WithLauncherEnv(getenv func(string) string) Option { return withGetenv(getenv) }
