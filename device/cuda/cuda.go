// Package cuda implements the device interfaces on NVIDIA GPUs through the CUDA driver API
// (libcuda.so.1), loaded with purego: no cgo, no CUDA toolkit at build time.
//
// The implementation is device/internal/gpudrv, shared with device/hip; this package is its
// vendor table: the driver's symbol names, status codes, attribute numbers and flags, each from
// the CUDA driver API header cuda.h. Versioned entry points are bound explicitly
// (cuMemAlloc_v2, cuIpcOpenMemHandle_v2, ...): cuda.h #defines the plain names to them.
//
// Thread affinity: CUDA's current context is per OS thread. Open retains the device's primary
// context; every call locks the calling goroutine to its OS thread and makes that context
// current there (cuCtxSetCurrent), so any goroutine may use a Device.
package cuda

import (
	"fmt"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/device/internal/gpudrv"
)

// Library is the file dlopen'ed; its SONAME is stable across driver versions.
const Library = "libcuda.so.1"

// fallbackDirs are tried when the dynamic linker's search path lacks the driver (containers
// that mount it under /usr/local/nvidia without an ld.so.conf entry).
var fallbackDirs = []string{"/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib64"}

// vendor is the CUDA driver API as gpudrv needs it; every name and number is from cuda.h.
var vendor = gpudrv.Vendor{
	Name: "cuda", Maker: "NVIDIA",
	Libraries: []string{Library}, Dirs: fallbackDirs,
	Context: gpudrv.PrimaryContext,
	Sym: gpudrv.Symbols{
		Init: "cuInit", Version: "cuDriverGetVersion", ErrorName: "cuGetErrorName",
		DeviceCount: "cuDeviceGetCount", DeviceName: "cuDeviceGetName", DeviceTotalMem: "cuDeviceTotalMem_v2",
		DeviceAttribute: "cuDeviceGetAttribute", DeviceUUID: "cuDeviceGetUuid_v2",
		DevicePCIBusID: "cuDeviceGetPCIBusId", DeviceByPCIBusID: "cuDeviceGetByPCIBusId",
		DeviceCanAccessPeer: "cuDeviceCanAccessPeer",

		DeviceGet: "cuDeviceGet", PrimaryCtxRetain: "cuDevicePrimaryCtxRetain",
		PrimaryCtxRelease: "cuDevicePrimaryCtxRelease_v2", CtxSetCurrent: "cuCtxSetCurrent",
		CtxEnablePeerAccess: "cuCtxEnablePeerAccess",
		Synchronize:         "cuCtxSynchronize",

		MemAlloc: "cuMemAlloc_v2", MemFree: "cuMemFree_v2",
		HostAlloc: "cuMemHostAlloc", HostDevicePointer: "cuMemHostGetDevicePointer_v2", HostFree: "cuMemFreeHost",
		MemsetD8Async: "cuMemsetD8Async", MemcpyAsync: "cuMemcpyAsync",
		MemcpyHtoDAsync: "cuMemcpyHtoDAsync_v2", MemcpyDtoHAsync: "cuMemcpyDtoHAsync_v2",
		MemcpyPeerAsync: "cuMemcpyPeerAsync",

		StreamCreate: "cuStreamCreate", StreamDestroy: "cuStreamDestroy_v2",
		StreamSynchronize: "cuStreamSynchronize", StreamQuery: "cuStreamQuery", StreamWaitEvent: "cuStreamWaitEvent",
		EventCreate: "cuEventCreate", EventRecord: "cuEventRecord", EventSynchronize: "cuEventSynchronize",
		EventElapsedTime: "cuEventElapsedTime", EventDestroy: "cuEventDestroy_v2",

		ModuleLoadDataEx: "cuModuleLoadDataEx", ModuleGetFunction: "cuModuleGetFunction",
		ModuleFunctionCount: "cuModuleGetFunctionCount", ModuleEnumerateFunctions: "cuModuleEnumerateFunctions", FuncLoad: "cuFuncLoad",
		ModuleGetGlobal: "cuModuleGetGlobal_v2", ModuleUnload: "cuModuleUnload", LaunchKernel: "cuLaunchKernel",

		IpcGetMemHandle: "cuIpcGetMemHandle", IpcOpenMemHandle: "cuIpcOpenMemHandle_v2",
		IpcCloseMemHandle: "cuIpcCloseMemHandle",

		// cuda.h #defines cuStreamBeginCapture to the _v2 entry point and cuGraphInstantiate
		// (CUDA 12) to cuGraphInstantiateWithFlags
		StreamBeginCapture: "cuStreamBeginCapture_v2", StreamEndCapture: "cuStreamEndCapture",
		GraphInstantiate: "cuGraphInstantiateWithFlags", GraphLaunch: "cuGraphLaunch",
		GraphExecDestroy: "cuGraphExecDestroy", GraphDestroy: "cuGraphDestroy",
	},

	StatusType: "CUresult",
	Status:     func(code int32) error { return Result(code) },
	Names:      names,
	Kinds:      kinds,
	NotReady:   int32(ErrorNotReady), PeerAccessAlreadyEnabled: int32(ErrorPeerAccessAlreadyEnabled),
	InvalidValue: int32(ErrorInvalidValue),

	MultiprocessorCount: gpudrv.Attr{Value: 16, Name: "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"},
	HostNativeAtomics:   gpudrv.Attr{Value: 86, Name: "CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED"},
	Arch:                arch,

	HostAllocFlags:    gpudrv.Flag{Value: 0x01 | 0x02, Name: "CU_MEMHOSTALLOC_PORTABLE|CU_MEMHOSTALLOC_DEVICEMAP"},
	StreamNonBlocking: gpudrv.Flag{Value: 0x01, Name: "CU_STREAM_NON_BLOCKING"},
	EventDefault:      gpudrv.Flag{Value: 0x00, Name: "CU_EVENT_DEFAULT"},
	CaptureRelaxed:    gpudrv.Flag{Value: 2, Name: "CU_STREAM_CAPTURE_MODE_RELAXED"},
	IPCOpenFlags:      []gpudrv.Flag{{Value: 0x01, Name: "CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS"}},
	IPCHandleSize:     64, // CU_IPC_HANDLE_SIZE
	HandleMagic:       [8]byte{'R', 'O', 'X', 'C', 'U', 'D', 'A', '1'},

	JITErrorLog:     5, // CU_JIT_ERROR_LOG_BUFFER
	JITErrorLogSize: 6, // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
}

// The compute capability attributes (CUdevice_attribute).
var (
	attrCCMajor = gpudrv.Attr{Value: 75, Name: "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"}
	attrCCMinor = gpudrv.Attr{Value: 76, Name: "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR"}
)

// arch is "sm_" and the compute capability, the name clang and ptxas use ("sm_90").
func arch(q gpudrv.Query) (string, error) {
	major, err := q.Attribute(attrCCMajor)
	if err != nil {
		return "", err
	}
	minor, err := q.Attribute(attrCCMinor)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("sm_%d%d", major, minor), nil
}

var drv = gpudrv.New(vendor)

// New returns the CUDA driver (Name "cuda"). Nothing is loaded until Count or Open.
func New() device.Driver { return drv }

// DriverVersion returns the driver's CUDA version (12040 for 12.4) once the library is loaded.
func DriverVersion() (int, error) { return drv.Version() }
