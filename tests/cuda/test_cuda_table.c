/* The CUDA op table's memory, elementwise/layout and optimiser entries, the bf16 matmul precision and
 * the paged attention forward, each against the CPU backend's entry (or, where this build's CPU table
 * lacks one, a sequential reference loop written from the formula in src/tensor/backend.h).
 * Tolerances: 0 (bitwise) for copies, gathers and single roundings; 1e-6 relative for sums that both
 * sides add in the same order (only fused multiply-adds can differ); 1e-5 where a side reduces in a
 * tree or uses a different tanhf. Lines say "bits identical" when the results agree exactly.
 * Without a GPU: "no CUDA device: skipped", exit 0. */
#include "cuda_test_util.h"
#include "verlc/dtype.h"
#include "verlc/optim.h"

static const vc_backend *C, *G;

/* ---- sequential references (used when the CPU table has no entry) ---- */
static void ref_fill(float *y, float v, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = v;
}
static void ref_axpy(float *y, float a, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}
static void ref_add(float *y, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}
static void ref_mul(float *y, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = a[i] * b[i];
}
static void ref_mul_acc(float *y, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += a[i] * b[i];
}
static void ref_scale(float *y, const float *x, float s, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = s * x[i];
}
static void ref_mul_rows_fwd(float *y, const float *x, const float *s, int64_t R, int64_t Cc) {
    for (int64_t i = 0; i < R * Cc; i++) y[i] = x[i] * s[i / Cc];
}
static void ref_mul_rows_bwd(float *dx, float *ds, const float *dy, const float *x, const float *s, int64_t R,
                             int64_t Cc) {
    for (int64_t r = 0; r < R; r++) {
        float acc = 0;
        for (int64_t c = 0; c < Cc; c++) {
            if (dx) dx[r * Cc + c] += dy[r * Cc + c] * s[r];
            acc += dy[r * Cc + c] * x[r * Cc + c];
        }
        if (ds) ds[r] += acc;
    }
}
static void ref_rows_copy(float *dst, int64_t dld, const float *src, int64_t sld, int64_t R, int64_t Cc, int64_t rep,
                          int acc) {
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < Cc; c++) {
            float v = src[(r / rep) * sld + c];
            dst[r * dld + c] = acc ? dst[r * dld + c] + v : v;
        }
}
static void ref_rows_sum(float *dst, int64_t dld, const float *src, int64_t sld, int64_t R, int64_t Cc, int64_t rep) {
    for (int64_t i = 0; i < R / rep; i++)
        for (int64_t j = 0; j < rep; j++)
            for (int64_t c = 0; c < Cc; c++) dst[i * dld + c] += src[(i * rep + j) * sld + c];
}
static void ref_col_sum(float *db, const float *dy, int64_t R, int64_t Cc) {
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < Cc; c++) db[c] += dy[r * Cc + c];
}
static void ref_clip_fwd(float *y, const float *x, float lo, float hi, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
}
static void ref_clip_bwd(float *dx, const float *dy, const float *x, float lo, float hi, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (x[i] >= lo && x[i] <= hi) dx[i] += dy[i];
}
static void ref_softcap_fwd(float *y, const float *x, float cap, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = cap * tanhf(x[i] / cap);
}
static void ref_softcap_bwd(float *dx, const float *dy, const float *y, float cap, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float t = y[i] / cap;
        dx[i] += dy[i] * (1.0f - t * t);
    }
}
static void ref_rownorm_fwd(float *y, float *nrm, const float *W, int64_t R, int64_t Cc) {
    for (int64_t r = 0; r < R; r++) {
        double ss = 0;
        for (int64_t c = 0; c < Cc; c++) ss += (double)W[r * Cc + c] * W[r * Cc + c];
        float n = (float)sqrt(ss), d = n > 1e-12f ? n : 1e-12f;
        nrm[r] = n;
        for (int64_t c = 0; c < Cc; c++) y[r * Cc + c] = W[r * Cc + c] / d;
    }
}
static void ref_rownorm_bwd(float *dW, const float *dy, const float *y, const float *nrm, int64_t R, int64_t Cc) {
    for (int64_t r = 0; r < R; r++) {
        const float *g = dy + r * Cc, *yr = y + r * Cc;
        if (nrm[r] > 1e-12f) {
            double dot = 0;
            for (int64_t c = 0; c < Cc; c++) dot += (double)yr[c] * g[c];
            for (int64_t c = 0; c < Cc; c++) dW[r * Cc + c] += (g[c] - yr[c] * (float)dot) / nrm[r];
        } else {
            for (int64_t c = 0; c < Cc; c++) dW[r * Cc + c] += g[c] / 1e-12f;
        }
    }
}
static void ref_dot_fwd(float *out, const float *x, const float *w, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += (double)x[i] * w[i];
    out[0] = (float)s;
}
static void ref_dot_bwd(float *dx, const float *dout, const float *w, int64_t n) {
    for (int64_t i = 0; i < n; i++) dx[i] += dout[0] * w[i];
}
static void ref_embed_fwd(float *y, const float *W, const int32_t *ids, int64_t T, int64_t H) {
    for (int64_t t = 0; t < T; t++) memcpy(y + t * H, W + (int64_t)ids[t] * H, (size_t)H * 4);
}
static void ref_embed_bwd(float *dW, const float *dy, const int32_t *ids, int64_t T, int64_t H) {
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < H; c++) dW[(int64_t)ids[t] * H + c] += dy[t * H + c];
}
static void ref_gather_rows(float *dst, const float *src, const int64_t *idx, int64_t R, int64_t H) {
    for (int64_t r = 0; r < R; r++) memcpy(dst + r * H, src + idx[r] * H, (size_t)H * 4);
}
static void ref_moe_combine_fwd(float *y, const float *Y, const float *w, const int64_t *inv, int64_t T, int64_t K,
                                int64_t H) {
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < H; c++) {
            float a = 0;
            for (int64_t k = 0; k < K; k++) a += w[t * K + k] * Y[inv[t * K + k] * H + c];
            y[t * H + c] = a;
        }
}
static void ref_moe_combine_bwd(float *dY, float *dw, const float *dy, const float *Y, const float *w,
                                const int64_t *inv, int64_t T, int64_t K, int64_t H) {
    for (int64_t t = 0; t < T; t++)
        for (int64_t k = 0; k < K; k++) {
            const float *yr = Y + inv[t * K + k] * H;
            float s = 0;
            for (int64_t c = 0; c < H; c++) {
                if (dY) dY[inv[t * K + k] * H + c] = w[t * K + k] * dy[t * H + c];
                s += dy[t * H + c] * yr[c];
            }
            if (dw) dw[t * K + k] = s;
        }
}
static void ref_moe_scatter_add(float *dx, const float *dX, const int64_t *inv, int64_t T, int64_t K, int64_t H) {
    for (int64_t t = 0; t < T; t++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t c = 0; c < H; c++) dx[t * H + c] += dX[inv[t * K + k] * H + c];
}
#define PICK(f) (C->f ? C->f : ref_##f)

/* compares and says whether the bits agree */
static void cmpb(const char *name, const float *dev, const float *ref, size_t n, double tol) {
    float *g = fetch(dev, n);
    int same = memcmp(g, ref, n * sizeof(float)) == 0;
    char nm[128];
    snprintf(nm, sizeof nm, "%s%s", name, same ? " [bits identical]" : "");
    cmp_host(nm, g, ref, n, tol);
}

static void test_table_complete(void) {
    printf("op table\n");
#define HAS(f) CHECK_MSG(G->f != NULL, "cuda table lacks " #f)
    HAS(alloc); HAS(free); HAS(h2d); HAS(d2h); HAS(d2d); HAS(zero); HAS(sync); HAS(gemm);
    HAS(rmsnorm_fwd); HAS(rmsnorm_bwd); HAS(layernorm_fwd); HAS(layernorm_bwd); HAS(rope);
    HAS(attn_fwd); HAS(attn_bwd); HAS(act_fwd); HAS(act_bwd); HAS(act_mul_fwd); HAS(act_mul_bwd);
    HAS(lm_head_fwd); HAS(lm_head_bwd); HAS(route_fwd); HAS(route_bwd); HAS(fill); HAS(axpy); HAS(add);
    HAS(mul); HAS(mul_acc); HAS(scale); HAS(mul_rows_fwd); HAS(mul_rows_bwd); HAS(rows_copy); HAS(rows_sum);
    HAS(col_sum); HAS(softcap_fwd); HAS(softcap_bwd); HAS(clip_fwd); HAS(clip_bwd); HAS(rownorm_fwd); HAS(rownorm_bwd); HAS(dot_fwd);
    HAS(dot_bwd); HAS(embed_fwd); HAS(embed_bwd); HAS(gather_rows); HAS(scatter_rows); HAS(moe_combine_fwd); HAS(moe_combine_bwd);
    HAS(moe_scatter_add); HAS(adamw); HAS(sumsq); HAS(scale_tensors); HAS(round_bf16); HAS(scatter_rows_bf16); HAS(act_mul_fwd_bf16);
    HAS(gemm_b16); HAS(scatter_kv_bf16); HAS(linear_bias); HAS(rmsnorm_fwd_held);
    HAS(gdn_fwd); HAS(gdn_bwd); HAS(gdn_gate_fwd); HAS(gdn_gate_bwd); HAS(conv1d_fwd); HAS(conv1d_bwd);
    HAS(affine_cols_fwd); HAS(affine_cols_bwd); HAS(ssm_fwd); HAS(ssm_bwd);
#undef HAS
    CHECK(G->host_visible == 0);
}

static void test_memory(void) {
    printf("memory entries\n");
    size_t n = 100003;
    float *h = hrand(n, 1), *back = hbuf(n);
    float *a = G->alloc(n * 4), *b = G->alloc(n * 4);
    CHECK(a && b);
    G->h2d(a, h, n * 4);
    G->d2d(b, a, n * 4);
    G->zero(a + 10, 100 * 4);
    CHECK_OK(G->sync());
    G->d2h(back, b, n * 4);
    CHECK_MSG(!memcmp(back, h, n * 4), "h2d / d2d / d2h round trip differs");
    G->d2h(back, a, n * 4);
    int z = 1;
    for (size_t i = 0; i < n; i++) z &= back[i] == (i >= 10 && i < 110 ? 0.0f : h[i]);
    CHECK_MSG(z, "zero cleared the wrong range");
    /* overlapping d2d moves as memmove does: b[1000 ..] = old b[0 ..] and back */
    float *ref = clone(h, n);
    memmove(ref + 1000, ref, (n - 1000) * 4);
    G->d2d(b + 1000, b, (n - 1000) * 4);
    G->d2h(back, b, n * 4);
    CHECK_MSG(!memcmp(back, ref, n * 4), "overlapping d2d (forward) differs from memmove");
    memmove(ref, ref + 7, (n - 7) * 4);
    G->d2d(b, b + 7, (n - 7) * 4);
    G->d2h(back, b, n * 4);
    CHECK_MSG(!memcmp(back, ref, n * 4), "overlapping d2d (backward) differs from memmove");
    G->free(a);
    G->free(b);
    G->free(NULL);
    void *huge = G->alloc((size_t)1 << 50); /* 1 PiB: NULL, VC_ERR_NOMEM, and no sticky error */
    printf("  huge alloc: %s\n", huge ? "succeeded?" : vc_last_error());
    CHECK(huge == NULL && strstr(vc_last_error(), "out of device memory") && vc_cuda_error() == VC_OK);
    CHECK_OK(G->sync());
}

static void test_elementwise(void) {
    printf("elementwise\n");
    int64_t n = 300007;
    float *a = hrand((size_t)n, 3), *b = hrand((size_t)n, 3), *y = hrand((size_t)n, 1);
    float *ga = dup_f(a, n), *gb = dup_f(b, n), *gy = dup_f(y, n);
    PICK(fill)(y, 0.375f, n);
    G->fill(gy, 0.375f, n);
    cmpb("fill", gy, y, (size_t)n, 0);
    PICK(axpy)(y, -1.5f, a, n);
    G->axpy(gy, -1.5f, ga, n);
    cmpb("axpy", gy, y, (size_t)n, 1e-6);
    PICK(add)(y, a, b, n);
    G->add(gy, ga, gb, n);
    cmpb("add", gy, y, (size_t)n, 0);
    PICK(mul)(y, a, b, n);
    G->mul(gy, ga, gb, n);
    cmpb("mul", gy, y, (size_t)n, 0);
    PICK(mul_acc)(y, a, b, n);
    G->mul_acc(gy, ga, gb, n);
    cmpb("mul_acc", gy, y, (size_t)n, 1e-6);
    PICK(scale)(y, y, 0.3f, n); /* in place */
    G->scale(gy, gy, 0.3f, n);
    cmpb("scale (in place)", gy, y, (size_t)n, 0);
    PICK(softcap_fwd)(y, a, 2.0f, n);
    G->softcap_fwd(gy, ga, 2.0f, n);
    cmpb("softcap fwd", gy, y, (size_t)n, 1e-5);
    float *dx = hrand((size_t)n, 1), *gdx = dup_f(dx, n), *gyc = dup_f(y, n);
    PICK(softcap_bwd)(dx, b, y, 2.0f, n);
    G->softcap_bwd(gdx, gb, gyc, 2.0f, n);
    cmpb("softcap bwd (accumulated)", gdx, dx, (size_t)n, 1e-6);
    PICK(clip_fwd)(y, a, -0.25f, 0.5f, n); /* (asymmetric: Gemma 4's clipped linears) */
    G->clip_fwd(gy, ga, -0.25f, 0.5f, n);
    cmpb("clip fwd", gy, y, (size_t)n, 0);
    PICK(clip_bwd)(dx, b, a, -0.25f, 0.5f, n);
    G->clip_bwd(gdx, gb, ga, -0.25f, 0.5f, n);
    cmpb("clip bwd (accumulated onto the soft-cap's)", gdx, dx, (size_t)n, 1e-6);
    float out = 0, *gout = dalloc(4);
    PICK(dot_fwd)(&out, a, b, n);
    G->dot_fwd(gout, ga, gb, n);
    cmpb("dot fwd (double accumulation)", gout, &out, 1, 1e-6);
    float *gout2 = dalloc(4);
    G->dot_fwd(gout2, ga, gb, n);
    same_bits("dot fwd", gout, gout2, 1);
    float g1 = -0.75f, *gg1 = dup_f(&g1, 1);
    PICK(dot_bwd)(dx, &g1, b, n);
    G->dot_bwd(gdx, gg1, gb, n);
    cmpb("dot bwd (dout read from device memory)", gdx, dx, (size_t)n, 1e-6);
    check_sticky("elementwise");
    release_all();
}

static void test_rows(void) {
    printf("rows and columns\n");
    int64_t R = 301, Cc = 777, n = R * Cc;
    float *x = hrand((size_t)n, 2), *s = hrand((size_t)R, 2), *y = hbuf((size_t)n), *dy = hrand((size_t)n, 1);
    float *gx = dup_f(x, n), *gs = dup_f(s, R), *gy = dup_f(y, n), *gdy = dup_f(dy, n);
    PICK(mul_rows_fwd)(y, x, s, R, Cc);
    G->mul_rows_fwd(gy, gx, gs, R, Cc);
    cmpb("mul_rows fwd", gy, y, (size_t)n, 0);
    float *dx = hrand((size_t)n, 1), *ds = hrand((size_t)R, 1), *gdx = dup_f(dx, n), *gds = dup_f(ds, R);
    PICK(mul_rows_bwd)(dx, ds, dy, x, s, R, Cc);
    G->mul_rows_bwd(gdx, gds, gdy, gx, gs, R, Cc);
    cmpb("mul_rows bwd dx", gdx, dx, (size_t)n, 1e-6);
    cmpb("mul_rows bwd ds (row sums)", gds, ds, (size_t)R, 1e-5);
    PICK(mul_rows_bwd)(NULL, ds, dy, x, s, R, Cc);
    G->mul_rows_bwd(NULL, gds, gdy, gx, gs, R, Cc);
    cmpb("mul_rows bwd ds only", gds, ds, (size_t)R, 1e-5);
    /* rows_copy into a strided destination: plain, repeated (rep 3), broadcast (sld 0), accumulated */
    int64_t dld = Cc + 5, cols = 300;
    static const int64_t reps[] = { 1, 3, 1 }, slds[] = { 777, 777, 0 };
    for (int v = 0; v < 6; v++) {
        int64_t rep = reps[v % 3], sld = slds[v % 3], rows = v % 3 == 1 ? 300 : 100;
        int acc = v >= 3;
        float *d = hrand((size_t)(rows * dld), 1), *gd = dup_f(d, rows * dld);
        PICK(rows_copy)(d, dld, x, sld, rows, cols, rep, acc);
        G->rows_copy(gd, dld, gx, sld, rows, cols, rep, acc);
        char nm[96];
        snprintf(nm, sizeof nm, "rows_copy rep=%lld sld=%lld acc=%d", (long long)rep, (long long)sld, acc);
        cmpb(nm, gd, d, (size_t)(rows * dld), 0);
    }
    for (int rep = 1; rep <= 4; rep += 3) {
        int64_t rows = 300, nout = rows / rep;
        float *d = hrand((size_t)(nout * dld), 1), *gd = dup_f(d, nout * dld);
        PICK(rows_sum)(d, dld, x, Cc, rows, cols, rep);
        G->rows_sum(gd, dld, gx, Cc, rows, cols, rep);
        char nm[96];
        snprintf(nm, sizeof nm, "rows_sum rep=%d (accumulated, j ascending)", rep);
        cmpb(nm, gd, d, (size_t)(nout * dld), 1e-6);
    }
    float *db = hrand((size_t)Cc, 1), *gdb = dup_f(db, Cc);
    PICK(col_sum)(db, dy, R, Cc);
    G->col_sum(gdb, gdy, R, Cc);
    cmpb("col_sum (accumulated; 301 rows: blocks of 128 summed in order)", gdb, db, (size_t)Cc, 1e-6);
    /* rownorm, including a zero row (clamped norm) */
    int64_t RR = 97, CC = 513;
    float *W = hrand((size_t)(RR * CC), 1);
    memset(W + 5 * CC, 0, (size_t)CC * 4);
    float *yn = hbuf((size_t)(RR * CC)), *nrm = hbuf((size_t)RR), *gW = dup_f(W, RR * CC);
    float *gyn = dalloc((size_t)(RR * CC) * 4), *gnrm = dalloc((size_t)RR * 4);
    PICK(rownorm_fwd)(yn, nrm, W, RR, CC);
    G->rownorm_fwd(gyn, gnrm, gW, RR, CC);
    cmpb("rownorm fwd y", gyn, yn, (size_t)(RR * CC), 1e-5);
    cmpb("rownorm fwd norm", gnrm, nrm, (size_t)RR, 1e-5);
    float *dyn = hrand((size_t)(RR * CC), 1), *dW = hrand((size_t)(RR * CC), 1);
    for (int64_t c = 0; c < CC; c++) dyn[5 * CC + c] *= 1e-13f; /* the clamped row: dW += dy / 1e-12 */
    float *gdyn = dup_f(dyn, RR * CC), *gdW = dup_f(dW, RR * CC), *gyc = dup_f(yn, RR * CC), *gnc = dup_f(nrm, RR);
    PICK(rownorm_bwd)(dW, dyn, yn, nrm, RR, CC);
    G->rownorm_bwd(gdW, gdyn, gyc, gnc, RR, CC);
    cmpb("rownorm bwd (accumulated)", gdW, dW, (size_t)(RR * CC), 1e-5);
    check_sticky("rows");
    release_all();
}

static void test_embed_moe(void) {
    printf("embedding, gather, MoE combine / scatter\n");
    int64_t V = 1000, H = 600, T = 5000;
    float *W = hrand((size_t)(V * H), 1), *dy = hrand((size_t)(T * H), 1);
    int32_t *ids = (int32_t *)hbuf((size_t)T);
    for (int64_t t = 0; t < T; t++) ids[t] = (int32_t)(t % 5 == 0 ? 7 : (t * 7919) % V); /* many repeats */
    float *y = hbuf((size_t)(T * H)), *gW = dup_f(W, V * H), *gy = dalloc((size_t)(T * H) * 4);
    int32_t *gids = dcopy(ids, (size_t)T * 4);
    PICK(embed_fwd)(y, W, ids, T, H);
    G->embed_fwd(gy, gW, gids, T, H);
    cmpb("embedding fwd", gy, y, (size_t)(T * H), 0);
    float *dW = hrand((size_t)(V * H), 1), *gdW = dup_f(dW, V * H), *gdW2 = dup_f(dW, V * H), *gdy = dup_f(dy, T * H);
    PICK(embed_bwd)(dW, dy, ids, T, H);
    G->embed_bwd(gdW, gdy, gids, T, H);
    G->embed_bwd(gdW2, gdy, gids, T, H);
    cmpb("embedding bwd (accumulated, t ascending per row)", gdW, dW, (size_t)(V * H), 1e-6);
    same_bits("embedding bwd", gdW, gdW2, (size_t)(V * H));
    /* MoE: K choices per token, inv a permutation of the T*K grouped rows */
    int64_t Tm = 700, K = 4, Hm = 320, G_ = Tm * K;
    int64_t *inv = (int64_t *)calloc((size_t)G_, 8);
    for (int64_t i = 0; i < G_; i++) inv[i] = i;
    for (int64_t i = G_ - 1; i > 0; i--) {
        int64_t j = (int64_t)((urand() + 1.0f) * 0.5f * (float)(i + 1));
        if (j > i) j = i;
        int64_t t = inv[i];
        inv[i] = inv[j];
        inv[j] = t;
    }
    int64_t *ginv = dcopy(inv, (size_t)G_ * 8);
    float *Y = hrand((size_t)(G_ * Hm), 1), *w = hrand((size_t)G_, 1), *gY = dup_f(Y, G_ * Hm), *gw = dup_f(w, G_);
    float *src = hrand((size_t)(G_ * Hm), 1), *gsrc = dup_f(src, G_ * Hm);
    float *gat = hbuf((size_t)(G_ * Hm)), *ggat = dalloc((size_t)(G_ * Hm) * 4);
    PICK(gather_rows)(gat, src, inv, G_, Hm);
    G->gather_rows(ggat, gsrc, ginv, G_, Hm);
    cmpb("gather_rows (int64 index)", ggat, gat, (size_t)(G_ * Hm), 0);
    {   /* scatter: the rows' first Hm - 3 columns to permuted slots of a wider buffer (the paged KV append) */
        int64_t ld = Hm + 9, Cs = Hm - 3;
        int64_t *off = (int64_t *)calloc((size_t)G_, 8);
        for (int64_t r = 0; r < G_; r++) off[r] = inv[r] * ld + 5;
        int64_t *goff = (int64_t *)dcopy(off, (size_t)G_ * 8);
        float *sc = hrand((size_t)(G_ * ld), 1), *gsc = dup_f(sc, (size_t)(G_ * ld));
        for (int64_t r = 0; r < G_; r++) memcpy(sc + off[r], src + r * Hm, (size_t)Cs * 4);
        G->scatter_rows(gsc, goff, gsrc, Hm, G_, Cs);
        cmpb("scatter_rows (int64 offsets, strided source)", gsc, sc, (size_t)(G_ * ld), 0);
        /* the same into bf16 rows (the bf16 KV append): offsets count 2-byte values */
        size_t nh = (size_t)(G_ * ld);
        uint16_t *h16 = (uint16_t *)calloc(nh, 2), *g16 = (uint16_t *)calloc(nh, 2);
        void *d16 = dalloc(nh * 2);
        G->zero(d16, nh * 2);
        C->scatter_rows_bf16(h16, off, src, Hm, G_, Cs);
        G->scatter_rows_bf16(d16, goff, gsrc, Hm, G_, Cs);
        G->d2h(g16, d16, nh * 2);
        CHECK_MSG(!memcmp(g16, h16, nh * 2), "scatter_rows_bf16 differs from the CPU backend");
        printf("  %-52s bits identical: %s\n", "scatter_rows_bf16 (bf16 rows, nearest even)", memcmp(g16, h16, nh * 2) ? "no" : "yes");
        /* keys and values in one pass (scatter_kv_bf16): the keys' kw columns then the values' as two scatters put them */
        int64_t kw = Cs / 2, vw = Cs - kw;
        float *kk = hrand((size_t)(G_ * kw), 1), *vv = hrand((size_t)(G_ * vw), 1);
        float *gk = dup_f(kk, (size_t)(G_ * kw)), *gv = dup_f(vv, (size_t)(G_ * vw));
        int64_t *off2 = (int64_t *)calloc((size_t)G_, 8);
        for (int64_t r = 0; r < G_; r++) off2[r] = off[r] + kw;
        C->scatter_rows_bf16(h16, off, kk, kw, G_, kw);
        C->scatter_rows_bf16(h16, off2, vv, vw, G_, vw);
        G->scatter_kv_bf16(d16, goff, gk, kw, gv, vw, G_);
        G->d2h(g16, d16, nh * 2);
        CHECK_MSG(!memcmp(g16, h16, nh * 2), "scatter_kv_bf16 differs from two scatter_rows_bf16");
        printf("  %-52s bits identical: %s\n", "scatter_kv_bf16 (keys and values, one pass)", memcmp(g16, h16, nh * 2) ? "no" : "yes");
        free(off2);
        free(h16);
        free(g16);
        free(off);
    }
    {   /* bf16 rounding: ties to even, signed zeros, subnormals and infinities as the CPU backend */
        float v[12] = { 1.0f, 1.00390625f, 1.01171875f, -2.5e-39f, 3.4e38f, -0.0f, 65504.0f, 1e-3f, 0, 0, 0, 0 };
        unsigned int bits[4] = { 0x7f800000u, 0xff800000u, 0x007fffffu, 0x3f808000u }; /* (NaN payloads: the GPU's own) */
        for (int i = 0; i < 4; i++) memcpy(&v[8 + i], &bits[i], 4);
        size_t nr = 4096 + 12;
        float *x = hrand(nr, 100), *ref = hbuf(nr);
        memcpy(x, v, sizeof v);
        float *gx = dup_f(x, nr), *gy = dalloc(nr * 4);
        C->round_bf16(ref, x, (int64_t)nr);
        G->round_bf16(gy, gx, (int64_t)nr);
        cmpb("round_bf16 (ties, specials)", gy, ref, nr, 0);
        G->round_bf16(gx, gx, (int64_t)nr); /* in place */
        cmpb("round_bf16 in place", gx, ref, nr, 0);
    }
    {   /* the gated activation into bf16 storage, then GEMMs reading it as A or as B (bf16 matmuls): the
         * same bits as the f32 activation through the bf16 GEMM (which rounds it the same way) */
        int64_t Mr = 37, Kr = 96, Nr = 29;
        size_t na = (size_t)(Mr * Kr);
        float *gt = hrand(na, 2), *up = hrand(na, 2), *W = hrand((size_t)(Nr * Kr), 1), *dy = hrand((size_t)(Mr * Nr), 1);
        float *dg = dup_f(gt, na), *du = dup_f(up, na), *dW = dup_f(W, (size_t)(Nr * Kr)), *ddy = dup_f(dy, (size_t)(Mr * Nr));
        uint16_t *h16 = (uint16_t *)calloc(na, 2), *g16 = (uint16_t *)calloc(na, 2);
        void *d16 = dalloc(na * 2);
        float *a32 = dalloc(na * 4), *y1 = dalloc((size_t)(Mr * Nr) * 4), *y2 = dalloc((size_t)(Mr * Nr) * 4);
        float *w1 = dalloc((size_t)(Nr * Kr) * 4), *w2 = dalloc((size_t)(Nr * Kr) * 4);
        vc_set_matmul_precision(VC_PREC_BF16);
        C->act_mul_fwd_bf16(h16, gt, up, (int64_t)na, (int64_t)na, (int64_t)na, 0);
        G->act_mul_fwd_bf16(d16, dg, du, (int64_t)na, (int64_t)na, (int64_t)na, 0);
        G->d2h(g16, d16, na * 2);
        CHECK_MSG(!memcmp(g16, h16, na * 2), "act_mul_fwd_bf16 differs from the CPU backend");
        G->act_mul_fwd(a32, dg, du, (int64_t)na, (int64_t)na, (int64_t)na, 0);
        G->gemm(0, 1, Mr, Nr, Kr, 1.0f, a32, Kr, dW, Kr, 0.0f, y1, Nr);
        G->gemm_b16(0, 1, Mr, Nr, Kr, 1.0f, d16, 1, Kr, dW, 0, Kr, 0.0f, y2, Nr);
        cmpb("gemm_b16 (bf16 A) vs gemm on the f32 activation", y2, fetch(y1, (size_t)(Mr * Nr)), (size_t)(Mr * Nr), 0);
        G->zero(w1, (size_t)(Nr * Kr) * 4);
        G->zero(w2, (size_t)(Nr * Kr) * 4);
        G->gemm(1, 0, Nr, Kr, Mr, 1.0f, ddy, Nr, a32, Kr, 1.0f, w1, Kr);
        G->gemm_b16(1, 0, Nr, Kr, Mr, 1.0f, ddy, 0, Nr, d16, 1, Kr, 1.0f, w2, Kr);
        cmpb("gemm_b16 (bf16 B, weight gradient)", w2, fetch(w1, (size_t)(Nr * Kr)), (size_t)(Nr * Kr), 0);
        vc_set_matmul_precision(VC_PREC_F32);
        printf("  %-52s bits identical: %s\n", "act_mul_fwd_bf16", memcmp(g16, h16, na * 2) ? "no" : "yes");
        free(h16);
        free(g16);
    }
    float *ym = hbuf((size_t)(Tm * Hm)), *gym = dalloc((size_t)(Tm * Hm) * 4);
    PICK(moe_combine_fwd)(ym, Y, w, inv, Tm, K, Hm);
    G->moe_combine_fwd(gym, gY, gw, ginv, Tm, K, Hm);
    cmpb("moe combine fwd (k ascending)", gym, ym, (size_t)(Tm * Hm), 1e-6);
    float *dym = hrand((size_t)(Tm * Hm), 1), *gdym = dup_f(dym, Tm * Hm);
    float *dYm = hbuf((size_t)(G_ * Hm)), *dwm = hbuf((size_t)G_);
    float *gdYm = dalloc((size_t)(G_ * Hm) * 4), *gdwm = dalloc((size_t)G_ * 4);
    PICK(moe_combine_bwd)(dYm, dwm, dym, Y, w, inv, Tm, K, Hm);
    G->moe_combine_bwd(gdYm, gdwm, gdym, gY, gw, ginv, Tm, K, Hm);
    cmpb("moe combine bwd dY", gdYm, dYm, (size_t)(G_ * Hm), 0);
    cmpb("moe combine bwd dw (row dots)", gdwm, dwm, (size_t)G_, 1e-5);
    float *dx = hrand((size_t)(Tm * Hm), 1), *gdx = dup_f(dx, Tm * Hm);
    PICK(moe_scatter_add)(dx, src, inv, Tm, K, Hm);
    G->moe_scatter_add(gdx, gsrc, ginv, Tm, K, Hm);
    cmpb("moe scatter add (accumulated, k ascending)", gdx, dx, (size_t)(Tm * Hm), 1e-6);
    free(inv);
    check_sticky("embedding / moe");
    release_all();
}

static void test_optim_entries(void) {
    printf("optimiser entries\n");
    enum { NP = 4 };
    size_t sizes[NP] = { 70000, 1, 16385, 1029 }; /* the last one's arrays a float off 16-byte runs below (adamw) */
    const float *gx[NP];
    double ref = 0, got = 0, got2 = 0;
    for (int i = 0; i < NP; i++) {
        float *h = hrand(sizes[i], 2);
        for (size_t j = 0; j < sizes[i]; j++) ref += (double)h[j] * h[j];
        gx[i] = dup_f(h, sizes[i]);
    }
    CHECK_OK(G->sumsq(gx, sizes, NP, &got));
    CHECK_OK(G->sumsq(gx, sizes, NP, &got2));
    printf("  %-44s ref %.15g gpu %.15g rel %.2e; rerun %s\n", "sumsq", ref, got, fabs(got - ref) / ref,
           got == got2 ? "identical" : "DIFFERENT  FAIL");
    CHECK(fabs(got - ref) <= 1e-12 * ref && got == got2);
    /* scale_tensors (clipping's one launch): the bits of one scale per tensor */
    float *sx[NP], *sy[NP];
    for (int i = 0; i < NP; i++) {
        float *h = hrand(sizes[i], 3);
        sx[i] = dup_f(h, sizes[i]);
        sy[i] = dup_f(h, sizes[i]);
        G->scale(sy[i], sy[i], 0.3721f, (int64_t)sizes[i]);
    }
    G->scale_tensors(sx, sizes, NP, 0.3721f);
    for (int i = 0; i < NP; i++) same_bits("scale_tensors vs a scale per tensor", sx[i], sy[i], sizes[i]);
    /* adamw through the table: bit-exact against vc_adamw_step on host memory */
    vc_optim_param cp[NP], gp[NP];
    float *gm[NP], *gv[NP];
    for (int i = 0; i < NP; i++) {
        float *w = hrand(sizes[i], 1), *g = hrand(sizes[i], 1);
        cp[i] = (vc_optim_param){ .w = w, .g = g, .n = sizes[i], .decay = i != 1 };
        const size_t off = i == 3; /* one float in: the scalar path, element by element */
        float *dw = dalloc((sizes[i] + off) * 4), *dg = dalloc((sizes[i] + off) * 4);
        G->h2d(dw + off, w, sizes[i] * 4);
        G->h2d(dg + off, g, sizes[i] * 4);
        gp[i] = (vc_optim_param){ .w = dw + off, .g = dg + off, .n = sizes[i], .decay = i != 1 };
        gm[i] = (float *)dalloc((sizes[i] + off) * 4) + off;
        gv[i] = (float *)dalloc((sizes[i] + off) * 4) + off;
        G->zero(gm[i], sizes[i] * 4);
        G->zero(gv[i], sizes[i] * 4);
    }
    vc_adamw_config cfg;
    vc_adamw_config_default(&cfg);
    vc_adamw opt;
    const vc_backend *prev = vc_be();
    vc_set_backend(C);
    CHECK_OK(vc_adamw_init(&opt, &cfg, cp, NP));
    for (int step = 1; step <= 2; step++) {
        if (step == 2) opt.cfg.grad_scale = cfg.grad_scale = 0.37f; /* clipping's factor read by the step */
        CHECK_OK(vc_adamw_step(&opt, 2e-3));
        CHECK_OK(G->adamw(gp, gm, gv, NP, &cfg, step, 2e-3));
    }
    vc_set_backend(prev);
    for (int i = 0; i < NP; i++) {
        /* after the ops refactor the host optimiser's weights live in CPU-backend memory = host memory */
        float *w = fetch(gp[i].w, sizes[i]);
        char nm[64];
        snprintf(nm, sizeof nm, "adamw entry 2 steps tensor %d", i);
        cmp_host(nm, w, cp[i].w, sizes[i], 0);
    }
    vc_adamw_free(&opt);
    check_sticky("optimiser");
    release_all();
}

/* ---- bf16 matmul precision ---- */
static float bf16_round(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    memcpy(&f, &u, 4);
    return f;
}

static void test_gemm_bf16(void) {
    printf("gemm with VC_PREC_BF16 (reference: naive f32/double product of bf16-rounded inputs)\n");
    static const int64_t shapes[][3] = { { 96, 200, 512 }, { 33, 65, 100 }, { 1, 896, 896 } };
    for (int s = 0; s < 3; s++)
        for (int v = 0; v < 4; v++) {
            int ta = v & 1, tb = v >> 1;
            int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
            int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2, ra = ta ? K : M, rb = tb ? N : K;
            float *A = hrand((size_t)(ra * lda), 1), *B = hrand((size_t)(rb * ldb), 1), *Cm = hrand((size_t)(M * ldc), 1);
            /* padding columns hold NaN: the bf16 packing must not read them into the product */
            for (int64_t r = 0; r < ra; r++) A[r * lda + lda - 1] = NAN;
            float *gA = dup_f(A, ra * lda), *gB = dup_f(B, rb * ldb), *gC = dup_f(Cm, M * ldc);
            float *ref = clone(Cm, (size_t)(M * ldc)), *exact = clone(Cm, (size_t)(M * ldc));
            float alpha = 0.7f, beta = v == 1 ? 0.0f : 0.5f;
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    double acc = 0, ex = 0;
                    for (int64_t k = 0; k < K; k++) {
                        float a = ta ? A[k * lda + i] : A[i * lda + k], b = tb ? B[j * ldb + k] : B[k * ldb + j];
                        acc += (double)bf16_round(a) * bf16_round(b);
                        ex += (double)a * b;
                    }
                    float c0 = Cm[i * ldc + j];
                    ref[i * ldc + j] = (float)(alpha * acc + (beta == 0 ? 0 : beta * c0));
                    exact[i * ldc + j] = (float)(alpha * ex + (beta == 0 ? 0 : beta * c0));
                }
            vc_set_matmul_precision(VC_PREC_BF16);
            G->gemm(ta, tb, M, N, K, alpha, gA, lda, gB, ldb, beta, gC, ldc);
            vc_set_matmul_precision(VC_PREC_F32);
            char nm[96];
            snprintf(nm, sizeof nm, "bf16 gemm %lldx%lldx%lld ta=%d tb=%d", (long long)M, (long long)N, (long long)K, ta,
                     tb);
            float *got = fetch(gC, (size_t)(M * ldc));
            /* C's padding columns are not part of the product: compare them too (must be untouched) */
            cmp_host(nm, got, ref, (size_t)(M * ldc), 1e-5);
            double dmax = 0, rmax = 0;
            for (int64_t i = 0; i < M * ldc; i++) {
                dmax = fmax(dmax, fabs((double)got[i] - exact[i]));
                rmax = fmax(rmax, fabs((double)exact[i]));
            }
            printf("    differs from the exact f32 product by rel %.2e (bf16 rounding visible)\n", dmax / rmax);
            CHECK_MSG(dmax / rmax > 1e-5, "%s: result looks like an f32 GEMM", nm);
        }
    /* the LM head's GEMMs follow the precision: GPU bf16 on raw inputs == CPU f32 on pre-rounded inputs */
    int64_t T = 40, H = 128, V = 3001;
    float *h = hrand((size_t)(T * H), 1), *W = hrand((size_t)(V * H), 0.2f);
    int32_t *tg = (int32_t *)hbuf((size_t)T);
    for (int64_t t = 0; t < T; t++) tg[t] = (int32_t)((t * 7919) % V);
    float *gh = dup_f(h, T * H), *gW = dup_f(W, V * H), *glogp = dalloc((size_t)T * 4), *gent = dalloc((size_t)T * 4);
    float *glse = dalloc((size_t)T * 4);
    int32_t *gtg = dcopy(tg, (size_t)T * 4);
    for (int64_t i = 0; i < T * H; i++) h[i] = bf16_round(h[i]);
    for (int64_t i = 0; i < V * H; i++) W[i] = bf16_round(W[i]);
    float *logp = hbuf((size_t)T), *ent = hbuf((size_t)T), *lse = hbuf((size_t)T);
    vc_head_desc hd = { .T = T, .H = H, .V = V, .softcap = 0.0f, .scale = 1.0f };
    C->lm_head_fwd(logp, ent, NULL, lse, h, W, NULL, tg, &hd);
    vc_set_matmul_precision(VC_PREC_BF16);
    G->lm_head_fwd(glogp, gent, NULL, glse, gh, gW, NULL, gtg, &hd);
    vc_set_matmul_precision(VC_PREC_F32);
    cmp("lm head fwd bf16 logp", glogp, logp, (size_t)T, 1e-5);
    cmp("lm head fwd bf16 entropy", gent, ent, (size_t)T, 1e-5);
    /* backward: dZ rounded to bf16 as the row kernel writes it into a held copy (no f32 rows) gives the bits of
     * dZ written in f32 and rounded by each GEMM (VERLC_CUDA_HOLD=0), in one slice and in several; near the CPU */
    float *dl = hrand((size_t)T, 1), *de = hrand((size_t)T, 1), *gdl = dup_f(dl, T), *gde = dup_f(de, T);
    float *dh = hbuf((size_t)(T * H)), *dW = hbuf((size_t)(V * H));
    C->lm_head_bwd(dh, dW, NULL, dl, de, lse, ent, h, W, NULL, tg, &hd);
    float *gdh[2][2], *gdW[2][2];
    vc_set_matmul_precision(VC_PREC_BF16);
    for (int sl = 0; sl < 2; sl++)
        for (int hold = 0; hold < 2; hold++) {
            if (sl) setenv("VERLC_CUDA_HEAD_SLICE", "1000", 1);
            if (!hold) setenv("VERLC_CUDA_HOLD", "0", 1);
            gdh[sl][hold] = dalloc((size_t)(T * H) * 4);
            gdW[sl][hold] = dalloc((size_t)(V * H) * 4);
            G->fill(gdh[sl][hold], 0.0f, T * H);
            G->fill(gdW[sl][hold], 0.0f, V * H);
            G->lm_head_bwd(gdh[sl][hold], gdW[sl][hold], NULL, gdl, gde, glse, gent, gh, gW, NULL, gtg, &hd);
            unsetenv("VERLC_CUDA_HEAD_SLICE");
            unsetenv("VERLC_CUDA_HOLD");
        }
    /* what is kept: T V floats under VERLC_CUDA_HEAD_KEEP's bytes (0: nothing; K / M / G), a malformed value the
     * default (said on stderr), nothing with a bf16 head */
    {
        const size_t want = (size_t)(T * V) * 4;
        static const struct { const char *env; size_t got; } kc[] = {
            { NULL, 1 }, { "0", 0 }, { "1000", 0 }, { "1G", 1 }, { "480160", 1 }, { "480159", 0 }, { "4x", 1 }, { "8GB", 1 },
        };
        for (size_t i = 0; i < sizeof kc / sizeof kc[0]; i++) {
            if (kc[i].env) setenv("VERLC_CUDA_HEAD_KEEP", kc[i].env, 1);
            size_t got = G->lm_head_keep(&hd, NULL);
            CHECK_MSG(got == (kc[i].got ? want : 0), "lm_head_keep with VERLC_CUDA_HEAD_KEEP=%s: %zu bytes (T V floats: %zu)",
                      kc[i].env ? kc[i].env : "(unset)", got, want);
            unsetenv("VERLC_CUDA_HEAD_KEEP");
        }
        setenv("VERLC_HEAD_BF16", "1", 1);
        CHECK_MSG(G->lm_head_keep(&hd, NULL) == 0, "bf16 logits kept");
        unsetenv("VERLC_HEAD_BF16");
    }
    /* with the forward's logits kept (vc_head_desc.keep): the backward reads them: the same bits as forming them
     * again, dZ held as written; one slice and several */
    for (int sl = 0; sl < 2; sl++) {
        if (sl) setenv("VERLC_CUDA_HEAD_SLICE", "1000", 1);
        vc_head_desc kd = hd;
        kd.keep = dalloc((size_t)(T * V) * 4);
        float *klogp = dalloc((size_t)T * 4), *kent = dalloc((size_t)T * 4), *klse = dalloc((size_t)T * 4);
        float *kdh = dalloc((size_t)(T * H) * 4), *kdW = dalloc((size_t)(V * H) * 4);
        G->fill(kdh, 0.0f, T * H);
        G->fill(kdW, 0.0f, V * H);
        G->lm_head_fwd(klogp, kent, NULL, klse, gh, gW, NULL, gtg, &kd);
        G->lm_head_bwd(kdh, kdW, NULL, gdl, gde, glse, gent, gh, gW, NULL, gtg, &kd);
        unsetenv("VERLC_CUDA_HEAD_SLICE");
        char nm[96];
        snprintf(nm, sizeof nm, "lm head bwd bf16 dh, %s, logits kept", sl ? "slices" : "1 slice");
        same_bits_as(nm, kdh, gdh[sl][1], (size_t)(T * H));
        snprintf(nm, sizeof nm, "lm head bwd bf16 dW, %s, logits kept", sl ? "slices" : "1 slice");
        same_bits_as(nm, kdW, gdW[sl][1], (size_t)(V * H));
        if (!sl) same_bits_as("lm head fwd bf16 logp, logits kept", klogp, glogp, (size_t)T);
    }
    vc_set_matmul_precision(VC_PREC_F32);
    cmp("lm head bwd bf16 dh", gdh[0][1], dh, (size_t)(T * H), 1e-2);
    cmp("lm head bwd bf16 dW", gdW[0][1], dW, (size_t)(V * H), 1e-2);
    for (int sl = 0; sl < 2; sl++) {
        char nm[96];
        snprintf(nm, sizeof nm, "lm head bwd bf16 dh, %s: dZ held as written vs rounded per GEMM", sl ? "slices" : "1 slice");
        same_bits(nm, gdh[sl][1], gdh[sl][0], (size_t)(T * H));
        snprintf(nm, sizeof nm, "lm head bwd bf16 dW, %s: dZ held as written vs rounded per GEMM", sl ? "slices" : "1 slice");
        same_bits(nm, gdW[sl][1], gdW[sl][0], (size_t)(V * H));
    }
    /* VERLC_HEAD_BF16=1: the logits in bf16 (autocast's); log-probs and entropies against the host's on the f32
     * products rounded to bf16 (a product whose f32 sum lands beside a rounding boundary may round the other way on
     * the device: one bf16 ulp of one logit), the gradients near the CPU's f32-logit ones; in one slice and in several */
    double *zr = (double *)malloc(sizeof(double) * (size_t)V);
    float *rlogp = hbuf((size_t)T), *rent = hbuf((size_t)T);
    for (int64_t t = 0; t < T; t++) {
        double mx = -INFINITY, se = 0, sz = 0;
        for (int64_t v = 0; v < V; v++) {
            float acc = 0;
            for (int64_t k = 0; k < H; k++) acc += h[t * H + k] * W[v * H + k];
            zr[v] = bf16_round(acc);
            mx = fmax(mx, zr[v]);
        }
        for (int64_t v = 0; v < V; v++) se += exp(zr[v] - mx), sz += exp(zr[v] - mx) * zr[v];
        double L = mx + log(se);
        rlogp[t] = (float)(zr[tg[t]] - L);
        rent[t] = (float)(L - sz / se);
    }
    free(zr);
    setenv("VERLC_HEAD_BF16", "1", 1);
    vc_set_matmul_precision(VC_PREC_BF16);
    double b16err = 0; /* the bf16-logit path's worst log-prob error */
    for (int sl = 0; sl < 2; sl++) {
        if (sl) setenv("VERLC_CUDA_HEAD_SLICE", "1000", 1);
        G->lm_head_fwd(glogp, gent, NULL, glse, gh, gW, NULL, gtg, &hd);
        float *gb16dh = dalloc((size_t)(T * H) * 4), *gb16dW = dalloc((size_t)(V * H) * 4);
        G->fill(gb16dh, 0.0f, T * H);
        G->fill(gb16dW, 0.0f, V * H);
        G->lm_head_bwd(gb16dh, gb16dW, NULL, gdl, gde, glse, gent, gh, gW, NULL, gtg, &hd);
        unsetenv("VERLC_CUDA_HEAD_SLICE");
        char nm[96];
        snprintf(nm, sizeof nm, "lm head fwd, bf16 logits (%s): logp", sl ? "slices" : "1 slice");
        cmp(nm, glogp, rlogp, (size_t)T, 2e-4);
        snprintf(nm, sizeof nm, "lm head fwd, bf16 logits (%s): entropy", sl ? "slices" : "1 slice");
        cmp(nm, gent, rent, (size_t)T, 2e-4);
        float *got = fetch(glogp, (size_t)T);
        for (int64_t t = 0; t < T; t++) b16err = fmax(b16err, fabs(got[t] - rlogp[t]));
        snprintf(nm, sizeof nm, "lm head bwd, bf16 logits (%s): dh", sl ? "slices" : "1 slice");
        cmp(nm, gb16dh, dh, (size_t)(T * H), 2e-2);
        snprintf(nm, sizeof nm, "lm head bwd, bf16 logits (%s): dW", sl ? "slices" : "1 slice");
        cmp(nm, gb16dW, dW, (size_t)(V * H), 2e-2);
    }
    unsetenv("VERLC_HEAD_BF16");
    vc_set_matmul_precision(VC_PREC_F32);
    /* the f32-logit log-probs are off the bf16-logit reference by far more than the bf16 path is (it is taken) */
    double off = 0;
    for (int64_t t = 0; t < T; t++) off = fmax(off, fabs(logp[t] - rlogp[t]));
    printf("  log-probs off the bf16-logit reference: f32 logits %.2e, the bf16-logit path %.2e\n", off, b16err);
    CHECK_MSG(off > 10 * b16err + 1e-5, "bf16 logits not told apart from f32 ones (%.2e vs %.2e)", b16err, off);
    check_sticky("bf16");
    release_all();
}

/* ---- paged attention forward ---- */
typedef struct {
    const char *name;
    int nh, nkv, hd, dv, window, P, nseq;
    float cap;
    int64_t qlen[4], kvlen[4];
    int sinks; /* gpt-oss's attention sinks */
    int chunk; /* Llama 4's chunked attention */
    int sel;   /* DeepSeek Sparse Attention: each query row sees a random half of its keys (its own among them) */
} pcase;

/* keys in chunks (VERLC_CUDA_PAGED_SPLIT) on the tensor-core kernel: chunks of 64 keys as near the CPU as whole rows, the
 * same bits over 1 block a row and key/value head, 3 and the default count, and other bits than whole rows where a decode
 * row sees over 64 keys (the chunks ran; rows in one chunk: the same bits); a prefill's rows on the paged kernel in chunks
 * too, as near the CPU */
static void paged_chunks(const pcase *a, const vc_attn_desc *d, const vc_attn_desc *g16d, const float *gqr,
                         const float *go, const float *o, const float *lse, size_t no, size_t nl) {
    static const char *conf[3] = { "64", "64,1", "64,3" };
    float *gs[4], *gl[4];
    vc_set_matmul_precision(VC_PREC_BF16);
    for (int k = 0; k < 4; k++) {
        gs[k] = dalloc(no * 4), gl[k] = dalloc(nl * 4);
        setenv("VERLC_CUDA_PAGED_SPLIT", conf[k % 3], 1);
        if (k == 3) setenv("VERLC_CUDA_PAGED_PREFILL", "paged", 1); /* prefill rows on the paged kernel too */
        G->attn_fwd(gs[k], gl[k], gqr, g16d);
    }
    unsetenv("VERLC_CUDA_PAGED_SPLIT");
    unsetenv("VERLC_CUDA_PAGED_PREFILL");
    vc_set_matmul_precision(VC_PREC_F32);
    cmp("paged, bf16 matmuls, keys in chunks of 64: output", gs[0], o, no, 1e-2);
    cmp("paged, bf16 matmuls, keys in chunks of 64: lse", gl[0], lse, nl, 2e-4);
    cmp("paged, keys in chunks of 64, prefill rows on the paged kernel: output", gs[3], o, no, 1e-2);
    cmp("paged, keys in chunks of 64, prefill rows on the paged kernel: lse", gl[3], lse, nl, 2e-4);
    same_bits_as("paged, keys in chunks of 64: 1 block a row and head vs the default (output)", gs[1], gs[0], no);
    same_bits_as("paged, keys in chunks of 64: 3 blocks a row and head vs the default (output)", gs[2], gs[0], no);
    same_bits_as("paged, keys in chunks of 64: 1 block a row and head vs the default (lse)", gl[1], gl[0], nl);
    /* decode rows over 64 keys, rows within one chunk (no window or chunked attention), where the tensor-core kernel
     * takes the heads (64 to 128 wide, keys and values alike, at most 16 query heads a key/value head) */
    const int mma = ((a->hd == a->dv && (a->hd == 64 || a->hd == 80 || a->hd == 96 || a->hd == 128 || a->hd == 256)) ||
                     (a->hd == 192 && a->dv == 128)) && a->nh / a->nkv <= 16;
    int64_t split = 0, whole = 0;
    for (int s = 0; s < a->nseq && mma && !a->window && !a->chunk; s++)
        if (a->qlen[s] == 1) split += a->kvlen[s] > 64, whole += a->kvlen[s] <= 64;
    if (!split && !whole) return;
    const float *h = fetch(gs[0], no), *w = fetch(go, no);
    int64_t differ = 0, same_rows = 0, rows1 = 0;
    for (int s = 0; s < a->nseq; s++) {
        if (a->qlen[s] != 1 || a->window || a->chunk || !mma) continue;
        size_t r0 = (size_t)d->q_start[s] * a->nh * a->dv, n = (size_t)a->nh * a->dv;
        int same = !memcmp(h + r0, w + r0, n * sizeof(float));
        if (a->kvlen[s] > 64) differ += !same;
        else rows1++, same_rows += same;
    }
    printf("  keys in chunks of 64: %lld of %lld decode rows over 64 keys other bits than whole rows, %lld of %lld "
           "within one chunk the same bits\n", (long long)differ, (long long)split, (long long)same_rows, (long long)rows1);
    CHECK_MSG(differ == split && same_rows == rows1, "keys in chunks: %lld of %lld split rows changed, %lld of %lld "
              "unsplit rows unchanged", (long long)differ, (long long)split, (long long)same_rows, (long long)rows1);
}

/* bf16 matmuls on bf16 pages (q rounded to bf16 for the CPU): the prefill rows through the flash kernels, the decode
 * rows through the tensor-core paged kernel where the heads allow (64, 80, 96, 128 or 256 wide, MLA's 192 / 128; q and P in bf16): within
 * the bf16 kernels' tolerances of the CPU; the last sequence alone gives the same bits; VERLC_CUDA_PAGED_MMA=0 puts the decode rows
 * back on the f32 kernel (the CPU's accuracy where there are no prefill rows) */
static void paged_bf16_matmuls(const pcase *a, const vc_attn_desc *d, const vc_attn_desc *c16,
                               const vc_attn_desc *g16d, const float *q, size_t no, size_t nl) {
    const int prefill = d->q_start[a->nseq] > a->nseq, last = a->nseq - 1;
    size_t nq = (size_t)(d->q_start[a->nseq] * a->nh * a->hd);
    float *qr = hbuf(nq), *o = hbuf(no), *lse = hbuf(nl);
    for (size_t i = 0; i < nq; i++) qr[i] = vc_bf16_to_f32(vc_f32_to_bf16(q[i]));
    float *gqr = dup_f(qr, nq), *go = dalloc(no * 4), *glse = dalloc(nl * 4), *go1 = dalloc(no * 4);
    float *gof = dalloc(no * 4), *glf = dalloc(nl * 4);
    int64_t qs1[2] = { d->q_start[last], d->q_start[last + 1] };
    vc_attn_desc g1 = *g16d;
    g1.n_seq = 1;
    g1.q_start = qs1;
    g1.kv_len = d->kv_len + last;
    g1.k_pages = g16d->k_pages + last;
    g1.v_pages = g16d->v_pages + last;
    C->attn_fwd(o, lse, qr, c16);
    vc_set_matmul_precision(VC_PREC_BF16);
    G->attn_fwd(go, glse, gqr, g16d);
    G->fill(go1, 0.0f, (int64_t)no);
    G->attn_fwd(go1, NULL, gqr, &g1);
    setenv("VERLC_CUDA_PAGED_MMA", "0", 1);
    G->attn_fwd(gof, glf, gqr, g16d);
    unsetenv("VERLC_CUDA_PAGED_MMA");
    vc_set_matmul_precision(VC_PREC_F32);
    cmp("paged, bf16 matmuls (q and P in bf16): output", go, o, no, 1e-2);
    cmp("paged, bf16 matmuls (q and P in bf16): lse", glse, lse, nl, 2e-4);
    size_t o0 = (size_t)(qs1[0] * a->nh * a->dv), on = (size_t)((qs1[1] - qs1[0]) * a->nh * a->dv);
    same_bits("paged, bf16 matmuls: last sequence alone vs in the batch", go1 + o0, go + o0, on);
    cmp("paged, bf16 matmuls, VERLC_CUDA_PAGED_MMA=0: output", gof, o, no, prefill ? 1e-2 : 1e-4);
    cmp("paged, bf16 matmuls, VERLC_CUDA_PAGED_MMA=0: lse", glf, lse, nl, prefill ? 2e-4 : 1e-4);
    paged_chunks(a, d, g16d, gqr, go, o, lse, no, nl);
}

/* the same pages in bf16 (the rollout's KV pool): vs the CPU on the same bf16 pages, and the same bits as float pages
 * holding the bf16-rounded values (both kernels read a bf16 value exactly) */
static void paged_bf16(const pcase *a, const vc_attn_desc *d, const vc_attn_desc *gd, const float *pool,
                       int64_t pool_n, const float *q, const float *gq, size_t no, size_t nl) {
    uint16_t *p16 = (uint16_t *)hbuf((size_t)pool_n / 2 + 1);
    float *pr = hbuf((size_t)pool_n);
    for (int64_t i = 0; i < pool_n; i++) {
        p16[i] = vc_f32_to_bf16(pool[i]);
        pr[i] = vc_bf16_to_f32(p16[i]);
    }
    char *g16 = (char *)dcopy(p16, (size_t)pool_n * 2);
    float *gpr = dup_f(pr, (size_t)pool_n);
    int64_t npg = 0;
    for (int s = 0; s < a->nseq; s++) npg += (a->kvlen[s] + a->P - 1) / a->P;
    /* every page pointer moved to the same element of the other pools */
    const float **pp = calloc((size_t)npg * 6, sizeof(float *)); /* [w][k|v] */
    const float *const *seqs[3][2][4];
    const float *bases[3] = { (const float *)(const void *)p16, (const float *)(const void *)g16, gpr };
    int64_t at = 0;
    for (int w = 0; w < 3; w++)
        for (int side = 0; side < 2; side++)
            for (int s = 0; s < a->nseq; s++) {
                const float *const *from = side ? d->v_pages[s] : d->k_pages[s];
                const float **to = pp + at;
                for (int64_t i = 0, n = (a->kvlen[s] + a->P - 1) / a->P; i < n; i++, at++) {
                    size_t e = (size_t)(from[i] - pool);
                    to[i] = w == 2 ? bases[2] + e : (const float *)(const void *)((const char *)bases[w] + e * 2);
                }
                seqs[w][side][s] = to;
            }
    vc_attn_desc c16 = *d, g16d = *gd, gr = *gd;
    c16.k_pages = seqs[0][0], c16.v_pages = seqs[0][1], c16.kv_bf16 = 1;
    g16d.k_pages = seqs[1][0], g16d.v_pages = seqs[1][1], g16d.kv_bf16 = 1;
    gr.k_pages = seqs[2][0], gr.v_pages = seqs[2][1];
    float *o = hbuf(no), *lse = hbuf(nl), *go = dalloc(no * 4), *glse = dalloc(nl * 4), *gor = dalloc(no * 4);
    float *glr = dalloc(nl * 4);
    C->attn_fwd(o, lse, q, &c16);
    G->attn_fwd(go, glse, gq, &g16d);
    G->attn_fwd(gor, glr, gq, &gr);
    cmp("paged fwd, bf16 pages: output", go, o, no, 1e-4);
    cmp("paged fwd, bf16 pages: lse", glse, lse, nl, 1e-4);
    same_bits("paged fwd: bf16 pages vs float pages of the same values (output)", go, gor, no);
    same_bits("paged fwd: bf16 pages vs float pages of the same values (lse)", glse, glr, nl);
    paged_bf16_matmuls(a, d, &c16, &g16d, q, no, nl);
    free(pp);
}

/* a prefill call (sequences of several query rows) on the paged kernel alone (VERLC_CUDA_PAGED_PREFILL=paged) instead of
 * the flash kernels on the gathered keys: as close to the CPU, and the rows of its sequences of fewer than 16 rows
 * (decode rows, a speculative step's few: the paged kernel's by default) the same bits; with every sequence of 2 rows
 * or more on the flash kernels (VERLC_CUDA_PAGED_FLASH_ROWS=2) as close to the CPU */
static void paged_prefill_kernel(const pcase *a, const vc_attn_desc *gd, const int64_t *qs, const float *go,
                                 const float *o, const float *glse, const float *lse, const float *gq, size_t no,
                                 size_t nl) {
    float *gop = dalloc(no * 4), *glp = dalloc(nl * 4), *gf = dalloc(no * 4), *gfl = dalloc(nl * 4);
    setenv("VERLC_CUDA_PAGED_PREFILL", "paged", 1);
    G->attn_fwd(gop, glp, gq, gd);
    unsetenv("VERLC_CUDA_PAGED_PREFILL");
    setenv("VERLC_CUDA_PAGED_FLASH_ROWS", "2", 1);
    G->attn_fwd(gf, gfl, gq, gd);
    unsetenv("VERLC_CUDA_PAGED_FLASH_ROWS");
    cmp("paged fwd, prefill rows on the paged kernel: output", gop, o, no, 1e-4);
    cmp("paged fwd, prefill rows on the paged kernel: lse", glp, lse, nl, 1e-4);
    cmp("paged fwd, sequences of 2 rows or more on the flash kernels: output", gf, o, no, 1e-4);
    cmp("paged fwd, sequences of 2 rows or more on the flash kernels: lse", gfl, lse, nl, 1e-4);
    for (int s = 0; s < a->nseq; s++) {
        if (qs[s + 1] - qs[s] >= 16) continue;
        size_t r = (size_t)qs[s] * a->nh, n = (size_t)(qs[s + 1] - qs[s]);
        same_bits("paged fwd: a prefill call's rows of a short sequence on the paged kernel (output)", go + r * a->dv,
                  gop + r * a->dv, n * (size_t)(a->nh * a->dv));
        same_bits("paged fwd: a prefill call's rows of a short sequence on the paged kernel (lse)", glse + r, glp + r,
                  n * (size_t)a->nh);
    }
}

static void paged_case(const pcase *a) {
    printf("paged attention: %s (heads %d/%d, dims %d/%d, window %d, softcap %g, page %d)\n", a->name, a->nh, a->nkv,
           a->hd, a->dv, a->window, a->cap, a->P);
    int64_t kw = (int64_t)a->nkv * a->hd, vw = (int64_t)a->nkv * a->dv, row = kw + vw, P = a->P;
    int64_t qs[5] = { 0 }, kvl[4], npg = 0, pg0[4];
    for (int s = 0; s < a->nseq; s++) {
        qs[s + 1] = qs[s] + a->qlen[s];
        kvl[s] = a->kvlen[s];
        pg0[s] = npg;
        npg += (kvl[s] + P - 1) / P;
    }
    int64_t Tq = qs[a->nseq], pool_n = (npg + 2) * P * row;
    float *pool = hrand((size_t)pool_n, 1), *gpool = dup_f(pool, pool_n);
    /* pages in reverse order in the pool, so page order != address order */
    const float **hk = calloc((size_t)npg * 4, sizeof(float *)), **dk = hk + npg, **hv = dk + npg, **dv = hv + npg;
    const float *const *hks[4], *const *hvs[4], *const *dks[4], *const *dvs[4];
    for (int64_t i = 0; i < npg; i++) {
        int64_t off = (npg - i) * P * row;
        hk[i] = pool + off;
        hv[i] = pool + off + kw;
        dk[i] = gpool + off;
        dv[i] = gpool + off + kw;
    }
    for (int s = 0; s < a->nseq; s++) {
        hks[s] = hk + pg0[s];
        hvs[s] = hv + pg0[s];
        dks[s] = dk + pg0[s];
        dvs[s] = dv + pg0[s];
    }
    size_t nq = (size_t)(Tq * a->nh * a->hd), no = (size_t)(Tq * a->nh * a->dv), nl = (size_t)(Tq * a->nh);
    float *q = hrand(nq, 1), *o = hbuf(no), *lse = hbuf(nl), *gq = dup_f(q, nq);
    float *go = dalloc(no * 4), *glse = dalloc(nl * 4);
    vc_attn_desc d = { .n_seq = a->nseq, .q_start = qs, .kv_len = kvl, .k_stride = row, .v_stride = row,
                       .n_head = a->nh, .n_kv_head = a->nkv, .head_dim = a->hd, .v_head_dim = a->dv,
                       .scale = 1.0f / sqrtf((float)a->hd), .softcap = a->cap, .window = a->window, .causal = 1,
                       .k_pages = hks, .v_pages = hvs, .page_tokens = P, .chunk = a->chunk };
    vc_attn_desc gd = d;
    gd.k_pages = dks;
    gd.v_pages = dvs;
    if (a->sinks) {
        float *sk = hrand((size_t)a->nh, 3);
        d.sinks = sk;
        gd.sinks = dup_f(sk, a->nh);
    }
    if (a->sel) {
        int64_t words = 0;
        for (int s = 0; s < a->nseq; s++) words = (kvl[s] + 31) / 32 > words ? (kvl[s] + 31) / 32 : words;
        uint32_t *h = (uint32_t *)hbuf((size_t)(Tq * words));
        for (int s = 0; s < a->nseq; s++)
            for (int64_t r = qs[s]; r < qs[s + 1]; r++)
                for (int64_t j = 0; j < kvl[s]; j++)
                    if (j == kvl[s] - (qs[s + 1] - r) || urand() > 0) h[r * words + j / 32] |= 1u << (j % 32);
        d.sel = h;
        gd.sel = (const uint32_t *)dcopy(h, (size_t)(Tq * words) * 4);
        d.sel_words = gd.sel_words = words;
    }
    C->attn_fwd(o, lse, q, &d);
    G->attn_fwd(go, glse, gq, &gd);
    cmp("paged fwd output", go, o, no, 1e-4);
    cmp("paged fwd lse", glse, lse, nl, 1e-4);
    /* one query head per block instead of the heads sharing a key/value head together: the same bits */
    float *gou = dalloc(no * 4), *glu = dalloc(nl * 4);
    setenv("VERLC_CUDA_PAGED_GROUPS", "0", 1);
    G->attn_fwd(gou, glu, gq, &gd);
    unsetenv("VERLC_CUDA_PAGED_GROUPS");
    same_bits("paged fwd: heads grouped per key/value head vs one per block (output)", go, gou, no);
    same_bits("paged fwd: heads grouped per key/value head vs one per block (lse)", glse, glu, nl);
    /* batch invariance: the last sequence alone gives the same bits as inside the batch */
    int last = a->nseq - 1;
    int64_t qs1[2] = { qs[last], qs[last + 1] };
    vc_attn_desc g1 = gd;
    g1.n_seq = 1;
    g1.q_start = qs1;
    g1.kv_len = kvl + last;
    g1.k_pages = dks + last;
    g1.v_pages = dvs + last;
    float *go1 = dalloc(no * 4);
    G->fill(go1, 0.0f, (int64_t)no);
    G->attn_fwd(go1, NULL, gq, &g1);
    size_t o0 = (size_t)(qs[last] * a->nh * a->dv), on = (size_t)(a->qlen[last] * a->nh * a->dv);
    same_bits("paged fwd: last sequence alone vs in the batch", go1 + o0, go + o0, on);
    if (Tq > a->nseq) paged_prefill_kernel(a, &gd, qs, go, o, glse, lse, gq, no, nl);
    paged_bf16(a, &d, &gd, pool, pool_n, q, gq, no, nl);
    free(hk);
    check_sticky(a->name);
    release_all();
}

static void test_paged(void) {
    static const pcase cases[] = {
        { "decode, GQA 14/2 hd 64", 14, 2, 64, 64, 0, 16, 4, 0, { 1, 1, 1, 1 }, { 1, 17, 64, 300 } },
        { "decode, GQA 14/2 hd 64, rows over 512 keys", 14, 2, 64, 64, 0, 16, 4, 0, { 1, 1, 1, 1 }, { 40, 600, 513, 1500 } },
        { "decode, GQA 8/2 hd 128, window 700, attention sinks, rows over 512 keys", 8, 2, 128, 128, 700, 16, 3, 0,
          { 1, 1, 1 }, { 40, 900, 1500 }, 1 },
        { "decode and prefill, GQA 8/2 hd 256 (Qwen3.5's and Gemma's full layers), softcap 30", 8, 2, 256, 256, 0, 16,
          4, 30.0f, { 1, 20, 1, 1 }, { 90, 40, 3, 700 } },
        { "chunked prefill, GQA 8/2 hd 128, window 40, softcap 30", 8, 2, 128, 128, 40, 16, 3, 30.0f, { 20, 1, 64 },
          { 150, 33, 64 } },
        { "MLA-like dims 192/128, page 32", 4, 4, 192, 128, 0, 32, 2, 0, { 5, 70 }, { 100, 70 } },
        { "decode, GQA 12/2 hd 128 (6 heads a block), softcap 50", 12, 2, 128, 128, 0, 16, 3, 50.0f, { 1, 1, 1 },
          { 5, 129, 40 } },
        { "decode, GQA 32/2 hd 64 (8 heads a block), window 24", 32, 2, 64, 64, 24, 8, 2, 0, { 1, 1 }, { 90, 3 } },
        { "decode, GQA 8/2 hd 64, window 24, attention sinks", 8, 2, 64, 64, 24, 16, 3, 0, { 1, 1, 1 }, { 90, 3, 40 },
          1 },
        { "chunked prefill, GQA 8/2 hd 64, attention sinks", 8, 2, 64, 64, 0, 16, 2, 0, { 20, 64 }, { 70, 64 }, 1 },
        { "decode and prefill, GQA 8/2 hd 64, chunks of 24", 8, 2, 64, 64, 0, 16, 3, 0, { 1, 30, 1 }, { 90, 60, 24 }, 0,
          24 },
        { "decode and prefill, GQA 8/1 hd 512 (Gemma 4's full layers: 4 heads a block)", 8, 1, 512, 512, 0, 16, 3, 0,
          { 1, 20, 1 }, { 70, 40, 3 } },
        { "decode, GQA 4/2 hd 320, softcap 30", 4, 2, 320, 320, 0, 8, 2, 30.0f, { 1, 1 }, { 33, 9 } },
        { "decode and prefill, GQA 6/2 dims 34/20 (rows off 16-byte alignment, part-filled 8-column chunks)", 6, 2, 34,
          20, 0, 16, 3, 0, { 1, 9, 1 }, { 70, 40, 3 } },
        { "decode and prefill, MLA-like dims 192/128, selected keys (DSA)", 4, 4, 192, 128, 0, 16, 3, 0, { 1, 20, 1 },
          { 70, 40, 3 }, 0, 0, 1 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) paged_case(&cases[i]);
}

/* ---- DeepSeek Sparse Attention's selection: bits equal to the CPU's for keys in rows, f32 pages and bf16 pages ---- */
static void dsa_select_case(int layout, int64_t topk, int ties) {
    enum { NS = 3, NH = 8, HD = 16, KS = 24, P = 8 };
    static const char *LAYOUT[] = { "keys in rows", "f32 pages", "bf16 pages" };
    int64_t qs[NS + 1] = { 0, 1, 41, 44 }, kvl[NS] = { 300, 40, 3 }; /* decode; prefill; fewer keys than topk */
    int64_t rows = qs[NS], words = (300 + 31) / 32, npg = 0, pg0[NS];
    for (int s = 0; s < NS; s++) {
        pg0[s] = npg;
        npg += (kvl[s] + P - 1) / P;
    }
    size_t es = layout == 2 ? 2 : 4, nq = (size_t)(rows * NH * HD);
    /* one pool: rows of sequence s at page pg0[s] + j / P (pages in order, so "keys in rows" reads it as rows too) */
    size_t pool_n = (size_t)(npg * P * KS);
    float *pool = hrand(pool_n, 1);
    uint16_t *pool16 = (uint16_t *)hbuf(pool_n / 2 + 1);
    for (size_t i = 0; i < pool_n; i++) {
        if (layout == 2) pool16[i] = vc_f32_to_bf16(pool[i]);
    }
    char *gpool = (char *)dcopy(layout == 2 ? (void *)pool16 : (void *)pool, pool_n * es);
    const float **hp = calloc((size_t)npg * 2, sizeof(float *)), **gp = hp + npg;
    const float *const *hps[NS], *const *gps[NS];
    const float *hk[NS], *gk[NS];
    for (int64_t i = 0; i < npg; i++) {
        hp[i] = layout == 2 ? (const float *)(const void *)(pool16 + i * P * KS) : pool + i * P * KS;
        gp[i] = (const float *)(const void *)(gpool + (size_t)(i * P * KS) * es);
    }
    for (int s = 0; s < NS; s++) {
        hps[s] = hp + pg0[s];
        gps[s] = gp + pg0[s];
        hk[s] = hp[pg0[s]];
        gk[s] = gp[pg0[s]];
    }
    vc_attn_desc d = { .n_seq = NS, .q_start = qs, .kv_len = kvl, .k_stride = KS, .n_head = NH, .n_kv_head = 1,
                       .head_dim = HD, .v_head_dim = HD, .scale = 0.25f, .causal = 1 };
    if (layout) {
        d.page_tokens = P;
        d.kv_bf16 = layout == 2;
    }
    vc_attn_desc gd = d;
    d.k_seq = hk;
    gd.k_seq = gk;
    d.k_pages = hps;
    gd.k_pages = gps;
    float *q = hrand(nq, ties ? 0 : 1), *w = hrand((size_t)(rows * NH), 1); /* ties: every score 0 */
    uint32_t *sel = (uint32_t *)hbuf((size_t)(rows * words)), *got = (uint32_t *)hbuf((size_t)(rows * words));
    uint32_t *gsel = (uint32_t *)dalloc((size_t)(rows * words) * 4);
    C->dsa_select(sel, words, q, w, topk, &d);
    G->dsa_select(gsel, words, dup_f(q, nq), dup_f(w, (size_t)(rows * NH)), topk, &gd);
    vc_cuda_d2h(got, gsel, (size_t)(rows * words) * 4);
    int64_t bad = 0;
    for (int64_t i = 0; i < rows * words; i++) bad += got[i] != sel[i];
    printf("  dsa_select topk %-3lld %-12s%s %lld of %lld words differ from the cpu's%s\n", (long long)topk,
           LAYOUT[layout], ties ? " all tied" : "", (long long)bad, (long long)(rows * words), bad ? "  FAIL" : "");
    CHECK_MSG(!bad, "dsa_select topk %lld %s: %lld words differ", (long long)topk, LAYOUT[layout], (long long)bad);
    free(hp);
    check_sticky("dsa_select");
    release_all();
}

static void test_dsa_select(void) {
    printf("DeepSeek Sparse Attention selection\n");
    for (int layout = 0; layout < 3; layout++) {
        dsa_select_case(layout, 1, 0);
        dsa_select_case(layout, 64, 0);
        dsa_select_case(layout, 64, 1);
    }
}

/* timing only (a GPU; skipped on the emulator): paged attention with bf16 pages and matmuls in the Qwen2.5-0.5B shape
 * (14/2 heads of 64, pages of 16): 256 decode rows over 512 keys each on the tensor-core kernel and on the f32 one
 * (VERLC_CUDA_PAGED_MMA=0), 8 rows over 4,096 keys in chunks and whole, and a prefill of 32 x 128 rows through the flash
 * kernels and through the paged kernel (VERLC_CUDA_PAGED_PREFILL=paged) */
static double paged_time(const vc_attn_desc *d, float *o, float *lse, const float *q, const char *env, const char *val) {
    if (env) setenv(env, val, 1);
    G->attn_fwd(o, lse, q, d); /* warm-up */
    vc_cuda_sync();
    double t0 = vc_now();
    for (int r = 0; r < 5; r++) G->attn_fwd(o, lse, q, d);
    vc_cuda_sync();
    double t = (vc_now() - t0) / 5;
    if (env) unsetenv(env);
    return t;
}

static void paged_timing(void) {
    if (timing_skipped("paged attention")) return;
    enum { NS = 256, KV = 512, P = 16, NH = 14, NKV = 2, HD = 64, NP = 32, QP = 128 };
    const int64_t row = 2 * NKV * HD, spg = KV / P, npg = (int64_t)NS * spg;
    const size_t pool_n = (size_t)(npg * P * row);
    uint16_t *h16 = (uint16_t *)hbuf(pool_n / 2 + 1);
    for (size_t i = 0; i < pool_n; i++) h16[i] = vc_f32_to_bf16(urand());
    char *pool = (char *)dcopy(h16, pool_n * 2);
    const float **pp = calloc((size_t)npg * 2, sizeof(float *));
    const float *const *ks[NS], *const *vs[NS];
    int64_t qs[NS + 1], kvl[NS], qp[NP + 1], kvp[NP];
    for (int64_t i = 0; i < npg; i++) {
        pp[i] = (const float *)(const void *)(pool + (size_t)(i * P * row) * 2);
        pp[npg + i] = (const float *)(const void *)(pool + (size_t)(i * P * row + NKV * HD) * 2);
    }
    for (int s = 0; s <= NS; s++) qs[s] = s;
    for (int s = 0; s <= NP; s++) qp[s] = (int64_t)s * QP;
    for (int s = 0; s < NS; s++) {
        ks[s] = pp + s * spg;
        vs[s] = pp + npg + s * spg;
        kvl[s] = KV;
        if (s < NP) kvp[s] = QP;
    }
    vc_attn_desc d = { .n_seq = NS, .q_start = qs, .kv_len = kvl, .k_stride = row, .v_stride = row, .n_head = NH,
                       .n_kv_head = NKV, .head_dim = HD, .v_head_dim = HD, .scale = 0.125f, .causal = 1,
                       .k_pages = ks, .v_pages = vs, .page_tokens = P, .kv_bf16 = 1 };
    vc_attn_desc dp = d;
    dp.n_seq = NP;
    dp.q_start = qp;
    dp.kv_len = kvp;
    size_t nq = (size_t)NP * QP * NH * HD;
    float *q = dup_f(hrand(nq, 1), nq), *o = dalloc(nq * 4), *lse = dalloc((size_t)NP * QP * NH * 4);
    vc_set_matmul_precision(VC_PREC_BF16);
    double tm = paged_time(&d, o, lse, q, NULL, NULL), tf = paged_time(&d, o, lse, q, "VERLC_CUDA_PAGED_MMA", "0");
    double gb = (double)NS * KV * row * 2 / 1e9;
    printf("timing: paged decode, %d rows x %d keys, heads %d/%d of %d, bf16 pages: tensor cores %.1f us (%.0f GB/s), "
           "f32 kernel %.1f us (%.0f GB/s)\n", NS, KV, NH, NKV, HD, tm * 1e6, gb / tm, tf * 1e6, gb / tf);
    /* a rollout's tail: 8 rows over 4,096 keys each, in chunks of 512 keys (default) and whole (VERLC_CUDA_PAGED_SPLIT=0) */
    enum { NL = 8, KL = 4096 };
    vc_attn_desc dl = d;
    int64_t kvl8[NL];
    for (int s = 0; s < NL; s++) {
        kvl8[s] = KL;
        ks[s] = pp + s * (KL / P);
        vs[s] = pp + npg + s * (KL / P);
    }
    dl.n_seq = NL;
    dl.kv_len = kvl8;
    double tc = paged_time(&dl, o, lse, q, NULL, NULL), tw = paged_time(&dl, o, lse, q, "VERLC_CUDA_PAGED_SPLIT", "0");
    printf("timing: paged decode, %d rows x %d keys: keys in chunks of 512 %.1f us, whole rows %.1f us (%.2fx)\n", NL, KL,
           tc * 1e6, tw * 1e6, tw / tc);
    double pf = paged_time(&dp, o, lse, q, NULL, NULL), pk = paged_time(&dp, o, lse, q, "VERLC_CUDA_PAGED_PREFILL", "paged");
    printf("timing: paged prefill, %d x %d rows: flash kernels on gathered keys %.1f us, paged kernel %.1f us\n", NP, QP,
           pf * 1e6, pk * 1e6);
    vc_set_matmul_precision(VC_PREC_F32);
    free(pp);
    check_sticky("paged timing");
    release_all();
}

int main(void) {
    if (gpu_skip()) return 0;
    C = vc_backend_cpu();
    G = vc_backend_cuda();
    CHECK(G != NULL);
    test_table_complete();
    test_memory();
    test_elementwise();
    test_rows();
    test_embed_moe();
    test_optim_entries();
    test_gemm_bf16();
    test_paged();
    paged_timing();
    test_dsa_select();
    release_all();
    return vc_test_done();
}
