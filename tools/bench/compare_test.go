package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/roxamen/roxamen/tools/roxruntest"
)

func needMPI(t *testing.T) {
	t.Helper()
	for _, p := range []string{"mpicc", "mpirun"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s is not installed (Debian: openmpi-bin, libopenmpi-dev)", p)
		}
	}
}

// A row the fake comparison programs print before they go wrong: it must not become a ratio.
const fakeRow = `{"test":"p_pingpong","backend":"mpi","pes":2,"size_bytes":8,"blocks":1,"latency_us":0.5,"latency_min_us":0.4,"latency_max_us":0.6,"rounds":5,"bandwidth_gbps":0}`

// fakeComparison is an MPI program that prints fakeRow on rank 0, then runs body on every rank.
func fakeComparison(body string) comparison {
	c := comparisons["mpi"]
	c.name = "fake"
	c.source = fmt.Sprintf(`#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int me;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  if (me == 0) { printf("%%s\n", %s); fflush(stdout); }
  MPI_Barrier(MPI_COMM_WORLD);
  %s
  MPI_Finalize();
  return 0;
}
`, strconv.Quote(fakeRow), body)
	return c
}

// A comparison program that crashes, fails or prints no rows is reported as such, and none of
// its figures are used, even those it printed before it went wrong.
func TestComparisonFailures(t *testing.T) {
	needMPI(t)
	cases := []struct {
		name, body string
		timeout    time.Duration
		want       []string
	}{
		{"crash", `if (me == 1) raise(SIGSEGV);`, time.Minute, []string{"the comparison program crashed: process rank 1", "signal 11", "after printing 1 rows", "not used"}},
		{"exit", `if (me == 0) exit(3);`, time.Minute, []string{"the comparison program failed with exit status", "after printing 1 rows"}},
		{"hang", `if (me == 0) for (;;) ;`, 5 * time.Second, []string{"did not finish within 5s", "not used"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var errb bytes.Buffer
			r := runComparison(fakeComparison(c.body), 2, 10, 1, "", c.timeout, &errb)
			if r.err == nil {
				t.Fatalf("no error; rows %v", r.rows)
			}
			for _, w := range c.want {
				if !strings.Contains(r.err.Error(), w) {
					t.Errorf("error %q lacks %q", r.err, w)
				}
			}
			if r.rows != nil {
				t.Errorf("a failed comparison kept its rows: %v", r.rows)
			}
			var table bytes.Buffer
			printBenchTable(&table, []benchRow{{Test: "p_pingpong", Backend: "host", PEs: 2, SizeBytes: 8, Rounds: 5, LatencyUS: 0.2}}, []compareResult{r})
			if strings.Contains(table.String(), "ratio") || strings.Contains(table.String(), "fake") {
				t.Errorf("the table compares with a failed program:\n%s", table.String())
			}
		})
	}
	t.Run("ok", func(t *testing.T) {
		r := runComparison(fakeComparison(""), 2, 10, 1, "", time.Minute, io.Discard)
		if r.err != nil || len(r.rows) != 1 || r.rows[0].LatencyUS != 0.5 {
			t.Fatalf("err %v, rows %v", r.err, r.rows)
		}
		var table bytes.Buffer
		printBenchTable(&table, []benchRow{{Test: "p_pingpong", Backend: "host", PEs: 2, SizeBytes: 8, Rounds: 5, LatencyUS: 0.2}}, []compareResult{r})
		if !strings.Contains(table.String(), "0.40x") {
			t.Errorf("the table lacks the ratio 0.2/0.5:\n%s", table.String())
		}
	})
	t.Run("missing compiler", func(t *testing.T) {
		c := fakeComparison("")
		c.compiler = "no-such-cc-roxamen"
		r := runComparison(c, 2, 10, 1, "", time.Minute, io.Discard)
		if r.err == nil || !strings.Contains(r.err.Error(), "no-such-cc-roxamen is not installed") || !strings.Contains(r.err.Error(), "openmpi-bin") {
			t.Fatalf("err %v", r.err)
		}
	})
}

// roxrun bench --compare oshmem runs the OpenSHMEM program beside Roxamen's rows and prints
// ratios; --json carries both systems' rows, each with its spread.
func TestBenchCompareOSHMEM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds roxrun and the OpenSHMEM program and runs both")
	}
	for _, p := range []string{"oshcc", "oshrun"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s is not installed (Debian: openmpi-bin, libopenmpi-dev)", p)
		}
	}
	bin := roxruntest.Binary(t)
	cmd := exec.Command(bin, "bench", "--tests", "p_pingpong,fetch_add_latency,barrier_all_latency", "--rounds", "3", "--iters", "500", "--compare", "oshmem", "--json")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
	}
	backends := map[string]map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r benchRow
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("not a JSON row: %q", l)
		}
		if r.Rounds != 3 || r.MinUS > r.LatencyUS || r.LatencyUS > r.MaxUS || r.MinUS <= 0 {
			t.Errorf("row without a sane spread over 3 rounds: %+v", r)
		}
		if backends[r.Backend] == nil {
			backends[r.Backend] = map[string]bool{}
		}
		backends[r.Backend][r.Test] = true
	}
	for _, b := range []string{"host", "oshmem"} {
		for _, test := range []string{"p_pingpong", "fetch_add_latency", "barrier_all_latency"} {
			if !backends[b][test] {
				t.Errorf("no %s row from %s:\n%s", test, b, out.String())
			}
		}
	}
	if !strings.Contains(errb.String(), "oshmem: ") || !strings.Contains(errb.String(), "3 beside Roxamen's") {
		t.Errorf("summary on stderr: %q", errb.String())
	}
}
