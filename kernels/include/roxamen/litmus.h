/* Instruction encoding of the GPU litmus runner (kernels/src/runtime.hip, roxk_litmus). Mirrored in
 * Go by kernels.LitmusInsn; TestLitmusParity compares the layouts. */
#ifndef ROXAMEN_LITMUS_H
#define ROXAMEN_LITMUS_H

#include "types.h"

#define ROXK_L_NOP 0       /* value > 0: spin a pseudo-random count in [0, value], seeded by aux */
#define ROXK_L_ST 1       /* st var value: plain store to this PE's copy */
#define ROXK_L_LD 2       /* ld reg var: plain load of this PE's copy */
#define ROXK_L_PUT 3      /* put var@pe value */
#define ROXK_L_PUT_NBI 4
#define ROXK_L_GET 5      /* get reg var@pe */
#define ROXK_L_GET_NBI 6  /* value lands in reg at the next quiet/end of program */
#define ROXK_L_FADD 7     /* fadd reg var@pe value */
#define ROXK_L_SWAP 8     /* swap reg var@pe value */
#define ROXK_L_CSWAP 9    /* cswap reg var@pe aux(compare) value(new) */
#define ROXK_L_FETCH 10   /* fetch reg var@pe */
#define ROXK_L_ADD 11     /* add var@pe value */
#define ROXK_L_SET 12     /* set var@pe value */
#define ROXK_L_PUTSIG 13  /* putsig var@pe value, signal aux(heap offset)@pe sub(op) sigval(reg field) */
#define ROXK_L_WAIT 14    /* wait var sub(cmp) value */
#define ROXK_L_FENCE 15
#define ROXK_L_QUIET 16
#define ROXK_L_BARRIER 17
#define ROXK_L_INC 18        /* inc var@pe */
#define ROXK_L_FINC 19       /* finc reg var@pe */
#define ROXK_L_AND 20        /* and var@pe value */
#define ROXK_L_OR 21
#define ROXK_L_XOR 22
#define ROXK_L_FAND 23       /* fand reg var@pe value */
#define ROXK_L_FOR 24
#define ROXK_L_FXOR 25
#define ROXK_L_SIGFETCH 26   /* sigfetch reg var: signal_fetch of this PE's word */
#define ROXK_L_PTR_ST 27     /* st var@pe value through roxshmem_ptr */
#define ROXK_L_PTR_LD 28     /* ld reg var@pe through roxshmem_ptr */
#define ROXK_L_PUTSIG_NBI 29 /* putsig_nbi: fields as PUTSIG */
#define ROXK_L_GET_DST 30    /* get into this PE's word aux (heap offset) from var@pe */
#define ROXK_L_GET_NBI_DST 31
#define ROXK_L_PUT_BUF 32    /* put_nbi var@pe from this PE's word aux (heap offset) */
#define ROXK_L_SYNC 33       /* sync_all of the whole block, as BARRIER */
#define ROXK_L_WARM 34       /* warm var@pe aux(seed): before the column, with probability 1/2 per copy and
			      * iteration, an unrecorded plain load of the word (own, or through roxshmem_ptr)
			      * that leaves its line in the SM's L1 (MODEL.md §8) */

#define ROXK_LITMUS_MAX_REGS 16

typedef struct roxk_insn {
	uint32_t op;    /* ROXK_L_* */
	int32_t pe;     /* target PE of remote operations */
	uint64_t var;   /* symmetric-heap offset of the variable */
	uint64_t value; /* stored, put or AMO operand; wait value; cswap new value */
	uint64_t aux;   /* cswap compare value; putsig signal heap offset */
	uint32_t reg;   /* destination register; putsig: signal value */
	uint32_t sub;   /* wait: ROXSHMEM_CMP_*; putsig: ROXSHMEM_SIGNAL_* */
} roxk_insn_t;

ROXA_STATIC_ASSERT(sizeof(roxk_insn_t) == 40, insn_size);

#endif /* ROXAMEN_LITMUS_H */
