package bootstrap

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"strconv"
	"strings"

	"github.com/roxamen/roxamen/internal/env"
)

// Network is what the bootstrap's connections run over: the operating system's sockets (SysNet)
// in a job, an in-memory network with a per-message cost in the scale simulation
// (internal/bootstrap/sim). The same client, server and tree code runs over either.
type Network interface {
	Listen(addr string) (net.Listener, error)
	Dial(ctx context.Context, addr string) (net.Conn, error)
}

// SysNet is the operating system's network: "HOST:PORT" is TCP, "unix:PATH" a unix socket, and
// "unix:@NAME" a socket in Linux's abstract namespace (no file to clean up; it goes with the
// process).
var SysNet Network = sysNet{}

type sysNet struct{}

func splitAddr(addr string) (network, a string) {
	if rest, ok := strings.CutPrefix(addr, "unix:"); ok {
		return "unix", rest
	}
	return "tcp", addr
}

func (sysNet) Listen(addr string) (net.Listener, error) {
	network, a := splitAddr(addr)
	lc := net.ListenConfig{KeepAliveConfig: keepAlive}
	return lc.Listen(context.Background(), network, a)
}

func (sysNet) Dial(ctx context.Context, addr string) (net.Conn, error) {
	network, a := splitAddr(addr)
	d := net.Dialer{KeepAliveConfig: keepAlive}
	return d.DialContext(ctx, network, a)
}

// Config says how a Client (DialConfig) or a Server (NewServerConfig) is carried.
type Config struct {
	Net Network // nil: SysNet
	// PEAddr, when set, puts the job in tree mode (tree.go): PE pe listens at PEAddr(pe) for its
	// children in the bootstrap tree and for the PEs whose directory keys it owns. Every PE must
	// derive the same addresses without asking anyone; only the root's (Rank.Addr) is given.
	PEAddr func(pe int) string
	// Lookup, instead of PEAddr, puts the job in tree mode with addresses that are published,
	// not derived (PMIx: each PE's address is in the launcher's key-value store): it returns
	// where to dial PE pe, and is asked only for the PEs this one dials (its parent and the
	// directory owners it uses). Listener is then this PE's own, already published.
	Lookup   func(ctx context.Context, pe int) (string, error)
	Listener net.Listener
	// Layout, with PEAddr for the PEs of one node, makes the tree two-level (hier.go): the PEs
	// per node, nodes in PE order (roxrun across hosts: ROX_LAYOUT). Each node's first PE, its
	// leader, also listens at LeaderAddr(node) (nil: ":0", every interface, on SysNet) for the
	// others. A Server given a Layout is the root of such a tree.
	Layout     []int
	LeaderAddr func(node int) string
	// Fanout is the tree's k (children per node); 0 is DefaultFanout.
	Fanout int
}

// DefaultFanout is the tree's children per node: depth log_8 N (5 levels at 32,768 PEs), and a
// node's collective work is its own plus eight children's.
const DefaultFanout = 8

// StarMax is the largest job that Dial keeps in star mode (every PE connected to the rendezvous
// server). Measured with the simulation and on this machine (ARCHITECTURE.md, "Scale"): below
// it the star's one round trip beats the tree's 2 log_k N hops, and the server's O(N) work is
// small.
const StarMax = 64

// OneNodeStarMax is the largest job on one node that ROX_BOOTSTRAP_TREE=auto keeps in star mode.
// There the tree's relays cost more than the server's O(N) work saves: 256 PEs on this 2-core
// machine (roxrun info --scale, alternating, load average 110-118 from the jobs themselves and
// other work) took 10.6 and 8.8 s to Init in the tree, 5.4 and 6.4 s in the star (docs/cpu.md).
const OneNodeStarMax = 256

// autoTree is whether ROX_BOOTSTRAP_TREE leaves the shape to the size (auto).
func autoTree() bool {
	v, _ := env.BootTree.String()
	return v != "on" && v != "off"
}

// defaultConfig is the Config Dial uses for r: tree mode when the job is larger than StarMax and
// every PE's address can be derived. On one node (LocalNPEs == NPEs) that is an abstract unix
// socket named by the job token's hash and the PE: unique per job, nothing to bind in advance,
// nothing to clean up. Across nodes no address is derivable without the launcher's help (a port
// convention collides, and roxrun's remote PEs are started through ssh), so those jobs stay in
// star mode (doc.go).
func defaultConfig(r Rank) Config {
	switch {
	case !treeWanted(r.NPEs):
		return Config{}
	case r.LocalNPEs == r.NPEs && r.NPEs <= OneNodeStarMax && autoTree():
		return Config{}
	case r.LocalNPEs == r.NPEs:
		return Config{PEAddr: UnixPEAddr(r.Token)}
	case len(r.Layout) > 1:
		return Config{PEAddr: UnixPEAddr(r.Token), Layout: r.Layout}
	}
	return Config{}
}

// treeWanted says whether a job of npes PEs takes the tree where its addresses can be had:
// ROX_BOOTSTRAP_TREE (auto: above StarMax).
func treeWanted(npes int) bool {
	switch v, _ := env.BootTree.String(); v {
	case "on":
		return npes > 1
	case "off":
		return false
	}
	return npes > StarMax
}

// UnixPEAddr returns the abstract unix socket addresses of a one-node job's PEs in tree mode.
func UnixPEAddr(token string) func(pe int) string {
	sum := sha256.Sum256([]byte("roxamen bootstrap tree\x00" + token))
	prefix := "unix:@roxamen-" + hex.EncodeToString(sum[:8]) + "-"
	return func(pe int) string { return prefix + strconv.Itoa(pe) }
}
