/* Roxamen's comparison program for OpenSHMEM (built with oshcc, run with oshrun -np 2 by
   `roxrun bench --compare oshmem`). It measures what roxrun bench's host rows measure, the same
   way: PE 0 and the last PE are the pair; every latency figure is taken over ROUNDS rounds and
   printed as median, min and max; one JSON object per line in roxrun bench --json's format.
   Arguments: ITERS (round trips per latency round, default 20000), ROUNDS (default 5), TESTS
   (the rows to run, comma-separated test names; default all). */
#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

/* only lists the tests to run, comma-separated (argument 3); NULL or empty: all of them. */
static const char *only;

static int want(const char *test) {
  if (only == NULL || *only == 0) return 1;
  size_t n = strlen(test);
  for (const char *p = only; (p = strstr(p, test)) != NULL; p += n)
    if ((p == only || p[-1] == ',') && (p[n] == ',' || p[n] == 0)) return 1;
  return 0;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int npes;

/* row prints one result: per_op[r] is the time of one operation in round r, in microseconds. */
static void row(const char *test, size_t size, double *per_op, int rounds) {
  qsort(per_op, rounds, sizeof(double), cmp);
  double med = rounds % 2 ? per_op[rounds / 2] : (per_op[rounds / 2 - 1] + per_op[rounds / 2]) / 2;
  double bw = strcmp(test, "put_bw") == 0 || strcmp(test, "get_bw") == 0 ? size / med / 1e3 : 0; /* GB/s */
  printf("{\"test\":\"%s\",\"backend\":\"oshmem\",\"pes\":%d,\"size_bytes\":%zu,\"blocks\":1,"
         "\"latency_us\":%.4f,\"latency_min_us\":%.4f,\"latency_max_us\":%.4f,\"rounds\":%d,\"bandwidth_gbps\":%.3f}\n",
         test, npes, size, med, per_op[0], per_op[rounds - 1], rounds, bw);
  fflush(stdout);
}

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 20000;
  int rounds = argc > 2 ? atoi(argv[2]) : 5;
  only = argc > 3 ? argv[3] : NULL;
  if (iters < 1 || rounds < 1 || rounds > 100) {
    fprintf(stderr, "usage: oshmem_bench [ITERS [ROUNDS]]\n");
    return 2;
  }
  shmem_init();
  int me = shmem_my_pe();
  npes = shmem_n_pes();
  int peer = npes - 1;
  static long flag = 0, word = 0;
  size_t maxb = 16 << 20;
  char *buf = shmem_malloc(maxb), *src = malloc(maxb);
  if (buf == NULL || src == NULL) {
    fprintf(stderr, "oshmem_bench: cannot allocate %zu bytes\n", maxb);
    shmem_global_exit(1);
  }
  for (size_t i = 0; i < maxb; i++) src[i] = (char)i;
  double per[100];
  int warm = iters / 10;
  long seq = 0;

  /* p_pingpong: 8 bytes there and back, one-way time. */
  shmem_barrier_all();
  if (want("p_pingpong") && (me == 0 || me == peer)) {
    int other = peer - me;
    for (int r = -1; r < rounds; r++) {
      int n = r < 0 ? warm : iters;
      double t0 = now_us();
      for (int i = 0; i < n; i++) {
        seq++;
        if (me == 0) {
          shmem_long_p(&flag, seq, other);
          shmem_long_wait_until(&flag, SHMEM_CMP_EQ, seq);
        } else {
          shmem_long_wait_until(&flag, SHMEM_CMP_EQ, seq);
          shmem_long_p(&flag, seq, other);
        }
      }
      if (r >= 0) per[r] = (now_us() - t0) / (2.0 * n);
    }
    if (me == 0) row("p_pingpong", 8, per, rounds);
  }

  /* put_bw and get_bw: PE 0 moves SIZE bytes ITERS times, then quiet. */
  size_t sizes[] = {8, 64, 512, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20};
  for (int get = 0; get < 2; get++) {
    for (int k = 0; k < 10; k++) {
      size_t sz = sizes[k];
      int it = sz <= 65536 ? 20000 : (sz <= (1 << 20) ? 500 : 50);
      if (!want(get ? "get_bw" : "put_bw")) continue;
      shmem_barrier_all();
      if (me != 0) continue;
      if (get) shmem_getmem(src, buf, sz, peer); else shmem_putmem(buf, src, sz, peer);
      shmem_quiet();
      for (int r = 0; r < rounds; r++) {
        double t0 = now_us();
        for (int i = 0; i < it; i++) {
          if (get) shmem_getmem_nbi(src, buf, sz, peer); else shmem_putmem_nbi(buf, src, sz, peer);
        }
        shmem_quiet();
        per[r] = (now_us() - t0) / it;
      }
      row(get ? "get_bw" : "put_bw", sz, per, rounds);
    }
  }

  /* fetch_add_latency: PE 0 adds to a word of the last PE. */
  shmem_barrier_all();
  if (want("fetch_add_latency") && me == 0) {
    long sum = 0, want = 0, calls = 0;
    for (int r = -1; r < rounds; r++) {
      int n = r < 0 ? warm : iters;
      double t0 = now_us();
      for (int i = 0; i < n; i++) {
        sum += shmem_long_atomic_fetch_add(&word, 1, peer);
        want += calls++;
      }
      if (r >= 0) per[r] = (now_us() - t0) / n;
    }
    if (sum != want) {
      fprintf(stderr, "oshmem_bench: fetch_add: the fetched values sum to %ld, want %ld\n", sum, want);
      shmem_global_exit(1);
    }
    row("fetch_add_latency", 8, per, rounds);
  }

  /* barrier_all_latency: every PE, 5000 barriers a round after 500 to warm up. */
  shmem_barrier_all();
  if (want("barrier_all_latency")) {
    for (int i = 0; i < 500; i++) shmem_barrier_all();
    for (int r = 0; r < rounds; r++) {
      double t0 = now_us();
      for (int i = 0; i < 5000; i++) shmem_barrier_all();
      per[r] = (now_us() - t0) / 5000;
    }
    if (me == 0) row("barrier_all_latency", 0, per, rounds);
  }

  shmem_free(buf);
  free(src);
  shmem_finalize();
  return 0;
}
