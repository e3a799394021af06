/* A 4-PE job through libroxamen.so on the host backend: RMA, atomics, signals, barriers, teams,
 * contexts, collectives (blocking and on a stream), the error path and ep dispatch/combine.
 * Built and run by test/capi.sh:
 *   gcc -O1 -Wall -Iinclude examples/c/roxamen_test.c -L. -lroxamen -Wl,-rpath,"$PWD" -o roxamen_test
 *   roxrun -n 4 ./roxamen_test
 * Every PE prints "PE i: all checks passed" and exits 0, or names the first failed check. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "roxamen.h"

static int me = -1;

#define CHECK(cond, ...)                                                   \
	do {                                                                   \
		if (!(cond)) {                                                     \
			fprintf(stderr, "PE %d: %s:%d: check failed: ", me, __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                                  \
			fprintf(stderr, "\n");                                         \
			exit(1);                                                       \
		}                                                                  \
	} while (0)

/* OK runs a call that must succeed. */
#define OK(call)                                                                 \
	do {                                                                         \
		int rc_ = (call);                                                        \
		CHECK(rc_ == ROXAMEN_SUCCESS, "%s = %d: %s", #call, rc_, roxamen_error_message()); \
	} while (0)

static void ep_round(int mode, int n) {
	enum { HIDDEN = 8, TOPK = 2, EXPERTS = 8, MAXTOK = 4, NTOK = 3 };
	roxamen_ep_t buf;
	OK(roxamen_ep_create(HIDDEN, TOPK, EXPERTS, MAXTOK, ROXAMEN_EP_F32, mode, &buf));
	int cap = roxamen_ep_max_rows(buf), nloc = roxamen_ep_local_experts(buf);
	CHECK(nloc == EXPERTS / n, "local experts %d", nloc);
	float x[NTOK * HIDDEN], w[NTOK * TOPK], out[NTOK * HIDDEN];
	int64_t idx[NTOK * TOPK];
	for (int t = 0; t < NTOK; t++) {
		for (int h = 0; h < HIDDEN; h++) x[t * HIDDEN + h] = (float)(me * 100 + t * 10 + h);
		idx[t * TOPK] = (me + t) % EXPERTS;         /* two different experts per token */
		idx[t * TOPK + 1] = (me + t + 3) % EXPERTS;
		w[t * TOPK] = 0.5f;
		w[t * TOPK + 1] = 0.25f;
	}
	float *rx = calloc((size_t)cap * HIDDEN, sizeof(float)), *rw = calloc(cap, sizeof(float));
	int *counts = calloc(nloc, sizeof(int)), *src = calloc((size_t)cap * 3, sizeof(int)), rows = -1;
	roxamen_ep_handle_t h;
	OK(roxamen_ep_dispatch(buf, x, NTOK, idx, w, rx, cap, &rows, counts, rw, src, &h));
	int total = 0;
	for (int e = 0; e < nloc; e++) total += counts[e];
	CHECK(total == rows, "counts add up to %d, rows %d", total, rows);
	for (int r = 0; r < rows; r++) { /* each row is its source token */
		int spe = src[3 * r], tok = src[3 * r + 1];
		CHECK(rx[r * HIDDEN + 1] == (float)(spe * 100 + tok * 10 + 1), "row %d from PE %d token %d holds %g", r, spe, tok, rx[r * HIDDEN + 1]);
	}
	/* identity experts: combine gives (0.5 + 0.25) x */
	OK(roxamen_ep_combine(buf, h, rx, rows, out));
	for (int i = 0; i < NTOK * HIDDEN; i++) CHECK(fabsf(out[i] - 0.75f * x[i]) <= 1e-4f * fabsf(x[i]) + 1e-6f, "out[%d] = %g, want %g", i, out[i], 0.75f * x[i]);
	/* a bad expert is an error naming the value, and nothing is sent */
	idx[0] = EXPERTS + 5;
	CHECK(roxamen_ep_dispatch(buf, x, NTOK, idx, w, rx, cap, &rows, counts, NULL, NULL, &h) == ROXAMEN_ERR_EXPERT_RANGE, "bad expert accepted");
	CHECK(strstr(roxamen_error_message(), "topkIdx[0][0] = 13") != NULL, "message: %s", roxamen_error_message());
	OK(roxamen_ep_handle_free(buf, h));
	OK(roxamen_barrier_all());
	OK(roxamen_ep_destroy(buf));
	free(rx), free(rw), free(counts), free(src);
}

int main(void) {
	CHECK(roxamen_my_pe() == -1, "my_pe before init");
	CHECK(roxamen_barrier_all() == ROXAMEN_ERR_NOT_INITIALIZED, "barrier before init");
	OK(roxamen_init());
	me = roxamen_my_pe();
	int n = roxamen_n_pes();
	CHECK(n == 4, "n_pes %d, want 4", n);
	int right = (me + 1) % n, left = (me + n - 1) % n;

	/* put and get */
	int64_t *a = roxamen_calloc(8, sizeof(int64_t));
	CHECK(a != NULL, "calloc: %s", roxamen_error_message());
	int64_t v[8];
	for (int i = 0; i < 8; i++) v[i] = me * 1000 + i;
	OK(roxamen_putmem(a, v, sizeof v, right));
	OK(roxamen_barrier_all());
	for (int i = 0; i < 8; i++) CHECK(a[i] == left * 1000 + i, "a[%d] = %ld after the put from PE %d", i, (long)a[i], left);
	int64_t g[2];
	OK(roxamen_getmem(g, &a[3], sizeof g, right)); /* an address inside the allocation */
	CHECK(g[0] == me * 1000 + 3 && g[1] == me * 1000 + 4, "get %ld %ld", (long)g[0], (long)g[1]);
	OK(roxamen_getmem_nbi(g, &a[5], sizeof(int64_t), left));
	OK(roxamen_quiet());
	CHECK(g[0] == ((left + n - 1) % n) * 1000 + 5, "get_nbi %ld", (long)g[0]);
	int64_t *peer = roxamen_ptr(a, right);
	const char *delivery = getenv("ROX_DELIVERY");
	if (delivery && strcmp(delivery, "reorder") == 0)
		CHECK(peer == NULL, "roxamen_ptr under ROX_DELIVERY=reorder maps nothing");
	else
		CHECK(peer != NULL && peer[0] == me * 1000, "roxamen_ptr on one node");

	/* atomics */
	int64_t *ctr = roxamen_calloc(2, sizeof(int64_t)), old;
	OK(roxamen_barrier_all());
	OK(roxamen_int64_atomic_fetch_add(&ctr[0], me + 1, 0, &old));
	OK(roxamen_int64_atomic_add(&ctr[1], 1, right));
	OK(roxamen_barrier_all());
	if (me == 0) CHECK(ctr[0] == n * (n + 1) / 2, "fetch_add total %ld", (long)ctr[0]);
	CHECK(ctr[1] == 1, "add %ld", (long)ctr[1]);
	OK(roxamen_barrier_all());
	OK(roxamen_int64_atomic_compare_swap(&ctr[1], 1, 10 + me, right, &old)); /* only this PE targets right */
	CHECK(old == 1, "compare_swap old %ld", (long)old);
	OK(roxamen_barrier_all());
	CHECK(ctr[1] == 10 + left, "compare_swap stored %ld", (long)ctr[1]);
	uint64_t *bits = roxamen_calloc(1, 8), ob;
	OK(roxamen_barrier_all());
	OK(roxamen_uint64_atomic_fetch_or(bits, 1ull << me, 0, &ob));
	double *fd = roxamen_calloc(1, sizeof(double)), fv = 2.5, fo;
	OK(roxamen_atomic(ROXAMEN_AMO_SET, ROXAMEN_FLOAT64, fd, &fv, NULL, NULL, me));
	OK(roxamen_quiet()); /* a non-fetching atomic is complete only at quiet */
	OK(roxamen_atomic(ROXAMEN_AMO_FETCH, ROXAMEN_FLOAT64, fd, NULL, NULL, &fo, me));
	CHECK(fo == 2.5, "float fetch %g", fo);
	OK(roxamen_barrier_all());
	if (me == 0) CHECK(*bits == (1ull << n) - 1, "fetch_or bits %lx", (unsigned long)*bits);

	/* put with signal */
	uint64_t *sig = roxamen_calloc(1, sizeof(uint64_t)), got = 0;
	int32_t *msg = roxamen_calloc(4, sizeof(int32_t)), mv[4] = {me, me + 1, me + 2, me + 3};
	OK(roxamen_barrier_all());
	OK(roxamen_putmem_signal(msg, mv, sizeof mv, sig, 1, ROXAMEN_SIGNAL_ADD, right));
	OK(roxamen_signal_wait_until(sig, ROXAMEN_CMP_GE, 1, &got));
	CHECK(got == 1 && msg[0] == left && msg[3] == left + 3, "signal %lu, msg %d..%d", (unsigned long)got, msg[0], msg[3]);
	OK(roxamen_signal_fetch(sig, &got));
	CHECK(got == 1, "signal_fetch %lu", (unsigned long)got);

	/* contexts */
	roxamen_ctx_t cx;
	OK(roxamen_ctx_create(ROXAMEN_CTX_PRIVATE, &cx));
	OK(roxamen_ctx_putmem(cx, &a[7], v, sizeof(int64_t), right));
	OK(roxamen_ctx_quiet(cx));
	int64_t one = 1;
	OK(roxamen_ctx_atomic(cx, ROXAMEN_AMO_FETCH_ADD, ROXAMEN_INT64, &ctr[0], &one, NULL, &old, right));
	OK(roxamen_ctx_destroy(cx));
	OK(roxamen_barrier_all());
	CHECK(a[7] == left * 1000, "ctx put %ld", (long)a[7]);

	/* collectives over the world */
	double *ds = roxamen_malloc(4 * sizeof(double)), *dd = roxamen_malloc(4 * sizeof(double));
	for (int i = 0; i < 4; i++) ds[i] = me + 0.5 * i;
	OK(roxamen_allreduce(ROXAMEN_TEAM_WORLD, ROXAMEN_FLOAT64, ROXAMEN_SUM, dd, ds, 4));
	for (int i = 0; i < 4; i++) CHECK(dd[i] == n * (n - 1) / 2.0 + n * 0.5 * i, "allreduce sum [%d] %g", i, dd[i]);
	OK(roxamen_allreduce(ROXAMEN_TEAM_WORLD, ROXAMEN_FLOAT64, ROXAMEN_MAX, dd, ds, 4));
	CHECK(dd[0] == n - 1, "allreduce max %g", dd[0]);
	int32_t *is = roxamen_malloc(4 * n * sizeof(int32_t)), *id = roxamen_malloc(4 * n * sizeof(int32_t));
	for (int i = 0; i < 4 * n; i++) is[i] = me * 100 + i;
	OK(roxamen_allreduce(ROXAMEN_TEAM_WORLD, ROXAMEN_INT32, ROXAMEN_MIN, id, is, 4));
	CHECK(id[3] == 3, "allreduce min %d", id[3]);
	OK(roxamen_alltoall(ROXAMEN_TEAM_WORLD, ROXAMEN_INT32, id, is, 4)); /* block j of PE i -> block i of PE j */
	for (int j = 0; j < n; j++) CHECK(id[4 * j + 1] == j * 100 + 4 * me + 1, "alltoall block %d: %d", j, id[4 * j + 1]);
	OK(roxamen_fcollect(ROXAMEN_TEAM_WORLD, ROXAMEN_INT32, id, is, 2));
	for (int j = 0; j < n; j++) CHECK(id[2 * j] == j * 100, "fcollect %d: %d", j, id[2 * j]);
	OK(roxamen_broadcast(ROXAMEN_TEAM_WORLD, ROXAMEN_INT32, id, is, 4, 2));
	CHECK(id[1] == 201, "broadcast %d", id[1]);
	OK(roxamen_reduce_scatter(ROXAMEN_TEAM_WORLD, ROXAMEN_INT32, ROXAMEN_SUM, id, is, 4));
	CHECK(id[0] == 100 * n * (n - 1) / 2 + n * (4 * me), "reduce_scatter %d", id[0]);
	roxamen_stream_t st;
	OK(roxamen_stream_create(&st));
	OK(roxamen_allreduce_on_stream(st, ROXAMEN_TEAM_WORLD, ROXAMEN_FLOAT64, ROXAMEN_SUM, dd, ds, 4));
	OK(roxamen_stream_sync(st));
	CHECK(dd[1] == n * (n - 1) / 2.0 + n * 0.5, "allreduce on stream %g", dd[1]);
	/* The host backend has no vendor streams: a handle not from roxamen_stream_create (NULL, the
	 * default stream on a GPU) is refused, and the program's device code has no state to link. */
	CHECK(roxamen_allreduce_on_stream(NULL, ROXAMEN_TEAM_WORLD, ROXAMEN_FLOAT64, ROXAMEN_SUM, dd, ds, 4) == ROXAMEN_ERR_BAD_ARGUMENT &&
	          strstr(roxamen_error_message(), "roxamen_allreduce_on_stream on PE") &&
	          strstr(roxamen_error_message(), "not a live stream of roxamen_stream_create"),
	      "NULL stream on the host backend: %s", roxamen_error_message());
	CHECK(roxamen_stream_destroy((char *)st + 4096) == ROXAMEN_ERR_BAD_ARGUMENT &&
	          strstr(roxamen_error_message(), "roxamen_stream_destroy on PE"),
	      "destroying a stream the library did not make: %s", roxamen_error_message());
	CHECK(roxamen_link_state(dd, 640) == ROXAMEN_ERR_NOT_SUPPORTED && strstr(roxamen_error_message(), "LinkState on PE"),
	      "link_state on the host backend: %s", roxamen_error_message());
	OK(roxamen_stream_destroy(st));
	CHECK(roxamen_stream_sync(st) == ROXAMEN_ERR_BAD_ARGUMENT, "sync of a destroyed stream: %s", roxamen_error_message());

	/* teams */
	roxamen_team_t even, x, y;
	OK(roxamen_team_split_strided(ROXAMEN_TEAM_WORLD, 0, 2, n / 2, &even));
	if (me % 2 == 0) {
		CHECK(even >= 0 && roxamen_team_n_pes(even) == n / 2 && roxamen_team_my_pe(even) == me / 2, "even team");
		CHECK(roxamen_team_translate_pe(even, 1, ROXAMEN_TEAM_WORLD) == 2, "translate");
		OK(roxamen_allreduce(even, ROXAMEN_FLOAT64, ROXAMEN_SUM, dd, ds, 1));
		CHECK(dd[0] == 0 + 2, "even-team sum %g", dd[0]);
		OK(roxamen_team_destroy(even));
	} else {
		CHECK(even == ROXAMEN_TEAM_INVALID, "odd PE in the even team: %d", even);
	}
	OK(roxamen_team_split_2d(ROXAMEN_TEAM_WORLD, 2, &x, &y));
	CHECK(roxamen_team_n_pes(x) == 2 && roxamen_team_my_pe(x) == me % 2 && roxamen_team_my_pe(y) == me / 2, "2d split");
	OK(roxamen_team_sync(x));
	OK(roxamen_team_destroy(x));
	OK(roxamen_team_destroy(y));

	/* the error path: the runtime's code and text */
	CHECK(roxamen_putmem(a, v, 8, 7) == ROXAMEN_ERR_PE_RANGE, "put to PE 7 accepted");
	char want[128];
	snprintf(want, sizeof want, "shmem: Put on PE %d: PE out of range: target PE 7, want 0 <= pe < 4", me);
	CHECK(strcmp(roxamen_error_message(), want) == 0, "message %s", roxamen_error_message());
	CHECK(roxamen_putmem(v, v, 8, 0) == ROXAMEN_ERR_NOT_SYMMETRIC, "put to a stack address accepted");
	CHECK(strstr(roxamen_error_message(), "roxamen_putmem on PE") && strstr(roxamen_error_message(), "not inside a live symmetric allocation"), "message %s", roxamen_error_message());
	CHECK(roxamen_putmem(&a[6], v, 3 * sizeof(int64_t), 0) == ROXAMEN_ERR_BOUNDS, "put past the end accepted");
	CHECK(roxamen_atomic(ROXAMEN_AMO_FETCH_ADD, ROXAMEN_INT64, (char *)a + 4, &one, NULL, &old, 0) == ROXAMEN_ERR_MISALIGNED, "misaligned AMO accepted");
	CHECK(roxamen_allreduce(ROXAMEN_TEAM_WORLD, 99, ROXAMEN_SUM, dd, ds, 1) == ROXAMEN_ERR_BAD_ARGUMENT, "bad dtype");
	CHECK(roxamen_team_n_pes(12345) == -1, "dead team handle");

	ep_round(ROXAMEN_EP_NORMAL, n);
	ep_round(ROXAMEN_EP_LOW_LATENCY, n);

	OK(roxamen_free(a));
	CHECK(roxamen_free(a) == ROXAMEN_ERR_NOT_SYMMETRIC, "double free accepted");
	OK(roxamen_finalize());
	CHECK(roxamen_barrier_all() == ROXAMEN_ERR_NOT_INITIALIZED, "barrier after finalize");
	printf("PE %d: all checks passed\n", me);
	return 0;
}
