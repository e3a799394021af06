/* Roxamen's MPI comparison for expert-parallel dispatch and combine (built with mpicc, run with
   mpirun by `roxrun bench --compare mpi-ep`): the exchange shmem/ep does, written the way an MPI
   user writes it. Dispatch: pack each token once per destination rank (payload and the same
   routing metadata as shmem/ep's rows), MPI_Alltoall of the counts, MPI_Alltoallv of the rows,
   then copy the rows into per-local-expert groups. Combine: the weighted partial sum per (token,
   rank) in float32, rounded to bf16, MPI_Alltoallv back, summed per token in float32 and rounded
   to bf16 once (shmem/ep's Combine returns bf16). The
   routings are tools/bench/bench_ep.go's, from the same splitmix64 generator, so that every rank
   sends the same uneven splits as in Roxamen's rows. Rows: ep_dispatch_ll / ep_combine_ll (128
   tokens, hidden 7168) and ep_dispatch / ep_combine (1024 tokens, hidden 1024), bf16, top-8,
   16 experts per rank; latency is the median over ROUNDS rounds of the mean over a round's
   calls; bandwidth is rank 0's payload bytes sent per call over it. Arguments: ITERS (unused:
   the calls per round are fixed, as in Roxamen's rows), ROUNDS, TESTS. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int me, np;
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

static void row(const char *test, size_t size, double *per_op, int rounds, double bytes) {
  if (me != 0) return;
  qsort(per_op, rounds, sizeof(double), cmp);
  double med = rounds % 2 ? per_op[rounds / 2] : (per_op[rounds / 2 - 1] + per_op[rounds / 2]) / 2;
  printf("{\"test\":\"%s\",\"backend\":\"mpi\",\"pes\":%d,\"size_bytes\":%zu,\"blocks\":1,"
         "\"latency_us\":%.4f,\"latency_min_us\":%.4f,\"latency_max_us\":%.4f,\"rounds\":%d,"
         "\"bandwidth_gbps\":%.6f}\n",
         test, np, size, med * 1e6, per_op[0] * 1e6, per_op[rounds - 1] * 1e6, rounds, bytes / med / 1e9);
  fflush(stdout);
}

/* splitmix64, as bench_ep.go's epRNG. */
static uint64_t sm_next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static uint16_t f2bf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)(u >> 16 | 0x40);
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}

static float bf2f(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* One shape: tokens of rank p = epTokens(tokens, p); see bench_ep.go. */
static void run(const char *dname, const char *cname, int tokens, int hidden, int iters, int rounds) {
  const int K = 8, E = 16 * np, L = 16;
  int n = tokens - me * tokens / (2 * np); /* uneven: rank p has tokens - p*tokens/(2*np) */
  size_t pay = (size_t)hidden * 2, rowb = ((pay + 7) & ~(size_t)7) + 8 * K + 4;
  rowb = (rowb + 7) & ~(size_t)7;
  uint16_t *x = malloc(pay * n);
  int64_t *idx = malloc(sizeof(int64_t) * K * n);
  float *wts = malloc(sizeof(float) * K * n);
  uint64_t s = 0x5eed0000ULL + (uint64_t)me * 0x10001ULL;
  for (int i = 0; i < n * hidden; i++) x[i] = (uint16_t)(sm_next(&s) >> 48);
  for (int t = 0; t < n; t++) {
    for (int k = 0; k < K; k++) {
      int64_t e;
      for (;;) {
        uint64_t r = sm_next(&s);
        e = (r & 1) ? (int64_t)((r >> 1) % (uint64_t)(E / 2)) : (int64_t)((r >> 1) % (uint64_t)E);
        int dup = 0;
        for (int j = 0; j < k; j++) dup |= idx[t * K + j] == e;
        if (!dup) break;
      }
      idx[t * K + k] = e;
      wts[t * K + k] = (float)(sm_next(&s) >> 40) / (float)(1 << 24);
    }
  }
  /* Routing: each token once per destination rank, in token order. */
  int *scount = calloc(np, sizeof(int)), *rcount = calloc(np, sizeof(int));
  int *sdisp = calloc(np, sizeof(int)), *rdisp = calloc(np, sizeof(int));
  int *slot_tok = malloc(sizeof(int) * n * np); /* [dest][i] -> token */
  for (int t = 0; t < n; t++)
    for (int k = 0; k < K; k++) {
      int d = (int)(idx[t * K + k] / L), first = 1;
      for (int j = 0; j < k; j++) first &= (int)(idx[t * K + j] / L) != d;
      if (first) slot_tok[d * n + scount[d]++] = t;
    }
  char *sbuf = malloc(rowb * n * np + 1), *rbuf = malloc(rowb * tokens * np + 1);
  uint16_t *grouped = malloc(pay * tokens * np * K + 1);
  float *gw = malloc(sizeof(float) * tokens * np * K + 1);
  int *entry_row = malloc(sizeof(int) * tokens * np * K + 1);
  uint16_t *cs = malloc(pay * tokens * np + 1), *cr = malloc(pay * n * np + 1);
  float *part = malloc(sizeof(float) * hidden), *out = malloc(sizeof(float) * hidden * (n + 1));
  int *ccnt_s = calloc(np, sizeof(int)), *ccnt_r = calloc(np, sizeof(int));
  int *cdisp_s = calloc(np, sizeof(int)), *cdisp_r = calloc(np, sizeof(int));
  int *entry_from = malloc(sizeof(int) * (tokens * np + 1));
  uint16_t *outb = malloc(pay * (n + 1));
  /* The row type is made once, as a program that exchanges rows of one shape would. */
  MPI_Datatype rowt;
  MPI_Type_contiguous((int)rowb, MPI_BYTE, &rowt);
  MPI_Type_commit(&rowt);
  double dper[100], cper[100], dbytes = 0, cbytes = 0;
  for (int d = 0; d < np; d++) dbytes += (double)scount[d] * pay;
  cbytes = 0;
  for (int r = -1; r < rounds; r++) {
    double td = 0, tc = 0;
    int it = r < 0 ? 1 : iters;
    for (int c = 0; c < it; c++) {
      double t0 = MPI_Wtime();
      /* dispatch: pack */
      int off = 0;
      for (int d = 0; d < np; d++) {
        sdisp[d] = off;
        for (int i = 0; i < scount[d]; i++) {
          int t = slot_tok[d * n + i];
          char *row = sbuf + (size_t)(off + i) * rowb, *meta = row + ((pay + 7) & ~(size_t)7);
          memcpy(row, x + (size_t)t * hidden, pay);
          for (int k = 0; k < K; k++) {
            int32_t li = (int)(idx[t * K + k] / L) == d ? (int32_t)(idx[t * K + k] - d * L) : -1;
            memcpy(meta + 4 * k, &li, 4);
            memcpy(meta + 4 * (K + k), &wts[t * K + k], 4);
          }
          memcpy(meta + 8 * K, &t, 4);
        }
        off += scount[d];
      }
      MPI_Alltoall(scount, 1, MPI_INT, rcount, 1, MPI_INT, MPI_COMM_WORLD);
      int roff = 0;
      for (int d = 0; d < np; d++) rdisp[d] = roff, roff += rcount[d];
      MPI_Alltoallv(sbuf, scount, sdisp, rowt, rbuf, rcount, rdisp, rowt, MPI_COMM_WORLD);
      /* group by local expert */
      int counts[16] = {0}, next[16];
      for (int i = 0; i < roff; i++) {
        char *meta = rbuf + (size_t)i * rowb + ((pay + 7) & ~(size_t)7);
        for (int k = 0; k < K; k++) {
          int32_t li;
          memcpy(&li, meta + 4 * k, 4);
          if (li >= 0) counts[li]++;
        }
      }
      next[0] = 0;
      for (int l = 1; l < L; l++) next[l] = next[l - 1] + counts[l - 1];
      int ne = 0;
      for (int i = 0; i < roff; i++) {
        char *row = rbuf + (size_t)i * rowb, *meta = row + ((pay + 7) & ~(size_t)7);
        entry_from[i] = ne;
        for (int k = 0; k < K; k++) {
          int32_t li;
          memcpy(&li, meta + 4 * k, 4);
          if (li < 0) continue;
          int g = next[li]++;
          memcpy(grouped + (size_t)g * hidden, row, pay);
          memcpy(&gw[g], meta + 4 * (K + k), 4);
          entry_row[ne++] = g;
        }
      }
      entry_from[roff] = ne;
      double t1 = MPI_Wtime();
      /* combine: the expert output is the grouped rows themselves (no expert compute, as in
         Roxamen's rows); partial sums per received token, back in bf16 */
      for (int i = 0; i < roff; i++) {
        memset(part, 0, sizeof(float) * hidden);
        for (int e = entry_from[i]; e < entry_from[i + 1]; e++) {
          uint16_t *y = grouped + (size_t)entry_row[e] * hidden;
          float w = gw[entry_row[e]];
          for (int j = 0; j < hidden; j++) part[j] += w * bf2f(y[j]);
        }
        for (int j = 0; j < hidden; j++) cs[(size_t)i * hidden + j] = f2bf(part[j]);
      }
      for (int d = 0; d < np; d++) {
        ccnt_s[d] = rcount[d] * hidden, cdisp_s[d] = rdisp[d] * hidden;
        ccnt_r[d] = scount[d] * hidden, cdisp_r[d] = sdisp[d] * hidden;
      }
      MPI_Alltoallv(cs, ccnt_s, cdisp_s, MPI_UINT16_T, cr, ccnt_r, cdisp_r, MPI_UINT16_T, MPI_COMM_WORLD);
      memset(out, 0, sizeof(float) * hidden * (n + 1));
      for (int d = 0; d < np; d++)
        for (int i = 0; i < scount[d]; i++) {
          int t = slot_tok[d * n + i];
          uint16_t *src = cr + (size_t)(sdisp[d] + i) * hidden;
          for (int j = 0; j < hidden; j++) out[(size_t)t * hidden + j] += bf2f(src[j]);
        }
      /* the output in bf16, rounded once, as shmem/ep's Combine returns it */
      for (size_t j = 0; j < (size_t)n * hidden; j++) outb[j] = f2bf(out[j]);
      double t2 = MPI_Wtime();
      td += t1 - t0, tc += t2 - t1;
      if (c == 0 && r < 0) {
        cbytes = 0;
        for (int d = 0; d < np; d++) cbytes += (double)rcount[d] * pay;
      }
    }
    if (r >= 0) dper[r] = td / iters, cper[r] = tc / iters;
    MPI_Barrier(MPI_COMM_WORLD);
  }
  if (want(dname)) row(dname, (size_t)tokens * pay, dper, rounds, dbytes);
  if (want(cname)) row(cname, (size_t)tokens * pay, cper, rounds, cbytes);
  free(x), free(idx), free(wts), free(scount), free(rcount), free(sdisp), free(rdisp), free(slot_tok);
  free(sbuf), free(rbuf), free(grouped), free(gw), free(entry_row), free(cs), free(cr), free(part), free(out);
  free(ccnt_s), free(ccnt_r), free(cdisp_s), free(cdisp_r), free(entry_from), free(outb);
  MPI_Type_free(&rowt);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  int rounds = argc > 2 ? atoi(argv[2]) : 5;
  only = argc > 3 ? argv[3] : NULL;
  if (rounds < 1 || rounds > 100 || np < 2) {
    if (me == 0) fprintf(stderr, "usage: mpirun -np N (N >= 2) mpi_ep_bench [ITERS [ROUNDS [TESTS]]]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (want("ep_dispatch_ll") || want("ep_combine_ll")) run("ep_dispatch_ll", "ep_combine_ll", 128, 7168, 20, rounds);
  if (want("ep_dispatch") || want("ep_combine")) run("ep_dispatch", "ep_combine", 1024, 1024, 5, rounds);
  MPI_Finalize();
  return 0;
}
