package gpurt

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/device/hip/kfd"
	"github.com/roxamen/roxamen/internal/env"
	"github.com/roxamen/roxamen/kernels"
)

// gpuSDMA is an AMD PE's SDMA route: SDMA user queues to every load/store-mapped peer (on
// XGMI-optimized engines where the GPU has them, up to one per engine and SDMAMaxQueues per peer), the queues' device-visible descriptions
// (kernels.SDMAQueue, with their completion words) and the table roxshmem_state.sdma points at.
// Kernels write the packets and ring the doorbells themselves; the proxy takes no part. Built for
// gfx90a and gfx942 and statically checked; it has not run on an AMD GPU (none was available):
// the device side runs in CI against device/host's SDMA engine emulator.
type gpuSDMA struct {
	kfd    *kfd.KFD
	queues []*kfd.Queue
	mem    device.Ptr // the SDMAQueue structs, their done words, then the table
}

// sdmaRingBytes is each queue's ring: 1 MiB, as ROCr and rocSHMEM size theirs.
const sdmaRingBytes = 1 << 20

// kfdLocation turns a PCI bus id ("0000:c1:00.0") into the KFD topology's location id
// (bus << 8 | device << 3 | function).
func kfdLocation(busID string) (uint32, error) {
	var dom, bus, dev, fn uint32
	if n, err := fmt.Sscanf(busID, "%x:%x:%x.%x", &dom, &bus, &dev, &fn); n != 4 || err != nil {
		return 0, fmt.Errorf("PCI bus id %q: want DOMAIN:BUS:DEVICE.FUNCTION", busID)
	}
	return bus<<8 | dev<<3 | fn, nil
}

// startSDMA sets up the route for an AMD device, or returns (nil, nil) where it does not apply
// (not AMD, ROX_SDMA=off, or with ROX_SDMA=auto no KFD). threshold is ROX_CE_THRESHOLD: on AMD the
// SDMA route replaces the proxy's copy-engine route.
func (rt *Runtime) startSDMA(threshold uint64) (*gpuSDMA, error) {
	mode, _ := env.SDMA.String()
	d := rt.dev
	info := d.Info()
	if mode == "off" || info.Driver != "hip" {
		if mode == "on" && info.Driver != "hip" {
			return nil, fmt.Errorf("ROX_SDMA=on: the %s backend has no SDMA queues (AMD GPUs only)", info.Driver)
		}
		return nil, nil
	}
	k, err := kfd.Open()
	if err != nil {
		if mode == "auto" && (errors.Is(err, device.ErrNoDevice) || errors.Is(err, device.ErrNoDriver)) {
			debugf("SDMA route off: %v", err)
			return nil, nil
		}
		return nil, fmt.Errorf("ROX_SDMA=%s: %w", mode, err)
	}
	sd := &gpuSDMA{kfd: k}
	fail := func(err error) (*gpuSDMA, error) { sd.release(d); return nil, err }
	loc, err := kfdLocation(info.PCIBusID)
	if err != nil {
		return fail(err)
	}
	var node *kfd.Node
	for _, n := range k.GPUs() {
		if n.LocationID == loc {
			node = &n
			break
		}
	}
	if node == nil {
		return fail(fmt.Errorf("SDMA: no KFD node at %s (location %#x)", info.PCIBusID, loc))
	}
	qsz := int(unsafe.Sizeof(kernels.SDMAQueue{}))
	tsz := int(unsafe.Sizeof(kernels.SDMATable{}))
	memBytes := rt.w.NPEs()*kernels.SDMAMaxQueues*(qsz+64) + tsz
	if sd.mem, err = d.Alloc(memBytes); err != nil {
		return fail(err)
	}
	if err := d.Memset(sd.mem, 0, memBytes); err != nil {
		return fail(err)
	}
	// Queues per peer: the XGMI engines shared among the mapped peers (one per engine), 1 to
	// SDMAMaxQueues; blocks spread over them (sdma.h).
	peers := 0
	for pe, base := range rt.PeerBase {
		if pe != rt.w.PE() && base != 0 {
			peers++
		}
	}
	per := 1
	if peers > 0 {
		per = min(kernels.SDMAMaxQueues, max(1, int(node.SDMAXGMIEngines)/peers))
	}
	table := kernels.SDMATable{Magic: kernels.SDMAMagic, NQueues: uint32(per), Threshold: threshold}
	for pe, base := range rt.PeerBase {
		if pe == rt.w.PE() || base == 0 {
			continue
		}
		for j := 0; j < per; j++ {
			q, err := k.CreateSDMAQueue(node.ID, node.SDMAXGMIEngines > 0, sdmaRingBytes)
			if err != nil {
				return fail(fmt.Errorf("SDMA queue %d to PE %d: %w", j, pe, err))
			}
			sd.queues = append(sd.queues, q)
			slot := pe*kernels.SDMAMaxQueues + j
			at := sd.mem.Add(slot * qsz)
			done := sd.mem.Add(rt.w.NPEs()*kernels.SDMAMaxQueues*qsz + 64*slot)
			desc := kernels.SDMAQueue{Ring: q.RingGPU, Rptr: q.Rptr, Wptr: q.Wptr, Doorbell: q.Doorbell, Done: uint64(done),
				RingBytes: sdmaRingBytes, Engine: uint32(j)}
			if err := d.CopyHtoD(at, unsafe.Slice((*byte)(unsafe.Pointer(&desc)), qsz)); err != nil {
				return fail(err)
			}
			table.Queue[pe][j] = uint64(at)
		}
	}
	tab := sd.mem.Add(rt.w.NPEs() * kernels.SDMAMaxQueues * (qsz + 64))
	if err := d.CopyHtoD(tab, unsafe.Slice((*byte)(unsafe.Pointer(&table)), tsz)); err != nil {
		return fail(err)
	}
	debugf("SDMA route: %d queues on node %d (%d PCIe, %d XGMI engines)", len(sd.queues), node.ID, node.SDMAEngines, node.SDMAXGMIEngines)
	rt.state.SDMA = uint64(tab)
	return sd, nil
}

// release destroys the queues, frees the descriptions and closes the KFD (every path).
func (sd *gpuSDMA) release(d device.Device) {
	if sd == nil {
		return
	}
	if sd.kfd != nil {
		_ = sd.kfd.Close() // destroys the queues still open
	}
	if sd.mem != 0 {
		_ = d.Free(sd.mem)
	}
	sd.kfd, sd.mem, sd.queues = nil, 0, nil
}
