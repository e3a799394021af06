package memmodel

import (
	"fmt"
	"math/bits"
	"strings"
)

// Feature is one shape of the litmus language beyond the core (plain st/ld, blocking and
// non-blocking puts and gets, the blocking AMOs add/set/fadd/swap/cswap/fetch, wait, fence, quiet
// and barrier). Test.Features says once which a test uses; a backend's runner declares the set it
// supports, and what it skips, with the reason, is the set difference (MODEL.md §8, "Features").
type Feature uint

// The features, in the order FeatureSet.String lists them.
const (
	FetchNBI        Feature = iota // fetching AMOs in their _nbi form (fadd_nbi r x@q v ...): the value is defined at quiet
	PutSignalNBI                   // putsig_nbi
	MixedWidth                     // 32-bit halves of a 64-bit word (x.lo, x.hi) beside whole-word accesses
	Threads                        // several threads of one PE (columns PEn.t)
	PtrStore                       // a plain store to another PE's word (st x@q v, through roxshmem_ptr)
	Contexts                       // operations on named communication contexts (... on NAME)
	Teams                          // team-scoped barrier, sync or collective ({...})
	IrregularTeam                  // a team that is not a strided set of PEs (start, stride, size)
	Collectives                    // allreduce, broadcast
	Sync                           // sync (sync_all: a barrier that completes nothing)
	Signals                        // put-with-signal (putsig)
	SignalFetch                    // sigfetch (signal_fetch)
	AMOInc                         // inc, finc
	AMOBitwise                     // and, or, xor, fand, for, fxor
	Polls                          // wait_all, wait_any, wait_some, test, test_all, test_any, test_some
	PollVector                     // a vector form (one value per word) of wait_any, wait_some or the test family
	MixedPoll                      // one poll over both signal words (putsig's) and data words
	PutFromBuffer                  // put_nbi from the PE's own source buffer
	GetIntoLocation                // get or get_nbi into the PE's own destination word
	SignalBuffer                   // a put from a buffer or get into a location where a word involved is a signal word
	CallVariants                   // an API call written by its own name as another instruction's events (alltoall, signal_wait, ctx_destroy ...)
	Elements                       // a put or get of several elements (put x,y@q v,w; get r0,r1 x,y@q; iput; iget)
	NoStore                        // a context made with SHMEM_CTX_NOSTORE (nostore NAME)
	PtrLoad                        // a plain load of another PE's word (ld r x@q, through roxshmem_ptr)
	DeviceCalls                    // a call of the device library with no host counterpart (put_warp, put_ce, barrier_all_block ...; inc, the bitwise AMOs and putsig on a context)
	numFeatures
)

var featureNames = [numFeatures]string{"fetch_nbi", "putsig_nbi", "mixed_width", "threads", "ptr_store",
	"contexts", "teams", "irregular_team", "collectives", "sync", "signals", "signal_fetch", "amo_inc",
	"amo_bitwise", "polls", "poll_vector", "mixed_poll", "put_from_buffer", "get_into_location", "signal_buffer", "call_variants", "elements", "nostore", "ptr_load", "device_calls"}

func (f Feature) String() string {
	if f < numFeatures {
		return featureNames[f]
	}
	return fmt.Sprintf("Feature(%d)", uint(f))
}

// FeatureSet is a set of features.
type FeatureSet uint64

// Features returns the set of the given features.
func Features(fs ...Feature) FeatureSet {
	var s FeatureSet
	for _, f := range fs {
		s |= 1 << f
	}
	return s
}

// AllFeatures is every feature: a runner that supports the whole language.
const AllFeatures FeatureSet = 1<<numFeatures - 1

// Has reports whether f is in s.
func (s FeatureSet) Has(f Feature) bool { return s&(1<<f) != 0 }

// Minus is s without the features of o.
func (s FeatureSet) Minus(o FeatureSet) FeatureSet { return s &^ o }

// Empty reports whether s has no feature.
func (s FeatureSet) Empty() bool { return s == 0 }

// List returns s's features in order.
func (s FeatureSet) List() []Feature {
	var out []Feature
	for v := uint64(s); v != 0; v &= v - 1 {
		out = append(out, Feature(bits.TrailingZeros64(v)))
	}
	return out
}

// String lists the feature names, comma-separated ("" for none).
func (s FeatureSet) String() string {
	var n []string
	for _, f := range s.List() {
		n = append(n, f.String())
	}
	return strings.Join(n, ",")
}

// ParseFeatures reads a FeatureSet as String writes it.
func ParseFeatures(s string) (FeatureSet, error) {
	var fs FeatureSet
	if s == "" {
		return 0, nil
	}
next:
	for _, name := range strings.Split(s, ",") {
		for i, n := range featureNames {
			if n == name {
				fs |= 1 << i
				continue next
			}
		}
		return 0, fmt.Errorf("memmodel: unknown feature %q (want one of %s)", name, strings.Join(featureNames[:], ", "))
	}
	return fs, nil
}

// Features returns the set of features t uses, computed from its instructions.
func (t *Test) Features() FeatureSet {
	var s FeatureSet
	add := func(f Feature) { s |= 1 << f }
	if t.Mixed() {
		add(MixedWidth)
	}
	if t.Threaded() {
		add(Threads)
	}
	if len(t.NoStore) > 0 {
		add(NoStore)
	}
	sigWords := map[string]bool{} // putsig's signal words, by variable name (one per PE's heap alike)
	for _, c := range t.Columns {
		for _, in := range c.Instrs {
			if in.Op == OpPutSig {
				sigWords[in.Sig.Var] = true
			}
		}
	}
	for _, c := range t.Columns {
		for _, in := range c.Instrs {
			switch {
			case in.NBI && in.Op == OpPutSig:
				add(PutSignalNBI)
			case in.NBI:
				add(FetchNBI)
			}
			if in.Ctx != "" {
				add(Contexts)
			}
			if in.Team != nil {
				add(Teams)
				if _, _, ok := StridedTeam(in.Team); !ok {
					add(IrregularTeam)
				}
			}
			switch in.Op {
			case OpSt:
				if in.Loc.PE != c.PE {
					add(PtrStore)
				}
			case OpLd:
				if in.Loc.PE != c.PE {
					add(PtrLoad)
				}
			case OpAllReduce, OpBroadcast:
				add(Collectives)
			case OpSync:
				add(Sync)
			case OpPutSig:
				add(Signals)
			case OpSigFetch:
				add(SignalFetch)
			case OpInc, OpFInc:
				add(AMOInc)
			case OpAnd, OpOr, OpXor, OpFAnd, OpFOr, OpFXor:
				add(AMOBitwise)
			}
			if in.Op.poll() {
				add(Polls)
				if len(in.Vals) > 1 && in.Op != OpWaitAll {
					add(PollVector)
				}
				sig, data := false, false
				for _, l := range in.Locs {
					if sigWords[l.Var] {
						sig = true
					} else {
						data = true
					}
				}
				if sig && data {
					add(MixedPoll)
				}
			}
			if in.Src.Var != "" {
				add(PutFromBuffer)
			}
			if in.Dst.Var != "" {
				add(GetIntoLocation)
			}
			if (in.Src.Var != "" || in.Dst.Var != "") && (sigWords[in.Src.Var] || sigWords[in.Dst.Var] || sigWords[in.Loc.Var]) {
				add(SignalBuffer)
			}
			if DeviceCall(in.Call) {
				add(DeviceCalls)
			} else if in.Call != "" {
				add(CallVariants)
			}
			switch in.Op { // context forms only the device library has (roxshmem_ctx_*)
			case OpPutSig, OpInc, OpFInc, OpAnd, OpOr, OpXor, OpFAnd, OpFOr, OpFXor:
				if in.Ctx != "" {
					add(DeviceCalls)
				}
			}
			if in.elems() {
				add(Elements)
			}
		}
	}
	return s
}

// StridedTeam returns the start and stride of pes as a strided set (start, start+stride, ...), or
// false: the teams a runtime can make by a strided split of the world team.
func StridedTeam(pes []int) (start, stride int, ok bool) {
	if len(pes) == 0 {
		return 0, 0, false
	}
	start, stride = pes[0], 1
	if len(pes) > 1 {
		stride = pes[1] - pes[0]
	}
	for i, q := range pes {
		if stride < 1 || q != start+i*stride {
			return 0, 0, false
		}
	}
	return start, stride, true
}

// Unsupported returns the features t uses that a runner supporting supported lacks; empty when
// the runner runs t.
func (t *Test) Unsupported(supported FeatureSet) FeatureSet { return t.Features().Minus(supported) }
