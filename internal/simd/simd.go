// Package simd holds Roxamen's vector loops (AVX2 on x86-64) and the one switch that turns them
// on: the folds of the host reductions (shmem/internal/coll) and the bf16 rows of expert-parallel
// combine (shmem/ep). Each loop does, lane by lane, exactly the operation of the plain Go loop it
// stands in for, so a result has the same bits with the vector loops or without.
//
// Every function here does the vector prefix of its slices (a multiple of the vector width) and
// returns how many elements it did: 0 where the CPU has no AVX2, or where SetAVX2(false) turned
// the loops off. The caller's Go loop does the rest. Copy, the copy into a heap mapped here that
// stays on cached stores, is here too: shmem's puts and the collectives' engine share it. The
// package imports only golang.org/x/sys/cpu: it sits below every package that uses it.
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

// Go's memmove switches to non-temporal stores at 1 MiB, which write around the caches: right for
// transfers larger than the last-level cache, but 1.3-1.6x slower (measured on a 2-core EPYC,
// 32 MiB L3) for the 1..8 MiB copies that a receiver reads next. Below copyNTMin Copy moves such
// copies in chunks small enough to stay on the cached path.
const (
	copyChunk = 512 << 10
	copyNTMin = 8 << 20
)

// Copy copies min(len(dst), len(src)) bytes from src to dst, as copy does, keeping a 1..8 MiB copy
// on cached stores: what a put into a heap mapped here does, whose receiver reads the data next.
func Copy(dst, src []byte) {
	n := min(len(dst), len(src))
	if n < 1<<20 || n >= copyNTMin {
		copy(dst, src)
		return
	}
	for o := 0; o < n; o += copyChunk {
		e := min(o+copyChunk, n)
		copy(dst[o:e], src[o:e])
	}
}
