package kernels

import (
	"fmt"
	"unsafe"
)

// The Go mirror of kernels/include/roxamen/state.h. TestStateParity compiles the header and
// checks the size and every offset; change both together and bump StateVersion.

const (
	StateMagic   = 0x314d454d53584f52 // "ROXSMEM1" little-endian
	StateVersion = 3                  // 2: the team table (State.Teams); 3: the context table (State.Ctxs)
	MaxPEs       = 64

	// State.Flags
	FlagBypass    = 0x1 // ordering: CacheBypass (else Strict)
	FlagRingFence = 0x2 // the ring reaches only PEs that load/store never reaches (see MAPPING.md)
	FlagHostAMO   = 0x4 // AMOs and signal adds to this PE go through the ring: the CPU applies them all (state.h)

	// The barrier workspace at heap offset State.BarrierOff in every PE's heap.
	BarrierRound       = 0
	BarrierGridCount   = 8
	BarrierGridGen     = 16
	BarrierSyncRound   = 24
	BarrierArrive      = 64
	BarrierSyncArrive  = 64 + 8*MaxPEs
	BarrierBytes       = 64 + 16*MaxPEs
	StateSymbol        = "roxshmem_state" // the global every code object that includes roxshmem.h defines
	RingResultSlotSize = 8                // bytes per ticket slot of State.RingResults
)

// State is struct roxshmem_state: the device view of one PE, filled by the host in every loaded
// module before its kernels run (device.Module.Global(StateSymbol), then a copy).
type State struct {
	Magic        uint64
	Version      uint32
	Flags        uint32
	MyPE         int32
	NPEs         int32
	HeapBase     uint64 // device address of this PE's symmetric heap
	HeapSize     uint64
	CEThreshold  uint64 // mapped-peer transfers of at least this many bytes take the copy engine; 0: only _ce calls
	Ring         uint64 // device address of the command ring (header + descriptors); 0: none
	RingCapacity uint32 // a power of two
	Pad0         uint32
	RingHead     uint64         // device address of the ticket counter; 0: the ring header's head
	RingResults  uint64         // device address of uint64[RingCapacity]: gets/fetching AMOs via the ring land in slot t&(cap-1)
	Completion   uint64         // device address of a device-local mirror of the ring's completed; 0: poll the ring header
	Abort        uint64         // device address of an Abort block; 0: device waits cannot be aborted
	BarrierOff   uint64         // heap offset of the barrier workspace (BarrierBytes, zeroed)
	Ctxs         uint64         // device address of the CtxTable (the device contexts' rings); 0: none (roxshmem_ctx_create fails)
	SDMA         uint64         // device address of the SDMA queue table (SDMATable); 0: none
	Teams        uint64         // device address of the TeamTable; 0: none (team collectives record CallBadTeam)
	PeerBase     [MaxPEs]uint64 // device address of PE i's heap as this GPU loads/stores it; 0: NIC path
}

// Teams: the Go mirror of roxshmem_team_table (state.h); TestTeamParity checks the layout.
const (
	TeamMagic       = 0x314d414554584f52 // "ROXTEAM1" little-endian
	MaxTeams        = 64                 // live teams per job, world and shared included
	TeamWorld       = 0                  // handle (slot) of the world team
	TeamShared      = 1                  // handle of the PEs of this node
	TeamInvalid     = -1
	CollAuto        = 0 // TeamTable.CollAlgo: one-shot up to OneshotMax bytes, two-shot above
	CollOneshot     = 1
	CollTwoshot     = 2
	CollOneshotMax  = 65536 // TeamTable.OneshotMax when left 0
	TeamWSRound     = 0
	TeamWSStatus    = 8
	TeamWSAux       = 16
	TeamWSGrid      = 48
	TeamWSSig       = 64
	TeamWSCount     = 80
	TeamWSArrive    = 128
	TeamWSReady     = 128 + 8*MaxPEs
	TeamWSData      = 2048
	TeamWSMin       = TeamWSData + 2*4096 // the least workspace a team may have
	BadArgRoot      = 1                   // CallBadArg details
	BadArgOverlap   = 2
	BadArgWorkspace = 3
	BadArgNotMapped = 4 // a member's heap is not load/store reachable (the device collectives need it)
)

// TeamDesc is struct roxshmem_team_desc: one strided team as this PE sees it.
type TeamDesc struct {
	Start   int32 // world PE of team index 0
	Stride  int32 // >= 1
	Size    int32 // members; 0: free slot
	MyIndex int32 // this PE's index, -1 when not a member
	WSOff   uint64
	WSBytes uint64 // at least TeamWSMin
	Pad     [4]uint64
}

// TeamTable is struct roxshmem_team_table: the teams every kernel of this PE can name by handle.
type TeamTable struct {
	Magic      uint64
	NTeams     uint32
	CollAlgo   uint32 // Coll*
	OneshotMax uint64
	Pad        [5]uint64
	Team       [MaxTeams]TeamDesc
}

// Device contexts: the Go mirror of roxshmem_ctx_table (state.h); TestCtxParity checks the layout.
// Handle 0 (CtxDefault) is the state's ring; handle h >= 1 is CtxTable.Ctx[h-1].
const (
	CtxMagic   = 0x3158544358584f52 // "ROXXCTX1" little-endian
	MaxCtxs    = 16                 // device contexts per PE besides the default one
	CtxDefault = 0
	CtxInvalid = -1
)

// CtxDesc is struct roxshmem_ctx_desc: one device context's ring. The host fills all but InUse
// and TailCache, which the device writes.
type CtxDesc struct {
	Ring       uint64 // device address of the context's ring (header + descriptors)
	Head       uint64 // device address of its ticket counter; 0: the ring header's head
	Results    uint64 // device address of uint64[Capacity]: get / fetched-AMO result slots
	Completion uint64 // device address of a device-local mirror of the ring's completed; 0: poll the header
	Capacity   uint32 // a power of two
	InUse      uint32 // device-written: 1 while a kernel holds the context
	TailCache  uint64 // device-written: producers' cached copy of the ring's tail
	Pad        [2]uint64
}

// CtxTable is struct roxshmem_ctx_table: the pool roxshmem_ctx_create draws from.
type CtxTable struct {
	Magic uint64
	NCtxs uint32 // slots the host filled (at most MaxCtxs)
	Pad0  uint32
	Pad   [6]uint64
	Ctx   [MaxCtxs]CtxDesc
}

// Abort is struct roxshmem_abort (64 bytes): the host sets Word to stop every device wait; the
// first wait that gives up stores its record in First, and every one increments Count.
type Abort struct {
	Word  uint64
	First uint64
	Count uint64
	Pad   [5]uint64
}

// Calls named by an abort record (AbortRecord.Call).
const (
	CallWaitUntil       = 1
	CallSignalWaitUntil = 2
	CallQuiet           = 3
	CallBarrier         = 4
	CallRing            = 5
	CallFence           = 6
	CallSync            = 7
	CallSDMA            = 8    // waiting for SDMA ring space, an earlier producer's commit, or completion
	CallColl            = 9    // a team collective waiting for a member
	CallBadPE           = 0x80 // not a wait: a call named a PE out of range (and was skipped)
	CallBadAddr         = 0x81 // not a wait: an address outside the symmetric heap (or misaligned AMO)
	CallNoRoute         = 0x82 // not a wait: the target needs the ring and the state has none
	CallBadTeam         = 0x83 // not a wait: a team handle naming no live team of this PE (Detail: the handle)
	CallCollMismatch    = 0x84 // a member called another collective/type/size/op/root in the same round (PE: that member)
	CallBadArg          = 0x85 // not a wait: an invalid collective argument (Detail: BadArg*)
	CallBadCtx          = 0x86 // not a wait: a context handle naming no live context (destroyed, never created; Detail: the handle)

	DetailAbortWord = 0x10000000 // | low 16 bits of Abort.Word
	DetailRingError = 0x20000000 // | the ring's error code
)

// AbortRecord decodes Abort.First.
type AbortRecord struct {
	Valid  bool
	Call   uint8
	PE     uint16 // 0xffff: no particular PE
	Detail uint32
}

// DecodeAbortRecord splits a record written by the device (ROXSHMEM_ABORT_RECORD).
func DecodeAbortRecord(r uint64) AbortRecord {
	return AbortRecord{Valid: r>>63 != 0, Call: uint8(r >> 48), PE: uint16(r >> 32), Detail: uint32(r)}
}

var callNames = map[uint8]string{
	CallWaitUntil: "wait_until", CallSignalWaitUntil: "signal_wait_until", CallQuiet: "quiet",
	CallBarrier: "barrier", CallRing: "ring operation", CallFence: "fence", CallSync: "sync", CallSDMA: "sdma",
	CallColl: "team collective", CallBadTeam: "bad team", CallCollMismatch: "collective mismatch", CallBadArg: "bad collective argument", CallBadCtx: "bad context",
	CallBadPE: "bad PE", CallBadAddr: "bad address", CallNoRoute: "no route",
}

// CallName names a record's call.
func (r AbortRecord) CallName() string {
	if n, ok := callNames[r.Call]; ok {
		return n
	}
	return fmt.Sprintf("call %#x", r.Call)
}

// StateBytes returns the raw bytes of s, as the device expects them (little-endian hosts).
func StateBytes(s *State) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(s)), unsafe.Sizeof(*s))
}
