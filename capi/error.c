// The last error message of each thread (roxamen_error_message): set by the Go layer on every
// failed call, like errno, so that threads calling the library at once do not see each other's.
#include <stdlib.h>

static __thread char *last_error;
static __thread int last_code;

void rox_set_error(char *msg, int code) {
	free(last_error);
	last_error = msg;
	last_code = code;
}

const char *roxamen_error_message(void) { return last_error ? last_error : ""; }

int roxamen_error_code(void) { return last_code; }
