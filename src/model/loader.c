/* Loading a Hugging Face checkpoint into slots. Every rule of the architecture is tried at every layer
 * (and expert) where its destination slots exist; each checkpoint tensor must be claimed by a rule,
 * be known to be ignorable, or the load fails naming it. */
#include "backend/cpu/cpu.h"
#include "model_internal.h"
#include "verlc/vision.h"
#include "verlc/json.h"
#include "verlc/pool.h"
#include "verlc/safetensors.h"
#include <math.h>
#include <string.h>

static int n_placeholders(const char *pat) {
    int n = 0;
    for (const char *p = pat; (p = strstr(p, "%d")); p += 2) n++;
    return n;
}

/* does `name` match `pat` with its %d fields? */
static int match(const char *pat, const char *name, int *a, int *b) {
    int vals[2] = { -1, -1 }, k = 0;
    while (*pat) {
        if (pat[0] == '%' && pat[1] == 'd') {
            if (*name < '0' || *name > '9') return 0;
            long v = 0;
            while (*name >= '0' && *name <= '9' && v < 1000000) v = v * 10 + (*name++ - '0');
            if (k < 2) vals[k++] = (int)v;
            pat += 2;
        } else if (*pat++ != *name++) return 0;
    }
    if (*name) return 0;
    *a = vals[0];
    *b = vals[1];
    return 1;
}

int vc_rule_for_name(const vc_model *m, const char *name, vc_source *tmp) {
    for (const vc_tensor_rule *const *t = m->cfg.arch->tables; *t; t++)
        for (const vc_tensor_rule *r = *t; r->name; r++) {
            int a, b, ph = n_placeholders(r->name);
            if (r->transform == VC_TR_IGNORE || ph > 1 || !match(r->name, name, &a, &b)) continue;
            if (ph && (a < 0 || a >= m->cfg.n_layer)) continue;
            vc_tensor *p[VC_RULE_PARTS];
            int n = vc_rule_parts(m, r, ph ? a : -1, p), ok = n > 0;
            for (int i = 0; i < n; i++) ok &= p[i] != NULL;
            if (!ok) continue;
            memset(tmp, 0, sizeof *tmp);
            tmp->rule = r;
            tmp->layer = ph ? a : -1;
            tmp->expert = -1;
            return 1;
        }
    return 0;
}

static void slot_index(const vc_model *m, int layer, int slot, size_t *i) {
    *i = (size_t)(layer < 0 ? m->cfg.n_layer : layer) * VC_W_COUNT + (size_t)slot;
}

int vc_rule_parts(const vc_model *m, const vc_tensor_rule *r, int layer, vc_tensor **parts) {
    int ids[VC_RULE_PARTS], n = vc_rule_slots(r, ids);
    for (int i = 0; i < n; i++) parts[i] = vc_w(m, layer, ids[i]);
    return n;
}

/* expected checkpoint shape of a source */
static int source_shape(const vc_model *m, const vc_source *s, int64_t *shape) {
    vc_tensor *p[VC_RULE_PARTS];
    int n = vc_rule_parts(m, s->rule, s->layer, p);
    for (int i = 0; i < n; i++)
        if (!p[i]) return 0;
    switch (s->rule->transform) {
    case VC_TR_EXPERT:
        for (int d = 1; d < p[0]->ndim; d++) shape[d - 1] = p[0]->shape[d];
        return p[0]->ndim - 1;
    case VC_TR_EXPERT_GATE_UP:
        shape[0] = p[0]->shape[0];
        shape[1] = p[0]->shape[1] + p[1]->shape[1];
        shape[2] = p[0]->shape[2];
        return 3;
    case VC_TR_OAI_GATE_UP: case VC_TR_T_GATE_UP: /* [E, H, 2I] */
        shape[0] = p[0]->shape[0];
        shape[1] = p[0]->shape[2];
        shape[2] = 2 * p[0]->shape[1];
        return 3;
    case VC_TR_OAI_GATE_UP_B: /* [E, 2I] */
        shape[0] = p[0]->shape[0];
        shape[1] = 2 * p[0]->shape[1];
        return 2;
    case VC_TR_CONV1D: /* [in, out] */
        shape[0] = p[0]->shape[1];
        shape[1] = 0;
        for (int i = 0; i < n; i++) shape[1] += p[i]->shape[0];
        return 2;
    case VC_TR_T_DOWN: /* [E, I, H] */
        shape[0] = p[0]->shape[0];
        shape[1] = p[0]->shape[2];
        shape[2] = p[0]->shape[1];
        return 3;
    case VC_TR_FLAT: /* [E R, C] */
        shape[0] = p[0]->shape[0] * p[0]->shape[1];
        shape[1] = p[0]->shape[2];
        return 2;
    case VC_TR_FLAT_T_DOWN: /* [E I, H] */
        shape[0] = p[0]->shape[0] * p[0]->shape[2];
        shape[1] = p[0]->shape[1];
        return 2;
    default:
        for (int d = 0; d < p[0]->ndim; d++) shape[d] = p[0]->shape[d];
        for (int i = 1; i < n; i++) shape[0] += p[i]->shape[0];
        return p[0]->ndim;
    }
}

/* input-major expert layouts (gpt-oss, Llama 4, Qwen3-VL-MoE's hub): part k's [e, r, c] (parts [E, R, C] row-major,
 * np of them) <-> its place in the checkpoint tensor buf: [e, c, r * np + k] for gpt-oss's alternating columns, [e, c,
 * k * R + r] for halves (gate | up), [e, c * np + k] for gpt-oss's biases (tr 0, R = 1); to_parts: buf into the parts,
 * else back */
typedef struct {
    float *buf;
    float *const *part;
    int np, tr, to_parts, halves;
    int64_t R, C;
} permute_ctx;

/* one expert (task e) of expert_permute */
static void permute_expert(void *p, int64_t e) {
    const permute_ctx *c = p;
    int64_t R = c->R, C = c->C, np = c->np;
    for (int k = 0; k < c->np; k++)
        for (int64_t r = 0; r < R; r++)
            for (int64_t j = 0; j < C; j++) {
                float *x = c->part[k] + (e * R + r) * C + j;
                int64_t col = c->halves ? k * R + r : r * np + k; /* Llama 4: [gate | up] halves */
                float *y = c->buf + (c->tr ? (e * C + j) * R * np + col : e * C * np + j * np + k);
                if (c->to_parts) *x = *y;
                else *y = *x;
            }
}

static void expert_permute(float *buf, float *const *part, int np, int64_t E, int64_t R, int64_t C, int tr, int to_parts,
                        int halves) {
    permute_ctx c = { buf, part, np, tr, to_parts, halves, R, C };
    vc_parallel(E, permute_expert, &c); /* experts are disjoint: threads write different elements */
}

/* the input-major expert transforms through host copies of the parts */
static vc_status expert_transfer(const vc_model *m, vc_tensor *const *p, int np, const vc_source *s, float *buf,
                                 int store) {
    const int grad = store == 2;
    float *h[2] = { NULL, NULL };
    vc_status st = VC_ERR_NOMEM;
    for (int k = 0; k < np; k++)
        if (!(h[k] = vc_malloc(sizeof(float) * (size_t)p[k]->n))) goto out;
    int tr = s->rule->transform != VC_TR_OAI_GATE_UP_B;
    int64_t E = p[0]->shape[0], R = tr ? p[0]->shape[1] : 1, C = tr ? p[0]->shape[2] : p[0]->shape[1];
    for (int k = 0; k < np && store; k++) m->be->d2h(h[k], grad ? p[k]->grad : p[k]->data, sizeof(float) * (size_t)p[k]->n);
    expert_permute(buf, h, np, E, R, C, tr, !store, s->rule->transform == VC_TR_T_GATE_UP);
    for (int k = 0; k < np && !store; k++) m->be->h2d(p[k]->data, h[k], sizeof(float) * (size_t)p[k]->n);
    st = VC_OK;
out:
    free(h[0]);
    free(h[1]);
    return st;
}

int vc_grouped_rows(const vc_model_config *c, int transform, vc_grouped_layout *gl) {
    int64_t hd = c->head_dim, kd = c->lin_nk * c->lin_dk, r = c->lin_nk ? c->lin_nv / c->lin_nk : 0;
    memset(gl, 0, sizeof *gl);
    switch (transform) {
    case VC_TR_GQA_QKV: /* InternLM2's wqkv: per KV group [its q heads, k, v] */
        *gl = (vc_grouped_layout){ c->n_kv_head, 3, { 0, 1, 2 }, { 0, 0, 0 }, { c->n_head / c->n_kv_head * hd, hd, hd } };
        break;
    case VC_TR_HEAD_SPLIT: /* per head [q, gate] */
        *gl = (vc_grouped_layout){ c->n_head, 2, { 0, 1 }, { 0, 0 }, { hd, hd } };
        break;
    case VC_TR_QKVZ: /* per q/k head [q, k, v of its value heads, z of them] */
        *gl = (vc_grouped_layout){ c->lin_nk, 4, { 0, 0, 0, 1 }, { 0, kd, 2 * kd, 0 },
                                { c->lin_dk, c->lin_dk, r * c->lin_dv, r * c->lin_dv } };
        break;
    case VC_TR_CODEGEN_QKV: /* 4 blocks of [q, v, k], hidden / 4 rows each (slots q, k, v: parts 0, 2, 1) */
        *gl = (vc_grouped_layout){ 4, 3, { 0, 2, 1 }, { 0, 0, 0 }, { c->hidden / 4, c->hidden / 4, c->hidden / 4 } };
        break;
    case VC_TR_BA: /* per q/k head [b of its value heads, a of them] */
        *gl = (vc_grouped_layout){ c->lin_nk, 2, { 0, 1 }, { 0, 0 }, { r, r } };
        break;
    default: return 0;
    }
    return 1;
}

vc_status vc_rule_transfer(const vc_model *m, const vc_source *s, float *buf, int store) {
    vc_tensor *p[VC_RULE_PARTS];
    int n = vc_rule_parts(m, s->rule, s->layer, p);
    const int grad = store == 2; /* 2: store gradients instead of weights */
#define DATA(t) (grad ? (t)->grad : (t)->data)
    const vc_backend *be = m->be;
#define MOVE(dst_slot, src_buf, cnt) \
    do { if (store) be->d2h(src_buf, dst_slot, (size_t)(cnt) * 4); else be->h2d(dst_slot, src_buf, (size_t)(cnt) * 4); } while (0)
    switch (s->rule->transform) {
    case VC_TR_OAI_GATE_UP: case VC_TR_OAI_GATE_UP_B: case VC_TR_T_DOWN: case VC_TR_T_GATE_UP: case VC_TR_FLAT_T_DOWN:
        return expert_transfer(m, p, n, s, buf, store);
    case VC_TR_EXPERT: {
        int64_t per = p[0]->n / p[0]->shape[0];
        MOVE(DATA(p[0]) + (int64_t)s->expert * per, buf, per);
        break;
    }
    case VC_TR_EXPERT_GATE_UP: {
        int64_t E = p[0]->shape[0], g = p[0]->n / E, u = p[1]->n / E;
        for (int64_t e = 0; e < E; e++) {
            MOVE(DATA(p[0]) + e * g, buf + e * (g + u), g);
            MOVE(DATA(p[1]) + e * u, buf + e * (g + u) + g, u);
        }
        break;
    }
    case VC_TR_CONV1D: { /* buf [in, out] <-> the parts' [out_i, in] rows, through a host transpose */
        int64_t in = p[0]->shape[1], out = 0;
        for (int i = 0; i < n; i++) out += p[i]->shape[0];
        float *t = vc_malloc(sizeof(float) * (size_t)(in * out));
        if (!t) return VC_ERR_NOMEM; /* vc_malloc named the size */
        if (!store)
            for (int64_t a = 0; a < in; a++)
                for (int64_t o = 0; o < out; o++) t[o * in + a] = buf[a * out + o];
        float *b = t;
        for (int i = 0; i < n; i++) {
            MOVE(DATA(p[i]), b, p[i]->n);
            b += p[i]->n;
        }
        if (store) /* (d2h has finished on return, as h2d has read its source) */
            for (int64_t a = 0; a < in; a++)
                for (int64_t o = 0; o < out; o++) buf[a * out + o] = t[o * in + a];
        free(t);
        break;
    }
    case VC_TR_GQA_QKV: case VC_TR_HEAD_SPLIT: case VC_TR_QKVZ: case VC_TR_BA: case VC_TR_CODEGEN_QKV: {
        vc_grouped_layout gl;
        vc_grouped_rows(&m->cfg, s->rule->transform, &gl);
        int64_t cols = p[0]->ndim > 1 ? p[0]->n / p[0]->shape[0] : 1;
        float *b = buf;
        for (int64_t g = 0; g < gl.groups; g++)
            for (int k = 0; k < gl.n; k++) {
                MOVE(DATA(p[gl.part[k]]) + (gl.base[k] + g * gl.rows[k]) * cols, b, gl.rows[k] * cols);
                b += gl.rows[k] * cols;
            }
        break;
    }
    default: {
        float *b = buf;
        for (int i = 0; i < n; i++) {
            MOVE(DATA(p[i]), b, p[i]->n);
            b += p[i]->n;
        }
    }
    }
#undef MOVE
#undef DATA
    return VC_OK;
}

vc_status vc_rule_read_range(const vc_model *m, const vc_source *s, size_t offset, size_t n, float *buf) {
    vc_tensor *p[VC_RULE_PARTS];
    int np = vc_rule_parts(m, s->rule, s->layer, p);
    const float *from[VC_RULE_PARTS];
    size_t len[VC_RULE_PARTS];
    switch (s->rule->transform) {
    case VC_TR_EXPERT: {
        int64_t per = p[0]->n / p[0]->shape[0];
        from[0] = p[0]->data + (int64_t)s->expert * per, len[0] = (size_t)per, np = 1;
        break;
    }
    case VC_TR_NONE: case VC_TR_SPLIT_ROWS: case VC_TR_FLAT: /* the parts' rows one after another */
        for (int i = 0; i < np; i++) from[i] = p[i]->data, len[i] = (size_t)p[i]->n;
        break;
    default: return VC_ERR_UNSUPPORTED;
    }
    for (int i = 0; i < np && n; i++) {
        if (offset >= len[i]) {
            offset -= len[i];
            continue;
        }
        size_t k = len[i] - offset < n ? len[i] - offset : n;
        m->be->d2h(buf, from[i] + offset, k * sizeof(float));
        buf += k, n -= k, offset = 0;
    }
    if (n) return vc_fail(VC_ERR_ARG, "%s: a range beyond the tensor", s->name);
    return m->be->sync();
}

typedef struct {
    vc_model *m;
    vc_checkpoint *ck;
    uint8_t *claimed;  /* per checkpoint tensor */
    uint8_t *provided; /* per slot instance */
    uint8_t *present;  /* optional slot instance found in the checkpoint */
} load_ctx;

static vc_status add_source(vc_model *m, const vc_tensor_rule *r, int layer, int expert, const char *name) {
    if (m->n_src % 64 == 0) {
        vc_source *ns = realloc(m->src, sizeof *ns * (size_t)(m->n_src + 64));
        if (!ns) return vc_fail(VC_ERR_NOMEM, "model: out of memory");
        m->src = ns;
    }
    vc_source *s = &m->src[m->n_src];
    memset(s, 0, sizeof *s);
    s->name = vc_strdup(name);
    if (!s->name) return VC_ERR_NOMEM;
    s->rule = r;
    s->layer = layer;
    s->expert = expert;
    m->n_src++;
    return VC_OK;
}

/* Calls fn for every (rule, layer, expert) whose destination slots exist in this config. */
typedef vc_status (*visit_fn)(void *ctx, const vc_tensor_rule *r, int layer, int expert, const char *name);
static vc_status visit_rules(const vc_model_config *c, visit_fn fn, void *ctx) {
    char name[256];
    for (const vc_tensor_rule *const *t = c->arch->tables; *t; t++)
        for (const vc_tensor_rule *r = *t; r->name; r++) {
            if (r->transform == VC_TR_IGNORE) continue;
            int ph = n_placeholders(r->name);
            for (int l = ph ? 0 : -1; l < (ph ? vc_cfg_rows(c) : 0); l = vc_row_next(c, l)) {
                int64_t sh[4], rows = 0;
                int opt, ok = 1, ids[VC_RULE_PARTS], np = vc_rule_slots(r, ids);
                for (int i = 0; i < np; i++) {
                    ok &= vc_slot_shape(c, l, ids[i], sh, &opt) > 0;
                    if (!i) rows = sh[0];
                }
                if (!ok || (ph && vc_slot_is_global(ids[0]) && l <= c->n_layer)) continue; /* (an MTP row's copy) */
                /* a tensor per row block of a stacked slot: per expert, or (StableLM 2 12B's norms) per head */
                int ne = ph == 2 ? (int)rows : 1;
                for (int e = 0; e < ne; e++) {
                    char row[256];
                    snprintf(row, sizeof row, r->name, l, e);
                    /* (an MTP row's tensor under the checkpoint's name) */
                    vc_status st = fn(ctx, r, l, ph == 2 ? e : -1, vc_arch_row_name(c, l, r->slot, row, name, sizeof name));
                    if (st) return st;
                }
            }
        }
    return VC_OK;
}

/* the checkpoint's tensor for a rule's name: itself, or where a nesting architecture puts it */
static const vc_st_tensor *find_nested(const vc_model *m, vc_checkpoint *ck, const char *name, char *buf,
                                       size_t cap, const char **found) {
    const vc_st_tensor *t = vc_ckpt_find(ck, name);
    *found = name;
    for (const char *const *n = m->cfg.arch->nested; !t && n && n[0]; n += 2) {
        size_t k = strlen(n[0]);
        if (strncmp(name, n[0], k)) continue;
        snprintf(buf, cap, "%s%s", n[1], name + k);
        if ((t = vc_ckpt_find(ck, buf))) *found = buf;
    }
    return t;
}

/* the rule's slots of this layer are in the checkpoint */
static void mark_present(load_ctx *x, const vc_tensor_rule *r, int layer) {
    int ids[VC_RULE_PARTS], n = vc_rule_slots(r, ids);
    for (int i = 0; i < n; i++) {
        size_t si;
        slot_index(x->m, layer, ids[i], &si);
        x->present[si] = 1;
    }
}

/* gpt-oss's experts in MXFP4 (the released checkpoints): name_blocks and name_scales instead of name */
static vc_status find_mxfp4(load_ctx *x, const vc_tensor_rule *r, int layer, int expert, const char *name) {
    char nb[320], ns[320];
    snprintf(nb, sizeof nb, "%s_blocks", name);
    snprintf(ns, sizeof ns, "%s_scales", name);
    const vc_st_tensor *b = vc_ckpt_find(x->ck, nb), *sc = vc_ckpt_find(x->ck, ns);
    if (!b || !sc) return VC_OK;
    x->claimed[b - vc_ckpt_at(x->ck, 0)] = x->claimed[sc - vc_ckpt_at(x->ck, 0)] = 1;
    mark_present(x, r, layer);
    vc_status st = add_source(x->m, r, layer, expert, name);
    if (!st) x->m->src[x->m->n_src - 1].mxfp4 = 1;
    return st;
}

/* stacked experts come in two layouts under one name (Qwen3-VL-MoE: the hub's input-major [E, H, 2I] / [E, I, H],
 * transformers' own [E, 2I, H] / [E, H, I]): a rule takes the tensor only in its own layout (the first rule listed
 * wins when both fit, H = 2I) */
static int expert_layout_fits(const vc_model_config *c, const vc_tensor_rule *r, const vc_st_tensor *t) {
    int64_t E = c->n_expert, I = c->moe_inter, H = c->hidden, want[3];
    if (r->transform == VC_TR_EXPERT_GATE_UP) want[0] = E, want[1] = 2 * I, want[2] = H;
    else if (r->transform == VC_TR_T_GATE_UP || r->transform == VC_TR_OAI_GATE_UP) want[0] = E, want[1] = H, want[2] = 2 * I;
    else if (r->transform == VC_TR_T_DOWN) want[0] = E, want[1] = I, want[2] = H;
    else if (r->slot == VC_W_EXP_DOWN && r->transform == VC_TR_NONE) want[0] = E, want[1] = H, want[2] = I;
    else return 1;
    return t->ndim == 3 && t->shape[0] == want[0] && t->shape[1] == want[1] && t->shape[2] == want[2];
}

/* compressed-tensors' packed weights: name_packed, name_scale and name_shape instead of name (its float8 weights
 * keep their name, with name_scale beside) */
/* compressed-tensors' 2:4 sparse weights (sparsity_config sparse-24-bitmask): for name = MODULE.weight, MODULE.compressed
 * (the kept values), MODULE.bitmask and MODULE.shape */
static vc_status find_sparse24(load_ctx *x, const vc_tensor_rule *r, int layer, int expert, const char *rule_name) {
    char mod[320], cn[340], bn[340], hn[340];
    size_t k = strlen(rule_name);
    if (k < 8 || strcmp(rule_name + k - 7, ".weight")) return VC_OK;
    snprintf(mod, sizeof mod, "%.*s", (int)(k - 7), rule_name);
    snprintf(cn, sizeof cn, "%s.compressed", mod);
    snprintf(bn, sizeof bn, "%s.bitmask", mod);
    snprintf(hn, sizeof hn, "%s.shape", mod);
    const vc_st_tensor *c = vc_ckpt_find(x->ck, cn), *b = vc_ckpt_find(x->ck, bn), *h = vc_ckpt_find(x->ck, hn);
    if (!c || x->claimed[c - vc_ckpt_at(x->ck, 0)]) return VC_OK;
    if (!b || !h) return vc_fail(VC_ERR_MISSING, "%s: '%s' without '%s' and '%s'", x->m->dir, cn, bn, hn);
    x->claimed[c - vc_ckpt_at(x->ck, 0)] = x->claimed[b - vc_ckpt_at(x->ck, 0)] = x->claimed[h - vc_ckpt_at(x->ck, 0)] = 1;
    mark_present(x, r, layer);
    vc_status st = add_source(x->m, r, layer, expert, rule_name);
    if (!st) x->m->src[x->m->n_src - 1].ct = 3;
    return st;
}

static vc_status find_packed(load_ctx *x, const vc_tensor_rule *r, int layer, int expert, const char *rule_name) {
    char pn[340], sn[340], hn[340], zn[340], gn[340], alt[320];
    if (x->m->cfg.ct_sparse24) return find_sparse24(x, r, layer, expert, rule_name);
    const char *name = rule_name; /* the rule's name, or a nested layout's (language_model.model.*) */
    snprintf(pn, sizeof pn, "%s_packed", name);
    for (const char *const *n = x->m->cfg.arch->nested; !vc_ckpt_find(x->ck, pn) && n && n[0]; n += 2) {
        size_t k = strlen(n[0]);
        if (strncmp(rule_name, n[0], k)) continue;
        snprintf(alt, sizeof alt, "%s%s", n[1], rule_name + k);
        snprintf(pn, sizeof pn, "%s_packed", alt);
        name = alt;
    }
    snprintf(sn, sizeof sn, "%s_scale", name);
    snprintf(hn, sizeof hn, "%s_shape", name);
    snprintf(zn, sizeof zn, "%s_zero_point", name);
    snprintf(gn, sizeof gn, "%s_g_idx", name);
    const vc_st_tensor *p = vc_ckpt_find(x->ck, pn), *sc = vc_ckpt_find(x->ck, sn), *h = vc_ckpt_find(x->ck, hn);
    if (!p || x->claimed[p - vc_ckpt_at(x->ck, 0)]) return VC_OK; /* (an alternative rule already took it) */
    const vc_st_tensor *gi = vc_ckpt_find(x->ck, gn); /* activation-ordered groups (vc_ct_scale) */
    if (gi) x->claimed[gi - vc_ckpt_at(x->ck, 0)] = 1;
    if (x->m->cfg.ct_nvfp4) { /* 4-bit floats: no shape tensor; NVFP4's global scale beside the group scales */
        snprintf(hn, sizeof hn, "%s_global_scale", name);
        h = x->m->cfg.ct_nvfp4 == 1 ? vc_ckpt_find(x->ck, hn) : sc;
    }
    if (!sc || !h) return vc_fail(VC_ERR_MISSING, "%s: '%s' without '%s' and '%s'", x->m->dir, pn, sn, hn);
    x->claimed[p - vc_ckpt_at(x->ck, 0)] = x->claimed[sc - vc_ckpt_at(x->ck, 0)] = x->claimed[h - vc_ckpt_at(x->ck, 0)] = 1;
    const vc_st_tensor *z = vc_ckpt_find(x->ck, zn); /* asymmetric schemes' zero points */
    if (z) x->claimed[z - vc_ckpt_at(x->ck, 0)] = 1;
    mark_present(x, r, layer);
    vc_status st = add_source(x->m, r, layer, expert, name);
    if (!st) x->m->src[x->m->n_src - 1].ct = 1;
    return st;
}

static vc_status visit_find(void *p, const vc_tensor_rule *r, int layer, int expert, const char *rule_name) {
    load_ctx *x = p;
    char buf[320];
    const char *name;
    const vc_st_tensor *t = find_nested(x->m, x->ck, rule_name, buf, sizeof buf, &name);
    if (!t && (r->transform == VC_TR_OAI_GATE_UP || r->transform == VC_TR_T_DOWN))
        return find_mxfp4(x, r, layer, expert, rule_name);
    if (!t && x->m->cfg.ct_quant) return find_packed(x, r, layer, expert, rule_name);
    if (!t) return VC_OK;
    int idx = (int)(t - vc_ckpt_at(x->ck, 0));
    if (x->claimed[idx]) return VC_OK; /* an alternative rule already took it */
    if (!expert_layout_fits(&x->m->cfg, r, t)) return VC_OK; /* another rule's layout */
    x->claimed[idx] = 1;
    mark_present(x, r, layer);
    char sn[340];
    snprintf(sn, sizeof sn, "%s_scale_inv", name); /* block-scaled fp8: the scales beside the weight */
    const vc_st_tensor *sc = t->dtype == VC_F8E4M3 ? vc_ckpt_find(x->ck, sn) : NULL;
    if (sc) x->claimed[sc - vc_ckpt_at(x->ck, 0)] = 1;
    snprintf(sn, sizeof sn, "%s_scale", name); /* compressed-tensors' float8: a scale per tensor, row or group */
    const vc_st_tensor *cs = !sc && (t->dtype == VC_F8E4M3 || t->dtype == VC_I8) && x->m->cfg.ct_quant ? vc_ckpt_find(x->ck, sn)
                                                                                                     : NULL;
    if (cs) x->claimed[cs - vc_ckpt_at(x->ck, 0)] = 1;
    snprintf(sn, sizeof sn, "%s_zero_point", name);
    const vc_st_tensor *cz = cs ? vc_ckpt_find(x->ck, sn) : NULL;
    if (cz) x->claimed[cz - vc_ckpt_at(x->ck, 0)] = 1;
    snprintf(sn, sizeof sn, "%s_g_idx", name);
    const vc_st_tensor *cg = cs ? vc_ckpt_find(x->ck, sn) : NULL;
    if (cg) x->claimed[cg - vc_ckpt_at(x->ck, 0)] = 1;
    vc_status st = add_source(x->m, r, layer, expert, name);
    if (!st && sc) x->m->src[x->m->n_src - 1].fp8 = 1;
    if (!st && cs) x->m->src[x->m->n_src - 1].ct = 2;
    return st;
}

/* More weights than any model has (2^44 floats = 64 TiB): a config.json implying more is wrong. */
/* the model's config.json in messages: DIR/config.json, or "config.json" for a random model (no folder) */
#define CFG_AT(m) (m)->dir ? (m)->dir : "", (m)->dir ? "/" : ""
#define MAX_FLOATS ((int64_t)1 << 44)

/* allocates every required slot and every optional slot the checkpoint provides (or, with no
 * checkpoint, those the config asks for) */
/* the vision tower's tensors after the text ones (pass 1: as parameters, named as the checkpoint names them) */
static vc_status vision_params(vc_model *m, int pass, int64_t *off) {
    for (int i = 0; m->vision && i < vc_vision_count(m->vision); i++) {
        int64_t sh[2];
        int nd = vc_vision_shape(m->vision, i, sh);
        int64_t n = sh[0] * (nd > 1 ? sh[1] : 1);
        if (*off > MAX_FLOATS - n - 16)
            return vc_fail(VC_ERR_FORMAT, "%s%sconfig.json implies more than %lld weights", CFG_AT(m), (long long)MAX_FLOATS);
        const char *name;
        vc_vision_tensor(m->vision, i, &name);
        if (strlen(name) >= sizeof m->params[0].name)
            return vc_fail(VC_ERR_FORMAT, "%s: vision tower tensor name '%s' is longer than %zu characters", m->dir, name,
                           sizeof m->params[0].name - 1);
        if (pass == 1) {
            vc_param *p = &m->params[m->n_params];
            vc_param_init(&p->t, m->storage + *off, NULL, nd, sh);
            p->layer = -1;
            p->slot = VC_SLOT_VISION;
            p->decay = nd >= 2;
            float init;
            p->buffer = p->frozen = vc_vision_buffer(m->vision, i, &init);
            snprintf(p->name, sizeof p->name, "%s", name);
            vc_vision_bind(m->vision, i, &p->t);
        }
        m->n_params++;
        *off += (n + 15) & ~(int64_t)15;
    }
    return VC_OK;
}

static vc_status allocate_slots(vc_model *m, const uint8_t *present, int64_t ckpt_floats) {
    const vc_model_config *c = &m->cfg;
    size_t n_slots = (size_t)vc_cfg_rows(c) * VC_W_COUNT;
    m->slots = vc_calloc(n_slots, sizeof *m->slots);
    m->params = vc_calloc(n_slots + (size_t)(m->vision ? vc_vision_count(m->vision) : 0), sizeof *m->params);
    if (!m->slots || !m->params) return VC_ERR_NOMEM;
    int64_t total = 0;
    for (int pass = 0; pass < 2; pass++) {
        int64_t off = 0;
        m->n_params = 0;
        for (int l = -1; l < vc_cfg_rows(c); l = vc_row_next(c, l))
            for (int s = 1; s < VC_W_COUNT; s++) {
                if (vc_slot_is_global(s) != (l < 0)) continue;
                int64_t sh[4];
                int opt, nd = vc_slot_shape(c, l, s, sh, &opt);
                size_t si;
                slot_index(m, l, s, &si);
                if (!nd || (opt && !(present && present[si]))) continue;
                int64_t n = 1;
                for (int d = 0; d < nd; d++) {
                    /* config.json bounds every size (config.c); this keeps a bad one from wrapping the arena */
                    if (sh[d] <= 0 || n > MAX_FLOATS / sh[d]) /* (a zero size: a layer's MLP of width 0, ...) */
                        return vc_fail(VC_ERR_FORMAT, "%s%sconfig.json implies tensor %s of layer %d with %s size%s",
                                       CFG_AT(m), vc_slot_name(s), l, sh[d] < 0 ? "a negative" : sh[d] ? "an impossible"
                                       : "a zero", sh[d] ? "" : " (a size it is made of, such as intermediate_size, is 0 "
                                       "or missing)");
                    n *= sh[d];
                }
                if (off > MAX_FLOATS - n - 16)
                    return vc_fail(VC_ERR_FORMAT, "%s%sconfig.json implies more than %lld weights", CFG_AT(m),
                                   (long long)MAX_FLOATS);
                if (pass == 1) {
                    vc_param *p = &m->params[m->n_params];
                    vc_param_init(&p->t, m->storage + off, NULL, nd, sh);
                    p->layer = l;
                    p->slot = s;
                    p->decay = nd >= 2 && !vc_slot_is_bias(s);
                    if (l < 0) snprintf(p->name, sizeof p->name, "%s", vc_slot_name(s));
                    else snprintf(p->name, sizeof p->name, "layers.%d.%s", l, vc_slot_name(s));
                    m->slots[si] = &p->t;
                }
                m->n_params++;
                off += (n + 15) & ~(int64_t)15; /* keep each tensor 64-byte aligned */
            }
        int64_t text = off;
        vc_status st = vision_params(m, pass, &off);
        if (st) return st;
        if (pass == 0) {
            total = off;
            /* weights come from the checkpoint: a config.json implying far more (a 30B config next to a tiny
             * checkpoint) is refused here, before allocating, rather than after by a shape check */
            if (ckpt_floats >= 0) ckpt_floats += off - text; /* the tower's tensors: their shapes checked */
            if (ckpt_floats >= 0 && total > 2 * ckpt_floats + ((int64_t)1 << 20))
                return vc_fail(VC_ERR_SHAPE, "%s: config.json implies %lld weights but the checkpoint holds %lld",
                               m->dir, (long long)total, (long long)ckpt_floats);
            m->be = vc_be();
            m->storage = m->be->alloc((size_t)(total ? total : 1) * sizeof(float));
            if (!m->storage)
                return vc_fail(VC_ERR_NOMEM, "model: cannot allocate %.1f MB of weights in %s memory", total * 4e-6,
                               m->be->name);
        }
    }
    m->n_floats = total;
    static const int COPIES[] = { VC_W_TOK_EMBD, VC_W_LM_HEAD }; /* an MTP row's copies of them: the model's own */
    for (int r = (int)c->n_layer + 1; r < vc_cfg_rows(c); r++)
        for (int i = 0; i < 2; i++)
            m->slots[(size_t)r * VC_W_COUNT + COPIES[i]] = m->slots[(size_t)c->n_layer * VC_W_COUNT + COPIES[i]];
    return VC_OK;
}

static vc_status check_provided(vc_model *m, const uint8_t *present) {
    const vc_model_config *c = &m->cfg;
    for (int l = -1; l < vc_cfg_rows(c); l = vc_row_next(c, l))
        for (int s = 1; s < VC_W_COUNT; s++) {
            if (vc_slot_is_global(s) != (l < 0)) continue;
            int64_t sh[4];
            int opt;
            size_t si;
            slot_index(m, l, s, &si);
            if (!vc_slot_shape(c, l, s, sh, &opt) || opt || present[si]) continue;
            /* name the first rule that would have provided it */
            for (const vc_tensor_rule *const *t = c->arch->tables; *t; t++)
                for (const vc_tensor_rule *r = *t; r->name; r++)
                    if (vc_rule_has_slot(r, s)) {
                        char name[256], ck[256]; /* (an MTP row's: under the checkpoint's name) */
                        snprintf(name, sizeof name, r->name, l, 0);
                        return vc_fail(VC_ERR_MISSING, "%s: tensor '%s' is missing from the checkpoint", m->dir,
                                       vc_arch_row_name(c, l, r->slot, name, ck, sizeof ck));
                    }
            return vc_fail(VC_ERR_MISSING, "%s: no tensor provides %s of layer %d", m->dir, vc_slot_name(s), l);
        }
    return VC_OK;
}

static int vc_ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && !strcmp(s + n - k, tail);
}

/* checkpoint tensors no rule claimed: known-ignorable ones are listed, anything else is an error */
static vc_status check_unclaimed(vc_model *m, vc_checkpoint *ck, const uint8_t *claimed) {
    const vc_model_config *c = &m->cfg;
    int acts = 0;
    for (int i = 0; i < vc_ckpt_count(ck); i++) {
        if (claimed[i]) continue;
        const char *name = vc_ckpt_at(ck, i)->name, *why = NULL;
        int a, b;
        for (const vc_tensor_rule *const *t = c->arch->tables; *t && !why; t++)
            for (const vc_tensor_rule *r = *t; r->name && !why; r++)
                if (r->transform == VC_TR_IGNORE && match(r->name, name, &a, &b)) why = "rotary cache, recomputed";
        if (!why && c->tied && (!strcmp(name, "lm_head.weight") || !strcmp(name, "output.weight") ||
                                (c->arch->nested && !strcmp(name, "language_model.lm_head.weight"))))
            why = "tied to the embedding";
        if (!why && c->xielu && (vc_ends_with(name, ".mlp.act_fn.beta") || vc_ends_with(name, ".mlp.act_fn.eps"))) {
            /* xIELU's constants, as transformers' kernel takes them: any other value is refused */
            const vc_st_tensor *t = vc_ckpt_at(ck, i);
            float v = 0, want = vc_ends_with(name, ".beta") ? VC_XIELU_BETA : VC_XIELU_EPS;
            if (vc_st_tensor_numel(t) == 1 && (t->dtype == VC_F32 || t->dtype == VC_BF16 || t->dtype == VC_F16))
                vc_st_tensor_to_f32(t, &v);
            if (fabsf(v - want) > 1e-2f * fabsf(want))
                return vc_fail(VC_ERR_UNSUPPORTED, "%s: tensor '%s' is %g: verlc's xIELU takes %g", m->dir, name, v, want);
            why = "xIELU's fixed constant";
        }
        if (!why && c->ct_quant &&
            (vc_ends_with(name, ".input_global_scale") || vc_ends_with(name, ".input_scale") ||
             vc_ends_with(name, ".input_zero_point"))) { /* a W4A4 / W8A8 scheme's static activation scales */
            if (!acts++)
                vc_info("%s: compressed-tensors' activation quantization is not applied: verlc computes with the weights "
                        "dequantized and the activations in its compute dtype", m->dir);
            why = "activation quantization's scale, not applied";
        }
        if (!why && m->vision && vc_vision_owns(m->vision, name)) why = "the vision tower's, loaded for image inputs";
        if (!why && vc_arch_mtp_tensor(c, name))
            why = c->fp8_quant || c->ct_quant ? "a multi-token-prediction layer's: not used by the forward, left out of "
                                                "an export (whose weights are dequantized, its quantization_config gone)"
                                              : "a multi-token-prediction layer's: not used by the forward, copied through "
                                                "on export";
        if (!why && vc_arch_other_tower(c->arch, name))
            why = "another tower of a multimodal checkpoint, not used by the text model";
        if (!why)
            return vc_fail(VC_ERR_FORMAT, "%s: tensor '%s' is not used by architecture %s (%s)", m->dir, name,
                           c->arch->name, c->model_type);
        char line[512];
        snprintf(line, sizeof line, "%s (%s)", name, why);
        char **ni = realloc(m->ignored, sizeof *ni * (size_t)(m->n_ignored + 1));
        if (!ni) return VC_ERR_NOMEM;
        m->ignored = ni;
        if (!(m->ignored[m->n_ignored++] = vc_strdup(line))) return VC_ERR_NOMEM;
    }
    return VC_OK;
}

typedef struct {
    float *buf;
    const uint8_t *blocks, *scales;
    int64_t R, C, G;
} mxfp4_ctx;

/* one expert (task e) of load_mxfp4 */
static void mxfp4_expert(void *p, int64_t e) {
    static const float E2M1[16] = { 0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                    -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f };
    const mxfp4_ctx *x = p;
    int64_t R = x->R, C = x->C, G = x->G;
    for (int64_t r = 0; r < R; r++)
        for (int64_t g = 0; g < G; g++) {
            int64_t blk = (e * R + r) * G + g;
            float scale = ldexpf(1.0f, (int)x->scales[blk] - 127);
            for (int k = 0; k < 16; k++) {
                uint8_t v = x->blocks[blk * 16 + k];
                int64_t c = g * 32 + 2 * k;
                x->buf[(e * C + c) * R + r] = E2M1[v & 15] * scale;
                x->buf[(e * C + c + 1) * R + r] = E2M1[v >> 4] * scale;
            }
        }
}

/* MXFP4 (OCP microscaling): blocks [E, R, G, 16] bytes of two e2m1 values each (low nibble first), scales
 * [E, R, G] e8m0 exponents (bias 127) of each block of 32; dequantized to [E, R, 32 G] and stored transposed
 * as want [E, 32 G, R] (the checkpoint's unquantized layout), as transformers' convert_moe_packed_tensors */
static vc_status load_mxfp4(const vc_model *m, vc_checkpoint *ck, vc_source *s, const int64_t *want, float **out) {
    char nb[320], ns[320];
    snprintf(nb, sizeof nb, "%s_blocks", s->name);
    snprintf(ns, sizeof ns, "%s_scales", s->name);
    const vc_st_tensor *b = vc_ckpt_find(ck, nb), *sc = vc_ckpt_find(ck, ns);
    int64_t E = want[0], C = want[1], R = want[2], G = C / 32;
    int ok = b && sc && C % 32 == 0 && b->dtype == VC_U8 && sc->dtype == VC_U8 && b->ndim == 4 && sc->ndim == 3 &&
             b->shape[0] == E && b->shape[1] == R && b->shape[2] == G && b->shape[3] == 16 && sc->shape[0] == E &&
             sc->shape[1] == R && sc->shape[2] == G;
    if (!ok)
        return vc_fail(VC_ERR_SHAPE, "%s: MXFP4 tensors '%s' / '%s' are not u8 [%lld, %lld, %lld, 16] / [%lld, %lld, "
                       "%lld] (config.json implies [%lld, %lld, %lld])", m->dir, nb, ns, (long long)E, (long long)R,
                       (long long)G, (long long)E, (long long)R, (long long)G, (long long)E, (long long)C, (long long)R);
    float *buf = vc_malloc(sizeof(float) * (size_t)(E * C * R));
    if (!buf) return VC_ERR_NOMEM;
    mxfp4_ctx x = { buf, b->data, sc->data, R, C, G };
    vc_parallel(E, mxfp4_expert, &x);
    s->ndim = 3;
    for (int d = 0; d < 3; d++) s->shape[d] = want[d];
    *out = buf;
    return VC_OK;
}

typedef struct {
    float *buf;
    const float *s;
    int64_t R, C, b0, b1, sr, scn;
} fp8_ctx;

/* one row (task: lead index x R + row) of fp8_scale */
static void fp8_row(void *p, int64_t row) {
    const fp8_ctx *x = p;
    int64_t l = row / x->R, i = row % x->R;
    const float *s = x->s + (l * x->sr + i / x->b0) * x->scn;
    float *b = x->buf + row * x->C;
    for (int64_t j = 0; j < x->C; j++) b[j] *= s[j / x->b1];
}

/* block-scaled fp8: buf (t's values) times the scale of each [b0, b1] block of its last two dims */
static vc_status fp8_scale(const vc_model *m, vc_checkpoint *ck, const vc_st_tensor *t, float *buf) {
    char sn[340];
    snprintf(sn, sizeof sn, "%s_scale_inv", t->name);
    const vc_st_tensor *sc = vc_ckpt_find(ck, sn);
    int64_t b0 = m->cfg.fp8_block[0], b1 = m->cfg.fp8_block[1];
    int nd = t->ndim;
    int64_t R = nd >= 2 ? t->shape[nd - 2] : 1, C = t->shape[nd - 1], lead = 1;
    for (int d = 0; d < nd - 2; d++) lead *= t->shape[d];
    int64_t sr = (R + b0 - 1) / b0, scn = (C + b1 - 1) / b1;
    int ok = sc && nd >= 2 && sc->ndim == nd && sc->shape[nd - 2] == sr && sc->shape[nd - 1] == scn &&
             (sc->dtype == VC_F32 || sc->dtype == VC_BF16 || sc->dtype == VC_F16);
    for (int d = 0; ok && d < nd - 2; d++) ok = sc->shape[d] == t->shape[d];
    if (!ok)
        return vc_fail(VC_ERR_SHAPE, "%s: '%s' is not a float scale of [%lld, %lld] blocks of '%s' (weight_block_size "
                       "[%lld, %lld])", m->dir, sn, (long long)sr, (long long)scn, t->name, (long long)b0, (long long)b1);
    float *s = vc_malloc(sizeof(float) * (size_t)(lead * sr * scn));
    if (!s) return VC_ERR_NOMEM;
    vc_st_tensor_to_f32(sc, s);
    fp8_ctx x = { buf, s, R, C, b0, b1, sr, scn };
    vc_parallel(lead * R, fp8_row, &x);
    free(s);
    return VC_OK;
}

static vc_status fill(vc_model *m, vc_checkpoint *ck) {
    for (int i = 0; i < m->n_src; i++) {
        vc_source *s = &m->src[i];
        int64_t want[4], n = 1;
        if (s->layer > m->cfg.n_layer && vc_slot_is_global(s->rule->slot)) { /* a copy of the model's own tensor: */
            const vc_st_tensor *t = vc_ckpt_find(ck, s->name); /* not read, written from the model's on export */
            int nd = source_shape(m, s, want);
            for (int d = 0; d < nd; d++) n *= (s->shape[d] = want[d]);
            s->ndim = nd;
            if (!nd || !t || vc_st_tensor_numel(t) != n)
                return vc_fail(VC_ERR_SHAPE, "%s: tensor '%s' is not the shape of the model's own", m->dir, s->name);
            continue;
        }
        int nd = source_shape(m, s, want);
        if (!nd) return vc_fail(VC_ERR_INTERNAL, "%s: '%s' has no destination", m->dir, s->name);
        if (s->mxfp4 || s->ct == 1 || s->ct == 3) {
            float *buf = NULL;
            vc_status st = s->mxfp4 ? load_mxfp4(m, ck, s, want, &buf)
                   : s->ct == 3 ? vc_ct_unsparse24(m->dir, ck, s->name, want, nd, &buf)
                   : m->cfg.ct_nvfp4 ? vc_ct_unpack_fp4(m->dir, ck, s->name, want, nd, m->cfg.ct_nvfp4 == 2, &buf)
                                    : vc_ct_unpack(m->dir, ck, s->name, want, nd, m->cfg.ct_bits, m->cfg.ct_group, &buf);
            if (!st && s->ct) { /* the checkpoint's shape, for export */
                s->ndim = nd;
                for (int d = 0; d < nd; d++) s->shape[d] = want[d];
            }
            if (st) return st;
            st = vc_rule_transfer(m, s, buf, 0);
            free(buf);
            if (st) return st;
            continue;
        }
        const vc_st_tensor *t = vc_ckpt_find(ck, s->name);
        int lead = t->ndim - nd, ok = lead >= 0 && t->ndim <= 4; /* leading 1s (ERNIE's [1, E] bias) are kept */
        for (int d = 0; d < lead && ok; d++) ok = t->shape[d] == 1;
        for (int d = 0; d < nd && ok; d++) ok = t->shape[lead + d] == want[d];
        if (!ok) {
            char a[96] = "", b[96] = "";
            for (int d = 0; d < t->ndim; d++) snprintf(a + strlen(a), sizeof a - strlen(a), "%s%lld", d ? "," : "", (long long)t->shape[d]);
            for (int d = 0; d < nd; d++) snprintf(b + strlen(b), sizeof b - strlen(b), "%s%lld", d ? "," : "", (long long)want[d]);
            return vc_fail(VC_ERR_SHAPE, "%s: tensor '%s' has shape [%s], config.json implies [%s]", m->dir, s->name, a, b);
        }
        if (t->dtype != VC_F32 && t->dtype != VC_BF16 && t->dtype != VC_F16 && t->dtype != VC_F8E4M3 &&
            !(t->dtype == VC_I8 && s->ct == 2))
            return vc_fail(VC_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s", m->dir, s->name, vc_dtype_name(t->dtype));
        s->ndim = t->ndim; /* the checkpoint's shape, for export */
        for (int d = 0; d < t->ndim; d++) n *= (s->shape[d] = t->shape[d]);
        float *buf = vc_malloc((size_t)n * 4);
        if (!buf) return VC_ERR_NOMEM;
        if (t->dtype == VC_F8E4M3 && m->cfg.ct_quant && s->ct != 2) {
            free(buf);
            return vc_fail(VC_ERR_MISSING, "%s: float8 tensor '%s' has no '%s_scale' (compressed-tensors)", m->dir,
                           s->name, s->name);
        }
        if (t->dtype == VC_F8E4M3 && m->cfg.fp8_quant && !s->fp8) { /* its scales would be taken as 1 */
            free(buf);
            return vc_fail(VC_ERR_MISSING, "%s: float8 tensor '%s' has no '%s_scale_inv' (quantization_config fp8)",
                           m->dir, s->name, s->name);
        }
        vc_st_tensor_to_f32(t, buf);
        vc_status st = s->fp8 ? fp8_scale(m, ck, t, buf) : VC_OK;
        if (!st && s->ct == 2)
            st = t->ndim == 2 ? vc_ct_scale(m->dir, ck, s->name, buf, t->shape[0], t->shape[1], 0, m->cfg.ct_group)
                              : vc_fail(VC_ERR_UNSUPPORTED, "%s: '%s': stacked float8 weights (compressed-tensors)", m->dir, s->name);
        if (!st) st = vc_rule_transfer(m, s, buf, 0);
        free(buf);
        if (st) return st;
    }
    return m->be->sync();
}

/* elements of the checkpoint tensors the rules claimed */
static int64_t claimed_floats(const vc_checkpoint *ck, const uint8_t *claimed) {
    int64_t n = 0;
    for (int i = 0; i < vc_ckpt_count(ck); i++)
        if (claimed[i]) n += vc_st_tensor_numel(vc_ckpt_at(ck, i));
    return n;
}

static vc_status vc_model_load_at(const char *dir, int mtp, vc_model **out) {
    *out = NULL;
    vc_model *m = vc_calloc(1, sizeof *m);
    load_ctx x = { .m = m };
    vc_status st = m ? VC_OK : VC_ERR_NOMEM;
    if (st == VC_OK) st = (m->dir = vc_strdup(dir)) ? VC_OK : VC_ERR_NOMEM;
    if (st == VC_OK) st = vc_config_load_model(dir, &m->cfg);
    if (st == VC_OK) {
        char *cp = vc_path_join(dir, "config.json");
        st = cp ? vc_read_file(cp, &m->config_text, NULL) : VC_ERR_NOMEM;
        free(cp);
    }
    if (st == VC_OK && mtp) st = vc_config_mtp_rows(&m->cfg, vc_model_mtp_layers(m), dir);
    if (st == VC_OK) st = vc_ckpt_open(dir, &x.ck);
    if (st) goto out;
    size_t n_slots = (size_t)vc_cfg_rows(&m->cfg) * VC_W_COUNT;
    x.claimed = vc_calloc((size_t)vc_ckpt_count(x.ck) + 1, 1);
    x.present = vc_calloc(n_slots, 1);
    if (!x.claimed || !x.present) { st = VC_ERR_NOMEM; goto out; }
    if ((st = visit_rules(&m->cfg, visit_find, &x)) || (st = vc_vision_plan(m, x.ck)) ||
        (st = check_unclaimed(m, x.ck, x.claimed)) || (st = allocate_slots(m, x.present, claimed_floats(x.ck, x.claimed))) ||
        (st = check_provided(m, x.present)) || (st = fill(m, x.ck)) || (m->vision && (st = vc_vision_fill(m->vision, m, x.ck))))
        goto out;
out:
    free(x.claimed);
    free(x.present);
    vc_ckpt_close(x.ck);
    if (st) {
        vc_model_free(m);
        return st;
    }
    *out = m;
    return VC_OK;
}

/* a local directory, or a Hugging Face Hub id found in the local cache (vc_hf_resolve) */
vc_status vc_model_load_opt(const char *dir, int mtp, vc_model **out) {
    char *path = NULL;
    *out = NULL;
    vc_status st = vc_hf_resolve(dir, &path);
    if (!st) st = vc_model_load_at(path, mtp, out);
    free(path);
    return st;
}

vc_status vc_model_load(const char *dir, vc_model **out) { return vc_model_load_opt(dir, 0, out); }

/* an image-text config's text tensors as transformers 5 writes them: the last of the architecture's nested prefixes
 * for the rule's (model.* under model.language_model.*, Llama 4's under language_model.model.*); a text config's as
 * they are */
static const char *synth_name(const vc_model_config *c, const char *name, char *buf, size_t cap) {
    const char *const *to = NULL;
    for (const char *const *n = c->nested_text ? c->arch->nested : NULL; n && n[0]; n += 2)
        if (!strncmp(name, n[0], strlen(n[0]))) to = n;
    if (!to) return name;
    snprintf(buf, cap, "%s%s", to[1], name + strlen(to[0]));
    return buf;
}

/* sources for a model that has no checkpoint: the first rule that provides each slot instance */
typedef struct { vc_model *m; uint8_t *done; int pass; } synth_ctx;
static vc_status visit_synth(void *p, const vc_tensor_rule *r, int layer, int expert, const char *name) {
    synth_ctx *x = p;
    size_t si;
    if ((r->transform == VC_TR_EXPERT) != (x->pass == 1)) return VC_OK; /* fused experts first: transformers 5's own */
    if (x->m->cfg.arch->expert_modules && x->pass == 0 && strstr(name, ".experts.")) return VC_OK; /* (Kimi-VL) */
    slot_index(x->m, layer, r->slot, &si);
    int key = expert < 0 ? 0 : expert;
    if (x->done[si] == 2 || (x->done[si] == 1 && r->transform != VC_TR_EXPERT) || !x->m->slots[si]) return VC_OK;
    /* shared experts: Qwen's gated one is mlp.shared_expert, DeepSeek's and GLM's ungated ones mlp.shared_experts,
     * Flint's, Laguna's and Lara-Mini's ungated ones mlp.shared_expert */
    const char *an = x->m->cfg.arch->name;
    int singular = x->m->cfg.shared_gate || !strcmp(an, "flint") || !strcmp(an, "laguna") || !strcmp(an, "lara_mini");
    if (strstr(name, singular ? "mlp.shared_experts." : "mlp.shared_expert.")) return VC_OK;
    /* Falcon's new decoder architecture names its two parallel norms ln_attn / ln_mlp, the others input_layernorm (and
     * Falcon-RW's sequential layers their second one post_attention_layernorm) */
    if (!strcmp(an, "falcon") && (strstr(name, x->m->cfg.parallel_norms ? ".input_layernorm." : ".ln_attn.") ||
                                  (!x->m->cfg.parallel_norms && strstr(name, ".ln_mlp."))))
        return VC_OK;
    if (r->transform == VC_TR_EXPERT && key == (int)x->m->slots[si]->shape[0] - 1) x->done[si] = 2;
    else if (r->transform == VC_TR_EXPERT) x->done[si] = 1;
    else x->done[si] = 2;
    int ids[VC_RULE_PARTS], n = vc_rule_slots(r, ids);
    for (int i = 1; i < n; i++) { /* the fused tensor's other parts */
        size_t sj;
        slot_index(x->m, layer, ids[i], &sj);
        x->done[sj] = 2;
    }
    char nested[512];
    name = synth_name(&x->m->cfg, name, nested, sizeof nested);
    vc_status st = add_source(x->m, r, layer, expert, name);
    vc_source *sc = st == VC_OK ? &x->m->src[x->m->n_src - 1] : NULL;
    if (sc) sc->ndim = source_shape(x->m, sc, sc->shape);
    if (sc && sc->ndim == 1 && strstr(name, "moe_statics.")) { /* ERNIE 4.5 keeps its routing bias as [1, E] */
        sc->shape[1] = sc->shape[0];
        sc->shape[0] = 1;
        sc->ndim = 2;
    }
    return st;
}

vc_status vc_model_synthesize_sources(vc_model *m) {
    synth_ctx x = { m, vc_calloc((size_t)vc_cfg_rows(&m->cfg) * VC_W_COUNT, 1), 0 };
    if (!x.done) return VC_ERR_NOMEM;
    vc_status st = visit_rules(&m->cfg, visit_synth, &x);
    x.pass = 1; /* then per-expert tensors where an architecture has no fused ones */
    if (!st) st = visit_rules(&m->cfg, visit_synth, &x);
    free(x.done);
    return st;
}

vc_status vc_model_alloc_from_config(vc_model *m, uint8_t *optional_present) {
    vc_status st = m->vision || !m->config_text ? VC_OK : vc_vision_plan(m, NULL);
    return st ? st : allocate_slots(m, optional_present, -1);
}

void vc_model_free(vc_model *m) {
    if (!m) return;
    vc_cpu_bf16_copies_release(); /* (the memory kept for the next model's copies) */
    for (int i = 0; i < m->n_src; i++) free(m->src[i].name);
    for (int i = 0; i < m->n_ignored; i++) free(m->ignored[i]);
    free(m->ignored);
    free(m->src);
    free(m->slots);
    free(m->params);
    if (m->be) {
        m->be->free(m->storage);
        m->be->free(m->grad_storage);
    }
    vc_lora_free(m->lora, m->be);
    vc_qat_free(m->qat);
    vc_vision_free(m->vision);
    free(m->dir);
    free(m->config_text);
    free(m);
}
