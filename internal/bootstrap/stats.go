package bootstrap

import "sync/atomic"

// Phase is what a bootstrap message was for.
type Phase int

const (
	PhaseConnect   Phase = iota // joining: hello, welcome, refusal
	PhasePutGet                 // the key-value directory: Put, Get and their replies
	PhaseAllgather              // Allgather, including what a tree node forwards for its subtree
	PhaseBarrier                // Barrier, likewise
	PhaseControl                // failures, aborts, goodbyes, "who is missing" questions
	numPhases
)

var phaseNames = [numPhases]string{"connect", "put/get", "allgather", "barrier", "control"}

func (p Phase) String() string {
	if p < 0 || p >= numPhases {
		return "unknown"
	}
	return phaseNames[p]
}

// Traffic counts the messages and bytes (frames, headers included) one PE sent and received.
type Traffic struct {
	MsgsSent, MsgsRecv   uint64
	BytesSent, BytesRecv uint64
}

// Msgs is every message sent or received.
func (t Traffic) Msgs() uint64 { return t.MsgsSent + t.MsgsRecv }

// Bytes is every byte sent or received.
func (t Traffic) Bytes() uint64 { return t.BytesSent + t.BytesRecv }

// Add returns t + u.
func (t Traffic) Add(u Traffic) Traffic {
	return Traffic{t.MsgsSent + u.MsgsSent, t.MsgsRecv + u.MsgsRecv, t.BytesSent + u.BytesSent, t.BytesRecv + u.BytesRecv}
}

// Stats is one PE's bootstrap traffic so far, by phase, and the bootstrap connections it holds.
// It counts what this PE's process put on and took off its sockets: in tree mode that includes
// what it forwards for its subtree, which is what makes a PE busy.
type Stats struct {
	Mode   string // "star" (every PE talks to the rendezvous server) or "tree"
	Phases [numPhases]Traffic
	// Conns: bootstrap connections this PE holds now (to the server; in tree mode to its parent,
	// its children and the directory owners it talked to, both ways).
	Conns int
}

// Total is the traffic of every phase.
func (s Stats) Total() Traffic {
	var t Traffic
	for _, p := range s.Phases {
		t = t.Add(p)
	}
	return t
}

// counters is the lock-free tally behind Stats.
type counters struct {
	msgs  [numPhases][2]atomic.Uint64 // [phase][0 sent, 1 received]
	bytes [numPhases][2]atomic.Uint64
	conns atomic.Int64
}

func (c *counters) sent(p Phase, n int) {
	c.msgs[p][0].Add(1)
	c.bytes[p][0].Add(uint64(n))
}

func (c *counters) recv(p Phase, n int) {
	c.msgs[p][1].Add(1)
	c.bytes[p][1].Add(uint64(n))
}

func (c *counters) snapshot(mode string) Stats {
	s := Stats{Mode: mode, Conns: int(c.conns.Load())}
	for p := range s.Phases {
		s.Phases[p] = Traffic{
			MsgsSent: c.msgs[p][0].Load(), MsgsRecv: c.msgs[p][1].Load(),
			BytesSent: c.bytes[p][0].Load(), BytesRecv: c.bytes[p][1].Load(),
		}
	}
	return s
}

// phaseOf is the phase of a request (or server-initiated) frame type; a reply counts in the
// phase of the request it answers.
func phaseOf(typ byte) Phase {
	switch typ {
	case msgHello, msgWelcome, msgRefuse, msgJoin:
		return PhaseConnect
	case msgPut, msgGet:
		return PhasePutGet
	case msgAllgather:
		return PhaseAllgather
	case msgBarrier:
		return PhaseBarrier
	}
	return PhaseControl
}
