package coll

// algorithm is how a collective moves its data (ROX_COLL_ALGO).
//
//   - oneshot: every PE handles the whole message itself. The data travels in the header exchange
//     (an eager push into the receivers' scratch: one message latency) when it fits a PE's region,
//     else every PE reads what it needs straight from the others' buffers. Reductions: every PE
//     reduces every element.
//   - twoshot: reductions are a reduce-scatter (team PE c reduces the c-th chunk of the elements,
//     reading every PE's input) then an all-gather of the reduced chunks, all over direct reads;
//     the other collectives read straight from the other PEs' buffers, nothing through scratch.
//   - ring: a pipelined chain in team PE order, for teams that span the NIC: each PE receives a
//     chunk from its predecessor, folds its own input into it and passes it on (see ring.go).
//   - hier: reductions across nodes: inside each node a two-shot over load/store, across nodes a
//     chain of the nodes' partial results in node order, one PE per chunk on its own rail, then a
//     broadcast inside each node (see ring.go). It needs every node's PEs to be consecutive in the
//     team; otherwise it is ring.
//
// Every algorithm reduces each element in team PE order (see reducer), so they give the same bits.
type algorithm uint8

const (
	algoAuto algorithm = iota
	algoOneShot
	algoTwoShot
	algoRing
	algoHier
)

func (a algorithm) String() string {
	return [...]string{"auto", "oneshot", "twoshot", "ring", "hier"}[a]
}

func parseAlgo(s string) algorithm {
	for a := algoOneShot; a <= algoHier; a++ {
		if a.String() == s {
			return a
		}
	}
	return algoAuto
}

// oneShotMax is the largest per-PE message auto sends eagerly through scratch.
const oneShotMax = 64 << 10

// Algorithm returns the algorithm a call of coll (shmem's Collective names: "broadcast",
// "allreduce"...) on t moving bytes bytes per PE (the source buffer's size) uses under the
// current ROX_COLL_ALGO, as it appears in benchmark rows.
func (t *Team) Algorithm(coll string, bytes int) string {
	switch coll {
	case "barrier":
		return "signals"
	case "allreduce":
		return t.pickReduce(bytes, bytes).String()
	case "reduce_scatter", "alltoall", "alltoalls":
		return t.pickMove(bytes / max(len(t.members), 1)).String()
	}
	return t.pickMove(bytes).String()
}

// spansNIC reports whether some member reaches another through a path rather than load/store
// while a NIC transport runs; every member sees the same answer (the same node names and
// ROX_TRANSPORT).
func (t *Team) spansNIC() bool {
	if len(t.members) < 2 {
		return false
	}
	w := t.e.w
	if !w.HasNIC() {
		return false
	}
	for _, pe := range t.members {
		if pe != t.e.cfg.PE && w.Mapped(pe) == nil {
			return true
		}
	}
	// This PE maps every member: they are all on its node, and (ROX_TRANSPORT being the same
	// everywhere) map each other.
	return false
}

// hierOK: more than one node, more than one PE on some node, every node's PEs consecutive.
func (t *Team) hierOK() bool {
	seen := map[int]bool{}
	prev := -1
	multi := false
	for _, nd := range t.nodes {
		if nd != prev {
			if seen[nd] {
				return false
			}
			seen[nd] = true
			prev = nd
		} else {
			multi = true
		}
	}
	return len(seen) > 1 && multi && !t.e.forcedNIC()
}

func (e *Engine) forcedNIC() bool {
	// ROX_TRANSPORT=tcp|ucx sends PEs of one node through the NIC: nodes are not load/store domains.
	me, nodes := e.cfg.PE, e.cfg.Nodes
	if !e.w.HasNIC() || e.w.Mapped(me) == nil {
		return false
	}
	for pe, n := range nodes {
		if pe != me && n == nodes[me] && e.w.Mapped(pe) == nil {
			return true
		}
	}
	return false
}

func (t *Team) knob() algorithm { return t.e.knob }

// pickReduce chooses an all-reduce algorithm for bytes per PE whose eager payload is payload bytes.
func (t *Team) pickReduce(bytes, payload int) algorithm {
	if a := t.knob(); a != algoAuto {
		if a == algoHier && !t.hierOK() {
			return algoRing
		}
		return a
	}
	switch {
	case len(t.members) == 1:
		return algoOneShot
	case payload <= t.payloadCap() && bytes <= oneShotMax:
		return algoOneShot
	case !t.spansNIC():
		return algoTwoShot
	case t.hierOK():
		return algoHier
	}
	return algoRing
}

// pickMove chooses for the data-movement collectives, with block bytes per destination PE.
func (t *Team) pickMove(block int) algorithm {
	if a := t.knob(); a == algoOneShot || a == algoTwoShot {
		return a
	}
	if len(t.members) == 1 || (block <= t.payloadCap() && block <= oneShotMax) {
		return algoOneShot
	}
	return algoTwoShot
}
