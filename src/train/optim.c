/* AdamW (torch.optim.AdamW semantics, float32) and global-norm gradient clipping. */
/* torch's CPU kernels round every product and sum separately except where they call fmadd (lerp);
 * keep the compiler from fusing the others so the results match bit for bit. */
#pragma GCC optimize("fp-contract=off")
#include "verlc/optim.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

void vc_adamw_config_default(vc_adamw_config *c) {
    c->lr = 1e-3;
    c->beta1 = 0.9;
    c->beta2 = 0.999;
    c->eps = 1e-8;
    c->weight_decay = 1e-2;
}

vc_status vc_adamw_init(vc_adamw *opt, const vc_adamw_config *cfg, const vc_optim_param *params, size_t n_params) {
    memset(opt, 0, sizeof *opt);
    if (!(cfg->beta1 >= 0 && cfg->beta1 < 1) || !(cfg->beta2 >= 0 && cfg->beta2 < 1))
        return vc_fail(VC_ERR_ARG, "adamw: betas (%g, %g) must lie in [0, 1)", cfg->beta1, cfg->beta2);
    if (!(cfg->eps >= 0) || !(cfg->weight_decay >= 0) || !(cfg->lr >= 0))
        return vc_fail(VC_ERR_ARG, "adamw: lr %g, eps %g and weight_decay %g must be non-negative", cfg->lr, cfg->eps,
                       cfg->weight_decay);
    opt->cfg = *cfg;
    opt->n_params = n_params;
    opt->params = vc_calloc(n_params, sizeof *opt->params);
    opt->m = vc_calloc(n_params, sizeof *opt->m);
    opt->v = vc_calloc(n_params, sizeof *opt->v);
    if (!opt->params || !opt->m || !opt->v) goto nomem;
    for (size_t i = 0; i < n_params; i++) {
        opt->params[i] = params[i];
        opt->m[i] = vc_aligned_alloc(params[i].n * sizeof(float));
        opt->v[i] = vc_aligned_alloc(params[i].n * sizeof(float));
        if (!opt->m[i] || !opt->v[i]) goto nomem;
    }
    return VC_OK;
nomem:
    vc_adamw_free(opt);
    return vc_fail(VC_ERR_NOMEM, "adamw: cannot allocate moments for %zu tensors", n_params);
}

void vc_adamw_free(vc_adamw *opt) {
    for (size_t i = 0; i < opt->n_params; i++) {
        if (opt->m) vc_aligned_free(opt->m[i]);
        if (opt->v) vc_aligned_free(opt->v[i]);
    }
    free(opt->m);
    free(opt->v);
    free(opt->params);
    memset(opt, 0, sizeof *opt);
}

/* Scalars as torch derives them: Python doubles, converted to float where they meet a tensor. */
typedef struct adamw_scalars {
    float decay_mul, lerp_w, beta2, one_minus_beta2, bc2_sqrt, eps, neg_step_size;
} adamw_scalars;

static void update_tensor(const vc_optim_param *p, float *m, float *v, const adamw_scalars *s, int decay) {
    float *w = p->w;
    const float *g = p->g;
    const int small = s->lerp_w < 0.5f;
    const float coeff = small ? s->lerp_w : s->lerp_w - 1.0f;
    for (size_t i = 0; i < p->n; i++) {
        float wi = w[i];
        if (decay) wi = wi * s->decay_mul;           /* param.mul_(1 - lr * wd) */
        float gi = g[i], mi = m[i];
        mi = fmaf(coeff, gi - mi, small ? mi : gi);  /* exp_avg.lerp_(grad, 1 - beta1): vectorised lerp uses fmadd */
        float vi = v[i] * s->beta2;                  /* exp_avg_sq.mul_(beta2) */
        vi = vi + s->one_minus_beta2 * gi * gi;      /* .addcmul_(grad, grad, value=1 - beta2) */
        float denom = sqrtf(vi) / s->bc2_sqrt + s->eps;
        wi = wi + s->neg_step_size * mi / denom;     /* param.addcdiv_(exp_avg, denom, value=-step_size) */
        m[i] = mi;
        v[i] = vi;
        w[i] = wi;
    }
}

vc_status vc_adamw_step(vc_adamw *opt, double lr) {
    if (!(lr >= 0) || !isfinite(lr)) return vc_fail(VC_ERR_ARG, "adamw: learning rate %g", lr);
    for (size_t i = 0; i < opt->n_params; i++)
        if (opt->params[i].n && (!opt->params[i].w || !opt->params[i].g))
            return vc_fail(VC_ERR_ARG, "adamw: parameter %zu has no weight or gradient buffer", i);
    const vc_adamw_config *c = &opt->cfg;
    opt->step++;
    double t = (double)opt->step;
    double bc1 = 1.0 - pow(c->beta1, t), bc2 = 1.0 - pow(c->beta2, t);
    adamw_scalars s = {
        .decay_mul = (float)(1.0 - lr * c->weight_decay),
        .lerp_w = (float)(1.0 - c->beta1),
        .beta2 = (float)c->beta2,
        .one_minus_beta2 = (float)(1.0 - c->beta2),
        .bc2_sqrt = (float)sqrt(bc2),
        .eps = (float)c->eps,
        .neg_step_size = (float)(-(lr / bc1)),
    };
    for (size_t i = 0; i < opt->n_params; i++)
        update_tensor(&opt->params[i], opt->m[i], opt->v[i], &s, opt->params[i].decay && c->weight_decay != 0);
    return VC_OK;
}

/* ---- state bytes ---- */
static const char STATE_MAGIC[8] = { 'V', 'C', 'A', 'D', 'A', 'M', 'W', '1' };

size_t vc_adamw_state_size(const vc_adamw *opt) {
    size_t n = 8 + 8 + 8;
    for (size_t i = 0; i < opt->n_params; i++) n += 8 + 2 * opt->params[i].n * sizeof(float);
    return n;
}

static unsigned char *put(unsigned char *p, const void *x, size_t n) {
    memcpy(p, x, n);
    return p + n;
}

vc_status vc_adamw_state_save(const vc_adamw *opt, void *buf, size_t len) {
    size_t need = vc_adamw_state_size(opt);
    if (len < need) return vc_fail(VC_ERR_ARG, "adamw state: buffer of %zu bytes, %zu needed", len, need);
    unsigned char *p = buf;
    uint64_t np = opt->n_params;
    int64_t step = opt->step;
    p = put(p, STATE_MAGIC, 8);
    p = put(p, &np, 8);
    p = put(p, &step, 8);
    for (size_t i = 0; i < opt->n_params; i++) {
        uint64_t n = opt->params[i].n;
        p = put(p, &n, 8);
        p = put(p, opt->m[i], n * sizeof(float));
        p = put(p, opt->v[i], n * sizeof(float));
    }
    return VC_OK;
}

vc_status vc_adamw_state_load(vc_adamw *opt, const void *buf, size_t len) {
    const unsigned char *p = buf;
    uint64_t np, n;
    int64_t step;
    if (len < 24 || memcmp(p, STATE_MAGIC, 8)) return vc_fail(VC_ERR_FORMAT, "adamw state: bad header");
    memcpy(&np, p + 8, 8);
    memcpy(&step, p + 16, 8);
    if (np != opt->n_params)
        return vc_fail(VC_ERR_SHAPE, "adamw state: %llu tensors saved, optimiser has %zu", (unsigned long long)np,
                       opt->n_params);
    if (step < 0) return vc_fail(VC_ERR_FORMAT, "adamw state: negative step %lld", (long long)step);
    if (len != vc_adamw_state_size(opt)) {
        /* find the first mismatching tensor for a useful message */
        size_t at = 24;
        for (size_t i = 0; i < opt->n_params && at + 8 <= len; i++) {
            memcpy(&n, p + at, 8);
            if (n != opt->params[i].n)
                return vc_fail(VC_ERR_SHAPE, "adamw state: tensor %zu has %llu elements saved, %zu expected", i,
                               (unsigned long long)n, opt->params[i].n);
            at += 8 + 2 * n * sizeof(float);
        }
        return vc_fail(VC_ERR_FORMAT, "adamw state: %zu bytes, %zu expected", len, vc_adamw_state_size(opt));
    }
    size_t at = 24;
    for (size_t i = 0; i < opt->n_params; i++) {
        memcpy(&n, p + at, 8);
        if (n != opt->params[i].n)
            return vc_fail(VC_ERR_SHAPE, "adamw state: tensor %zu has %llu elements saved, %zu expected", i,
                           (unsigned long long)n, opt->params[i].n);
        at += 8 + 2 * n * sizeof(float);
    }
    at = 24;
    for (size_t i = 0; i < opt->n_params; i++) {
        size_t bytes = opt->params[i].n * sizeof(float);
        memcpy(opt->m[i], p + at + 8, bytes);
        memcpy(opt->v[i], p + at + 8 + bytes, bytes);
        at += 8 + 2 * bytes;
    }
    opt->step = step;
    return VC_OK;
}

/* ---- clipping ---- */
double vc_grad_norm(const float *const *grads, const size_t *sizes, size_t n_tensors) {
    double total = 0.0;
    for (size_t t = 0; t < n_tensors; t++) {
        const float *g = grads[t];
        double acc[4] = { 0, 0, 0, 0 };
        size_t n = sizes[t], i = 0;
        for (; i + 4 <= n; i += 4)
            for (int k = 0; k < 4; k++) acc[k] += (double)g[i + k] * g[i + k];
        for (; i < n; i++) acc[0] += (double)g[i] * g[i];
        total += (acc[0] + acc[1]) + (acc[2] + acc[3]);
    }
    return sqrt(total);
}

int vc_clip_grad_norm(float *const *grads, const size_t *sizes, size_t n_tensors, double max_norm, double *norm) {
    double nrm = vc_grad_norm((const float *const *)grads, sizes, n_tensors);
    if (norm) *norm = nrm;
    if (!isfinite(nrm)) return 0;
    if (max_norm <= 0) return 1;
    double coef = max_norm / (nrm + 1e-6);
    if (coef < 1.0) {
        float c = (float)coef;
        for (size_t t = 0; t < n_tensors; t++)
            for (size_t i = 0; i < sizes[t]; i++) grads[t][i] *= c;
    }
    return 1;
}
