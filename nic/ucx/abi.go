package ucx

import "unsafe"

// The structs below mirror Debian libucx-dev 1.13's headers on LP64 (x86_64, arm64): field by
// field, with explicit padding. TestABI compiles a C program against the installed headers and
// checks every size and offset used here. Only fields named in a struct's field_mask are read by
// UCX, and later UCX versions only append fields, so these layouts hold for UCX >= 1.13.

// ucpParams mirrors ucp_params_t (ucp/api/ucp.h: "typedef struct ucp_params").
type ucpParams struct {
	fieldMask       uint64  // uint64_t field_mask
	features        uint64  // uint64_t features
	requestSize     uint64  // size_t request_size
	requestInit     uintptr // ucp_request_init_callback_t request_init
	requestCleanup  uintptr // ucp_request_cleanup_callback_t request_cleanup
	tagSenderMask   uint64  // uint64_t tag_sender_mask
	mtWorkersShared int32   // int mt_workers_shared
	_               [4]byte
	estimatedNumEPs uint64 // size_t estimated_num_eps
	estimatedNumPPN uint64 // size_t estimated_num_ppn
	name            *byte  // const char *name
}

// ucpWorkerParams mirrors ucp_worker_params_t (ucp/api/ucp.h: "typedef struct ucp_worker_params").
type ucpWorkerParams struct {
	fieldMask   uint64 // uint64_t field_mask
	threadMode  uint32 // ucs_thread_mode_t thread_mode
	_           [4]byte
	cpuMask     [128]byte // ucs_cpu_set_t cpu_mask (ucs/sys/compiler_def.h: 1024 bits)
	events      uint32    // unsigned events
	_           [4]byte
	userData    uintptr // void *user_data
	eventFD     int32   // int event_fd
	_           [4]byte
	flags       uint64 // uint64_t flags
	name        *byte  // const char *name
	amAlignment uint64 // size_t am_alignment
	clientID    uint64 // uint64_t client_id
}

// ucpMemMapParams mirrors ucp_mem_map_params_t (ucp/api/ucp.h: "typedef struct ucp_mem_map_params").
type ucpMemMapParams struct {
	fieldMask  uint64         // uint64_t field_mask
	address    unsafe.Pointer // void *address
	length     uint64         // size_t length
	flags      uint32         // unsigned flags
	prot       uint32         // unsigned prot
	memoryType uint32         // ucs_memory_type_t memory_type
	_          [4]byte
}

// ucpEPParams mirrors ucp_ep_params_t (ucp/api/ucp_def.h: "typedef struct ucp_ep_params").
type ucpEPParams struct {
	fieldMask     uint64         // uint64_t field_mask
	address       unsafe.Pointer // const ucp_address_t *address
	errMode       uint32         // ucp_err_handling_mode_t err_mode
	_             [4]byte
	errHandler    [2]uintptr // ucp_err_handler_t err_handler { cb, arg }
	userData      uintptr    // void *user_data
	flags         uint32     // unsigned flags
	_             [4]byte
	sockaddr      [2]uint64 // ucs_sock_addr_t sockaddr { const struct sockaddr *addr; socklen_t addrlen; }
	connRequest   uintptr   // ucp_conn_request_h conn_request
	name          *byte     // const char *name
	localSockaddr [2]uint64 // ucs_sock_addr_t local_sockaddr
}

// ucpRequestParam mirrors ucp_request_param_t (ucp/api/ucp.h: "} ucp_request_param_t;").
type ucpRequestParam struct {
	opAttrMask  uint32         // uint32_t op_attr_mask
	flags       uint32         // uint32_t flags
	request     uintptr        // void *request
	cb          uintptr        // union { ucp_send_nbx_callback_t send; ... } cb
	datatype    uint64         // ucp_datatype_t datatype
	userData    uintptr        // void *user_data
	replyBuffer unsafe.Pointer // void *reply_buffer
	memoryType  uint32         // ucs_memory_type_t memory_type
	_           [4]byte
	recvInfo    uintptr // union { size_t *length; ucp_tag_recv_info_t *tag_info; } recv_info
	memh        uintptr // ucp_mem_h memh
}

// Constants from the same headers. TestABI checks each against the C value.
const (
	ucpAPIMajor = 1 // UCP_API_MAJOR (ucp/api/ucp_version.h)
	ucpAPIMinor = 13

	ucpParamFieldFeatures = 1 << 0 // UCP_PARAM_FIELD_FEATURES
	ucpParamFieldName     = 1 << 8 // UCP_PARAM_FIELD_NAME

	ucpFeatureRMA    = 1 << 1 // UCP_FEATURE_RMA
	ucpFeatureAMO32  = 1 << 2 // UCP_FEATURE_AMO32
	ucpFeatureAMO64  = 1 << 3 // UCP_FEATURE_AMO64
	ucpFeatureWakeup = 1 << 4 // UCP_FEATURE_WAKEUP

	ucpWorkerParamFieldThreadMode = 1 << 0 // UCP_WORKER_PARAM_FIELD_THREAD_MODE
	ucsThreadModeSerialized       = 1      // UCS_THREAD_MODE_SERIALIZED

	ucpMemMapParamFieldAddress    = 1 << 0 // UCP_MEM_MAP_PARAM_FIELD_ADDRESS
	ucpMemMapParamFieldLength     = 1 << 1 // UCP_MEM_MAP_PARAM_FIELD_LENGTH
	ucpMemMapParamFieldMemoryType = 1 << 4 // UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE
	ucsMemoryTypeHost             = 0      // UCS_MEMORY_TYPE_HOST

	ucpEPParamFieldRemoteAddress   = 1 << 0 // UCP_EP_PARAM_FIELD_REMOTE_ADDRESS
	ucpEPParamFieldErrHandlingMode = 1 << 1 // UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE
	ucpEPParamFieldErrHandler      = 1 << 2 // UCP_EP_PARAM_FIELD_ERR_HANDLER
	ucpErrHandlingModePeer         = 1      // UCP_ERR_HANDLING_MODE_PEER
	ucpEPCloseFlagForce            = 1 << 0 // UCP_EP_CLOSE_FLAG_FORCE

	ucpOpAttrFieldDatatype    = 1 << 3 // UCP_OP_ATTR_FIELD_DATATYPE
	ucpOpAttrFieldFlags       = 1 << 4 // UCP_OP_ATTR_FIELD_FLAGS
	ucpOpAttrFieldReplyBuffer = 1 << 5 // UCP_OP_ATTR_FIELD_REPLY_BUFFER
	ucpOpAttrFieldMemoryType  = 1 << 6 // UCP_OP_ATTR_FIELD_MEMORY_TYPE

	ucpAtomicOpAdd   = 0 // UCP_ATOMIC_OP_ADD
	ucpAtomicOpSwap  = 1 // UCP_ATOMIC_OP_SWAP
	ucpAtomicOpCSwap = 2 // UCP_ATOMIC_OP_CSWAP
	ucpAtomicOpAnd   = 3 // UCP_ATOMIC_OP_AND
	ucpAtomicOpOr    = 4 // UCP_ATOMIC_OP_OR
	ucpAtomicOpXor   = 5 // UCP_ATOMIC_OP_XOR

	ucpDatatypeShift = 3 // UCP_DATATYPE_SHIFT; ucp_dt_make_contig(n) is n << 3 | UCP_DATATYPE_CONTIG (0)
)

// dtContig is ucp_dt_make_contig(size) (ucp/api/ucp.h).
func dtContig(size int) uint64 { return uint64(size) << ucpDatatypeShift }
