package pmix

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/roxamen/roxamen/internal/testkit"
)

// needPMIx skips when libpmix.so.2 cannot be loaded, unless ROX_TEST_PMIX requires it (CI
// installs libpmix2, so there a missing library is a failure).
func needPMIx(t *testing.T) {
	t.Helper()
	if err := Probe(); err != nil {
		testkit.Need(t, "ROX_TEST_PMIX", "no PMIx here: %v", err)
	}
}

func TestServerDetection(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	for _, tc := range []struct {
		env  func(string) string
		want string
	}{
		{env(), ""},
		{env("PMIX_NAMESPACE", "123", "PMIX_RANK", "0"), ""}, // no server to talk to
		{env("PMIX_SERVER_URI41", "x", "PMIX_RANK", "0"), ""},
		{env("PMIX_SERVER_URI41", "x", "PMIX_NAMESPACE", "123"), ""},
		{env("PMIX_SERVER_URI2", "x", "PMIX_NAMESPACE", "123", "PMIX_RANK", "1"), "PMIX_SERVER_URI2"},
		{env("PMIX_SERVER_URI41", "x", "PMIX_SERVER_URI2", "x", "PMIX_NAMESPACE", "1", "PMIX_RANK", "1"), "PMIX_SERVER_URI41"},
	} {
		if got := Server(tc.env); got != tc.want {
			t.Errorf("Server(...) = %q, want %q", got, tc.want)
		}
	}
}

// TestMissingLibrary: a library that is not there is ErrNoLibrary naming it, and nothing else.
func TestMissingLibrary(t *testing.T) {
	err := open("libpmix-roxamen-missing.so.2")
	if !errors.Is(err, ErrNoLibrary) || !strings.Contains(err.Error(), "libpmix-roxamen-missing.so.2") {
		t.Fatalf("load of a missing library: %v; want ErrNoLibrary naming it", err)
	}
}

func TestStatusString(t *testing.T) {
	needPMIx(t)
	for st, want := range map[int32]string{statusSuccess: "SUCCESS", statusErrTimeout: "TIMEOUT", statusErrNotFound: "NOT-FOUND"} {
		if got := StatusString(st); !strings.Contains(strings.ReplaceAll(got, "_", "-"), want) {
			t.Errorf("PMIx_Error_string(%d) = %q, want it to say %s", st, got, want)
		}
	}
	v, err := Version()
	if err != nil || !strings.Contains(v, "PMIx") {
		t.Errorf("Version() = %q, %v", v, err)
	}
}

// childEnv marks the test binary run as a PMIx client under mpirun.
const childEnv = "ROX_PMIX_TEST_CHILD"

// TestMpirunClients runs this test binary as 3 processes under a real mpirun: each initializes,
// checks its job-level keys, rank 0 publishes a value, and after a fence every rank reads it.
func TestMpirunClients(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		return // the child body is TestChild
	}
	needPMIx(t)
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		testkit.Need(t, "ROX_TEST_PMIX", "no mpirun (Debian: apt-get install openmpi-bin)")
	}
	args := []string{"--oversubscribe", "-np", "3", "-x", childEnv + "=1"}
	if os.Geteuid() == 0 {
		args = append([]string{"--allow-run-as-root"}, args...)
	}
	args = append(args, os.Args[0], "-test.run=^TestChild$", "-test.v")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, mpirun, args...).CombinedOutput()
	if err != nil || strings.Count(string(out), "child ok") != 3 {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
}

// TestChild is the body of each process of TestMpirunClients.
func TestChild(t *testing.T) {
	if os.Getenv(childEnv) != "1" {
		t.Skip("run by TestMpirunClients under mpirun")
	}
	c, err := Init(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Finalize(); err != nil {
			t.Error(err)
		}
	}()
	if want := os.Getenv("PMIX_NAMESPACE"); c.Namespace() != want {
		t.Errorf("namespace %q, PMIX_NAMESPACE=%q", c.Namespace(), want)
	}
	if want, _ := strconv.Atoi(os.Getenv("PMIX_RANK")); c.Rank() != want {
		t.Errorf("rank %d, PMIX_RANK=%d", c.Rank(), want)
	}
	n, err := c.JobSize()
	if err != nil || n != 3 {
		t.Fatalf("JobSize = %d, %v; want 3", n, err)
	}
	lr, err := c.LocalRank()
	if err != nil || lr != c.Rank() {
		t.Errorf("LocalRank = %d, %v; want %d (one node)", lr, err, c.Rank())
	}
	ls, err := c.LocalSize()
	if err != nil || ls != 3 {
		t.Errorf("LocalSize = %d, %v; want 3", ls, err)
	}
	if _, err := c.NodeID(c.Rank()); err != nil {
		t.Error(err)
	}
	host, err := c.Hostname()
	if err != nil || host == "" {
		t.Errorf("Hostname = %q, %v", host, err)
	}
	val := fmt.Sprintf("from rank 0 of %s", c.Namespace())
	if c.Rank() == 0 {
		if err := c.Put("roxamen.test", val); err != nil {
			t.Fatal(err)
		}
		if err := c.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Fence(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetString(0, "roxamen.test", 10*time.Second)
	if err != nil || got != val {
		t.Fatalf("GetString = %q, %v; want %q", got, err, val)
	}
	// A key nobody published: an error naming the call and PMIx's status, not a hang.
	_, err = c.GetString(0, "roxamen.nobody", time.Second)
	var pe *Error
	if !errors.As(err, &pe) || !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), `PMIx_Get("roxamen.nobody")`) {
		t.Errorf("GetString of a key nobody put: %v; want a *pmix.Error naming PMIx_Get that matches ErrTimeout", err)
	}
	fmt.Printf("rank %d: child ok (%v)\n", c.Rank(), err)
}
