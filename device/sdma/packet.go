// Package sdma is the packet format of AMD's SDMA copy engines as Roxamen uses it: the gfx9 format
// that gfx90a (SDMA 4.4.0) and gfx942 (SDMA 4.4.2) share. Decode reads a packet from a queue's
// ring as the engine would; the Encode functions write the same dwords as the device library's
// encoders (kernels/include/roxamen/sdma.h), which kernels' TestSDMAPacketParity compares.
//
// Field positions are those of the Linux kernel's drivers/gpu/drm/amd/amdgpu/
// vega10_sdma_pkt_open.h (SDMA_PKT_COPY_LINEAR_*, SDMA_PKT_FENCE_*, SDMA_PKT_POLL_REGMEM_*,
// SDMA_PKT_ATOMIC_*, SDMA_PKT_NOP_HEADER_count: bits 16..29) and of ROCr's
// runtime/hsa-runtime/core/inc/sdma_registers.h (the same structs, SDMA_ATOMIC_ADD64 = 47,
// COPY_LINEAR kMaxSize_ = 0x3fffe0). The ATOMIC operation field takes the TC atomic opcodes
// (TC_OP_ATOMIC_SWAP_RTN_64 = 0x27, TC_OP_ATOMIC_ADD_RTN_64 = 0x2f).
package sdma

import "fmt"

// Opcodes (header bits 0..7).
const (
	OpNOP        = 0
	OpCopy       = 1
	OpWrite      = 2
	OpFence      = 5
	OpTrap       = 6
	OpPollRegMem = 8
	OpAtomic     = 10
)

// SubOpCopyLinear is COPY's linear sub-opcode (header bits 8..15).
const SubOpCopyLinear = 0

// ATOMIC operations (header bits 25..31).
const (
	AtomicSwap64 = 0x27
	AtomicAdd64  = 0x2f
)

// POLL_REGMEM comparison functions (header bits 28..30).
const (
	PollAlways = 0
	PollLT     = 1
	PollLE     = 2
	PollEQ     = 3
	PollNE     = 4
	PollGE     = 5
	PollGT     = 6
)

// Packet lengths in dwords.
const (
	CopyDwords   = 7
	FenceDwords  = 4
	AtomicDwords = 8
	PollDwords   = 6
	TrapDwords   = 2
)

// CopyMax is the most bytes one COPY_LINEAR packet moves (ROCr's kMaxSize_).
const CopyMax = 0x3fffe0

// Packet is one decoded packet. Dwords is its length; the other fields are those its opcode has.
type Packet struct {
	Op, SubOp uint8
	Dwords    int
	Dst, Src  uint64 // COPY_LINEAR
	Count     uint64 // COPY_LINEAR: bytes
	Addr      uint64 // FENCE, ATOMIC, POLL_REGMEM
	Data      uint32 // FENCE: the value written; POLL_REGMEM: the reference value
	Mask      uint32 // POLL_REGMEM
	Func      uint8  // POLL_REGMEM
	Interval  uint16 // POLL_REGMEM
	Retry     uint16 // POLL_REGMEM: 12 bits; 0xfff retries forever
	Operation uint8  // ATOMIC
	Loop      bool   // ATOMIC: repeat until the compare succeeds
	Value     uint64 // ATOMIC: src_data
	Compare   uint64 // ATOMIC: cmp_data
	IntCtx    uint32 // TRAP
}

// A DecodeError is a packet the engine cannot execute; the queue stops there, as a hardware
// queue faults.
type DecodeError struct {
	Offset uint64 // byte offset in the queue (the growing write-pointer space)
	Header uint32
	Reason string
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("sdma: bad packet at queue offset %#x (header %#08x): %s", e.Offset, e.Header, e.Reason)
}

// Decode reads the packet that starts at dword index at of the ring (a power-of-two number of
// dwords; packets may wrap). avail is how many dwords the producer has published from there; a
// packet longer than avail is an error (the producer published a partial packet). offset is the
// packet's byte offset, for errors.
func Decode(ring []uint32, at uint64, avail uint64, offset uint64) (Packet, error) {
	mask := uint64(len(ring) - 1)
	dw := func(i uint64) uint32 { return ring[(at+i)&mask] }
	h := dw(0)
	p := Packet{Op: uint8(h), SubOp: uint8(h >> 8)}
	bad := func(why string, args ...any) (Packet, error) {
		return Packet{}, &DecodeError{Offset: offset, Header: h, Reason: fmt.Sprintf(why, args...)}
	}
	need := func(n int) bool { p.Dwords = n; return uint64(n) <= avail }
	switch p.Op {
	case OpNOP:
		if !need(1 + int(h>>16&0x3fff)) {
			return bad("NOP of %d dwords runs past the write pointer (%d published)", p.Dwords, avail)
		}
		if p.SubOp != 0 {
			return bad("NOP with sub-opcode %d", p.SubOp)
		}
	case OpCopy:
		if p.SubOp != SubOpCopyLinear {
			return bad("COPY sub-opcode %d (only COPY_LINEAR is used)", p.SubOp)
		}
		if !need(CopyDwords) {
			return bad("COPY_LINEAR runs past the write pointer (%d dwords published)", avail)
		}
		if c := dw(1); c>>22 != 0 {
			return bad("COPY_LINEAR count word %#x has reserved bits set", c)
		}
		if dw(2) != 0 {
			return bad("COPY_LINEAR parameter word %#x: byte swapping is not used", dw(2))
		}
		if h>>16 != 0 {
			return bad("COPY_LINEAR header flags %#x (encrypt, tmz, broadcast) are not used", h>>16)
		}
		p.Count = uint64(dw(1)&0x3fffff) + 1
		p.Src = uint64(dw(3)) | uint64(dw(4))<<32
		p.Dst = uint64(dw(5)) | uint64(dw(6))<<32
	case OpFence:
		if !need(FenceDwords) {
			return bad("FENCE runs past the write pointer (%d dwords published)", avail)
		}
		p.Addr = uint64(dw(1)) | uint64(dw(2))<<32
		p.Data = dw(3)
		if p.Addr&3 != 0 {
			return bad("FENCE address %#x is not 4-byte aligned", p.Addr)
		}
	case OpAtomic:
		if !need(AtomicDwords) {
			return bad("ATOMIC runs past the write pointer (%d dwords published)", avail)
		}
		p.Operation = uint8(h >> 25 & 0x7f)
		p.Loop = h>>16&1 != 0
		p.Addr = uint64(dw(1)) | uint64(dw(2))<<32
		p.Value = uint64(dw(3)) | uint64(dw(4))<<32
		p.Compare = uint64(dw(5)) | uint64(dw(6))<<32
		if p.Operation != AtomicSwap64 && p.Operation != AtomicAdd64 {
			return bad("ATOMIC operation %#x (swap64 %#x and add64 %#x are used)", p.Operation, AtomicSwap64, AtomicAdd64)
		}
		if p.Addr&7 != 0 {
			return bad("ATOMIC address %#x is not 8-byte aligned", p.Addr)
		}
	case OpPollRegMem:
		if !need(PollDwords) {
			return bad("POLL_REGMEM runs past the write pointer (%d dwords published)", avail)
		}
		if h>>31 == 0 {
			return bad("POLL_REGMEM of a register (mem_poll clear): registers are not used")
		}
		p.Func = uint8(h >> 28 & 7)
		if p.Func == 7 {
			return bad("POLL_REGMEM function 7 is reserved")
		}
		p.Addr = uint64(dw(1)) | uint64(dw(2))<<32
		p.Data, p.Mask = dw(3), dw(4)
		p.Interval, p.Retry = uint16(dw(5)), uint16(dw(5)>>16&0xfff)
		if p.Addr&3 != 0 {
			return bad("POLL_REGMEM address %#x is not 4-byte aligned", p.Addr)
		}
	case OpTrap:
		if !need(TrapDwords) {
			return bad("TRAP runs past the write pointer (%d dwords published)", avail)
		}
		p.IntCtx = dw(1) & 0xfffffff
	default:
		return bad("unknown opcode %d", p.Op)
	}
	return p, nil
}

func header(op, subOp uint32) uint32 { return op&0xff | (subOp&0xff)<<8 }

// EncodeCopyLinear returns COPY_LINEAR of n bytes (1..CopyMax).
func EncodeCopyLinear(dst, src uint64, n uint32) []uint32 {
	return []uint32{header(OpCopy, SubOpCopyLinear), (n - 1) & 0x3fffff, 0, uint32(src), uint32(src >> 32), uint32(dst), uint32(dst >> 32)}
}

// EncodeFence returns FENCE writing data to addr.
func EncodeFence(addr uint64, data uint32) []uint32 {
	return []uint32{header(OpFence, 0), uint32(addr), uint32(addr >> 32), data}
}

// EncodeAtomic returns ATOMIC operation on addr.
func EncodeAtomic(operation uint8, addr, value, compare uint64) []uint32 {
	return []uint32{header(OpAtomic, 0) | uint32(operation&0x7f)<<25, uint32(addr), uint32(addr >> 32),
		uint32(value), uint32(value >> 32), uint32(compare), uint32(compare >> 32), 0}
}

// EncodePollMem returns POLL_REGMEM on memory.
func EncodePollMem(addr uint64, fn uint8, value, mask uint32, interval, retry uint16) []uint32 {
	return []uint32{header(OpPollRegMem, 0) | uint32(fn&7)<<28 | 1<<31, uint32(addr), uint32(addr >> 32),
		value, mask, uint32(interval) | uint32(retry&0xfff)<<16}
}

// EncodeTrap returns TRAP with int_ctx.
func EncodeTrap(intCtx uint32) []uint32 { return []uint32{header(OpTrap, 0), intCtx & 0xfffffff} }

// EncodeNOP returns the header of a NOP of dw dwords in all.
func EncodeNOP(dw int) uint32 { return header(OpNOP, 0) | uint32(dw-1)&0x3fff<<16 }
