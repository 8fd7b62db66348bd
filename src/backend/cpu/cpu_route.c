/* Mixture-of-experts routing: scores (softmax or sigmoid) over router logits, optional group-limited
 * selection (DeepSeek), top-k, optional renormalisation and scaling. The correction bias changes which
 * experts are chosen, never the weights. With replay the experts are given (idx): only the weights are
 * computed, from the current scores. */
#include "backend/route_math.h"
#include "cpu.h"
#include <math.h>
#include <string.h>

static void scores_of(float *s, const float *z, int E, int sigmoid) {
    if (sigmoid) {
        for (int e = 0; e < E; e++) s[e] = 1.0f / (1.0f + expf(-z[e]));
        return;
    }
    float m = -INFINITY, sum = 0;
    for (int e = 0; e < E; e++) m = z[e] > m ? z[e] : m;
    for (int e = 0; e < E; e++) sum += (s[e] = expf(z[e] - m));
    for (int e = 0; e < E; e++) s[e] /= sum;
}

/* Group-limited routing keeps the topk_group best groups and, as transformers 5 does, masks the
 * other experts' choice scores with -inf before the final top-k; ties break as torch's do. */
static void select_experts(int32_t *idx, float *choice, const vc_route_desc *d) {
    int E = d->n_expert;
    if (d->n_group > 1 && d->topk_group < d->n_group) {
        int per = E / d->n_group;
        float gs[256];
        for (int g = 0; g < d->n_group; g++) {
            const float *c = choice + g * per;
            float a = -INFINITY, b = -INFINITY;
            for (int i = 0; i < per; i++) {
                if (c[i] > a) { b = a; a = c[i]; }
                else if (c[i] > b) b = c[i];
            }
            gs[g] = d->group_top2_sum ? (per > 1 ? a + b : a) : a;
        }
        int32_t gi[256];
        unsigned char gsel[256] = { 0 };
        vc_topk_torch(gs, d->n_group, d->topk_group, gi);
        for (int k = 0; k < d->topk_group; k++) gsel[gi[k]] = 1;
        for (int e = 0; e < E; e++)
            if (!gsel[e / per]) choice[e] = -INFINITY;
    }
    vc_topk_torch(choice, E, d->top_k, idx);
}

void vc_cpu_route_fwd(float *w, int32_t *idx, const float *logits, int64_t T, const vc_route_desc *d) {
    int E = d->n_expert, K = d->top_k;
    float s[1024], choice[1024];
    for (int64_t t = 0; t < T; t++) {
        if (d->sparsemixer) {
            vc_sparsemixer_fwd(logits + t * E, E, d->jitter_eps, d->replay, idx + t * K, w + t * K);
            continue;
        }
        scores_of(s, logits + t * E, E, d->sigmoid);
        for (int e = 0; e < E; e++) choice[e] = (d->bias_logits ? logits[t * E + e] : s[e]) + (d->bias ? d->bias[e] : 0.0f);
        if (!d->replay) select_experts(idx + t * K, choice, d);
        float sum = 0;
        for (int k = 0; k < K; k++) sum += s[idx[t * K + k]];
        int clamped;
        float denom = vc_route_denom(sum, d->norm_topk, d->sigmoid, d->norm_min, &clamped);
        for (int k = 0; k < K; k++) w[t * K + k] = s[idx[t * K + k]] / denom * d->scaling;
    }
}

void vc_cpu_route_bwd(float *dlogits, const float *dw, const float *logits, const int32_t *idx, int64_t T,
                      const vc_route_desc *d) {
    int E = d->n_expert, K = d->top_k;
    float s[1024], ds[1024];
    for (int64_t t = 0; t < T; t++) {
        const int32_t *id = idx + t * K;
        const float *g = dw + t * K;
        if (d->sparsemixer) {
            vc_sparsemixer_bwd(dlogits + t * E, g, logits + t * E, E, d->jitter_eps, id, s);
            continue;
        }
        scores_of(s, logits + t * E, E, d->sigmoid);
        memset(ds, 0, (size_t)E * sizeof(float));
        if (d->norm_topk) {
            float sum = 0, gs = 0;
            for (int k = 0; k < K; k++) sum += s[id[k]];
            int clamped;
            float D = vc_route_denom(sum, 1, d->sigmoid, d->norm_min, &clamped);
            for (int k = 0; k < K; k++) gs += g[k] * s[id[k]];
            for (int k = 0; k < K; k++) ds[id[k]] += d->scaling * (g[k] / D - (clamped ? 0.0f : gs / (D * D)));
        } else {
            for (int k = 0; k < K; k++) ds[id[k]] += d->scaling * g[k];
        }
        float *dz = dlogits + t * E;
        if (d->sigmoid) {
            for (int e = 0; e < E; e++) dz[e] += ds[e] * s[e] * (1.0f - s[e]);
        } else {
            float dot = 0;
            for (int e = 0; e < E; e++) dot += s[e] * ds[e];
            for (int e = 0; e < E; e++) dz[e] += s[e] * (ds[e] - dot);
        }
    }
}
