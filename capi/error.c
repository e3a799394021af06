// The last error message of each thread (roxamen_error_message): set by the Go layer on every
// failed call, like errno, so that threads calling the library at once do not see each other's.
#include <stdlib.h>

static __thread char *last_error;

void rox_set_error(char *msg) {
	free(last_error);
	last_error = msg;
}

const char *roxamen_error_message(void) { return last_error ? last_error : ""; }
