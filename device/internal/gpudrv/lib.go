package gpudrv

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/internal/dl"
)

type (
	status     int32   // CUresult, hipError_t: a C enum
	devHandle  int32   // CUdevice, hipDevice_t: an int
	ctxH       uintptr // CUcontext (PrimaryContext model only)
	streamH    uintptr // CUstream, hipStream_t
	eventH     uintptr // CUevent, hipEvent_t
	moduleH    uintptr // CUmodule, hipModule_t
	funcH      uintptr // CUfunction, hipFunction_t
	devptr     uintptr // CUdeviceptr (unsigned long long on LP64), void* / hipDeviceptr_t
	graphH     uintptr // CUgraph, hipGraph_t
	graphExecH uintptr // CUgraphExec, hipGraphExec_t
)

// ipcHandleSize is CU_IPC_HANDLE_SIZE (cuda.h) and HIP_IPC_HANDLE_SIZE (hip_runtime_api.h).
const ipcHandleSize = 64

// ipcHandle mirrors CUipcMemHandle and hipIpcMemHandle_t: struct { char reserved[64]; }.
// Passed by value to the IPC open call: purego v0.11.3 passes a struct argument on linux/amd64
// following the System V ABI (struct_amd64.go: an aggregate over 16 bytes is class MEMORY and is
// copied onto the stack, eightbyte by eightbyte), which is what the C compiler does.
type ipcHandle struct{ Reserved [ipcHandleSize]byte }

// bindings holds one Go function per entry point, each with its C prototypes: CUDA's from
// cuda.h, HIP's from hip/hip_runtime_api.h. Where both vendors' calls have one shape one field
// serves both; where they differ (see the package doc) there is one field per shape.
type bindings struct {
	// CUresult cuInit(unsigned int Flags);  hipError_t hipInit(unsigned int flags);
	init func(flags uint32) status
	// CUresult cuDriverGetVersion(int *driverVersion);  hipError_t hipRuntimeGetVersion(int *runtimeVersion);
	version func(v *int32) status
	// CUresult cuGetErrorName(CUresult error, const char **pStr);
	errorName func(r status, s **byte) status
	// const char *hipGetErrorName(hipError_t hip_error);
	errorNameReturn func(r status) *byte
	// CUresult cuDeviceGetCount(int *count);  hipError_t hipGetDeviceCount(int *count);
	deviceCount func(n *int32) status
	// CUresult cuDeviceGetName(char *name, int len, CUdevice dev);
	// hipError_t hipDeviceGetName(char *name, int len, hipDevice_t device);
	deviceName func(name *byte, n int32, d devHandle) status
	// CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev);
	// hipError_t hipDeviceTotalMem(size_t *bytes, hipDevice_t device);
	deviceTotalMem func(bytes *uint64, d devHandle) status
	// CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev);
	// hipError_t hipDeviceGetAttribute(int *pi, hipDeviceAttribute_t attr, int deviceId);
	deviceAttribute func(v *int32, attr int32, d devHandle) status
	// hipError_t hipGetDeviceProperties(hipDeviceProp_t *prop, int deviceId);
	// (ROCm 6 renames it hipGetDevicePropertiesR0600, with a longer struct.)
	deviceProperties func(prop unsafe.Pointer, d devHandle) status
	// CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev);
	// hipError_t hipDeviceGetUuid(hipUUID *uuid, hipDevice_t device);
	// (CUuuid, hipUUID: struct { char bytes[16]; })
	deviceUUID func(uuid *[16]byte, d devHandle) status
	// CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev);
	// hipError_t hipDeviceGetPCIBusId(char *pciBusId, int len, int device);
	devicePCIBusID func(id *byte, n int32, d devHandle) status
	// CUresult cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId);
	// hipError_t hipDeviceGetByPCIBusId(int *device, const char *pciBusId);
	deviceByPCIBusID func(d *devHandle, id string) status
	// CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev);
	// hipError_t hipDeviceCanAccessPeer(int *canAccessPeer, int deviceId, int peerDeviceId);
	deviceCanAccessPeer func(can *int32, d, peer devHandle) status

	// CUresult cuDeviceGet(CUdevice *device, int ordinal);
	deviceGet func(d *devHandle, ordinal int32) status
	// CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
	primaryCtxRetain func(ctx *ctxH, d devHandle) status
	// CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
	primaryCtxRelease func(d devHandle) status
	// CUresult cuCtxSetCurrent(CUcontext ctx);
	ctxSetCurrent func(ctx ctxH) status
	// CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags);
	ctxEnablePeerAccess func(peer ctxH, flags uint32) status
	// hipError_t hipSetDevice(int deviceId);
	setDevice func(d devHandle) status
	// hipError_t hipDeviceEnablePeerAccess(int peerDeviceId, unsigned int flags);
	deviceEnablePeerAccess func(peer devHandle, flags uint32) status

	// CUresult cuCtxSynchronize(void);  hipError_t hipDeviceSynchronize(void);
	synchronize func() status

	// CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);  hipError_t hipMalloc(void **ptr, size_t size);
	memAlloc func(p *devptr, size uint64) status
	// CUresult cuMemFree_v2(CUdeviceptr dptr);  hipError_t hipFree(void *ptr);
	memFree func(p devptr) status
	// CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags);
	// hipError_t hipHostMalloc(void **ptr, size_t size, unsigned int flags);
	hostAlloc func(pp *unsafe.Pointer, size uint64, flags uint32) status
	// CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags);
	// hipError_t hipHostGetDevicePointer(void **devPtr, void *hstPtr, unsigned int flags);
	hostDevicePointer func(dp *devptr, p unsafe.Pointer, flags uint32) status
	// CUresult cuMemFreeHost(void *p);  hipError_t hipHostFree(void *ptr);
	hostFree func(p unsafe.Pointer) status
	// CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream);
	// hipError_t hipMemsetD8Async(hipDeviceptr_t dest, unsigned char value, size_t count, hipStream_t stream);
	memsetD8Async func(dst devptr, v uint8, n uint64, s streamH) status
	// CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream);
	// With unified addressing the driver infers each side's device, so this is also the
	// peer-to-peer copy (issued on the copy engines).
	memcpyAsync func(dst, src devptr, n uint64, s streamH) status
	// hipError_t hipMemcpyAsync(void *dst, const void *src, size_t sizeBytes, hipMemcpyKind kind, hipStream_t stream);
	// With hipMemcpyDefault the runtime infers each side from the unified address space, so this
	// is also the peer-to-peer copy (issued on the SDMA engines).
	memcpyAsyncKind func(dst, src devptr, n uint64, kind uint32, s streamH) status
	// CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream);
	// hipError_t hipMemcpyHtoDAsync(hipDeviceptr_t dst, void *src, size_t sizeBytes, hipStream_t stream);
	memcpyHtoDAsync func(dst devptr, src unsafe.Pointer, n uint64, s streamH) status
	// CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream);
	// hipError_t hipMemcpyDtoHAsync(void *dst, hipDeviceptr_t src, size_t sizeBytes, hipStream_t stream);
	memcpyDtoHAsync func(dst unsafe.Pointer, src devptr, n uint64, s streamH) status
	// CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
	//                            CUcontext srcContext, size_t ByteCount, CUstream hStream);
	// hipError_t hipMemcpyPeerAsync(void *dst, int dstDeviceId, const void *src, int srcDevice,
	//                               size_t sizeBytes, hipStream_t stream);
	// The peer arguments are a context (CUDA) or a device ordinal (HIP): each is one integer
	// register on linux/amd64, so one binding takes either (see gpuDevice.peer).
	memcpyPeerAsync func(dst devptr, dstPeer uintptr, src devptr, srcPeer uintptr, n uint64, s streamH) status

	// CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags);
	// hipError_t hipStreamCreateWithFlags(hipStream_t *stream, unsigned int flags);
	streamCreate func(s *streamH, flags uint32) status
	// CUresult cuStreamDestroy_v2(CUstream hStream);  hipError_t hipStreamDestroy(hipStream_t stream);
	streamDestroy func(s streamH) status
	// CUresult cuStreamSynchronize(CUstream hStream);  hipError_t hipStreamSynchronize(hipStream_t stream);
	streamSynchronize func(s streamH) status
	// CUresult cuStreamQuery(CUstream hStream);  hipError_t hipStreamQuery(hipStream_t stream);
	streamQuery func(s streamH) status
	// CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags);
	// hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int flags);
	streamWaitEvent func(s streamH, e eventH, flags uint32) status
	// CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags);
	// hipError_t hipEventCreateWithFlags(hipEvent_t *event, unsigned flags);
	eventCreate func(e *eventH, flags uint32) status
	// CUresult cuEventRecord(CUevent hEvent, CUstream hStream);  hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream);
	eventRecord func(e eventH, s streamH) status
	// CUresult cuEventSynchronize(CUevent hEvent);  hipError_t hipEventSynchronize(hipEvent_t event);
	eventSynchronize func(e eventH) status
	// CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd);
	// hipError_t hipEventElapsedTime(float *ms, hipEvent_t start, hipEvent_t stop);
	eventElapsedTime func(ms *float32, start, end eventH) status
	// CUresult cuEventDestroy_v2(CUevent hEvent);  hipError_t hipEventDestroy(hipEvent_t event);
	eventDestroy func(e eventH) status

	// CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
	//                             CUjit_option *options, void **optionValues);
	moduleLoadDataEx func(m *moduleH, image unsafe.Pointer, n uint32, opts *int32, vals *uintptr) status
	// hipError_t hipModuleLoadData(hipModule_t *module, const void *image);
	moduleLoadData func(m *moduleH, image unsafe.Pointer) status
	// CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name);
	// hipError_t hipModuleGetFunction(hipFunction_t *function, hipModule_t module, const char *kname);
	moduleGetFunction func(f *funcH, m moduleH, name string) status
	// CUresult cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name);
	// hipError_t hipModuleGetGlobal(hipDeviceptr_t *dptr, size_t *bytes, hipModule_t hmod, const char *name);
	moduleGetGlobal func(p *devptr, size *uint64, m moduleH, name string) status
	// CUresult cuModuleUnload(CUmodule hmod);  hipError_t hipModuleUnload(hipModule_t module);
	moduleUnload func(m moduleH) status
	// CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
	//   unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
	//   unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra);
	// hipError_t hipModuleLaunchKernel(hipFunction_t f, (the same nine unsigned ints),
	//   hipStream_t stream, void **kernelParams, void **extra);
	launchKernel func(f funcH, gx, gy, gz, bx, by, bz, shared uint32, s streamH, params *unsafe.Pointer, extra *unsafe.Pointer) status
	// CUresult cuModuleGetFunctionCount(unsigned int *count, CUmodule mod);  (optional: Symbols)
	moduleFunctionCount func(n *uint32, m moduleH) status
	// CUresult cuModuleEnumerateFunctions(CUfunction *functions, unsigned int numFunctions, CUmodule mod);
	moduleEnumerateFunctions func(fns *funcH, n uint32, m moduleH) status
	// CUresult cuFuncLoad(CUfunction function);
	funcLoad func(f funcH) status
	// CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode);
	// hipError_t hipStreamBeginCapture(hipStream_t stream, hipStreamCaptureMode mode);
	streamBeginCapture func(s streamH, mode uint32) status
	// CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph);
	// hipError_t hipStreamEndCapture(hipStream_t stream, hipGraph_t *pGraph);
	streamEndCapture func(s streamH, g *graphH) status
	// CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags);
	// hipError_t hipGraphInstantiateWithFlags(hipGraphExec_t *pGraphExec, hipGraph_t graph, unsigned long long flags);
	graphInstantiate func(e *graphExecH, g graphH, flags uint64) status
	// CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream);
	// hipError_t hipGraphLaunch(hipGraphExec_t graphExec, hipStream_t stream);
	graphLaunch func(e graphExecH, s streamH) status
	// CUresult cuGraphExecDestroy(CUgraphExec hGraphExec);  hipError_t hipGraphExecDestroy(hipGraphExec_t graphExec);
	graphExecDestroy func(e graphExecH) status
	// CUresult cuGraphDestroy(CUgraph hGraph);  hipError_t hipGraphDestroy(hipGraph_t graph);
	graphDestroy func(g graphH) status
	// CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr);
	// hipError_t hipIpcGetMemHandle(hipIpcMemHandle_t *handle, void *devPtr);
	ipcGetMemHandle func(h *ipcHandle, p devptr) status
	// CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags);
	// hipError_t hipIpcOpenMemHandle(void **devPtr, hipIpcMemHandle_t handle, unsigned int flags);
	ipcOpenMemHandle func(p *devptr, h ipcHandle, flags uint32) status
	// CUresult cuIpcCloseMemHandle(CUdeviceptr dptr);  hipError_t hipIpcCloseMemHandle(void *devPtr);
	ipcCloseMemHandle func(p devptr) status
}

type entry struct {
	name *string // in Driver.op: the vendor's name(s), then the one bound
	fn   any
}

// entries pairs each Symbols field with its binding.
func (dr *Driver) entries() []entry {
	s, l := &dr.op, &dr.lib
	return []entry{
		{&s.Init, &l.init}, {&s.Version, &l.version},
		{&s.ErrorName, &l.errorName}, {&s.ErrorNameReturn, &l.errorNameReturn},
		{&s.DeviceCount, &l.deviceCount}, {&s.DeviceName, &l.deviceName},
		{&s.DeviceTotalMem, &l.deviceTotalMem}, {&s.DeviceAttribute, &l.deviceAttribute},
		{&s.DeviceProperties, &l.deviceProperties}, {&s.DeviceUUID, &l.deviceUUID},
		{&s.DevicePCIBusID, &l.devicePCIBusID}, {&s.DeviceByPCIBusID, &l.deviceByPCIBusID},
		{&s.DeviceCanAccessPeer, &l.deviceCanAccessPeer},
		{&s.DeviceGet, &l.deviceGet}, {&s.PrimaryCtxRetain, &l.primaryCtxRetain},
		{&s.PrimaryCtxRelease, &l.primaryCtxRelease}, {&s.CtxSetCurrent, &l.ctxSetCurrent},
		{&s.CtxEnablePeerAccess, &l.ctxEnablePeerAccess},
		{&s.SetDevice, &l.setDevice}, {&s.DeviceEnablePeerAccess, &l.deviceEnablePeerAccess},
		{&s.Synchronize, &l.synchronize},
		{&s.MemAlloc, &l.memAlloc}, {&s.MemFree, &l.memFree}, {&s.HostAlloc, &l.hostAlloc},
		{&s.HostDevicePointer, &l.hostDevicePointer}, {&s.HostFree, &l.hostFree},
		{&s.MemsetD8Async, &l.memsetD8Async},
		{&s.MemcpyAsync, &l.memcpyAsync}, {&s.MemcpyAsyncKind, &l.memcpyAsyncKind},
		{&s.MemcpyHtoDAsync, &l.memcpyHtoDAsync}, {&s.MemcpyDtoHAsync, &l.memcpyDtoHAsync},
		{&s.MemcpyPeerAsync, &l.memcpyPeerAsync},
		{&s.StreamCreate, &l.streamCreate}, {&s.StreamDestroy, &l.streamDestroy},
		{&s.StreamSynchronize, &l.streamSynchronize}, {&s.StreamQuery, &l.streamQuery},
		{&s.StreamWaitEvent, &l.streamWaitEvent},
		{&s.EventCreate, &l.eventCreate}, {&s.EventRecord, &l.eventRecord},
		{&s.EventSynchronize, &l.eventSynchronize}, {&s.EventElapsedTime, &l.eventElapsedTime},
		{&s.EventDestroy, &l.eventDestroy},
		{&s.ModuleLoadDataEx, &l.moduleLoadDataEx}, {&s.ModuleLoadData, &l.moduleLoadData},
		{&s.ModuleGetFunction, &l.moduleGetFunction}, {&s.ModuleGetGlobal, &l.moduleGetGlobal},
		{&s.ModuleUnload, &l.moduleUnload}, {&s.LaunchKernel, &l.launchKernel},
		{&s.IpcGetMemHandle, &l.ipcGetMemHandle}, {&s.IpcOpenMemHandle, &l.ipcOpenMemHandle},
		{&s.IpcCloseMemHandle, &l.ipcCloseMemHandle},
	}
}

// optional lists the Symbols that a vendor may leave out (the pairs and the model-specific
// ones, which Vendor.check verifies); every other one must be named.
func (dr *Driver) optional() map[*string]bool {
	s := &dr.op
	return map[*string]bool{
		&s.ErrorName: true, &s.ErrorNameReturn: true, &s.DeviceProperties: true,
		&s.DeviceGet: true, &s.PrimaryCtxRetain: true, &s.PrimaryCtxRelease: true, &s.CtxSetCurrent: true,
		&s.CtxEnablePeerAccess: true, &s.SetDevice: true, &s.DeviceEnablePeerAccess: true,
		&s.MemcpyAsync: true, &s.MemcpyAsyncKind: true, &s.ModuleLoadDataEx: true, &s.ModuleLoadData: true,
	}
}

// Driver is one vendor's device.Driver. Nothing is loaded until Count or Open.
type Driver struct {
	v *Vendor
	// op starts as the vendor's Symbols, first alternatives; load replaces each with the name it
	// bound. Errors name calls by it.
	op Symbols

	loadOnce sync.Once
	loadErr  error
	loaded   atomic.Bool // every binding is set
	library  string      // the file that loaded
	version  int32
	lib      bindings
	// the launch's, the context or device call's and the graph launch's symbols, called with
	// argument blocks that are not allocated per call (launchParams.call, gpuDevice.ctxArgs): a
	// variadic dl.Call's arguments escape to the heap, one allocation per call
	launchSym, ctxSym, graphLaunchSym uintptr
	// copySym, copyKindSym: the device-to-device copy (MemcpyAsync, or MemcpyAsyncKind with
	// MemcpyDefault), called per putmem_on_stream to a mapped peer (stream.CopyAsync)
	copySym, copyKindSym uintptr
}

var _ device.Driver = (*Driver)(nil)

// New returns the driver over the vendor's table; it panics on a table that cannot work.
func New(v Vendor) *Driver {
	v.check()
	dr := &Driver{v: &v, op: v.Sym}
	opt := dr.optional()
	var missing []string
	for _, e := range dr.entries() {
		if *e.name == "" && !opt[e.name] {
			missing = append(missing, fieldName(&dr.op, e.name))
		}
		*e.name, _, _ = strings.Cut(*e.name, "|")
	}
	if len(missing) > 0 {
		panic(fmt.Sprintf("gpudrv: vendor table %q names no symbol for Symbols.%s", v.Name, strings.Join(missing, ", Symbols.")))
	}
	return dr
}

// fieldName names the field of s that p points at.
func fieldName(s *Symbols, p *string) string {
	v := reflect.ValueOf(s).Elem()
	for i := range v.NumField() {
		if v.Field(i).Addr().Interface().(*string) == p {
			return v.Type().Field(i).Name
		}
	}
	return "?"
}

// Name returns the vendor's name ("cuda", "hip").
func (dr *Driver) Name() string { return dr.v.Name }

// load dlopens the first of the vendor's libraries that loads, binds every symbol and calls its
// init once. No library: ErrNoDriver naming the files tried. A missing symbol: ErrNotSupported
// naming it (a library too old). Init reporting no device: ErrNoDevice naming the call.
func (dr *Driver) load() error {
	dr.loadOnce.Do(func() {
		v := dr.v
		candidates := append([]string(nil), v.Libraries...)
		for _, dir := range v.Dirs {
			for _, name := range v.Libraries {
				candidates = append(candidates, dir+"/"+name)
			}
		}
		h, err := dl.Open(candidates...)
		if err != nil {
			dr.loadErr = &device.Error{Call: "dlopen " + strings.Join(v.Libraries, "|"), Detail: err.Error(), Kind: device.ErrNoDriver}
			return
		}
		dr.library = h.Path
		dr.op = v.Sym
		var syms []dl.Sym
		for _, e := range dr.entries() {
			if *e.name != "" {
				syms = append(syms, dl.Sym{Name: *e.name, Fn: e.fn, Bound: e.name})
			}
		}
		if err := h.Bind(syms...); err != nil {
			name := err.Error()
			if se := (*dl.SymbolError)(nil); errors.As(err, &se) {
				name = se.Name
			}
			dr.loadErr = &device.Error{Call: "dlsym " + name, Detail: dr.library, Kind: device.ErrNotSupported}
			return
		}
		dr.bindDirect(h)
		dr.bindPreload(h)
		dr.bindGraphs(h)
		dr.loaded.Store(true)
		if r := dr.lib.init(0); r != 0 {
			arg := dr.library + " loaded, flags=0"
			if dr.v.Kinds[int32(r)] == device.ErrNoDevice {
				arg += ", no " + v.Maker + " device"
			}
			dr.loadErr = dr.check(dr.op.Init, r, arg)
			return
		}
		if r := dr.lib.version(&dr.version); r != 0 {
			dr.loadErr = dr.check(dr.op.Version, r, dr.library)
		}
	})
	return dr.loadErr
}

// bindPreload binds the eager-loading calls when the library has all of them.
func (dr *Driver) bindPreload(h *dl.Lib) {
	s, l := &dr.op, &dr.lib
	if s.ModuleFunctionCount == "" || s.FuncLoad == "" || s.ModuleEnumerateFunctions == "" {
		return
	}
	syms := []dl.Sym{{Name: s.ModuleFunctionCount, Fn: &l.moduleFunctionCount},
		{Name: s.ModuleEnumerateFunctions, Fn: &l.moduleEnumerateFunctions}, {Name: s.FuncLoad, Fn: &l.funcLoad}}
	_ = h.Bind(syms...) // all three or none: a library without them preloads nothing
}

// Loaded returns the library file in use once a call has loaded it ("" before, or when none
// loads).
func (dr *Driver) Loaded() string {
	dr.load()
	return dr.library
}

// Load loads the library (once) and returns why it cannot be used, or nil.
func (dr *Driver) Load() error { return dr.load() }

// Version returns what the vendor's version call reports (CUDA: 12040 for 12.4; HIP:
// major*10000000 + minor*100000 + patch).
func (dr *Driver) Version() (int, error) {
	if err := dr.load(); err != nil {
		return 0, err
	}
	return int(dr.version), nil
}

// StatusName returns a status code's name: the library's, else the table's, else
// "CUresult(12345)".
func (dr *Driver) StatusName(code int32) string {
	if dr.loaded.Load() {
		var s string
		if dr.lib.errorName != nil {
			var p *byte
			if dr.lib.errorName(status(code), &p) == 0 {
				s = dl.GoString(p)
			}
		} else {
			s = dl.GoString(dr.lib.errorNameReturn(status(code)))
		}
		if s != "" && s != dr.v.UnknownName {
			return s
		}
	}
	if n, ok := dr.v.Names[code]; ok {
		return n
	}
	return fmt.Sprintf("%s(%d)", dr.v.StatusType, code)
}

// StatusError is the text of a status as an error: "CUDA_ERROR_INVALID_VALUE (1)".
func (dr *Driver) StatusError(code int32) string {
	return fmt.Sprintf("%s (%d)", dr.StatusName(code), code)
}

// Check returns nil for status 0 (success), else a *device.Error naming the call and its
// arguments that matches both the vendor's status value and the sentinel the table maps it to.
func (dr *Driver) Check(op string, code int32, arg string) error {
	return dr.check(op, status(code), arg)
}

func (dr *Driver) check(op string, r status, arg string) error {
	if r == 0 {
		return nil
	}
	return &device.Error{Call: op, Detail: arg, Err: dr.v.Status(int32(r)), Kind: dr.v.Kinds[int32(r)]}
}

func uuidString(u [16]byte) string {
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// bindDirect rebinds the calls every stream-ordered operation makes (the launch, and the
// context's binding that precedes every call) to dl.Call on their symbols: RegisterFunc's
// functions go through reflection, which costs microseconds per call beside a ~3.5 us launch.
func (dr *Driver) bindDirect(h *dl.Lib) {
	l := &dr.lib
	sym := func(name string) uintptr {
		if name == "" {
			return 0
		}
		p, _ := h.Lookup(name)
		return p
	}
	dr.launchSym = sym(dr.op.LaunchKernel)
	if dr.ctxSym = sym(dr.op.CtxSetCurrent); dr.ctxSym == 0 {
		dr.ctxSym = sym(dr.op.SetDevice) // hipSetDevice(int): the ordinal, as ctxArgs holds it
	}
	dr.copySym, dr.copyKindSym = sym(dr.op.MemcpyAsync), sym(dr.op.MemcpyAsyncKind)
	if p := sym(dr.op.LaunchKernel); p != 0 {
		l.launchKernel = func(f funcH, gx, gy, gz, bx, by, bz, shared uint32, s streamH, params *unsafe.Pointer, extra *unsafe.Pointer) status {
			r := dl.Call(p, uintptr(f), uintptr(gx), uintptr(gy), uintptr(gz), uintptr(bx), uintptr(by), uintptr(bz),
				uintptr(shared), uintptr(s), uintptr(unsafe.Pointer(params)), uintptr(unsafe.Pointer(extra)))
			return status(int32(r))
		}
	}
	if p := sym(dr.op.CtxSetCurrent); p != 0 {
		l.ctxSetCurrent = func(ctx ctxH) status {
			r := dl.Call(p, uintptr(ctx))
			return status(int32(r))
		}
	}
}
