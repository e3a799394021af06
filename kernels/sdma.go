package kernels

// The SDMA route's device-visible structures (include/roxamen/sdma.h); TestSDMAParity compiles
// the header and compares sizes, offsets and constants. The packets themselves are package
// device/sdma's.

// SDMAMagic marks a filled SDMATable; SDMAMaxQueues is how many queues a peer may have.
const (
	SDMAMagic     = 0x31414d4453584f52 // "ROXSDMA1" little-endian
	SDMAMaxQueues = 4
)

// SDMAQueue is roxshmem_sdma_queue_t: one SDMA queue as device code sees it (device memory).
type SDMAQueue struct {
	Ring      uint64 // device address of the ring
	Rptr      uint64 // device address of the engine's read pointer (uint64 bytes)
	Wptr      uint64 // device address of the queue's write pointer (uint64 bytes)
	Doorbell  uint64 // device address of the doorbell
	Done      uint64 // device address of the uint32 the completion FENCE packets write
	RingBytes uint32 // a power of two, at least 4 KiB
	Engine    uint32
	Reserve   uint64 // producers: bytes reserved
	Committed uint64 // producers: bytes published, in reservation order
	Pad       [8]uint64
}

// SDMATable is roxshmem_sdma_t, which State.SDMA points at.
type SDMATable struct {
	Magic     uint64
	NQueues   uint32 // queues per peer in use
	Pad0      uint32
	Threshold uint64 // puts of at least this many bytes take the SDMA route; 0: only _sdma/_ce calls
	Pad1      uint64
	Queue     [MaxPEs][SDMAMaxQueues]uint64 // device addresses of SDMAQueue; 0: none
}
