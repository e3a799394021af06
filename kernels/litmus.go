package kernels

// The Go mirror of kernels/include/roxamen/litmus.h: the program of one PE's column that the
// roxk_litmus kernel runs (see src/runtime.hip for its arguments and output layout).

// Litmus operations (LitmusInsn.Op).
const (
	LitmusNop     = 0
	LitmusSt      = 1
	LitmusLd      = 2
	LitmusPut     = 3
	LitmusPutNBI  = 4
	LitmusGet     = 5
	LitmusGetNBI  = 6
	LitmusFAdd    = 7
	LitmusSwap    = 8
	LitmusCSwap   = 9
	LitmusFetch   = 10
	LitmusAdd     = 11
	LitmusSet     = 12
	LitmusPutSig  = 13
	LitmusWait    = 14
	LitmusFence   = 15
	LitmusQuiet   = 16
	LitmusBarrier = 17
	// The shapes past the core (feature names of memmodel): amo_inc, amo_bitwise, signal_fetch,
	// ptr_store, ptr_load, putsig_nbi, get_into_location, put_from_buffer, sync.
	LitmusInc       = 18
	LitmusFInc      = 19
	LitmusAnd       = 20
	LitmusOr        = 21
	LitmusXor       = 22
	LitmusFAnd      = 23
	LitmusFOr       = 24
	LitmusFXor      = 25
	LitmusSigFetch  = 26
	LitmusPtrSt     = 27
	LitmusPtrLd     = 28
	LitmusPutSigNBI = 29
	LitmusGetDst    = 30
	LitmusGetNBIDst = 31
	LitmusPutBuf    = 32
	LitmusSync      = 33
	// An unrecorded plain load before the column that warms the observer's L1 (MODEL.md §8).
	LitmusWarm = 34

	LitmusMaxRegs = 16
)

// Comparison operators of wait_until (ROXSHMEM_CMP_*), also LitmusInsn.Sub of a wait.
const (
	CmpEQ = 0
	CmpNE = 1
	CmpGT = 2
	CmpLE = 3
	CmpLT = 4
	CmpGE = 5
)

// LitmusInsn is struct roxk_insn (40 bytes).
type LitmusInsn struct {
	Op    uint32
	PE    int32  // target PE of remote operations
	Var   uint64 // symmetric-heap offset of the variable
	Value uint64 // stored/put/AMO operand; wait value; cswap new value
	Aux   uint64 // cswap compare value; putsig signal heap offset
	Reg   uint32 // destination register; putsig: signal value
	Sub   uint32 // wait: Cmp*; putsig: 0 set, 1 add
}
