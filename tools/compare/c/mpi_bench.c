/* Roxamen's comparison program for MPI (built with mpicc, run with mpirun by
   `roxrun bench --compare mpi`). It measures what roxrun bench's host rows measure, with MPI's
   nearest calls: p_pingpong is an 8-byte MPI_Send/MPI_Recv ping-pong between rank 0 and the last
   rank; put_bw/get_bw are MPI_Put/MPI_Get on a passive-target window closed by MPI_Win_flush (as
   putmem_nbi + quiet); fetch_add_latency is MPI_Fetch_and_op + MPI_Win_flush; barrier_all_latency
   is MPI_Barrier; and the collectives (allreduce of float32 sums, allgather, alltoall, broadcast,
   reduce_scatter; size = bytes per PE) report bus bandwidth by nccl-tests' convention. Every
   figure is the median over ROUNDS rounds, with min and max; one JSON object per line in
   roxrun bench --json's format. Arguments: ITERS (round trips per latency round, default 20000),
   ROUNDS (default 5), TESTS (the rows to run, comma-separated test names; default all). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int me, np;

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

/* row prints one result on rank 0: per_op[r] is one operation's time in round r, in seconds. */
static void row(const char *test, size_t size, double *per_op, int rounds, double bw_bytes, double busbw_factor) {
  if (me != 0) return;
  qsort(per_op, rounds, sizeof(double), cmp);
  double med = rounds % 2 ? per_op[rounds / 2] : (per_op[rounds / 2 - 1] + per_op[rounds / 2]) / 2;
  printf("{\"test\":\"%s\",\"backend\":\"mpi\",\"pes\":%d,\"size_bytes\":%zu,\"blocks\":1,"
         "\"latency_us\":%.4f,\"latency_min_us\":%.4f,\"latency_max_us\":%.4f,\"rounds\":%d,"
         "\"bandwidth_gbps\":%.3f,\"busbw_gbps\":%.3f}\n",
         test, np, size, med * 1e6, per_op[0] * 1e6, per_op[rounds - 1] * 1e6, rounds,
         bw_bytes > 0 ? bw_bytes / med / 1e9 : 0, busbw_factor > 0 ? size * busbw_factor / med / 1e9 : 0);
  fflush(stdout);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  int iters = argc > 1 ? atoi(argv[1]) : 20000;
  int rounds = argc > 2 ? atoi(argv[2]) : 5;
  only = argc > 3 ? argv[3] : NULL;
  if (iters < 1 || rounds < 1 || rounds > 100 || np < 2) {
    if (me == 0) fprintf(stderr, "usage: mpirun -np N (N >= 2) mpi_bench [ITERS [ROUNDS]]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int peer = np - 1, warm = iters / 10;
  size_t maxb = (size_t)16 << 20;
  char *a = malloc(maxb * np), *b = malloc(maxb * np);
  if (a == NULL || b == NULL) {
    fprintf(stderr, "mpi_bench: cannot allocate %zu bytes\n", 2 * maxb * np);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  memset(a, 1, maxb * np);
  memset(b, 0, maxb * np);
  double per[100];

  /* p_pingpong: 8 bytes there and back, one-way time. */
  MPI_Barrier(MPI_COMM_WORLD);
  if (want("p_pingpong") && (me == 0 || me == peer)) {
    int other = peer - me;
    for (int r = -1; r < rounds; r++) {
      int n = r < 0 ? warm : iters;
      double t0 = MPI_Wtime();
      for (int i = 0; i < n; i++) {
        if (me == 0) {
          MPI_Send(a, 8, MPI_BYTE, other, 0, MPI_COMM_WORLD);
          MPI_Recv(b, 8, MPI_BYTE, other, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
          MPI_Recv(b, 8, MPI_BYTE, other, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          MPI_Send(a, 8, MPI_BYTE, other, 0, MPI_COMM_WORLD);
        }
      }
      if (r >= 0) per[r] = (MPI_Wtime() - t0) / (2.0 * n);
    }
  }
  if (want("p_pingpong")) row("p_pingpong", 8, per, rounds, 0, 0);

  /* One-sided: a window over b on every rank, passive target on the last rank. */
  MPI_Win win, cwin;
  static long counter = 0; /* the fetch-add target, apart from the data the puts write */
  MPI_Win_create(b, maxb, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  MPI_Win_create(&counter, sizeof counter, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &cwin);
  MPI_Win_lock_all(0, win);
  MPI_Win_lock_all(0, cwin);
  size_t sizes[] = {8, 64, 512, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20};
  for (int get = 0; get < 2; get++) {
    for (int k = 0; k < 10; k++) {
      size_t sz = sizes[k];
      int it = sz <= 65536 ? 20000 : (sz <= (1 << 20) ? 500 : 50);
      if (!want(get ? "get_bw" : "put_bw")) continue;
      MPI_Barrier(MPI_COMM_WORLD);
      if (me != 0) continue;
      for (int r = -1; r < rounds; r++) {
        double t0 = MPI_Wtime();
        for (int i = 0; i < (r < 0 ? 1 : it); i++) {
          if (get) MPI_Get(a, (int)sz, MPI_BYTE, peer, 0, (int)sz, MPI_BYTE, win);
          else MPI_Put(a, (int)sz, MPI_BYTE, peer, 0, (int)sz, MPI_BYTE, win);
        }
        MPI_Win_flush(peer, win);
        if (r >= 0) per[r] = (MPI_Wtime() - t0) / it;
      }
      row(get ? "get_bw" : "put_bw", sz, per, rounds, (double)sz, 0);
    }
  }

  /* fetch_add_latency: rank 0 adds to a word of the last rank, each add flushed. */
  MPI_Barrier(MPI_COMM_WORLD);
  if (want("fetch_add_latency") && me == 0) {
    long one = 1, old, sum = 0, want = 0, calls = 0;
    for (int r = -1; r < rounds; r++) {
      int n = r < 0 ? warm : iters;
      double t0 = MPI_Wtime();
      for (int i = 0; i < n; i++) {
        MPI_Fetch_and_op(&one, &old, MPI_LONG, peer, 0, MPI_SUM, cwin);
        MPI_Win_flush(peer, cwin);
        sum += old;
        want += calls++;
      }
      if (r >= 0) per[r] = (MPI_Wtime() - t0) / n;
    }
    if (sum != want) {
      fprintf(stderr, "mpi_bench: fetch_add: the fetched values sum to %ld, want %ld\n", sum, want);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  if (want("fetch_add_latency")) row("fetch_add_latency", 8, per, rounds, 0, 0);
  MPI_Win_unlock_all(win);
  MPI_Win_free(&win);
  MPI_Win_unlock_all(cwin);
  MPI_Win_free(&cwin);

  /* barrier_all_latency: 5000 barriers a round after 500 to warm up. */
  if (want("barrier_all_latency")) {
    for (int i = 0; i < 500; i++) MPI_Barrier(MPI_COMM_WORLD);
    for (int r = 0; r < rounds; r++) {
      double t0 = MPI_Wtime();
      for (int i = 0; i < 5000; i++) MPI_Barrier(MPI_COMM_WORLD);
      per[r] = (MPI_Wtime() - t0) / 5000;
    }
    row("barrier_all_latency", 0, per, rounds, 0, 0);
  }

  /* Collectives: the slowest rank's mean time per call, per round. */
  const char *names[] = {"allreduce", "allgather", "alltoall", "broadcast", "reduce_scatter"};
  size_t csizes[] = {8, 64, 1024, 8192, 65536, 1 << 20, 16 << 20};
  for (int c = 0; c < 5; c++) {
    if (!want(names[c])) continue;
    for (int k = 0; k < 7; k++) {
      size_t sz = csizes[k];
      if (sz < (size_t)4 * np && c != 0 && c != 3) continue;
      int it = sz <= 8192 ? 1000 : (sz <= 65536 ? 200 : (sz <= (1 << 20) ? 40 : 6));
      for (int r = -1; r < rounds; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < (r < 0 ? 1 : it); i++) {
          switch (c) {
          case 0: MPI_Allreduce(a, b, (int)(sz / 4), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
          case 1: MPI_Allgather(a, (int)(sz / np), MPI_BYTE, b, (int)(sz / np), MPI_BYTE, MPI_COMM_WORLD); break;
          case 2: MPI_Alltoall(a, (int)(sz / np), MPI_BYTE, b, (int)(sz / np), MPI_BYTE, MPI_COMM_WORLD); break;
          case 3: MPI_Bcast(a, (int)sz, MPI_BYTE, 0, MPI_COMM_WORLD); break;
          case 4: MPI_Reduce_scatter_block(a, b, (int)(sz / 4 / np), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
          }
        }
        double t = (MPI_Wtime() - t0) / it, tmax;
        MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (r >= 0) per[r] = tmax;
      }
      double f = c == 0 ? 2.0 * (np - 1) / np : (c == 3 ? 1.0 : (double)(np - 1) / np);
      row(names[c], sz, per, rounds, 0, f);
    }
  }
  free(a);
  free(b);
  MPI_Finalize();
  return 0;
}
