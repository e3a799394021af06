/* A fake GPU library for gpudrv's tests: the entry points device/cuda's and device/hip's vendor
 * tables bind, with the prototypes of cuda.h and hip/hip_runtime_api.h, over host memory. It is
 * below the layer under test: gpudrv's logic runs for real against it, including the HIP-only
 * paths (current device, hipMemcpyAsync's kind, hipModuleLoadData, the IPC flag fallback) that no
 * machine here can run against a real runtime. It checks what a real library would refuse and
 * answers with the vendor's status codes:
 *   - every call but the device queries needs a current context (CUDA) or device (HIP) on the
 *     calling thread, and allocations remember which device was current;
 *   - flags and kinds must be the documented values;
 *   - peer copies must name contexts (CUDA) or device ordinals (HIP).
 * fake_* functions let the test read the fake's books. Built by the test with clang -shared. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int res;
typedef unsigned long long dptr;

#define NDEV 2
#define CTX_BASE 0x1000 /* a context is CTX_BASE + CUdevice */
#define DEV_HANDLE(ord) ((ord) + 100) /* a CUdevice is not its ordinal */

/* the books; the counters are atomic: the test calls from many threads at once */
static int live;                      /* allocations, streams, events, modules, imports */
static int ctx_refs[NDEV];            /* retained primary contexts */
static int peer_enabled[NDEV][NDEV];  /* [from][to] */
static int no_context;                /* calls made without a current context or device */
static int hip_ipc_zero_only;         /* hipIpcOpenMemHandle refuses flags 1, as early ROCm 5 */
static __thread int current = -1;     /* ordinal of the current context (CUDA) or device (HIP) */

int fake_live(void) { return __atomic_load_n(&live, __ATOMIC_SEQ_CST); }
int fake_ctx_refs(int ord) { return ctx_refs[ord]; }
int fake_peer_enabled(int from, int to) { return peer_enabled[from][to]; }
int fake_no_context(void) { return __atomic_load_n(&no_context, __ATOMIC_SEQ_CST); }
void fake_hip_ipc_zero_only(int on) { hip_ipc_zero_only = on; }

/* every block starts with its owner's ordinal */
struct block {
	int owner;
	int pad;
	size_t size;
};
static void *block_alloc(size_t size)
{
	struct block *b = malloc(sizeof *b + size);
	if (!b)
		return 0;
	b->owner = current;
	b->size = size;
	__atomic_fetch_add(&live, 1, __ATOMIC_SEQ_CST);
	return b + 1;
}
static void block_free(void *p)
{
	__atomic_fetch_sub(&live, 1, __ATOMIC_SEQ_CST);
	free((struct block *)p - 1);
}
int fake_owner(void *p) { return ((struct block *)p - 1)->owner; }

#define NEED_CURRENT(err)                                                                          \
	do {                                                                                       \
		if (current < 0) {                                                                 \
			__atomic_fetch_add(&no_context, 1, __ATOMIC_SEQ_CST);                      \
			return err;                                                                \
		}                                                                                  \
	} while (0)

/* ---- status codes (cuda.h enum cudaError_enum; hip_runtime_api.h enum hipError_t) ---------- */
enum { OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, INVALID_DEVICE = 101, INVALID_IMAGE = 200,
       INVALID_CONTEXT = 201, INVALID_PTX = 218, INVALID_HANDLE = 400, NOT_FOUND = 500,
       NOT_READY = 600, PEER_ENABLED = 704 };

static const char *cu_name(res r)
{
	switch (r) {
	case OK: return "CUDA_SUCCESS";
	case INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
	case OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
	case NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
	case INVALID_PTX: return "CUDA_ERROR_INVALID_PTX";
	}
	return 0;
}
res cuGetErrorName(res r, const char **s)
{
	*s = cu_name(r);
	return *s ? OK : INVALID_VALUE;
}
const char *hipGetErrorName(res r)
{
	switch (r) {
	case OK: return "hipSuccess";
	case INVALID_VALUE: return "hipErrorInvalidValue";
	case OUT_OF_MEMORY: return "hipErrorOutOfMemory";
	case NOT_FOUND: return "hipErrorNotFound";
	}
	return "hipErrorUnknown"; /* what the runtime answers for a code it does not know */
}

/* ---- init, devices ------------------------------------------------------------------------ */
res cuInit(unsigned flags) { return flags == 0 ? OK : INVALID_VALUE; }
res hipInit(unsigned flags) { return flags == 0 ? OK : INVALID_VALUE; }
res cuDriverGetVersion(int *v) { *v = 12040; return OK; }
res hipRuntimeGetVersion(int *v) { *v = 60200000; return OK; }
res cuDeviceGetCount(int *n) { *n = NDEV; return OK; }
res hipGetDeviceCount(int *n) { *n = NDEV; return OK; }

static int cu_ord(int dev) { return dev - DEV_HANDLE(0) >= 0 && dev - DEV_HANDLE(0) < NDEV ? dev - DEV_HANDLE(0) : -1; }
static int hip_ord(int dev) { return dev >= 0 && dev < NDEV ? dev : -1; }

res cuDeviceGet(int *dev, int ord)
{
	if (ord < 0 || ord >= NDEV)
		return INVALID_DEVICE;
	*dev = DEV_HANDLE(ord);
	return OK;
}

static res name(char *out, int len, int ord)
{
	if (ord < 0)
		return INVALID_DEVICE;
	const char *n = ord ? "Fake GPU 1" : "Fake GPU 0";
	strncpy(out, n, len);
	return OK;
}
res cuDeviceGetName(char *out, int len, int dev) { return name(out, len, cu_ord(dev)); }
res hipDeviceGetName(char *out, int len, int dev) { return name(out, len, hip_ord(dev)); }

static res total(size_t *b, int ord)
{
	if (ord < 0)
		return INVALID_DEVICE;
	*b = (size_t)(ord + 1) << 30;
	return OK;
}
res cuDeviceTotalMem_v2(size_t *b, int dev) { return total(b, cu_ord(dev)); }
res hipDeviceTotalMem(size_t *b, int dev) { return total(b, hip_ord(dev)); }

/* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16, _COMPUTE_CAPABILITY_MAJOR 75, _MINOR 76 */
res cuDeviceGetAttribute(int *v, int attr, int dev)
{
	if (cu_ord(dev) < 0)
		return INVALID_DEVICE;
	switch (attr) {
	case 16: *v = 132; return OK;
	case 75: *v = 9; return OK;
	case 76: *v = 0; return OK;
	}
	return INVALID_VALUE;
}
/* hipDeviceAttributeMultiprocessorCount 63 */
res hipDeviceGetAttribute(int *v, int attr, int dev)
{
	if (hip_ord(dev) < 0)
		return INVALID_DEVICE;
	if (attr != 63)
		return INVALID_VALUE;
	*v = 304;
	return OK;
}
/* hipDeviceProp_t: name[256] first; gcnArchName somewhere after (ROCm 6's R0600 layout) */
res hipGetDevicePropertiesR0600(void *prop, int dev)
{
	if (hip_ord(dev) < 0)
		return INVALID_DEVICE;
	memset(prop, 0, 1472);
	strcpy(prop, "AMD Fake gfx000"); /* a "gfx" in the name must not be taken */
	strcpy((char *)prop + 1160, hip_ord(dev) ? "gfx90a:sramecc+:xnack-" : "gfx942:sramecc+:xnack-");
	return OK;
}

static res uuid(unsigned char *u, int ord)
{
	if (ord < 0)
		return INVALID_DEVICE;
	for (int i = 0; i < 16; i++)
		u[i] = (unsigned char)(0x10 * ord + i);
	return OK;
}
res cuDeviceGetUuid_v2(unsigned char *u, int dev) { return uuid(u, cu_ord(dev)); }
res hipDeviceGetUuid(unsigned char *u, int dev) { return uuid(u, hip_ord(dev)); }

static res bus(char *out, int len, int ord)
{
	if (ord < 0 || len < 13)
		return INVALID_VALUE;
	strcpy(out, ord ? "0000:2a:00.0" : "0000:19:00.0");
	return OK;
}
res cuDeviceGetPCIBusId(char *out, int len, int dev) { return bus(out, len, cu_ord(dev)); }
res hipDeviceGetPCIBusId(char *out, int len, int dev) { return bus(out, len, hip_ord(dev)); }

static int bus_ord(const char *id)
{
	return strcmp(id, "0000:19:00.0") == 0 ? 0 : strcmp(id, "0000:2a:00.0") == 0 ? 1 : -1;
}
res cuDeviceGetByPCIBusId(int *dev, const char *id)
{
	int o = bus_ord(id);
	if (o < 0)
		return INVALID_VALUE;
	*dev = DEV_HANDLE(o);
	return OK;
}
res hipDeviceGetByPCIBusId(int *dev, const char *id)
{
	int o = bus_ord(id);
	if (o < 0)
		return INVALID_VALUE;
	*dev = o;
	return OK;
}
res cuDeviceCanAccessPeer(int *can, int dev, int peer) { *can = cu_ord(dev) >= 0 && cu_ord(peer) >= 0; return OK; }
res hipDeviceCanAccessPeer(int *can, int dev, int peer) { *can = hip_ord(dev) >= 0 && hip_ord(peer) >= 0; return OK; }

/* ---- contexts (CUDA) and the current device (HIP) ----------------------------------------- */
static int ctx_ord(uintptr_t ctx) { return ctx >= CTX_BASE && cu_ord((int)(ctx - CTX_BASE)) >= 0 ? cu_ord((int)(ctx - CTX_BASE)) : -1; }
res cuDevicePrimaryCtxRetain(uintptr_t *ctx, int dev)
{
	if (cu_ord(dev) < 0)
		return INVALID_DEVICE;
	ctx_refs[cu_ord(dev)]++;
	*ctx = CTX_BASE + dev;
	return OK;
}
res cuDevicePrimaryCtxRelease_v2(int dev)
{
	if (cu_ord(dev) < 0 || ctx_refs[cu_ord(dev)] == 0)
		return INVALID_DEVICE;
	ctx_refs[cu_ord(dev)]--;
	return OK;
}
res cuCtxSetCurrent(uintptr_t ctx)
{
	int o = ctx_ord(ctx);
	if (o < 0 || ctx_refs[o] == 0)
		return INVALID_CONTEXT;
	current = o;
	return OK;
}
res hipSetDevice(int dev)
{
	if (hip_ord(dev) < 0)
		return INVALID_DEVICE;
	current = dev;
	return OK;
}
res cuCtxEnablePeerAccess(uintptr_t peer, unsigned flags)
{
	NEED_CURRENT(INVALID_CONTEXT);
	int o = ctx_ord(peer);
	if (o < 0 || flags != 0)
		return INVALID_VALUE;
	if (peer_enabled[current][o])
		return PEER_ENABLED;
	peer_enabled[current][o] = 1;
	return OK;
}
res hipDeviceEnablePeerAccess(int peer, unsigned flags)
{
	NEED_CURRENT(INVALID_DEVICE);
	if (hip_ord(peer) < 0 || flags != 0)
		return INVALID_VALUE;
	if (peer_enabled[current][peer])
		return PEER_ENABLED;
	peer_enabled[current][peer] = 1;
	return OK;
}
res cuCtxSynchronize(void) { NEED_CURRENT(INVALID_CONTEXT); return OK; }
res hipDeviceSynchronize(void) { NEED_CURRENT(INVALID_DEVICE); return OK; }

/* ---- memory ------------------------------------------------------------------------------- */
static res alloc(dptr *p, size_t size)
{
	NEED_CURRENT(INVALID_CONTEXT);
	if (size == 0)
		return INVALID_VALUE;
	if (size > (1ull << 40))
		return OUT_OF_MEMORY;
	void *b = block_alloc(size);
	if (!b)
		return OUT_OF_MEMORY;
	*p = (dptr)(uintptr_t)b;
	return OK;
}
res cuMemAlloc_v2(dptr *p, size_t size) { return alloc(p, size); }
res hipMalloc(dptr *p, size_t size) { return alloc(p, size); }
res cuMemFree_v2(dptr p) { NEED_CURRENT(INVALID_CONTEXT); block_free((void *)(uintptr_t)p); return OK; }
res hipFree(dptr p) { NEED_CURRENT(INVALID_DEVICE); block_free((void *)(uintptr_t)p); return OK; }

/* CU_MEMHOSTALLOC_PORTABLE|DEVICEMAP, hipHostMallocPortable|Mapped: both 0x01|0x02 */
static res host_alloc(void **pp, size_t size, unsigned flags)
{
	NEED_CURRENT(INVALID_CONTEXT);
	if (flags != 3 || size == 0)
		return INVALID_VALUE;
	*pp = block_alloc(size);
	return *pp ? OK : OUT_OF_MEMORY;
}
res cuMemHostAlloc(void **pp, size_t size, unsigned flags) { return host_alloc(pp, size, flags); }
res hipHostMalloc(void **pp, size_t size, unsigned flags) { return host_alloc(pp, size, flags); }
res cuMemHostGetDevicePointer_v2(dptr *d, void *p, unsigned flags) { NEED_CURRENT(INVALID_CONTEXT); *d = (dptr)(uintptr_t)p; return flags ? INVALID_VALUE : OK; }
res hipHostGetDevicePointer(dptr *d, void *p, unsigned flags) { NEED_CURRENT(INVALID_DEVICE); *d = (dptr)(uintptr_t)p; return flags ? INVALID_VALUE : OK; }
res cuMemFreeHost(void *p) { NEED_CURRENT(INVALID_CONTEXT); block_free(p); return OK; }
res hipHostFree(void *p) { NEED_CURRENT(INVALID_DEVICE); block_free(p); return OK; }

/* streams are blocks too (so that a leak shows); work runs at once */
res cuMemsetD8Async(dptr d, unsigned char v, size_t n, void *s) { NEED_CURRENT(INVALID_CONTEXT); (void)s; memset((void *)(uintptr_t)d, v, n); return OK; }
res hipMemsetD8Async(dptr d, unsigned char v, size_t n, void *s) { NEED_CURRENT(INVALID_DEVICE); (void)s; memset((void *)(uintptr_t)d, v, n); return OK; }
res cuMemcpyAsync(dptr d, dptr src, size_t n, void *s) { NEED_CURRENT(INVALID_CONTEXT); (void)s; memmove((void *)(uintptr_t)d, (void *)(uintptr_t)src, n); return OK; }
/* hipMemcpyDefault = 4 */
res hipMemcpyAsync(dptr d, dptr src, size_t n, int kind, void *s)
{
	NEED_CURRENT(INVALID_DEVICE);
	(void)s;
	if (kind != 4)
		return INVALID_VALUE;
	memmove((void *)(uintptr_t)d, (void *)(uintptr_t)src, n);
	return OK;
}
res cuMemcpyHtoDAsync_v2(dptr d, const void *src, size_t n, void *s) { NEED_CURRENT(INVALID_CONTEXT); (void)s; memcpy((void *)(uintptr_t)d, src, n); return OK; }
res hipMemcpyHtoDAsync(dptr d, const void *src, size_t n, void *s) { NEED_CURRENT(INVALID_DEVICE); (void)s; memcpy((void *)(uintptr_t)d, src, n); return OK; }
res cuMemcpyDtoHAsync_v2(void *d, dptr src, size_t n, void *s) { NEED_CURRENT(INVALID_CONTEXT); (void)s; memcpy(d, (void *)(uintptr_t)src, n); return OK; }
res hipMemcpyDtoHAsync(void *d, dptr src, size_t n, void *s) { NEED_CURRENT(INVALID_DEVICE); (void)s; memcpy(d, (void *)(uintptr_t)src, n); return OK; }
res cuMemcpyPeerAsync(dptr d, uintptr_t dctx, dptr src, uintptr_t sctx, size_t n, void *s)
{
	NEED_CURRENT(INVALID_CONTEXT);
	(void)s;
	if (ctx_ord(dctx) < 0 || ctx_ord(sctx) < 0 || fake_owner((void *)(uintptr_t)d) != ctx_ord(dctx) ||
	    fake_owner((void *)(uintptr_t)src) != ctx_ord(sctx))
		return INVALID_CONTEXT;
	memmove((void *)(uintptr_t)d, (void *)(uintptr_t)src, n);
	return OK;
}
res hipMemcpyPeerAsync(dptr d, int ddev, dptr src, int sdev, size_t n, void *s)
{
	NEED_CURRENT(INVALID_DEVICE);
	(void)s;
	if (hip_ord(ddev) < 0 || hip_ord(sdev) < 0 || fake_owner((void *)(uintptr_t)d) != ddev ||
	    fake_owner((void *)(uintptr_t)src) != sdev)
		return INVALID_DEVICE;
	memmove((void *)(uintptr_t)d, (void *)(uintptr_t)src, n);
	return OK;
}

/* ---- streams and events ------------------------------------------------------------------- */
/* CU_STREAM_NON_BLOCKING, hipStreamNonBlocking: 0x01 */
static res stream_create(void **s, unsigned flags)
{
	NEED_CURRENT(INVALID_CONTEXT);
	if (flags != 1)
		return INVALID_VALUE;
	*s = block_alloc(8);
	*(void **)*s = 0; /* the graph it captures into (none) */
	return OK;
}
res cuStreamCreate(void **s, unsigned flags) { return stream_create(s, flags); }
res hipStreamCreateWithFlags(void **s, unsigned flags) { return stream_create(s, flags); }
static res stream_op(void *s) { NEED_CURRENT(INVALID_CONTEXT); return s ? OK : INVALID_HANDLE; }
static res stream_destroy(void *s) { res r = stream_op(s); if (r == OK) block_free(s); return r; }
res cuStreamDestroy_v2(void *s) { return stream_destroy(s); }
res hipStreamDestroy(void *s) { return stream_destroy(s); }
res cuStreamSynchronize(void *s) { return stream_op(s); }
res hipStreamSynchronize(void *s) { return stream_op(s); }
res cuStreamQuery(void *s) { return stream_op(s); }
res hipStreamQuery(void *s) { return stream_op(s); }
res cuStreamWaitEvent(void *s, void *e, unsigned flags) { (void)e; return flags ? INVALID_VALUE : stream_op(s); }
res hipStreamWaitEvent(void *s, void *e, unsigned flags) { (void)e; return flags ? INVALID_VALUE : stream_op(s); }

/* an event is a block holding the fake clock when recorded (0: never) */
static double clock_ms;
static res event_create(void **e, unsigned flags)
{
	NEED_CURRENT(INVALID_CONTEXT);
	if (flags != 0) /* CU_EVENT_DEFAULT, hipEventDefault */
		return INVALID_VALUE;
	*e = block_alloc(sizeof(double));
	*(double *)*e = 0;
	return OK;
}
res cuEventCreate(void **e, unsigned flags) { return event_create(e, flags); }
res hipEventCreateWithFlags(void **e, unsigned flags) { return event_create(e, flags); }
static res event_record(void *e, void *s) { res r = stream_op(s); if (r == OK) *(double *)e = (clock_ms += 1.5); return r; }
res cuEventRecord(void *e, void *s) { return event_record(e, s); }
res hipEventRecord(void *e, void *s) { return event_record(e, s); }
res cuEventSynchronize(void *e) { NEED_CURRENT(INVALID_CONTEXT); return *(double *)e ? OK : NOT_READY; }
res hipEventSynchronize(void *e) { NEED_CURRENT(INVALID_DEVICE); return *(double *)e ? OK : NOT_READY; }
static res elapsed(float *ms, void *a, void *b)
{
	NEED_CURRENT(INVALID_CONTEXT);
	if (!*(double *)a || !*(double *)b)
		return NOT_READY;
	*ms = (float)(*(double *)b - *(double *)a);
	return OK;
}
res cuEventElapsedTime(float *ms, void *a, void *b) { return elapsed(ms, a, b); }
res hipEventElapsedTime(float *ms, void *a, void *b) { return elapsed(ms, a, b); }
res cuEventDestroy_v2(void *e) { NEED_CURRENT(INVALID_CONTEXT); block_free(e); return OK; }
res hipEventDestroy(void *e) { NEED_CURRENT(INVALID_DEVICE); block_free(e); return OK; }

/* ---- modules and launches ----------------------------------------------------------------- */
/* A valid image starts with "FAKE" (and, being text, must be NUL-terminated: the fake reads it as
 * a string). Its functions: fill(uint64_t *dst, uint64_t v, int64_t n): dst[i] = v + i;
 * echo(uint64_t *out, int32_t, uint32_t, int64_t, uint64_t, float, double): out[i] = arg i's bits.
 * Its global: g, 8 bytes. */
enum { FN_FILL = 1, FN_ECHO = 2 };
static res load(void **m, const void *image)
{
	NEED_CURRENT(INVALID_CONTEXT);
	if (strncmp(image, "FAKE", 4) != 0 || strlen(image) > 1 << 20)
		return INVALID_IMAGE;
	*m = block_alloc(8);
	*(uint64_t *)*m = 0;
	return OK;
}
/* CU_JIT_ERROR_LOG_BUFFER 5, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6 */
res cuModuleLoadDataEx(void **m, const void *image, unsigned n, int *opts, void **vals)
{
	res r = load(m, image);
	if (r == INVALID_IMAGE) {
		r = INVALID_PTX;
		if (n == 2 && opts[0] == 5 && opts[1] == 6 && (uintptr_t)vals[1] > 32)
			strcpy(vals[0], "fake JIT: not a FAKE image");
	}
	return r;
}
res hipModuleLoadData(void **m, const void *image) { return load(m, image); }
static res get_function(uintptr_t *f, void *m, const char *name)
{
	NEED_CURRENT(INVALID_CONTEXT);
	(void)m;
	*f = strcmp(name, "fill") == 0 ? FN_FILL : strcmp(name, "echo") == 0 ? FN_ECHO : 0;
	return *f ? OK : NOT_FOUND;
}
res cuModuleGetFunction(uintptr_t *f, void *m, const char *name) { return get_function(f, m, name); }
res hipModuleGetFunction(uintptr_t *f, void *m, const char *name) { return get_function(f, m, name); }
static res get_global(dptr *p, size_t *size, void *m, const char *name)
{
	NEED_CURRENT(INVALID_CONTEXT);
	if (strcmp(name, "g") != 0)
		return NOT_FOUND;
	*p = (dptr)(uintptr_t)m;
	*size = 8;
	return OK;
}
res cuModuleGetGlobal_v2(dptr *p, size_t *size, void *m, const char *name) { return get_global(p, size, m, name); }
res hipModuleGetGlobal(dptr *p, size_t *size, void *m, const char *name) { return get_global(p, size, m, name); }
res cuModuleUnload(void *m) { NEED_CURRENT(INVALID_CONTEXT); block_free(m); return OK; }
res hipModuleUnload(void *m) { NEED_CURRENT(INVALID_DEVICE); block_free(m); return OK; }

/* ---- stream capture and graphs: a capturing stream records its fills, a graph replays them ---- */
#define GRAPH_MAX 16
struct fake_graph {
	int n;
	struct {
		uint64_t *dst, v;
		int64_t n;
	} fill[GRAPH_MAX];
};
static res graph_record(struct fake_graph *g, uint64_t *dst, uint64_t v, int64_t n)
{
	if (g->n == GRAPH_MAX)
		return INVALID_VALUE;
	g->fill[g->n].dst = dst, g->fill[g->n].v = v, g->fill[g->n].n = n;
	g->n++;
	return OK;
}
/* CU_STREAM_CAPTURE_MODE_RELAXED, hipStreamCaptureModeRelaxed: 2 */
static res begin_capture(void *s, int mode)
{
	res r = stream_op(s);
	if (r != OK)
		return r;
	if (mode != 2 || *(void **)s)
		return INVALID_VALUE;
	struct fake_graph *g = block_alloc(sizeof *g);
	g->n = 0;
	*(void **)s = g;
	return OK;
}
res cuStreamBeginCapture_v2(void *s, int mode) { return begin_capture(s, mode); }
res hipStreamBeginCapture(void *s, int mode) { return begin_capture(s, mode); }
static res end_capture(void *s, void **g)
{
	res r = stream_op(s);
	if (r != OK)
		return r;
	if (!*(void **)s)
		return INVALID_VALUE; /* not capturing */
	*g = *(void **)s;
	*(void **)s = 0;
	return OK;
}
res cuStreamEndCapture(void *s, void **g) { return end_capture(s, g); }
res hipStreamEndCapture(void *s, void **g) { return end_capture(s, g); }
static res instantiate(void **e, struct fake_graph *g, unsigned long long flags)
{
	NEED_CURRENT(INVALID_CONTEXT);
	if (flags || !g)
		return INVALID_VALUE;
	struct fake_graph *x = block_alloc(sizeof *x);
	memcpy(x, g, sizeof *x);
	*e = x;
	return OK;
}
res cuGraphInstantiateWithFlags(void **e, void *g, unsigned long long flags) { return instantiate(e, g, flags); }
res hipGraphInstantiateWithFlags(void **e, void *g, unsigned long long flags) { return instantiate(e, g, flags); }
static res graph_launch(struct fake_graph *e, void *s)
{
	res r = stream_op(s);
	if (r != OK)
		return r;
	if (!e || *(void **)s)
		return INVALID_VALUE;
	for (int k = 0; k < e->n; k++)
		for (int64_t i = 0; i < e->fill[k].n; i++)
			e->fill[k].dst[i] = e->fill[k].v + (uint64_t)i;
	return OK;
}
res cuGraphLaunch(void *e, void *s) { return graph_launch(e, s); }
res hipGraphLaunch(void *e, void *s) { return graph_launch(e, s); }
static res graph_free(void *g) { NEED_CURRENT(INVALID_CONTEXT); if (!g) return INVALID_VALUE; block_free(g); return OK; }
res cuGraphExecDestroy(void *e) { return graph_free(e); }
res hipGraphExecDestroy(void *e) { return graph_free(e); }
res cuGraphDestroy(void *g) { return graph_free(g); }
res hipGraphDestroy(void *g) { return graph_free(g); }

static res launch(uintptr_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
		  unsigned shared, void *s, void **params, void **extra)
{
	NEED_CURRENT(INVALID_CONTEXT);
	(void)shared;
	if (stream_op(s) != OK || extra || !gx || !gy || !gz || !bx || !by || !bz)
		return INVALID_VALUE;
	if ((uint64_t)bx * by * bz > 1024)
		return INVALID_VALUE; /* too many threads in a block */
	if (f == FN_FILL) {
		uint64_t *dst = *(uint64_t **)params[0], v = *(uint64_t *)params[1];
		int64_t n = *(int64_t *)params[2];
		if (*(void **)s) /* capturing: recorded, not run */
			return graph_record(*(void **)s, dst, v, n);
		for (int64_t i = 0; i < n; i++)
			dst[i] = v + (uint64_t)i;
		return OK;
	}
	if (f == FN_ECHO) {
		if (*(void **)s)
			return INVALID_VALUE; /* the fake captures fills only */
		uint64_t *out = *(uint64_t **)params[0];
		out[0] = (uint64_t)(int64_t) * (int32_t *)params[1];
		out[1] = *(uint32_t *)params[2];
		out[2] = (uint64_t) * (int64_t *)params[3];
		out[3] = *(uint64_t *)params[4];
		uint32_t fb;
		memcpy(&fb, params[5], 4);
		out[4] = fb;
		memcpy(&out[5], params[6], 8);
		return OK;
	}
	return INVALID_HANDLE;
}
res cuLaunchKernel(uintptr_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
		   unsigned shared, void *s, void **params, void **extra)
{
	return launch(f, gx, gy, gz, bx, by, bz, shared, s, params, extra);
}
res hipModuleLaunchKernel(uintptr_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
			  unsigned shared, void *s, void **params, void **extra)
{
	return launch(f, gx, gy, gz, bx, by, bz, shared, s, params, extra);
}

/* ---- IPC: the handle carries the pointer, passed by value as the 64-byte struct ------------ */
typedef struct {
	char reserved[64];
} ipc_handle;
static res ipc_get(ipc_handle *h, dptr p)
{
	NEED_CURRENT(INVALID_CONTEXT);
	memset(h, 0, sizeof *h);
	memcpy(h->reserved, "fakeipc", 8);
	memcpy(h->reserved + 56, &p, 8);
	return OK;
}
res cuIpcGetMemHandle(ipc_handle *h, dptr p) { return ipc_get(h, p); }
res hipIpcGetMemHandle(ipc_handle *h, dptr p) { return ipc_get(h, p); }
static res ipc_open(dptr *p, ipc_handle h)
{
	if (memcmp(h.reserved, "fakeipc", 8) != 0)
		return INVALID_HANDLE;
	memcpy(p, h.reserved + 56, 8);
	__atomic_fetch_add(&live, 1, __ATOMIC_SEQ_CST);
	return OK;
}
/* CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS 0x01 */
res cuIpcOpenMemHandle_v2(dptr *p, ipc_handle h, unsigned flags)
{
	NEED_CURRENT(INVALID_CONTEXT);
	return flags == 1 ? ipc_open(p, h) : INVALID_VALUE;
}
/* hipIpcMemLazyEnablePeerAccess: 0x01, 0 in early ROCm 5 (which then refuses 0x01) */
res hipIpcOpenMemHandle(dptr *p, ipc_handle h, unsigned flags)
{
	NEED_CURRENT(INVALID_DEVICE);
	if (flags != (hip_ipc_zero_only ? 0u : 1u))
		return INVALID_VALUE;
	return ipc_open(p, h);
}
res cuIpcCloseMemHandle(dptr p) { NEED_CURRENT(INVALID_CONTEXT); (void)p; __atomic_fetch_sub(&live, 1, __ATOMIC_SEQ_CST); return OK; }
res hipIpcCloseMemHandle(dptr p) { NEED_CURRENT(INVALID_DEVICE); (void)p; __atomic_fetch_sub(&live, 1, __ATOMIC_SEQ_CST); return OK; }
