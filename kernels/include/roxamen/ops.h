/* Operation codes shared by the device library and the proxy: nic.Op, nic.AMOOp, nic.SignalOp
 * (nic/nic.go). TestRingParity checks that the numbers agree. */
#ifndef ROXAMEN_OPS_H
#define ROXAMEN_OPS_H

/* nic.Op */
#define ROXSHMEM_OP_NOP 0u
#define ROXSHMEM_OP_PUT 1u
#define ROXSHMEM_OP_GET 2u
#define ROXSHMEM_OP_PUT_SIGNAL 3u
#define ROXSHMEM_OP_AMO 4u
#define ROXSHMEM_OP_FENCE 5u
#define ROXSHMEM_OP_QUIET 6u

/* nic.AMOOp: the low 8 bits of flags for ROXSHMEM_OP_AMO */
#define ROXSHMEM_AMO_FETCH 0u
#define ROXSHMEM_AMO_SET 1u
#define ROXSHMEM_AMO_SWAP 2u
#define ROXSHMEM_AMO_COMPARE_SWAP 3u
#define ROXSHMEM_AMO_FETCH_ADD 4u
#define ROXSHMEM_AMO_FETCH_AND 5u
#define ROXSHMEM_AMO_FETCH_OR 6u
#define ROXSHMEM_AMO_FETCH_XOR 7u

/* nic.SignalOp: the low 8 bits of flags for ROXSHMEM_OP_PUT_SIGNAL (also the OpenSHMEM sig_op) */
#define ROXSHMEM_SIGNAL_SET 0
#define ROXSHMEM_SIGNAL_ADD 1

#endif /* ROXAMEN_OPS_H */
