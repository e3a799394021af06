package test

import (
	"path/filepath"
	"testing"
	"time"
)

// TestEPConfigMismatch (issue 26, 5): ep.New with a different Config on PE 0 (BF16 rows of 16
// against F32 rows of 8, buffers of the same size; then another Mode) fails at once on every PE
// with ErrMismatch naming the fields, both values and both PEs, instead of exchanging garbage or
// timing out; a New with one Config everywhere then works.
func TestEPConfigMismatch(t *testing.T) {
	r := roxrun(t, time.Minute, []string{"ROX_TIMEOUT=20s"}, "-n", "3", filepath.Join(bin, "testprog"), "ep-config")
	mustPass(t, r, "ep-config: ok on 3 PEs")
}
