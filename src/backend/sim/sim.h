/* The sim backend's internals shared between its files (see sim.c). */
#ifndef VC_SIM_H
#define VC_SIM_H
#include "backend/cpu/cpu.h"
#include "tensor/backend.h"
#include <stdint.h>
#include <stdlib.h>

/* added to every host address the sim backend hands out: bit 62 set makes it non-canonical on
 * x86-64 (user addresses are below 2^47), so any host load or store through it faults */
#define SIM_OFF ((uintptr_t)0x4000000000000000ull)

static inline int vc_sim_is_device(const void *p) { return ((uintptr_t)p >> 62) == 1; }
/* the host address behind sim pointer p (NULL stays NULL); anything else sets *bad and the sticky error */
void *vc_sim_tr(const void *p, int *bad, const char *op);
void vc_sim_error(const char *op, const char *what);

/* SIM_BEGIN("op"); T *a = D(x); ...; SIM_END; translates each argument and returns early (the op
 * skipped, the error sticky) when one is not sim memory */
#define SIM_BEGIN(op) int sim_bad_ = 0; const char *sim_op_ = (op)
#define D(p) vc_sim_tr((p), &sim_bad_, sim_op_)
#define SIM_END if (sim_bad_) return

void vc_sim_attn_fwd(float *o, float *lse, const float *q, const vc_attn_desc *d);
void vc_sim_dsa_select(uint32_t *sel, int64_t words, const float *q, const float *w, int64_t topk,
                       const vc_attn_desc *d);
void vc_sim_attn_bwd(float *dq, const float *dout, const float *o, const float *lse, const float *q,
                     const vc_attn_desc *d);
void vc_sim_attn_sink_bwd(float *dsink, const float *dout, const float *o, const float *lse, const float *sinks,
                          int64_t T, int nh, int dv);
void vc_sim_moe_bias_fwd(float *Y, const float *b, const int64_t *off, int64_t E, int64_t C);
void vc_sim_moe_bias_bwd(float *db, const float *dY, const int64_t *off, int64_t E, int64_t C);
void vc_sim_fill(float *y, float v, int64_t n);
void vc_sim_axpy(float *y, float a, const float *x, int64_t n);
void vc_sim_add(float *y, const float *a, const float *b, int64_t n);
void vc_sim_mul(float *y, const float *a, const float *b, int64_t n);
void vc_sim_mul_acc(float *y, const float *a, const float *b, int64_t n);
void vc_sim_scale(float *y, const float *x, float s, int64_t n);
void vc_sim_round_bf16(float *y, const float *x, int64_t n);
void vc_sim_mul_rows_fwd(float *y, const float *x, const float *s, int64_t R, int64_t C);
void vc_sim_mul_rows_bwd(float *dx, float *ds, const float *dy, const float *x, const float *s, int64_t R, int64_t C);
void vc_sim_rows_copy(float *dst, int64_t dld, const float *src, int64_t sld, int64_t R, int64_t C, int64_t rep,
                      int acc);
void vc_sim_rows_sum(float *dst, int64_t dld, const float *src, int64_t sld, int64_t R, int64_t C, int64_t rep);
void vc_sim_col_sum(float *db, const float *dy, int64_t R, int64_t C);
void vc_sim_softcap_fwd(float *y, const float *x, float cap, int64_t n);
void vc_sim_clip_fwd(float *y, const float *x, float lo, float hi, int64_t n);
void vc_sim_clip_bwd(float *dx, const float *dy, const float *x, float lo, float hi, int64_t n);
void vc_sim_softcap_bwd(float *dx, const float *dy, const float *y, float cap, int64_t n);
void vc_sim_rownorm_fwd(float *y, float *nrm, const float *W, int64_t R, int64_t C);
void vc_sim_rownorm_bwd(float *dW, const float *dy, const float *y, const float *nrm, int64_t R, int64_t C);
void vc_sim_dot_fwd(float *out, const float *x, const float *w, int64_t n);
void vc_sim_dot_bwd(float *dx, const float *dout, const float *w, int64_t n);
void vc_sim_embed_fwd(float *y, const float *W, const int32_t *ids, int64_t T, int64_t H);
void vc_sim_embed_bwd(float *dW, const float *dy, const int32_t *ids, int64_t T, int64_t H);
void vc_sim_gather_rows(float *dst, const float *src, const int64_t *idx, int64_t R, int64_t H);
void vc_sim_gather_rows_bf16(void *dst, const float *src, const int64_t *idx, int64_t R, int64_t H);
void vc_sim_scatter_rows(float *dst, const int64_t *off, const float *src, int64_t sld, int64_t R, int64_t C);
void vc_sim_scatter_rows_bf16(void *dst, const int64_t *off, const float *src, int64_t sld, int64_t R, int64_t C);
void vc_sim_moe_combine_fwd(float *y, const float *Y, const float *w, const int64_t *inv, int64_t T, int64_t K,
                            int64_t H);
void vc_sim_moe_combine_bwd(float *dY, float *dw, const float *dy, const float *Y, const float *w, const int64_t *inv,
                            int64_t T, int64_t K, int64_t H);
void vc_sim_moe_scatter_add(float *dx, const float *dX, const int64_t *inv, int64_t T, int64_t K, int64_t H);
void vc_sim_moe_group(int64_t *off, int64_t *tok, int64_t *inv, const int32_t *ids, int64_t T, int64_t K, int64_t E);
void vc_sim_gemm_rows_grouped(int tb, int64_t E, const int64_t *off, int64_t R, int64_t N, int64_t K, float alpha,
                              const void *A, int a16, int64_t lda, const float *B, float beta, float *C, int64_t ldc);
/* the same over any f32 gemm on translated pointers (the rollout's row-invariant one) */
void vc_sim_gemm_rows_grouped_via(vc_gemm_fn gemm, int tb, int64_t E, const int64_t *off, int64_t N, int64_t K,
                                  float alpha, const void *A, int a16, int64_t lda, const float *B, float beta, float *C,
                                  int64_t ldc);
void vc_sim_gemm_wgrad_grouped(int64_t E, const int64_t *off, int64_t M, int64_t N, float alpha, const float *A,
                               int64_t lda, const void *B, int b16, int64_t ldb, float beta, float *C);
void vc_sim_sample_rows(int32_t *tok, float *lp, float *lps, const float *logits, int64_t R, int64_t V,
                        const vc_sample_row *rows, const float *u);
void vc_sim_gdn_fwd(float *o, float *saved, const float *q, const float *k, const float *v, const float *g,
                    const float *beta, const vc_gdn_desc *d);
void vc_sim_gdn_bwd(float *dq, float *dk, float *dv, float *dg, float *dbeta, const float *dout, const float *saved,
                    const float *q, const float *k, const float *v, const float *g, const float *beta,
                    const vc_gdn_desc *d);
void vc_sim_gdn_gate_fwd(float *g, const float *a, const float *A_log, const float *dt_bias, int64_t T, int nh, int grp);
void vc_sim_gdn_gate_bwd(float *da, float *dA_log, float *ddt_bias, const float *dg, const float *a, const float *A_log,
                         const float *dt_bias, int64_t T, int nh, int grp);
void vc_sim_affine_cols_fwd(float *y, const float *x, const float *w, const float *b, int64_t R, int64_t C, int64_t grp);
void vc_sim_affine_cols_bwd(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w, int64_t R,
                            int64_t C, int64_t grp);
void vc_sim_ssm_fwd(float *y, float *saved, const float *x, const float *dt, const float *A_log, const float *B,
                    const float *C, const vc_ssm_desc *d);
void vc_sim_ssm_bwd(float *dx, float *ddt, float *dA_log, float *dB, float *dC, const float *dy, const float *saved,
                    const float *x, const float *dt, const float *A_log, const float *B, const float *C,
                    const vc_ssm_desc *d);
void vc_sim_conv1d_fwd(float *y, const float *x, const float *w, const vc_conv_desc *d);
void vc_sim_conv1d_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w, const vc_conv_desc *d);
#endif
