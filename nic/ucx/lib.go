package ucx

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/roxamen/roxamen/internal/dl"
)

// Library is the file dlopen'ed: UCP's SONAME, stable across UCX releases.
const Library = "libucp.so.0"

// ErrNoLibrary is returned (wrapped, with the loader's message) when libucp.so.0 cannot be
// loaded or lacks an entry point this package needs. Match it with errors.Is.
var ErrNoLibrary = errors.New(Library + " is not available")

type (
	ucpConfig  uintptr // ucp_config_t *
	ucpContext uintptr // ucp_context_h
	ucpWorker  uintptr // ucp_worker_h
	ucpEP      uintptr // ucp_ep_h
	ucpMem     uintptr // ucp_mem_h
	ucpRkey    uintptr // ucp_rkey_h
)

// The bindings, one per entry point, each with its prototype from ucp/api/ucp.h (ucs_status_string
// from ucs/type/status.h, reached through libucp's dependency on libucs). ucs_status_t is a packed
// enum: one signed byte. ucs_status_ptr_t is a pointer-sized value (see ptrStatus).
var lib struct {
	// void ucp_get_version(unsigned *major_version, unsigned *minor_version, unsigned *release_number);
	ucpGetVersion func(major, minor, release *uint32)
	// ucs_status_t ucp_config_read(const char *env_prefix, const char *filename, ucp_config_t **config_p);
	ucpConfigRead func(envPrefix, filename *byte, config *ucpConfig) Status
	// void ucp_config_release(ucp_config_t *config);
	ucpConfigRelease func(config ucpConfig)
	// ucs_status_t ucp_init_version(unsigned api_major_version, unsigned api_minor_version,
	//                               const ucp_params_t *params, const ucp_config_t *config,
	//                               ucp_context_h *context_p);
	// (ucp_init is a static inline wrapper around it.)
	ucpInitVersion func(major, minor uint32, params *ucpParams, config ucpConfig, ctx *ucpContext) Status
	// void ucp_cleanup(ucp_context_h context_p);
	ucpCleanup func(ctx ucpContext)
	// ucs_status_t ucp_worker_create(ucp_context_h context, const ucp_worker_params_t *params,
	//                                ucp_worker_h *worker_p);
	ucpWorkerCreate func(ctx ucpContext, params *ucpWorkerParams, w *ucpWorker) Status
	// void ucp_worker_destroy(ucp_worker_h worker);
	ucpWorkerDestroy func(w ucpWorker)
	// ucs_status_t ucp_worker_get_address(ucp_worker_h worker, ucp_address_t **address_p,
	//                                     size_t *address_length_p);
	ucpWorkerGetAddress func(w ucpWorker, addr **byte, n *uint64) Status
	// void ucp_worker_release_address(ucp_worker_h worker, ucp_address_t *address);
	ucpWorkerReleaseAddress func(w ucpWorker, addr *byte)
	// unsigned ucp_worker_progress(ucp_worker_h worker);
	ucpWorkerProgress func(w ucpWorker) uint32
	// ucs_status_t ucp_worker_fence(ucp_worker_h worker);
	ucpWorkerFence func(w ucpWorker) Status
	// ucs_status_ptr_t ucp_worker_flush_nbx(ucp_worker_h worker, const ucp_request_param_t *param);
	ucpWorkerFlushNbx func(w ucpWorker, param *ucpRequestParam) uintptr
	// ucs_status_t ucp_worker_get_efd(ucp_worker_h worker, int *fd);
	ucpWorkerGetEfd func(w ucpWorker, fd *int32) Status
	// ucs_status_t ucp_worker_arm(ucp_worker_h worker);
	ucpWorkerArm func(w ucpWorker) Status
	// ucs_status_t ucp_worker_signal(ucp_worker_h worker);
	ucpWorkerSignal func(w ucpWorker) Status
	// ucs_status_t ucp_ep_create(ucp_worker_h worker, const ucp_ep_params_t *params, ucp_ep_h *ep_p);
	ucpEPCreate func(w ucpWorker, params *ucpEPParams, ep *ucpEP) Status
	// ucs_status_ptr_t ucp_ep_close_nbx(ucp_ep_h ep, const ucp_request_param_t *param);
	ucpEPCloseNbx func(ep ucpEP, param *ucpRequestParam) uintptr
	// ucs_status_ptr_t ucp_ep_flush_nbx(ucp_ep_h ep, const ucp_request_param_t *param);
	ucpEPFlushNbx func(ep ucpEP, param *ucpRequestParam) uintptr
	// ucs_status_t ucp_mem_map(ucp_context_h context, const ucp_mem_map_params_t *params, ucp_mem_h *memh_p);
	ucpMemMap func(ctx ucpContext, params *ucpMemMapParams, memh *ucpMem) Status
	// ucs_status_t ucp_mem_unmap(ucp_context_h context, ucp_mem_h memh);
	ucpMemUnmap func(ctx ucpContext, memh ucpMem) Status
	// ucs_status_t ucp_rkey_pack(ucp_context_h context, ucp_mem_h memh, void **rkey_buffer_p, size_t *size_p);
	ucpRkeyPack func(ctx ucpContext, memh ucpMem, buf **byte, n *uint64) Status
	// void ucp_rkey_buffer_release(void *rkey_buffer);
	ucpRkeyBufferRelease func(buf *byte)
	// ucs_status_t ucp_ep_rkey_unpack(ucp_ep_h ep, const void *rkey_buffer, ucp_rkey_h *rkey_p);
	ucpEPRkeyUnpack func(ep ucpEP, buf unsafe.Pointer, rkey *ucpRkey) Status
	// void ucp_rkey_destroy(ucp_rkey_h rkey);
	ucpRkeyDestroy func(rkey ucpRkey)
	// ucs_status_ptr_t ucp_put_nbx(ucp_ep_h ep, const void *buffer, size_t count, uint64_t remote_addr,
	//                              ucp_rkey_h rkey, const ucp_request_param_t *param);
	ucpPutNbx func(ep ucpEP, buf unsafe.Pointer, count uint64, raddr uint64, rkey ucpRkey, param *ucpRequestParam) uintptr
	// ucs_status_ptr_t ucp_get_nbx(ucp_ep_h ep, void *buffer, size_t count, uint64_t remote_addr,
	//                              ucp_rkey_h rkey, const ucp_request_param_t *param);
	ucpGetNbx func(ep ucpEP, buf unsafe.Pointer, count uint64, raddr uint64, rkey ucpRkey, param *ucpRequestParam) uintptr
	// ucs_status_ptr_t ucp_atomic_op_nbx(ucp_ep_h ep, ucp_atomic_op_t opcode, const void *buffer,
	//                                    size_t count, uint64_t remote_addr, ucp_rkey_h rkey,
	//                                    const ucp_request_param_t *param);
	ucpAtomicOpNbx func(ep ucpEP, op uint32, buf unsafe.Pointer, count uint64, raddr uint64, rkey ucpRkey, param *ucpRequestParam) uintptr
	// ucs_status_t ucp_request_check_status(void *request);
	ucpRequestCheckStatus func(req uintptr) Status
	// void ucp_request_free(void *request);
	ucpRequestFree func(req uintptr)
	// void ucp_request_cancel(ucp_worker_h worker, void *request);
	ucpRequestCancel func(w ucpWorker, req uintptr)
	// const char *ucs_status_string(ucs_status_t status);
	ucsStatusString func(s Status) *byte
}

// symbols pairs each binding with its entry point, every one required.
func symbols() []dl.Sym {
	l := &lib
	return []dl.Sym{
		{Name: "ucp_get_version", Fn: &l.ucpGetVersion},
		{Name: "ucp_config_read", Fn: &l.ucpConfigRead},
		{Name: "ucp_config_release", Fn: &l.ucpConfigRelease},
		{Name: "ucp_init_version", Fn: &l.ucpInitVersion},
		{Name: "ucp_cleanup", Fn: &l.ucpCleanup},
		{Name: "ucp_worker_create", Fn: &l.ucpWorkerCreate},
		{Name: "ucp_worker_destroy", Fn: &l.ucpWorkerDestroy},
		{Name: "ucp_worker_get_address", Fn: &l.ucpWorkerGetAddress},
		{Name: "ucp_worker_release_address", Fn: &l.ucpWorkerReleaseAddress},
		{Name: "ucp_worker_progress", Fn: &l.ucpWorkerProgress},
		{Name: "ucp_worker_fence", Fn: &l.ucpWorkerFence},
		{Name: "ucp_worker_flush_nbx", Fn: &l.ucpWorkerFlushNbx},
		{Name: "ucp_worker_get_efd", Fn: &l.ucpWorkerGetEfd},
		{Name: "ucp_worker_arm", Fn: &l.ucpWorkerArm},
		{Name: "ucp_worker_signal", Fn: &l.ucpWorkerSignal},
		{Name: "ucp_ep_create", Fn: &l.ucpEPCreate},
		{Name: "ucp_ep_close_nbx", Fn: &l.ucpEPCloseNbx},
		{Name: "ucp_ep_flush_nbx", Fn: &l.ucpEPFlushNbx},
		{Name: "ucp_mem_map", Fn: &l.ucpMemMap},
		{Name: "ucp_mem_unmap", Fn: &l.ucpMemUnmap},
		{Name: "ucp_rkey_pack", Fn: &l.ucpRkeyPack},
		{Name: "ucp_rkey_buffer_release", Fn: &l.ucpRkeyBufferRelease},
		{Name: "ucp_ep_rkey_unpack", Fn: &l.ucpEPRkeyUnpack},
		{Name: "ucp_rkey_destroy", Fn: &l.ucpRkeyDestroy},
		{Name: "ucp_put_nbx", Fn: &l.ucpPutNbx},
		{Name: "ucp_get_nbx", Fn: &l.ucpGetNbx},
		{Name: "ucp_atomic_op_nbx", Fn: &l.ucpAtomicOpNbx},
		{Name: "ucp_request_check_status", Fn: &l.ucpRequestCheckStatus},
		{Name: "ucp_request_free", Fn: &l.ucpRequestFree},
		{Name: "ucp_request_cancel", Fn: &l.ucpRequestCancel},
		{Name: "ucs_status_string", Fn: &l.ucsStatusString},
	}
}

var (
	loadOnce sync.Once
	loadErr  error
	loaded   bool // every binding is set
	version  [3]uint32
	// libraryName is what load dlopens; tests point it at a missing file.
	libraryName = Library
)

// load dlopens libucp once and binds every entry point.
//
// UCX installs handlers for SIGSEGV, SIGBUS, SIGILL and SIGFPE when it loads (UCX_ERROR_SIGNALS),
// replacing the Go runtime's, which turns nil dereferences into panics. Unless the user set
// UCX_ERROR_SIGNALS, it is set empty before the library's constructors run.
func load() error {
	loadOnce.Do(func() {
		if _, set := os.LookupEnv("UCX_ERROR_SIGNALS"); !set {
			os.Setenv("UCX_ERROR_SIGNALS", "")
		}
		h, err := dl.Open(libraryName)
		if err != nil {
			loadErr = fmt.Errorf("%w: dlopen: %v", ErrNoLibrary, err)
			return
		}
		if err := h.Bind(symbols()...); err != nil {
			loadErr = fmt.Errorf("%w: %v (UCX older than %d.%d?)", ErrNoLibrary, err, ucpAPIMajor, ucpAPIMinor)
			return
		}
		loaded = true
		lib.ucpGetVersion(&version[0], &version[1], &version[2])
		if version[0] < ucpAPIMajor || version[0] == ucpAPIMajor && version[1] < ucpAPIMinor {
			loadErr = fmt.Errorf("%w: %s is UCX %d.%d.%d; Roxamen needs %d.%d or newer", ErrNoLibrary, libraryName, version[0], version[1], version[2], ucpAPIMajor, ucpAPIMinor)
		}
	})
	return loadErr
}

// Probe loads libucp.so.0 and reports whether the UCX transport can be used: nil, or an error
// that matches ErrNoLibrary and says why (for roxrun info and ROX_TRANSPORT=auto).
func Probe() error { return load() }

// Version returns the loaded UCX library's version ("1.13.1").
func Version() (string, error) {
	if err := load(); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d.%d.%d", version[0], version[1], version[2]), nil
}
