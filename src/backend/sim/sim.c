/* The "sim" backend: the CPU kernels behind poisoned pointers. Every pointer it hands out is host
 * memory plus SIM_OFF, which makes it non-canonical on x86-64 (and far outside any mapping elsewhere),
 * so a host dereference of backend memory outside src/backend faults at once. Each entry translates
 * its pointer arguments (including the host arrays of backend pointers in the attention descriptor,
 * the routing bias and the optimiser's parameter arrays) and calls the CPU entry. An argument that is
 * not sim memory where backend memory is expected (or sim memory where host memory is expected) is a
 * sticky error: the op is skipped and `sync` reports it naming the op. */
#include "sim.h"
#include "backend/cpu/cpu.h"
#include "verlc/optim.h"
#include <stdio.h>
#include <string.h>

static int sim_err;
static char sim_msg[256];

void vc_sim_error(const char *op, const char *what) {
    int expect = 0;
    if (__atomic_compare_exchange_n(&sim_err, &expect, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        snprintf(sim_msg, sizeof sim_msg, "sim: %s: %s", op, what);
}

void *vc_sim_tr(const void *p, int *bad, const char *op) {
    if (!p) return NULL;
    if (!vc_sim_is_device(p)) {
        vc_sim_error(op, "a host pointer was passed where backend memory is expected");
        *bad = 1;
        return NULL;
    }
    return (void *)((uintptr_t)p - SIM_OFF);
}

static int host_ok(const void *p, const char *op) {
    if (p && vc_sim_is_device(p)) {
        vc_sim_error(op, "backend memory was passed where a host pointer is expected");
        return 0;
    }
    return 1;
}

/* ---- memory ---- */
static void *sim_alloc(size_t bytes) {
    void *p = vc_cpu_alloc(bytes);
    return p ? (void *)((uintptr_t)p + SIM_OFF) : NULL;
}

static void sim_free(void *p) {
    int bad = 0;
    vc_cpu_free(vc_sim_tr(p, &bad, "free"));
}

static void sim_h2d(void *dst, const void *src, size_t bytes) {
    int bad = 0;
    void *d = vc_sim_tr(dst, &bad, "h2d");
    if (!bad && host_ok(src, "h2d") && bytes) memcpy(d, src, bytes);
}

static void sim_d2h(void *dst, const void *src, size_t bytes) {
    int bad = 0;
    void *s = vc_sim_tr(src, &bad, "d2h");
    if (!bad && host_ok(dst, "d2h") && bytes) memcpy(dst, s, bytes);
}

static void sim_d2d(void *dst, const void *src, size_t bytes) {
    int bad = 0;
    void *d = vc_sim_tr(dst, &bad, "d2d"), *s = vc_sim_tr(src, &bad, "d2d");
    if (!bad && bytes) memmove(d, s, bytes);
}

static void sim_zero(void *dst, size_t bytes) {
    int bad = 0;
    void *d = vc_sim_tr(dst, &bad, "zero");
    if (!bad && bytes) memset(d, 0, bytes);
}

static vc_status sim_sync(void) {
    if (__atomic_load_n(&sim_err, __ATOMIC_ACQUIRE)) return vc_fail(VC_ERR_DEVICE, "%s", sim_msg);
    return vc_cpu_sync(); /* the CPU kernels it runs: a scratch allocation that failed */
}

/* ---- dense kernels ---- */
static void sim_gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                     const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    SIM_BEGIN("gemm");
    const float *a = D(A), *b = D(B);
    float *c = D(C);
    SIM_END;
    vc_backend_cpu()->gemm(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void vc_sim_gemm_b16(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const void *A, int a16,
                            int64_t lda, const void *B, int b16, int64_t ldb, float beta, float *C, int64_t ldc) {
    SIM_BEGIN("gemm_b16");
    const void *a = D(A), *b = D(B);
    float *c = D(C);
    SIM_END;
    vc_backend_cpu()->gemm_b16(ta, tb, M, N, K, alpha, a, a16, lda, b, b16, ldb, beta, c, ldc);
}

static void sim_xielu_fwd(float *y, const float *x, int64_t n, const float *ap, const float *an, float beta, float eps) {
    SIM_BEGIN("xielu_fwd");
    float *Y = D(y);
    const float *X = D(x), *AP = D(ap), *AN = D(an);
    SIM_END;
    vc_backend_cpu()->xielu_fwd(Y, X, n, AP, AN, beta, eps);
}

static void sim_xielu_bwd(float *dx, float *dap, float *dan, const float *dy, const float *x, int64_t n, const float *ap,
                          const float *an, float beta, float eps) {
    SIM_BEGIN("xielu_bwd");
    float *DX = D(dx), *DAP = dap ? D(dap) : NULL, *DAN = dan ? D(dan) : NULL;
    const float *DY = D(dy), *X = D(x), *AP = D(ap), *AN = D(an);
    SIM_END;
    vc_cpu_xielu_bwd(DX, DAP, DAN, DY, X, n, AP, AN, beta, eps);
}

static void sim_act_mul_fwd_bf16(void *y, const float *g, const float *u, int64_t n, int64_t cols, int64_t ld, int kind) {
    SIM_BEGIN("act_mul_fwd_bf16");
    void *Y = D(y);
    const float *G = D(g), *U = D(u);
    SIM_END;
    vc_cpu_act_mul_fwd_bf16(Y, G, U, n, cols, ld, kind);
}

static void sim_rmsnorm_fwd(float *y, float *rstd, const float *x, const float *w, int64_t rows, int64_t cols,
                            float eps, float off) {
    SIM_BEGIN("rmsnorm_fwd");
    float *Y = D(y), *RS = D(rstd);
    const float *X = D(x), *W = D(w);
    SIM_END;
    vc_backend_cpu()->rmsnorm_fwd(Y, RS, X, W, rows, cols, eps, off);
}

static void sim_rmsnorm_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w, const float *rstd,
                            int64_t rows, int64_t cols, float off) {
    SIM_BEGIN("rmsnorm_bwd");
    float *DX = D(dx), *DW = D(dw);
    const float *DY = D(dy), *X = D(x), *W = D(w), *RS = D(rstd);
    SIM_END;
    vc_backend_cpu()->rmsnorm_bwd(DX, DW, DY, X, W, RS, rows, cols, off);
}

static void sim_layernorm_fwd(float *y, float *mean, float *rstd, const float *x, const float *w, const float *b,
                              int64_t rows, int64_t cols, float eps) {
    SIM_BEGIN("layernorm_fwd");
    float *Y = D(y), *MU = D(mean), *RS = D(rstd);
    const float *X = D(x), *W = D(w), *B = D(b);
    SIM_END;
    vc_backend_cpu()->layernorm_fwd(Y, MU, RS, X, W, B, rows, cols, eps);
}

static void sim_layernorm_bwd(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                              const float *mean, const float *rstd, int64_t rows, int64_t cols) {
    SIM_BEGIN("layernorm_bwd");
    float *DX = D(dx), *DW = D(dw), *DB = D(db);
    const float *DY = D(dy), *X = D(x), *W = D(w), *MU = D(mean), *RS = D(rstd);
    SIM_END;
    vc_backend_cpu()->layernorm_bwd(DX, DW, DB, DY, X, W, MU, RS, rows, cols);
}

static void sim_rope(float *x, const float *cs, const float *sn, int64_t T, int nh, int hd, int rot, int inter,
                     int sign) {
    SIM_BEGIN("rope");
    float *X = D(x);
    const float *C = D(cs), *S = D(sn);
    SIM_END;
    vc_backend_cpu()->rope(X, C, S, T, nh, hd, rot, inter, sign);
}

static void sim_act_fwd(float *y, const float *x, int64_t n, int kind) {
    SIM_BEGIN("act_fwd");
    float *Y = D(y);
    const float *X = D(x);
    SIM_END;
    vc_backend_cpu()->act_fwd(Y, X, n, kind);
}

static void sim_act_bwd(float *dx, const float *dy, const float *x, int64_t n, int kind) {
    SIM_BEGIN("act_bwd");
    float *DX = D(dx);
    const float *DY = D(dy), *X = D(x);
    SIM_END;
    vc_backend_cpu()->act_bwd(DX, DY, X, n, kind);
}

static void sim_act_mul_fwd(float *y, const float *g, const float *u, int64_t n, int64_t cols, int64_t ld, int kind) {
    SIM_BEGIN("act_mul_fwd");
    float *Y = D(y);
    const float *G = D(g), *U = D(u);
    SIM_END;
    vc_backend_cpu()->act_mul_fwd(Y, G, U, n, cols, ld, kind);
}

static void sim_act_mul_bwd(float *dg, float *du, const float *dy, const float *g, const float *u, int64_t n,
                            int64_t cols, int64_t ld, int kind) {
    SIM_BEGIN("act_mul_bwd");
    float *DG = D(dg), *DU = D(du);
    const float *DY = D(dy), *G = D(g), *U = D(u);
    SIM_END;
    vc_backend_cpu()->act_mul_bwd(DG, DU, DY, G, U, n, cols, ld, kind);
}

static void sim_lm_head_fwd(float *logp, float *ent, float *sumsq, float *lse, const float *h, const float *W,
                            const float *b, const int32_t *target, const vc_head_desc *d) {
    SIM_BEGIN("lm_head_fwd");
    float *LP = D(logp), *EN = D(ent), *SQ = D(sumsq), *L = D(lse);
    const float *Hh = D(h), *Ww = D(W), *B = D(b);
    const int32_t *TG = D(target);
    SIM_END;
    vc_backend_cpu()->lm_head_fwd(LP, EN, SQ, L, Hh, Ww, B, TG, d);
}

static void sim_lm_head_bwd(float *dh, float *dW, float *db, const float *dlogp, const float *dent, const float *lse,
                            const float *ent, const float *h, const float *W, const float *b, const int32_t *target,
                            const vc_head_desc *d) {
    SIM_BEGIN("lm_head_bwd");
    float *DH = D(dh), *DW = D(dW), *DB = D(db);
    const float *DL = D(dlogp), *DE = D(dent), *L = D(lse), *EN = D(ent), *Hh = D(h), *Ww = D(W), *B = D(b);
    const int32_t *TG = D(target);
    SIM_END;
    vc_backend_cpu()->lm_head_bwd(DH, DW, DB, DL, DE, L, EN, Hh, Ww, B, TG, d);
}

static void sim_route_fwd(float *w, int32_t *idx, const float *logits, int64_t T, const vc_route_desc *d) {
    SIM_BEGIN("route_fwd");
    float *Wt = D(w);
    int32_t *I = D(idx);
    const float *Z = D(logits);
    vc_route_desc rd = *d;
    rd.bias = D(d->bias);
    SIM_END;
    vc_backend_cpu()->route_fwd(Wt, I, Z, T, &rd);
}

static void sim_route_bwd(float *dlogits, const float *dw, const float *logits, const int32_t *idx, int64_t T,
                          const vc_route_desc *d) {
    SIM_BEGIN("route_bwd");
    float *DZ = D(dlogits);
    const float *DW = D(dw), *Z = D(logits);
    const int32_t *I = D(idx);
    vc_route_desc rd = *d;
    rd.bias = D(d->bias);
    SIM_END;
    vc_backend_cpu()->route_bwd(DZ, DW, Z, I, T, &rd);
}

/* ---- optimiser ---- */
static vc_status sim_adamw(const vc_optim_param *params, float *const *m, float *const *v, size_t n,
                           const vc_adamw_config *cfg, int64_t step, double lr) {
    vc_optim_param *p = vc_calloc(n ? n : 1, sizeof *p);
    float **mv = vc_calloc(n ? 2 * n : 1, sizeof *mv);
    vc_status st = VC_OK;
    int bad = 0;
    if (!p || !mv) {
        st = VC_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        p[i] = params[i];
        p[i].w = vc_sim_tr(params[i].w, &bad, "adamw");
        p[i].g = vc_sim_tr(params[i].g, &bad, "adamw");
        mv[i] = vc_sim_tr(m[i], &bad, "adamw");
        mv[n + i] = vc_sim_tr(v[i], &bad, "adamw");
    }
    st = bad ? sim_sync() : vc_backend_cpu()->adamw(p, mv, mv + n, n, cfg, step, lr);
out:
    free(p);
    free(mv);
    return st;
}

static vc_status sim_sumsq(const float *const *x, const size_t *sizes, size_t n, double *out) {
    const float **h = vc_calloc(n ? n : 1, sizeof *h);
    int bad = 0;
    if (!h) return VC_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) h[i] = vc_sim_tr(x[i], &bad, "sumsq");
    vc_status st = bad ? sim_sync() : vc_backend_cpu()->sumsq(h, sizes, n, out);
    free(h);
    return st;
}

static const vc_backend SIM = {
    .name = "sim",
    .host_visible = 0,
    .alloc = sim_alloc,
    .free = sim_free,
    .h2d = sim_h2d,
    .d2h = sim_d2h,
    .d2d = sim_d2d,
    .zero = sim_zero,
    .sync = sim_sync,
    .gemm = sim_gemm,
    .gemm_b16 = vc_sim_gemm_b16,
    .act_mul_fwd_bf16 = sim_act_mul_fwd_bf16,
    .rmsnorm_fwd = sim_rmsnorm_fwd,
    .rmsnorm_bwd = sim_rmsnorm_bwd,
    .layernorm_fwd = sim_layernorm_fwd,
    .layernorm_bwd = sim_layernorm_bwd,
    .rope = sim_rope,
    .attn_fwd = vc_sim_attn_fwd,
    .attn_bwd = vc_sim_attn_bwd,
    .dsa_select = vc_sim_dsa_select,
    .attn_sink_bwd = vc_sim_attn_sink_bwd,
    .act_fwd = sim_act_fwd,
    .act_bwd = sim_act_bwd,
    .act_mul_fwd = sim_act_mul_fwd,
    .xielu_fwd = sim_xielu_fwd,
    .xielu_bwd = sim_xielu_bwd,
    .gdn_fwd = vc_sim_gdn_fwd,
    .gdn_bwd = vc_sim_gdn_bwd,
    .gdn_gate_fwd = vc_sim_gdn_gate_fwd,
    .gdn_gate_bwd = vc_sim_gdn_gate_bwd,
    .affine_cols_fwd = vc_sim_affine_cols_fwd,
    .affine_cols_bwd = vc_sim_affine_cols_bwd,
    .ssm_fwd = vc_sim_ssm_fwd,
    .ssm_bwd = vc_sim_ssm_bwd,
    .conv1d_fwd = vc_sim_conv1d_fwd,
    .conv1d_bwd = vc_sim_conv1d_bwd,
    .act_mul_bwd = sim_act_mul_bwd,
    .lm_head_fwd = sim_lm_head_fwd,
    .lm_head_bwd = sim_lm_head_bwd,
    .route_fwd = sim_route_fwd,
    .route_bwd = sim_route_bwd,
    .fill = vc_sim_fill,
    .axpy = vc_sim_axpy,
    .add = vc_sim_add,
    .mul = vc_sim_mul,
    .mul_acc = vc_sim_mul_acc,
    .scale = vc_sim_scale,
    .round_bf16 = vc_sim_round_bf16,
    .mul_rows_fwd = vc_sim_mul_rows_fwd,
    .mul_rows_bwd = vc_sim_mul_rows_bwd,
    .rows_copy = vc_sim_rows_copy,
    .rows_sum = vc_sim_rows_sum,
    .col_sum = vc_sim_col_sum,
    .softcap_fwd = vc_sim_softcap_fwd,
    .clip_fwd = vc_sim_clip_fwd,
    .clip_bwd = vc_sim_clip_bwd,
    .softcap_bwd = vc_sim_softcap_bwd,
    .rownorm_fwd = vc_sim_rownorm_fwd,
    .rownorm_bwd = vc_sim_rownorm_bwd,
    .dot_fwd = vc_sim_dot_fwd,
    .dot_bwd = vc_sim_dot_bwd,
    .embed_fwd = vc_sim_embed_fwd,
    .embed_bwd = vc_sim_embed_bwd,
    .gather_rows = vc_sim_gather_rows,
    .gather_rows_bf16 = vc_sim_gather_rows_bf16,
    .scatter_rows = vc_sim_scatter_rows,
    .scatter_rows_bf16 = vc_sim_scatter_rows_bf16,
    .moe_combine_fwd = vc_sim_moe_combine_fwd,
    .moe_combine_bwd = vc_sim_moe_combine_bwd,
    .moe_scatter_add = vc_sim_moe_scatter_add,
    .moe_group = vc_sim_moe_group,
    .moe_bias_fwd = vc_sim_moe_bias_fwd,
    .moe_bias_bwd = vc_sim_moe_bias_bwd,
    .gemm_rows_grouped = vc_sim_gemm_rows_grouped,
    .gemm_wgrad_grouped = vc_sim_gemm_wgrad_grouped,
    .adamw = sim_adamw,
    .sumsq = sim_sumsq,
    .sample_rows = vc_sim_sample_rows,
};

const vc_backend *vc_backend_sim(void) { return &SIM; }
