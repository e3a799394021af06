package launch

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runCause runs a 2-PE job of shell PEs: PE 1 does pe1 (which touches $MARK first), and PE 0,
// once the mark is there and a moment later, exits with status 1, as a PE that learnt of PE 1's
// end would. It returns roxrun's verdict.
func runCause(t *testing.T, pe1 string) (*ExitError, string) {
	t.Helper()
	var stderr bytes.Buffer
	mark := filepath.Join(t.TempDir(), "mark")
	pe0 := `for i in $(seq 1 1000); do [ -e "$MARK" ] && break; sleep 0.01; done; sleep 0.05; echo "PE 0: lost PE 1" >&2; exit 1`
	err := Run(context.Background(), Config{
		NPEs:    2,
		Argv:    []string{"sh", "-c", `if [ "$ROX_PE" = 1 ]; then ` + pe1 + `; fi; ` + pe0},
		Env:     []string{"MARK=" + mark},
		Grace:   time.Second,
		Timeout: time.Minute,
		Stdout:  &bytes.Buffer{}, Stderr: &stderr,
	})
	var ee *ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("Run: %v, want an ExitError\n%s", err, &stderr)
	}
	return ee, stderr.String()
}

// PE 1 is SIGKILLed while a child of its holds its output, so roxrun reports its end only after
// the output settles, after PE 0's exit (issue 26, 7): PE 1 is still the root cause.
func TestCauseKilledReportedLate(t *testing.T) {
	for i := range 3 {
		ee, stderr := runCause(t, `sleep 5 & touch "$MARK"; kill -9 $$`)
		if ee.PE != 1 || ee.Status != 137 || len(ee.Collateral) != 1 || ee.Collateral[0] != 0 {
			t.Fatalf("run %d: root PE %d status %d collateral %v, want PE 1, 137, [0]\n%s", i, ee.PE, ee.Status, ee.Collateral, stderr)
		}
		if !strings.HasPrefix(stderr, "roxrun: PE 1 was killed by signal SIGKILL") && !strings.Contains(stderr, "\nroxrun: PE 1 was killed by signal SIGKILL\n") {
			t.Fatalf("run %d: the verdict does not name PE 1 first:\n%s", i, stderr)
		}
	}
}

// PE 1 stops itself (SIGSTOP) and PE 0 gives up on it: the stopped PE is the root cause.
func TestCauseStopped(t *testing.T) {
	ee, stderr := runCause(t, `touch "$MARK"; kill -STOP $$`)
	if ee.PE != 1 || ee.Status != 128+19 || ee.Reason != "was stopped by signal SIGSTOP while the other PEs waited for it" {
		t.Fatalf("root PE %d status %d %q, want PE 1 stopped (147)\n%s", ee.PE, ee.Status, ee.Reason, stderr)
	}
}
