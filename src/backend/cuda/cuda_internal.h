/* CUDA backend internals shared by the .cu files (C++ only). */
#ifndef VC_CUDA_INTERNAL_H
#define VC_CUDA_INTERNAL_H
#include <cublasLt.h>
#include "core/udiv.h"
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
extern "C" {
#include "tensor/backend.h"
#include "verlc/core.h"
#include "verlc/cuda.h"
}

/* the process-wide device context (src/backend/cuda/cuda_runtime.cu) */
cudaStream_t vc_cu_stream(void);
cublasHandle_t vc_cu_blas(void);
/* Ensures the device is initialised and no sticky error is pending; returns 0 (and the op must do
 * nothing) otherwise. `op` names the op for messages. */
int vc_cu_begin(const char *op);
/* the same checks for memory and copies, which graph capture / replay do not skip */
int vc_cu_begin_io(const char *op);
/* graphs (cuda_graph.cu): 0 eager, 1 capturing, 2 replaying (op entries return at vc_cu_begin) */
extern int vc_cu_graph_mode;
int vc_cu_graph_note(const char *op);       /* records an entry; 1 when it should queue its work */
void vc_cu_graph_taint(void);               /* this step cannot be (or be replayed as) a graph */
void vc_cu_graph_defer_free(void *p);       /* a free met while capturing, done when it ends */
void vc_cu_graphs_stale(void);              /* a buffer kept graphs read has moved: they are all dropped */
/* After launches: records a launch error (or, with VERLC_CUDA_SYNC=1, any fault) as the sticky error
 * "cuda: <op>: <cuda message>". Returns 0 on error. */
int vc_cu_end(const char *op);
/* op profiler (cuda_profile.cu, VERLC_CUDA_PROFILE=1): events around each op, resolved after waits */
extern int vc_cu_prof_on; /* -1: not read yet */
int vc_cu_prof_enabled(void);
void vc_cu_prof_begin(const char *op);
void vc_cu_prof_end(const char *op);
void vc_cu_prof_collect(void);
/* Records a failed CUDA / cuBLAS status as the sticky error; returns 0 when e is a failure. */
int vc_cu_ok(cudaError_t e, const char *op);
int vc_cu_blas_ok(cublasStatus_t s, const char *op);
/* Records an argument / support error of a void table entry as the sticky error "cuda: <op>: <what>" */
vc_status vc_cu_fail(vc_status st, const char *op, const char *what);
/* stream-ordered scratch; NULL (sticky VC_ERR_NOMEM) on failure */
void *vc_cu_scratch(size_t bytes, const char *op);
/* cudaMallocAsync on the verlc stream, failing over vc_cuda_fault_scratch_over's size (no sticky error) */
cudaError_t vc_cu_malloc_async(void **p, size_t bytes);
/* the linear-attention kernels' per-call sequence tables: rows, each sequence's first kept state (ckpt > 0; else
 * zeros) and the per-sequence state pointers (NULL array: NULLs), uploaded together; free the returned block with
 * vc_cu_scratch_free (NULL on failure, and while a graph captures) */
struct seq_tabs {
    const int64_t *cu, *base; /* [n + 1] each */
    float *const *state;      /* [n], NULL elements where the sequence has none */
};
void *vc_cu_upload_tabs(int n, const int64_t *cu, int64_t ckpt, float *const *state, seq_tabs *t, const char *op);
/* the call's tables: dev_tabs (the op layer's copy, vc_seq_tabs_fill's words; graph-capturable) or a fresh upload whose
 * block *own is to be freed with vc_cu_scratch_free; 0 (sticky error set) on failure */
int vc_cu_seq_tabs(const int64_t *dev_tabs, int n, const int64_t *cu, int64_t ckpt, float *const *state, seq_tabs *t,
                   void **own, const char *op);
void vc_cu_scratch_free(void *p);
/* the device's multiprocessors (read at init; 1 before) */
int vc_cu_sm_count(void);
/* uploads a host buffer into new scratch memory */
void *vc_cu_upload(const void *src, size_t bytes, const char *op);

/* Attention launch metadata: one entry per packed sequence, and a block list (sequence, first row) of
 * tiles of `rows` queries (or keys when by_keys), uploaded together into one scratch buffer (returned; free
 * with vc_cu_scratch_free after the launches). NULL on failure (sticky error set). */
struct vc_cu_attn_seq {
    int64_t q0, qlen, kvlen;
    const float *k, *v;
    float *dk, *dv;
};
void *vc_cu_attn_meta(const vc_attn_desc *d, int rows, int by_keys, const vc_cu_attn_seq **seq, const int2 **blk,
                      int64_t *nblk, const char *op);

/* vc_backend.operand_hold: with bf16 matmuls, the block rounded to bf16 once for the GEMMs that read it
 * until released (at most 8 held at once; more are simply not held) */
void vc_cu_operand_hold(const float *p, int64_t rows, int64_t cols, int hold);
/* +1 / -1 around an op's calls of other op-table entries (vc_cu_operand_hold): the profiler books them to the op */
void vc_cu_prof_nest(int d);
/* an empty bf16 held copy of p for its producer to fill (cuda_runtime.cu); NULL: write p itself */
void *vc_cu_hold_slot(const float *p, int64_t rows, int64_t cols);
/* the bf16 copy (registered weight or held operand) of the rows x cols operand at p with leading dimension
 * ld, or NULL */
const void *vc_cu_bf16_copy(const float *p, int64_t rows, int64_t cols, int64_t ld);
/* MoE grouping and grouped expert GEMMs (cuda_moe.cu); rows mode takes R = the rows of all groups */
void vc_cu_moe_group(int64_t *off, int64_t *tok, int64_t *inv, const int32_t *ids, int64_t T, int64_t K, int64_t E);
void vc_cu_gemm_rows_grouped(int tb, int64_t E, const int64_t *off, int64_t R, int64_t N, int64_t K, float alpha,
                             const void *A, int a16, int64_t lda, const float *B, float beta, float *C, int64_t ldc);
/* rows mode on mma.sync tiles (cuda_moe_mma.cu; B as stored, or its bf16 copy with b16): 1 when launched, 0 when
 * not taken (nothing queued: f32 matmuls, shapes or alignments it does not handle, VERLC_CUDA_MOE_MMA=0), -1 on an
 * error (sticky) */
int vc_cu_moe_mma_rows(int tb, int64_t E, const int64_t *off, int64_t R, int64_t N, int64_t K, float alpha,
                       const void *A, int a16, int64_t lda, const void *B, int b16, float beta, float *C, int64_t ldc,
                       const char *op);
/* wgrad mode likewise (C_e = alpha A_e^T B_e + beta C_e over expert e's rows) */
int vc_cu_moe_mma_wgrad(int64_t E, const int64_t *off, int64_t M, int64_t N, float alpha, const void *A, int a16,
                        int64_t lda, const void *B, int b16, int64_t ldb, float beta, float *C, const char *op);
void vc_cu_gemm_wgrad_grouped(int64_t E, const int64_t *off, int64_t M, int64_t N, float alpha, const float *A,
                              int64_t lda, const void *B, int b16, int64_t ldb, float beta, float *C);
/* f32 GEMM on the verlc stream, row-major as vc_backend.gemm; returns 0 on error */
int vc_cu_gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
               const float *B, int64_t ldb, float beta, float *C, int64_t ldc, const char *op);

/* table entries defined in the kernel files */
void vc_cu_gemm_entry(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                      const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
void vc_cu_rmsnorm_fwd(float *y, float *rstd, const float *x, const float *w, int64_t rows, int64_t cols, float eps,
                       float w_offset);
void vc_cu_add_rmsnorm_held(float *s, float *y, float *rstd, const float *x, const float *a, const float *w, int64_t rows,
                            int64_t cols, float eps, float w_offset);
void vc_cu_rmsnorm_fwd_held(float *y, float *rstd, const float *x, const float *w, int64_t rows, int64_t cols,
                            float eps, float w_offset);
void vc_cu_rmsnorm_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w, const float *rstd,
                       int64_t rows, int64_t cols, float w_offset);
void vc_cu_layernorm_fwd(float *y, float *mean, float *rstd, const float *x, const float *w, const float *b,
                         int64_t rows, int64_t cols, float eps);
void vc_cu_layernorm_bwd(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                         const float *mean, const float *rstd, int64_t rows, int64_t cols);
void vc_cu_rope(float *x, const float *cos, const float *sin, int64_t T, int nh, int hd, int rot, int interleaved,
                int sign);
void vc_cu_qkv_split(float *q, float *k, float *v, const float *Y, int64_t M, const vc_qkv_desc *d, const float *bq,
                     const float *bk, const float *bv);
int vc_cu_qkv_rope(int64_t M, int64_t K, const float *x, const float *Wq, const float *Wk, const float *Wv,
                   const float *bq, const float *bk, const float *bv, float *q, float *k, float *v, const vc_qkv_desc *d);
void vc_cu_qkv_unsplit(float *Y, const float *dq, const float *dk, const float *dv, int64_t M, const vc_qkv_desc *d);
int vc_cu_qkv_rope_bwd(int64_t M, int64_t K, const float *x, const float *Wq, const float *Wk, const float *Wv,
                       const float *dq, const float *dk, const float *dv, float *dx, float *dWq, float *dWk, float *dWv,
                       float *dbq, float *dbk, float *dbv, const vc_qkv_desc *d);
void vc_cu_rope2(float *q, int nhq, float *k, int nhk, const float *cos, const float *sin, int64_t T, int hd, int rot,
                 int interleaved);
void vc_cu_act_fwd(float *y, const float *x, int64_t n, int kind);
void vc_cu_act_bwd(float *dx, const float *dy, const float *x, int64_t n, int kind);
void vc_cu_attn_sink_bwd(float *dsink, const float *dout, const float *o, const float *lse, const float *sinks,
                         int64_t T, int nh, int dv);
void vc_cu_moe_bias_fwd(float *Y, const float *b, const int64_t *off, int64_t E, int64_t C);
void vc_cu_moe_bias_bwd(float *db, const float *dY, const int64_t *off, int64_t E, int64_t C);
void vc_cu_xielu_fwd(float *y, const float *x, int64_t n, const float *ap, const float *an, float beta, float eps);
void vc_cu_xielu_bwd(float *dx, float *dap, float *dan, const float *dy, const float *x, int64_t n, const float *ap,
                     const float *an, float beta, float eps);
/* linear-attention entries (cuda_gdn.cu): Gated DeltaNet's recurrence (and Mamba 2's SSD scan) and log decay, the
 * depthwise causal conv1d, the per-channel scale and bias over columns */
void vc_cu_gdn_fwd(float *o, float *saved, const float *q, const float *k, const float *v, const float *g,
                   const float *beta, const vc_gdn_desc *d);
void vc_cu_gdn_bwd(float *dq, float *dk, float *dv, float *dg, float *dbeta, const float *dout, const float *saved,
                   const float *q, const float *k, const float *v, const float *g, const float *beta,
                   const vc_gdn_desc *d);
/* the chunked form (cuda_gdn_chunk.cu) where vc_cu_gdn_chunk_ok: no rollout states, chunks of
 * ckpt <= 128 rows, VERLC_GDN_RECURRENCE unset; the entries above choose it */
int vc_cu_gdn_chunk_ok(const vc_gdn_desc *d);
void vc_cu_gdn_chunk_fwd(float *o, float *saved, const float *q, const float *k, const float *v, const float *g,
                         const float *beta, const vc_gdn_desc *d);
void vc_cu_gdn_chunk_bwd(float *dq, float *dk, float *dv, float *dg, float *dbeta, const float *dout,
                         const float *saved, const float *q, const float *k, const float *v, const float *g, const float *beta,
                         const vc_gdn_desc *d);
/* shared starts (vc_gdn_desc.from, vc_ssm_desc.from; cuda_gdn_chunk.cu): fr [n] (host) and the tap slots uploaded (one
 * block at *from), the taps' memory (SH floats a slot, not zeroed); the taps' count, -1 on failure.
 * vc_cu_gdn_tap_sum: tap[slot] = the sum in sequence order of the start gradients dinit [n_seq, SH] of the sequences
 * starting from that slot's sequence */
int vc_cu_share_setup(int n, const int32_t *fr, size_t SH, const int **from, const int **tap_of, float **tap,
                      const char *op);
/* the tapped state (or its gradient) of sequence s, value head h (SS floats a head), or NULL when s has none */
static __device__ __forceinline__ float *vc_cu_gdn_tap(const int *tap_of, float *tap, int s, int nv, int h,
                                                       int64_t SS) {
    return tap_of && s >= 0 && tap_of[s] >= 0 ? tap + ((int64_t)tap_of[s] * nv + h) * SS : NULL;
}
void vc_cu_gdn_tap_sum(float *tap, const float *dinit, const int *from, const int *tap_of, int n_seq, int nt,
                       int64_t SH);
/* dst[t, kh, a] += part[t, kh rep + m, a] over value heads m ascending, rows [r0, r0 + rows) (on the stream) */
void vc_cu_gdn_head_sum(float *dst, const float *part, int64_t r0, int64_t rows, int nk, int rep, int dk);
void vc_cu_gdn_gate_fwd(float *g, const float *a, const float *A_log, const float *dt_bias, int64_t T, int nh, int grp);
void vc_cu_gdn_gate_bwd(float *da, float *dA_log, float *ddt_bias, const float *dg, const float *a, const float *A_log,
                        const float *dt_bias, int64_t T, int nh, int grp);
void vc_cu_ssm_fwd(float *y, float *saved, const float *x, const float *dt, const float *A_log, const float *B,
                   const float *C, const vc_ssm_desc *d);
void vc_cu_ssm_bwd(float *dx, float *ddt, float *dA_log, float *dB, float *dC, const float *dy, const float *saved,
                   const float *x, const float *dt, const float *A_log, const float *B, const float *C,
                   const vc_ssm_desc *d);
void vc_cu_conv1d_fwd(float *y, const float *x, const float *w, const vc_conv_desc *d);
void vc_cu_conv1d_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w, const vc_conv_desc *d);
void vc_cu_affine_cols_fwd(float *y, const float *x, const float *w, const float *b, int64_t R, int64_t C,
                           int64_t grp);
void vc_cu_affine_cols_bwd(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w, int64_t R,
                           int64_t C, int64_t grp);
void vc_cu_linear_bias(int64_t M, int64_t N, int64_t K, const float *x, const float *W, const float *b, float *y);
/* cuda_lt.cu: C = alpha op(A) op(B) + bias (bf16 A and B, f32 C, row-major as vc_cu_gemm) by cuBLASLt's bias epilogue;
 * 1: issued. 0: nothing issued (VERLC_CUDA_LT=0, no cuBLASLt, no algorithm for the shape, or cuBLASLt refused the
 * call: the shape is not tried again), the caller adds the bias itself */
/* cuda_lt.cu: bench gemm's timing of cuBLASLt's ranked algorithms (vc_cuda_gemm_algos) */
int vc_cu_lt_algo_times(int64_t M, int64_t N, int64_t K, const void *A, const void *B, float *C, void *ws,
                        size_t ws_bytes, int want, int iters, double *ms);
int vc_cu_lt_gemm_bias(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const void *A, int64_t lda,
                       const void *B, int64_t ldb, const float *bias, float *C, int64_t ldc, void *ws, size_t ws_bytes);
void vc_cu_scatter_kv_bf16(void *dst, const int64_t *off, const float *k, int64_t kw, const float *v, int64_t vw,
                           int64_t R);
void vc_cu_lt_release(void);
void vc_cu_act_mul_fwd(float *y, const float *g, const float *u, int64_t n, int64_t cols, int64_t ld, int kind);
void vc_cu_act_mul_fwd_bf16(void *y, const float *g, const float *u, int64_t n, int64_t cols, int64_t ld, int kind);
void vc_cu_gemm_c16(int64_t M, int64_t N, int64_t K, const float *x, const float *W, void *y16);
void vc_cu_act_mul16_fwd(void *y, int y16, const void *g, const void *u, int64_t n, int64_t cols, int64_t ld, int kind);
int vc_cu_act_mul_bwd_held(float *dgu, const float *dy, const void *g, const void *u, int g16, int64_t n, int64_t cols,
                           int64_t ld, int kind);
int vc_cu_act_mul_bwd_held2(float *dg, float *du, const float *dy, const float *g, const float *u, int64_t n,
                            int64_t cols, int kind);
int vc_cu_moe_combine_bwd_held(float *dY, float *dw, const float *dy, const float *Y, const float *w,
                               const int64_t *inv, int64_t T, int64_t K, int64_t H);
void vc_cu_act_mul16_bwd(float *dg, float *du, const float *dy, const void *g, const void *u, int64_t n, int64_t cols,
                         int64_t ld, int kind);
void vc_cu_gemm_b16(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const void *A, int a16, int64_t lda,
                    const void *B, int b16, int64_t ldb, float beta, float *C, int64_t ldc);
void vc_cu_act_mul_bwd(float *dg, float *du, const float *dy, const float *g, const float *u, int64_t n, int64_t cols,
                       int64_t ld, int kind);
void vc_cu_attn_fwd(float *o, float *lse, const float *q, const vc_attn_desc *d);
void vc_cu_dsa_select(uint32_t *sel, int64_t words, const float *q, const float *w, int64_t topk,
                      const vc_attn_desc *d);
void vc_cu_attn_bwd(float *dq, const float *dout, const float *o, const float *lse, const float *q,
                    const vc_attn_desc *d);
void vc_cu_lm_head_fwd(float *logp, float *ent, float *sumsq, float *lse, const float *h, const float *W,
                        const float *b, const int32_t *target, const vc_head_desc *d);
void vc_cu_lm_head_bwd(float *dh, float *dW, float *db, const float *dlogp, const float *dent, const float *lse,
                        const float *ent, const float *h, const float *W, const float *b, const int32_t *target,
                        const vc_head_desc *d);
size_t vc_cu_lm_head_keep(const vc_head_desc *d, const float *b);
void vc_cu_route_fwd(float *w, int32_t *idx, const float *logits, int64_t T, const vc_route_desc *d);
void vc_cu_route_bwd(float *dlogits, const float *dw, const float *logits, const int32_t *idx, int64_t T,
                     const vc_route_desc *d);

/* elementwise and layout entries (cuda_elem.cu) */
void vc_cu_fill(float *y, float v, int64_t n);
void vc_cu_axpy(float *y, float a, const float *x, int64_t n);
void vc_cu_add(float *y, const float *a, const float *b, int64_t n);
void vc_cu_mul(float *y, const float *a, const float *b, int64_t n);
void vc_cu_mul_acc(float *y, const float *a, const float *b, int64_t n);
void vc_cu_scale(float *y, const float *x, float s, int64_t n);
void vc_cu_round_bf16(float *y, const float *x, int64_t n);
void vc_cu_scatter_rows_bf16(void *dst, const int64_t *off, const float *src, int64_t sld, int64_t R, int64_t C);
void vc_cu_mul_rows_fwd(float *y, const float *x, const float *s, int64_t R, int64_t C);
void vc_cu_mul_rows_bwd(float *dx, float *ds, const float *dy, const float *x, const float *s, int64_t R, int64_t C);
void vc_cu_rows_copy(float *dst, int64_t dld, const float *src, int64_t sld, int64_t R, int64_t C, int64_t rep,
                     int acc);
void vc_cu_rows_sum(float *dst, int64_t dld, const float *src, int64_t sld, int64_t R, int64_t C, int64_t rep);
void vc_cu_col_sum(float *db, const float *dy, int64_t R, int64_t C);
void vc_cu_softcap_fwd(float *y, const float *x, float cap, int64_t n);
void vc_cu_clip_fwd(float *y, const float *x, float lo, float hi, int64_t n);
void vc_cu_clip_bwd(float *dx, const float *dy, const float *x, float lo, float hi, int64_t n);
void vc_cu_softcap_bwd(float *dx, const float *dy, const float *y, float cap, int64_t n);
void vc_cu_rownorm_fwd(float *y, float *nrm, const float *W, int64_t R, int64_t C);
void vc_cu_rownorm_bwd(float *dW, const float *dy, const float *y, const float *nrm, int64_t R, int64_t C);
void vc_cu_dot_fwd(float *out, const float *x, const float *w, int64_t n);
void vc_cu_dot_bwd(float *dx, const float *dout, const float *w, int64_t n);
void vc_cu_embed_fwd(float *y, const float *W, const int32_t *ids, int64_t T, int64_t H);
void vc_cu_embed_bwd(float *dW, const float *dy, const int32_t *ids, int64_t T, int64_t H);
void vc_cu_gather_rows(float *dst, const float *src, const int64_t *idx, int64_t R, int64_t H);
void vc_cu_gather_rows_bf16(void *dst, const float *src, const int64_t *idx, int64_t R, int64_t H);
void vc_cu_scatter_rows(float *dst, const int64_t *off, const float *src, int64_t sld, int64_t R, int64_t C);
void vc_cu_moe_combine_fwd(float *y, const float *Y, const float *w, const int64_t *inv, int64_t T, int64_t K,
                           int64_t H);
void vc_cu_moe_combine_bwd(float *dY, float *dw, const float *dy, const float *Y, const float *w, const int64_t *inv,
                           int64_t T, int64_t K, int64_t H);
void vc_cu_moe_scatter_add(float *dx, const float *dX, const int64_t *inv, int64_t T, int64_t K, int64_t H);
/* optimiser entries (cuda_optim.cu): sum of squares in double, fixed order, host result */
vc_status vc_cu_sumsq(const float *const *x, const size_t *sizes, size_t n_tensors, double *out);
void vc_cu_scale_tensors(float *const *x, const size_t *sizes, size_t n_tensors, float c);
/* paged attention forward (cuda_paged.cu), called by vc_cu_attn_fwd when d->page_tokens > 0 */
void vc_cu_attn_fwd_paged(float *o, float *lse, const float *q, const vc_attn_desc *d, const char *op);
/* the forward over keys in rows (d->page_tokens 0), after vc_cu_begin(op): the tensor-core kernels where eligible */
void vc_cu_attn_fwd_flat(float *o, float *lse, const float *q, const vc_attn_desc *d, const char *op);
void vc_cu_paged_release(void); /* frees the cached page table (shutdown) */

/* bf16 tensor-core flash attention (cuda_attn_tc.cu): eligible when the matmul precision is bf16,
 * keys are not paged and head_dim == v_head_dim in {64, 128} (VERLC_CUDA_ATTN_F32=1 turns it off);
 * the backward takes D = rowsum(dO * O) [Tq, n_head] computed by the caller */
int vc_cu_attn_tc_eligible(const vc_attn_desc *d);
int vc_cu_paged_rounds_q(const vc_attn_desc *d);
void vc_cu_attn_fwd_tc(float *o, float *lse, const float *q, const vc_attn_desc *d, const char *op);
/* cuda_attn_mma.cu: the forward with the tiles in registers where the heads allow (1), else 0 (nothing done) */
int vc_cu_attn_fwd_mma(float *o, float *lse, const float *q, const vc_attn_desc *d, const char *op);
/* cuda_attn_mma_bwd.cu: the backward with the tiles in registers where the heads allow: 0 (nothing done), else 1 | 2
 * when dK and dV were done too */
int vc_cu_attn_bwd_mma(float *dq, const float *dout, const float *lse, const float *q, const vc_attn_desc *d,
                       const float *D, const char *op);
void vc_cu_attn_bwd_tc(float *dq, const float *dout, const float *lse, const float *q, const vc_attn_desc *d,
                       const float *D, const char *op);

/* Element loops over a rows x columns matrix without divisions (a 64-bit division an element costs a memory-bound
 * kernel more than its traffic): rows across blockIdx.y (strided by gridDim.y), columns across the threads along x;
 * launched on vc_cu_rows_grid(R, C, threads) */
#define VC_ROW_LOOP(r, R) for (int64_t r = blockIdx.y; r < (R); r += gridDim.y)
#define VC_COL_LOOP(c, C) \
    for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < (C); c += (int64_t)gridDim.x * blockDim.x)
static inline dim3 vc_cu_rows_grid(int64_t R, int64_t C, int threads) {
    const int64_t gx = (C + threads - 1) / threads;
    return dim3((unsigned)(gx < 1 ? 1 : gx > 4096 ? 4096 : gx), (unsigned)(R < 1 ? 1 : R > 65535 ? 65535 : R));
}
/* whether every pointer sits on a 16-byte boundary (float4 access; NULLs pass) */
static inline bool vc_cu_aligned16(const void *a, const void *b, const void *c = NULL, const void *d = NULL,
                                   const void *e = NULL) {
    return !(((uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d | (uintptr_t)e) & 15);
}
static inline unsigned vc_cu_blocks(int64_t n, int threads) {
    int64_t b = (n + threads - 1) / threads;
    return (unsigned)(b > 65535 * 16 ? 65535 * 16 : (b < 1 ? 1 : b));
}

/* DeepSeek Sparse Attention: whether query row `row` (packed) selected key `key` (p.sel NULL: every key) */
template <class P>
__device__ __forceinline__ bool vc_attn_selected(const P &p, int64_t row, int64_t key) {
    return !p.sel || ((p.sel[row * p.sel_words + (key >> 5)] >> (key & 31)) & 1u);
}
/* Attention masks and scores shared by the f32 and tensor-core kernels (P: any parameter struct with
 * causal, window, scale, cap, alibi, alibi_scale, nh, sel, sel_words; S: a sequence's q0, qlen, kvlen): is key visible from query
 * position pos; the score. */
template <class P, class S>
__device__ __forceinline__ bool vc_attn_visible(const P &p, const S &sm, int64_t pos, int64_t key) {
    if (key < 0 || key >= sm.kvlen) return false;
    if (p.causal && key > pos) return false;
    if (p.window > 0 && pos - key >= p.window) return false;
    if (p.chunk > 0 && key < pos - pos % p.chunk) return false;
    return pos >= sm.kvlen || vc_attn_selected(p, sm.q0 + pos - (sm.kvlen - sm.qlen), key); /* rows past the last query: no word */
}
/* visible keys [*j0, *j1) of query positions pos0 .. pos0 + nr - 1 */
template <class P>
__device__ __forceinline__ void vc_attn_key_range(const P &p, int64_t kvlen, int64_t pos0, int64_t nr, int64_t *j0,
                                                  int64_t *j1) {
    *j1 = p.causal ? (pos0 + nr < kvlen ? pos0 + nr : kvlen) : kvlen;
    *j0 = p.window > 0 ? (pos0 - p.window + 1 > 0 ? pos0 - p.window + 1 : 0) : 0;
    if (p.chunk > 0 && pos0 - pos0 % p.chunk > *j0) *j0 = pos0 - pos0 % p.chunk;
}
/* queries [*i0, *i1) (rows from the sequence's first query, off = kvlen - qlen) that see some key of kb .. kb + nk - 1 */
template <class P>
__device__ __forceinline__ void vc_attn_query_range(const P &p, int64_t kb, int64_t nk, int64_t off, int64_t qlen,
                                                    int64_t *i0, int64_t *i1) {
    *i0 = p.causal ? kb - off : 0;
    *i1 = p.window > 0 ? kb + nk - 1 + p.window - off : qlen;
    int64_t ce = p.chunk > 0 ? ((kb + nk - 1) / p.chunk + 1) * p.chunk - off : qlen; /* past the last key's chunk */
    if (ce < *i1) *i1 = ce;
    if (*i0 < 0) *i0 = 0;
    if (*i1 > qlen) *i1 = qlen;
}
/* ALiBi's slope of head h of n (the formula of vc_alibi_slope in src/tensor/backend.h) */
__device__ __forceinline__ float vc_attn_alibi_slope(int h, int n) {
    int pw = 1;
    while (pw * 2 <= n) pw *= 2;
    return h < pw ? exp2f(-8.0f * (float)(h + 1) / (float)pw) : exp2f(-4.0f * (float)(2 * (h - pw) + 1) / (float)pw);
}
/* head h's ALiBi slope as vc_attn_score takes it (0 without ALiBi; Falcon-RW's rounded to bf16): once per head,
 * outside the tile loops (inlined into every unrolled score, the slope's loop took nvcc minutes per kernel) */
template <class P>
__device__ __forceinline__ float vc_attn_slope(const P &p, int h) {
    if (!p.alibi) return 0.0f;
    float s = vc_attn_alibi_slope(h, p.nh);
    return p.alibi == 2 ? __bfloat162float(__float2bfloat16_rn(s)) : s;
}
/* the score of key `key` for the query at position pos in the head of `slope` (vc_attn_slope): scaled,
 * soft-capped, plus ALiBi's bias */
template <class P>
__device__ __forceinline__ float vc_attn_score(const P &p, float dot, float slope, int64_t pos, int64_t key) {
    float x = p.scale * dot;
    x = p.cap > 0 ? p.cap * tanhf(x / p.cap) : x;
    if (!p.alibi) return x;
    if (p.alibi == 2) /* Falcon-RW: transformers' bf16 table, bf16(bf16(slope) key) */
        return x + __bfloat162float(__float2bfloat16_rn(slope * (float)key)) * p.alibi_scale;
    return x + slope * p.alibi_scale * (float)(key - pos);
}

/* attention sinks (gpt-oss; P with `const float *sinks`, NULL: none): head h's sink logit folded into a row's
 * running max *m and sum *l as one more key with a zero value; returns the factor the row's accumulated output
 * takes (exp(old max - new max)) */
template <class P>
__device__ __forceinline__ float vc_attn_sink_fold(const P &p, int h, float *m, float *l) {
    if (!p.sinks) return 1.0f;
    float s = p.sinks[h], mn = fmaxf(*m, s), f = *m == -INFINITY ? 0.0f : expf(*m - mn);
    *l = *l * f + expf(s - mn);
    *m = mn;
    return f;
}

/* warp reductions over all 32 lanes */
__device__ __forceinline__ float vc_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ double vc_warp_sum_d(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float vc_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
/* Block-wide sum (blockDim.x a multiple of 32, <= 1024); every thread gets the result. Fixed order. */
__device__ __forceinline__ float vc_block_sum(float v, float *sh /* [32] */) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = vc_warp_sum(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    float t = lane < nw ? sh[lane] : 0.0f;
    return vc_warp_sum(t);
}
__device__ __forceinline__ double vc_block_sum_d(double v, double *sh /* [32] */) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = vc_warp_sum_d(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    double t = lane < nw ? sh[lane] : 0.0;
    return vc_warp_sum_d(t);
}
__device__ __forceinline__ float vc_block_max(float v, float *sh) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = vc_warp_max(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    float t = lane < nw ? sh[lane] : -INFINITY;
    return vc_warp_max(t);
}
#endif
