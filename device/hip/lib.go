package hip

import (
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/roxamen/roxamen/device"
)

// Libraries are tried in this order; the first that loads is used.
var Libraries = []string{"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"}

type (
	hipStream uintptr
	hipEvent  uintptr
	hipModule uintptr
	hipFunc   uintptr
	devptr    uintptr // void* / hipDeviceptr_t
)

// ipcMemHandle mirrors hipIpcMemHandle_t: typedef struct hipIpcMemHandle_st { char reserved[64]; }.
// Passed by value to hipIpcOpenMemHandle: purego v0.11.3 passes a struct argument on
// linux/amd64 following the System V ABI (struct_amd64.go: an aggregate over 16 bytes is class
// MEMORY and is copied onto the stack), which is what the C compiler does.
type ipcMemHandle struct{ Reserved [64]byte }

// The bindings, each with its prototype from the HIP runtime header hip/hip_runtime_api.h.
var lib struct {
	// hipError_t hipInit(unsigned int flags);
	hipInit func(flags uint32) Result
	// hipError_t hipRuntimeGetVersion(int* runtimeVersion);
	hipRuntimeGetVersion func(v *int32) Result
	// const char* hipGetErrorName(hipError_t hip_error);
	hipGetErrorName func(r Result) *byte
	// hipError_t hipGetDeviceCount(int* count);
	hipGetDeviceCount func(n *int32) Result
	// hipError_t hipSetDevice(int deviceId);
	hipSetDevice func(ordinal int32) Result
	// hipError_t hipDeviceGetName(char* name, int len, hipDevice_t device);
	hipDeviceGetName func(name *byte, n int32, d int32) Result
	// hipError_t hipDeviceTotalMem(size_t* bytes, hipDevice_t device);
	hipDeviceTotalMem func(bytes *uint64, d int32) Result
	// hipError_t hipDeviceGetAttribute(int* pi, hipDeviceAttribute_t attr, int deviceId);
	hipDeviceGetAttribute func(v *int32, attr int32, d int32) Result
	// hipError_t hipGetDeviceProperties(hipDeviceProp_t* prop, int deviceId);
	// (ROCm 6 renames it hipGetDevicePropertiesR0600 with a longer struct; see archName.)
	hipGetDeviceProperties func(prop unsafe.Pointer, d int32) Result
	// hipError_t hipDeviceGetUuid(hipUUID* uuid, hipDevice_t device);  (hipUUID: struct { char bytes[16]; })
	hipDeviceGetUuid func(uuid *[16]byte, d int32) Result
	// hipError_t hipDeviceGetPCIBusId(char* pciBusId, int len, int device);
	hipDeviceGetPCIBusId func(id *byte, n int32, d int32) Result
	// hipError_t hipDeviceGetByPCIBusId(int* device, const char* pciBusId);
	hipDeviceGetByPCIBusId func(d *int32, id string) Result
	// hipError_t hipDeviceCanAccessPeer(int* canAccessPeer, int deviceId, int peerDeviceId);
	hipDeviceCanAccessPeer func(can *int32, d, peer int32) Result
	// hipError_t hipDeviceEnablePeerAccess(int peerDeviceId, unsigned int flags);
	hipDeviceEnablePeerAccess func(peer int32, flags uint32) Result
	// hipError_t hipDeviceSynchronize(void);
	hipDeviceSynchronize func() Result
	// hipError_t hipMalloc(void** ptr, size_t size);
	hipMalloc func(p *devptr, size uint64) Result
	// hipError_t hipFree(void* ptr);
	hipFree func(p devptr) Result
	// hipError_t hipHostMalloc(void** ptr, size_t size, unsigned int flags);
	hipHostMalloc func(pp *unsafe.Pointer, size uint64, flags uint32) Result
	// hipError_t hipHostGetDevicePointer(void** devPtr, void* hstPtr, unsigned int flags);
	hipHostGetDevicePointer func(dp *devptr, p unsafe.Pointer, flags uint32) Result
	// hipError_t hipHostFree(void* ptr);
	hipHostFree func(p unsafe.Pointer) Result
	// hipError_t hipMemsetD8Async(hipDeviceptr_t dest, unsigned char value, size_t count, hipStream_t stream);
	hipMemsetD8Async func(dst devptr, v uint8, n uint64, s hipStream) Result
	// hipError_t hipMemcpyAsync(void* dst, const void* src, size_t sizeBytes, hipMemcpyKind kind, hipStream_t stream);
	// With hipMemcpyDefault the runtime infers each side from the unified address space, so this
	// is also the peer-to-peer copy (issued on the SDMA engines).
	hipMemcpyAsync func(dst, src devptr, n uint64, kind int32, s hipStream) Result
	// hipError_t hipMemcpyHtoDAsync(hipDeviceptr_t dst, void* src, size_t sizeBytes, hipStream_t stream);
	hipMemcpyHtoDAsync func(dst devptr, src unsafe.Pointer, n uint64, s hipStream) Result
	// hipError_t hipMemcpyDtoHAsync(void* dst, hipDeviceptr_t src, size_t sizeBytes, hipStream_t stream);
	hipMemcpyDtoHAsync func(dst unsafe.Pointer, src devptr, n uint64, s hipStream) Result
	// hipError_t hipMemcpyPeerAsync(void* dst, int dstDeviceId, const void* src, int srcDevice,
	//                               size_t sizeBytes, hipStream_t stream);
	hipMemcpyPeerAsync func(dst devptr, dstDev int32, src devptr, srcDev int32, n uint64, s hipStream) Result
	// hipError_t hipStreamCreateWithFlags(hipStream_t* stream, unsigned int flags);
	hipStreamCreateWithFlags func(s *hipStream, flags uint32) Result
	// hipError_t hipStreamDestroy(hipStream_t stream);
	hipStreamDestroy func(s hipStream) Result
	// hipError_t hipStreamSynchronize(hipStream_t stream);
	hipStreamSynchronize func(s hipStream) Result
	// hipError_t hipStreamQuery(hipStream_t stream);
	hipStreamQuery func(s hipStream) Result
	// hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int flags);
	hipStreamWaitEvent func(s hipStream, e hipEvent, flags uint32) Result
	// hipError_t hipEventCreate(hipEvent_t* event);
	hipEventCreate func(e *hipEvent) Result
	// hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream);
	hipEventRecord func(e hipEvent, s hipStream) Result
	// hipError_t hipEventSynchronize(hipEvent_t event);
	hipEventSynchronize func(e hipEvent) Result
	// hipError_t hipEventElapsedTime(float* ms, hipEvent_t start, hipEvent_t stop);
	hipEventElapsedTime func(ms *float32, start, stop hipEvent) Result
	// hipError_t hipEventDestroy(hipEvent_t event);
	hipEventDestroy func(e hipEvent) Result
	// hipError_t hipModuleLoadData(hipModule_t* module, const void* image);
	hipModuleLoadData func(m *hipModule, image unsafe.Pointer) Result
	// hipError_t hipModuleGetFunction(hipFunction_t* function, hipModule_t module, const char* kname);
	hipModuleGetFunction func(f *hipFunc, m hipModule, name string) Result
	// hipError_t hipModuleGetGlobal(hipDeviceptr_t* dptr, size_t* bytes, hipModule_t hmod, const char* name);
	hipModuleGetGlobal func(p *devptr, size *uint64, m hipModule, name string) Result
	// hipError_t hipModuleUnload(hipModule_t module);
	hipModuleUnload func(m hipModule) Result
	// hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned int gridDimX, unsigned int gridDimY,
	//   unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
	//   unsigned int sharedMemBytes, hipStream_t stream, void** kernelParams, void** extra);
	hipModuleLaunchKernel func(f hipFunc, gx, gy, gz, bx, by, bz, shared uint32, s hipStream, params *unsafe.Pointer, extra *unsafe.Pointer) Result
	// hipError_t hipIpcGetMemHandle(hipIpcMemHandle_t* handle, void* devPtr);
	hipIpcGetMemHandle func(h *ipcMemHandle, p devptr) Result
	// hipError_t hipIpcOpenMemHandle(void** devPtr, hipIpcMemHandle_t handle, unsigned int flags);
	hipIpcOpenMemHandle func(p *devptr, h ipcMemHandle, flags uint32) Result
	// hipError_t hipIpcCloseMemHandle(void* devPtr);
	hipIpcCloseMemHandle func(p devptr) Result
}

type binding struct {
	names []string // the first exported one is bound
	fn    any
}

func symbols() []binding {
	l := &lib
	return []binding{
		{[]string{"hipInit"}, &l.hipInit},
		{[]string{"hipRuntimeGetVersion"}, &l.hipRuntimeGetVersion},
		{[]string{"hipGetErrorName"}, &l.hipGetErrorName},
		{[]string{"hipGetDeviceCount"}, &l.hipGetDeviceCount},
		{[]string{"hipSetDevice"}, &l.hipSetDevice},
		{[]string{"hipDeviceGetName"}, &l.hipDeviceGetName},
		{[]string{"hipDeviceTotalMem"}, &l.hipDeviceTotalMem},
		{[]string{"hipDeviceGetAttribute"}, &l.hipDeviceGetAttribute},
		{[]string{"hipGetDevicePropertiesR0600", "hipGetDeviceProperties"}, &l.hipGetDeviceProperties},
		{[]string{"hipDeviceGetUuid"}, &l.hipDeviceGetUuid},
		{[]string{"hipDeviceGetPCIBusId"}, &l.hipDeviceGetPCIBusId},
		{[]string{"hipDeviceGetByPCIBusId"}, &l.hipDeviceGetByPCIBusId},
		{[]string{"hipDeviceCanAccessPeer"}, &l.hipDeviceCanAccessPeer},
		{[]string{"hipDeviceEnablePeerAccess"}, &l.hipDeviceEnablePeerAccess},
		{[]string{"hipDeviceSynchronize"}, &l.hipDeviceSynchronize},
		{[]string{"hipMalloc"}, &l.hipMalloc},
		{[]string{"hipFree"}, &l.hipFree},
		{[]string{"hipHostMalloc"}, &l.hipHostMalloc},
		{[]string{"hipHostGetDevicePointer"}, &l.hipHostGetDevicePointer},
		{[]string{"hipHostFree"}, &l.hipHostFree},
		{[]string{"hipMemsetD8Async"}, &l.hipMemsetD8Async},
		{[]string{"hipMemcpyAsync"}, &l.hipMemcpyAsync},
		{[]string{"hipMemcpyHtoDAsync"}, &l.hipMemcpyHtoDAsync},
		{[]string{"hipMemcpyDtoHAsync"}, &l.hipMemcpyDtoHAsync},
		{[]string{"hipMemcpyPeerAsync"}, &l.hipMemcpyPeerAsync},
		{[]string{"hipStreamCreateWithFlags"}, &l.hipStreamCreateWithFlags},
		{[]string{"hipStreamDestroy"}, &l.hipStreamDestroy},
		{[]string{"hipStreamSynchronize"}, &l.hipStreamSynchronize},
		{[]string{"hipStreamQuery"}, &l.hipStreamQuery},
		{[]string{"hipStreamWaitEvent"}, &l.hipStreamWaitEvent},
		{[]string{"hipEventCreate"}, &l.hipEventCreate},
		{[]string{"hipEventRecord"}, &l.hipEventRecord},
		{[]string{"hipEventSynchronize"}, &l.hipEventSynchronize},
		{[]string{"hipEventElapsedTime"}, &l.hipEventElapsedTime},
		{[]string{"hipEventDestroy"}, &l.hipEventDestroy},
		{[]string{"hipModuleLoadData"}, &l.hipModuleLoadData},
		{[]string{"hipModuleGetFunction"}, &l.hipModuleGetFunction},
		{[]string{"hipModuleGetGlobal"}, &l.hipModuleGetGlobal},
		{[]string{"hipModuleUnload"}, &l.hipModuleUnload},
		{[]string{"hipModuleLaunchKernel"}, &l.hipModuleLaunchKernel},
		{[]string{"hipIpcGetMemHandle"}, &l.hipIpcGetMemHandle},
		{[]string{"hipIpcOpenMemHandle"}, &l.hipIpcOpenMemHandle},
		{[]string{"hipIpcCloseMemHandle"}, &l.hipIpcCloseMemHandle},
	}
}

var (
	loadOnce sync.Once
	loadErr  error
	loaded   bool
	library  string // the file that loaded
	version  int32
)

// load dlopens the first of Libraries that loads, binds every symbol and calls hipInit once.
// No library: ErrNoDriver. A missing symbol: ErrNotSupported naming it. hipInit or the device
// count reporting no device: ErrNoDevice.
func load() error {
	loadOnce.Do(func() {
		var h uintptr
		var errs []string
		for _, name := range Libraries {
			var err error
			if h, err = purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
				library = name
				break
			}
			errs = append(errs, err.Error())
		}
		if library == "" {
			loadErr = &device.Error{Op: "dlopen " + strings.Join(Libraries, "|"), Arg: strings.Join(errs, "; "), Kind: device.ErrNoDriver}
			return
		}
		for _, s := range symbols() {
			var p uintptr
			for _, n := range s.names {
				if q, err := purego.Dlsym(h, n); err == nil && q != 0 {
					p = q
					break
				}
			}
			if p == 0 {
				loadErr = &device.Error{Op: "dlsym " + strings.Join(s.names, "|"), Arg: library, Kind: device.ErrNotSupported}
				return
			}
			purego.RegisterFunc(s.fn, p)
		}
		loaded = true
		if r := lib.hipInit(0); r != Success {
			arg := library + " loaded"
			if r.kind() == device.ErrNoDevice {
				arg += ", no AMD device"
			}
			loadErr = check("hipInit", r, arg)
			return
		}
		if r := lib.hipRuntimeGetVersion(&version); r != Success {
			loadErr = check("hipRuntimeGetVersion", r, library)
		}
	})
	return loadErr
}

// Loaded returns the library file in use, once a call has loaded it ("" before or on failure
// to find one).
func Loaded() string {
	load()
	return library
}

// RuntimeVersion returns HIP_VERSION of the runtime (major*10000000 + minor*100000 + patch).
func RuntimeVersion() (int, error) {
	if err := load(); err != nil {
		return 0, err
	}
	return int(version), nil
}

func cstring(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

func cbuf(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

func uuidString(u [16]byte) string {
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// archName finds gcnArchName ("gfx942:sramecc+:xnack-") in a hipDeviceProp_t filled into buf.
// The struct's layout differs between ROCm 5 and 6 (R0600), so rather than trust one offset this
// looks past name[256] for the NUL-terminated string that starts with "gfx", and drops the
// feature suffixes.
func archName(buf []byte) string {
	for i := 256; i+3 < len(buf); i++ {
		if buf[i] == 'g' && buf[i+1] == 'f' && buf[i+2] == 'x' && buf[i-1] == 0 {
			s := cbuf(buf[i:])
			if j := strings.IndexByte(s, ':'); j >= 0 {
				s = s[:j]
			}
			return s
		}
	}
	return ""
}
