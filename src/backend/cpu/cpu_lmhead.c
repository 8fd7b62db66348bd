/* Fused LM head: the vocabulary is walked in slices; for each slice the logits of every token are one
 * GEMM, and per-token running statistics (max, sum of exponentials, sum of exponentials times logit, and
 * when asked the sum of squared exponentials, for sum_v p_v^2) are merged across slices, so a [tokens x vocabulary] matrix never exists and the weight matrix is
 * read once per pass. Backward recomputes each slice's logits. */
#include "cpu.h"
#include "infer/infer.h"
#include "core/vmath.h"
#include "verlc/pool.h"
#include <math.h>
#include <string.h>

/* logits scratch per slice: small enough to stay in the last-level cache between its GEMM and the pass over its rows
 * (2 MiB against 32 before 2026-12-07: 0.82x the wall time of a small-hidden SFT run with Qwen's 151,680-token vocabulary
 * under farm-bench, the same speed within noise for Qwen2.5-0.5B's forward at 512 and 2,048 tokens, where the slices
 * are 256 vocabulary rows at the least) */
#define SLICE_BYTES ((int64_t)2 << 20)

typedef struct {
    double *m, *s, *a, *q; /* running max, sum e^(z-m), sum e^(z-m) (z-m), sum e^(2(z-m)) (NULL: off) per token */
    float *logp;
    float *Z;
    const float *b, *dlogp, *dent, *lse, *ent;
    const int32_t *target;
    int64_t v0, nv, T;
    float cap, scale;
} head_ctx;

/* Z = the slice's logits h W[v0 .. v0 + n)^T: the hidden states packed once for all slices where they can be (ap),
 * else vc_cpu_gemm (the same bits) */
static void slice_logits(const vc_infer_apack *ap, const float *h, const float *W, int64_t v0, int64_t n, int64_t T,
                         int64_t H, float *Z) {
    if (ap) vc_infer_gemm_apack(ap, n, 1.0f, W + v0 * H, H, 0.0f, Z, n);
    else vc_cpu_gemm(0, 1, T, n, H, 1.0f, h, H, W + v0 * H, H, 0.0f, Z, n);
}

static int64_t slice_rows(int64_t T, int64_t V) {
    int64_t nv = SLICE_BYTES / 4 / (T > 0 ? T : 1);
    if (nv < 256) nv = 256;
    nv = (nv + 15) & ~(int64_t)15;
    return nv < V ? nv : V;
}

/* raw logits -> softcap(z + b); the temperature scale is applied by the callers */
static void bias_cap(float *z, const float *b, int64_t n, float cap) {
    if (b)
        for (int64_t v = 0; v < n; v++) z[v] += b[v];
    if (cap > 0)
        for (int64_t v = 0; v < n; v++) z[v] = cap * tanhf(z[v] / cap);
}

static void scale_row(float *z, int64_t n, float scale) {
    if (scale != 1.0f)
        for (int64_t v = 0; v < n; v++) z[v] *= scale;
}

static void fwd_rows(void *p, int64_t blk) {
    head_ctx *c = p;
    int64_t t1 = (blk + 1) * 16 < c->T ? (blk + 1) * 16 : c->T;
    for (int64_t t = blk * 16; t < t1; t++) {
        float *z = c->Z + t * c->nv;
        bias_cap(z, c->b ? c->b + c->v0 : NULL, c->nv, c->cap);
        scale_row(z, c->nv, c->scale);
        float mx = vc_max_f32(z, c->nv);
        int32_t y = c->target ? c->target[t] : -1;
        if (y >= c->v0 && y < c->v0 + c->nv) c->logp[t] = z[y - c->v0]; /* raw logit; lse subtracted at the end */
        double s, a, q = 0;
        vc_softmax_stats(z, c->nv, mx, &s, &a, c->q ? &q : NULL);
        /* merge (mx, s, a, q) into the running statistics */
        double M = c->m[t], m2 = mx;
        if (M == -INFINITY) {
            c->m[t] = m2;
            c->s[t] = s;
            c->a[t] = a;
            if (c->q) c->q[t] = q;
        } else {
            double nm = M > m2 ? M : m2, f1 = exp(M - nm), f2 = exp(m2 - nm);
            c->a[t] = f1 * (c->a[t] + (M - nm) * c->s[t]) + f2 * (a + (m2 - nm) * s);
            c->s[t] = f1 * c->s[t] + f2 * s;
            if (c->q) c->q[t] = f1 * f1 * c->q[t] + f2 * f2 * q;
            c->m[t] = nm;
        }
    }
}

void vc_cpu_lm_head_fwd(float *logp, float *ent, float *sumsq, float *lse, const float *h, const float *W,
                        const float *b, const int32_t *target, const vc_head_desc *hd) {
    int64_t T = hd->T, H = hd->H, V = hd->V, nv = slice_rows(T, V);
    float *Z = vc_cpu_scratch((size_t)(T * nv) * sizeof(float), 1, 0);
    double *st = vc_cpu_scratch((size_t)T * 4 * sizeof(double), 1, 0);
    float *raw = logp ? logp : vc_cpu_scratch((size_t)T * sizeof(float), 1, 0);
    vc_infer_apack *ap = NULL;
    if (!Z || !st || !raw) goto out;
    for (int64_t t = 0; t < T; t++) {
        st[t] = -INFINITY;
        raw[t] = 0;
    }
    ap = vc_infer_apack_new(T, H, h, H);
    for (int64_t v0 = 0; v0 < V; v0 += nv) {
        int64_t n = V - v0 < nv ? V - v0 : nv;
        slice_logits(ap, h, W, v0, n, T, H, Z);
        head_ctx c = { .m = st, .s = st + T, .a = st + 2 * T, .q = sumsq ? st + 3 * T : NULL, .logp = raw, .Z = Z,
                       .b = b, .target = target, .v0 = v0, .nv = n, .T = T, .cap = hd->softcap,
                       .scale = hd->scale };
        vc_parallel((T + 15) / 16, fwd_rows, &c);
    }
    for (int64_t t = 0; t < T; t++) {
        double L = st[t] + log(st[T + t]);
        lse[t] = (float)L;
        if (ent) ent[t] = (float)(log(st[T + t]) - st[2 * T + t] / st[T + t]); /* H = lse - E[z] */
        if (sumsq) sumsq[t] = (float)(st[3 * T + t] / (st[T + t] * st[T + t]));
        if (logp) logp[t] = target && target[t] >= 0 ? (float)((double)raw[t] - L) : 0.0f;
    }
out:
    vc_infer_apack_free(ap);
    free(Z);
    free(st);
    if (raw != logp) free(raw);
}

/* d(loss)/dz of 8 capped logits zv but for the target's 1[v=y] term (see bwd_rows) */
static inline vc_f8 dlogit8(vc_f8 zv, float sc, float cap, float L, float gl, float ge, float Ez) {
    vc_f8 zs = zv * sc, pv = vc_exp8(zs - L), dz = (-gl * pv - ge * pv * (zs - Ez)) * sc;
    if (cap > 0) {
        vc_f8 tt = zv / cap;
        dz *= 1.0f - tt * tt;
    }
    return dz;
}

/* dZ for a slice: with z the scaled logits, d logp_y / dz = 1[v=y] - p, d H / dz = -p (z - E[z]); then
 * the scale and the soft-cap chain. One pass over the row in blocks of 8 (core/vmath.h); the target's
 * 1[v=y] term is added after it. */
static void bwd_rows(void *p, int64_t blk) {
    head_ctx *c = p;
    int64_t t1 = (blk + 1) * 16 < c->T ? (blk + 1) * 16 : c->T, n = c->nv;
    float sc = c->scale, cap = c->cap;
    for (int64_t t = blk * 16; t < t1; t++) {
        float *z = c->Z + t * n;
        bias_cap(z, c->b ? c->b + c->v0 : NULL, n, cap);
        float L = c->lse[t], gl = c->dlogp ? c->dlogp[t] : 0, ge = c->dent ? c->dent[t] : 0;
        float Ez = L - c->ent[t];
        int32_t y = c->target ? c->target[t] : -1;
        if (y < 0) gl = 0;
        int hit = y >= c->v0 && y < c->v0 + n;
        float zy = hit ? z[y - c->v0] : 0;
        int64_t v = 0;
        for (; v + 8 <= n; v += 8) vc_f8_store(z + v, dlogit8(vc_f8_load(z + v), sc, cap, L, gl, ge, Ez));
        if (v < n) {
            vc_f8 dz = dlogit8(vc_f8_load_part(z + v, n - v), sc, cap, L, gl, ge, Ez);
            memcpy(z + v, &dz, (size_t)(n - v) * sizeof(float));
        }
        if (hit) { /* + gl at the target, through the same scale and chain */
            float tt = cap > 0 ? zy / cap : 0;
            z[y - c->v0] += gl * sc * (cap > 0 ? 1.0f - tt * tt : 1.0f);
        }
    }
}

void vc_cpu_lm_head_bwd(float *dh, float *dW, float *db, const float *dlogp, const float *dent, const float *lse,
                        const float *ent, const float *h, const float *W, const float *b, const int32_t *target,
                        const vc_head_desc *hd) {
    int64_t T = hd->T, H = hd->H, V = hd->V;
    int64_t nv = slice_rows(T, V);
    float *Z = vc_cpu_scratch((size_t)(T * nv) * sizeof(float), 1, 0);
    if (!Z) return;
    vc_infer_apack *ap = vc_infer_apack_new(T, H, h, H);
    for (int64_t v0 = 0; v0 < V; v0 += nv) {
        int64_t n = V - v0 < nv ? V - v0 : nv;
        slice_logits(ap, h, W, v0, n, T, H, Z);
        head_ctx c = { .Z = Z, .dlogp = dlogp, .dent = dent, .lse = lse, .ent = ent, .b = b, .target = target,
                       .v0 = v0, .nv = n, .T = T, .cap = hd->softcap, .scale = hd->scale };
        vc_parallel((T + 15) / 16, bwd_rows, &c);
        if (dh) vc_cpu_gemm(0, 0, T, H, n, 1.0f, Z, n, W + v0 * H, H, 1.0f, dh, H);
        if (dW) vc_cpu_gemm(1, 0, n, H, T, 1.0f, Z, n, h, H, 1.0f, dW + v0 * H, H);
        if (db)
            for (int64_t t = 0; t < T; t++)
                for (int64_t v = 0; v < n; v++) db[v0 + v] += Z[t * n + v];
    }
    vc_infer_apack_free(ap);
    free(Z);
}
