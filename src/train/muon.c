/* Muon as Megatron-core's TensorParallelMuon runs it on one rank (emerging_optimizers' OrthogonalizedOptimizer:
 * decoupled weight decay, EMA momentum, optional Nesterov, Newton-Schulz orthogonalisation, shape scale): the
 * orthogonalisation and the update over backend memory through the backend's gemm and elementwise entries. */
#include "muon.h"
#include "tensor/backend.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* emerging_optimizers 0.3's coefficient sets (muon_utils._COEFFICIENT_SETS), as float */
typedef struct coeff_set {
    const char *name;
    int n, repeat_last; /* cycle through the n triples, or keep the last after them */
    float abc[10][3];
} coeff_set;

static const coeff_set COEFFS[] = {
    { "simple", 1, 0, { { 3.4445f, -4.7750f, 2.0315f } } },
    { "quintic", 5, 0, { { 4.0848f, -6.8946f, 2.9270f }, { 3.9505f, -6.3029f, 2.6377f }, { 3.7418f, -5.5913f, 2.3037f },
                         { 2.8769f, -3.1427f, 1.2046f }, { 2.8366f, -3.0525f, 1.2012f } } },
    { "polar_express", 8, 1, { { 8.2051f, -22.9019f, 16.4607f }, { 4.0664f, -2.8612f, 0.5184f },
                               { 3.9096f, -2.8234f, 0.5250f }, { 3.2856f, -2.4153f, 0.4853f },
                               { 2.2779f, -1.6198f, 0.3985f }, { 1.8726f, -1.2307f, 0.3585f },
                               { 1.8564f, -1.2132f, 0.3568f }, { 1.8750f, -1.2500f, 0.3750f } } },
    { "cans", 5, 1, { { 8.4703f, -25.1081f, 18.6293f }, { 4.1828f, -3.1087f, 0.5806f }, { 3.9619f, -2.9541f, 0.5630f },
                      { 3.2866f, -2.4647f, 0.5074f }, { 2.2737f, -1.6447f, 0.4162f } } },
    { "aol", 4, 0, { { 4.0098f, -7.0585f, 2.4635f }, { 3.4585f, -5.5479f, 2.5959f }, { 2.7573f, -3.2939f, 1.4254f },
                     { 2.7215f, -3.0494f, 1.3169f } } },
    /* 8 x simple, then 2 x (2, -1.5, 0.5), the last repeated */
    { "deepseekv4", 10, 1, { { 3.4445f, -4.7750f, 2.0315f }, { 3.4445f, -4.7750f, 2.0315f }, { 3.4445f, -4.7750f, 2.0315f },
                             { 3.4445f, -4.7750f, 2.0315f }, { 3.4445f, -4.7750f, 2.0315f }, { 3.4445f, -4.7750f, 2.0315f },
                             { 3.4445f, -4.7750f, 2.0315f }, { 3.4445f, -4.7750f, 2.0315f }, { 2.0f, -1.5f, 0.5f },
                             { 2.0f, -1.5f, 0.5f } } },
};
#define N_COEFFS ((int)(sizeof COEFFS / sizeof *COEFFS))

void vc_muon_config_default(vc_muon_config *c) {
    *c = (vc_muon_config){ 0 };
    c->momentum = 0.95;
    c->split_qkv = 1;
    c->scale_mode = VC_MUON_SPECTRAL;
    c->coeff = 1; /* quintic */
    c->ns_steps = 5;
    c->bf16 = 1;
    c->extra_scale = 1.0;
}

vc_status vc_muon_coeff_parse(const char *key, const char *value, int *coeff) {
    for (int i = 0; value && i < N_COEFFS; i++)
        if (!strcmp(value, COEFFS[i].name)) return *coeff = i, VC_OK;
    return vc_fail(VC_ERR_UNSUPPORTED, "%s=%s: not one of simple, quintic, polar_express, cans, aol, deepseekv4%s", key,
                   value ? value : "null", value && !strcmp(value, "custom") ? " (custom coefficients need Python)" : "");
}

vc_status vc_muon_scale_parse(const char *key, const char *value, int *mode) {
    static const char *const NAMES[] = { "spectral", "shape_scaling", "unit_rms_norm" };
    for (int i = 0; value && i < 3; i++)
        if (!strcmp(value, NAMES[i])) return *mode = i, VC_OK;
    return vc_fail(VC_ERR_UNSUPPORTED, "%s=%s: not one of spectral, shape_scaling, unit_rms_norm", key,
                   value ? value : "null");
}

vc_status vc_muon_prec_parse(const char *key, const char *value, int *bf16) {
    if (value && !strcmp(value, "medium")) return *bf16 = 1, VC_OK;
    if (value && (!strcmp(value, "high") || !strcmp(value, "highest"))) return *bf16 = 0, VC_OK;
    return vc_fail(VC_ERR_UNSUPPORTED, "%s=%s: not one of medium (bf16), high, highest (f32)", key,
                   value ? value : "null");
}

double vc_muon_scale_factor(int mode, int64_t R, int64_t C) {
    double r = (double)R, c = (double)C;
    switch (mode) {
    case VC_MUON_SHAPE_SCALING: return sqrt(r / c > 1 ? r / c : 1);
    case VC_MUON_UNIT_RMS_NORM: return sqrt(r / c);
    default: return sqrt(r > c ? r : c);
    }
}

/* workspace floats for an [R, C] group: X and X' (R C each), A and B (min(R, C)^2 each) */
size_t vc_muon_ws_floats(int64_t R, int64_t C) {
    int64_t r = R < C ? R : C;
    return (size_t)(2 * R * C + 2 * r * r);
}

/* NS of g [R, C] (backend memory) into g; ws holds vc_muon_ws_floats(R, C) floats. X is g when R <= C, else its
 * transpose, which the products take through gemm's transpose flags (G' = a G + G B^T) */
vc_status vc_muon_ns(const vc_backend *B, const vc_muon_config *c, float *g, int64_t R, int64_t C, float *ws) {
    if (c->coeff < 0 || c->coeff >= N_COEFFS || c->ns_steps < 1)
        return vc_fail(VC_ERR_ARG, "muon: coefficient set %d, %d steps", c->coeff, c->ns_steps);
    int64_t n = R * C, r = R < C ? R : C;
    int tr = R > C;
    float *xn = ws, *A = ws + n, *Bm = A + r * r;
    double ss = 0;
    const float *gp = g;
    size_t sz = (size_t)n;
    vc_status st = B->sumsq(&gp, &sz, 1, &ss);
    if (st) return st;
    float nrm = (float)sqrt(ss);
    B->scale(g, g, 1.0f / (nrm > 1e-7f ? nrm : 1e-7f), n); /* F.normalize(x, dim=(-2, -1), eps=1e-7) */
    if (c->bf16) B->round_bf16(g, g, n);
    const coeff_set *cs = &COEFFS[c->coeff];
    /* the products' precision is the setting's, not the run's: f32, or bf16 inputs (the values are bf16 already, so
     * a bf16 GEMM path gives the same sums, faster) */
    int prec = vc_matmul_precision();
    vc_set_matmul_precision(c->bf16 ? VC_PREC_BF16 : VC_PREC_F32);
    float *x = g;
    for (int s = 0; s < c->ns_steps; s++) {
        int j = s < cs->n ? s : cs->repeat_last ? cs->n - 1 : s % cs->n;
        float a = cs->abc[j][0], b = cs->abc[j][1], cc = cs->abc[j][2];
        if (tr) B->gemm(1, 0, r, r, R, 1.0f, x, C, x, C, 0.0f, A, r); /* A = G^T G */
        else B->gemm(0, 1, r, r, C, 1.0f, x, C, x, C, 0.0f, A, r);     /* A = G G^T */
        if (c->bf16) B->round_bf16(A, A, r * r);
        B->d2d(Bm, A, sizeof(float) * (size_t)(r * r));
        B->gemm(0, 0, r, r, r, cc, A, r, A, r, b, Bm, r); /* B = b A + c A A */
        if (c->bf16) B->round_bf16(Bm, Bm, r * r);
        B->d2d(xn, x, sizeof(float) * (size_t)n);
        if (tr) B->gemm(0, 1, R, C, C, 1.0f, x, C, Bm, C, a, xn, C); /* G' = a G + G B^T */
        else B->gemm(0, 0, R, C, R, 1.0f, Bm, R, x, C, a, xn, C);    /* X' = a X + B X */
        if (c->bf16) B->round_bf16(xn, xn, n);
        float *t = x;
        x = xn;
        xn = t;
    }
    vc_set_matmul_precision(prec);
    if (x != g) B->d2d(g, x, sizeof(float) * (size_t)n);
    return B->sync();
}

vc_status vc_muon_orthogonalize(const vc_muon_config *c, float *x, int64_t R, int64_t C) {
    if (R < 1 || C < 1) return vc_fail(VC_ERR_ARG, "muon: matrix [%lld, %lld]", (long long)R, (long long)C);
    float *ws = vc_be()->alloc(sizeof(float) * vc_muon_ws_floats(R, C));
    if (!ws) return VC_ERR_NOMEM;
    vc_status st = vc_muon_ns(vc_be(), c, x, R, C, ws);
    vc_be()->free(ws);
    return st;
}

/* ---- the plan: groups of matrix params, the AdamW subset, the workspace ---- */
typedef struct muon_group {
    int *member; /* indices into opt->params, in order */
    int n;
    int64_t mats, rows, cols; /* rows: the members' summed */
    int owner;                /* the rank that orthogonalises it (share) */
} muon_group;

struct vc_muon_plan {
    muon_group *g;
    int n_groups;
    int rank;      /* this rank (share; 0) */
    int *owner_of; /* per param: its group's owner, -1 for AdamW's */
    size_t n_adam;
    vc_optim_param *adam_p; /* the AdamW params' descriptors (g refreshed from opt->params each step) */
    size_t *adam_idx;
    float **adam_m, **adam_v;
    float *ws, *mat; /* workspace (backend memory): NS's, and the group's matrix */
};

void vc_muon_plan_free(vc_adamw *opt) {
    struct vc_muon_plan *p = opt->muon;
    if (!p) return;
    for (int i = 0; i < p->n_groups; i++) free(p->g[i].member);
    free(p->g);
    free(p->owner_of);
    free(p->adam_p);
    free(p->adam_idx);
    free(p->adam_m);
    free(p->adam_v);
    if (opt->be) {
        opt->be->free(p->ws);
        opt->be->free(p->mat);
    }
    free(p);
    opt->muon = NULL;
}

static vc_status add_member(struct vc_muon_plan *p, const vc_adamw *opt, size_t i) {
    const vc_optim_param *q = &opt->params[i];
    if (q->rows < 1 || q->cols < 1 || (size_t)(q->mats * q->rows * q->cols) != q->n)
        return vc_fail(VC_ERR_SHAPE, "muon: parameter %zu: %lld matrices of [%lld, %lld] in %zu values", i,
                       (long long)q->mats, (long long)q->rows, (long long)q->cols, q->n);
    muon_group *g = NULL;
    for (int k = 0; q->fuse > 0 && k < p->n_groups && !g; k++)
        if (opt->params[p->g[k].member[0]].fuse == q->fuse) g = &p->g[k];
    if (g && (g->mats != q->mats || g->cols != q->cols))
        return vc_fail(VC_ERR_SHAPE, "muon: parameter %zu ([%lld x %lld, %lld]) does not stack onto its fused "
                       "module's [%lld x %lld, %lld]", i, (long long)q->mats, (long long)q->rows, (long long)q->cols,
                       (long long)g->mats, (long long)g->rows, (long long)g->cols);
    if (!g) {
        muon_group *ng = realloc(p->g, sizeof *ng * (size_t)(p->n_groups + 1));
        if (!ng) return VC_ERR_NOMEM;
        p->g = ng;
        g = &p->g[p->n_groups++];
        *g = (muon_group){ NULL, 0, q->mats, 0, q->cols, 0 };
    }
    int *nm = realloc(g->member, sizeof *nm * (size_t)(g->n + 1));
    if (!nm) return VC_ERR_NOMEM;
    g->member = nm;
    g->member[g->n++] = (int)i;
    g->rows += q->rows;
    return VC_OK;
}

static vc_status share(vc_adamw *opt, int rank, int world);

vc_status vc_muon_plan_init(vc_adamw *opt, int rank, int world) {
    const vc_muon_config *c = &opt->cfg.muon;
    if (!(c->momentum >= 0 && c->momentum < 1) || c->ns_steps < 1 || c->coeff < 0 || c->coeff >= N_COEFFS ||
        !(c->extra_scale > 0) || !isfinite(c->extra_scale))
        return vc_fail(VC_ERR_ARG, "muon: momentum %g (in [0, 1)), %d Newton-Schulz steps (>= 1), extra scale %g (> 0)",
                       c->momentum, c->ns_steps, c->extra_scale);
    struct vc_muon_plan *p = vc_calloc(1, sizeof *p);
    if (!p) return VC_ERR_NOMEM;
    opt->muon = p;
    p->adam_p = vc_calloc(opt->n_params + 1, sizeof *p->adam_p);
    p->adam_idx = vc_calloc(opt->n_params + 1, sizeof *p->adam_idx);
    p->adam_m = vc_calloc(opt->n_params + 1, sizeof *p->adam_m);
    p->adam_v = vc_calloc(opt->n_params + 1, sizeof *p->adam_v);
    p->owner_of = vc_calloc(opt->n_params + 1, sizeof *p->owner_of);
    if (!p->adam_p || !p->adam_idx || !p->adam_m || !p->adam_v || !p->owner_of) return VC_ERR_NOMEM;
    vc_status st = VC_OK;
    for (size_t i = 0; i < opt->n_params && !st; i++)
        if (vc_muon_param(opt, i)) st = add_member(p, opt, i);
    return st ? st : share(opt, rank, world);
}

vc_status vc_muon_plan_bind(vc_adamw *opt) {
    struct vc_muon_plan *p = opt->muon;
    for (size_t i = 0; i < opt->n_params; i++)
        if (!vc_muon_param(opt, i) && opt->m[i]) {
            p->adam_idx[p->n_adam] = i;
            p->adam_m[p->n_adam] = opt->m[i];
            p->adam_v[p->n_adam++] = opt->v[i];
        }
    size_t ws = 0, mat = 0;
    for (int k = 0; k < p->n_groups; k++) {
        if (!opt->m[p->g[k].member[0]]) continue; /* another rank's (layer-wise) */
        size_t w = vc_muon_ws_floats(p->g[k].rows, p->g[k].cols), m = (size_t)(p->g[k].rows * p->g[k].cols);
        if (w > ws) ws = w;
        if (m > mat) mat = m;
    }
    if (mat) {
        p->ws = opt->be->alloc(sizeof(float) * ws);
        p->mat = opt->be->alloc(sizeof(float) * mat);
        if (!p->ws || !p->mat) return VC_ERR_NOMEM;
    }
    return VC_OK;
}

/* the momentum of one member's k-th matrix, and its update direction into the group's matrix at row block dst:
 * m = lerp(m, g, 1 - beta) as m + (1 - beta)(g - m); u = m, or lerp(g, m, beta) = m + (1 - beta)(g - m) (Nesterov) */
static void member_momentum(const vc_backend *B, const vc_muon_config *c, float *m, const float *g, float *dst,
                            float *tmp, int64_t n) {
    float w = (float)(1.0 - c->momentum);
    B->scale(tmp, m, -1.0f, n);
    B->add(tmp, g, tmp, n); /* g - m */
    B->axpy(m, w, tmp, n);
    B->d2d(dst, m, sizeof(float) * (size_t)n);
    if (c->nesterov) {
        B->scale(tmp, m, -1.0f, n);
        B->add(tmp, g, tmp, n);
        B->axpy(dst, w, tmp, n);
    }
}

static vc_status group_step(vc_adamw *opt, const muon_group *gr, double lr) {
    const vc_backend *B = opt->be;
    const vc_muon_config *c = &opt->cfg.muon;
    struct vc_muon_plan *p = opt->muon;
    float s1 = (float)vc_muon_scale_factor(c->scale_mode, gr->rows, gr->cols), s2 = (float)c->extra_scale;
    float decay = (float)(1.0 - lr * opt->cfg.weight_decay);
    int mine = gr->owner == p->rank; /* another rank's: only the momentum here, its weights come by broadcast */
    if (!mine && c->layer_wise) return VC_OK; /* ... and layer-wise not even that: its owner keeps it */
    for (int i = 0; mine && i < gr->n; i++) { /* decoupled weight decay, p += (-lr wd) p, before the update */
        const vc_optim_param *q = &opt->params[gr->member[i]];
        if (q->decay && opt->cfg.weight_decay != 0) B->scale(q->w, q->w, decay, (int64_t)q->n);
    }
    for (int64_t k = 0; k < gr->mats; k++) {
        int64_t row = 0;
        for (int i = 0; i < gr->n; i++) {
            const vc_optim_param *q = &opt->params[gr->member[i]];
            int64_t blk = q->rows * q->cols, off = k * blk;
            member_momentum(B, c, opt->m[gr->member[i]] + off, q->g + off, p->mat + row * gr->cols, p->ws, blk);
            row += q->rows;
        }
        if (!mine) continue;
        vc_status st = vc_muon_ns(B, c, p->mat, gr->rows, gr->cols, p->ws);
        if (st) return st;
        B->scale(p->mat, p->mat, s1, gr->rows * gr->cols); /* orth_grad * scale_factor * extra_scale_factor */
        B->scale(p->mat, p->mat, s2, gr->rows * gr->cols);
        row = 0;
        for (int i = 0; i < gr->n; i++) {
            const vc_optim_param *q = &opt->params[gr->member[i]];
            int64_t blk = q->rows * q->cols;
            B->axpy(q->w + k * blk, (float)-lr, p->mat + row * gr->cols, blk);
            row += q->rows;
        }
    }
    return VC_OK;
}

/* a group's Newton-Schulz work per step (2 flops per multiply-add, times the steps' common factor) */
static double group_work(const muon_group *g) {
    double R = (double)g->rows, C = (double)g->cols, r = R < C ? R : C, c = R < C ? C : R;
    return (double)g->mats * 2.0 * (2.0 * r * r * c + r * r * r);
}

/* the item of the largest load first, each to the least loaded rank (lowest rank on ties): the same on every rank */
static void assign(const double *work, int n, int *owner, double *load, int world, int *order) {
    for (int k = 0; k < n; k++) order[k] = k;
    for (int a = 1; a < n; a++)
        for (int b = a; b > 0 && work[order[b]] > work[order[b - 1]]; b--) {
            int t = order[b];
            order[b] = order[b - 1];
            order[b - 1] = t;
        }
    for (int a = 0; a < n; a++) {
        int best = 0;
        for (int r = 1; r < world; r++)
            if (load[r] < load[best]) best = r;
        owner[order[a]] = best;
        load[best] += work[order[a]];
    }
}

/* Muon's groups by their Newton-Schulz work; layer-wise, every group and AdamW tensor by its state size (the largest
 * first: a group's momentum, an AdamW tensor's two moments) */
static vc_status share(vc_adamw *opt, int rank, int world) {
    struct vc_muon_plan *p = opt->muon;
    if (world < 1 || rank < 0 || rank >= world) return vc_fail(VC_ERR_ARG, "muon: rank %d of %d", rank, world);
    int lw = opt->cfg.muon.layer_wise, n = 0;
    size_t cap = opt->n_params + (size_t)p->n_groups + 1;
    double *load = vc_calloc((size_t)world, sizeof *load), *work = vc_calloc(cap, sizeof *work);
    int *order = vc_calloc(cap, sizeof *order), *owner = vc_calloc(cap, sizeof *owner);
    size_t *adam = vc_calloc(cap, sizeof *adam);
    vc_status st = load && work && order && owner && adam ? VC_OK : VC_ERR_NOMEM;
    if (!st) {
        for (int k = 0; k < p->n_groups; k++) {
            work[n] = lw ? 0 : group_work(&p->g[k]);
            for (int i = 0; lw && i < p->g[k].n; i++) work[n] += (double)opt->params[p->g[k].member[i]].n;
            n++;
        }
        for (size_t i = 0; lw && i < opt->n_params; i++)
            if (!vc_muon_param(opt, i)) {
                adam[n - p->n_groups] = i;
                work[n++] = 2.0 * (double)opt->params[i].n;
            }
        assign(work, n, owner, load, world, order);
        p->rank = rank;
        for (size_t i = 0; i < opt->n_params; i++) p->owner_of[i] = -1; /* AdamW's, not layer-wise: every rank */
        for (int k = 0; k < p->n_groups; k++) {
            p->g[k].owner = owner[k];
            for (int i = 0; i < p->g[k].n; i++) p->owner_of[p->g[k].member[i]] = owner[k];
        }
        for (int a = p->n_groups; a < n; a++) p->owner_of[adam[a - p->n_groups]] = owner[a];
    }
    free(load);
    free(work);
    free(order);
    free(owner);
    free(adam);
    return st;
}

int vc_adamw_muon_owner(const vc_adamw *opt, size_t i) {
    return opt->muon && i < opt->n_params ? opt->muon->owner_of[i] : -1;
}

int vc_adamw_holds(const vc_adamw *opt, size_t i) {
    if (i >= opt->n_params) return 0;
    if (!opt->muon || !opt->cfg.muon.layer_wise) return 1;
    int o = opt->muon->owner_of[i];
    return o < 0 || o == opt->muon->rank;
}

double vc_adamw_muon_flops(const vc_adamw *opt) {
    const struct vc_muon_plan *p = opt->muon;
    double f = 0;
    for (int k = 0; p && k < p->n_groups; k++) f += group_work(&p->g[k]);
    return p ? f * opt->cfg.muon.ns_steps : 0;
}

vc_status vc_muon_step(vc_adamw *opt, int64_t step, double lr) {
    struct vc_muon_plan *p = opt->muon;
    vc_status st = VC_OK;
    if (p->n_adam) {
        for (size_t j = 0; j < p->n_adam; j++) p->adam_p[j] = opt->params[p->adam_idx[j]];
        st = opt->be->adamw(p->adam_p, p->adam_m, p->adam_v, p->n_adam, &opt->cfg, step, lr);
    }
    for (int k = 0; k < p->n_groups && !st; k++) st = group_step(opt, &p->g[k], lr);
    return st ? st : opt->be->sync();
}

/* ---- verl's keys ---- */
void vc_muon_keys_default(vc_muon_keys *k) {
    *k = (vc_muon_keys){ "optim", 0.95, 1.0, 0.9, 5, 0, 1, 0, 0, 0, "spectral", "quintic", "blockwise", "medium", "adam" };
}

vc_status vc_muon_configure(const vc_muon_keys *k, vc_muon_config *c) {
    char key[200];
    vc_muon_config_default(c);
    c->on = 1;
    c->momentum = k->momentum;
    c->nesterov = k->nesterov;
    c->split_qkv = k->split_qkv;
    c->extra_scale = k->extra_scale;
    vc_status st = VC_OK;
#define KEY(name) (snprintf(key, sizeof key, "%s.%s", k->prefix, name), key)
    if (!(k->momentum >= 0 && k->momentum < 1))
        return vc_fail(VC_ERR_ARG, "%s=%g: expected a value in [0, 1)", KEY("muon_momentum"), k->momentum);
    if (k->ns_steps < 1 || k->ns_steps > 100)
        return vc_fail(VC_ERR_ARG, "%s=%lld: expected 1 to 100 (Megatron-core: at least 1)", KEY("muon_num_ns_steps"),
                       (long long)k->ns_steps);
    c->ns_steps = (int)k->ns_steps;
    if ((st = vc_muon_scale_parse(KEY("muon_scale_mode"), k->scale_mode, &c->scale_mode))) return st;
    if ((st = vc_muon_coeff_parse(KEY("muon_coefficient_type"), k->coefficient_type, &c->coeff))) return st;
    if ((st = vc_muon_prec_parse(KEY("muon_fp32_matmul_prec"), k->fp32_matmul_prec, &c->bf16))) return st;
    if (!k->tp_mode || (strcmp(k->tp_mode, "blockwise") && strcmp(k->tp_mode, "duplicated") &&
                        strcmp(k->tp_mode, "distributed")))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s=%s: not one of blockwise, duplicated, distributed", KEY("muon_tp_mode"),
                       k->tp_mode ? k->tp_mode : "null");
    if (!k->scalar_optimizer || strcmp(k->scalar_optimizer, "adam"))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s=%s: verlc updates the tensors Muon does not take with Megatron's adam",
                       KEY("muon_scalar_optimizer"), k->scalar_optimizer ? k->scalar_optimizer : "null");
    if (k->match_adamw_rms) {
        if (k->extra_scale != 1.0)
            return vc_fail(VC_ERR_ARG, "%s=true derives muon_extra_scale_factor from beta1, but muon_extra_scale_factor "
                           "was also set to %g: set one of the two", KEY("muon_match_adamw_update_rms"), k->extra_scale);
        if (!(k->beta1 >= 0 && k->beta1 < 1))
            return vc_fail(VC_ERR_ARG, "%s: betas[0]=%g must lie in [0, 1) to match AdamW's update RMS", k->prefix,
                           k->beta1);
        c->extra_scale = sqrt((1.0 - k->beta1) / (1.0 + k->beta1));
        if (!k->quiet)
            vc_info("%s=true: muon_extra_scale_factor %.6g = sqrt((1 - beta1) / (1 + beta1)) with beta1 %g",
                KEY("muon_match_adamw_update_rms"), c->extra_scale, k->beta1);
    }
    if (!(c->extra_scale > 0) || !isfinite(c->extra_scale))
        return vc_fail(VC_ERR_ARG, "%s=%g: expected a positive factor", KEY("muon_extra_scale_factor"), c->extra_scale);
    c->layer_wise = k->layer_wise; /* (with one rank: every tensor its own) */
#undef KEY
    return VC_OK;
}
