package host

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/roxamen/roxamen/device/sdma"
)

// An SDMAEngine emulates one AMD SDMA engine serving one user queue: it consumes the very ring
// layout and packets that device code writes (package sdma decodes them as the engine does),
// reads the doorbell and write pointer as the hardware would, and advances the read pointer. It
// is a test double for the device-initiated SDMA route, which runs here without an AMD GPU.
//
// What it allows is what the engine's in-order queue promises and no more: packets are fetched
// and executed in queue order, but the writes of a COPY_LINEAR land in 4 KiB pieces, after
// randomized delays and in random order, and may still be in flight when later packets run. A
// FENCE lands every write before it and then writes its value; an ATOMIC is performed as soon as
// it is reached (so a signal that is not fenced after its data can overtake the data, which is
// what the device library's put-with-signal must prevent). POLL_REGMEM polls memory; TRAP counts.
// A packet that does not decode, or an address outside the mapped regions (a GPU VM fault), stops
// the queue with an error naming the queue offset and the packet.
type SDMAEngine struct {
	cfg     SDMAQueue
	stop    chan struct{}
	done    chan struct{}
	paused  atomic.Bool
	traps   atomic.Uint64
	packets atomic.Uint64
	mu      sync.Mutex
	err     error
	rng     *rand.Rand
	pending []sdmaWrite
}

// SDMAQueue describes the queue an engine serves: the ring and the three pointer words (byte
// offsets that only grow, as gfx9 SDMA user queues use them), and the memory the packets' addresses
// reach.
type SDMAQueue struct {
	Ring     []uint32 // a power-of-two number of dwords
	Rptr     *uint64  // written by the engine: bytes consumed
	Wptr     *uint64  // written by producers: bytes published
	Doorbell *uint64  // written by producers with the new write pointer
	Regions  []SDMARegion
	Seed     uint64 // for the randomized landing order of copies
}

// An SDMARegion is memory the engine may address: Base is the address packets use for Mem[0].
type SDMARegion struct {
	Base uint64
	Mem  []byte
}

type sdmaWrite struct {
	dst  []byte
	data []byte
	due  time.Time // lands no earlier (unless a FENCE forces it)
}

// sdmaMaxDelay bounds how long a copy's piece may stay in flight.
const sdmaMaxDelay = 200 * time.Microsecond

const sdmaPiece = 4 << 10

// StartSDMA starts an engine on q.
func StartSDMA(q SDMAQueue) (*SDMAEngine, error) {
	n := len(q.Ring)
	if n < 16 || n&(n-1) != 0 {
		return nil, fmt.Errorf("sdma: ring of %d dwords: want a power of two of at least 16", n)
	}
	if q.Rptr == nil || q.Wptr == nil || q.Doorbell == nil {
		return nil, errors.New("sdma: queue needs its read pointer, write pointer and doorbell words")
	}
	e := &SDMAEngine{cfg: q, stop: make(chan struct{}), done: make(chan struct{}),
		rng: rand.New(rand.NewPCG(q.Seed, q.Seed^0x5d3a))}
	go e.run()
	return e, nil
}

// Stop stops the engine after it has landed the writes in flight, and returns its error, if any.
func (e *SDMAEngine) Stop() error {
	select {
	case <-e.stop:
	default:
		close(e.stop)
	}
	<-e.done
	return e.Err()
}

// Err is the error that stopped the queue, or nil.
func (e *SDMAEngine) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// Stopped is closed once the engine has stopped (Stop, or a queue error).
func (e *SDMAEngine) Stopped() <-chan struct{} { return e.done }

// Pause makes the engine stop fetching packets (as a busy engine would) until Resume.
func (e *SDMAEngine) Pause()  { e.paused.Store(true) }
func (e *SDMAEngine) Resume() { e.paused.Store(false) }

// Traps is the number of TRAP packets executed; Packets the number of packets of any kind.
func (e *SDMAEngine) Traps() uint64   { return e.traps.Load() }
func (e *SDMAEngine) Packets() uint64 { return e.packets.Load() }

func (e *SDMAEngine) fail(err error) {
	e.mu.Lock()
	if e.err == nil {
		e.err = err
	}
	e.mu.Unlock()
}

func (e *SDMAEngine) run() {
	defer close(e.done)
	defer e.landAll()
	rptr := atomic.LoadUint64(e.cfg.Rptr)
	idle := 0
	for {
		select {
		case <-e.stop:
			return
		default:
		}
		db := atomic.LoadUint64(e.cfg.Doorbell)
		if e.paused.Load() || db == rptr {
			if len(e.pending) > 0 {
				e.landDue()
				runtime.Gosched()
				continue
			}
			idle++
			if idle < 64 {
				runtime.Gosched()
			} else {
				time.Sleep(20 * time.Microsecond)
			}
			continue
		}
		idle = 0
		wptr := atomic.LoadUint64(e.cfg.Wptr)
		switch {
		case db < rptr:
			e.fail(fmt.Errorf("sdma: doorbell %#x behind the read pointer %#x", db, rptr))
			return
		case db > wptr:
			e.fail(fmt.Errorf("sdma: doorbell %#x ahead of the write pointer %#x", db, wptr))
			return
		case db&3 != 0:
			e.fail(fmt.Errorf("sdma: doorbell %#x is not a whole number of dwords", db))
			return
		case db-rptr > 4*uint64(len(e.cfg.Ring)):
			e.fail(fmt.Errorf("sdma: doorbell %#x is more than the ring (%d bytes) past the read pointer %#x", db, 4*len(e.cfg.Ring), rptr))
			return
		}
		for rptr < db {
			p, err := sdma.Decode(e.cfg.Ring, rptr/4, (db-rptr)/4, rptr)
			if err == nil {
				err = e.exec(p)
				if err != nil {
					err = fmt.Errorf("sdma: packet at queue offset %#x (opcode %d): %w", rptr, p.Op, err)
				}
			}
			if err != nil {
				e.fail(err)
				return
			}
			e.packets.Add(1)
			rptr += 4 * uint64(p.Dwords)
			atomic.StoreUint64(e.cfg.Rptr, rptr)
			if len(e.pending) > 0 {
				e.landDue()
			}
		}
	}
}

// mem returns the n bytes at addr, or a fault.
func (e *SDMAEngine) mem(addr, n uint64) ([]byte, error) {
	for _, r := range e.cfg.Regions {
		if addr >= r.Base && addr-r.Base <= uint64(len(r.Mem)) && n <= uint64(len(r.Mem))-(addr-r.Base) {
			off := addr - r.Base
			return r.Mem[off : off+n : off+n], nil
		}
	}
	return nil, fmt.Errorf("address %#x (%d bytes) is not mapped (VM fault)", addr, n)
}

func (e *SDMAEngine) exec(p sdma.Packet) error {
	switch p.Op {
	case sdma.OpNOP:
	case sdma.OpTrap:
		e.traps.Add(1)
	case sdma.OpCopy:
		src, err := e.mem(p.Src, p.Count)
		if err != nil {
			return fmt.Errorf("source: %w", err)
		}
		dst, err := e.mem(p.Dst, p.Count)
		if err != nil {
			return fmt.Errorf("destination: %w", err)
		}
		// The engine reads the source now; its writes land later, piece by piece.
		for off := 0; off < len(src); off += sdmaPiece {
			end := min(off+sdmaPiece, len(src))
			due := time.Now().Add(time.Duration(e.rng.Int64N(int64(sdmaMaxDelay))))
			e.pending = append(e.pending, sdmaWrite{dst: dst[off:end], data: append([]byte(nil), src[off:end]...), due: due})
		}
	case sdma.OpFence:
		b, err := e.mem(p.Addr, 4)
		if err != nil {
			return err
		}
		e.landAll()
		atomic.StoreUint32((*uint32)(unsafe.Pointer(&b[0])), p.Data)
	case sdma.OpAtomic:
		if p.Loop {
			return errors.New("ATOMIC with the loop bit: not used")
		}
		b, err := e.mem(p.Addr, 8)
		if err != nil {
			return err
		}
		w := (*uint64)(unsafe.Pointer(&b[0]))
		switch p.Operation {
		case sdma.AtomicSwap64:
			atomic.SwapUint64(w, p.Value)
		case sdma.AtomicAdd64:
			atomic.AddUint64(w, p.Value)
		}
	case sdma.OpPollRegMem:
		b, err := e.mem(p.Addr, 4)
		if err != nil {
			return err
		}
		w := (*uint32)(unsafe.Pointer(&b[0]))
		for try := 0; ; try++ {
			if pollHolds(p.Func, atomic.LoadUint32(w)&p.Mask, p.Data) {
				break
			}
			if p.Retry != 0xfff && try >= int(p.Retry) {
				return fmt.Errorf("POLL_REGMEM at %#x gave up after %d retries", p.Addr, p.Retry)
			}
			select {
			case <-e.stop:
				return errors.New("stopped while POLL_REGMEM waited")
			default:
			}
			e.landSome(len(e.pending))
			time.Sleep(time.Duration(p.Interval+1) * time.Microsecond)
		}
	}
	return nil
}

func pollHolds(fn uint8, v, ref uint32) bool {
	switch fn {
	case sdma.PollAlways:
		return true
	case sdma.PollLT:
		return v < ref
	case sdma.PollLE:
		return v <= ref
	case sdma.PollEQ:
		return v == ref
	case sdma.PollNE:
		return v != ref
	case sdma.PollGE:
		return v >= ref
	default:
		return v > ref
	}
}

// landDue lands, in random order, the writes in flight whose time has come.
func (e *SDMAEngine) landDue() {
	now := time.Now()
	e.rng.Shuffle(len(e.pending), func(i, j int) { e.pending[i], e.pending[j] = e.pending[j], e.pending[i] })
	kept := e.pending[:0]
	for _, w := range e.pending {
		if w.due.After(now) {
			kept = append(kept, w)
			continue
		}
		copyAtomic(w.dst, w.data)
	}
	clear(e.pending[len(kept):])
	e.pending = kept
}

// landSome lands k of the writes in flight, chosen at random.
func (e *SDMAEngine) landSome(k int) {
	for ; k > 0 && len(e.pending) > 0; k-- {
		i := e.rng.IntN(len(e.pending))
		w := e.pending[i]
		copyAtomic(w.dst, w.data)
		e.pending[i] = e.pending[len(e.pending)-1]
		e.pending = e.pending[:len(e.pending)-1]
	}
}

func (e *SDMAEngine) landAll() { e.landSome(len(e.pending)) }

// copyAtomic stores data into dst with atomic stores where the words are aligned, so that readers
// polling the same memory (as device code does) are not data races.
func copyAtomic(dst, data []byte) {
	i := 0
	for ; i < len(data) && uintptr(unsafe.Pointer(&dst[i]))&7 != 0; i++ {
		storeByte(&dst[i], data[i])
	}
	for ; i+8 <= len(data); i += 8 {
		atomic.StoreUint64((*uint64)(unsafe.Pointer(&dst[i])), *(*uint64)(unsafe.Pointer(&data[i])))
	}
	for ; i < len(data); i++ {
		storeByte(&dst[i], data[i])
	}
}

// storeByte stores one byte through an atomic CAS on its aligned 32-bit word (mapped memory
// always holds whole aligned words).
func storeByte(p *byte, v byte) {
	mis := uintptr(unsafe.Pointer(p)) & 3
	w := (*uint32)(unsafe.Add(unsafe.Pointer(p), -int(mis)))
	shift := mis * 8
	for {
		old := atomic.LoadUint32(w)
		nw := old&^(0xff<<shift) | uint32(v)<<shift
		if atomic.CompareAndSwapUint32(w, old, nw) {
			return
		}
	}
}
