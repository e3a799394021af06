package bench

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/roxamen/roxamen/tools/roxruntest"
)

// One parser for every suite: a suite by name (or its old flag), every flag listed in --help,
// unknown tests refused with the suite's list, a flag the suite does not read refused.
func TestBenchSuitesOneParser(t *testing.T) {
	var help bytes.Buffer
	if code := Main([]string{"bench", "--help"}, &help, &help); code != 0 {
		t.Fatalf("bench --help: exit %d", code)
	}
	for _, flag := range []string{"--plot", "--anchor", "--compare", "--rounds", "--iters", "--tests", "--timeout", "--json", "--nvshmem", "p2p|coll|rails|all"} {
		if !strings.Contains(help.String(), flag) {
			t.Errorf("bench --help lacks %s", flag)
		}
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"bench", "coll", "--tests", "nosuch"}, []string{`no test "nosuch"`, "coll suite", "team_barrier"}},
		{[]string{"bench", "--coll", "--tests", "nosuch"}, []string{`no test "nosuch"`, "coll suite"}},
		{[]string{"bench", "--tests", "allreduce"}, []string{`no test "allreduce"`, "p2p suite", "p_pingpong"}},
		{[]string{"bench", "--json", "--plot", "a.svg"}, []string{"--plot a.svg", "p2p suite does not take it"}},
		{[]string{"bench", "coll", "--nvshmem", "f.txt"}, []string{"--nvshmem f.txt", "coll suite does not take it"}},
		{[]string{"bench", "coll", "--compare", "oshmem"}, []string{`--compare "oshmem"`, "mpi only"}},
		{[]string{"bench", "coll", "--rounds", "0"}, []string{"--rounds 0"}},
		{[]string{"bench", "rails", "--tests", "put"}, []string{"--tests put", "runs no job"}},
		{[]string{"bench", "p2p", "--rails"}, []string{"name one suite"}},
		{[]string{"bench", "coll", "extra.json"}, []string{`unexpected argument "extra.json"`}},
		{[]string{"bench", "coll", "--bogus"}, []string{"-bogus", "roxrun bench --help"}},
	} {
		var out, errOut bytes.Buffer
		code := Main(c.args, &out, &errOut)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2\n%s", c.args, code, errOut.String())
		}
		if n := strings.Count(strings.TrimSpace(errOut.String()), "\n") + 1; n > 2 {
			t.Errorf("%q: %d lines of error, want one and the pointer to --help:\n%s", c.args, n, errOut.String())
		}
		for _, w := range c.want {
			if !strings.Contains(errOut.String(), w) {
				t.Errorf("%q: stderr lacks %q:\n%s", c.args, w, errOut.String())
			}
		}
	}
}

// `bench all` runs the p2p suite and then the coll suite, each with the tests of --tests that
// are its own, with the same --rounds; every row names its unit.
func TestBenchAll(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two benchmark jobs")
	}
	bin := roxruntest.Binary(t)
	cmd := exec.Command(bin, "bench", "all", "--json", "--rounds", "3", "--iters", "200", "--tests", "p_pingpong,team_barrier,allreduce")
	cmd.Env = append(cmd.Environ(), "ROX_DEVICE=host", "ROX_HEAP_SIZE=160M")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("bench all: %v\n%s\n%s", err, out.String(), errOut.String())
	}
	seen := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("not a JSON row: %q", line)
		}
		test, _ := r["test"].(string)
		seen[test]++
		if _, ok := r["latency_us"]; !ok {
			t.Errorf("row %q names no latency_us", line)
		}
		if test == "allreduce" {
			lo, _ := r["latency_min_us"].(float64)
			hi, _ := r["latency_max_us"].(float64)
			if lo <= 0 || hi < lo {
				t.Errorf("allreduce row without its spread over rounds: %q", line)
			}
		}
	}
	if seen["p_pingpong"] != 1 || seen["team_barrier"] != 1 || seen["allreduce"] < 5 || len(seen) != 3 {
		t.Errorf("rows per test %v: want p_pingpong once, team_barrier once, allreduce per size, nothing else", seen)
	}
}
