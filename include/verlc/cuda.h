/* verlc CUDA backend: device selection, stream-ordered device memory, copies, and the GPU kernels that
 * sit outside the op table (bf16 GEMM, paged decode attention, fused AdamW, grad norm).
 * Every pointer called "device" here is GPU memory from vc_cuda_malloc. No CUDA types leak: the stream
 * is returned as an opaque pointer (a cudaStream_t). All work runs in order on one stream.
 *
 * Errors: a failing CUDA call sets the usual thread-local message ("cuda: attention forward: an illegal
 * memory access was encountered") and a sticky process-wide status; once set, later kernels are skipped
 * until vc_cuda_clear_error(). Kernel launches are checked at the call; faults that surface while a kernel
 * runs are seen at the next vc_cuda_sync() / d2h copy and named after the last op launched. Set
 * VERLC_CUDA_SYNC=1 to synchronise after every op, so a fault is pinned to the op that caused it.
 * Built without CUDA, every function fails with VC_ERR_UNSUPPORTED and vc_backend_cuda() is NULL. */
#ifndef VERLC_CUDA_H
#define VERLC_CUDA_H
#include "verlc/core.h"
#include <stddef.h>
#include <stdint.h>

struct vc_backend;
struct vc_optim_param;
struct vc_adamw_config;

/* ---- device, memory, copies ---- */
/* Number of usable CUDA devices; 0 when there is no driver or GPU (never fails). */
int vc_cuda_device_count(void);
/* Selects a device (-1: $VERLC_CUDA_DEVICE or 0) and creates the stream and cuBLAS handles. Idempotent
 * for the same device. No driver/GPU: VC_ERR_DEVICE with a one-line message suggesting --device cpu. */
vc_status vc_cuda_init(int device);
int vc_cuda_ready(void);       /* vc_cuda_init succeeded */
void vc_cuda_shutdown(void);   /* frees handles and the stream (tests, leak checks) */
/* "NVIDIA H200 (sm_90, 139.8 GiB, driver 13.0)" into buf */
vc_status vc_cuda_device_name(char *buf, size_t len);
/* Stream-ordered pool allocation (cudaMallocAsync on the verlc stream; freed memory stays cached in the
 * pool). NULL and VC_ERR_NOMEM (with the sizes) when out of memory. */
void *vc_cuda_malloc(size_t bytes);
void vc_cuda_free(void *p);
/* For tests of the out-of-memory paths: from now on the ops' scratch requests over `bytes` fail as the device's
 * memory running out would (0: off). A pool that keeps freed blocks makes a real shortage hard to stage. */
void vc_cuda_fault_scratch_over(size_t bytes);
vc_status vc_cuda_memset0(void *dst, size_t bytes);
/* Host -> device: the host buffer may be reused as soon as this returns. The bytes are copied into a
 * pinned staging ring (4 chunks of 2 MiB, larger copies in pieces) and the DMA is queued on the
 * stream: the call waits only for the ring chunk it reuses, never for the whole stream. */
vc_status vc_cuda_h2d(void *dst, const void *src, size_t bytes);
/* Device -> host: waits for the stream, so the data (and any earlier fault) is there on return. Goes
 * through the same pinned ring, copying each piece out while the next ones are in flight. */
vc_status vc_cuda_d2h(void *dst, const void *src, size_t bytes);
vc_status vc_cuda_d2d(void *dst, const void *src, size_t bytes);
void *vc_cuda_stream(void);    /* the cudaStream_t all verlc kernels run on */
/* Waits for all queued work; returns the sticky error, if any, naming the op. */
vc_status vc_cuda_sync(void);
/* VERLC_CUDA_PROFILE=1: forget the ops counted so far (a bench's warm-up); otherwise nothing */
void vc_cuda_profile_reset(void);
vc_status vc_cuda_error(void); /* sticky status without waiting */
void vc_cuda_clear_error(void);
/* device memory in use by the pool, free (the device's, and the pool's freed blocks it keeps for reuse) and the
 * total on the device, bytes */
vc_status vc_cuda_mem_info(size_t *used, size_t *free_bytes, size_t *total);
/* the pool's high-water marks since the start, bytes: in use by allocations, and held from the device (torch's
 * max_memory_allocated / max_memory_reserved) */
vc_status vc_cuda_mem_peak(size_t *used_high, size_t *reserved_high);

/* The op table (src/tensor/backend.h) with device kernels; every pointer argument is device memory
 * except the vc_attn_desc / vc_route_desc structs and the desc's q_start, kv_len, k_seq, v_seq, dk_seq,
 * dv_seq arrays, which are host arrays (k_seq[s] etc. hold device pointers). Initialises the default
 * device on first use. NULL when built without CUDA. */
const struct vc_backend *vc_backend_cuda(void);

/* ---- GEMM ---- */
/* cuBLAS f32 GEMM uses exact f32 products (no TF32) unless $VERLC_CUDA_TF32=1. */
/* C[M,N] (f32) = alpha * op(A) op(B) + beta * C with A, B bf16 (uint16 bit patterns), f32 accumulation. */
vc_status vc_cuda_gemm_bf16(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t *A,
                            int64_t lda, const uint16_t *B, int64_t ldb, float beta, float *C, int64_t ldc);
/* the same with C in bf16 (c_bf16: C is uint16 bf16 bit patterns, f32 accumulation rounded once at the end) or f32 */
vc_status vc_cuda_gemm_bf16_out(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t *A,
                                int64_t lda, const uint16_t *B, int64_t ldb, float beta, void *C, int c_bf16,
                                int64_t ldc);
/* bench gemm: C (f32, M x N) = A (M x K) B^T (B: N x K), bf16 row-major packed, with each of the first `want` (up to
 * 16) algorithms cuBLASLt's heuristic ranks for it (the first: what cuBLASLt would run); ms[i] the best of `iters`
 * calls of algorithm i in milliseconds (-1: refused when called), *n how many were ranked (0: none, or no cuBLASLt) */
vc_status vc_cuda_gemm_algos(int64_t M, int64_t N, int64_t K, const uint16_t *A, const uint16_t *B, float *C, int want,
                             int iters, double *ms, int *n);
/* bf16 copies of weight matrices for the bf16 matmul precision (the rollout engine, around one
 * generate call): packs the row-major device matrices w[i] (rows[i] x cols[i]) once, and until
 * vc_cuda_bf16_shadow_drop() a bf16 GEMM whose operand is one of them, or a run of its rows at the
 * same leading dimension, reads that copy instead of rounding the f32 weights again on every call
 * (the same bits: both round to nearest even). The caller promises the weights do not change
 * meanwhile. Out of device memory: VC_ERR_NOMEM and nothing registered (GEMMs round as before). */
vc_status vc_cuda_bf16_shadow_add(const float *const *w, const int64_t *rows, const int64_t *cols, int n);
void vc_cuda_bf16_shadow_drop(void);
int vc_cuda_bf16_shadow_hits(void); /* GEMM operands served from the copies since the last add */
/* launches of the grouped expert GEMMs' mma.sync kernel (rows mode, bf16 matmuls) so far (tests) */
int vc_cuda_moe_mma_launches(void);
/* where the registered copy of w (rows x cols, its first row) lies on the device, or NULL (not registered; tests) */
const void *vc_cuda_bf16_copy_at(const float *w, int64_t rows, int64_t cols);
/* The device's promised dense peak in FLOP/s for MFU figures (bf16 tensor cores, or f32): verl's figures
 * for the parts it names (H100/H200/H800 989 TFLOP/s bf16), else SMs x clock x FLOP per SM per clock. */
vc_status vc_cuda_peak_flops(int bf16, double *flops);

/* ---- CUDA graphs (the rollout engine's decode steps) ----
 * A step that queues the same work with the same arguments every time (a decode step of a given batch
 * size, reading its per-step inputs from the same device addresses) can be captured once and then
 * replayed: begin(0) waits for the stream and starts a capture (op entries record their kernels; host
 * uploads are done at once, outside the graph), end(key) instantiates and launches it and keeps it under
 * `key`. begin(1) starts a replay: op entries queue nothing while uploads still refill the inputs, and
 * end(key) launches the kept graph when the step met the same entries and allocated nothing; *done
 * says whether the step's work was queued; if not, run the step again eagerly (a forward has no other
 * side effect). A capture CUDA itself refuses turns graphs off for the process (one line on stderr).
 * VERLC_CUDA_GRAPHS=0 turns them off. Graphs read the memory they were captured with: drop them
 * before freeing any of it. */
int vc_cuda_graphs_enabled(void);
vc_status vc_cuda_graph_begin(int replay);
vc_status vc_cuda_graph_end(int key, int *done);
int vc_cuda_graph_ready(int key);
void vc_cuda_graph_drop(void);
/* dst[n] = bf16(src[n]), round to nearest even (device arrays) */
vc_status vc_cuda_f32_to_bf16(uint16_t *dst, const float *src, size_t n);

/* ---- paged-KV decode attention ---- */
/* One query per sequence; the keys of sequence s live in pages page_table[s * max_pages + i] (page i holds
 * key positions i*page_size .. i*page_size + page_size - 1) of the pools k_pages / v_pages, laid out
 * [n_pages, page_size, n_kv_head, head_dim] (v: v_head_dim). The query sits at position seq_len[s] - 1
 * (its own key already written), attention is causal with optional window and soft-cap as vc_attn_desc. */
typedef struct vc_paged_desc {
    int n_seq;
    const int32_t *seq_len;    /* device [n_seq] keys visible to the query (>= 1) */
    const int32_t *page_table; /* device [n_seq, max_pages] */
    int max_pages, page_size;
    const float *k_pages, *v_pages; /* device pools */
    int n_head, n_kv_head, head_dim, v_head_dim;
    float scale, softcap;
    int window;
} vc_paged_desc;
/* o[n_seq, n_head, v_head_dim], q[n_seq, n_head, head_dim]; lse[n_seq, n_head] may be NULL. */
vc_status vc_cuda_attn_decode_paged(float *o, float *lse, const float *q, const vc_paged_desc *d);

/* ---- optimiser ---- */
/* One fused AdamW step over every tensor, the same float32 formula and rounding order as vc_adamw_step
 * (src/train/optim.c): params[i].w / .g and m[i], v[i] are device arrays; step is the step count after
 * this step (1 for the first). Results are bit-identical to the CPU optimiser. */
vc_status vc_cuda_adamw_step(const struct vc_optim_param *params, float *const *m, float *const *v, size_t n_params,
                             const struct vc_adamw_config *cfg, int64_t step, double lr);
/* Global L2 norm of device gradient tensors, summed in double in a fixed order (two passes: fixed
 * per-block partials, then one block adds them in order), so it is the same bits run to run. */
vc_status vc_cuda_grad_norm(const float *const *grads, const size_t *sizes, size_t n_tensors, double *norm);
/* As vc_clip_grad_norm: *clipped = 1 when the norm is finite (grads scaled when over max_norm). */
vc_status vc_cuda_clip_grad_norm(float *const *grads, const size_t *sizes, size_t n_tensors, double max_norm,
                                 double *norm, int *finite);
#endif
