package bootstrap

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/roxamen/roxamen/internal/env"
	"github.com/roxamen/roxamen/internal/pmix"
)

// Rank is this process's place in the job and how to reach the job's rendezvous.
type Rank struct {
	PE, NPEs int
	// LocalPE and LocalNPEs: rank among the PEs of this node and their number; -1 when the
	// launcher does not say (the shmem layer then derives them from the allgathered Node names).
	LocalPE, LocalNPEs int
	// Node: ROX_NODE, else the host name; under PMIx, the launcher's name for the node, which
	// Dial fills in (Detect leaves it empty).
	Node string
	// Layout: the PEs of each node, nodes in PE order (ROX_LAYOUT, which roxrun sets across
	// hosts); nil when the launcher does not say. It lets the bootstrap tree span nodes (hier.go).
	Layout []int
	Source string // "roxrun", "pmix", "ompi", "pmi", "slurm", "torchrun" or "single"
	Addr   string // HOST:PORT of the rendezvous, "" if unknown
	Token  string
	// Host: this PE must start the rendezvous server itself at Addr (PE 0 when the launcher is
	// not roxrun, and a single process).
	Host bool

	// PMIx (Source "pmix"): the server variable that was found and the job's namespace.
	PMIxServer, PMIxNamespace string
}

// Detect reads the launcher's variables through getenv, in this order (ARCHITECTURE.md, "A job's life"): roxrun (ROX_PE...),
// a PMIx server (PMIX_SERVER_URI*, PMIX_NAMESPACE, PMIX_RANK: Open MPI's mpirun, srun
// --mpi=pmix), Open MPI, PMI, Slurm, torchrun, else a 1-PE job. ROX_BOOTSTRAP=TOKEN@HOST:PORT
// overrides the rendezvous address and token for every source.
//
// Under PMIx, Dial asks the server for the rest: PE 0 hosts the rendezvous on an address every
// node can reach, draws a random token and publishes both through PMIx, so no port convention,
// no ROX_BOOTSTRAP and nobody outside the job knows the token. Detect alone leaves NPEs as the
// launcher's own variables say (0 when they say nothing) and Addr and Token empty.
//
// Other foreign launchers run no rendezvous of their own for us, so PE 0 hosts it (Host) and the
// token is derived from the launcher's job id. That token keeps apart jobs that share a machine
// and stops a stray connection from another job, but it is no secret: anyone who can read the
// job id (squeue, ps -e) can compute it. Set ROX_BOOTSTRAP with a random token where that matters.
func Detect(getenv func(string) string) (Rank, error) {
	var (
		r   Rank
		err error
	)
	switch {
	case getenv(env.PE.Name) != "":
		r, err = detectRoxrun(getenv)
	case pmix.Server(getenv) != "":
		r, err = detectPMIx(getenv)
	case getenv("OMPI_COMM_WORLD_RANK") != "":
		r, err = detectOMPI(getenv)
	case getenv("PMI_RANK") != "":
		r, err = detectPMI(getenv)
	case getenv("SLURM_PROCID") != "":
		r, err = detectSlurm(getenv)
	case getenv("RANK") != "" && getenv("WORLD_SIZE") != "":
		r, err = detectTorchrun(getenv)
	default:
		r = Rank{PE: 0, NPEs: 1, LocalPE: 0, LocalNPEs: 1, Source: "single", Addr: "127.0.0.1:0", Host: true}
		r.Token, err = randomToken()
	}
	if err != nil {
		return Rank{}, err
	}
	if r.Source != "roxrun" {
		if v := getenv(env.Bootstrap.Name); v != "" {
			token, addr, err := parseBootstrap(v, false)
			if err != nil {
				return Rank{}, err
			}
			r.Addr = addr
			if token != "" {
				r.Token = token
			}
		}
	}
	if r.Node = getenv(env.Node.Name); r.Node == "" && r.Source != "pmix" {
		if r.Node, err = os.Hostname(); err != nil {
			return Rank{}, fmt.Errorf("bootstrap: Detect: no %s and no host name: %w", env.Node.Name, err)
		}
	}
	return r, nil
}

// number parses a required non-negative integer variable.
func number(getenv func(string) string, name string) (int, error) {
	v := getenv(name)
	if v == "" {
		return 0, rankErr("%s is not set", name)
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0, rankErr("%s=%q is not a non-negative integer", name, v)
	}
	return n, nil
}

// optional parses an integer variable that may be unset (-1).
func optional(getenv func(string) string, name string) (int, error) {
	if getenv(name) == "" {
		return -1, nil
	}
	return number(getenv, name)
}

// ranks reads a rank/size pair (and an optional local pair) and checks that they agree.
func ranks(getenv func(string) string, rank, size, localRank, localSize string) (Rank, error) {
	var r Rank
	var err error
	if r.PE, err = number(getenv, rank); err != nil {
		return r, err
	}
	if r.NPEs, err = number(getenv, size); err != nil {
		return r, err
	}
	if r.NPEs == 0 || r.PE >= r.NPEs {
		return r, rankErr("%s=%d is not below %s=%d", rank, r.PE, size, r.NPEs)
	}
	r.LocalPE, r.LocalNPEs = -1, -1
	if localRank != "" {
		if r.LocalPE, err = optional(getenv, localRank); err != nil {
			return r, err
		}
	}
	if localSize != "" {
		if r.LocalNPEs, err = optional(getenv, localSize); err != nil {
			return r, err
		}
	}
	if r.LocalNPEs > r.NPEs || r.LocalNPEs == 0 {
		return r, rankErr("%s=%d does not fit %s=%d", localSize, r.LocalNPEs, size, r.NPEs)
	}
	if r.LocalPE >= 0 && r.LocalNPEs > 0 && r.LocalPE >= r.LocalNPEs {
		return r, rankErr("%s=%d is not below %s=%d", localRank, r.LocalPE, localSize, r.LocalNPEs)
	}
	return r, nil
}

func detectRoxrun(getenv func(string) string) (Rank, error) {
	r, err := ranks(getenv, env.PE.Name, env.NPEs.Name, env.LocalPE.Name, env.LocalNPEs.Name)
	if err != nil {
		return Rank{}, err
	}
	r.Source = "roxrun"
	v := getenv(env.Bootstrap.Name)
	if v == "" {
		return Rank{}, rankErr("%s is set but %s is not", env.PE.Name, env.Bootstrap.Name)
	}
	if r.Token, r.Addr, err = parseBootstrap(v, true); err != nil {
		return Rank{}, err
	}
	if v := getenv(env.Layout.Name); v != "" {
		if r.Layout, err = parseLayout(v, r); err != nil {
			return Rank{}, err
		}
	}
	return r, nil
}

// parseLayout reads ROX_LAYOUT ("4,4,8": PEs per node, in PE order) and checks it against the
// rank: the counts add up to the job and this PE's node has LocalNPEs PEs, this one at LocalPE.
func parseLayout(v string, r Rank) ([]int, error) {
	name := env.Layout.Name
	var layout []int
	sum, node, local := 0, -1, -1
	for _, f := range strings.Split(v, ",") {
		c, err := strconv.Atoi(f)
		if err != nil || c < 1 {
			return nil, rankErr("%s=%q: %q is no count of PEs", name, v, f)
		}
		if r.PE >= sum && r.PE < sum+c {
			node, local = c, r.PE-sum
		}
		layout = append(layout, c)
		sum += c
	}
	switch {
	case sum != r.NPEs:
		return nil, rankErr("%s=%q adds up to %d PEs, %s=%d", name, v, sum, env.NPEs.Name, r.NPEs)
	case r.LocalNPEs >= 0 && (node != r.LocalNPEs || local != r.LocalPE):
		return nil, rankErr("%s=%q puts PE %d at %d of a node of %d, %s and %s say %d of %d", name, v, r.PE, local, node,
			env.LocalPE.Name, env.LocalNPEs.Name, r.LocalPE, r.LocalNPEs)
	}
	return layout, nil
}

// parseBootstrap splits TOKEN@HOST:PORT; the token is required when roxrun set it.
func parseBootstrap(v string, needToken bool) (token, addr string, err error) {
	name := env.Bootstrap.Name
	token, addr, found := strings.Cut(v, "@")
	if !found {
		token, addr = "", v
	}
	if needToken && token == "" {
		return "", "", rankErr("%s=%q has no TOKEN@ before the address", name, v)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return "", "", rankErr("%s=%q is not TOKEN@HOST:PORT", name, v)
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		return "", "", rankErr("%s=%q has a bad port %q", name, v, port)
	}
	return token, addr, nil
}

// detectPMIx reads what the environment of a PMIx client says: its rank (PMIX_RANK) and, when
// the launcher also sets its own variables (Open MPI, Slurm), the job size, which Dial checks
// against PMIx's.
func detectPMIx(getenv func(string) string) (Rank, error) {
	pe, err := number(getenv, "PMIX_RANK")
	if err != nil {
		return Rank{}, err
	}
	r := Rank{PE: pe, LocalPE: -1, LocalNPEs: -1, Source: "pmix", Host: pe == 0,
		PMIxServer: pmix.Server(getenv), PMIxNamespace: getenv("PMIX_NAMESPACE")}
	if size := firstSet(getenv, "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "PMI_SIZE"); size != "" {
		if r.NPEs, err = strconv.Atoi(size); err != nil || r.NPEs <= pe {
			return Rank{}, rankErr("PMIX_RANK=%d and the launcher's job size %q do not agree", pe, size)
		}
	}
	return r, nil
}

func detectOMPI(getenv func(string) string) (Rank, error) {
	r, err := ranks(getenv, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE")
	if err != nil {
		return Rank{}, err
	}
	r.Source = "ompi"
	job := firstSet(getenv, "PMIX_NAMESPACE", "OMPI_MCA_orte_hnp_uri", "OMPI_MCA_ess_base_jobid")
	foreign(&r, job)
	return r, nil
}

func detectPMI(getenv func(string) string) (Rank, error) {
	// MPICH's Hydra adds its local numbering in MPI_LOCALRANKID/MPI_LOCALNRANKS.
	r, err := ranks(getenv, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS")
	if err != nil {
		return Rank{}, err
	}
	r.Source = "pmi"
	job := firstSet(getenv, "PMIX_NAMESPACE", "PMI_KVSNAME", "PMI_PORT", "PMI_JOBID")
	foreign(&r, job)
	return r, nil
}

// foreign fills in what Open MPI and PMI do not give: the launcher tells no host to meet on, so
// the rendezvous is on this machine when the whole job is on it (port from the job id), and
// unknown otherwise (ROX_BOOTSTRAP must say). PE 0 hosts it.
func foreign(r *Rank, job string) {
	r.Host = r.PE == 0
	r.Token = deriveToken(r.Source, job)
	if job != "" && r.LocalNPEs == r.NPEs {
		r.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(20000+int(hash32(job)%20000)))
	}
}

func detectSlurm(getenv func(string) string) (Rank, error) {
	ntasks := "SLURM_NTASKS"
	if getenv(ntasks) == "" && getenv("SLURM_NPROCS") != "" {
		ntasks = "SLURM_NPROCS" // older Slurm
	}
	r, err := ranks(getenv, "SLURM_PROCID", ntasks, "SLURM_LOCALID", "")
	if err != nil {
		return Rank{}, err
	}
	r.Source = "slurm"
	if per, nodeID := getenv("SLURM_TASKS_PER_NODE"), getenv("SLURM_NODEID"); per != "" && nodeID != "" {
		counts, err := expandTasksPerNode(per)
		if err != nil {
			return Rank{}, err
		}
		id, err := number(getenv, "SLURM_NODEID")
		if err != nil {
			return Rank{}, err
		}
		if id >= len(counts) {
			return Rank{}, rankErr("SLURM_NODEID=%d is past the %d nodes of SLURM_TASKS_PER_NODE=%q", id, len(counts), per)
		}
		r.LocalNPEs = counts[id]
		if r.LocalPE >= r.LocalNPEs {
			return Rank{}, rankErr("SLURM_LOCALID=%d is not below the %d tasks SLURM_TASKS_PER_NODE=%q gives node %d", r.LocalPE, r.LocalNPEs, per, id)
		}
	}
	jobVar := "SLURM_JOB_ID"
	if getenv(jobVar) == "" {
		jobVar = "SLURM_JOBID"
	}
	job, err := number(getenv, jobVar)
	if err != nil {
		return Rank{}, err
	}
	listVar := "SLURM_JOB_NODELIST"
	if getenv(listVar) == "" {
		listVar = "SLURM_NODELIST"
	}
	nodes, err := ExpandNodelist(getenv(listVar))
	if err != nil {
		return Rank{}, rankErr("%s: %v", listVar, err)
	}
	// Every task can compute the same host and port: the first node (where task 0 runs with
	// Slurm's default block distribution) and a port from the job id. Two job steps of one job
	// running at once would collide on it; give them ROX_BOOTSTRAP.
	r.Addr = net.JoinHostPort(nodes[0], strconv.Itoa(20000+job%20000))
	r.Host = r.PE == 0
	r.Token = deriveToken("slurm", strconv.Itoa(job)+"."+getenv("SLURM_STEP_ID"))
	return r, nil
}

func detectTorchrun(getenv func(string) string) (Rank, error) {
	r, err := ranks(getenv, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
	if err != nil {
		return Rank{}, err
	}
	r.Source = "torchrun"
	host := getenv("MASTER_ADDR")
	if host == "" {
		return Rank{}, rankErr("RANK and WORLD_SIZE are set but MASTER_ADDR is not")
	}
	port, err := number(getenv, "MASTER_PORT")
	if err != nil {
		return Rank{}, err
	}
	// MASTER_PORT itself is torch's own TCPStore; take the next port.
	if port < 1 || port >= 65535 {
		return Rank{}, rankErr("MASTER_PORT=%d leaves no port above it for the rendezvous", port)
	}
	r.Addr = net.JoinHostPort(host, strconv.Itoa(port+1))
	r.Host = r.PE == 0
	r.Token = deriveToken("torchrun", getenv("TORCHELASTIC_RUN_ID")+"@"+r.Addr)
	return r, nil
}

func firstSet(getenv func(string) string, names ...string) string {
	for _, n := range names {
		if v := getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// deriveToken turns a launcher's job id into a token every PE of the job computes alike.
func deriveToken(source, job string) string {
	sum := sha256.Sum256([]byte("roxamen-bootstrap\x00" + source + "\x00" + job))
	return hex.EncodeToString(sum[:16])
}

func hash32(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}

// randomToken makes a job token nobody else can guess (roxrun and single-process jobs use it).
func randomToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("bootstrap: random job token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// NewToken returns a random job token, for launchers (roxrun) that start the server themselves.
func NewToken() (string, error) { return randomToken() }

// ExpandNodelist expands Slurm's host list syntax: "node[01-03,7],gpu5" is node01 node02 node03
// node7 gpu5. Zero padding follows the range's first number; several bracket groups in one name
// ("r[1-2]n[1-2]") multiply out.
func ExpandNodelist(list string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return nil, fmt.Errorf("empty node list")
	}
	var out []string
	depth, start := 0, 0
	for i := 0; i <= len(list); i++ {
		if i < len(list) {
			switch list[i] {
			case '[':
				if depth++; depth > 1 {
					return nil, fmt.Errorf("nested '[' at %d in %q", i, list)
				}
				continue
			case ']':
				if depth--; depth < 0 {
					return nil, fmt.Errorf("unmatched ']' at %d in %q", i, list)
				}
				continue
			case ',':
				if depth > 0 {
					continue
				}
			default:
				continue
			}
		}
		if depth != 0 {
			return nil, fmt.Errorf("unclosed '[' in %q", list)
		}
		name := strings.TrimSpace(list[start:i])
		if name == "" {
			return nil, fmt.Errorf("empty host name at %d in %q", start, list)
		}
		hosts, err := expandHost(name)
		if err != nil {
			return nil, fmt.Errorf("%v in %q", err, list)
		}
		out = append(out, hosts...)
		start = i + 1
	}
	return out, nil
}

// maxExpanded stops a typo like node[1-999999999] from eating memory.
const maxExpanded = 1 << 20

// expandHost expands the bracket groups of one host pattern, left to right.
func expandHost(pattern string) ([]string, error) {
	open := strings.IndexByte(pattern, '[')
	if open < 0 {
		return []string{pattern}, nil
	}
	end := strings.IndexByte(pattern[open:], ']') + open
	prefix, ranges, rest := pattern[:open], pattern[open+1:end], pattern[end+1:]
	var mids []string
	for _, part := range strings.Split(ranges, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		b, err2 := a, error(nil)
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if lo == "" || err1 != nil || err2 != nil || a < 0 || b < a {
			return nil, fmt.Errorf("bad range %q", part)
		}
		if len(mids)+b-a+1 > maxExpanded {
			return nil, fmt.Errorf("range %q expands to too many hosts", part)
		}
		for n := a; n <= b; n++ {
			mids = append(mids, fmt.Sprintf("%0*d", len(lo), n))
		}
	}
	tails, err := expandHost(rest)
	if err != nil {
		return nil, err
	}
	if len(mids)*len(tails) > maxExpanded {
		return nil, fmt.Errorf("%q expands to too many hosts", pattern)
	}
	out := make([]string, 0, len(mids)*len(tails))
	for _, m := range mids {
		for _, t := range tails {
			out = append(out, prefix+m+t)
		}
	}
	return out, nil
}

// expandTasksPerNode expands SLURM_TASKS_PER_NODE ("2(x3),1" is 2 2 2 1).
func expandTasksPerNode(v string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(v, ",") {
		count, times := part, "1"
		if i := strings.Index(part, "(x"); i >= 0 && strings.HasSuffix(part, ")") {
			count, times = part[:i], part[i+2:len(part)-1]
		}
		c, err1 := strconv.Atoi(count)
		t, err2 := strconv.Atoi(times)
		if err1 != nil || err2 != nil || c < 1 || t < 1 || len(out)+t > maxExpanded {
			return nil, rankErr("SLURM_TASKS_PER_NODE=%q has a bad entry %q", v, part)
		}
		for ; t > 0; t-- {
			out = append(out, c)
		}
	}
	return out, nil
}
