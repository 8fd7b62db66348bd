/* AdamW (torch.optim.AdamW semantics, float32) and global-norm gradient clipping over backend memory:
 * the update, the norm and the scaling run as backend entries (src/tensor/backend.h). */
#include "verlc/optim.h"
#include "tensor/backend.h"
#include "muon.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

void vc_adamw_config_default(vc_adamw_config *c) {
    *c = (vc_adamw_config){ 0 };
    c->lr = 1e-3;
    c->beta1 = 0.9;
    c->beta2 = 0.999;
    c->eps = 1e-8;
    c->weight_decay = 1e-2;
}

vc_status vc_adamw_moment_dtype(const char *key, const char *value, int *bf16) {
    static const char *const F32[] = { "fp32", "float32", "32", "torch.float32", "null" };
    static const char *const BF16[] = { "bf16", "bfloat16", "torch.bfloat16" };
    *bf16 = 0;
    if (!value) return VC_OK;
    for (size_t i = 0; i < sizeof F32 / sizeof *F32; i++)
        if (!strcmp(value, F32[i])) return VC_OK;
    for (size_t i = 0; i < sizeof BF16 / sizeof *BF16; i++)
        if (!strcmp(value, BF16[i])) return *bf16 = 1, VC_OK;
    return vc_fail(VC_ERR_UNSUPPORTED, "%s=%s: verlc keeps AdamW's moments in fp32 or bf16", key, value);
}

vc_status vc_adamw_megatron_moments(const char *prefix, const int bf[3], int precision_aware, int bf16_run,
                                    int cpu_offload, vc_adamw_config *a) {
    a->m_bf16 = a->v_bf16 = 0;
    if (!bf[0] && !bf[1] && !bf[2]) return VC_OK;
    if (!precision_aware || !bf16_run) {
        vc_info("%s: the bf16 optimizer dtypes apply with use_precision_aware_optimizer=true in bf16 runs only, as verl "
                "passes them to Megatron: fp32 here", prefix);
        return VC_OK;
    }
    if (bf[2])
        return vc_fail(VC_ERR_UNSUPPORTED, "%s.main_grads_dtype=bf16 is not supported: verlc accumulates gradients in "
                       "fp32", prefix);
    if (cpu_offload) {
        vc_info("%s: Megatron's CPU optimizer keeps AdamW's moments in fp32 (exp_avg_dtype and exp_avg_sq_dtype are not "
                "applied)", prefix);
        return VC_OK;
    }
    a->m_bf16 = bf[0], a->v_bf16 = bf[1];
    vc_info("%s: AdamW's first moment stored in %s, its second in %s (Megatron's precision-aware optimizer)", prefix,
            bf[0] ? "bf16" : "fp32", bf[1] ? "bf16" : "fp32");
    return VC_OK;
}

vc_status vc_adamw_init(vc_adamw *opt, const vc_adamw_config *cfg, const vc_optim_param *params, size_t n_params) {
    return vc_adamw_init_dp(opt, cfg, params, n_params, 0, 1);
}

vc_status vc_adamw_init_dp(vc_adamw *opt, const vc_adamw_config *cfg, const vc_optim_param *params, size_t n_params,
                           int rank, int world) {
    memset(opt, 0, sizeof *opt);
    if (!(cfg->beta1 >= 0 && cfg->beta1 < 1) || !(cfg->beta2 >= 0 && cfg->beta2 < 1))
        return vc_fail(VC_ERR_ARG, "adamw: betas (%g, %g) must lie in [0, 1)", cfg->beta1, cfg->beta2);
    if (!(cfg->eps >= 0) || !(cfg->weight_decay >= 0) || !(cfg->lr >= 0))
        return vc_fail(VC_ERR_ARG, "adamw: lr %g, eps %g and weight_decay %g must be non-negative", cfg->lr, cfg->eps,
                       cfg->weight_decay);
    const vc_backend *B = vc_be();
    vc_status st = VC_OK;
    opt->be = B;
    opt->cfg = *cfg;
    opt->n_params = n_params;
    opt->params = vc_calloc(n_params + 1, sizeof *opt->params);
    opt->m = vc_calloc(n_params + 1, sizeof *opt->m);
    opt->v = vc_calloc(n_params + 1, sizeof *opt->v);
    if (!opt->params || !opt->m || !opt->v) goto nomem;
    if (n_params) memcpy(opt->params, params, n_params * sizeof *params);
    if (cfg->muon.on && (st = vc_muon_plan_init(opt, rank, world))) goto fail; /* the owners first */
    for (size_t i = 0; i < n_params; i++) {
        if (!vc_adamw_holds(opt, i)) continue; /* another rank's (layer-wise) */
        size_t bytes = params[i].n * sizeof(float);
        int muon = vc_muon_param(opt, i); /* Muon keeps one buffer, its momentum */
        opt->m[i] = B->alloc(bytes);
        opt->v[i] = muon ? NULL : B->alloc(bytes);
        if (!opt->m[i] || (!muon && !opt->v[i])) goto nomem;
        B->zero(opt->m[i], bytes);
        if (!muon) B->zero(opt->v[i], bytes);
    }
    if (cfg->muon.on && (st = vc_muon_plan_bind(opt))) goto fail;
    return VC_OK;
fail:
    vc_adamw_free(opt);
    return st == VC_ERR_NOMEM ? vc_fail(st, "muon: cannot allocate its plan and workspace") : st;
nomem:
    vc_adamw_free(opt);
    return vc_fail(VC_ERR_NOMEM, "adamw: cannot allocate moments for %zu tensors", n_params);
}

const char *vc_adamw_name(const vc_adamw *opt) { return opt->muon ? "Muon+AdamW" : "AdamW"; }

size_t vc_adamw_state_floats(const vc_adamw *opt) {
    size_t n = 0;
    for (size_t i = 0; i < opt->n_params; i++)
        if (opt->m[i]) n += opt->params[i].n * (opt->v[i] ? 2 : 1);
    return n;
}

void vc_adamw_free(vc_adamw *opt) {
    const vc_backend *B = opt->be ? opt->be : vc_be();
    vc_muon_plan_free(opt);
    for (size_t i = 0; i < opt->n_params; i++) {
        if (opt->m) B->free(opt->m[i]);
        if (opt->v) B->free(opt->v[i]);
    }
    free(opt->m);
    free(opt->v);
    free(opt->params);
    memset(opt, 0, sizeof *opt);
}

/* the backend entry computes the same float32 formula as torch (src/backend/cpu/cpu_optim.c) */
vc_status vc_adamw_step(vc_adamw *opt, double lr) {
    if (!(lr >= 0) || !isfinite(lr)) return vc_fail(VC_ERR_ARG, "adamw: learning rate %g", lr);
    for (size_t i = 0; i < opt->n_params; i++)
        if (opt->params[i].n && (!opt->params[i].w || !opt->params[i].g))
            return vc_fail(VC_ERR_ARG, "adamw: parameter %zu has no weight or gradient buffer", i);
    const vc_backend *B = opt->be;
    vc_status st = opt->muon ? vc_muon_step(opt, opt->step + 1, lr)
                             : B->adamw(opt->params, opt->m, opt->v, opt->n_params, &opt->cfg, opt->step + 1, lr);
    if (st) return st;
    opt->step++;
    return VC_OK;
}

/* ---- state bytes ---- */
static const char STATE_MAGIC[8] = { 'V', 'C', 'A', 'D', 'A', 'M', 'W', '1' };

size_t vc_adamw_state_size(const vc_adamw *opt) {
    size_t n = 8 + 8 + 8;
    for (size_t i = 0; i < opt->n_params; i++) n += 8 + 2 * opt->params[i].n * sizeof(float);
    return n;
}

vc_status vc_adamw_put_floats(const vc_adamw *opt, const float *src, size_t n, float *stage, vc_adamw_put_fn put,
                              void *ctx) {
    vc_status st = VC_OK;
    for (size_t at = 0; at < n && !st; at += VC_ADAMW_STAGE_FLOATS) {
        size_t k = n - at < VC_ADAMW_STAGE_FLOATS ? n - at : VC_ADAMW_STAGE_FLOATS;
        opt->be->d2h(stage, src + at, k * sizeof(float));
        if (!(st = opt->be->sync())) st = put(ctx, stage, k * sizeof(float));
    }
    return st;
}

vc_status vc_adamw_state_stream(const vc_adamw *opt, vc_adamw_put_fn put, void *ctx) {
    float *stage = vc_malloc(VC_ADAMW_STAGE_FLOATS * sizeof(float)), *zeros = NULL;
    if (!stage) return VC_ERR_NOMEM;
    uint64_t np = opt->n_params;
    int64_t step = opt->step;
    vc_status st = put(ctx, STATE_MAGIC, 8);
    if (!st) st = put(ctx, &np, 8);
    if (!st) st = put(ctx, &step, 8);
    for (size_t i = 0; i < opt->n_params && !st; i++) {
        uint64_t n = opt->params[i].n;
        if (!opt->m[i]) {
            st = vc_fail(VC_ERR_INTERNAL, "adamw state: tensor %zu is another rank's (layer-wise: written as shards)", i);
            break;
        }
        st = put(ctx, &n, 8);
        if (!st) st = vc_adamw_put_floats(opt, opt->m[i], n, stage, put, ctx);
        if (!st && opt->v[i]) st = vc_adamw_put_floats(opt, opt->v[i], n, stage, put, ctx);
        for (size_t at = 0; !st && !opt->v[i] && at < n; at += VC_ADAMW_STAGE_FLOATS) { /* Muon's: no second moment */
            if (!zeros && !(zeros = vc_calloc(VC_ADAMW_STAGE_FLOATS, sizeof(float)))) st = VC_ERR_NOMEM;
            size_t k = n - at < VC_ADAMW_STAGE_FLOATS ? n - at : VC_ADAMW_STAGE_FLOATS;
            if (!st) st = put(ctx, zeros, k * sizeof(float));
        }
    }
    free(zeros);
    free(stage);
    return st;
}

typedef struct {
    unsigned char *p;
    size_t left;
} mem_sink;

static vc_status put_mem(void *ctx, const void *p, size_t n) {
    mem_sink *s = ctx;
    if (n > s->left) return vc_fail(VC_ERR_INTERNAL, "adamw state: more bytes than its size");
    memcpy(s->p, p, n);
    s->p += n;
    s->left -= n;
    return VC_OK;
}

vc_status vc_adamw_state_save(const vc_adamw *opt, void *buf, size_t len) {
    size_t need = vc_adamw_state_size(opt);
    if (len < need) return vc_fail(VC_ERR_ARG, "adamw state: buffer of %zu bytes, %zu needed", len, need);
    mem_sink s = { buf, len };
    return vc_adamw_state_stream(opt, put_mem, &s);
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
        if (opt->m[i]) opt->be->h2d(opt->m[i], p + at + 8, bytes); /* (layer-wise: this rank's only) */
        if (opt->v[i]) opt->be->h2d(opt->v[i], p + at + 8 + bytes, bytes);
        at += 8 + 2 * bytes;
    }
    vc_status st = opt->be->sync();
    if (st) return st;
    opt->step = step;
    return VC_OK;
}

/* ---- clipping ---- */
/* the sum of squares runs on the backend (fixed order: four interleaved double accumulators per
 * tensor); a backend failure reads as a non-finite norm (NaN) */
double vc_grad_norm(const float *const *grads, const size_t *sizes, size_t n_tensors) {
    double total = 0.0;
    if (vc_be()->sumsq(grads, sizes, n_tensors, &total)) return NAN;
    return sqrt(total);
}

int vc_clip_grad_coef(float *const *grads, const size_t *sizes, size_t n_tensors, double max_norm, double *norm,
                      double *coef) {
    double nrm = vc_grad_norm((const float *const *)grads, sizes, n_tensors);
    if (norm) *norm = nrm;
    *coef = 1.0;
    if (!isfinite(nrm)) return 0;
    if (max_norm > 0 && max_norm / (nrm + 1e-6) < 1.0) *coef = max_norm / (nrm + 1e-6);
    return 1;
}

void vc_grads_scale(float *const *grads, const size_t *sizes, size_t n_tensors, float c) {
    if (vc_be()->scale_tensors) vc_be()->scale_tensors(grads, sizes, n_tensors, c); /* one launch on a GPU */
    else
        for (size_t t = 0; t < n_tensors; t++) vc_be()->scale(grads[t], grads[t], c, (int64_t)sizes[t]);
}

int vc_clip_grad_norm(float *const *grads, const size_t *sizes, size_t n_tensors, double max_norm, double *norm) {
    double coef = 1.0;
    if (!vc_clip_grad_coef(grads, sizes, n_tensors, max_norm, norm, &coef)) return 0;
    if (coef < 1.0) vc_grads_scale(grads, sizes, n_tensors, (float)coef);
    return 1;
}
