/* Fused LM head: logits for a chunk of tokens at a time, reduced at once to the target log-prob and the
 * entropy, so a [tokens x vocabulary] matrix never exists. Backward recomputes each chunk's logits. */
#include "cpu.h"
#include "verlc/pool.h"
#include <math.h>
#include <string.h>

#define TCHUNK 32

typedef struct {
    float *Z, *logp, *ent, *lse;
    const float *dlogp, *dent, *lse_in, *ent_in, *b;
    const int32_t *target;
    int64_t t0, V;
    float cap;
} head_ctx;

static void bias_cap(float *z, const float *b, int64_t V, float cap) {
    if (b)
        for (int64_t v = 0; v < V; v++) z[v] += b[v];
    if (cap > 0)
        for (int64_t v = 0; v < V; v++) z[v] = cap * tanhf(z[v] / cap);
}

static void fwd_row(void *p, int64_t r) {
    head_ctx *c = p;
    float *z = c->Z + r * c->V;
    bias_cap(z, c->b, c->V, c->cap);
    float m = -INFINITY;
    for (int64_t v = 0; v < c->V; v++) m = z[v] > m ? z[v] : m;
    double s = 0, sz = 0;
    for (int64_t v = 0; v < c->V; v++) {
        double e = exp((double)(z[v] - m));
        s += e;
        sz += e * (double)(z[v] - m);
    }
    float L = m + (float)log(s);
    int64_t t = c->t0 + r;
    c->lse[t] = L;
    /* H = lse - E[z] */
    if (c->ent) c->ent[t] = (float)(log(s) - sz / s);
    if (c->logp) {
        int32_t y = c->target ? c->target[t] : -1;
        c->logp[t] = y >= 0 ? z[y] - L : 0.0f;
    }
}

void vc_cpu_lm_head_fwd(float *logp, float *ent, float *lse, const float *h, const float *W, const float *b,
                        const int32_t *target, int64_t T, int64_t H, int64_t V, float softcap) {
    float *Z = vc_malloc((size_t)TCHUNK * (size_t)V * sizeof(float));
    if (!Z) return;
    for (int64_t t0 = 0; t0 < T; t0 += TCHUNK) {
        int64_t n = T - t0 < TCHUNK ? T - t0 : TCHUNK;
        vc_cpu_gemm(0, 1, n, V, H, 1.0f, h + t0 * H, H, W, H, 0.0f, Z, V);
        head_ctx c = { .Z = Z, .logp = logp, .ent = ent, .lse = lse, .b = b, .target = target, .t0 = t0, .V = V,
                       .cap = softcap };
        vc_parallel(n, fwd_row, &c);
    }
    free(Z);
}

/* dZ for one row: d logp_y / dz = 1[v=y] - p, d H / dz = -p (z - E[z]); then the soft-cap chain. */
static void bwd_row(void *p, int64_t r) {
    head_ctx *c = p;
    int64_t t = c->t0 + r;
    float *z = c->Z + r * c->V;
    bias_cap(z, c->b, c->V, c->cap);
    float L = c->lse_in[t], gl = c->dlogp ? c->dlogp[t] : 0, ge = c->dent ? c->dent[t] : 0;
    float Ez = L - c->ent_in[t];
    int32_t y = c->target ? c->target[t] : -1;
    if (y < 0) gl = 0;
    for (int64_t v = 0; v < c->V; v++) {
        float pv = expf(z[v] - L);
        float dz = -gl * pv - ge * pv * (z[v] - Ez);
        if (v == y) dz += gl;
        if (c->cap > 0) {
            float tt = z[v] / c->cap;
            dz *= 1.0f - tt * tt;
        }
        z[v] = dz;
    }
}

void vc_cpu_lm_head_bwd(float *dh, float *dW, float *db, const float *dlogp, const float *dent, const float *lse,
                        const float *ent, const float *h, const float *W, const float *b, const int32_t *target,
                        int64_t T, int64_t H, int64_t V, float softcap) {
    float *Z = vc_malloc((size_t)TCHUNK * (size_t)V * sizeof(float));
    if (!Z) return;
    for (int64_t t0 = 0; t0 < T; t0 += TCHUNK) {
        int64_t n = T - t0 < TCHUNK ? T - t0 : TCHUNK;
        vc_cpu_gemm(0, 1, n, V, H, 1.0f, h + t0 * H, H, W, H, 0.0f, Z, V);
        head_ctx c = { .Z = Z, .dlogp = dlogp, .dent = dent, .lse_in = lse, .ent_in = ent, .b = b, .target = target,
                       .t0 = t0, .V = V, .cap = softcap };
        vc_parallel(n, bwd_row, &c);
        if (dh) vc_cpu_gemm(0, 0, n, H, V, 1.0f, Z, V, W, H, 1.0f, dh + t0 * H, H);
        if (dW) vc_cpu_gemm(1, 0, V, H, n, 1.0f, Z, V, h + t0 * H, H, 1.0f, dW, H);
        if (db)
            for (int64_t r = 0; r < n; r++)
                for (int64_t v = 0; v < V; v++) db[v] += Z[r * V + v];
    }
    free(Z);
}
