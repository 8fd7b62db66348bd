/* Gated DeltaNet's CPU kernels, shared by cpu_gdn.c (the token-by-token recurrence) and cpu_gdn_chunk.c (its
 * chunked form). Semantics in src/tensor/backend.h (vc_gdn_desc). */
#ifndef VC_CPU_GDN_H
#define VC_CPU_GDN_H
#include "cpu.h"

typedef struct vc_gdn_ctx {
    const vc_gdn_desc *d;
    float *o, *saved, *dq, *dk, *dv, *dg, *dbeta;
    const float *q, *k, *v, *g, *beta, *dout, *csaved;
    const int64_t *base; /* [n_seq]: each sequence's first kept state */
    /* shared starts (d->from): tap [n_tap, nv, dk, dv] the tapped states (forward) or their gradients (backward),
     * tap_of [n_seq] each sequence's slot in tap (-1: not tapped); dinit [n_seq, nv, dk, dv] the backward's
     * gradients of the starting states of the sequences with from >= 0; seqs: the current pass's sequences (NULL:
     * all) */
    float *tap, *dinit;
    const int *tap_of, *seqs;
    int fail;
} vc_gdn_ctx;

/* sums over a row in a fixed order: 8 interleaved partial sums, combined as (0+4 + 1+5) + (2+6 + 3+7), the tail
 * after, written so the compiler vectorises them */
#define VC_GDN_LANES 8
static inline float vc_gdn_lanes_sum(const float *acc) {
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}
static inline float vc_gdn_dot(const float *x, const float *y, int n) {
    float acc[VC_GDN_LANES] = { 0 };
    int j = 0;
    for (; j + VC_GDN_LANES <= n; j += VC_GDN_LANES)
        for (int l = 0; l < VC_GDN_LANES; l++) acc[l] += x[j + l] * y[j + l];
    float s = vc_gdn_lanes_sum(acc);
    for (; j < n; j++) s += x[j] * y[j];
    return s;
}

/* forward of value head h over sequence s (o, and the state before each chunk into saved when kept) */
void vc_cpu_gdn_chunk_fwd(vc_gdn_ctx *c, int s, int h);
/* backward of the value heads of q/k head kh over sequence s, in order (gradients accumulated) */
void vc_cpu_gdn_chunk_bwd(vc_gdn_ctx *c, int s, int kh);
#endif
