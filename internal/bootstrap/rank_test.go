package bootstrap

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func envOf(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestDetect(t *testing.T) {
	slurm := map[string]string{
		"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "SLURM_NODEID": "2",
		"SLURM_TASKS_PER_NODE": "2(x4)", "SLURM_JOB_ID": "123456", "SLURM_STEP_ID": "0",
		"SLURM_JOB_NODELIST": "gpu[07-10]", "ROX_NODE": "gpu09",
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want Rank
	}{
		{"roxrun", map[string]string{
			"ROX_PE": "3", "ROX_NPES": "4", "ROX_LOCAL_PE": "1", "ROX_LOCAL_NPES": "2",
			"ROX_BOOTSTRAP": "s3cret@10.0.0.1:4242", "ROX_NODE": "n1",
			// Roxrun wins over a foreign launcher around it.
			"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "1",
		}, Rank{PE: 3, NPEs: 4, LocalPE: 1, LocalNPEs: 2, Node: "n1", Source: "roxrun", Addr: "10.0.0.1:4242", Token: "s3cret"}},
		{"ompi single node", map[string]string{
			"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
			"OMPI_COMM_WORLD_LOCAL_SIZE": "2", "PMIX_NAMESPACE": "prterun-x-1234@1", "ROX_NODE": "n",
			"PMI_RANK": "1", "PMI_SIZE": "2",
		}, Rank{PE: 0, NPEs: 2, LocalPE: 0, LocalNPEs: 2, Node: "n", Source: "ompi",
			Addr:  "127.0.0.1:" + strconv.Itoa(20000+int(hash32("prterun-x-1234@1")%20000)),
			Token: deriveToken("ompi", "prterun-x-1234@1"), Host: true}},
		{"ompi two nodes needs ROX_BOOTSTRAP", map[string]string{
			"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
			"OMPI_COMM_WORLD_LOCAL_SIZE": "2", "PMIX_NAMESPACE": "ns", "ROX_NODE": "n",
		}, Rank{PE: 3, NPEs: 4, LocalPE: 1, LocalNPEs: 2, Node: "n", Source: "ompi", Token: deriveToken("ompi", "ns")}},
		{"ompi with ROX_BOOTSTRAP address only", map[string]string{
			"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4", "PMIX_NAMESPACE": "ns",
			"ROX_BOOTSTRAP": "head:7000", "ROX_NODE": "n",
		}, Rank{PE: 0, NPEs: 4, LocalPE: -1, LocalNPEs: -1, Node: "n", Source: "ompi", Addr: "head:7000",
			Token: deriveToken("ompi", "ns"), Host: true}},
		{"pmix under mpirun", map[string]string{
			// mpirun sets both; PMIx comes first, its rank from PMIX_RANK, the job size for now
			// from Open MPI's (Dial asks PMIx and checks).
			"PMIX_SERVER_URI41": "1397293056.0;tcp4://127.0.0.1:57161", "PMIX_SERVER_URI2": "x",
			"PMIX_NAMESPACE": "1397293057", "PMIX_RANK": "2",
			"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "2",
			"OMPI_COMM_WORLD_LOCAL_SIZE": "4",
		}, Rank{PE: 2, NPEs: 4, LocalPE: -1, LocalNPEs: -1, Source: "pmix",
			PMIxServer: "PMIX_SERVER_URI41", PMIxNamespace: "1397293057"}},
		{"pmix under srun --mpi=pmix", map[string]string{
			"PMIX_SERVER_URI3": "pmix-server.1;tcp4://127.0.0.1:1", "PMIX_NAMESPACE": "slurm.pmix.7.0", "PMIX_RANK": "0",
			"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n1", "ROX_NODE": "n1",
		}, Rank{PE: 0, NPEs: 2, LocalPE: -1, LocalNPEs: -1, Node: "n1", Source: "pmix", Host: true,
			PMIxServer: "PMIX_SERVER_URI3", PMIxNamespace: "slurm.pmix.7.0"}},
		{"pmix with ROX_BOOTSTRAP", map[string]string{
			"PMIX_SERVER_URI4": "u", "PMIX_NAMESPACE": "ns", "PMIX_RANK": "0", "ROX_BOOTSTRAP": "tok@head:7000",
		}, Rank{PE: 0, LocalPE: -1, LocalNPEs: -1, Source: "pmix", Host: true, Addr: "head:7000", Token: "tok",
			PMIxServer: "PMIX_SERVER_URI4", PMIxNamespace: "ns"}},
		{"PMIX_NAMESPACE without a server is Open MPI's", map[string]string{
			"PMIX_NAMESPACE": "ns", "PMIX_RANK": "0", "OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4", "ROX_NODE": "n",
		}, Rank{PE: 0, NPEs: 4, LocalPE: -1, LocalNPEs: -1, Node: "n", Source: "ompi", Token: deriveToken("ompi", "ns"), Host: true}},
		{"pmi", map[string]string{
			"PMI_RANK": "1", "PMI_SIZE": "3", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "3",
			"PMI_KVSNAME": "kvs_99_0", "ROX_BOOTSTRAP": "tok@h:1", "ROX_NODE": "n",
		}, Rank{PE: 1, NPEs: 3, LocalPE: 1, LocalNPEs: 3, Node: "n", Source: "pmi", Addr: "h:1", Token: "tok"}},
		{"slurm", slurm, Rank{PE: 5, NPEs: 8, LocalPE: 1, LocalNPEs: 2, Node: "gpu09", Source: "slurm",
			Addr: "gpu07:" + strconv.Itoa(20000+123456%20000), Token: deriveToken("slurm", "123456.0")}},
		{"torchrun", map[string]string{
			"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2",
			"MASTER_ADDR": "10.1.1.1", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "r1", "ROX_NODE": "n",
		}, Rank{PE: 0, NPEs: 2, LocalPE: 0, LocalNPEs: 2, Node: "n", Source: "torchrun", Addr: "10.1.1.1:29501",
			Token: deriveToken("torchrun", "r1@10.1.1.1:29501"), Host: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Detect(envOf(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Detect (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDetectSingle(t *testing.T) {
	a, err := Detect(envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Detect(envOf(nil))
	if a.Source != "single" || a.PE != 0 || a.NPEs != 1 || !a.Host || a.Addr != "127.0.0.1:0" || a.Node == "" {
		t.Errorf("single: %+v", a)
	}
	if len(a.Token) != 32 || a.Token == b.Token {
		t.Errorf("single-process tokens %q and %q: want random", a.Token, b.Token)
	}
}

func TestDetectMalformed(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string // the variable and value the error must name
	}{
		{map[string]string{"ROX_PE": "x", "ROX_NPES": "2", "ROX_BOOTSTRAP": "t@h:1"}, `ROX_PE="x"`},
		{map[string]string{"ROX_PE": "2", "ROX_NPES": "2", "ROX_BOOTSTRAP": "t@h:1"}, "ROX_PE=2 is not below ROX_NPES=2"},
		{map[string]string{"ROX_PE": "0", "ROX_BOOTSTRAP": "t@h:1"}, "ROX_NPES is not set"},
		{map[string]string{"ROX_PE": "0", "ROX_NPES": "1"}, "ROX_BOOTSTRAP is not"},
		{map[string]string{"ROX_PE": "0", "ROX_NPES": "1", "ROX_BOOTSTRAP": "h:1"}, `ROX_BOOTSTRAP="h:1" has no TOKEN@`},
		{map[string]string{"ROX_PE": "0", "ROX_NPES": "1", "ROX_BOOTSTRAP": "t@h"}, `ROX_BOOTSTRAP="t@h"`},
		{map[string]string{"ROX_PE": "0", "ROX_NPES": "1", "ROX_BOOTSTRAP": "t@h:99999"}, `bad port "99999"`},
		{map[string]string{"ROX_PE": "0", "ROX_NPES": "2", "ROX_LOCAL_PE": "2", "ROX_LOCAL_NPES": "2", "ROX_BOOTSTRAP": "t@h:1"}, "ROX_LOCAL_PE=2 is not below ROX_LOCAL_NPES=2"},
		{map[string]string{"ROX_PE": "0", "ROX_NPES": "2", "ROX_LOCAL_NPES": "3", "ROX_BOOTSTRAP": "t@h:1"}, "ROX_LOCAL_NPES=3 does not fit ROX_NPES=2"},
		{map[string]string{"OMPI_COMM_WORLD_RANK": "-1", "OMPI_COMM_WORLD_SIZE": "2"}, `OMPI_COMM_WORLD_RANK="-1"`},
		{map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "0"}, "OMPI_COMM_WORLD_SIZE=0"},
		{map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "z"}, `OMPI_COMM_WORLD_LOCAL_RANK="z"`},
		{map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "ROX_BOOTSTRAP": "t@:1"}, `ROX_BOOTSTRAP="t@:1"`},
		{map[string]string{"PMI_RANK": "4", "PMI_SIZE": "4"}, "PMI_RANK=4 is not below PMI_SIZE=4"},
		{map[string]string{"PMIX_SERVER_URI41": "u", "PMIX_NAMESPACE": "ns", "PMIX_RANK": "r"}, `PMIX_RANK="r"`},
		{map[string]string{"PMIX_SERVER_URI41": "u", "PMIX_NAMESPACE": "ns", "PMIX_RANK": "4", "OMPI_COMM_WORLD_SIZE": "4"},
			`PMIX_RANK=4 and the launcher's job size "4" do not agree`},
		{map[string]string{"PMI_RANK": "0"}, "PMI_SIZE is not set"},
		{map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "two"}, `SLURM_NTASKS="two"`},
		{map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_JOB_NODELIST": "n1"}, "SLURM_JOBID is not set"},
		{map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_JOB_ID": "5", "SLURM_JOB_NODELIST": "n[3-1]"}, `SLURM_JOB_NODELIST: bad range "3-1"`},
		{map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_JOB_ID": "5"}, "SLURM_NODELIST: empty node list"},
		{map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_JOB_ID": "5", "SLURM_JOB_NODELIST": "n1",
			"SLURM_TASKS_PER_NODE": "2(x", "SLURM_NODEID": "0"}, `SLURM_TASKS_PER_NODE="2(x" has a bad entry`},
		{map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_JOB_ID": "5", "SLURM_JOB_NODELIST": "n1",
			"SLURM_TASKS_PER_NODE": "1,1", "SLURM_NODEID": "2"}, "SLURM_NODEID=2 is past the 2 nodes"},
		{map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_LOCALID": "1", "SLURM_JOB_ID": "5", "SLURM_JOB_NODELIST": "n[1-2]",
			"SLURM_TASKS_PER_NODE": "1(x2)", "SLURM_NODEID": "1"}, "SLURM_LOCALID=1 is not below the 1 tasks"},
		{map[string]string{"RANK": "0", "WORLD_SIZE": "2"}, "MASTER_ADDR is not"},
		{map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "p"}, `MASTER_PORT="p"`},
		{map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "65535"}, "MASTER_PORT=65535"},
		{map[string]string{"RANK": "3", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, "RANK=3 is not below WORLD_SIZE=2"},
	} {
		r, err := Detect(envOf(tc.env))
		if !errors.Is(err, ErrBadRank) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Detect(%v) = %+v, %v; want ErrBadRank naming %q", tc.env, r, err, tc.want)
		}
	}
}

func TestExpandNodelist(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"node[01-03,7],gpu5", []string{"node01", "node02", "node03", "node7", "gpu5"}},
		{"n1", []string{"n1"}},
		{"a,b,c", []string{"a", "b", "c"}},
		{"gpu[8-11]", []string{"gpu8", "gpu9", "gpu10", "gpu11"}},
		{"gpu[08-11]", []string{"gpu08", "gpu09", "gpu10", "gpu11"}},
		{"r[1-2]n[1,3]-ib", []string{"r1n1-ib", "r1n3-ib", "r2n1-ib", "r2n3-ib"}},
		{"x[5],y[000-001]", []string{"x5", "y000", "y001"}},
	} {
		got, err := ExpandNodelist(tc.in)
		if err != nil {
			t.Errorf("ExpandNodelist(%q): %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ExpandNodelist(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
	for _, bad := range []string{"", "n[1-2", "n]1[", "n[[1]]", "n[a-b]", "n[2-1]", "n[]", "a,,b", "n[1-99999999]", "n[-1]"} {
		if got, err := ExpandNodelist(bad); err == nil {
			t.Errorf("ExpandNodelist(%q) = %q, want an error", bad, got)
		}
	}
}

func TestExpandTasksPerNode(t *testing.T) {
	got, err := expandTasksPerNode("2(x3),1,4(x2)")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{2, 2, 2, 1, 4, 4}, got); diff != "" {
		t.Error(diff)
	}
}

// FuzzExpandNodelist: any input gives hosts or an error, never a panic, and a list without
// brackets expands to its comma-separated names.
func FuzzExpandNodelist(f *testing.F) {
	for _, s := range []string{"node[01-03,7],gpu5", "r[1-2]n[1,3]-ib", "n[1-2", "a,,b", "]", "[", "x[0-0]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, list string) {
		hosts, err := ExpandNodelist(list)
		if err != nil {
			return
		}
		if len(hosts) == 0 {
			t.Fatalf("ExpandNodelist(%q) gave no hosts and no error", list)
		}
		if !strings.ContainsAny(list, "[]") {
			want := strings.Split(list, ",")
			for i := range want {
				want[i] = strings.TrimSpace(want[i])
			}
			if diff := cmp.Diff(want, hosts); diff != "" {
				t.Fatalf("ExpandNodelist(%q) (-want +got):\n%s", list, diff)
			}
		}
	})
}

// TestLayout: ROX_LAYOUT, which roxrun sets across hosts, becomes Rank.Layout when it agrees with
// the rank, and is refused, naming both, when it does not.
func TestLayout(t *testing.T) {
	base := map[string]string{"ROX_PE": "5", "ROX_NPES": "8", "ROX_LOCAL_PE": "2", "ROX_LOCAL_NPES": "5",
		"ROX_BOOTSTRAP": "tok@10.0.0.1:4242", "ROX_LAYOUT": "3,5"}
	r, err := Detect(envOf(base))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{3, 5}, r.Layout); diff != "" {
		t.Errorf("Layout (-want +got):\n%s", diff)
	}
	for _, tc := range []struct{ layout, want string }{
		{"3,4", "adds up to 7 PEs"},
		{"4,4", "puts PE 5 at 1 of a node of 4"},
		{"3,x", `"x" is no count`},
		{"8,0", `"0" is no count`},
	} {
		env := map[string]string{}
		for k, v := range base {
			env[k] = v
		}
		env["ROX_LAYOUT"] = tc.layout
		if _, err := Detect(envOf(env)); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "ROX_LAYOUT") {
			t.Errorf("ROX_LAYOUT=%s: %v, want an error naming ROX_LAYOUT and %q", tc.layout, err, tc.want)
		}
	}
}
