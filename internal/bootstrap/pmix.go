package bootstrap

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/roxamen/roxamen/internal/env"
	"github.com/roxamen/roxamen/internal/pmix"
)

// pmixProbe loads libpmix (a variable: tests make it fail).
var pmixProbe = pmix.Probe

// pmixKey is where PE 0 publishes the rendezvous: "NODEID TOKEN HOST:PORT[,HOST:PORT...]";
// arrivedKey is what every PE publishes before the fence.
const (
	pmixKey    = "roxamen.bootstrap.v1"
	arrivedKey = "roxamen.arrived.v1"
	// treeKey is where, in a job above StarMax PEs, every PE publishes its own bootstrap-tree
	// listener: "NODEID HOST:PORT[,HOST:PORT...]".
	treeKey = "roxamen.tree.v1"
)

// missingPEs returns, in order, the PEs (of the first 1024) whose arrivedKey cannot be read
// within a second: those that never reached the fence. The reads run 32 at a time.
func missingPEs(pc *pmix.Client, npes, self int) []int {
	var (
		mu      sync.Mutex
		missing []int
		wg      sync.WaitGroup
	)
	sem := make(chan struct{}, 32)
	for pe := range min(npes, 1024) {
		if pe == self {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if _, err := pc.GetString(pe, arrivedKey, time.Second); err != nil {
				mu.Lock()
				missing = append(missing, pe)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.Sort(missing)
	return missing
}

// dialPMIx joins a job whose launcher runs a PMIx server (Open MPI's mpirun, srun --mpi=pmix):
//
//  1. PMIx_Init, then PMIx's job size, local rank and size, node id and host name complete r;
//  2. PE 0 starts the rendezvous server on every interface (or at ROX_BOOTSTRAP's address),
//     draws a random token (crypto/rand; ROX_BOOTSTRAP's, when it has one) and publishes the
//     token and the server's addresses with PMIx_Put + PMIx_Commit;
//  3. every PE meets the others in a PMIx_Fence and reads PE 0's record with PMIx_Get;
//  4. every PE connects to the server as under any other launcher.
//
// Every PE also publishes that it arrived. A PE that never reaches the fence (it died, hangs,
// or is not a Roxamen program) makes the fence fail within timeout on every other PE, naming it
// (PE 0: "never published the rendezvous").
func dialPMIx(ctx context.Context, r Rank, timeout time.Duration) (*Client, error) {
	call := fmt.Sprintf("bootstrap: Dial on PE %d", r.PE)
	if err := pmixProbe(); err != nil {
		return nil, fmt.Errorf("%s: the launcher runs a PMIx server (%s is set) but %w", call, r.PMIxServer, err)
	}
	pc, err := pmix.Init(timeout)
	if err != nil {
		return nil, fmt.Errorf("%s: connecting to the launcher's PMIx server (%s): %w", call, r.PMIxServer, err)
	}
	var (
		s    *Server
		tree net.Listener // tree mode: this PE's listener, published under treeKey
	)
	fail := func(err error) (*Client, error) {
		if s != nil {
			s.Close()
		}
		if tree != nil {
			tree.Close()
		}
		pc.Finalize()
		return nil, fmt.Errorf("%s: %w", call, err)
	}
	if pc.Rank() != r.PE {
		return fail(fmt.Errorf("PMIx says rank %d, PMIX_RANK=%d", pc.Rank(), r.PE))
	}
	n, err := pc.JobSize()
	if err != nil {
		return fail(err)
	}
	if r.NPEs != 0 && r.NPEs != n {
		return fail(fmt.Errorf("PMIx says the job has %d processes, the launcher's variables %d", n, r.NPEs))
	}
	if r.NPEs = n; r.PE >= n {
		return fail(fmt.Errorf("PMIx rank %d is not below its job size %d", r.PE, n))
	}
	if r.LocalPE, err = pc.LocalRank(); err != nil {
		return fail(err)
	}
	if r.LocalNPEs, err = pc.LocalSize(); err != nil {
		return fail(err)
	}
	if r.LocalNPEs < 1 || r.LocalNPEs > n || r.LocalPE >= r.LocalNPEs {
		return fail(fmt.Errorf("PMIx local rank %d and local size %d do not fit a job of %d", r.LocalPE, r.LocalNPEs, n))
	}
	node, err := pc.NodeID(r.PE)
	if err != nil {
		return fail(err)
	}
	if r.Node == "" {
		// The launcher's name for the node, which is what tells PEs of one node apart from the
		// others (two containers or network namespaces may share a host name).
		if r.Node, err = pc.Hostname(); err != nil || r.Node == "" {
			if r.Node, err = os.Hostname(); err != nil {
				return fail(fmt.Errorf("no %s, no PMIx host name and no host name: %w", env.Node.Name, err))
			}
		}
	}

	if r.PE == 0 {
		if r.Token == "" {
			if r.Token, err = randomToken(); err != nil {
				return fail(err)
			}
		}
		listen := ":0"
		if r.Addr != "" {
			listen = listenAddr(r.Addr)
		}
		if s, err = NewServer(listen, r.NPEs, r.Token); err != nil {
			return fail(fmt.Errorf("starting the rendezvous server: %w", err))
		}
		s.mu.Lock()
		s.hostPE = 0
		s.mu.Unlock()
		addrs, err := reachableAddrs(r.Addr, s.Addr())
		if err != nil {
			return fail(err)
		}
		rec := fmt.Sprintf("%d %s %s", node, r.Token, strings.Join(addrs, ","))
		if err := pc.Put(pmixKey, rec); err != nil {
			return fail(err)
		}
	}
	// Above StarMax PEs the job runs in tree mode across however many nodes it spans: every PE
	// listens on TCP and publishes where, in the same commit and fence as the rest (the fence is
	// the launcher's, which scales); later it reads only the addresses of the PEs it dials (its
	// parent, its directory owners), not every PE's (pmixTreeConfig).
	if treeWanted(r.NPEs) {
		if tree, err = SysNet.Listen(":0"); err != nil {
			return fail(fmt.Errorf("listening for the bootstrap tree: %w", err))
		}
		addrs, err := reachableAddrs(r.Addr, tree.Addr().String())
		if err != nil {
			return fail(err)
		}
		if err := pc.Put(treeKey, fmt.Sprintf("%d %s", node, strings.Join(addrs, ","))); err != nil {
			return fail(err)
		}
	}
	// Every PE also says it got this far, so that a failed fence can name who did not.
	if err := pc.Put(arrivedKey, "1"); err != nil {
		return fail(err)
	}
	if err := pc.Commit(); err != nil {
		return fail(err)
	}
	// In tree mode no PE reads more than a few others' records (PE 0's, its parent's, its
	// directory owners'): the fence leaves the data where it was committed (direct modex), so
	// that no node's PMIx server receives every PE's.
	fence := pc.Fence
	if tree != nil {
		fence = pc.FenceDirect
	}
	if err := fence(timeout); err != nil {
		missing := missingPEs(pc, r.NPEs, r.PE)
		switch {
		case len(missing) > 0 && missing[0] == 0:
			return fail(&fenceError{"PE 0 never published the rendezvous through PMIx (it died, hangs, or is not a Roxamen program)", err})
		case len(missing) > 0:
			return fail(&fenceError{fmt.Sprintf("PEs %v never reached the PMIx fence (they died, hang, or are not Roxamen programs)", missing), err})
		}
		return fail(&fenceError{fmt.Sprintf("a PE of the %d never reached the PMIx fence (it died, hangs, or is not a Roxamen program)", r.NPEs), err})
	}
	rec, err := pc.GetString(0, pmixKey, timeout)
	if err != nil {
		return fail(fmt.Errorf("reading PE 0's rendezvous record: %w", err))
	}
	node0, token, addrs, err := parseRecord(rec)
	if err != nil {
		return fail(fmt.Errorf("PE 0's rendezvous record %q: %w", rec, err))
	}
	r.Token = token
	if r.Addr, err = pickAddr(addrs, node0 == node); err != nil {
		return fail(err)
	}
	r.Host = r.PE == 0
	if env.Debugging(env.LevelInfo) {
		sum := sha256.Sum256([]byte(r.Token))
		fmt.Fprintf(os.Stderr, "roxamen: PE %d: bootstrap through PMIx (%s, namespace %s, rank %d of %d, node %d %q): "+
			"rendezvous %s (published %s), job token sha256:%s\n",
			r.PE, r.PMIxServer, pc.Namespace(), r.PE, r.NPEs, node, r.Node, r.Addr, strings.Join(addrs, ","), hex.EncodeToString(sum[:8]))
	}
	cfg := Config{}
	if tree != nil {
		cfg = pmixTreeConfig(pc, tree, node, timeout)
		if env.Debugging(env.LevelInfo) {
			fmt.Fprintf(os.Stderr, "roxamen: PE %d: bootstrap tree through PMIx: listening at %s, addresses read from PMIx on first use\n", r.PE, tree.Addr())
		}
	}
	c, err := dial(ctx, r, timeout, s, cfg)
	s = nil // dial owns it now, and closed it on failure
	if err != nil {
		if tree != nil {
			tree.Close()
		}
		pc.Finalize()
		return nil, err
	}
	c.pmix = pc
	return c, nil
}

// pmixTreeConfig is tree mode over the addresses the PEs published under treeKey: a PE's
// address is read from PMIx (PMIx_Get, answered by the local PMIx server from what the fence
// brought, or fetched by it on demand) only when this PE first dials that PE.
func pmixTreeConfig(pc *pmix.Client, ln net.Listener, node int, timeout time.Duration) Config {
	return Config{
		Listener: ln,
		Lookup: func(ctx context.Context, pe int) (string, error) {
			rec, err := pc.GetString(pe, treeKey, timeout)
			if err != nil {
				return "", fmt.Errorf("reading PE %d's bootstrap-tree address from PMIx: %w", pe, err)
			}
			f := strings.Fields(rec)
			peNode, err := 0, error(nil)
			if len(f) == 2 {
				peNode, err = strconv.Atoi(f[0])
			}
			if len(f) != 2 || err != nil {
				return "", fmt.Errorf("PE %d's bootstrap-tree record %q is not NODEID ADDRS", pe, rec)
			}
			return pickAddr(strings.Split(f[1], ","), peNode == node)
		},
	}
}

// fenceError is a PMIx fence that failed because of another PE: it matches ErrPeerFailed and
// the PMIx error.
type fenceError struct {
	what string
	err  error
}

func (e *fenceError) Error() string   { return e.what + ": " + e.err.Error() }
func (e *fenceError) Unwrap() []error { return []error{ErrPeerFailed, e.err} }

// reachableAddrs lists where peers may reach the server listening at bound: ROX_BOOTSTRAP's
// host when it named one, else every address of this machine's up, non-loopback interfaces
// (IPv4 first), then loopback for the PEs of this node.
func reachableAddrs(configured, bound string) ([]string, error) {
	_, port, err := net.SplitHostPort(bound)
	if err != nil {
		return nil, err
	}
	if configured != "" {
		host, _, _ := net.SplitHostPort(configured)
		return []string{net.JoinHostPort(host, port)}, nil
	}
	var v4, v6 []string
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("listing this machine's interfaces for the rendezvous: %w", err)
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		as, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range as {
			ipn, ok := a.(*net.IPNet)
			if !ok || !ipn.IP.IsGlobalUnicast() {
				continue // link-local addresses need a zone no other node can name
			}
			if ipn.IP.To4() != nil {
				v4 = append(v4, net.JoinHostPort(ipn.IP.String(), port))
			} else {
				v6 = append(v6, net.JoinHostPort(ipn.IP.String(), port))
			}
		}
	}
	return append(append(v4, v6...), net.JoinHostPort("127.0.0.1", port)), nil
}

func parseRecord(rec string) (node int, token string, addrs []string, err error) {
	f := strings.Fields(rec)
	if len(f) != 3 {
		return 0, "", nil, errors.New("not NODEID TOKEN ADDRS")
	}
	if node, err = strconv.Atoi(f[0]); err != nil {
		return 0, "", nil, fmt.Errorf("bad node id %q", f[0])
	}
	if f[1] == "" {
		return 0, "", nil, errors.New("empty token")
	}
	return node, f[1], strings.Split(f[2], ","), nil
}

// pickAddr chooses which of PE 0's addresses this PE connects to: loopback on PE 0's node; else
// the first that is not also an address of this machine (docker0's 172.17.0.1 is on every
// node, and this PE must not send the job token to a stranger on its own), preferring one on a
// subnet this machine is attached to.
func pickAddr(addrs []string, samenode bool) (string, error) {
	var own []*net.IPNet
	if as, err := net.InterfaceAddrs(); err == nil {
		for _, a := range as {
			if ipn, ok := a.(*net.IPNet); ok {
				own = append(own, ipn)
			}
		}
	}
	isOwn := func(ip net.IP) bool {
		for _, n := range own {
			if n.IP.Equal(ip) {
				return true
			}
		}
		return false
	}
	attached := func(ip net.IP) bool {
		for _, n := range own {
			if !n.IP.IsLoopback() && n.Contains(ip) {
				return true
			}
		}
		return false
	}
	var routed string
	for _, a := range addrs {
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			continue
		}
		ip := net.ParseIP(host)
		switch {
		case ip == nil: // a name (ROX_BOOTSTRAP's): the resolver decides
			return a, nil
		case ip.IsLoopback():
			if samenode {
				return a, nil
			}
		case samenode:
		case isOwn(ip):
		case attached(ip):
			return a, nil
		case routed == "":
			routed = a
		}
	}
	if samenode {
		// Only non-loopback addresses were published (ROX_BOOTSTRAP): the first will do.
		if len(addrs) > 0 {
			return addrs[0], nil
		}
	}
	if routed != "" {
		return routed, nil
	}
	return "", fmt.Errorf("PE 0 published no rendezvous address this node can reach (%s)", strings.Join(addrs, ","))
}

// Describe says, in one line for `roxrun info`, which launcher getenv's environment belongs to
// and how a PE started in it would find the job.
func Describe(getenv func(string) string) string {
	r, err := Detect(getenv)
	switch {
	case err != nil:
		return "launcher: " + err.Error()
	case r.Source == "pmix":
		lib, err := pmix.Version()
		if err != nil {
			lib = "but " + err.Error()
		} else {
			lib = pmix.Library + ": " + lib
		}
		return fmt.Sprintf("launcher: pmix (%s is set; namespace %s, rank %d): rendezvous and a random job token through PMIx; %s",
			r.PMIxServer, r.PMIxNamespace, r.PE, lib)
	case r.Source == "single":
		return "launcher: none (a 1-PE job)"
	default:
		return fmt.Sprintf("launcher: %s (PE %d of %d, rendezvous %s)", r.Source, r.PE, r.NPEs, orElse(r.Addr, "unknown: set ROX_BOOTSTRAP"))
	}
}

func orElse(s, empty string) string {
	if s == "" {
		return empty
	}
	return s
}
