// The CPU harnesses' checks (hostlib.cc, compat/host.cc): CHECK(cond, printf-args) counts a check
// and prints "FAIL line N: ..." when cond is false; the harness prints "done" with the counts last.
#ifndef ROXAMEN_TESTDATA_CHECK_H
#define ROXAMEN_TESTDATA_CHECK_H

extern "C" int printf(const char *, ...);

static int checks, failures;
#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		checks++;                                                                          \
		if (!(cond)) {                                                                     \
			failures++;                                                                \
			printf("FAIL line %d: ", __LINE__);                                        \
			printf(__VA_ARGS__);                                                       \
			printf("\n");                                                              \
		}                                                                                  \
	} while (0)

#endif
