/* sim wrappers of the elementwise and layout entries: translate, then call the CPU kernels. */
#include "sim.h"
#include "backend/cpu/cpu.h"

void vc_sim_fill(float *y, float v, int64_t n) {
    SIM_BEGIN("fill");
    float *Y = D(y);
    SIM_END;
    vc_cpu_fill(Y, v, n);
}

void vc_sim_axpy(float *y, float a, const float *x, int64_t n) {
    SIM_BEGIN("axpy");
    float *Y = D(y);
    const float *X = D(x);
    SIM_END;
    vc_cpu_axpy(Y, a, X, n);
}

void vc_sim_add(float *y, const float *a, const float *b, int64_t n) {
    SIM_BEGIN("add");
    float *Y = D(y);
    const float *A = D(a), *B = D(b);
    SIM_END;
    vc_cpu_add(Y, A, B, n);
}

void vc_sim_mul(float *y, const float *a, const float *b, int64_t n) {
    SIM_BEGIN("mul");
    float *Y = D(y);
    const float *A = D(a), *B = D(b);
    SIM_END;
    vc_cpu_mul(Y, A, B, n);
}

void vc_sim_mul_acc(float *y, const float *a, const float *b, int64_t n) {
    SIM_BEGIN("mul_acc");
    float *Y = D(y);
    const float *A = D(a), *B = D(b);
    SIM_END;
    vc_cpu_mul_acc(Y, A, B, n);
}

void vc_sim_scale(float *y, const float *x, float s, int64_t n) {
    SIM_BEGIN("scale");
    float *Y = D(y);
    const float *X = D(x);
    SIM_END;
    vc_cpu_scale(Y, X, s, n);
}

void vc_sim_round_bf16(float *y, const float *x, int64_t n) {
    SIM_BEGIN("round_bf16");
    float *Y = D(y);
    const float *X = D(x);
    SIM_END;
    vc_cpu_round_bf16(Y, X, n);
}

void vc_sim_mul_rows_fwd(float *y, const float *x, const float *s, int64_t R, int64_t C) {
    SIM_BEGIN("mul_rows_fwd");
    float *Y = D(y);
    const float *X = D(x), *S = D(s);
    SIM_END;
    vc_cpu_mul_rows_fwd(Y, X, S, R, C);
}

void vc_sim_mul_rows_bwd(float *dx, float *ds, const float *dy, const float *x, const float *s, int64_t R, int64_t C) {
    SIM_BEGIN("mul_rows_bwd");
    float *DX = D(dx), *DS = D(ds);
    const float *DY = D(dy), *X = D(x), *S = D(s);
    SIM_END;
    vc_cpu_mul_rows_bwd(DX, DS, DY, X, S, R, C);
}

void vc_sim_rows_copy(float *dst, int64_t dld, const float *src, int64_t sld, int64_t R, int64_t C, int64_t rep,
                      int acc) {
    SIM_BEGIN("rows_copy");
    float *Dd = D(dst);
    const float *S = D(src);
    SIM_END;
    vc_cpu_rows_copy(Dd, dld, S, sld, R, C, rep, acc);
}

void vc_sim_rows_sum(float *dst, int64_t dld, const float *src, int64_t sld, int64_t R, int64_t C, int64_t rep) {
    SIM_BEGIN("rows_sum");
    float *Dd = D(dst);
    const float *S = D(src);
    SIM_END;
    vc_cpu_rows_sum(Dd, dld, S, sld, R, C, rep);
}

void vc_sim_col_sum(float *db, const float *dy, int64_t R, int64_t C) {
    SIM_BEGIN("col_sum");
    float *DB = D(db);
    const float *DY = D(dy);
    SIM_END;
    vc_cpu_col_sum(DB, DY, R, C);
}

void vc_sim_softcap_fwd(float *y, const float *x, float cap, int64_t n) {
    SIM_BEGIN("softcap_fwd");
    float *Y = D(y);
    const float *X = D(x);
    SIM_END;
    vc_cpu_softcap_fwd(Y, X, cap, n);
}

void vc_sim_clip_fwd(float *y, const float *x, float lo, float hi, int64_t n) {
    SIM_BEGIN("clip_fwd");
    float *Y = D(y);
    const float *X = D(x);
    SIM_END;
    vc_cpu_clip_fwd(Y, X, lo, hi, n);
}

void vc_sim_clip_bwd(float *dx, const float *dy, const float *x, float lo, float hi, int64_t n) {
    SIM_BEGIN("clip_bwd");
    float *DX = D(dx);
    const float *DY = D(dy), *X = D(x);
    SIM_END;
    vc_cpu_clip_bwd(DX, DY, X, lo, hi, n);
}

void vc_sim_softcap_bwd(float *dx, const float *dy, const float *y, float cap, int64_t n) {
    SIM_BEGIN("softcap_bwd");
    float *DX = D(dx);
    const float *DY = D(dy), *Y = D(y);
    SIM_END;
    vc_cpu_softcap_bwd(DX, DY, Y, cap, n);
}

void vc_sim_rownorm_fwd(float *y, float *nrm, const float *W, int64_t R, int64_t C) {
    SIM_BEGIN("rownorm_fwd");
    float *Y = D(y), *N = D(nrm);
    const float *Ww = D(W);
    SIM_END;
    vc_cpu_rownorm_fwd(Y, N, Ww, R, C);
}

void vc_sim_rownorm_bwd(float *dW, const float *dy, const float *y, const float *nrm, int64_t R, int64_t C) {
    SIM_BEGIN("rownorm_bwd");
    float *DW = D(dW);
    const float *DY = D(dy), *Y = D(y), *N = D(nrm);
    SIM_END;
    vc_cpu_rownorm_bwd(DW, DY, Y, N, R, C);
}

void vc_sim_dot_fwd(float *out, const float *x, const float *w, int64_t n) {
    SIM_BEGIN("dot_fwd");
    float *O = D(out);
    const float *X = D(x), *Ww = D(w);
    SIM_END;
    vc_cpu_dot_fwd(O, X, Ww, n);
}

void vc_sim_dot_bwd(float *dx, const float *dout, const float *w, int64_t n) {
    SIM_BEGIN("dot_bwd");
    float *DX = D(dx);
    const float *DO = D(dout), *Ww = D(w);
    SIM_END;
    vc_cpu_dot_bwd(DX, DO, Ww, n);
}

void vc_sim_embed_fwd(float *y, const float *W, const int32_t *ids, int64_t T, int64_t H) {
    SIM_BEGIN("embed_fwd");
    float *Y = D(y);
    const float *Ww = D(W);
    const int32_t *I = D(ids);
    SIM_END;
    vc_cpu_embed_fwd(Y, Ww, I, T, H);
}

void vc_sim_embed_bwd(float *dW, const float *dy, const int32_t *ids, int64_t T, int64_t H) {
    SIM_BEGIN("embed_bwd");
    float *DW = D(dW);
    const float *DY = D(dy);
    const int32_t *I = D(ids);
    SIM_END;
    vc_cpu_embed_bwd(DW, DY, I, T, H);
}

void vc_sim_gather_rows(float *dst, const float *src, const int64_t *idx, int64_t R, int64_t H) {
    SIM_BEGIN("gather_rows");
    float *Dd = D(dst);
    const float *S = D(src);
    const int64_t *I = D(idx);
    SIM_END;
    vc_cpu_gather_rows(Dd, S, I, R, H);
}

void vc_sim_gather_rows_bf16(void *dst, const float *src, const int64_t *idx, int64_t R, int64_t H) {
    SIM_BEGIN("gather_rows_bf16");
    void *Dd = D(dst);
    const float *S = D(src);
    const int64_t *I = D(idx);
    SIM_END;
    vc_cpu_gather_rows_bf16(Dd, S, I, R, H);
}

void vc_sim_scatter_rows_bf16(void *dst, const int64_t *off, const float *src, int64_t sld, int64_t R, int64_t C) {
    SIM_BEGIN("scatter_rows_bf16");
    void *Dd = D(dst);
    const int64_t *O = D(off);
    const float *S = D(src);
    SIM_END;
    vc_cpu_scatter_rows_bf16(Dd, O, S, sld, R, C);
}

void vc_sim_scatter_rows(float *dst, const int64_t *off, const float *src, int64_t sld, int64_t R, int64_t C) {
    SIM_BEGIN("scatter_rows");
    float *Dd = D(dst);
    const float *S = D(src);
    const int64_t *O = D(off);
    SIM_END;
    vc_cpu_scatter_rows(Dd, O, S, sld, R, C);
}

void vc_sim_moe_combine_fwd(float *y, const float *Y, const float *w, const int64_t *inv, int64_t T, int64_t K,
                            int64_t H) {
    SIM_BEGIN("moe_combine_fwd");
    float *Yo = D(y);
    const float *Yi = D(Y), *Ww = D(w);
    const int64_t *I = D(inv);
    SIM_END;
    vc_cpu_moe_combine_fwd(Yo, Yi, Ww, I, T, K, H);
}

void vc_sim_moe_combine_bwd(float *dY, float *dw, const float *dy, const float *Y, const float *w, const int64_t *inv,
                            int64_t T, int64_t K, int64_t H) {
    SIM_BEGIN("moe_combine_bwd");
    float *DYg = D(dY), *DW = D(dw);
    const float *DY = D(dy), *Yi = D(Y), *Ww = D(w);
    const int64_t *I = D(inv);
    SIM_END;
    vc_cpu_moe_combine_bwd(DYg, DW, DY, Yi, Ww, I, T, K, H);
}

void vc_sim_moe_scatter_add(float *dx, const float *dX, const int64_t *inv, int64_t T, int64_t K, int64_t H) {
    SIM_BEGIN("moe_scatter_add");
    float *DX = D(dx);
    const float *DXg = D(dX);
    const int64_t *I = D(inv);
    SIM_END;
    vc_cpu_moe_scatter_add(DX, DXg, I, T, K, H);
}

void vc_sim_moe_group(int64_t *off, int64_t *tok, int64_t *inv, const int32_t *ids, int64_t T, int64_t K, int64_t E) {
    SIM_BEGIN("moe_group");
    int64_t *O = D(off), *Tk = D(tok), *I = D(inv);
    const int32_t *Id = D(ids);
    SIM_END;
    vc_cpu_moe_group(O, Tk, I, Id, T, K, E);
}

/* the group offsets are read through their host address, as the CPU entry reads them */
void vc_sim_gemm_rows_grouped_via(vc_gemm_fn gemm, int tb, int64_t E, const int64_t *off, int64_t N, int64_t K,
                                  float alpha, const void *A, int a16, int64_t lda, const float *B, float beta, float *C,
                                  int64_t ldc) {
    SIM_BEGIN("gemm_rows_grouped");
    const int64_t *O = D(off);
    const void *Ah = D(A);
    const float *Bh = D(B);
    float *Ch = D(C);
    SIM_END;
    vc_gemm_rows_grouped_via(gemm, tb, E, O, N, K, alpha, Ah, a16, lda, Bh, beta, Ch, ldc);
}

void vc_sim_gemm_rows_grouped(int tb, int64_t E, const int64_t *off, int64_t R, int64_t N, int64_t K, float alpha,
                              const void *A, int a16, int64_t lda, const float *B, float beta, float *C, int64_t ldc) {
    (void)R;
    vc_sim_gemm_rows_grouped_via(vc_cpu_gemm, tb, E, off, N, K, alpha, A, a16, lda, B, beta, C, ldc);
}

void vc_sim_gemm_wgrad_grouped(int64_t E, const int64_t *off, int64_t M, int64_t N, float alpha, const float *A,
                               int64_t lda, const void *B, int b16, int64_t ldb, float beta, float *C) {
    SIM_BEGIN("gemm_wgrad_grouped");
    const int64_t *O = D(off);
    const float *Ah = D(A);
    const void *Bh = D(B);
    float *Ch = D(C);
    SIM_END;
    vc_cpu_gemm_wgrad_grouped(E, O, M, N, alpha, Ah, lda, Bh, b16, ldb, beta, Ch);
}

void vc_sim_moe_bias_fwd(float *Y, const float *b, const int64_t *off, int64_t E, int64_t C) {
    SIM_BEGIN("moe_bias_fwd");
    float *Yh = D(Y);
    const float *Bh = D(b);
    const int64_t *O = D(off);
    SIM_END;
    vc_cpu_moe_bias_fwd(Yh, Bh, O, E, C);
}

void vc_sim_moe_bias_bwd(float *db, const float *dY, const int64_t *off, int64_t E, int64_t C) {
    SIM_BEGIN("moe_bias_bwd");
    float *DB = D(db);
    const float *DY = D(dY);
    const int64_t *O = D(off);
    SIM_END;
    vc_cpu_moe_bias_bwd(DB, DY, O, E, C);
}
