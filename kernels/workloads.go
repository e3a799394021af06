package kernels

// EP is struct roxep (include/roxamen/ep.h): one PE's expert-parallel buffer as the workload
// kernels see it, in device-visible memory; every address is a device address. The symmetric
// regions (Recv, Comb, Layout, Sig) are at the same heap offsets on every PE; the rest is this
// PE's device memory. Sizes, with P PEs, M = MaxTokens, K = TopK, E = Experts, L = E/P: Recv
// P*M*RowBytes, Comb P*M*Hidden*ESize, Layout P*(P+E) uint64, Sig EPSignals*P uint64 (zeroed),
// Stage P*M*RowBytes, CStage P*M*Hidden*ESize, NSent P int32, Sent P*M int32, SlotOf M*P int32,
// PerExpert E uint64, Counts and Start P int32, ECount L int32, EOff L+1 int32, OutRow P*M*K
// int32, OutW P*M*K float32, Rows 1 int32, Arrived and CArrived P uint64 (zeroed), Scratch
// (P*M*K + EPMaxBlocks*L) uint32.
// TestEPLayout checks the layout against the header.
type EP struct {
	Hidden, TopK, Experts, MaxTokens int32
	Local, ESize, Mode               int32
	Payload, RowBytes, Pad           uint32
	CEMin                            uint64 // Normal: bulk puts of at least this many bytes take the copy engine (0: never)
	Recv, Comb, Layout, Sig          uint64
	Stage, CStage                    uint64
	NSent, Sent, SlotOf, PerExpert   uint64
	Counts, Start, ECount, EOff      uint64
	OutRow, OutW, Rows               uint64
	Arrived, CArrived                uint64
	Scratch                          uint64
}

// EP modes and payload sizes (EP.Mode, EP.ESize), and the signal blocks of EP.Sig.
const (
	EPNormal     = 0
	EPLowLatency = 1
	EPBF16       = 2
	EPF32        = 4
	EPSignals    = 6
	EPMaxBlocks  = 1024 // the most blocks ep's receiving phases use (EP.Scratch's per-block counts)
)

// CallEPExpert is the abort-record call (AbortRecord.Call) of ep.h's routing meeting an expert
// index outside [-1, Experts) (ROXEP_CALL_EXPERT; Detail: the index as an int32, saturated). The
// workload libraries' calls start at 0x90, clear of the runtime's.
const CallEPExpert = 0x90

func init() { callNames[CallEPExpert] = "ep expert index" }

// GEMM is struct roxgemm (include/roxamen/gemm.h): one PE's tensor-parallel GEMM. Part
// (P*Tiles*Slot float32), TSig (Tiles*P uint64, zeroed) and Ack (P uint64, zeroed) are symmetric;
// Stage (Tiles*Slot float32) is local.
type GEMM struct {
	M, N, K                int32
	TileM, TileN           int32
	TM, TN, Tiles          int32
	Op                     int32 // GEMMAllReduce or GEMMReduceScatter
	Slot                   uint32
	Part, TSig, Ack, Stage uint64
}

// GEMM operations (GEMM.Op), and the largest tile side the workload kernels' shared memory holds.
const (
	GEMMAllReduce     = 0
	GEMMReduceScatter = 1
	GEMMTileMax       = 64
)
