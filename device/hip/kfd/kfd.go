// Package kfd binds libhsakmt (AMD's KFD thunk, libhsakmt.so.1) through purego, for what the SDMA
// route needs: open /dev/kfd, find the GPU nodes and their SDMA engines, create SDMA user queues
// whose ring lives in memory both the GPU (which writes the packets) and the engine (which reads
// them) reach, and destroy everything again. Every binding carries its C prototype from Debian's
// libhsakmt-dev (/usr/include/hsakmt.h); the structs are passed by pointer only, and TestABI
// compiles against hsakmttypes.h and compares every size, offset and constant used here.
//
// Without /dev/kfd (no AMD GPU, or no amdgpu driver) Open returns an error matching
// device.ErrNoDevice; without the library, device.ErrNoDriver. Nothing here has run on an AMD GPU:
// none was available; the emulated engine (device/host.SDMAEngine) runs the device side in CI.
package kfd

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/internal/dl"
)

// Library is the file dlopen'ed.
const Library = "libhsakmt.so.1"

// DevicePath is the KFD's device file.
const DevicePath = "/dev/kfd"

// Status is HSAKMT_STATUS.
type Status int32

var statusNames = map[Status]string{
	0: "HSAKMT_STATUS_SUCCESS", 1: "HSAKMT_STATUS_ERROR", 2: "HSAKMT_STATUS_DRIVER_MISMATCH",
	3: "HSAKMT_STATUS_INVALID_PARAMETER", 4: "HSAKMT_STATUS_INVALID_HANDLE", 5: "HSAKMT_STATUS_INVALID_NODE_UNIT",
	6: "HSAKMT_STATUS_NO_MEMORY", 7: "HSAKMT_STATUS_BUFFER_TOO_SMALL", 10: "HSAKMT_STATUS_NOT_IMPLEMENTED",
	11: "HSAKMT_STATUS_NOT_SUPPORTED", 12: "HSAKMT_STATUS_UNAVAILABLE", 13: "HSAKMT_STATUS_OUT_OF_RESOURCES",
	20: "HSAKMT_STATUS_KERNEL_IO_CHANNEL_NOT_OPENED", 21: "HSAKMT_STATUS_KERNEL_COMMUNICATION_ERROR",
	22: "HSAKMT_STATUS_KERNEL_ALREADY_OPENED", 23: "HSAKMT_STATUS_HSAMMU_UNAVAILABLE",
	30: "HSAKMT_STATUS_WAIT_FAILURE", 31: "HSAKMT_STATUS_WAIT_TIMEOUT", 35: "HSAKMT_STATUS_MEMORY_ALREADY_REGISTERED",
	36: "HSAKMT_STATUS_MEMORY_NOT_REGISTERED", 37: "HSAKMT_STATUS_MEMORY_ALIGNMENT",
}

func (s Status) Error() string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return fmt.Sprintf("HSAKMT_STATUS(%d)", int32(s))
}

// Queue types (HSA_QUEUE_TYPE) and the priority used.
const (
	queueSDMA      = 2 // HSA_QUEUE_SDMA: PCIe-optimized SDMA queue
	queueSDMAXGMI  = 5 // HSA_QUEUE_SDMA_XGMI: XGMI-optimized SDMA queue
	priorityNormal = 0 // HSA_QUEUE_PRIORITY_NORMAL
	queuePercent   = 100
)

// HsaMemFlags bits (the ui32 bitfield, LSB first).
const (
	memNonPaged   = 1 << 0
	memHostAccess = 1 << 6
	memExecute    = 1 << 12
	memNoNUMABind = 1 << 16
	memUncached   = 1 << 17
)

// systemProperties mirrors HsaSystemProperties.
type systemProperties struct {
	NumNodes, PlatformOem, PlatformID, PlatformRev uint32
}

// queueResource mirrors HsaQueueResource: the doorbell, write and read pointer addresses are
// unions of pointers and 64-bit values.
type queueResource struct {
	QueueID     uint64
	Doorbell    uint64
	WritePtr    uint64
	ReadPtr     uint64
	ErrorReason uint64
}

// HsaNodeProperties is large and version-dependent; it is read as bytes at the offsets of the
// fields used (TestABI checks each against the header).
const (
	nodePropsSize          = 356
	offNumFComputeCores    = 4
	offDeviceID            = 74
	offLocationID          = 76
	offNumSdmaEngines      = 312
	offNumSdmaXgmiEngines  = 316
	offNumSdmaQueuesPerEng = 320
)

var lib struct {
	// HSAKMT_STATUS hsaKmtOpenKFD(void);
	hsaKmtOpenKFD func() Status
	// HSAKMT_STATUS hsaKmtCloseKFD(void);
	hsaKmtCloseKFD func() Status
	// HSAKMT_STATUS hsaKmtAcquireSystemProperties(HsaSystemProperties *SystemProperties);
	hsaKmtAcquireSystemProperties func(p *systemProperties) Status
	// HSAKMT_STATUS hsaKmtReleaseSystemProperties(void);
	hsaKmtReleaseSystemProperties func() Status
	// HSAKMT_STATUS hsaKmtGetNodeProperties(HSAuint32 NodeId, HsaNodeProperties *NodeProperties);
	hsaKmtGetNodeProperties func(node uint32, p *[nodePropsSize]byte) Status
	// HSAKMT_STATUS hsaKmtAllocMemory(HSAuint32 PreferredNode, HSAuint64 SizeInBytes, HsaMemFlags MemFlags,
	//                                 void **MemoryAddress);   (HsaMemFlags: a union of one HSAuint32)
	hsaKmtAllocMemory func(node uint32, size uint64, flags uint32, addr *unsafe.Pointer) Status
	// HSAKMT_STATUS hsaKmtFreeMemory(void *MemoryAddress, HSAuint64 SizeInBytes);
	hsaKmtFreeMemory func(addr unsafe.Pointer, size uint64) Status
	// HSAKMT_STATUS hsaKmtMapMemoryToGPU(void *MemoryAddress, HSAuint64 MemorySizeInBytes, HSAuint64 *AlternateVAGPU);
	hsaKmtMapMemoryToGPU func(addr unsafe.Pointer, size uint64, gpuVA *uint64) Status
	// HSAKMT_STATUS hsaKmtUnmapMemoryToGPU(void *MemoryAddress);
	hsaKmtUnmapMemoryToGPU func(addr unsafe.Pointer) Status
	// HSAKMT_STATUS hsaKmtCreateQueue(HSAuint32 NodeId, HSA_QUEUE_TYPE Type, HSAuint32 QueuePercentage,
	//     HSA_QUEUE_PRIORITY Priority, void *QueueAddress, HSAuint64 QueueSizeInBytes, HsaEvent *Event,
	//     HsaQueueResource *QueueResource);
	hsaKmtCreateQueue func(node, typ, percent uint32, prio int32, ring unsafe.Pointer, size uint64, event unsafe.Pointer, res *queueResource) Status
	// HSAKMT_STATUS hsaKmtDestroyQueue(HSA_QUEUEID QueueId);
	hsaKmtDestroyQueue func(id uint64) Status
}

var (
	loadOnce sync.Once
	loadErr  error
)

func load() error {
	loadOnce.Do(func() {
		h, err := dl.Open(Library)
		if err != nil {
			loadErr = &device.Error{Call: "dlopen", Detail: Library, Err: err, Kind: device.ErrNoDriver}
			return
		}
		err = h.Map(map[string]any{
			"hsaKmtOpenKFD": &lib.hsaKmtOpenKFD, "hsaKmtCloseKFD": &lib.hsaKmtCloseKFD,
			"hsaKmtAcquireSystemProperties": &lib.hsaKmtAcquireSystemProperties,
			"hsaKmtReleaseSystemProperties": &lib.hsaKmtReleaseSystemProperties,
			"hsaKmtGetNodeProperties":       &lib.hsaKmtGetNodeProperties, "hsaKmtAllocMemory": &lib.hsaKmtAllocMemory,
			"hsaKmtFreeMemory": &lib.hsaKmtFreeMemory, "hsaKmtMapMemoryToGPU": &lib.hsaKmtMapMemoryToGPU,
			"hsaKmtUnmapMemoryToGPU": &lib.hsaKmtUnmapMemoryToGPU, "hsaKmtCreateQueue": &lib.hsaKmtCreateQueue,
			"hsaKmtDestroyQueue": &lib.hsaKmtDestroyQueue,
		})
		if err != nil {
			loadErr = &device.Error{Call: "dlsym", Detail: Library, Err: err, Kind: device.ErrNoDriver}
		}
	})
	return loadErr
}

func check(op string, s Status, arg string) error {
	if s == 0 {
		return nil
	}
	kind := error(nil)
	switch s {
	case 3, 5:
		kind = device.ErrInvalid
	case 10, 11:
		kind = device.ErrNotSupported
	case 20:
		kind = device.ErrNoDevice
	}
	return &device.Error{Call: op, Detail: arg, Err: s, Kind: kind}
}

// Node is a GPU node of the KFD topology.
type Node struct {
	ID              uint32
	DeviceID        uint16
	LocationID      uint32 // PCI bus/device/function
	SIMDs           uint32
	SDMAEngines     uint32 // PCIe-optimized
	SDMAXGMIEngines uint32 // XGMI-optimized (peer GPUs)
	QueuesPerEngine uint32
}

// KFD is an open /dev/kfd with its topology snapshot.
type KFD struct {
	mu     sync.Mutex
	nodes  []Node
	queues map[*Queue]bool
	closed bool
}

// Open opens the KFD and reads the GPU nodes. Only one KFD is open per process (the thunk's
// rule); Close it when done.
func Open() (*KFD, error) {
	if _, err := os.Stat(DevicePath); err != nil {
		return nil, &device.Error{Call: "kfd.Open", Detail: DevicePath, Err: err, Kind: device.ErrNoDevice}
	}
	if err := load(); err != nil {
		return nil, err
	}
	if err := check("hsaKmtOpenKFD", lib.hsaKmtOpenKFD(), DevicePath); err != nil {
		return nil, err
	}
	k := &KFD{queues: map[*Queue]bool{}}
	var sp systemProperties
	if err := check("hsaKmtAcquireSystemProperties", lib.hsaKmtAcquireSystemProperties(&sp), ""); err != nil {
		lib.hsaKmtCloseKFD()
		return nil, err
	}
	for id := uint32(0); id < sp.NumNodes; id++ {
		var np [nodePropsSize]byte
		if err := check("hsaKmtGetNodeProperties", lib.hsaKmtGetNodeProperties(id, &np), fmt.Sprintf("node=%d", id)); err != nil {
			lib.hsaKmtReleaseSystemProperties()
			lib.hsaKmtCloseKFD()
			return nil, err
		}
		u32 := func(off int) uint32 { return *(*uint32)(unsafe.Pointer(&np[off])) }
		if u32(offNumFComputeCores) == 0 {
			continue // a CPU node
		}
		k.nodes = append(k.nodes, Node{ID: id, DeviceID: *(*uint16)(unsafe.Pointer(&np[offDeviceID])), LocationID: u32(offLocationID),
			SIMDs: u32(offNumFComputeCores), SDMAEngines: u32(offNumSdmaEngines), SDMAXGMIEngines: u32(offNumSdmaXgmiEngines),
			QueuesPerEngine: uint32(np[offNumSdmaQueuesPerEng])})
	}
	lib.hsaKmtReleaseSystemProperties()
	if len(k.nodes) == 0 {
		lib.hsaKmtCloseKFD()
		return nil, &device.Error{Call: "kfd.Open", Detail: fmt.Sprintf("%d nodes", sp.NumNodes), Kind: device.ErrNoDevice}
	}
	return k, nil
}

// GPUs lists the GPU nodes.
func (k *KFD) GPUs() []Node { return append([]Node(nil), k.nodes...) }

// Queue is one SDMA user queue: a ring in system memory mapped into the GPU, and the doorbell,
// write and read pointer words the thunk returned.
type Queue struct {
	k        *KFD
	id       uint64
	ring     unsafe.Pointer
	size     uint64
	RingGPU  uint64 // the ring's address as the GPU (and engine) see it
	Doorbell uint64 // address of the doorbell (uint64 on gfx9 SDMA queues)
	Wptr     uint64 // address of the write pointer (uint64 byte offset)
	Rptr     uint64 // address of the read pointer the engine updates
	Node     uint32
	XGMI     bool
}

// CreateSDMAQueue creates an SDMA queue on GPU node with a ring of ringBytes (a power of two,
// at least 4 KiB); xgmi picks an XGMI-optimized engine (for peer GPUs) over a PCIe one.
func (k *KFD) CreateSDMAQueue(node uint32, xgmi bool, ringBytes int) (q *Queue, err error) {
	if ringBytes < 4096 || ringBytes&(ringBytes-1) != 0 {
		return nil, &device.Error{Call: "kfd.CreateSDMAQueue", Detail: fmt.Sprintf("ring of %d bytes", ringBytes), Kind: device.ErrInvalid}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil, &device.Error{Call: "kfd.CreateSDMAQueue", Kind: device.ErrClosed}
	}
	q = &Queue{k: k, size: uint64(ringBytes), Node: node, XGMI: xgmi}
	arg := fmt.Sprintf("node=%d size=%d", node, ringBytes)
	// The ring: pinned, host-visible, executable, uncached memory of the GPU's node, as rocSHMEM's
	// SDMA path allocates it, so that the GPU's packet stores and the engine's fetches meet in
	// memory.
	flags := uint32(memNonPaged | memHostAccess | memExecute | memNoNUMABind | memUncached)
	if err := check("hsaKmtAllocMemory", lib.hsaKmtAllocMemory(node, q.size, flags, &q.ring), arg); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			lib.hsaKmtFreeMemory(q.ring, q.size)
		}
	}()
	if err := check("hsaKmtMapMemoryToGPU", lib.hsaKmtMapMemoryToGPU(q.ring, q.size, &q.RingGPU), arg); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			lib.hsaKmtUnmapMemoryToGPU(q.ring)
		}
	}()
	typ := uint32(queueSDMA)
	if xgmi {
		typ = queueSDMAXGMI
	}
	var res queueResource
	if err := check("hsaKmtCreateQueue", lib.hsaKmtCreateQueue(node, typ, queuePercent, priorityNormal, q.ring, q.size, nil, &res), arg); err != nil {
		return nil, err
	}
	q.id, q.Doorbell, q.Wptr, q.Rptr = res.QueueID, res.Doorbell, res.WritePtr, res.ReadPtr
	k.queues[q] = true
	return q, nil
}

// Ring is the ring's memory as the host sees it.
func (q *Queue) Ring() []byte { return unsafe.Slice((*byte)(q.ring), q.size) }

// Destroy destroys the queue and frees its ring.
func (q *Queue) Destroy() error {
	q.k.mu.Lock()
	defer q.k.mu.Unlock()
	return q.destroyLocked()
}

func (q *Queue) destroyLocked() error {
	if !q.k.queues[q] {
		return &device.Error{Call: "kfd.Queue.Destroy", Kind: device.ErrClosed}
	}
	delete(q.k.queues, q)
	return errors.Join(check("hsaKmtDestroyQueue", lib.hsaKmtDestroyQueue(q.id), ""),
		check("hsaKmtUnmapMemoryToGPU", lib.hsaKmtUnmapMemoryToGPU(q.ring), ""),
		check("hsaKmtFreeMemory", lib.hsaKmtFreeMemory(q.ring, q.size), ""))
}

// Close destroys every queue left and closes the KFD.
func (k *KFD) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil
	}
	k.closed = true
	var errs []error
	for q := range k.queues {
		errs = append(errs, q.destroyLocked())
	}
	errs = append(errs, check("hsaKmtCloseKFD", lib.hsaKmtCloseKFD(), ""))
	return errors.Join(errs...)
}
