/* Rollout engine internals: the row-invariant backend, the KV page pool (sampling is the backend's
 * sample_rows entry). */
#ifndef VC_INFER_H
#define VC_INFER_H
#include "tensor/backend.h"
#include "verlc/core.h"
#include "verlc/rollout.h"
#include <stdint.h>
#include <stdlib.h>

/* The CPU op table with a row-invariant GEMM (gemm_inv.c). */
const vc_backend *vc_infer_backend(void);
/* What generation runs on: the row-invariant table when the active backend is the CPU backend, the
 * sim table with the same row-invariant GEMM when it is the sim backend (bit-identical generation),
 * otherwise the active backend itself (whose memory holds the weights). */
const vc_backend *vc_infer_backend_for(const vc_backend *active);
void vc_infer_gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                   const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* ---- KV page pool (kv_pool.c): reference-counted pages, each holding page_tokens tokens of every layer ---- */
typedef struct vc_kv_pool {
    const vc_backend *be; /* owner of mem (the backend active at init) */
    float *mem;           /* backend memory (bf16: uint16_t values behind the float pointer) */
    int64_t n_pages, page_tokens, n_layer, row; /* row: values per token per layer */
    int bf16;             /* the pages hold bf16 values (2 bytes each) instead of floats */
    int32_t *refc, *free_list;
    int64_t n_free;
    int64_t peak_used;
} vc_kv_pool;

vc_status vc_kv_pool_init(vc_kv_pool *p, int64_t n_pages, int64_t page_tokens, int64_t n_layer, int64_t row, int bf16);
void vc_kv_pool_release(vc_kv_pool *p);
size_t vc_kv_page_bytes(int64_t page_tokens, int64_t n_layer, int64_t row, int bf16);
int32_t vc_kv_page_alloc(vc_kv_pool *p); /* -1 when the pool is full */
void vc_kv_page_ref(vc_kv_pool *p, int32_t page);
void vc_kv_page_unref(vc_kv_pool *p, int32_t page);
/* copies the first n_tokens tokens of every layer of page src into page dst (copy-on-write) */
void vc_kv_page_copy(vc_kv_pool *p, int32_t dst, int32_t src, int64_t n_tokens);
int64_t vc_kv_pool_used(const vc_kv_pool *p);

#endif
