package ucx

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
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

func symbols() []struct {
	name string
	fn   any
} {
	l := &lib
	return []struct {
		name string
		fn   any
	}{
		{"ucp_get_version", &l.ucpGetVersion},
		{"ucp_config_read", &l.ucpConfigRead},
		{"ucp_config_release", &l.ucpConfigRelease},
		{"ucp_init_version", &l.ucpInitVersion},
		{"ucp_cleanup", &l.ucpCleanup},
		{"ucp_worker_create", &l.ucpWorkerCreate},
		{"ucp_worker_destroy", &l.ucpWorkerDestroy},
		{"ucp_worker_get_address", &l.ucpWorkerGetAddress},
		{"ucp_worker_release_address", &l.ucpWorkerReleaseAddress},
		{"ucp_worker_progress", &l.ucpWorkerProgress},
		{"ucp_worker_fence", &l.ucpWorkerFence},
		{"ucp_worker_flush_nbx", &l.ucpWorkerFlushNbx},
		{"ucp_worker_get_efd", &l.ucpWorkerGetEfd},
		{"ucp_worker_arm", &l.ucpWorkerArm},
		{"ucp_worker_signal", &l.ucpWorkerSignal},
		{"ucp_ep_create", &l.ucpEPCreate},
		{"ucp_ep_close_nbx", &l.ucpEPCloseNbx},
		{"ucp_ep_flush_nbx", &l.ucpEPFlushNbx},
		{"ucp_mem_map", &l.ucpMemMap},
		{"ucp_mem_unmap", &l.ucpMemUnmap},
		{"ucp_rkey_pack", &l.ucpRkeyPack},
		{"ucp_rkey_buffer_release", &l.ucpRkeyBufferRelease},
		{"ucp_ep_rkey_unpack", &l.ucpEPRkeyUnpack},
		{"ucp_rkey_destroy", &l.ucpRkeyDestroy},
		{"ucp_put_nbx", &l.ucpPutNbx},
		{"ucp_get_nbx", &l.ucpGetNbx},
		{"ucp_atomic_op_nbx", &l.ucpAtomicOpNbx},
		{"ucp_request_check_status", &l.ucpRequestCheckStatus},
		{"ucp_request_free", &l.ucpRequestFree},
		{"ucp_request_cancel", &l.ucpRequestCancel},
		{"ucs_status_string", &l.ucsStatusString},
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
		h, err := purego.Dlopen(libraryName, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			loadErr = fmt.Errorf("%w: dlopen: %v", ErrNoLibrary, err)
			return
		}
		for _, s := range symbols() {
			p, err := purego.Dlsym(h, s.name)
			if err != nil || p == 0 {
				loadErr = fmt.Errorf("%w: %s has no %s (UCX older than %d.%d?): %v", ErrNoLibrary, libraryName, s.name, ucpAPIMajor, ucpAPIMinor, err)
				return
			}
			purego.RegisterFunc(s.fn, p)
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

// cstring copies a NUL-terminated C string.
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

// cbytes copies n bytes of C memory.
func cbytes(p *byte, n uint64) []byte {
	if p == nil || n == 0 {
		return nil
	}
	return append([]byte(nil), unsafe.Slice(p, n)...)
}
