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
/* The row-invariant GEMM's instruction set: the best this CPU has, unless set lower (tests). Every instruction set
 * gives the same bits (each element one chain of fused multiply-adds over k in order; with bf16 matmuls under
 * flush-to-zero and denormals-are-zero, as AVX-512 BF16's dot products take them: VC_GEMM_AVX512BF16 runs a bf16
 * copy's products as those, two k a step, and the others give the same bits by the same two fused multiply-adds). */
enum { VC_GEMM_SCALAR, VC_GEMM_AVX2, VC_GEMM_AVX512, VC_GEMM_AVX512BF16 };
/* A (M rows of K, leading dimension lda) packed once for several products C = alpha A B^T + beta C with it (the LM
 * head's vocabulary slices): vc_infer_gemm_apack gives vc_infer_gemm(0, 1, ...)'s bits with that A, under the
 * instruction set and matmul precision of the packing; A stays unchanged until free (a B without a bf16 copy may
 * read it again). NULL where packing does not apply (fewer rows than a vector's
 * lanes, the scalar instruction set, over 256 MiB) or no memory: the caller calls vc_infer_gemm */
typedef struct vc_infer_apack vc_infer_apack;
vc_infer_apack *vc_infer_apack_new(int64_t M, int64_t K, const float *A, int64_t lda);
void vc_infer_gemm_apack(const vc_infer_apack *a, int64_t N, float alpha, const float *B, int64_t ldb, float beta,
                         float *C, int64_t ldc);
void vc_infer_apack_free(vc_infer_apack *a);
int vc_infer_gemm_set_isa(int isa); /* 0, or -1 when this CPU lacks it; isa < 0: the best again */
int vc_infer_gemm_isa(void);         /* the one in use (bf16 rounding of operands takes the same vectors) */

/* ---- KV page pool (kv_pool.c): reference-counted pages, each holding page_tokens tokens of every layer ----
 * With the prefix cache on (vc_kv_cache_enable), full pages are registered under their tokens and their
 * parent page (the page before them in the sequence), so a later sequence with the same tokens reuses
 * them (vLLM's automatic prefix caching). The cache holds one reference on each registered page; a page
 * only the cache holds, with no registered child, is evictable, least recently used first, when the
 * pool runs out of free pages. */
typedef struct vc_kv_pool {
    const vc_backend *be; /* owner of mem (the backend active at init) */
    float *mem;           /* backend memory (bf16: uint16_t values behind the float pointer) */
    int64_t n_pages, page_tokens, n_layer, row; /* row: values per token per layer */
    int bf16;             /* the pages hold bf16 values (2 bytes each) instead of floats */
    int32_t *refc, *free_list;
    int64_t n_free;
    int64_t peak_used;
    /* prefix cache (NULL arrays: off) */
    int32_t *c_parent;    /* per page: parent page (-1: first page of a sequence), -2: not registered */
    int32_t *c_tok;       /* per page: its page_tokens tokens */
    uint64_t *c_hash;
    int32_t *c_child;     /* registered children */
    int32_t *c_next;      /* hash bucket chain */
    int32_t *c_bucket;    /* [n_buckets] first page of each bucket (-1: empty) */
    int32_t *lru_prev, *lru_next; /* evictable pages, oldest first */
    int32_t lru_head, lru_tail;
    int64_t n_buckets, n_cached, n_lru;
} vc_kv_pool;

vc_status vc_kv_pool_init(vc_kv_pool *p, int64_t n_pages, int64_t page_tokens, int64_t n_layer, int64_t row, int bf16);
void vc_kv_pool_release(vc_kv_pool *p);
size_t vc_kv_page_bytes(int64_t page_tokens, int64_t n_layer, int64_t row, int bf16);
int32_t vc_kv_page_alloc(vc_kv_pool *p); /* -1 when the pool is full (and nothing is evictable) */
void vc_kv_page_ref(vc_kv_pool *p, int32_t page);
void vc_kv_page_unref(vc_kv_pool *p, int32_t page);
/* copies the first n_tokens tokens of every layer of page src into page dst (copy-on-write) */
void vc_kv_page_copy(vc_kv_pool *p, int32_t dst, int32_t src, int64_t n_tokens);
int64_t vc_kv_pool_used(const vc_kv_pool *p); /* pages sequences hold (not free, not only cached) */
/* prefix cache: on for the pool's lifetime (VC_ERR_NOMEM when its tables cannot be allocated) */
vc_status vc_kv_cache_enable(vc_kv_pool *p);
/* the registered page after `parent` (-1: none) holding tok[0..page_tokens), with a reference taken for
 * the caller; -1 when there is none */
int32_t vc_kv_cache_take(vc_kv_pool *p, int32_t parent, const int32_t *tok);
/* registers full page `page` (after `parent`, holding tok[0..page_tokens)); returns the page now
 * registered for that content: `page` itself, or an equal page registered before (then `page` stays
 * unregistered) */
int32_t vc_kv_cache_put(vc_kv_pool *p, int32_t parent, const int32_t *tok, int32_t page);
/* drops every evictable page (and so, repeatedly, the whole cache no sequence uses) */
void vc_kv_cache_clear(vc_kv_pool *p);

#endif
