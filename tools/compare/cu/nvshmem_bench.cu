// nvshmem_bench: the point-to-point rows of `roxrun bench` (GPU suite) measured with NVSHMEM, for
// `roxrun bench --compare nvshmem`. roxrun builds it with nvcc against the NVSHMEM the machine
// has and starts it as a job of its own, with the PEs, placement and MPS setting of Roxamen's job;
// each process reads its rank from ROX_PE and ROX_NPES and meets the others through NVSHMEM's
// unique-id bootstrap, the id passed in the file UIDFILE. PE 0 and the last PE are the pair; PE 0
// prints one JSON row per test and size, as Roxamen's PEs do (median, min and max over ROUNDS).
//
// Usage: nvshmem_bench ITERS ROUNDS TESTS UIDFILE HBM_BASE_MIB
// (TESTS: comma-separated, or "all"; HBM_BASE_MIB: the device memory in use before the job, -1 if unknown)
#include <cuda_runtime.h>
#include <nvshmem.h>
#include <nvshmemx.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <unistd.h>
#include <vector>

#define CHECK(call)                                                                                    \
	do {                                                                                           \
		cudaError_t e_ = (call);                                                               \
		if (e_ != cudaSuccess) {                                                               \
			fprintf(stderr, "nvshmem_bench PE %d: %s: %s\n", g_me, #call, cudaGetErrorString(e_)); \
			exit(3);                                                                       \
		}                                                                                      \
	} while (0)

static int g_me = -1;

__device__ __forceinline__ uint64_t now_ns()
{
	uint64_t t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

// 8-byte p ping-pong on flag: the initiator puts i and waits for the peer's i.
__global__ void k_p_pingpong(uint64_t *flag, uint64_t iters, int peer, int initiator, uint64_t *out)
{
	uint64_t t0 = now_ns();
	for (uint64_t i = 1; i <= iters; i++) {
		if (initiator) {
			nvshmem_uint64_p(flag, i, peer);
			nvshmem_uint64_wait_until(flag, NVSHMEM_CMP_GE, i);
		} else {
			nvshmem_uint64_wait_until(flag, NVSHMEM_CMP_GE, i);
			nvshmem_uint64_p(flag, i, peer);
		}
	}
	out[0] = now_ns() - t0;
}

// put-with-signal ping-pong: 8 bytes of buf and a SET of sig to i.
__global__ void k_putsig_pingpong(uint8_t *buf, uint64_t *sig, uint64_t iters, int peer, int initiator, uint64_t *out)
{
	uint64_t t0 = now_ns();
	for (uint64_t i = 1; i <= iters; i++) {
		if (initiator) {
			nvshmem_putmem_signal_nbi(buf, buf, 8, sig, i, NVSHMEM_SIGNAL_SET, peer);
			nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, i);
		} else {
			nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, i);
			nvshmem_putmem_signal_nbi(buf, buf, 8, sig, i, NVSHMEM_SIGNAL_SET, peer);
		}
	}
	nvshmem_quiet();
	out[0] = now_ns() - t0;
}

// fetch_add latency: each add's value depends on the previous add's result (the value is 1, but
// the compiler cannot know it), so that the adds run one after another, as Roxamen's row does.
__global__ void k_fadd_latency(uint64_t *target, uint64_t iters, int peer, uint64_t *out)
{
	uint64_t v = 0, add = 1, t0 = now_ns();
	for (uint64_t i = 0; i < iters; i++) {
		uint64_t old = nvshmem_uint64_atomic_fetch_add(target, add, peer);
		v += old;
		add = 1 + (old >> 63);
	}
	out[0] = now_ns() - t0;
	out[1] = v;
}

// fetch_add with only the sum of the results kept, four adds written out per step: the same loop
// as Roxamen's roxk_fadd_pipelined, so that nothing stops either compiler from issuing the next
// adds before the last one's result is back (what NVSHMEM's anchor loop, which only sums, gets).
__global__ void k_fadd_pipelined(uint64_t *target, uint64_t iters, int peer, uint64_t *out)
{
	uint64_t v = 0, i = 0, t0 = now_ns();
	for (; i + 4 <= iters; i += 4) {
		uint64_t a = nvshmem_uint64_atomic_fetch_add(target, 1, peer);
		uint64_t b = nvshmem_uint64_atomic_fetch_add(target, 1, peer);
		uint64_t c = nvshmem_uint64_atomic_fetch_add(target, 1, peer);
		uint64_t d = nvshmem_uint64_atomic_fetch_add(target, 1, peer);
		v += a + b + c + d;
	}
	for (; i < iters; i++)
		v += nvshmem_uint64_atomic_fetch_add(target, 1, peer);
	out[0] = now_ns() - t0;
	out[1] = v;
}

// Put bandwidth: every block puts its chunk of size bytes iters times, then quiets.
__global__ void k_put_bw(uint8_t *dst, const uint8_t *src, uint64_t size, uint64_t iters, int peer)
{
	uint64_t nb = gridDim.x, b = blockIdx.x;
	uint64_t chunk = ((size + nb - 1) / nb + 15) & ~15ull;
	uint64_t lo = b * chunk, len = lo < size ? (size - lo < chunk ? size - lo : chunk) : 0;
	for (uint64_t i = 0; i < iters; i++)
		if (len)
			nvshmemx_putmem_nbi_block(dst + lo, src + lo, len, peer);
	__syncthreads();
	if (threadIdx.x == 0)
		nvshmem_quiet();
}

__global__ void k_fill(uint8_t *p, uint64_t n, uint64_t seed)
{
	for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
		p[i] = (uint8_t)((i * 0x9e3779b97f4a7c15ull + seed) >> 56);
}

static double median_of(std::vector<double> v)
{
	std::sort(v.begin(), v.end());
	size_t n = v.size();
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int g_npes;

// A latency row: per holds the one-way or per-call time of each round, in us.
static void latency_row(const char *test, int size, const std::vector<double> &per)
{
	if (g_me != 0 || per.empty())
		return;
	double lo = *std::min_element(per.begin(), per.end()), hi = *std::max_element(per.begin(), per.end());
	printf("{\"test\":\"%s\",\"backend\":\"nvshmem\",\"pes\":%d,\"size_bytes\":%d,\"blocks\":1,\"latency_us\":%.4f,"
	       "\"latency_min_us\":%.4f,\"latency_max_us\":%.4f,\"rounds\":%zu,\"bandwidth_gbps\":0}\n",
	       test, g_npes, size, median_of(per), lo, hi, per.size());
	fflush(stdout);
}

// A bandwidth row: gbps holds each round's GB/s; the time per message is the median round's.
static void bw_row(const char *test, uint64_t size, int blocks, const std::vector<double> &gbps)
{
	if (g_me != 0 || gbps.empty())
		return;
	double med = median_of(gbps);
	double lo = *std::min_element(gbps.begin(), gbps.end()), hi = *std::max_element(gbps.begin(), gbps.end());
	printf("{\"test\":\"%s\",\"backend\":\"nvshmem\",\"pes\":%d,\"size_bytes\":%llu,\"blocks\":%d,\"latency_us\":%.4f,"
	       "\"rounds\":%zu,\"bandwidth_gbps\":%.3f,\"bandwidth_min_gbps\":%.3f,\"bandwidth_max_gbps\":%.3f}\n",
	       test, g_npes, (unsigned long long)size, blocks, (double)size / med / 1e3, gbps.size(), med, lo, hi);
	fflush(stdout);
}

// The device memory in use on this GPU (MiB), from nvidia-smi: under MPS every PE's memory is in
// one process's account, so the figure is for the whole device; -1 when nvidia-smi fails.
static long gpu_used_mib(int dev)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i %d 2>/dev/null", dev);
	FILE *p = popen(cmd, "r");
	if (!p)
		return -1;
	long v = -1;
	if (fscanf(p, "%ld", &v) != 1)
		v = -1;
	pclose(p);
	return v;
}

// An HBM row (PE 0, the others waiting in a barrier): the device's memory in use now, less base
// (taken before the job started), per PE.
static void hbm_print(const char *test, int dev, long base)
{
	long used = gpu_used_mib(dev);
	if (used >= 0 && base >= 0)
		printf("{\"test\":\"%s\",\"backend\":\"nvshmem\",\"pes\":%d,\"size_bytes\":0,\"blocks\":0,\"latency_us\":0,"
		       "\"bandwidth_gbps\":0,\"hbm_mib_per_pe\":%.1f}\n",
		       test, g_npes, (double)(used - base) / g_npes);
	fflush(stdout);
}

static void hbm_row(const char *test, int dev, long base)
{
	nvshmem_barrier_all();
	if (g_me == 0)
		hbm_print(test, dev, base);
	nvshmem_barrier_all();
}

// Before NVSHMEM is up, a barrier through files beside the unique id's: PE i creates
// UIDFILE.step.i and waits for every PE's.
static void file_barrier(const char *uidfile, const char *step)
{
	char name[4096];
	snprintf(name, sizeof name, "%s.%s.%d", uidfile, step, g_me);
	FILE *f = fopen(name, "w");
	if (f)
		fclose(f);
	for (int pe = 0; pe < g_npes; pe++) {
		snprintf(name, sizeof name, "%s.%s.%d", uidfile, step, pe);
		for (int i = 0; i < 60000 && access(name, F_OK) != 0; i++)
			usleep(1000);
	}
}

static bool wanted(const std::string &tests, const char *name)
{
	if (tests == "all" || tests.empty())
		return true;
	std::string list = "," + tests + ",";
	return list.find(std::string(",") + name + ",") != std::string::npos;
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: nvshmem_bench ITERS ROUNDS TESTS UIDFILE HBM_BASE_MIB\n");
		return 2;
	}
	uint64_t iters = strtoull(argv[1], 0, 10);
	int rounds = atoi(argv[2]);
	std::string tests = argv[3];
	const char *uidfile = argv[4];
	const char *pe_env = getenv("ROX_PE"), *n_env = getenv("ROX_NPES");
	if (!pe_env || !n_env) {
		fprintf(stderr, "nvshmem_bench: ROX_PE and ROX_NPES are not set (roxrun bench --compare nvshmem starts it)\n");
		return 2;
	}
	g_me = atoi(pe_env);
	g_npes = atoi(n_env);
	long base = atol(argv[5]);
	int ndev = 0;
	CHECK(cudaGetDeviceCount(&ndev));
	int dev = g_me % ndev;
	CHECK(cudaSetDevice(dev));
	CHECK(cudaFree(0));
	bool hbm = wanted(tests, "hbm");
	if (hbm) {
		// Every PE holds its context: what a bare one costs, measured as the other rows are.
		file_barrier(uidfile, "ctx");
		if (g_me == 0)
			hbm_print("hbm_context", dev, base);
		file_barrier(uidfile, "ctxdone");
	}

	// The unique id: PE 0 writes it whole (a rename), the others wait for the file.
	nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
	if (g_me == 0) {
		nvshmemx_get_uniqueid(&id);
		std::string tmp = std::string(uidfile) + ".tmp";
		FILE *f = fopen(tmp.c_str(), "wb");
		if (!f || fwrite(&id, sizeof id, 1, f) != 1 || fclose(f) != 0 || rename(tmp.c_str(), uidfile) != 0) {
			fprintf(stderr, "nvshmem_bench PE 0: writing %s failed\n", uidfile);
			return 3;
		}
	} else {
		FILE *f = 0;
		for (int i = 0; i < 60000 && !(f = fopen(uidfile, "rb")); i++)
			usleep(1000);
		if (!f || fread(&id, sizeof id, 1, f) != 1) {
			fprintf(stderr, "nvshmem_bench PE %d: no unique id in %s after 60 s\n", g_me, uidfile);
			return 3;
		}
		fclose(f);
	}
	nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
	nvshmemx_set_attr_uniqueid_args(g_me, g_npes, &id, &attr);
	if (nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr) != 0) {
		fprintf(stderr, "nvshmem_bench PE %d: nvshmemx_init_attr failed\n", g_me);
		return 3;
	}
	if (nvshmem_my_pe() != g_me || nvshmem_n_pes() != g_npes) {
		fprintf(stderr, "nvshmem_bench PE %d: NVSHMEM says PE %d of %d\n", g_me, nvshmem_my_pe(), nvshmem_n_pes());
		return 3;
	}
	if (hbm)
		hbm_row("hbm_after_init", dev, base);

	const uint64_t max_size = 256ull << 20;
	uint64_t *words = (uint64_t *)nvshmem_malloc(64 * 8);
	uint8_t *dst = (uint8_t *)nvshmem_malloc(max_size), *src = (uint8_t *)nvshmem_malloc(max_size);
	uint64_t *out;
	if (!words || !dst || !src) {
		fprintf(stderr, "nvshmem_bench PE %d: nvshmem_malloc of 512 MiB failed (NVSHMEM_SYMMETRIC_SIZE?)\n", g_me);
		return 3;
	}
	CHECK(cudaMalloc(&out, 16));
	cudaStream_t st;
	CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	k_fill<<<264, 256, 0, st>>>(src, max_size, 12345 + g_me);
	CHECK(cudaStreamSynchronize(st));
	if (hbm)
		hbm_row("hbm_after_buffers", dev, base);

	int peer = g_npes - 1, other = peer - g_me;
	bool pair = g_me == 0 || g_me == peer;
	uint64_t *flag = words, *sig = words + 8, *target = words + 16;
	auto reset = [&](uint64_t *w) {
		nvshmem_barrier_all();
		CHECK(cudaMemset(w, 0, 8));
		CHECK(cudaDeviceSynchronize());
		nvshmem_barrier_all();
	};
	auto read_out = [&](int i) {
		uint64_t h[2];
		CHECK(cudaMemcpy(h, out, 16, cudaMemcpyDeviceToHost));
		return h[i];
	};

	for (int which = 0; which < 2; which++) {
		const char *test = which == 0 ? "p_pingpong" : "put_signal_pingpong";
		if (!wanted(tests, test))
			continue;
		uint64_t *w = which == 0 ? flag : sig;
		std::vector<double> per;
		for (int r = -1; r < rounds; r++) {
			uint64_t n = r < 0 ? 1000 : iters;
			reset(w);
			if (pair) {
				if (which == 0)
					k_p_pingpong<<<1, 1, 0, st>>>(flag, n, other, g_me == 0, out);
				else
					k_putsig_pingpong<<<1, 1, 0, st>>>(dst, sig, n, other, g_me == 0, out);
				CHECK(cudaStreamSynchronize(st));
			}
			if (r >= 0 && g_me == 0)
				per.push_back(read_out(0) / 1e3 / (2.0 * n));
		}
		latency_row(test, 8, per);
	}

	for (int which = 0; which < 2; which++) {
		const char *test = which == 0 ? "fetch_add_latency" : "fetch_add_pipelined";
		if (!wanted(tests, which == 0 ? "fetch_add_latency" : "fetch_add_pipelined"))
			continue;
		std::vector<double> per;
		for (int r = -1; r < rounds; r++) {
			uint64_t n = r < 0 ? 1000 : iters;
			reset(target);
			if (g_me == 0) {
				if (which == 0)
					k_fadd_latency<<<1, 1, 0, st>>>(target, n, peer, out);
				else
					k_fadd_pipelined<<<1, 1, 0, st>>>(target, n, peer, out);
				CHECK(cudaStreamSynchronize(st));
				if (read_out(1) != n * (n - 1) / 2) {
					fprintf(stderr, "nvshmem_bench: %s: the fetched values sum to %llu, want %llu\n", test,
						(unsigned long long)read_out(1), (unsigned long long)(n * (n - 1) / 2));
					return 4;
				}
				if (r >= 0)
					per.push_back(read_out(0) / 1e3 / n);
			}
		}
		latency_row(test, 8, per);
	}

	// fetch_add_words: the dependent loop on 16 words of the last PE's heap, 2 MiB + 4 KiB (+ 128
	// bytes more per word) apart, one timed run each after a warm-up (roxrun's fetch_add_words):
	// the median word with the fastest and the slowest.
	if (wanted(tests, "fetch_add_words")) {
		const uint64_t nwords = 16, stride = (2ull << 20) + (4 << 10);
		uint64_t *ws = (uint64_t *)nvshmem_malloc(nwords * stride);
		if (!ws) {
			fprintf(stderr, "nvshmem_bench PE %d: nvshmem_malloc of %llu bytes failed\n", g_me, (unsigned long long)(nwords * stride));
			return 3;
		}
		std::vector<double> per;
		for (uint64_t i = 0; i < nwords; i++) {
			uint64_t *word = ws + i * (stride / 8) + 16 * i;
			for (int r = 0; r < 2; r++) {
				uint64_t n = r == 0 ? 1000 : iters;
				reset(word);
				if (g_me != 0)
					continue;
				k_fadd_latency<<<1, 1, 0, st>>>(word, n, peer, out);
				CHECK(cudaStreamSynchronize(st));
				if (read_out(1) != n * (n - 1) / 2) {
					fprintf(stderr, "nvshmem_bench: fetch_add_words: word %llu: the fetched values sum to %llu, want %llu\n",
						(unsigned long long)i, (unsigned long long)read_out(1), (unsigned long long)(n * (n - 1) / 2));
					return 4;
				}
				if (r == 1)
					per.push_back(read_out(0) / 1e3 / n);
			}
		}
		latency_row("fetch_add_words", 8, per);
		nvshmem_barrier_all();
		nvshmem_free(ws);
	}

	const uint64_t sizes[] = {4 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20};
	// The repetitions of a round: 2 GiB's worth, 8 to 2000, and no more than a round of ~25 ms
	// at the warm-up's pace (Roxamen's bwIters, tools/bench/bench_gpu.go).
	auto iters_for = [](uint64_t size, double warm_ms) {
		uint64_t n = std::max<uint64_t>(8, std::min<uint64_t>(2000, (2ull << 30) / size));
		if (warm_ms > 0)
			n = std::min<uint64_t>(n, std::max<uint64_t>(8, (uint64_t)(25.0 / warm_ms)));
		return n;
	};
	cudaEvent_t e0, e1;
	CHECK(cudaEventCreate(&e0));
	CHECK(cudaEventCreate(&e1));
	// One bandwidth cell on PE 0 (the others wait at the barrier): a warm-up, then rounds timed runs.
	auto bw_cell = [&](const char *test, uint64_t size, int blocks, auto enqueue) {
		nvshmem_barrier_all();
		if (g_me != 0)
			return;
		CHECK(cudaEventRecord(e0, st));
		enqueue(1);
		CHECK(cudaEventRecord(e1, st));
		CHECK(cudaEventSynchronize(e1));
		float warm_ms = 0;
		CHECK(cudaEventElapsedTime(&warm_ms, e0, e1));
		uint64_t n = iters_for(size, warm_ms);
		std::vector<double> gbps;
		for (int r = 0; r < rounds; r++) {
			CHECK(cudaEventRecord(e0, st));
			enqueue(n);
			CHECK(cudaEventRecord(e1, st));
			CHECK(cudaEventSynchronize(e1));
			float ms = 0;
			CHECK(cudaEventElapsedTime(&ms, e0, e1));
			gbps.push_back((double)size * n / (ms * 1e-3) / 1e9);
		}
		bw_row(test, size, blocks, gbps);
	};
	if (wanted(tests, "put_bw"))
		for (int blocks : {1, 8, 32})
			for (uint64_t size : sizes)
				bw_cell("put_bw", size, blocks, [&](uint64_t n) { k_put_bw<<<blocks, 1024, 0, st>>>(dst, src, size, n, peer); });
	if (wanted(tests, "putmem_on_stream_bw"))
		for (uint64_t size : sizes)
			bw_cell("putmem_on_stream_bw", size, 1, [&](uint64_t n) {
				for (uint64_t i = 0; i < n; i++)
					nvshmemx_putmem_on_stream(dst, src, size, peer, st);
				nvshmemx_quiet_on_stream(st);
			});
	CHECK(cudaGetLastError());
	nvshmem_barrier_all();
	nvshmem_free(src);
	nvshmem_free(dst);
	nvshmem_free(words);
	nvshmem_finalize();
	return 0;
}
