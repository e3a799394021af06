package cuda

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/roxamen/roxamen/device"
)

// Library is the file dlopen'ed; its SONAME is stable across driver versions.
const Library = "libcuda.so.1"

// fallbackDirs are tried when the dynamic linker's search path lacks the driver (containers
// that mount it under /usr/local/nvidia without an ld.so.conf entry).
var fallbackDirs = []string{"/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib64"}

type (
	cuDevice  int32
	cuContext uintptr
	cuStream  uintptr
	cuEvent   uintptr
	cuModule  uintptr
	cuFunc    uintptr
	devptr    uintptr // CUdeviceptr (unsigned long long on LP64)
)

// ipcMemHandle mirrors CUipcMemHandle: typedef struct CUipcMemHandle_st { char reserved[64]; }.
// Passed by value to cuIpcOpenMemHandle_v2: purego v0.11.3 passes a struct argument on
// linux/amd64 following the System V ABI (struct_amd64.go: an aggregate over 16 bytes is class
// MEMORY and is copied onto the stack, eightbyte by eightbyte), which is what the C compiler does.
type ipcMemHandle struct{ Reserved [64]byte }

// The bindings, one per driver entry point, each with its prototype from the CUDA driver API
// header cuda.h. Versioned names are chosen explicitly: cuda.h #defines the plain names to them.
var lib struct {
	// CUresult cuInit(unsigned int Flags);
	cuInit func(flags uint32) Result
	// CUresult cuDriverGetVersion(int *driverVersion);
	cuDriverGetVersion func(v *int32) Result
	// CUresult cuGetErrorName(CUresult error, const char **pStr);
	cuGetErrorName func(r Result, s **byte) Result
	// CUresult cuGetErrorString(CUresult error, const char **pStr);
	cuGetErrorString func(r Result, s **byte) Result
	// CUresult cuDeviceGetCount(int *count);
	cuDeviceGetCount func(n *int32) Result
	// CUresult cuDeviceGet(CUdevice *device, int ordinal);
	cuDeviceGet func(d *cuDevice, ordinal int32) Result
	// CUresult cuDeviceGetName(char *name, int len, CUdevice dev);
	cuDeviceGetName func(name *byte, n int32, d cuDevice) Result
	// CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev);
	cuDeviceTotalMem func(bytes *uint64, d cuDevice) Result
	// CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev);
	cuDeviceGetAttribute func(v *int32, attr int32, d cuDevice) Result
	// CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev);  (CUuuid: struct { char bytes[16]; })
	cuDeviceGetUuid func(uuid *[16]byte, d cuDevice) Result
	// CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev);
	cuDeviceGetPCIBusId func(id *byte, n int32, d cuDevice) Result
	// CUresult cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId);
	cuDeviceGetByPCIBusId func(d *cuDevice, id string) Result
	// CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev);
	cuDeviceCanAccessPeer func(can *int32, d, peer cuDevice) Result
	// CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
	cuDevicePrimaryCtxRetain func(ctx *cuContext, d cuDevice) Result
	// CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
	cuDevicePrimaryCtxRelease func(d cuDevice) Result
	// CUresult cuCtxSetCurrent(CUcontext ctx);
	cuCtxSetCurrent func(ctx cuContext) Result
	// CUresult cuCtxSynchronize(void);
	cuCtxSynchronize func() Result
	// CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags);
	cuCtxEnablePeerAccess func(peer cuContext, flags uint32) Result
	// CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
	cuMemAlloc func(p *devptr, size uint64) Result
	// CUresult cuMemFree_v2(CUdeviceptr dptr);
	cuMemFree func(p devptr) Result
	// CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags);
	cuMemHostAlloc func(pp *unsafe.Pointer, size uint64, flags uint32) Result
	// CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags);
	cuMemHostGetDevicePointer func(dp *devptr, p unsafe.Pointer, flags uint32) Result
	// CUresult cuMemFreeHost(void *p);
	cuMemFreeHost func(p unsafe.Pointer) Result
	// CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream);
	cuMemsetD8Async func(dst devptr, v uint8, n uint64, s cuStream) Result
	// CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream);
	// With unified addressing the driver infers each side's device, so this is also the
	// peer-to-peer copy (issued on the copy engines).
	cuMemcpyAsync func(dst, src devptr, n uint64, s cuStream) Result
	// CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream);
	cuMemcpyHtoDAsync func(dst devptr, src unsafe.Pointer, n uint64, s cuStream) Result
	// CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream);
	cuMemcpyDtoHAsync func(dst unsafe.Pointer, src devptr, n uint64, s cuStream) Result
	// CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
	//                            CUcontext srcContext, size_t ByteCount, CUstream hStream);
	cuMemcpyPeerAsync func(dst devptr, dctx cuContext, src devptr, sctx cuContext, n uint64, s cuStream) Result
	// CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags);
	cuStreamCreate func(s *cuStream, flags uint32) Result
	// CUresult cuStreamDestroy_v2(CUstream hStream);
	cuStreamDestroy func(s cuStream) Result
	// CUresult cuStreamSynchronize(CUstream hStream);
	cuStreamSynchronize func(s cuStream) Result
	// CUresult cuStreamQuery(CUstream hStream);
	cuStreamQuery func(s cuStream) Result
	// CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags);
	cuStreamWaitEvent func(s cuStream, e cuEvent, flags uint32) Result
	// CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags);
	cuEventCreate func(e *cuEvent, flags uint32) Result
	// CUresult cuEventRecord(CUevent hEvent, CUstream hStream);
	cuEventRecord func(e cuEvent, s cuStream) Result
	// CUresult cuEventSynchronize(CUevent hEvent);
	cuEventSynchronize func(e cuEvent) Result
	// CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd);
	cuEventElapsedTime func(ms *float32, start, end cuEvent) Result
	// CUresult cuEventDestroy_v2(CUevent hEvent);
	cuEventDestroy func(e cuEvent) Result
	// CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
	//                             CUjit_option *options, void **optionValues);
	cuModuleLoadDataEx func(m *cuModule, image unsafe.Pointer, n uint32, opts *int32, vals *uintptr) Result
	// CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name);
	cuModuleGetFunction func(f *cuFunc, m cuModule, name string) Result
	// CUresult cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name);
	cuModuleGetGlobal func(p *devptr, size *uint64, m cuModule, name string) Result
	// CUresult cuModuleUnload(CUmodule hmod);
	cuModuleUnload func(m cuModule) Result
	// CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
	//   unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
	//   unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra);
	cuLaunchKernel func(f cuFunc, gx, gy, gz, bx, by, bz, shared uint32, s cuStream, params *unsafe.Pointer, extra *unsafe.Pointer) Result
	// CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr);
	cuIpcGetMemHandle func(h *ipcMemHandle, p devptr) Result
	// CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags);
	cuIpcOpenMemHandle func(p *devptr, h ipcMemHandle, flags uint32) Result
	// CUresult cuIpcCloseMemHandle(CUdeviceptr dptr);
	cuIpcCloseMemHandle func(p devptr) Result
}

// symbols lists each binding with the exported symbol it binds.
func symbols() []struct {
	name string
	fn   any
} {
	l := &lib
	return []struct {
		name string
		fn   any
	}{
		{"cuInit", &l.cuInit},
		{"cuDriverGetVersion", &l.cuDriverGetVersion},
		{"cuGetErrorName", &l.cuGetErrorName},
		{"cuGetErrorString", &l.cuGetErrorString},
		{"cuDeviceGetCount", &l.cuDeviceGetCount},
		{"cuDeviceGet", &l.cuDeviceGet},
		{"cuDeviceGetName", &l.cuDeviceGetName},
		{"cuDeviceTotalMem_v2", &l.cuDeviceTotalMem},
		{"cuDeviceGetAttribute", &l.cuDeviceGetAttribute},
		{"cuDeviceGetUuid_v2", &l.cuDeviceGetUuid},
		{"cuDeviceGetPCIBusId", &l.cuDeviceGetPCIBusId},
		{"cuDeviceGetByPCIBusId", &l.cuDeviceGetByPCIBusId},
		{"cuDeviceCanAccessPeer", &l.cuDeviceCanAccessPeer},
		{"cuDevicePrimaryCtxRetain", &l.cuDevicePrimaryCtxRetain},
		{"cuDevicePrimaryCtxRelease_v2", &l.cuDevicePrimaryCtxRelease},
		{"cuCtxSetCurrent", &l.cuCtxSetCurrent},
		{"cuCtxSynchronize", &l.cuCtxSynchronize},
		{"cuCtxEnablePeerAccess", &l.cuCtxEnablePeerAccess},
		{"cuMemAlloc_v2", &l.cuMemAlloc},
		{"cuMemFree_v2", &l.cuMemFree},
		{"cuMemHostAlloc", &l.cuMemHostAlloc},
		{"cuMemHostGetDevicePointer_v2", &l.cuMemHostGetDevicePointer},
		{"cuMemFreeHost", &l.cuMemFreeHost},
		{"cuMemsetD8Async", &l.cuMemsetD8Async},
		{"cuMemcpyAsync", &l.cuMemcpyAsync},
		{"cuMemcpyHtoDAsync_v2", &l.cuMemcpyHtoDAsync},
		{"cuMemcpyDtoHAsync_v2", &l.cuMemcpyDtoHAsync},
		{"cuMemcpyPeerAsync", &l.cuMemcpyPeerAsync},
		{"cuStreamCreate", &l.cuStreamCreate},
		{"cuStreamDestroy_v2", &l.cuStreamDestroy},
		{"cuStreamSynchronize", &l.cuStreamSynchronize},
		{"cuStreamQuery", &l.cuStreamQuery},
		{"cuStreamWaitEvent", &l.cuStreamWaitEvent},
		{"cuEventCreate", &l.cuEventCreate},
		{"cuEventRecord", &l.cuEventRecord},
		{"cuEventSynchronize", &l.cuEventSynchronize},
		{"cuEventElapsedTime", &l.cuEventElapsedTime},
		{"cuEventDestroy_v2", &l.cuEventDestroy},
		{"cuModuleLoadDataEx", &l.cuModuleLoadDataEx},
		{"cuModuleGetFunction", &l.cuModuleGetFunction},
		{"cuModuleGetGlobal_v2", &l.cuModuleGetGlobal},
		{"cuModuleUnload", &l.cuModuleUnload},
		{"cuLaunchKernel", &l.cuLaunchKernel},
		{"cuIpcGetMemHandle", &l.cuIpcGetMemHandle},
		{"cuIpcOpenMemHandle_v2", &l.cuIpcOpenMemHandle},
		{"cuIpcCloseMemHandle", &l.cuIpcCloseMemHandle},
	}
}

var (
	loadOnce sync.Once
	loadErr  error
	loaded   bool // every binding is set
	version  int32
)

// load dlopens the library, binds every symbol and calls cuInit once. A missing library is
// ErrNoDriver; a library that lacks a symbol is ErrNotSupported naming it (a driver too old);
// cuInit failing with CUDA_ERROR_NO_DEVICE is ErrNoDevice.
func load() error {
	loadOnce.Do(func() {
		h, err := purego.Dlopen(Library, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		for _, dir := range fallbackDirs {
			if err == nil {
				break
			}
			if h2, err2 := purego.Dlopen(dir+"/"+Library, purego.RTLD_NOW|purego.RTLD_GLOBAL); err2 == nil {
				h, err = h2, nil
			}
		}
		if err != nil {
			loadErr = &device.Error{Op: "dlopen " + Library, Err: err, Kind: device.ErrNoDriver}
			return
		}
		for _, s := range symbols() {
			p, err := purego.Dlsym(h, s.name)
			if err != nil || p == 0 {
				loadErr = &device.Error{Op: "dlsym " + s.name, Arg: Library, Err: err, Kind: device.ErrNotSupported}
				return
			}
			purego.RegisterFunc(s.fn, p)
		}
		loaded = true
		if r := lib.cuInit(0); r != 0 {
			loadErr = check("cuInit", r, "flags=0")
			return
		}
		if r := lib.cuDriverGetVersion(&version); r != 0 {
			loadErr = check("cuDriverGetVersion", r, "")
		}
	})
	return loadErr
}

// DriverVersion returns the driver's CUDA version (12040 for 12.4) once the library is loaded.
func DriverVersion() (int, error) {
	if err := load(); err != nil {
		return 0, err
	}
	return int(version), nil
}

// cstring converts a NUL-terminated C string to Go.
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

// cbuf returns the string in a fixed buffer up to its first NUL.
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
