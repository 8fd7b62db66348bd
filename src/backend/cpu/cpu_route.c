/* Mixture-of-experts routing: scores (softmax or sigmoid) over router logits, optional group-limited
 * selection (DeepSeek), top-k, optional renormalisation and scaling. The correction bias changes which
 * experts are chosen, never the weights. */
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

/* index of the largest value among allowed entries; ties go to the lower index (as torch.topk) */
static int argmax_allowed(const float *v, const unsigned char *ok, int n) {
    int best = -1;
    for (int i = 0; i < n; i++)
        if (ok[i] && (best < 0 || v[i] > v[best])) best = i;
    return best;
}

/* Group-limited routing keeps the topk_group best groups and, as transformers does, sets the other
 * experts' choice scores to 0 (not -inf) before the final top-k. */
static void select_experts(int32_t *idx, float *choice, const vc_route_desc *d) {
    int E = d->n_expert;
    unsigned char ok[1024];
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
        unsigned char gok[256], gsel[256];
        memset(gok, 1, (size_t)d->n_group);
        memset(gsel, 0, (size_t)d->n_group);
        for (int k = 0; k < d->topk_group; k++) {
            int g = argmax_allowed(gs, gok, d->n_group);
            gok[g] = 0;
            gsel[g] = 1;
        }
        for (int e = 0; e < E; e++)
            if (!gsel[e / per]) choice[e] = 0.0f;
    }
    memset(ok, 1, (size_t)E);
    for (int k = 0; k < d->top_k; k++) {
        int e = argmax_allowed(choice, ok, E);
        idx[k] = e;
        ok[e] = 0;
    }
}

void vc_cpu_route_fwd(float *w, int32_t *idx, const float *logits, int64_t T, const vc_route_desc *d) {
    int E = d->n_expert, K = d->top_k;
    float s[1024], choice[1024];
    for (int64_t t = 0; t < T; t++) {
        scores_of(s, logits + t * E, E, d->sigmoid);
        for (int e = 0; e < E; e++) choice[e] = s[e] + (d->bias ? d->bias[e] : 0.0f);
        select_experts(idx + t * K, choice, d);
        float sum = 0;
        for (int k = 0; k < K; k++) sum += s[idx[t * K + k]];
        float denom = d->norm_topk ? sum + (d->sigmoid ? 1e-20f : 0.0f) : 1.0f;
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
        scores_of(s, logits + t * E, E, d->sigmoid);
        memset(ds, 0, (size_t)E * sizeof(float));
        if (d->norm_topk) {
            float sum = 0, gs = 0;
            for (int k = 0; k < K; k++) sum += s[id[k]];
            float D = sum + (d->sigmoid ? 1e-20f : 0.0f);
            for (int k = 0; k < K; k++) gs += g[k] * s[id[k]];
            for (int k = 0; k < K; k++) ds[id[k]] += d->scaling * (g[k] / D - gs / (D * D));
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
