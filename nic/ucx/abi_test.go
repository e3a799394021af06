package ucx

import (
	"testing"
	"unsafe"

	"github.com/roxamen/roxamen/internal/dl/abitest"
)

// abiProgram prints, for every struct field and constant this package mirrors, a line
// "name value" computed by the C compiler from the installed UCX headers.
const abiProgram = `#include <stdio.h>
#include <stddef.h>
#include <ucp/api/ucp.h>
#define S(t) printf("sizeof(%s) %zu\n", #t, sizeof(t))
#define O(t, f) printf("%s.%s %zu\n", #t, #f, offsetof(t, f))
#define C(c) printf("%s %lld\n", #c, (long long)(c))
int main(void) {
	S(ucp_params_t); O(ucp_params_t, field_mask); O(ucp_params_t, features); O(ucp_params_t, request_size);
	O(ucp_params_t, request_init); O(ucp_params_t, request_cleanup); O(ucp_params_t, tag_sender_mask);
	O(ucp_params_t, mt_workers_shared); O(ucp_params_t, estimated_num_eps); O(ucp_params_t, estimated_num_ppn);
	O(ucp_params_t, name);
	S(ucp_worker_params_t); O(ucp_worker_params_t, field_mask); O(ucp_worker_params_t, thread_mode);
	O(ucp_worker_params_t, cpu_mask); O(ucp_worker_params_t, events); O(ucp_worker_params_t, user_data);
	O(ucp_worker_params_t, event_fd); O(ucp_worker_params_t, flags); O(ucp_worker_params_t, name);
	O(ucp_worker_params_t, am_alignment); O(ucp_worker_params_t, client_id);
	S(ucp_mem_map_params_t); O(ucp_mem_map_params_t, field_mask); O(ucp_mem_map_params_t, address);
	O(ucp_mem_map_params_t, length); O(ucp_mem_map_params_t, flags); O(ucp_mem_map_params_t, prot);
	O(ucp_mem_map_params_t, memory_type);
	S(ucp_ep_params_t); O(ucp_ep_params_t, field_mask); O(ucp_ep_params_t, address); O(ucp_ep_params_t, err_mode);
	O(ucp_ep_params_t, err_handler); O(ucp_ep_params_t, err_handler.cb); O(ucp_ep_params_t, err_handler.arg);
	O(ucp_ep_params_t, user_data); O(ucp_ep_params_t, flags); O(ucp_ep_params_t, sockaddr);
	O(ucp_ep_params_t, conn_request); O(ucp_ep_params_t, name); O(ucp_ep_params_t, local_sockaddr);
	S(ucp_request_param_t); O(ucp_request_param_t, op_attr_mask); O(ucp_request_param_t, flags);
	O(ucp_request_param_t, request); O(ucp_request_param_t, cb); O(ucp_request_param_t, datatype);
	O(ucp_request_param_t, user_data); O(ucp_request_param_t, reply_buffer); O(ucp_request_param_t, memory_type);
	O(ucp_request_param_t, recv_info); O(ucp_request_param_t, memh);
	S(ucs_status_t); S(ucs_status_ptr_t); S(ucp_datatype_t); S(ucs_thread_mode_t); S(ucs_memory_type_t);
	S(ucp_atomic_op_t); S(ucp_err_handling_mode_t); S(ucs_cpu_set_t); S(ucs_sock_addr_t);
	C(UCP_API_MAJOR); C(UCP_API_MINOR);
	C(UCP_PARAM_FIELD_FEATURES); C(UCP_PARAM_FIELD_NAME);
	C(UCP_FEATURE_RMA); C(UCP_FEATURE_AMO32); C(UCP_FEATURE_AMO64); C(UCP_FEATURE_WAKEUP);
	C(UCP_WORKER_PARAM_FIELD_THREAD_MODE); C(UCS_THREAD_MODE_SERIALIZED);
	C(UCP_MEM_MAP_PARAM_FIELD_ADDRESS); C(UCP_MEM_MAP_PARAM_FIELD_LENGTH); C(UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE);
	C(UCS_MEMORY_TYPE_HOST);
	C(UCP_EP_PARAM_FIELD_REMOTE_ADDRESS); C(UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE); C(UCP_EP_PARAM_FIELD_ERR_HANDLER);
	C(UCP_ERR_HANDLING_MODE_PEER); C(UCP_EP_CLOSE_FLAG_FORCE);
	C(UCP_OP_ATTR_FIELD_DATATYPE); C(UCP_OP_ATTR_FIELD_FLAGS); C(UCP_OP_ATTR_FIELD_REPLY_BUFFER);
	C(UCP_OP_ATTR_FIELD_MEMORY_TYPE);
	C(UCP_ATOMIC_OP_ADD); C(UCP_ATOMIC_OP_SWAP); C(UCP_ATOMIC_OP_CSWAP); C(UCP_ATOMIC_OP_AND);
	C(UCP_ATOMIC_OP_OR); C(UCP_ATOMIC_OP_XOR);
	C(UCP_DATATYPE_SHIFT); C(ucp_dt_make_contig(4)); C(ucp_dt_make_contig(8));
	C(UCS_OK); C(UCS_INPROGRESS); C(UCS_ERR_NO_MESSAGE); C(UCS_ERR_IO_ERROR); C(UCS_ERR_INVALID_PARAM);
	C(UCS_ERR_UNREACHABLE); C(UCS_ERR_BUSY); C(UCS_ERR_CANCELED); C(UCS_ERR_TIMED_OUT);
	C(UCS_ERR_CONNECTION_RESET); C(UCS_ERR_NOT_CONNECTED); C(UCS_ERR_FIRST_LINK_FAILURE);
	C(UCS_ERR_LAST_LINK_FAILURE); C(UCS_ERR_FIRST_ENDPOINT_FAILURE); C(UCS_ERR_ENDPOINT_TIMEOUT);
	C(UCS_ERR_LAST_ENDPOINT_FAILURE); C(UCS_ERR_LAST);
	return 0;
}
`

// goABI is the same facts from the Go mirrors.
func goABI() map[string]int64 {
	var (
		p  ucpParams
		w  ucpWorkerParams
		m  ucpMemMapParams
		e  ucpEPParams
		rq ucpRequestParam
	)
	return map[string]int64{
		"sizeof(ucp_params_t)":                 int64(unsafe.Sizeof(p)),
		"ucp_params_t.field_mask":              int64(unsafe.Offsetof(p.fieldMask)),
		"ucp_params_t.features":                int64(unsafe.Offsetof(p.features)),
		"ucp_params_t.request_size":            int64(unsafe.Offsetof(p.requestSize)),
		"ucp_params_t.request_init":            int64(unsafe.Offsetof(p.requestInit)),
		"ucp_params_t.request_cleanup":         int64(unsafe.Offsetof(p.requestCleanup)),
		"ucp_params_t.tag_sender_mask":         int64(unsafe.Offsetof(p.tagSenderMask)),
		"ucp_params_t.mt_workers_shared":       int64(unsafe.Offsetof(p.mtWorkersShared)),
		"ucp_params_t.estimated_num_eps":       int64(unsafe.Offsetof(p.estimatedNumEPs)),
		"ucp_params_t.estimated_num_ppn":       int64(unsafe.Offsetof(p.estimatedNumPPN)),
		"ucp_params_t.name":                    int64(unsafe.Offsetof(p.name)),
		"sizeof(ucp_worker_params_t)":          int64(unsafe.Sizeof(w)),
		"ucp_worker_params_t.field_mask":       int64(unsafe.Offsetof(w.fieldMask)),
		"ucp_worker_params_t.thread_mode":      int64(unsafe.Offsetof(w.threadMode)),
		"ucp_worker_params_t.cpu_mask":         int64(unsafe.Offsetof(w.cpuMask)),
		"ucp_worker_params_t.events":           int64(unsafe.Offsetof(w.events)),
		"ucp_worker_params_t.user_data":        int64(unsafe.Offsetof(w.userData)),
		"ucp_worker_params_t.event_fd":         int64(unsafe.Offsetof(w.eventFD)),
		"ucp_worker_params_t.flags":            int64(unsafe.Offsetof(w.flags)),
		"ucp_worker_params_t.name":             int64(unsafe.Offsetof(w.name)),
		"ucp_worker_params_t.am_alignment":     int64(unsafe.Offsetof(w.amAlignment)),
		"ucp_worker_params_t.client_id":        int64(unsafe.Offsetof(w.clientID)),
		"sizeof(ucp_mem_map_params_t)":         int64(unsafe.Sizeof(m)),
		"ucp_mem_map_params_t.field_mask":      int64(unsafe.Offsetof(m.fieldMask)),
		"ucp_mem_map_params_t.address":         int64(unsafe.Offsetof(m.address)),
		"ucp_mem_map_params_t.length":          int64(unsafe.Offsetof(m.length)),
		"ucp_mem_map_params_t.flags":           int64(unsafe.Offsetof(m.flags)),
		"ucp_mem_map_params_t.prot":            int64(unsafe.Offsetof(m.prot)),
		"ucp_mem_map_params_t.memory_type":     int64(unsafe.Offsetof(m.memoryType)),
		"sizeof(ucp_ep_params_t)":              int64(unsafe.Sizeof(e)),
		"ucp_ep_params_t.field_mask":           int64(unsafe.Offsetof(e.fieldMask)),
		"ucp_ep_params_t.address":              int64(unsafe.Offsetof(e.address)),
		"ucp_ep_params_t.err_mode":             int64(unsafe.Offsetof(e.errMode)),
		"ucp_ep_params_t.err_handler":          int64(unsafe.Offsetof(e.errHandler)),
		"ucp_ep_params_t.err_handler.cb":       int64(unsafe.Offsetof(e.errHandler)),
		"ucp_ep_params_t.err_handler.arg":      int64(unsafe.Offsetof(e.errHandler) + unsafe.Sizeof(uintptr(0))),
		"ucp_ep_params_t.user_data":            int64(unsafe.Offsetof(e.userData)),
		"ucp_ep_params_t.flags":                int64(unsafe.Offsetof(e.flags)),
		"ucp_ep_params_t.sockaddr":             int64(unsafe.Offsetof(e.sockaddr)),
		"ucp_ep_params_t.conn_request":         int64(unsafe.Offsetof(e.connRequest)),
		"ucp_ep_params_t.name":                 int64(unsafe.Offsetof(e.name)),
		"ucp_ep_params_t.local_sockaddr":       int64(unsafe.Offsetof(e.localSockaddr)),
		"sizeof(ucp_request_param_t)":          int64(unsafe.Sizeof(rq)),
		"ucp_request_param_t.op_attr_mask":     int64(unsafe.Offsetof(rq.opAttrMask)),
		"ucp_request_param_t.flags":            int64(unsafe.Offsetof(rq.flags)),
		"ucp_request_param_t.request":          int64(unsafe.Offsetof(rq.request)),
		"ucp_request_param_t.cb":               int64(unsafe.Offsetof(rq.cb)),
		"ucp_request_param_t.datatype":         int64(unsafe.Offsetof(rq.datatype)),
		"ucp_request_param_t.user_data":        int64(unsafe.Offsetof(rq.userData)),
		"ucp_request_param_t.reply_buffer":     int64(unsafe.Offsetof(rq.replyBuffer)),
		"ucp_request_param_t.memory_type":      int64(unsafe.Offsetof(rq.memoryType)),
		"ucp_request_param_t.recv_info":        int64(unsafe.Offsetof(rq.recvInfo)),
		"ucp_request_param_t.memh":             int64(unsafe.Offsetof(rq.memh)),
		"sizeof(ucs_status_t)":                 int64(unsafe.Sizeof(Status(0))),
		"sizeof(ucs_status_ptr_t)":             int64(unsafe.Sizeof(uintptr(0))),
		"sizeof(ucp_datatype_t)":               int64(unsafe.Sizeof(rq.datatype)),
		"sizeof(ucs_thread_mode_t)":            int64(unsafe.Sizeof(w.threadMode)),
		"sizeof(ucs_memory_type_t)":            int64(unsafe.Sizeof(m.memoryType)),
		"sizeof(ucp_atomic_op_t)":              4, // the uint32 opcode argument of ucp_atomic_op_nbx
		"sizeof(ucp_err_handling_mode_t)":      int64(unsafe.Sizeof(e.errMode)),
		"sizeof(ucs_cpu_set_t)":                int64(unsafe.Sizeof(w.cpuMask)),
		"sizeof(ucs_sock_addr_t)":              int64(unsafe.Sizeof(e.sockaddr)),
		"UCP_API_MAJOR":                        ucpAPIMajor,
		"UCP_API_MINOR":                        ucpAPIMinor,
		"UCP_PARAM_FIELD_FEATURES":             ucpParamFieldFeatures,
		"UCP_PARAM_FIELD_NAME":                 ucpParamFieldName,
		"UCP_FEATURE_RMA":                      ucpFeatureRMA,
		"UCP_FEATURE_AMO32":                    ucpFeatureAMO32,
		"UCP_FEATURE_AMO64":                    ucpFeatureAMO64,
		"UCP_FEATURE_WAKEUP":                   ucpFeatureWakeup,
		"UCP_WORKER_PARAM_FIELD_THREAD_MODE":   ucpWorkerParamFieldThreadMode,
		"UCS_THREAD_MODE_SERIALIZED":           ucsThreadModeSerialized,
		"UCP_MEM_MAP_PARAM_FIELD_ADDRESS":      ucpMemMapParamFieldAddress,
		"UCP_MEM_MAP_PARAM_FIELD_LENGTH":       ucpMemMapParamFieldLength,
		"UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE":  ucpMemMapParamFieldMemoryType,
		"UCS_MEMORY_TYPE_HOST":                 ucsMemoryTypeHost,
		"UCP_EP_PARAM_FIELD_REMOTE_ADDRESS":    ucpEPParamFieldRemoteAddress,
		"UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE": ucpEPParamFieldErrHandlingMode,
		"UCP_EP_PARAM_FIELD_ERR_HANDLER":       ucpEPParamFieldErrHandler,
		"UCP_ERR_HANDLING_MODE_PEER":           ucpErrHandlingModePeer,
		"UCP_EP_CLOSE_FLAG_FORCE":              ucpEPCloseFlagForce,
		"UCP_OP_ATTR_FIELD_DATATYPE":           ucpOpAttrFieldDatatype,
		"UCP_OP_ATTR_FIELD_FLAGS":              ucpOpAttrFieldFlags,
		"UCP_OP_ATTR_FIELD_REPLY_BUFFER":       ucpOpAttrFieldReplyBuffer,
		"UCP_OP_ATTR_FIELD_MEMORY_TYPE":        ucpOpAttrFieldMemoryType,
		"UCP_ATOMIC_OP_ADD":                    ucpAtomicOpAdd,
		"UCP_ATOMIC_OP_SWAP":                   ucpAtomicOpSwap,
		"UCP_ATOMIC_OP_CSWAP":                  ucpAtomicOpCSwap,
		"UCP_ATOMIC_OP_AND":                    ucpAtomicOpAnd,
		"UCP_ATOMIC_OP_OR":                     ucpAtomicOpOr,
		"UCP_ATOMIC_OP_XOR":                    ucpAtomicOpXor,
		"UCP_DATATYPE_SHIFT":                   ucpDatatypeShift,
		"ucp_dt_make_contig(4)":                int64(dtContig(4)),
		"ucp_dt_make_contig(8)":                int64(dtContig(8)),
		"UCS_OK":                               int64(StatusOK),
		"UCS_INPROGRESS":                       int64(StatusInProgress),
		"UCS_ERR_NO_MESSAGE":                   int64(ErrNoMessage),
		"UCS_ERR_IO_ERROR":                     int64(ErrIOError),
		"UCS_ERR_INVALID_PARAM":                int64(ErrInvalidParam),
		"UCS_ERR_UNREACHABLE":                  int64(ErrUnreachable),
		"UCS_ERR_BUSY":                         int64(ErrBusy),
		"UCS_ERR_CANCELED":                     int64(ErrCanceled),
		"UCS_ERR_TIMED_OUT":                    int64(ErrTimedOut),
		"UCS_ERR_CONNECTION_RESET":             int64(ErrConnectionReset),
		"UCS_ERR_NOT_CONNECTED":                int64(ErrNotConnected),
		"UCS_ERR_FIRST_LINK_FAILURE":           int64(ErrFirstLinkFailure),
		"UCS_ERR_LAST_LINK_FAILURE":            int64(ErrLastLinkFailure),
		"UCS_ERR_FIRST_ENDPOINT_FAILURE":       int64(ErrFirstEndpointFailure),
		"UCS_ERR_ENDPOINT_TIMEOUT":             int64(ErrEndpointTimeout),
		"UCS_ERR_LAST_ENDPOINT_FAILURE":        int64(ErrLastEndpointFailure),
		"UCS_ERR_LAST":                         int64(errLast),
	}
}

// TestABI compiles abiProgram against the installed UCX headers (Debian libucx-dev) and checks
// that every size, offset and constant agrees with the Go mirrors. It skips, saying why, only
// when there is no C compiler or no headers.
func TestABI(t *testing.T) {
	abitest.Check(t, abitest.Program{Source: abiProgram, Header: "ucp/api/ucp.h",
		Install: "Debian: apt-get install libucx-dev"}, goABI(), nil)
}
