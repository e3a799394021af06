// Package hip implements the device interfaces on AMD GPUs through the HIP runtime
// (libamdhip64.so, .so.6 or .so.5), loaded with purego: no cgo, no ROCm at build time.
//
// The implementation is device/internal/gpudrv, shared with device/cuda (HIP mirrors the CUDA
// driver API call for call); this package is its vendor table: the runtime's symbol names,
// status codes, attribute numbers and flags, each from hip/hip_runtime_api.h (and
// hip/driver_types.h for hipMemcpyKind), and where HIP's calls take another shape than CUDA's
// (gpudrv's package doc lists them).
//
// Thread affinity: HIP's current device is per OS thread. Every call locks the calling goroutine
// to its OS thread and makes the device current there (hipSetDevice), so any goroutine may use a
// Device. There is no context to retain: HIP names devices by ordinal.
package hip

import (
	"strings"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/device/internal/gpudrv"
	"github.com/roxamen/roxamen/internal/dl"
)

// Libraries are tried in this order; the first that loads is used.
var Libraries = []string{"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"}

// propsSize is larger than any hipDeviceProp_t so far (R0600 is about 1.5 KiB).
const propsSize = 16 << 10

// vendor is the HIP runtime as gpudrv needs it; names and numbers from hip/hip_runtime_api.h.
var vendor = gpudrv.Vendor{
	Name: "hip", Maker: "AMD",
	Libraries: Libraries,
	// hipSetDevice per call, device ordinals everywhere (no hipCtx*: deprecated in HIP).
	Context: gpudrv.CurrentDevice,
	Sym: gpudrv.Symbols{
		Init: "hipInit", Version: "hipRuntimeGetVersion", ErrorNameReturn: "hipGetErrorName",
		DeviceCount: "hipGetDeviceCount", DeviceName: "hipDeviceGetName", DeviceTotalMem: "hipDeviceTotalMem",
		DeviceAttribute: "hipDeviceGetAttribute", DeviceUUID: "hipDeviceGetUuid",
		DevicePCIBusID: "hipDeviceGetPCIBusId", DeviceByPCIBusID: "hipDeviceGetByPCIBusId",
		DeviceCanAccessPeer: "hipDeviceCanAccessPeer",
		// ROCm 6 exports the R0600 struct under a new name; ROCm 5 only the old one.
		DeviceProperties: "hipGetDevicePropertiesR0600|hipGetDeviceProperties",

		SetDevice: "hipSetDevice", DeviceEnablePeerAccess: "hipDeviceEnablePeerAccess",
		Synchronize: "hipDeviceSynchronize",

		MemAlloc: "hipMalloc", MemFree: "hipFree",
		HostAlloc: "hipHostMalloc", HostDevicePointer: "hipHostGetDevicePointer", HostFree: "hipHostFree",
		MemsetD8Async: "hipMemsetD8Async", MemcpyAsyncKind: "hipMemcpyAsync",
		MemcpyHtoDAsync: "hipMemcpyHtoDAsync", MemcpyDtoHAsync: "hipMemcpyDtoHAsync",
		MemcpyPeerAsync: "hipMemcpyPeerAsync",

		StreamCreate: "hipStreamCreateWithFlags", StreamDestroy: "hipStreamDestroy",
		StreamSynchronize: "hipStreamSynchronize", StreamQuery: "hipStreamQuery", StreamWaitEvent: "hipStreamWaitEvent",
		// hipEventCreate(e) is hipEventCreateWithFlags(e, hipEventDefault) in the runtime; the
		// flags form has cuEventCreate's shape.
		EventCreate: "hipEventCreateWithFlags", EventRecord: "hipEventRecord", EventSynchronize: "hipEventSynchronize",
		EventElapsedTime: "hipEventElapsedTime", EventDestroy: "hipEventDestroy",

		// Code objects are not compiled at load: no JIT log to ask for.
		ModuleLoadData: "hipModuleLoadData", ModuleGetFunction: "hipModuleGetFunction",
		ModuleGetGlobal: "hipModuleGetGlobal", ModuleUnload: "hipModuleUnload", LaunchKernel: "hipModuleLaunchKernel",

		IpcGetMemHandle: "hipIpcGetMemHandle", IpcOpenMemHandle: "hipIpcOpenMemHandle",
		IpcCloseMemHandle: "hipIpcCloseMemHandle",

		StreamBeginCapture: "hipStreamBeginCapture", StreamEndCapture: "hipStreamEndCapture",
		GraphInstantiate: "hipGraphInstantiateWithFlags", GraphLaunch: "hipGraphLaunch",
		GraphExecDestroy: "hipGraphExecDestroy", GraphDestroy: "hipGraphDestroy",
	},

	StatusType: "hipError_t",
	Status:     func(code int32) error { return Result(code) },
	Names:      names,
	// hipGetErrorName answers this for every code it does not know.
	UnknownName: "hipErrorUnknown",
	Kinds:       kinds,
	NotReady:    int32(ErrorNotReady), PeerAccessAlreadyEnabled: int32(ErrorPeerAccessAlreadyEnabled),
	InvalidValue: int32(ErrorInvalidValue),

	// hipDeviceAttribute_t counts up from hipDeviceAttributeCudaCompatibleBegin = 0; this is the
	// position of hipDeviceAttributeMultiprocessorCount (stable from ROCm 5.0 on: later releases
	// append).
	MultiprocessorCount: gpudrv.Attr{Value: 63, Name: "hipDeviceAttributeMultiprocessorCount"},
	Arch:                arch,

	HostAllocFlags:    gpudrv.Flag{Value: 0x01 | 0x02, Name: "hipHostMallocPortable|hipHostMallocMapped"},
	StreamNonBlocking: gpudrv.Flag{Value: 0x01, Name: "hipStreamNonBlocking"},
	EventDefault:      gpudrv.Flag{Value: 0x00, Name: "hipEventDefault"},
	CaptureRelaxed:    gpudrv.Flag{Value: 2, Name: "hipStreamCaptureModeRelaxed"},
	MemcpyDefault:     gpudrv.Flag{Value: 4, Name: "hipMemcpyDefault"},
	// hipIpcMemLazyEnablePeerAccess is 0x01 in current headers and was 0 in early ROCm 5 ones;
	// Import tries the first and falls back to the second on hipErrorInvalidValue.
	IPCOpenFlags: []gpudrv.Flag{
		{Value: 0x01, Name: "hipIpcMemLazyEnablePeerAccess"},
		{Value: 0x00, Name: "hipIpcMemLazyEnablePeerAccess(ROCm 5: 0)"},
	},
	IPCHandleSize: 64, // HIP_IPC_HANDLE_SIZE
	HandleMagic:   [8]byte{'R', 'O', 'X', 'H', 'I', 'P', '0', '1'},
}

// arch reads gcnArchName from the device property struct.
func arch(q gpudrv.Query) (string, error) {
	props, err := q.Properties(propsSize)
	if err != nil {
		return "", err
	}
	return archName(props), nil
}

// archName finds gcnArchName ("gfx942:sramecc+:xnack-") in a hipDeviceProp_t filled into buf.
// The struct's layout differs between ROCm 5 and 6 (R0600), so rather than trust one offset this
// looks past name[256] for the NUL-terminated string that starts with "gfx", and drops the
// feature suffixes.
func archName(buf []byte) string {
	for i := 256; i+3 < len(buf); i++ {
		if buf[i] == 'g' && buf[i+1] == 'f' && buf[i+2] == 'x' && buf[i-1] == 0 {
			s := dl.FixedString(buf[i:])
			if j := strings.IndexByte(s, ':'); j >= 0 {
				s = s[:j]
			}
			return s
		}
	}
	return ""
}

var drv = gpudrv.New(vendor)

// New returns the HIP driver (Name "hip"). Nothing is loaded until Count or Open.
func New() device.Driver { return drv }

// Loaded returns the library file in use, once a call has loaded it ("" before or on failure
// to find one).
func Loaded() string { return drv.Loaded() }

// RuntimeVersion returns HIP_VERSION of the runtime (major*10000000 + minor*100000 + patch).
func RuntimeVersion() (int, error) { return drv.Version() }
