package gpurt

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/kernels"
	"github.com/roxamen/roxamen/nic"
)

// devCtxs is the pool of device contexts (roxshmem_ctx_create) of each PE: a ring of its own per
// context, so that a context's quiet waits for its own ring traffic only. The default context is
// the state's ring. roxshmem_ctx_create beyond the pool returns an error code to the kernel.
const devCtxs = 8

// DeviceContexts is how many device contexts roxshmem_ctx_create hands out per PE.
const DeviceContexts = devCtxs

// devCtxPool holds the context rings: the table and the ticket counters in device memory (device
// code claims slots and takes tickets there with atomics, off the host bus), the rings, their
// result slots and their copy-engine completion values in host-pinned memory, like the default
// ring's. Context rings have the default ring's capacity, so the proxy's Window holds for all.
type devCtxPool struct {
	dev    device.Ptr        // kernels.CtxTable, then devCtxs ticket counters (64 bytes apart)
	host   device.HostBuffer // per ring: the ring, uint64[cap] results, uint64[cap] completion values
	rings  []*nic.Ring
	ringDv []device.Ptr
	slots  [][]uint64 // copy-engine completion values, slot t&(cap-1)
	slotDv []device.Ptr
}

// startCtxs makes the context rings and points rt.state at their table.
func (rt *Runtime) startCtxs() error {
	d := rt.dev
	p := &devCtxPool{}
	ringBytes := nic.RingBytes(rt.ringCap)
	per := ringBytes + 16*rt.ringCap
	var err error
	if p.host, err = d.AllocHost(devCtxs * per); err != nil {
		return fmt.Errorf("allocating %d device context rings: %w", devCtxs, err)
	}
	clear(p.host.Bytes)
	rt.ctxs = p // released with the runtime from here on
	tableBytes := int(unsafe.Sizeof(kernels.CtxTable{}))
	devBytes := tableBytes + 64*devCtxs
	if p.dev, err = d.Alloc(devBytes); err != nil {
		return fmt.Errorf("allocating the device context table: %w", err)
	}
	if err := d.Memset(p.dev, 0, devBytes); err != nil {
		return err
	}
	var table kernels.CtxTable
	for i := 0; i < devCtxs; i++ {
		off := i * per
		r, err := nic.NewRing(p.host.Bytes[off:off+ringBytes], rt.ringCap)
		if err != nil {
			return err
		}
		p.rings = append(p.rings, r)
		p.ringDv = append(p.ringDv, p.host.Dev.Add(off))
		soff := off + ringBytes + 8*rt.ringCap
		p.slots = append(p.slots, unsafe.Slice((*uint64)(unsafe.Pointer(&p.host.Bytes[soff])), rt.ringCap))
		p.slotDv = append(p.slotDv, p.host.Dev.Add(soff))
		table.Ctx[i] = kernels.CtxDesc{
			Ring:     uint64(p.host.Dev.Add(off)),
			Head:     uint64(p.dev.Add(tableBytes + 64*i)),
			Results:  uint64(p.host.Dev.Add(off + ringBytes)),
			Capacity: uint32(rt.ringCap),
			// Completion 0: device waits poll the ring header, which the proxy (or the
			// copy-engine stream, after the batch's copies) writes
		}
	}
	table.Magic, table.NCtxs = kernels.CtxMagic, devCtxs
	b := unsafe.Slice((*byte)(unsafe.Pointer(&table)), tableBytes)
	if err := d.CopyHtoD(p.dev, b); err != nil {
		return fmt.Errorf("writing the device context table: %w", err)
	}
	rt.state.Ctxs = uint64(p.dev)
	return nil
}

// ringList is the pool's rings (none without a pool: a runtime started without contexts).
func (p *devCtxPool) ringList() []*nic.Ring {
	if p == nil {
		return nil
	}
	return p.rings
}

// index returns the pool index of r, or -1 when r is no context ring.
func (p *devCtxPool) index(r *nic.Ring) int {
	if p == nil {
		return -1
	}
	for i, x := range p.rings {
		if x == r {
			return i
		}
	}
	return -1
}

// completeAt enqueues, on the copy-engine stream, the write of context ring i's completed count
// (after the batch's copies), as ceRoute.CompleteAt does for the default ring.
func (p *devCtxPool) completeAt(ce device.Stream, i int, upTo uint64) error {
	slot := upTo & uint64(len(p.slots[i])-1)
	atomic.StoreUint64(&p.slots[i][slot], upTo)
	return ce.CopyAsync(p.ringDv[i].Add(nic.RingCompletedOffset), p.slotDv[i].Add(int(8*slot)), 8)
}

// err is the first failed context ring's error (nil: none).
func (p *devCtxPool) err() error {
	if p == nil {
		return nil
	}
	for _, r := range p.rings {
		if err := r.Err(); err != nil {
			return err
		}
	}
	return nil
}

func (p *devCtxPool) release(d device.Device) {
	if p == nil {
		return
	}
	if p.dev != 0 {
		_ = d.Free(p.dev)
		p.dev = 0
	}
	if len(p.host.Bytes) != 0 {
		_ = d.FreeHost(p.host)
		p.host = device.HostBuffer{}
	}
	p.rings = nil
}
