/* Quantization-aware training as verl's FSDP engine does it (fsdp_config.qat, mode w4a16; verl/utils/qat): every
 * nn.Linear of the decoder whose module path no ignore pattern matches and whose input width the group size divides
 * computes with its weight fake-quantized to NVFP4 (verl's QATLinear over its Triton kernel), the gradient passing
 * straight through to the full-precision weight the optimiser updates. q_proj / k_proj / v_proj and gate_proj /
 * up_proj under one module share one global scale (verl's fusion siblings), as a fused module (W_pack, qkv_proj,
 * gate_up_proj) does. Routed experts count as transformers 4 builds them, one nn.Linear per expert and projection
 * (gate and up siblings per expert), as verl's QAT recipe runs them; the router is a linear like any other (verl's
 * default ignore pattern re:.*mlp.gate$ leaves it out). GPT-2's Conv1D modules are not nn.Linear and stay as they are.
 *
 * The model reads the quantized weights between vc_model_weight_copies(m, 1) and (m, 0): the actor's micro-batches
 * of a step (forward and backward), its log-prob passes and its rollout (verl hands vLLM the same NVFP4 weights), so
 * rollout and training compute with one set of weights. Each time the full-precision weights are kept aside and put
 * back after, before the optimiser step: on a GPU in its memory, quantized there (the op table's absmax_many and
 * fake_fp4, the same arithmetic: src/model/qat_math.h); elsewhere, or where the GPU has no room for the copy, on the
 * host (through a staging buffer where the host cannot touch the backend's memory). */
#include "model/qat.h"
#include "model/qat_math.h"
#include "model_internal.h"
#include "tensor/backend.h"
#include "verlc/dtype.h"
#include "verlc/pool.h"
#include <math.h>
#include <oniguruma.h>
#include <stdlib.h>
#include <string.h>

float vc_qat_e4m3(float v) { return vc_qat_e4m3_fn(v); }

static inline float rd16(float x) { return vc_qat_rd16(x); }

void vc_qat_fake_quant(const float *x, float *y, int64_t rows, int64_t cols, int group, float amax, int bf16) {
    float gs, den;
    vc_qat_scales(amax, &gs, &den);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c0 = 0; c0 < cols; c0 += group) vc_qat_group(x + r * cols + c0, y + r * cols + c0, group, gs, den, bf16);
}

/* one module's rows: parameter tensor t's rows [row0, row0 + rows) */
typedef struct {
    vc_tensor *t;
    int64_t row0, rows, cols;
    int group;          /* the global scale's group (a module and its fusion siblings) */
    char name[160];     /* its module path */
    size_t at;          /* where its full-precision values sit in the host copy */
} qat_part;

struct vc_qat {
    qat_part *p;
    int n, cap, n_groups, n_modules, gsize, depth;
    float *keep;        /* the full-precision values while the quantized ones are in place */
    float *buf;         /* the quantized values on their way to backend memory (NULL: the backend's is the host's) */
    size_t buf_floats;  /* its size: the largest part, or 64 Mi floats where they fit */
    float *amax;        /* per group */
    int64_t *first;     /* part i's first task of 64 rows (first[n]: all of them) */
    float *chunk_max;   /* a task's largest |x| */
    size_t floats;
    /* a device backend with the QAT entries: the full-precision values kept in its memory, quantized there */
    const struct vc_backend *be;
    float *dev_keep;
    const float **ptrs; /* each part's rows */
    size_t *sizes;
};

static vc_status add_part(struct vc_qat *q, vc_tensor *t, int64_t row0, int64_t rows, const char *name) {
    if (q->n == q->cap) {
        int cap = q->cap ? 2 * q->cap : 64;
        qat_part *p = realloc(q->p, sizeof *p * (size_t)cap);
        if (!p) return vc_fail(VC_ERR_NOMEM, "QAT: no memory for the module list");
        q->p = p, q->cap = cap;
    }
    qat_part *p = &q->p[q->n++];
    memset(p, 0, sizeof *p);
    p->t = t, p->row0 = row0, p->rows = rows, p->cols = t->shape[t->ndim - 1];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->at = q->floats;
    q->floats += (size_t)(rows * p->cols);
    return VC_OK;
}

/* verl's ignore_patterns, each regular expression compiled once */
typedef struct {
    const vc_qat_spec *s;
    OnigRegex *re; /* [n_ignore]: NULL for a plain substring */
} qat_patterns;

static void patterns_free(qat_patterns *ps) {
    for (int i = 0; ps->re && i < ps->s->n_ignore; i++)
        if (ps->re[i]) onig_free(ps->re[i]);
    free(ps->re);
}

static vc_status patterns_compile(const vc_qat_spec *s, qat_patterns *ps) {
    ps->s = s;
    ps->re = calloc((size_t)(s->n_ignore > 0 ? s->n_ignore : 1), sizeof *ps->re);
    if (!ps->re) return vc_fail(VC_ERR_NOMEM, "QAT: no memory");
    for (int i = 0; i < s->n_ignore; i++) {
        const char *pat = s->ignore[i];
        if (strncmp(pat, "re:", 3)) continue;
        OnigErrorInfo ei;
        int r = onig_new(&ps->re[i], (const UChar *)pat + 3, (const UChar *)pat + strlen(pat), ONIG_OPTION_NONE,
                         ONIG_ENCODING_UTF8, ONIG_SYNTAX_PYTHON, &ei);
        if (r != ONIG_NORMAL) {
            UChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
            onig_error_code_to_str(msg, r, &ei);
            ps->re[i] = NULL;
            patterns_free(ps);
            return vc_fail(VC_ERR_ARG, "qat.ignore_patterns: '%s' is not a regular expression: %s", pat, (const char *)msg);
        }
    }
    return VC_OK;
}

/* verl's _should_quantize: "re:" + a regular expression matched at the path's start (re.match), else a substring */
static int ignored(const qat_patterns *ps, const char *name) {
    for (int i = 0; i < ps->s->n_ignore; i++) {
        if (!ps->re[i] && strstr(name, ps->s->ignore[i])) return 1;
        const UChar *a = (const UChar *)name, *e = a + strlen(name);
        if (ps->re[i] && onig_match(ps->re[i], a, e, a, NULL, ONIG_OPTION_NONE) >= 0) return 1;
    }
    return 0;
}

/* layer l's module of slot as the checkpoint names it (a fused module's name for each of its parts: W_pack,
 * qkv_proj, gate_up_proj), else as LoRA's module names go; 0 when GPT-2's Conv1D (not an nn.Linear) holds it */
static int module_path(const vc_model *m, int l, int slot, char *buf, size_t cap) {
    for (int i = 0; i < m->n_src; i++) {
        const vc_source *s = &m->src[i];
        size_t n = strlen(s->name);
        if (s->layer != l || !s->rule || !vc_rule_has_slot(s->rule, slot) || n < 8 || strcmp(s->name + n - 7, ".weight"))
            continue;
        if (s->rule->transform == VC_TR_CONV1D) return 0;
        snprintf(buf, cap, "%.*s", (int)(n - 7), s->name);
        return 1;
    }
    vc_lora_module_name(m, l, slot, buf, cap);
    return 1;
}

/* the checkpoint's per-expert tensors of layer l (per slot k of EXP and expert e: names[k * E + e]), or none */
static const int EXP[] = { VC_W_EXP_GATE, VC_W_EXP_UP, VC_W_EXP_DOWN };
static void expert_sources(const vc_model *m, int l, int64_t E, const char **names) {
    for (int64_t i = 0; i < 3 * E; i++) names[i] = NULL;
    for (int i = 0; i < m->n_src; i++) {
        const vc_source *s = &m->src[i];
        size_t n = strlen(s->name);
        if (s->layer != l || s->expert < 0 || s->expert >= E || !s->rule || s->rule->transform != VC_TR_EXPERT || n < 8 ||
            strcmp(s->name + n - 7, ".weight"))
            continue;
        for (int k = 0; k < 3; k++)
            if (s->rule->slot == EXP[k]) names[k * E + s->expert] = s->name;
    }
}

/* expert e's module path of slot: the checkpoint's per-expert name (src: its tensor, or NULL), else transformers 4's
 * experts.E.<proj> */
static void expert_name(const vc_model *m, int l, int slot, int e, const char *src, char *buf, size_t cap) {
    if (src) {
        snprintf(buf, cap, "%.*s", (int)(strlen(src) - 7), src);
        return;
    }
    char base[140];
    vc_lora_module_name(m, l, VC_W_EXP_DOWN, base, sizeof base);
    snprintf(buf, cap, "%s.%d.%s", base, e,
             slot == VC_W_EXP_GATE ? "gate_proj" : slot == VC_W_EXP_UP ? "up_proj" : "down_proj");
}

/* a candidate module: kept unless ignored or its width is not a multiple of the group */
static vc_status consider(struct vc_qat *q, const qat_patterns *ps, vc_tensor *t, int64_t row0, int64_t rows,
                          const char *name) {
    if (ignored(ps, name) || t->shape[t->ndim - 1] % ps->s->group_size) return VC_OK;
    return add_part(q, t, row0, rows, name);
}

static const char *const SIBLINGS[][3] = { { "q_proj", "k_proj", "v_proj" }, { "gate_proj", "up_proj", NULL } };

/* the fusion family (1 + index into SIBLINGS) of a module path and its parent's length; 0 if none */
static int family(const char *name, size_t *parent) {
    const char *dot = strrchr(name, '.');
    if (!dot) return 0;
    for (int f = 0; f < 2; f++)
        for (int k = 0; k < 3 && SIBLINGS[f][k]; k++)
            if (!strcmp(dot + 1, SIBLINGS[f][k])) return *parent = (size_t)(dot - name), f + 1;
    return 0;
}

/* a part's group key: its module path, or for a fusion sibling its parent and family ("model.layers.0.self_attn" +
 * "\1" + family), so that sorting brings a group's parts together */
typedef struct {
    char key[176];
    const char *name;
    int part;
} group_key;

static int by_key(const void *a, const void *b) { /* (then by path: a path's parts lie together) */
    const group_key *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (!c) c = strcmp(x->name, y->name);
    return c ? c : x->part - y->part;
}

/* groups: parts of one module path share one; siblings (two or more modules of a family under one parent) too */
static vc_status assign_groups(struct vc_qat *q) {
    group_key *k = malloc(sizeof *k * (size_t)(q->n ? q->n : 1));
    if (!k) return vc_fail(VC_ERR_NOMEM, "QAT: no memory");
    for (int i = 0; i < q->n; i++) {
        size_t pl = 0;
        int f = family(q->p[i].name, &pl);
        if (f) snprintf(k[i].key, sizeof k[i].key, "%.*s\1%d", (int)pl, q->p[i].name, f);
        else snprintf(k[i].key, sizeof k[i].key, "%s", q->p[i].name);
        k[i].part = i, k[i].name = q->p[i].name;
    }
    qsort(k, (size_t)q->n, sizeof *k, by_key);
    q->n_modules = 0; /* (distinct paths) */
    for (int i = 0; i < q->n; i++) q->n_modules += !i || strcmp(k[i].key, k[i - 1].key) || strcmp(k[i].name, k[i - 1].name);
    q->n_groups = 0;
    for (int i = 0; i < q->n; i++) {
        if (i && strcmp(k[i].key, k[i - 1].key)) q->n_groups++;
        q->p[k[i].part].group = q->n_groups;
    }
    q->n_groups += q->n > 0;
    free(k);
    return VC_OK;
}

static vc_status collect(vc_model *m, const qat_patterns *s, struct vc_qat *q) {
    const vc_model_config *c = &m->cfg;
    int slots[64], n = vc_lora_linear_slots(slots, 64);
    char name[160];
    vc_status st = VC_OK;
    for (int l = 0; l < c->n_layer && !st; l++) {
        for (int k = 0; k < n && !st; k++) {
            vc_tensor *W = vc_w(m, l, slots[k]);
            if (W && W->ndim == 2 && module_path(m, l, slots[k], name, sizeof name))
                st = consider(q, s, W, 0, W->shape[0], name);
        }
        vc_tensor *R = vc_w(m, l, VC_W_ROUTER);
        if (!st && R && R->ndim == 2 && module_path(m, l, VC_W_ROUTER, name, sizeof name))
            st = consider(q, s, R, 0, R->shape[0], name);
        vc_tensor *G = vc_w(m, l, VC_W_EXP_GATE);
        int64_t n_exp = G && G->ndim == 3 ? G->shape[0] : 0;
        const char **srcs = n_exp ? malloc(sizeof *srcs * (size_t)(3 * n_exp)) : NULL;
        if (n_exp && !srcs) st = vc_fail(VC_ERR_NOMEM, "QAT: no memory");
        if (srcs) expert_sources(m, l, n_exp, srcs);
        for (int k = 0; k < 3 && !st; k++) {
            vc_tensor *E = vc_w(m, l, EXP[k]);
            if (!E || E->ndim != 3) continue;
            for (int64_t e = 0; e < E->shape[0] && !st; e++) {
                expert_name(m, l, EXP[k], (int)e, srcs && e < n_exp ? srcs[k * n_exp + e] : NULL, name, sizeof name);
                st = consider(q, s, E, e * E->shape[1], E->shape[1], name);
            }
        }
        free(srcs);
    }
    vc_tensor *H = vc_w(m, -1, VC_W_LM_HEAD);
    if (!st && H && !c->tied) st = consider(q, s, H, 0, H->shape[0], "lm_head");
    if (!st && c->tied && !ignored(s, "lm_head") && c->hidden % s->s->group_size == 0)
        st = vc_fail(VC_ERR_UNSUPPORTED, "QAT: the LM head is tied to the token embedding; keep \"lm_head\" in "
                                         "qat.ignore_patterns (verl's default)");
    return st;
}

void vc_qat_free(struct vc_qat *q) {
    if (!q) return;
    if (q->dev_keep) q->be->free(q->dev_keep);
    free(q->ptrs);
    free(q->sizes);
    free(q->p);
    free(q->keep);
    free(q->buf);
    free(q->amax);
    free(q->first);
    free(q->chunk_max);
    free(q);
}

vc_status vc_model_qat(vc_model *m, const vc_qat_spec *s) {
    if (m->qat && m->qat->depth) return vc_fail(VC_ERR_INTERNAL, "QAT: changed while the quantized weights are in use");
    vc_qat_free(m->qat);
    m->qat = NULL;
    if (!s) return VC_OK;
    if (s->group_size < 1 || s->group_size > 256)
        return vc_fail(VC_ERR_ARG, "qat.group_size=%d: 1 to 256 (NVFP4's is 16)", s->group_size);
    if (m->lora) return vc_fail(VC_ERR_UNSUPPORTED, "QAT with LoRA adapters is not built (verl fake-quantizes the "
                                                    "adapters' own linears too); train without one of them");
    if (m->vision) return vc_fail(VC_ERR_UNSUPPORTED, "QAT on an image-text model: the vision tower's linears are not "
                                                      "fake-quantized in verlc; train without QAT");
    struct vc_qat *q = calloc(1, sizeof *q);
    if (!q) return vc_fail(VC_ERR_NOMEM, "QAT: no memory");
    q->gsize = s->group_size;
    qat_patterns ps;
    vc_status st = patterns_compile(s, &ps);
    if (!st) {
        st = collect(m, &ps, q);
        patterns_free(&ps);
    }
    if (st) {
        vc_qat_free(q);
        return st;
    }
    if ((st = assign_groups(q))) {
        vc_qat_free(q);
        return st;
    }
    size_t bytes = sizeof(float) * (q->floats ? q->floats : 1);
    q->be = m->be;
    if (!m->be->host_visible && m->be->fake_fp4 && m->be->absmax_many) { /* (else through the host) */
        q->ptrs = malloc(sizeof *q->ptrs * (size_t)(q->n ? q->n : 1));
        q->sizes = malloc(sizeof *q->sizes * (size_t)(q->n ? q->n : 1));
        q->dev_keep = q->ptrs && q->sizes ? m->be->alloc(bytes) : NULL;
        if (!q->dev_keep) vc_clear_error(); /* (no room on the device: the host keeps them) */
        for (int i = 0; q->dev_keep && i < q->n; i++) {
            q->ptrs[i] = q->p[i].t->data + q->p[i].row0 * q->p[i].cols;
            q->sizes[i] = (size_t)(q->p[i].rows * q->p[i].cols);
        }
    }
    q->keep = q->dev_keep ? NULL : malloc(bytes);
    for (int i = 0; i < q->n; i++) { /* the staging buffer of a device backend */
        size_t f = (size_t)(q->p[i].rows * q->p[i].cols);
        q->buf_floats = f > q->buf_floats ? f : q->buf_floats;
    }
    const char *env = getenv("VERLC_QAT_STAGING_FLOATS"); /* (tests: a smaller floor, down to the largest part) */
    size_t floor = env && atoll(env) > 0 ? (size_t)atoll(env) : (size_t)64 << 20;
    if (q->buf_floats < floor) q->buf_floats = q->floats < floor ? q->floats : floor;
    q->buf = m->be->host_visible || q->dev_keep ? NULL : malloc(sizeof(float) * (q->buf_floats ? q->buf_floats : 1));
    q->amax = malloc(sizeof(float) * (size_t)(q->n_groups + 1));
    q->first = malloc(sizeof(int64_t) * (size_t)(q->n + 1));
    if (q->first) {
        q->first[0] = 0;
        for (int i = 0; i < q->n; i++) q->first[i + 1] = q->first[i] + (q->p[i].rows + 63) / 64;
    }
    q->chunk_max = q->first ? malloc(sizeof(float) * (size_t)(q->first[q->n] + 1)) : NULL;
    if ((!q->keep && !q->dev_keep) || (!m->be->host_visible && !q->dev_keep && !q->buf) || !q->amax || !q->first ||
        !q->chunk_max) {
        vc_qat_free(q);
        return vc_fail(VC_ERR_NOMEM, "QAT: no host memory for a copy of the quantized weights (%.1f MB)", bytes / 1e6);
    }
    m->qat = q;
    return VC_OK;
}

size_t vc_model_qat_bytes(const vc_model *m) {
    const struct vc_qat *q = m->qat;
    return q && !q->dev_keep ? sizeof(float) * (q->floats + (q->buf ? q->buf_floats : 0)) : 0;
}

int vc_model_qat_modules(const vc_model *m) { return m->qat ? m->qat->n_modules : 0; }

typedef struct {
    struct vc_qat *q;
    int bf16, pass; /* pass 0: each chunk's largest |x| into chunk_max; 1: the quantized values */
    int64_t task0;  /* the first task of this run */
    size_t at0;     /* pass 1 with a staging buffer: where it starts in the host copy */
} fq_ctx;

static void fq_task(void *p, int64_t task) {
    fq_ctx *c = p;
    struct vc_qat *q = c->q;
    task += c->task0;
    int lo = 0, hi = q->n - 1; /* the part holding this chunk: first[i] <= task < first[i + 1] */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (q->first[mid] <= task) lo = mid;
        else hi = mid - 1;
    }
    const qat_part *t = &q->p[lo];
    int64_t r0 = (task - q->first[lo]) * 64, rows = t->rows - r0 < 64 ? t->rows - r0 : 64;
    size_t off = t->at + (size_t)(r0 * t->cols);
    const float *x = q->keep + off;
    if (c->pass == 0) {
        float a = 0;
        if (c->bf16)
            for (int64_t k = 0; k < rows * t->cols; k++) a = fabsf(rd16(x[k])) > a ? fabsf(rd16(x[k])) : a;
        else
            for (int64_t k = 0; k < rows * t->cols; k++) a = fabsf(x[k]) > a ? fabsf(x[k]) : a;
        q->chunk_max[task] = a;
        return;
    }
    float *y = q->buf ? q->buf + (off - c->at0) : t->t->data + (t->row0 + r0) * t->cols;
    vc_qat_fake_quant(x, y, rows, t->cols, q->gsize, q->amax[t->group], c->bf16);
}

/* on the device: the full-precision values copied beside, each part's largest |x|, then the parts in place */
static void qat_on_device(vc_model *m, struct vc_qat *q, int bf16) {
    for (int i = 0; i < q->n; i++) m->be->d2d(q->dev_keep + q->p[i].at, q->ptrs[i], sizeof(float) * q->sizes[i]);
    if (q->n && m->be->absmax_many(q->ptrs, q->sizes, (size_t)q->n, bf16, q->chunk_max)) return; /* (sticky error) */
    for (int g = 0; g < q->n_groups; g++) q->amax[g] = 0;
    for (int i = 0; i < q->n; i++)
        q->amax[q->p[i].group] = q->chunk_max[i] > q->amax[q->p[i].group] ? q->chunk_max[i] : q->amax[q->p[i].group];
    for (int i = 0; i < q->n; i++)
        m->be->fake_fp4((float *)q->ptrs[i], q->p[i].rows, q->p[i].cols, q->gsize, q->amax[q->p[i].group], bf16);
}

/* keeps the full-precision values, writes the quantized ones in their place */
static void qat_on(vc_model *m, struct vc_qat *q) {
    fq_ctx c = { q, vc_matmul_precision() == VC_PREC_BF16, 0, 0, 0 };
    if (q->dev_keep) {
        qat_on_device(m, q, c.bf16);
        return;
    }
    for (int i = 0; i < q->n; i++) {
        const qat_part *p = &q->p[i];
        m->be->d2h(q->keep + p->at, p->t->data + p->row0 * p->cols, sizeof(float) * (size_t)(p->rows * p->cols));
    }
    if (!q->n) return;
    vc_parallel(q->first[q->n], fq_task, &c);
    for (int g = 0; g < q->n_groups; g++) q->amax[g] = 0;
    for (int i = 0; i < q->n; i++)
        for (int64_t k = q->first[i]; k < q->first[i + 1]; k++)
            q->amax[q->p[i].group] = fmaxf(q->amax[q->p[i].group], q->chunk_max[k]);
    c.pass = 1;
    if (!q->buf) { /* (host memory: straight into the parameters) */
        vc_parallel(q->first[q->n], fq_task, &c);
        return;
    }
    for (int i0 = 0, i1; i0 < q->n; i0 = i1) { /* runs of parts the staging buffer holds, each then uploaded */
        for (i1 = i0 + 1; i1 < q->n && q->p[i1].at + (size_t)(q->p[i1].rows * q->p[i1].cols) - q->p[i0].at <= q->buf_floats;)
            i1++;
        c.task0 = q->first[i0], c.at0 = q->p[i0].at;
        vc_parallel(q->first[i1] - q->first[i0], fq_task, &c);
        for (int i = i0; i < i1; i++) {
            const qat_part *p = &q->p[i];
            m->be->h2d(p->t->data + p->row0 * p->cols, q->buf + (p->at - c.at0), sizeof(float) * (size_t)(p->rows * p->cols));
        }
    }
}

static void qat_off(vc_model *m, struct vc_qat *q) {
    for (int i = 0; i < q->n; i++) {
        const qat_part *p = &q->p[i];
        size_t bytes = sizeof(float) * (size_t)(p->rows * p->cols);
        if (q->dev_keep) m->be->d2d(p->t->data + p->row0 * p->cols, q->dev_keep + p->at, bytes);
        else m->be->h2d(p->t->data + p->row0 * p->cols, q->keep + p->at, bytes);
    }
}

void vc_qat_hold(vc_model *m, int on) {
    struct vc_qat *q = m->qat;
    if (!q) return;
    if (on && q->depth++) return;
    if (!on && (!q->depth || --q->depth)) return;
    if (on) qat_on(m, q);
    else qat_off(m, q);
}
