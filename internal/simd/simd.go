// Package simd holds Roxamen's vector loops (AVX2 on x86-64) and the one switch that turns them
// on: the folds of the host reductions (shmem/internal/coll) and the bf16 rows of expert-parallel
// combine (shmem/ep). Each loop does, lane by lane, exactly the operation of the plain Go loop it
// stands in for, so a result has the same bits with the vector loops or without.
//
// Every function here does the vector prefix of its slices (a multiple of the vector width) and
// returns how many elements it did: 0 where the CPU has no AVX2, or where SetAVX2(false) turned
// the loops off. The caller's Go loop does the rest. The package imports only golang.org/x/sys/cpu:
// it sits below every package that uses it.
package simd

// AVX2 reports whether the vector loops run.
func AVX2() bool { return haveAVX2 }

// SetAVX2 turns the vector loops off (false), or back on where the CPU has them (true), and
// returns the previous setting. It is the hook tests use to run the plain Go loops alone on a
// machine with AVX2; it is not safe to call while another goroutine uses the loops.
func SetAVX2(on bool) (was bool) {
	was = haveAVX2
	haveAVX2 = on && cpuAVX2
	return was
}
