/* CPU backend internals shared between its files. */
#ifndef VC_CPU_H
#define VC_CPU_H
#include "tensor/backend.h"
#include "verlc/core.h"
#include <stdlib.h>

void *vc_cpu_alloc(size_t bytes);
void vc_cpu_free(void *p);
void vc_cpu_copy(void *dst, const void *src, size_t bytes);
void vc_cpu_zero(void *dst, size_t bytes);
vc_status vc_cpu_sync(void);
void vc_cpu_gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                 const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
void vc_cpu_attn_fwd(float *o, float *lse, const float *q, const vc_attn_desc *d);
void vc_cpu_attn_bwd(float *dq, const float *dout, const float *o, const float *lse, const float *q,
                     const vc_attn_desc *d);
void vc_cpu_lm_head_fwd(float *logp, float *ent, float *lse, const float *h, const float *W, const float *b,
                        const int32_t *target, int64_t T, int64_t H, int64_t V, float softcap);
void vc_cpu_lm_head_bwd(float *dh, float *dW, float *db, const float *dlogp, const float *dent, const float *lse,
                        const float *ent, const float *h, const float *W, const float *b, const int32_t *target,
                        int64_t T, int64_t H, int64_t V, float softcap);
void vc_cpu_route_fwd(float *w, int32_t *idx, const float *logits, int64_t T, const vc_route_desc *d);
void vc_cpu_route_bwd(float *dlogits, const float *dw, const float *logits, const int32_t *idx, int64_t T,
                      const vc_route_desc *d);
/* top-k indices with torch.topk's CPU tie-breaking (order as torch returns them unsorted) */
void vc_topk_torch(const float *v, int n, int k, int32_t *idx);
#endif
