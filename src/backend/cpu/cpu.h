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
/* the first fault of an op since the process started (sticky, as a GPU's): an op whose scratch memory could not be
 * allocated skips its work, leaving its outputs unwritten, so the next sync fails instead of a step using them */
vc_status vc_cpu_sync(void);
/* records an op's refused arguments (what: a static message) as the sticky fault */
void vc_cpu_fault(const char *what);
/* an op's scratch memory, count x size bytes (zeroed when zero != 0); NULL: the fault is recorded for sync */
void *vc_cpu_scratch(size_t count, size_t size, int zero);
/* X's rows x K floats (row stride ld; trans: X is [K, rows] and its columns are taken) as a packed row-major copy,
 * rounded to bf16 (nearest even) when round; blocks of rows on the pool. NULL: no memory (recorded for the sync) */
float *vc_cpu_pack_rows(int trans, const float *X, int64_t ld, int64_t rows, int64_t K, int round);
/* bf16 copies of weight matrices (cpu_copies.c; vc_model_weight_copies): w[i] (rows[i] x cols[i] floats, row-major)
 * rounded to bf16 once and kept until drop (the caller promises the weights do not change meanwhile) in groups of
 * VC_B16_LANES rows, each [vc_b16_even(cols) / 2][VC_B16_LANES][2] (element (r, k) of a group at
 * (k / 2) * 2 VC_B16_LANES + 2 r + 1 - k % 2: a pair's even k in the high half of its 32-bit word; zeros past the
 * last row and column); find returns the group holding the
 * first of the rows x cols floats at p (leading dimension ld: a registered weight or a run of its rows from a
 * multiple of VC_B16_LANES, all its columns) or NULL */
#define VC_B16_LANES 16
static inline int64_t vc_b16_even(int64_t k) { return (k + 1) & ~(int64_t)1; }
vc_status vc_cpu_bf16_copies_add(const float *const *w, const int64_t *rows, const int64_t *cols, int n);
/* op(B)^T's n rows of k (tb: B [n][k], else B [k][n]; leading dimension ld) rounded to bf16 in the copies' layout, for
 * one product (AVX-512: the row-invariant GEMM's AVX-512 BF16 path); free() it. NULL: no memory (reported) */
uint16_t *vc_cpu_bf16_pairs(int tb, const float *B, int64_t ld, int64_t n, int64_t k);
void vc_cpu_bf16_copies_drop(void); /* (their memory kept for the next add: vc_cpu_bf16_copies_spare) */
int64_t vc_cpu_bf16_copies_hits(void); /* operands served since the last add (0 after a drop) */
size_t vc_cpu_bf16_copies_spare(void);   /* bytes kept for the next add while none are live (available memory) */
void vc_cpu_bf16_copies_release(void);   /* free the kept memory (not while copies are live) */
const uint16_t *vc_cpu_bf16_copy_find(const float *p, int64_t rows, int64_t cols, int64_t ld);
/* tests: the next n scratch allocations fail (0: none), and the recorded fault is cleared */
void vc_cpu_scratch_test(int n);
void vc_cpu_gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                 const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
void vc_cpu_attn_fwd(float *o, float *lse, const float *q, const vc_attn_desc *d);
void vc_cpu_attn_bwd(float *dq, const float *dout, const float *o, const float *lse, const float *q,
                     const vc_attn_desc *d);
void vc_cpu_dsa_select(uint32_t *sel, int64_t words, const float *q, const float *w, int64_t topk,
                       const vc_attn_desc *d);
void vc_cpu_lm_head_fwd(float *logp, float *ent, float *sumsq, float *lse, const float *h, const float *W,
                         const float *b, const int32_t *target, const vc_head_desc *d);
void vc_cpu_lm_head_bwd(float *dh, float *dW, float *db, const float *dlogp, const float *dent, const float *lse,
                         const float *ent, const float *h, const float *W, const float *b, const int32_t *target,
                         const vc_head_desc *d);
void vc_cpu_route_fwd(float *w, int32_t *idx, const float *logits, int64_t T, const vc_route_desc *d);
void vc_cpu_route_bwd(float *dlogits, const float *dw, const float *logits, const int32_t *idx, int64_t T,
                      const vc_route_desc *d);
/* f32 GEMM whatever the matmul precision (attention) */
void vc_cpu_sgemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                  const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
/* elementwise and layout entries (cpu_elem.c), semantics in src/tensor/backend.h */
void vc_cpu_fill(float *y, float v, int64_t n);
void vc_cpu_axpy(float *y, float a, const float *x, int64_t n);
void vc_cpu_add(float *y, const float *a, const float *b, int64_t n);
void vc_cpu_mul(float *y, const float *a, const float *b, int64_t n);
void vc_cpu_mul_acc(float *y, const float *a, const float *b, int64_t n);
void vc_cpu_scale(float *y, const float *x, float s, int64_t n);
void vc_cpu_round_bf16(float *y, const float *x, int64_t n);
void vc_cpu_act_mul_fwd_bf16(void *y, const float *g, const float *u, int64_t n, int64_t cols, int64_t ld, int kind);
/* gemm_b16 through an f32 gemm (the bf16 operands converted to packed f32); vc_fail on no memory */
typedef void (*vc_gemm_fn)(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                           const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
void vc_gemm_b16_via(vc_gemm_fn gemm, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const void *A,
                     int a16, int64_t lda, const void *B, int b16, int64_t ldb, float beta, float *C, int64_t ldc);
void vc_cpu_mul_rows_fwd(float *y, const float *x, const float *s, int64_t R, int64_t C);
void vc_cpu_mul_rows_bwd(float *dx, float *ds, const float *dy, const float *x, const float *s, int64_t R, int64_t C);
void vc_cpu_rows_copy(float *dst, int64_t dld, const float *src, int64_t sld, int64_t R, int64_t C, int64_t rep,
                      int acc);
void vc_cpu_rows_sum(float *dst, int64_t dld, const float *src, int64_t sld, int64_t R, int64_t C, int64_t rep);
void vc_cpu_col_sum(float *db, const float *dy, int64_t R, int64_t C);
void vc_cpu_softcap_fwd(float *y, const float *x, float cap, int64_t n);
void vc_cpu_clip_fwd(float *y, const float *x, float lo, float hi, int64_t n);
void vc_cpu_clip_bwd(float *dx, const float *dy, const float *x, float lo, float hi, int64_t n);
void vc_cpu_softcap_bwd(float *dx, const float *dy, const float *y, float cap, int64_t n);
void vc_cpu_rownorm_fwd(float *y, float *nrm, const float *W, int64_t R, int64_t C);
void vc_cpu_rownorm_bwd(float *dW, const float *dy, const float *y, const float *nrm, int64_t R, int64_t C);
void vc_cpu_dot_fwd(float *out, const float *x, const float *w, int64_t n);
void vc_cpu_dot_bwd(float *dx, const float *dout, const float *w, int64_t n);
void vc_cpu_embed_fwd(float *y, const float *W, const int32_t *ids, int64_t T, int64_t H);
void vc_cpu_embed_bwd(float *dW, const float *dy, const int32_t *ids, int64_t T, int64_t H);
void vc_cpu_gather_rows(float *dst, const float *src, const int64_t *idx, int64_t R, int64_t H);
void vc_cpu_gather_rows_bf16(void *dst, const float *src, const int64_t *idx, int64_t R, int64_t H);
void vc_cpu_scatter_rows(float *dst, const int64_t *off, const float *src, int64_t sld, int64_t R, int64_t C);
void vc_cpu_scatter_rows_bf16(void *dst, const int64_t *off, const float *src, int64_t sld, int64_t R, int64_t C);
void vc_cpu_moe_combine_fwd(float *y, const float *Y, const float *w, const int64_t *inv, int64_t T, int64_t K,
                            int64_t H);
void vc_cpu_moe_combine_bwd(float *dY, float *dw, const float *dy, const float *Y, const float *w, const int64_t *inv,
                            int64_t T, int64_t K, int64_t H);
void vc_cpu_moe_scatter_add(float *dx, const float *dX, const int64_t *inv, int64_t T, int64_t K, int64_t H);
/* MoE grouping and grouped expert GEMMs (cpu_moe.c), semantics in src/tensor/backend.h */
/* gemm_rows_grouped over any f32 gemm (the rollout's row-invariant one) */
void vc_gemm_rows_grouped_via(vc_gemm_fn gemm, int tb, int64_t E, const int64_t *off, int64_t N, int64_t K, float alpha,
                              const void *A, int a16, int64_t lda, const float *B, float beta, float *C, int64_t ldc);
void vc_cpu_xielu_bwd(float *dx, float *dap, float *dan, const float *dy, const float *x, int64_t n, const float *ap,
                      const float *an, float beta, float eps);
/* linear-attention layers (cpu_gdn.c), semantics in src/tensor/backend.h; Gated DeltaNet's scalar-decay recurrence
 * runs in its chunked form (cpu_gdn_chunk.c) where no rollout state is carried, unless this is set (tests: the
 * token-by-token recurrence everywhere) */
extern int vc_cpu_gdn_recurrence_only;
void vc_cpu_gdn_fwd(float *o, float *saved, const float *q, const float *k, const float *v, const float *g,
                    const float *beta, const vc_gdn_desc *d);
void vc_cpu_gdn_bwd(float *dq, float *dk, float *dv, float *dg, float *dbeta, const float *dout, const float *saved,
                    const float *q, const float *k, const float *v, const float *g, const float *beta,
                    const vc_gdn_desc *d);
void vc_cpu_gdn_gate_fwd(float *g, const float *a, const float *A_log, const float *dt_bias, int64_t T, int nh, int grp);
void vc_cpu_gdn_gate_bwd(float *da, float *dA_log, float *ddt_bias, const float *dg, const float *a, const float *A_log,
                         const float *dt_bias, int64_t T, int nh, int grp);
void vc_cpu_affine_cols_fwd(float *y, const float *x, const float *w, const float *b, int64_t R, int64_t C, int64_t grp);
void vc_cpu_affine_cols_bwd(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w, int64_t R,
                            int64_t C, int64_t grp);
/* each sequence's first kept state for states kept every ckpt rows ([n_seq + 1], vc_calloc'd; NULL: no memory) */
int64_t *vc_cpu_ckpt_bases(int n_seq, const int64_t *cu, int64_t ckpt);
/* shared starts (vc_gdn_desc.from, vc_ssm_desc.from): the sequences others start from get tap slots (tap_of [n], their
 * count returned), and seqs [n] lists those starting from zero (*n0 of them) then the others; -1 when from is
 * malformed */
int vc_cpu_share_passes(int n, const int32_t *from, int *tap_of, int *seqs, int *n0);
void vc_cpu_ssm_fwd(float *y, float *saved, const float *x, const float *dt, const float *A_log, const float *B,
                    const float *C, const vc_ssm_desc *d);
void vc_cpu_ssm_bwd(float *dx, float *ddt, float *dA_log, float *dB, float *dC, const float *dy, const float *saved,
                    const float *x, const float *dt, const float *A_log, const float *B, const float *C,
                    const vc_ssm_desc *d);
void vc_cpu_conv1d_fwd(float *y, const float *x, const float *w, const vc_conv_desc *d);
void vc_cpu_conv1d_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w, const vc_conv_desc *d);
void vc_cpu_moe_bias_fwd(float *Y, const float *b, const int64_t *off, int64_t E, int64_t C);
void vc_cpu_moe_bias_bwd(float *db, const float *dY, const int64_t *off, int64_t E, int64_t C);
void vc_cpu_attn_sink_bwd(float *dsink, const float *dout, const float *o, const float *lse, const float *sinks,
                          int64_t T, int nh, int dv);
void vc_cpu_moe_group(int64_t *off, int64_t *tok, int64_t *inv, const int32_t *ids, int64_t T, int64_t K, int64_t E);
void vc_cpu_gemm_rows_grouped(int tb, int64_t E, const int64_t *off, int64_t R, int64_t N, int64_t K, float alpha,
                              const void *A, int a16, int64_t lda, const float *B, float beta, float *C, int64_t ldc);
void vc_cpu_gemm_wgrad_grouped(int64_t E, const int64_t *off, int64_t M, int64_t N, float alpha, const float *A,
                               int64_t lda, const void *B, int b16, int64_t ldb, float beta, float *C);
/* optimiser entries (cpu_optim.c) */
vc_status vc_cpu_adamw(const struct vc_optim_param *params, float *const *m, float *const *v, size_t n_params,
                       const struct vc_adamw_config *cfg, int64_t step, double lr);
vc_status vc_cpu_sumsq(const float *const *x, const size_t *sizes, size_t n_tensors, double *out);
/* sampling entry (cpu_sample.c), semantics in src/tensor/backend.h */
void vc_cpu_sample_rows(int32_t *tok, float *lp, float *lps, const float *logits, int64_t R, int64_t V,
                        const vc_sample_row *rows, const float *u);
/* top-k indices with torch.topk's CPU tie-breaking (order as torch returns them unsorted) */
void vc_topk_torch(const float *v, int n, int k, int32_t *idx);
#endif
