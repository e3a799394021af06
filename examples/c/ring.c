// ring.c: each PE puts its number into its right neighbour's symmetric int, then all sum them.
#include <stdio.h>
#include "roxamen.h"
int main(void) {
	if (roxamen_init()) { fprintf(stderr, "%s\n", roxamen_error_message()); return 1; }
	int me = roxamen_my_pe(), n = roxamen_n_pes();
	int *x = roxamen_calloc(1, sizeof(int)), *sum = roxamen_calloc(1, sizeof(int));
	roxamen_putmem(x, &me, sizeof me, (me + 1) % n);
	roxamen_barrier_all();
	roxamen_allreduce(ROXAMEN_TEAM_WORLD, ROXAMEN_INT32, ROXAMEN_SUM, sum, x, 1);
	printf("PE %d: got %d from the left, sum %d\n", me, *x, *sum);
	if (roxamen_putmem(x, &me, sizeof me, n)) printf("%s\n", roxamen_error_message()); // PE out of range
	return roxamen_finalize();
}
