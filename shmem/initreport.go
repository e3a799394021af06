package shmem

import (
	"fmt"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/roxamen/roxamen/internal/bootstrap"
)

// Init's phases, in the order InitReport lists them.
const (
	PhaseDevice    = "device open"        // picking the backend, opening the device
	PhaseHeap      = "heap"               // allocating, exporting and reserving the symmetric heap
	PhaseBootstrap = "bootstrap exchange" // joining the rendezvous, the allgathers and key-value puts
	PhaseMapping   = "node mapping"       // importing the heaps of this node's PEs
	PhaseTransport = "transport start"    // starting the NIC transport and publishing its address
	PhaseRuntime   = "device runtime"     // GPU backends: peer access, the runtime module, ring and proxy
	PhaseBarrier   = "final barrier"      // every PE ready before anyone communicates
)

var phaseOrder = []string{PhaseDevice, PhaseHeap, PhaseBootstrap, PhaseMapping, PhaseTransport, PhaseRuntime, PhaseBarrier}

// BootTraffic is the bootstrap traffic of one PE: messages and bytes it sent and received.
type BootTraffic struct {
	MsgsSent, MsgsRecv   int64
	BytesSent, BytesRecv int64
}

func (a BootTraffic) sub(b BootTraffic) BootTraffic {
	return BootTraffic{a.MsgsSent - b.MsgsSent, a.MsgsRecv - b.MsgsRecv, a.BytesSent - b.BytesSent, a.BytesRecv - b.BytesRecv}
}

func (a BootTraffic) add(b BootTraffic) BootTraffic {
	return BootTraffic{a.MsgsSent + b.MsgsSent, a.MsgsRecv + b.MsgsRecv, a.BytesSent + b.BytesSent, a.BytesRecv + b.BytesRecv}
}

// bootTraffic reads a bootstrap client's traffic counters so far (all of its phases together:
// Init's own phases are the ones InitReport splits by).
func bootTraffic(c *bootstrap.Client) BootTraffic {
	t := c.Stats().Total()
	return BootTraffic{int64(t.MsgsSent), int64(t.MsgsRecv), int64(t.BytesSent), int64(t.BytesRecv)}
}

// InitPhase is one phase of Init at one PE.
type InitPhase struct {
	Name string
	Time time.Duration
	// Boot is the phase's bootstrap traffic at this PE (what its bootstrap client counted).
	Boot BootTraffic
}

// InitReport is what Init cost one PE: wall time per phase and the process's CPU time.
type InitReport struct {
	PE, NPEs int
	Total    time.Duration
	// CPU time (user, system) of this process during Init (getrusage RUSAGE_SELF): the PE's own
	// where each PE is a process, the sum of all where several PEs share one.
	User, Sys time.Duration
	Phases    []InitPhase // in phaseOrder, those that took place
	Transport string      // the NIC transport started ("tcp", "ucx"), "" for none
	Counted   bool        // Boot fields are filled (Init had a bootstrap client to count)
}

// String is a one-line summary: total, CPU and each phase.
func (r InitReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "PE %d of %d: Init %v (user %v, sys %v)", r.PE, r.NPEs, r.Total.Round(time.Microsecond), r.User.Round(time.Microsecond), r.Sys.Round(time.Microsecond))
	for _, p := range r.Phases {
		fmt.Fprintf(&b, "; %s %v", p.Name, p.Time.Round(time.Microsecond))
		if r.Counted {
			fmt.Fprintf(&b, " (%d/%d msgs, %d/%d bytes sent/received)", p.Boot.MsgsSent, p.Boot.MsgsRecv, p.Boot.BytesSent, p.Boot.BytesRecv)
		}
	}
	if r.Transport != "" {
		fmt.Fprintf(&b, "; transport %s", r.Transport)
	}
	return b.String()
}

// initClock charges the time (and bootstrap traffic) since its last mark to a phase.
type initClock struct {
	start, last time.Time
	ru          unix.Rusage
	times       map[string]time.Duration
	boot        map[string]BootTraffic
	lastBoot    BootTraffic
	client      func() *bootstrap.Client
}

func newInitClock(client func() *bootstrap.Client) *initClock {
	c := &initClock{start: time.Now(), times: map[string]time.Duration{}, boot: map[string]BootTraffic{}, client: client}
	c.last = c.start
	_ = unix.Getrusage(unix.RUSAGE_SELF, &c.ru)
	return c
}

func (c *initClock) mark(phase string) {
	now := time.Now()
	c.times[phase] += now.Sub(c.last)
	c.last = now
	if cl := c.client(); cl != nil {
		t := bootTraffic(cl)
		c.boot[phase] = c.boot[phase].add(t.sub(c.lastBoot))
		c.lastBoot = t
	}
}

func (c *initClock) report(pe, npes int, transport string) InitReport {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	tv := func(t unix.Timeval) time.Duration {
		return time.Duration(t.Sec)*time.Second + time.Duration(t.Usec)*time.Microsecond
	}
	r := InitReport{PE: pe, NPEs: npes, Total: c.last.Sub(c.start), Transport: transport, Counted: c.client() != nil,
		User: tv(ru.Utime) - tv(c.ru.Utime), Sys: tv(ru.Stime) - tv(c.ru.Stime)}
	for _, name := range phaseOrder {
		if d, ok := c.times[name]; ok {
			r.Phases = append(r.Phases, InitPhase{Name: name, Time: d, Boot: c.boot[name]})
		}
	}
	return r
}

// InitReport returns what Init cost this PE, phase by phase.
func (w *World) InitReport() InitReport {
	if w == nil {
		return InitReport{}
	}
	return w.initReport
}

// Connections returns how many transport connections (tcp sockets, one per peer and rail; UCX
// endpoints) this PE holds now: with connections made on first use, the peers it has talked
// to over the NIC path, less those closed under ROX_MAX_PEERS. 0 without a transport.
func (w *World) Connections() int {
	if w == nil {
		return 0
	}
	if c, ok := w.transport.(interface{ Connections() int }); ok {
		return c.Connections()
	}
	return 0
}
