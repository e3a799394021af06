// The device library's SDMA producer built for the CPU as a shared library: TestSDMAEmulated loads
// it with purego and calls these from many goroutines (each a "GPU thread"), while the Go SDMA
// engine emulator (device/host.SDMAEngine) consumes the packets they write. The arch layer's host
// fallbacks (the compiler's __atomic builtins) stand in for the GPU's scoped atomics and fences.
#include "roxamen/roxshmem.h"

extern "C" {
void rox_set_state(const roxshmem_state_t *s) { roxshmem_state = *s; }
void rox_put_sdma(void *d, const void *s, uint64_t n, int pe, int nbi)
{
	if (nbi)
		roxshmemx_putmem_sdma_nbi(d, s, n, pe);
	else
		roxshmemx_putmem_sdma(d, s, n, pe);
}
// the ordinary put: the SDMA route when n reaches the table's threshold, else load/store
void rox_putmem(void *d, const void *s, uint64_t n, int pe) { roxshmem_putmem(d, s, n, pe); }
void rox_put_signal_sdma(void *d, const void *s, uint64_t n, uint64_t *sig, uint64_t v, int op, int pe, int nbi)
{
	if (nbi)
		roxshmemx_putmem_signal_sdma_nbi(d, s, n, sig, v, op, pe);
	else
		roxshmemx_putmem_signal_sdma(d, s, n, sig, v, op, pe);
}
void rox_quiet(void) { roxshmem_quiet(); }
void rox_fence(void) { roxshmem_fence(); }
uint64_t rox_aborted(void) { return roxshmemx_aborted(); }
}
