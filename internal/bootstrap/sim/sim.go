package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/roxamen/roxamen/internal/bootstrap"
)

// Pattern is which peers a PE looks up at Init: the peers it will talk to.
type Pattern string

const (
	Ring    Pattern = "ring"    // PE-1 and PE+1
	Stencil Pattern = "stencil" // the 4 neighbours on a near-square 2D grid (periodic)
	Group8  Pattern = "group8"  // the other 7 PEs of its group of 8
	All     Pattern = "all"     // every other PE
)

// Patterns are every Pattern, in table order.
var Patterns = []Pattern{Ring, Stencil, Group8, All}

// Peers returns the PEs pe looks up under p in a job of n.
func (p Pattern) Peers(pe, n int) []int {
	var out []int
	add := func(q int) {
		if q != pe && !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	switch p {
	case Ring:
		add((pe + 1) % n)
		add((pe + n - 1) % n)
	case Stencil:
		w := int(math.Sqrt(float64(n)))
		for n%w != 0 {
			w--
		}
		h := n / w
		x, y := pe%w, pe/w
		add(y*w + (x+1)%w)
		add(y*w + (x+w-1)%w)
		add(((y+1)%h)*w + x)
		add(((y+h-1)%h)*w + x)
	case Group8:
		base := pe / 8 * 8
		for q := base; q < min(base+8, n); q++ {
			add(q)
		}
	case All:
		for q := range n {
			add(q)
		}
	}
	return out
}

// Config is one simulated Init.
type Config struct {
	NPEs    int
	Pattern Pattern
	Tree    bool // tree mode; false: the star (every PE at the rendezvous server)
	Fanout  int  // 0: bootstrap.DefaultFanout
	// PerNode, with Tree, spreads the PEs over nodes of PerNode PEs (the last one may have
	// fewer) in the two-level tree across nodes (bootstrap's hier.go): node leaders register at
	// the root and form the tree across nodes; a directory owner on another node is reached
	// through its leader's relay. 0: every PE on one node (the one-level tree).
	PerNode   int
	Latency   time.Duration // L: one way, per message
	Overhead  time.Duration // o: a node's CPU per message sent or received (LogP's o)
	Bandwidth float64       // bytes/s per node; 0: infinite
	AddrBytes int           // the size of the address each PE publishes (0: 64)
	// Real runs the virtual PEs over this machine's sockets instead (loopback TCP to the root,
	// abstract unix sockets between PEs): Wall is then a measured time (Causal is zero).
	Real bool
	// Timeout is every PE's bootstrap timeout (ROX_TIMEOUT), in real time; 0: 2 minutes. Tens of
	// thousands of virtual PEs on a small machine need more.
	Timeout time.Duration
}

// Result is what one simulated Init did.
type Result struct {
	Config
	// Rounds: one-way message latencies on Init's critical path: the connect (2 round trips: the
	// socket's and the join's), the Put's and each Get's round trip (a PE's lookups run one after
	// another) and the Barrier (2 x tree depth; the star: 1 round trip).
	Rounds int
	// InitTime = Rounds x L + the busiest node's (messages x o + bytes / bandwidth), the root
	// included: LogP's cost of the measured traffic, each term a named assumption.
	InitTime time.Duration
	// Causal: the virtual clocks' verdict (largest clock at the end of Init). Each virtual PE has
	// one clock for all its links, so chains of unrelated messages through a busy node add up:
	// an upper bound, far above InitTime when one node serves many.
	Causal time.Duration
	Wall   time.Duration // real time from the first Dial to the last PE's end of Init
	// Per PE, over the PEs (the rendezvous server, which is roxrun's and no PE, is Root).
	MaxMsgs, MaxBytes   uint64
	MeanMsgs, MeanBytes float64
	MaxConns            int
	MeanConns           float64
	Lookups             float64 // Gets per PE
	Root                bootstrap.Traffic
	// HeapPerPE: Go heap and goroutine stacks in use per virtual PE at the end of Init, every
	// bootstrap object and connection buffer included (measured, not modelled).
	HeapPerPE float64
}

// Run simulates one Init: every virtual PE dials, publishes its address with Put under its own
// key, looks up its pattern's peers with Get, and ends with a Barrier, as shmem.Init does.
func Run(cfg Config) (Result, error) {
	if cfg.NPEs < 1 {
		return Result{}, fmt.Errorf("sim: Run: %d PEs", cfg.NPEs)
	}
	if cfg.AddrBytes == 0 {
		cfg.AddrBytes = 64
	}
	if cfg.Fanout == 0 {
		cfg.Fanout = bootstrap.DefaultFanout
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	nw := NewNet(cfg.Latency, cfg.Bandwidth)
	token := fmt.Sprintf("sim-token-%d", time.Now().UnixNano())
	var rootNet bootstrap.Network = nw.Host()
	rootAddr := "root"
	if cfg.Real {
		rootNet, rootAddr = bootstrap.SysNet, "127.0.0.1:0"
	}
	var layout []int
	if cfg.Tree && cfg.PerNode > 0 {
		for left := cfg.NPEs; left > 0; left -= cfg.PerNode {
			layout = append(layout, min(left, cfg.PerNode))
		}
	}
	srv, err := bootstrap.NewServerConfig(rootAddr, cfg.NPEs, token, bootstrap.Config{Net: rootNet, Layout: layout})
	if err != nil {
		return Result{}, err
	}
	defer srv.Close()
	rootAddr = srv.Addr()
	bc := bootstrap.Config{Fanout: cfg.Fanout}
	if cfg.Tree {
		bc.PEAddr = func(pe int) string { return "pe/" + strconv.Itoa(pe) }
		if cfg.Real {
			bc.PEAddr = bootstrap.UnixPEAddr(token)
		}
		if layout != nil {
			bc.Layout = layout
			bc.LeaderAddr = func(node int) string { return "leader/" + strconv.Itoa(node) }
			if cfg.Real {
				bc.LeaderAddr = func(int) string { return "127.0.0.1:0" }
			}
		}
	}
	hosts := make([]*Host, cfg.NPEs)
	clients := make([]*bootstrap.Client, cfg.NPEs)
	errs := make([]error, cfg.NPEs)
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*timeout)
	defer cancel()
	var wg sync.WaitGroup
	var (
		firstErr error
		errOnce  sync.Once
	)
	start := time.Now()
	for pe := range cfg.NPEs {
		hosts[pe] = nw.Host()
		wg.Add(1)
		go func() {
			defer wg.Done()
			pc := bc
			pc.Net = hosts[pe]
			if cfg.Real {
				pc.Net = bootstrap.SysNet
			}
			errs[pe] = initPE(ctx, cfg, pc, rootAddr, pe, token, timeout, &clients[pe])
			if errs[pe] != nil {
				errOnce.Do(func() { firstErr = errs[pe] })
				cancel() // the others would wait for this PE until their timeout
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	if firstErr != nil {
		for _, c := range clients {
			if c != nil { // end the job, so that Close waits for nobody
				c.Abort(1, "the simulation failed: "+firstErr.Error())
				break
			}
		}
		closeAll(clients)
		return Result{}, fmt.Errorf("sim: N=%d %s: %w", cfg.NPEs, cfg.Pattern, firstErr)
	}
	if err := errors.Join(errs...); err != nil {
		closeAll(clients)
		return Result{}, err
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)

	r := Result{Config: cfg, Wall: wall}
	r.HeapPerPE = (float64(after.HeapAlloc+after.StackInuse) - float64(before.HeapAlloc+before.StackInuse)) / float64(cfg.NPEs)
	for pe, c := range clients {
		st := c.Stats()
		t := st.Total()
		r.MaxMsgs = max(r.MaxMsgs, t.Msgs())
		r.MaxBytes = max(r.MaxBytes, t.Bytes())
		r.MeanMsgs += float64(t.Msgs())
		r.MeanBytes += float64(t.Bytes())
		r.MaxConns = max(r.MaxConns, st.Conns)
		r.MeanConns += float64(st.Conns)
		r.Lookups += float64(len(cfg.Pattern.Peers(pe, cfg.NPEs)))
		clock, _ := hosts[pe].Now()
		r.Causal = max(r.Causal, clock)
	}
	n := float64(cfg.NPEs)
	r.MeanMsgs, r.MeanBytes, r.MeanConns, r.Lookups = r.MeanMsgs/n, r.MeanBytes/n, r.MeanConns/n, r.Lookups/n
	r.Root = srv.Stats().Total()
	closeAll(clients)

	barrier := 2
	switch {
	case layout != nil:
		// Down and up both levels; before joining, a leader registers at the root and reads its
		// parent leader's address there (2 round trips more).
		barrier = 2*(depth(len(layout), cfg.Fanout)+depth(cfg.PerNode-1, cfg.Fanout)) + 4
	case cfg.Tree:
		barrier = 2 * depth(cfg.NPEs, cfg.Fanout)
	}
	r.Rounds = 4 + 2 + int(2*math.Ceil(r.Lookups)) + barrier
	busiest := func(msgs, bytes uint64) time.Duration {
		t := time.Duration(msgs) * cfg.Overhead
		if cfg.Bandwidth > 0 {
			t += time.Duration(float64(bytes) / cfg.Bandwidth * float64(time.Second))
		}
		return t
	}
	r.InitTime = time.Duration(r.Rounds)*cfg.Latency + max(busiest(r.MaxMsgs, r.MaxBytes), busiest(r.Root.Msgs(), r.Root.Bytes()))
	return r, nil
}

// depth is the bootstrap tree's depth over n PEs with fanout k (the root, roxrun's server, at 0).
func depth(n, k int) int {
	d, last := 0, 0
	for last < n {
		last = k*last + k
		d++
	}
	return d
}

func initPE(ctx context.Context, cfg Config, bc bootstrap.Config, root string, pe int, token string, timeout time.Duration, out **bootstrap.Client) error {
	c, err := bootstrap.DialConfig(ctx, bootstrap.Rank{PE: pe, NPEs: cfg.NPEs, LocalPE: -1, LocalNPEs: -1, Addr: root, Token: token, Source: "sim"}, timeout, bc)
	if err != nil {
		return err
	}
	*out = c
	addr := make([]byte, cfg.AddrBytes)
	copy(addr, fmt.Sprintf("pe%d", pe))
	if err := c.Put(ctx, "addr/"+strconv.Itoa(pe), addr); err != nil {
		return err
	}
	for _, q := range cfg.Pattern.Peers(pe, cfg.NPEs) {
		v, err := c.Get(ctx, "addr/"+strconv.Itoa(q))
		if err != nil {
			return err
		}
		if want := fmt.Sprintf("pe%d", q); string(v[:len(want)]) != want {
			return fmt.Errorf("sim: PE %d got %q for PE %d", pe, v, q)
		}
	}
	return c.Barrier(ctx)
}

func closeAll(cs []*bootstrap.Client) {
	var wg sync.WaitGroup
	for _, c := range cs {
		if c != nil {
			wg.Add(1)
			go func() { defer wg.Done(); c.Close() }()
		}
	}
	wg.Wait()
}

// Header and Row print a Result as a table line.
const Header = "mode    pattern     N  rounds  max msgs  mean msgs  max bytes  mean bytes  conns/PE (max)  lookups/PE  root msgs  root bytes  Init time  causal bound  heap/PE"

func (r Result) Row() string {
	mode := "star"
	if r.Tree {
		mode = "tree"
	}
	if r.Tree && r.PerNode > 0 {
		mode = fmt.Sprintf("hier%d", r.PerNode)
	}
	return fmt.Sprintf("%-6s  %-7s %5d  %6d  %8d  %9.1f  %9d  %10.0f  %8.1f (%4d)  %10.1f  %9d  %10d  %9s  %12s  %5.0f KiB",
		mode, r.Pattern, r.NPEs, r.Rounds, r.MaxMsgs, r.MeanMsgs, r.MaxBytes, r.MeanBytes, r.MeanConns, r.MaxConns,
		r.Lookups, r.Root.Msgs(), r.Root.Bytes(), r.InitTime.Round(time.Microsecond), r.Causal.Round(time.Microsecond), r.HeapPerPE/1024)
}
