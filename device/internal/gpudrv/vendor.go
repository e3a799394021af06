// Package gpudrv is the one implementation of the device interfaces over a vendor GPU API that
// mirrors the CUDA driver API: NVIDIA's libcuda and AMD's HIP runtime. device/cuda and
// device/hip are thin packages that hand it their Vendor table; every line of logic (load and
// bind, thread affinity, bookkeeping of allocations, streams, events and modules, IPC handles,
// kernel arguments, error reporting) is here once, so that a fix lands in both and the AMD side,
// which CI cannot run, shares the code that ran on NVIDIA GPUs.
//
// What differs between the vendors is data in the Vendor table, each entry cited from the
// vendor's header (cuda.h; hip/hip_runtime_api.h): symbol names, status numbers and names,
// attribute numbers and flag values, and a few models where the two APIs take a different shape:
//
//   - the context model (ContextModel): CUDA retains a device's primary context and makes it
//     current per thread; HIP makes a device ordinal current per thread and has no context to
//     retain or release;
//   - the error-name call: CUDA returns the name through an out parameter, HIP returns it;
//   - the device-to-device copy: cuMemcpyAsync takes no kind, hipMemcpyAsync takes
//     hipMemcpyDefault;
//   - the module loader: cuModuleLoadDataEx with a JIT error log (PTX is compiled at load),
//     hipModuleLoadData (code objects are not compiled at load);
//   - the architecture name: CUDA's from two compute-capability attributes, HIP's from the
//     gcnArchName field of the device property struct (Vendor.Arch).
//
// Thread affinity: the current context (CUDA) or device (HIP) is per OS thread. Every call into
// the library locks the calling goroutine to its OS thread, makes the device current there (a
// cheap thread-local store) and makes the call. Any goroutine may therefore use a Device, and
// calls from several goroutines run in parallel; blocking calls (stream or event
// synchronization) hold only their own thread.
//
// Synchronous calls (Memset, CopyHtoD, CopyDtoH, CopyDtoD) run on a private non-blocking stream
// and wait for it; like Streams from NewStream (created non-blocking) they are not ordered with
// other streams. Device.Synchronize waits for all of the device's work.
package gpudrv

import (
	"fmt"
	"strings"
)

// ContextModel is how a thread is pointed at a device before a call.
type ContextModel int

const (
	// PrimaryContext (CUDA driver API): Open gets the device handle (Symbols.DeviceGet) and
	// retains its primary context (PrimaryCtxRetain); every call makes that context current
	// (CtxSetCurrent); peer access is granted to a peer's context (CtxEnablePeerAccess) and peer
	// copies name contexts; Close releases the contexts it retained (PrimaryCtxRelease).
	PrimaryContext ContextModel = iota + 1
	// CurrentDevice (HIP runtime API): the device ordinal is the handle; every call makes it
	// current (SetDevice); peer access is granted to a peer's ordinal (DeviceEnablePeerAccess)
	// and peer copies name ordinals; there is nothing to retain or release.
	CurrentDevice
)

// Symbols names the library entry point of each binding. A field holds the exported name, or
// several separated by "|" of which the first the library exports is bound (a renamed entry
// point); "" where the vendor does not use that binding (the other one of a pair that differs,
// see the package doc). The C prototype of each binding, for both vendors, is at its field in
// bindings (lib.go); the vendor tables cite their headers.
type Symbols struct {
	Init, Version string

	// Exactly one of the two is named.
	ErrorName       string // CUresult cuGetErrorName(CUresult, const char **pStr)
	ErrorNameReturn string // const char *hipGetErrorName(hipError_t)

	DeviceCount, DeviceName, DeviceTotalMem, DeviceAttribute, DeviceUUID string
	DevicePCIBusID, DeviceByPCIBusID, DeviceCanAccessPeer                string
	// DeviceProperties fills the vendor's device property struct (HIP's gcnArchName is there);
	// named where Vendor.Arch asks for Properties.
	DeviceProperties string

	// PrimaryContext model only.
	DeviceGet, PrimaryCtxRetain, PrimaryCtxRelease, CtxSetCurrent, CtxEnablePeerAccess string
	// CurrentDevice model only.
	SetDevice, DeviceEnablePeerAccess string

	Synchronize string // waits for all work of the current context / device

	MemAlloc, MemFree, HostAlloc, HostDevicePointer, HostFree string
	MemsetD8Async                                             string
	// Exactly one of the two is named.
	MemcpyAsync                                       string // (dst, src, n, stream)
	MemcpyAsyncKind                                   string // (dst, src, n, kind, stream), called with Vendor.MemcpyDefault
	MemcpyHtoDAsync, MemcpyDtoHAsync, MemcpyPeerAsync string

	StreamCreate, StreamDestroy, StreamSynchronize, StreamQuery, StreamWaitEvent string
	EventCreate, EventRecord, EventSynchronize, EventElapsedTime, EventDestroy   string

	// Exactly one of the two is named.
	ModuleLoadDataEx                                               string // with Vendor.JITErrorLog: the JIT's error log comes back in the error
	ModuleLoadData                                                 string
	ModuleGetFunction, ModuleGetGlobal, ModuleUnload, LaunchKernel string

	IpcGetMemHandle, IpcOpenMemHandle, IpcCloseMemHandle string

	// Eager loading, bound when the library has all three (CUDA 12.4+): LoadModule loads every
	// function of a module before it returns. With lazy loading (CUDA's default since 12.2) a
	// function is loaded at its first launch, and loading waits for the context's running kernels,
	// so a kernel launched while another kernel of the same context spins waiting for it deadlocks
	// (CUDA Programming Guide, "Lazy Loading", Potential Hazards: concurrent execution; measured
	// here on one H200 with two PEs in one process: put-with-signal hung until
	// CUDA_MODULE_LOADING=EAGER). Without them LoadModule looks up each .entry of a PTX image,
	// which loads it on the drivers that lazy-load at lookup (12.2, 12.3).
	ModuleFunctionCount, ModuleEnumerateFunctions, FuncLoad string

	// Stream capture and graphs, bound when the library has all six (CUDA 11.4+, HIP 5.3+):
	// Capturer and Graph; without them BeginCapture fails with ErrNotSupported.
	StreamBeginCapture, StreamEndCapture, GraphInstantiate, GraphLaunch, GraphExecDestroy, GraphDestroy string
}

// Flag is a flag or enum value passed to the library, with the name errors print.
type Flag struct {
	Value uint32
	Name  string
}

// Attr is a device attribute number (CUdevice_attribute, hipDeviceAttribute_t) and its name.
type Attr struct {
	Value int32
	Name  string
}

// Query is what Vendor.Arch may ask of an opened device.
type Query interface {
	// Attribute returns one device attribute.
	Attribute(a Attr) (int32, error)
	// Properties returns the device property struct (Symbols.DeviceProperties) in a buffer of
	// size bytes, which must be at least the struct's size.
	Properties(size int) ([]byte, error)
}

// Vendor is everything that differs between two APIs of the CUDA driver API's shape.
type Vendor struct {
	Name  string // "cuda": Info.Driver and the prefix of errors that are no library call
	Maker string // "NVIDIA": errors say "no NVIDIA device"
	// Libraries are dlopen'ed in this order, the first that loads used; then each in Dirs.
	Libraries []string
	Dirs      []string

	Sym     Symbols
	Context ContextModel

	// StatusType is the C type of a status ("CUresult"), printed for a code with no name.
	StatusType string
	// Status converts a status code to the vendor's exported type, the value errors.Is matches
	// (cuda.ErrorInvalidValue). Success is 0 in both APIs.
	Status func(code int32) error
	// Names are printed when the library cannot name a code (not loaded, or it answers
	// UnknownName, the name it gives every code it does not know).
	Names       map[int32]string
	UnknownName string
	// Kinds maps a status to the device sentinel it also matches (device.ErrInvalid, ...).
	Kinds map[int32]error
	// Codes the logic acts on.
	NotReady                 int32 // a stream query's "still running"
	PeerAccessAlreadyEnabled int32 // enabling peer access twice: not an error
	InvalidValue             int32 // an IPC open refusing a flag: try the next in IPCOpenFlags

	MultiprocessorCount Attr
	// HostNativeAtomics is the attribute that says whether device atomics on host memory are
	// atomic with the CPU's (Info.HostNativeAtomics); a zero Attr: the vendor cannot say.
	HostNativeAtomics Attr
	// Arch names the architecture of an opened device ("sm_90", "gfx942").
	Arch func(q Query) (string, error)

	HostAllocFlags    Flag // page-locked, portable, mapped into the device
	StreamNonBlocking Flag
	EventDefault      Flag // timing enabled
	MemcpyDefault     Flag // the kind argument of Symbols.MemcpyAsyncKind
	// IPCOpenFlags are tried in order while the library answers InvalidValue (a flag's value
	// changed between releases).
	IPCOpenFlags []Flag
	// IPCHandleSize is the size of the IPC memory handle struct, passed by value.
	IPCHandleSize int
	// HandleMagic starts every export handle, so an Import of another vendor's handle (or of
	// anything else) is refused before the library sees it.
	HandleMagic [8]byte

	// CaptureRelaxed is the capture mode BeginCapture asks for: other threads' calls are not
	// refused while a stream captures (several PEs' runtimes may share a process).
	CaptureRelaxed Flag

	// JITErrorLog and JITErrorLogSize are the ModuleLoadDataEx options that return the JIT's
	// error log (CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES).
	JITErrorLog, JITErrorLogSize int32
}

// check panics on a table that cannot work: a programming error in a vendor package, caught by
// its tests at package initialization.
func (v *Vendor) check() {
	var bad []string
	need := func(what string, ok bool) {
		if !ok {
			bad = append(bad, what)
		}
	}
	s := v.Sym
	one := func(what, a, b string) { need(what+": exactly one of the pair", (a == "") != (b == "")) }
	one("ErrorName/ErrorNameReturn", s.ErrorName, s.ErrorNameReturn)
	one("MemcpyAsync/MemcpyAsyncKind", s.MemcpyAsync, s.MemcpyAsyncKind)
	one("ModuleLoadDataEx/ModuleLoadData", s.ModuleLoadDataEx, s.ModuleLoadData)
	switch v.Context {
	case PrimaryContext:
		need("PrimaryContext symbols", s.DeviceGet != "" && s.PrimaryCtxRetain != "" && s.PrimaryCtxRelease != "" &&
			s.CtxSetCurrent != "" && s.CtxEnablePeerAccess != "" && s.SetDevice == "" && s.DeviceEnablePeerAccess == "")
	case CurrentDevice:
		need("CurrentDevice symbols", s.SetDevice != "" && s.DeviceEnablePeerAccess != "" && s.DeviceGet == "" &&
			s.PrimaryCtxRetain == "" && s.PrimaryCtxRelease == "" && s.CtxSetCurrent == "" && s.CtxEnablePeerAccess == "")
	default:
		need("a context model", false)
	}
	need("Name, Maker, Libraries", v.Name != "" && v.Maker != "" && len(v.Libraries) > 0)
	need("Status, Arch", v.Status != nil && v.Arch != nil)
	need("IPCOpenFlags", len(v.IPCOpenFlags) > 0)
	// The by-value IPC handle binding is a Go struct of this size (ipcHandle).
	need("IPCHandleSize 64", v.IPCHandleSize == ipcHandleSize)
	if len(bad) > 0 {
		panic(fmt.Sprintf("gpudrv: vendor table %q: %s", v.Name, strings.Join(bad, "; ")))
	}
}
