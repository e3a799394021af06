package test

import "os"

// long says whether the long matrices run (ROX_TEST_LONG=1, which `./test/run.sh long` sets):
// the same checks, repeated more for the power to see a rare reordering (the litmus suite over
// the rails and over UCX).
func long() bool { return os.Getenv("ROX_TEST_LONG") == "1" }
