/* LoRA adapters in PEFT's files: adapter_model.safetensors (base_model.model.<module>.lora_A/B.weight) and
 * adapter_config.json. verlc adapts each part of a fused projection on its own (q, k and v of Phi-3's
 * qkv_proj, Baichuan's W_pack, Qwen's c_attn, ChatGLM's query_key_value, InternLM2's wqkv (rows
 * interleaved per key/value group); gate and up of gate_up_proj / dense_h_to_4h); when every part of such a tensor has an adapter they are written as one adapter of the
 * fused module, as PEFT names it on the original model: A = the parts' A stacked ([k r, in]), B = the
 * parts' B block-diagonal in the tensor's row layout ([out, k r]), with rank_pattern k r and alpha_pattern
 * k alpha for that module (the same alpha / r scaling), so PEFT and vLLM load it on the checkpoint's own
 * model. Reading takes that form back exactly, or a fused adapter of rank r trained elsewhere (one A shared
 * by the parts: each part gets that A and its rows of B), or the per-part names of earlier verlc files.
 * Adapters of target_parameters are PEFT's ParamWrapper tensors: the router's as a module's; the experts'
 * under model.layers.N.mlp.experts, lora_A [r E, in] (expert e's A in rows e r ..), lora_B [out, r E]
 * (expert e's B in columns k E + e), gate_up_proj's inside down_proj's (.base_layer) when both are
 * adapted, as PEFT nests the two wrappers. */
#include "model_internal.h"
#include "verlc/json.h"
#include "verlc/safetensors.h"
#include <stdlib.h>
#include <string.h>

typedef struct unit {
    int n;           /* adapters in it: 1, or the fused tensor's parts */
    int ad[VC_RULE_PARTS];          /* adapter numbers in the fused tensor's order */
    int64_t row[VC_RULE_PARTS + 1];  /* the parts' first rows when stacked; row[n]: the fused tensor's rows */
    int grouped;     /* the fused tensor's rows go group by group (gl) */
    vc_grouped_layout gl;
    char mod[160];   /* module path */
} unit;

/* the fused tensor's row of row o of part p */
static int64_t fused_row(const unit *u, int p, int64_t o) {
    if (!u->grouped) return u->row[p] + o;
    const vc_grouped_layout *gl = &u->gl;
    int64_t per = 0, at = 0;
    for (int k = 0; k < gl->n; k++) per += gl->rows[k];
    for (int k = 0; k < gl->n; k++) { /* the run of part p holding row o, then its group and offset */
        int64_t rel = o - gl->base[k];
        if (gl->part[k] == p && rel >= 0 && rel < gl->groups * gl->rows[k])
            return rel / gl->rows[k] * per + at + rel % gl->rows[k];
        at += gl->rows[k];
    }
    return -1;
}

/* the fused tensor that loaded (layer, slot) as rows stacked with other slots, or NULL; where the checkpoint's names
 * are the hub's (vc_arch.model_names), only a tensor transformers 5 keeps as one module (q and its gate per head) */
static const vc_source *fused_source(const vc_model *m, int layer, int slot) {
    int split_rows = !m->cfg.arch->model_names; /* (transformers 5 splits Sarvam-M's query_key_value, Lara's in_proj) */
    for (int i = 0; i < m->n_src; i++) {
        const vc_source *s = &m->src[i];
        const vc_tensor_rule *r = s->rule;
        size_t n = strlen(s->name);
        vc_grouped_layout gl;
        int fused = r && r->slot2 && ((split_rows && (r->transform == VC_TR_SPLIT_ROWS || r->transform == VC_TR_CONV1D)) ||
                                      vc_grouped_rows(&m->cfg, r->transform, &gl));
        if (s->layer == layer && fused && n > 7 && !strcmp(s->name + n - 7, ".weight") &&
            vc_rule_has_slot(r, slot))
            return s;
    }
    return NULL;
}

/* adapter i as a unit: its fused tensor's when every part has an adapter (the first part's adapter owns
 * the unit: *owner 0 for the others), else on its own */
static void unit_of(const vc_model *m, int i, unit *u, int *owner) {
    const vc_lora *a = m->lora;
    int layer = a->layer_of[i], slot = a->slot_of[i];
    const vc_source *s = fused_source(m, layer, slot);
    memset(u, 0, sizeof *u);
    *owner = 1;
    if (s) {
        int slots[VC_RULE_PARTS], k = vc_rule_slots(s->rule, slots), whole = 1;
        for (int p = 0; p < k; p++) {
            int ad = a->index[(size_t)layer * VC_W_COUNT + slots[p]];
            whole &= ad >= 0;
            u->ad[p] = ad;
            u->row[p + 1] = u->row[p] + (ad >= 0 ? a->t[2 * ad + 1].shape[0] : 0);
        }
        if (whole && k > 1) {
            u->n = k;
            u->grouped = vc_grouped_rows(&m->cfg, s->rule->transform, &u->gl);
            if (!m->cfg.arch->model_names || !vc_arch_module_name(m->cfg.arch, layer, slot, u->mod, sizeof u->mod))
                snprintf(u->mod, sizeof u->mod, "%.*s", (int)(strlen(s->name) - 7), s->name);
            vc_lora_peft_path(m, u->mod, sizeof u->mod);
            *owner = u->ad[0] == i;
            return;
        }
    }
    memset(u, 0, sizeof *u);
    u->n = 1;
    u->ad[0] = i;
    u->row[1] = a->t[2 * i + 1].shape[0];
    vc_lora_module_name(m, layer, slot, u->mod, sizeof u->mod);
}

static void tensor_name(const char *mod, int b, char *buf, size_t cap) {
    snprintf(buf, cap, "base_model.model.%s.lora_%c.weight", mod, b ? 'B' : 'A');
}

static int is_param_slot(int slot) { return slot == VC_W_EXP_GATE || slot == VC_W_EXP_DOWN || slot == VC_W_ROUTER; }
/* the experts' module under a layer (mlp.experts, Jamba's feed_forward.experts) */
static void experts_path(const vc_model *m, char *buf, size_t cap) {
    vc_arch_param_path(m->cfg.arch, VC_W_EXP_DOWN, buf, cap);
    char *dot = strrchr(buf, '.');
    if (dot) *dot = 0;
}

/* an expert adapter's module path: gate_up's wrapper sits inside down's when both are adapted */
static void expert_module(const vc_model *m, int i, char *buf, size_t cap) {
    const vc_lora *a = m->lora;
    int l = a->layer_of[i], inner = a->slot_of[i] == VC_W_EXP_GATE && a->index[(size_t)l * VC_W_COUNT + VC_W_EXP_DOWN] >= 0;
    char ex[96], pre[160];
    experts_path(m, ex, sizeof ex);
    vc_lora_layer_prefix(m, l, pre, sizeof pre);
    snprintf(buf, cap, "%s%s%s", pre, ex, inner ? ".base_layer" : "");
    vc_lora_peft_path(m, buf, cap);
}

/* A and B between verlc's [Ea, r, in] and [P, Ea, O, r] (P = 2: gate's, then up's; Ea = 1: one adapter
 * shared by the E experts, else E) and PEFT's [r E, in] and [P O, r E] (expert e's B in columns k E + e);
 * to_peft: that way (a shared adapter written for every expert), else back; interleaved: PEFT's B rows alternate
 * gate and up (gpt-oss's gate_up_proj columns); returns 1 when a shared adapter's experts differ in the file */
static int expert_ab(float *pA, float *pB, float *oA, float *oB, int64_t P, int64_t E, int64_t Ea, int64_t O,
                     int64_t r, int64_t in, int to_peft, int interleaved) {
    int differ = 0;
    for (int64_t e = 0; e < E; e++) {
        int64_t ea = Ea == 1 ? 0 : e;
        for (int64_t j = 0; j < r * in; j++) {
            float *x = &pA[e * r * in + j], *y = &oA[ea * r * in + j];
            if (to_peft) *x = *y;
            else if (e > ea) differ |= *y != *x;
            else *y = *x;
        }
        for (int64_t p = 0; p < P; p++)
            for (int64_t o = 0; o < O; o++)
                for (int64_t k = 0; k < r; k++) {
                    int64_t row = interleaved ? o * P + p : p * O + o; /* gpt-oss: gate and up columns alternate */
                    float *x = &pB[row * r * E + k * E + e], *y = &oB[((p * Ea + ea) * O + o) * r + k];
                    if (to_peft) *x = *y;
                    else if (e > ea) differ |= *y != *x;
                    else *y = *x;
                }
    }
    return differ;
}

/* whether the architecture's fused gate_up_proj alternates gate and up columns (gpt-oss's layout, VC_TR_OAI_GATE_UP):
 * PEFT's B rows then alternate the same way */
static int gate_up_interleaved(const vc_model *m) {
    const vc_arch *a = m->cfg.arch;
    for (const vc_tensor_rule *const *t = a ? a->tables : NULL; t && *t; t++)
        for (const vc_tensor_rule *r = *t; r->name; r++)
            if (r->slot == VC_W_EXP_GATE && r->transform == VC_TR_OAI_GATE_UP) return 1;
    return 0;
}

/* the experts' count of adapter i's tensor and the adapter's shapes */
typedef struct { int64_t E, Ea, r, in, P, O; } exp_dims;
static exp_dims expert_dims(const vc_model *m, int i) {
    const vc_lora *a = m->lora;
    const vc_tensor *ta = &a->t[2 * i], *tb = &a->t[2 * i + 1];
    exp_dims d = { vc_w(m, a->layer_of[i], a->slot_of[i])->shape[0], ta->shape[0], ta->shape[1], ta->shape[2],
                   tb->ndim == 4 ? 2 : 1, tb->shape[tb->ndim - 2] };
    return d;
}

/* an expert adapter i as PEFT's tensors */
static vc_status save_expert(const vc_model *m, vc_st_writer *w, const float *host, int i) {
    const vc_lora *a = m->lora;
    const vc_tensor *ta = &a->t[2 * i], *tb = &a->t[2 * i + 1];
    exp_dims d = expert_dims(m, i);
    float *A = vc_malloc(sizeof(float) * (size_t)(d.E * d.r * d.in)), *B = vc_malloc(sizeof(float) * (size_t)(d.P * d.O * d.r * d.E));
    vc_status st = A && B ? VC_OK : VC_ERR_NOMEM;
    if (!st) expert_ab(A, B, (float *)host + (ta->data - a->data), (float *)host + (tb->data - a->data), d.P, d.E, d.Ea,
                       d.O, d.r, d.in, 1, gate_up_interleaved(m));
    char mod[160], name[256];
    expert_module(m, i, mod, sizeof mod);
    int64_t sa[2] = { d.r * d.E, d.in }, sb[2] = { d.P * d.O, d.r * d.E };
    tensor_name(mod, 0, name, sizeof name);
    if (!st) st = vc_st_writer_add(w, name, VC_F32, 2, sa, A, 1);
    tensor_name(mod, 1, name, sizeof name);
    if (!st) st = vc_st_writer_add(w, name, VC_F32, 2, sb, B, 1);
    free(A);
    free(B);
    return st;
}

/* the unit's A and B in PEFT's layout (host arrays from the adapters' host copy) */
static vc_status fuse(const vc_lora *a, const float *host, const unit *u, float **A, float **B, int64_t *in) {
    int64_t r = a->rank, R = r * u->n, out = u->row[u->n];
    *in = a->t[2 * u->ad[0]].shape[1];
    *A = vc_malloc(sizeof(float) * (size_t)(R * *in));
    *B = vc_calloc((size_t)(out * R), sizeof(float));
    if (!*A || !*B) return VC_ERR_NOMEM;
    for (int p = 0; p < u->n; p++) {
        const vc_tensor *ta = &a->t[2 * u->ad[p]], *tb = &a->t[2 * u->ad[p] + 1];
        memcpy(*A + p * r * *in, host + (ta->data - a->data), sizeof(float) * (size_t)(r * *in));
        const float *bp = host + (tb->data - a->data);
        for (int64_t o = 0; o < tb->shape[0]; o++)
            memcpy(*B + fused_row(u, p, o) * R + p * r, bp + o * r, sizeof(float) * (size_t)r);
    }
    return VC_OK;
}

/* exclude_modules as a JSON value: the string escaped, or null */
static void json_string(const char *v, char *buf, size_t cap) {
    size_t n = 0;
    if (!v || !*v) {
        snprintf(buf, cap, "null");
        return;
    }
    buf[n++] = '"';
    for (; *v && n + 8 < cap; v++) {
        if (*v == '"' || *v == '\\') buf[n++] = '\\';
        if ((unsigned char)*v < 0x20) n += (size_t)snprintf(buf + n, cap - n, "\\u%04x", *v);
        else buf[n++] = *v;
    }
    buf[n++] = '"';
    buf[n] = 0;
}

static vc_status write_config(const vc_model *m, const char *dir, const char *mods, const char *params,
                              const char *ranks, const char *alphas) {
    const vc_lora *a = m->lora;
    char text[8192], tp[256], ex[1300], both[1100];
    snprintf(tp, sizeof tp, *params ? "[%s]" : "null", params);
    /* PEFT applies it on load as verlc did: the same modules; and the tower's wrappers of its linears (Gemma 4's
     * Gemma4ClippableLinear, named as the text's q_proj ...: PEFT refuses to adapt them) left out */
    const char *wrap = m->vision ? vc_vision_peft_exclude(m->vision) : NULL, *exc = a->exclude;
    if (wrap && exc && *exc) snprintf(both, sizeof both, "(?:%s)|(?:%s)", exc, wrap), exc = both;
    else if (wrap) exc = wrap;
    json_string(exc, ex, sizeof ex);
    /* GPT-2's Conv1D modules: PEFT's adapters are laid out as for nn.Linear, and its merge transposes them */
    int conv1d = 0;
    for (int i = 0; i < m->n_src; i++) conv1d |= m->src[i].rule && m->src[i].rule->transform == VC_TR_CONV1D;
    snprintf(text, sizeof text,
             "{\n  \"peft_type\": \"LORA\",\n  \"task_type\": \"CAUSAL_LM\",\n  \"r\": %d,\n  \"lora_alpha\": %g,\n"
             "  \"lora_dropout\": 0.0,\n  \"bias\": \"none\",\n  \"fan_in_fan_out\": %s,\n  \"target_modules\": [%s],\n"
             "  \"target_parameters\": %s,\n  \"exclude_modules\": %s,\n"
             "  \"rank_pattern\": {%s},\n  \"alpha_pattern\": {%s},\n  \"base_model_name_or_path\": \"%s\"\n}\n",
             a->rank, a->alpha, conv1d ? "true" : "false", mods, tp, ex, ranks, alphas, m->dir ? m->dir : "");
    char *path = vc_path_join(dir, "adapter_config.json");
    vc_status st = path ? vc_write_file_atomic(path, text, strlen(text)) : VC_ERR_NOMEM;
    free(path);
    return st;
}

/* the name target_modules gives module mod: its last component; a tower module's path under model.visual.blocks.N.
 * (attn.qkv, mlp.fc1) or under model.visual. (merger.mlp.0, deepstack_merger_list.0.linear_fc1), which PEFT's match
 * (the path is the name or ends in "." + it) gives that kind of the tower's modules and nothing else (not the Conv3d
 * patch_embed.proj, not the text's layers.0) */
static const char *target_of(const char *mod, int tower) {
    const char *last = strrchr(mod, '.'), *rel = mod + strlen("model.visual.");
    if (!tower || strncmp(mod, "model.visual.", strlen("model.visual."))) return last ? last + 1 : mod;
    if (strncmp(rel, "blocks.", 7)) return rel;
    const char *dot = strchr(rel + 7, '.');
    return dot ? dot + 1 : rel;
}

/* adds "name" (quoted) to a comma-separated list unless it is there; returns 1 when added */
static int add_name(char *list, size_t cap, const char *name) {
    char q[180];
    snprintf(q, sizeof q, "\"%s\"", name);
    if (strstr(list, q)) return 0;
    snprintf(list + strlen(list), cap - strlen(list), "%s%s", *list ? ", " : "", q);
    return 1;
}

vc_status vc_model_lora_save(const vc_model *m, const char *dir) {
    const vc_lora *a = m->lora;
    if (!a) return vc_fail(VC_ERR_ARG, "model: no LoRA adapters to save");
    vc_st_writer *w = NULL;
    vc_status st = vc_st_writer_new(&w);
    float *host = st ? NULL : vc_malloc(sizeof(float) * (size_t)a->n_floats);
    if (!st && !host) st = VC_ERR_NOMEM;
    if (!st) m->be->d2h(host, a->data, sizeof(float) * (size_t)a->n_floats);
    char mods[4096] = "", params[200] = "", ranks[256] = "", alphas[256] = "";
    for (int i = 0; !st && i < a->n; i++) {
        if (is_param_slot(a->slot_of[i])) { /* target_parameters */
            char pn[96];
            vc_arch_param_path(m->cfg.arch, a->slot_of[i], pn, sizeof pn);
            add_name(params, sizeof params, pn);
            int64_t r = a->t[2 * i].shape[1];
            if (a->slot_of[i] == VC_W_EXP_GATE && r != a->rank && !strstr(ranks, "gate_up_proj")) {
                /* PEFT's pattern for gate and up as one adapter of twice the rank */
                snprintf(ranks + strlen(ranks), sizeof ranks - strlen(ranks), "%s\".*\\\\.gate_up_proj\": %lld",
                         *ranks ? ", " : "", (long long)r);
                snprintf(alphas + strlen(alphas), sizeof alphas - strlen(alphas), "%s\".*\\\\.gate_up_proj\": %g",
                         *alphas ? ", " : "", a->alpha * (double)r / a->rank);
            }
            if (a->slot_of[i] != VC_W_ROUTER) {
                st = save_expert(m, w, host, i);
                continue;
            }
        }
        unit u;
        int owner;
        unit_of(m, i, &u, &owner);
        if (!owner) continue;
        float *A = NULL, *B = NULL;
        int64_t in = 0, R = (int64_t)a->rank * u.n;
        st = fuse(a, host, &u, &A, &B, &in);
        char name[256];
        int64_t sa[2] = { R, in }, sb[2] = { u.row[u.n], R };
        tensor_name(u.mod, 0, name, sizeof name);
        if (!st) st = vc_st_writer_add(w, name, VC_F32, 2, sa, A, 1);
        tensor_name(u.mod, 1, name, sizeof name);
        if (!st) st = vc_st_writer_add(w, name, VC_F32, 2, sb, B, 1);
        free(A);
        free(B);
        const char *shrt = target_of(u.mod, a->slot_of[i] >= VC_LORA_TOWER);
        if (!is_param_slot(a->slot_of[i]) && add_name(mods, sizeof mods, shrt) && u.n > 1) { /* PEFT: this module's r and alpha */
            snprintf(ranks + strlen(ranks), sizeof ranks - strlen(ranks), "%s\"%s\": %lld", *ranks ? ", " : "", shrt,
                     (long long)R);
            snprintf(alphas + strlen(alphas), sizeof alphas - strlen(alphas), "%s\"%s\": %g", *alphas ? ", " : "",
                     shrt, a->alpha * u.n);
        }
    }
    char *path = st ? NULL : vc_path_join(dir, "adapter_model.safetensors");
    if (!st) st = path ? vc_st_writer_write(w, path) : VC_ERR_NOMEM;
    free(path);
    free(host);
    vc_st_writer_free(w);
    return st ? st : write_config(m, dir, mods, params, ranks, alphas);
}

/* one adapter tensor of the file as f32 (NULL when absent); shape checked by the caller */
static const vc_st_tensor *find(vc_checkpoint *ck, const char *mod, int b) {
    char name[256];
    tensor_name(mod, b, name, sizeof name);
    return vc_ckpt_find(ck, name);
}

static vc_status put(vc_model *m, vc_tensor *d, const float *src) {
    m->be->h2d(d->data, src, sizeof(float) * (size_t)d->n);
    return VC_OK;
}

/* a fused unit from the file: rank r (one A shared by the parts) or k r (verlc's block-diagonal form) */
static vc_status load_fused(vc_model *m, const char *path, const unit *u, const vc_st_tensor *ta,
                            const vc_st_tensor *tb) {
    vc_lora *a = m->lora;
    int64_t r = a->rank, in = a->t[2 * u->ad[0]].shape[1], out = u->row[u->n], R = ta->ndim == 2 ? ta->shape[0] : -1;
    if (ta->ndim != 2 || tb->ndim != 2 || ta->shape[1] != in || tb->shape[0] != out || tb->shape[1] != R ||
        (R != r && R != r * u->n))
        return vc_fail(VC_ERR_SHAPE, "%s: the adapter of %s is not [%lld or %lld, %lld] and [%lld, same] (rank or "
                       "model differ)", path, u->mod, (long long)r, (long long)(r * u->n), (long long)in, (long long)out);
    float *A = vc_malloc(sizeof(float) * (size_t)(R * in)), *B = vc_malloc(sizeof(float) * (size_t)(out * R));
    float *bp = vc_malloc(sizeof(float) * (size_t)(out * r));
    vc_status st = A && B && bp ? VC_OK : VC_ERR_NOMEM;
    if (!st) vc_st_tensor_to_f32(ta, A), vc_st_tensor_to_f32(tb, B);
    for (int p = 0; !st && p < u->n; p++) {
        int64_t c0 = R == r ? 0 : p * r, rows = u->row[p + 1] - u->row[p];
        for (int64_t o = 0; o < rows; o++) /* verlc's form: the other parts' columns must be zero */
            for (int64_t c = 0; c < R && R != r; c++)
                if ((c < c0 || c >= c0 + r) && B[fused_row(u, p, o) * R + c] != 0.0f)
                    st = vc_fail(VC_ERR_FORMAT, "%s: the rank-%lld adapter of %s is not one adapter per part (B is "
                                 "not block-diagonal)", path, (long long)R, u->mod);
        for (int64_t o = 0; !st && o < rows; o++) memcpy(bp + o * r, B + fused_row(u, p, o) * R + c0, sizeof(float) * (size_t)r);
        if (!st) st = put(m, &a->t[2 * u->ad[p]], A + c0 * in);
        if (!st) st = put(m, &a->t[2 * u->ad[p] + 1], bp);
    }
    free(A);
    free(B);
    free(bp);
    return st;
}

/* module mod's tensor b in the file, or its hub name's (an image-text Qwen-VL's model.* / visual.* for PEFT's
 * model.language_model.* / model.visual.*: files of transformers before 4.52 and of earlier verlc) */
static const vc_st_tensor *find_alias(vc_checkpoint *ck, const char *mod, int b) {
    static const char *const T5[2][2] = { { "model.language_model.", "model." }, { "model.visual.", "visual." } };
    const vc_st_tensor *t = find(ck, mod, b);
    for (int k = 0; !t && k < 2; k++) {
        size_t n = strlen(T5[k][0]);
        if (strncmp(mod, T5[k][0], n)) continue;
        char alt[200];
        snprintf(alt, sizeof alt, "%s%s", T5[k][1], mod + n);
        t = find(ck, alt, b);
    }
    return t;
}

static vc_status load_one(vc_model *m, const char *path, vc_checkpoint *ck, int i) {
    vc_lora *a = m->lora;
    char mod[160];
    vc_lora_module_name(m, a->layer_of[i], a->slot_of[i], mod, sizeof mod);
    for (int b = 0; b < 2; b++) {
        const vc_st_tensor *t = find_alias(ck, mod, b);
        vc_tensor *d = &a->t[2 * i + b];
        if (!t) {
            char name[256];
            tensor_name(mod, b, name, sizeof name);
            return vc_fail(VC_ERR_MISSING, "%s: adapter tensor '%s' is missing", path, name);
        }
        if (t->ndim != 2 || t->shape[0] != d->shape[0] || t->shape[1] != d->shape[1])
            return vc_fail(VC_ERR_SHAPE, "%s: the adapter tensor of %s is not [%lld,%lld] (rank or model differ)", path,
                           mod, (long long)d->shape[0], (long long)d->shape[1]);
        float *buf = vc_malloc(sizeof(float) * (size_t)d->n);
        if (!buf) return VC_ERR_NOMEM;
        vc_st_tensor_to_f32(t, buf);
        put(m, d, buf);
        free(buf);
    }
    return VC_OK;
}

/* an expert adapter from the file: under mlp.experts or mlp.experts.base_layer, whichever has its shapes
 * (gate_up's and down's never agree: [r E, H] with [2 I, r E] against [r E, I] with [H, r E]) */
static vc_status load_expert(vc_model *m, const char *path, vc_checkpoint *ck, int i) {
    vc_lora *a = m->lora;
    vc_tensor *ta = &a->t[2 * i], *tb = &a->t[2 * i + 1];
    exp_dims d = expert_dims(m, i);
    int64_t E = d.E, r = d.r, in = d.in, P = d.P, O = d.O;
    const vc_st_tensor *A = NULL, *B = NULL;
    char mod[160];
    for (int inner = 0; inner < 2 && !A; inner++) {
        char ex[96];
        experts_path(m, ex, sizeof ex);
        snprintf(mod, sizeof mod, "model.layers.%d.%s%s", a->layer_of[i], ex, inner ? ".base_layer" : "");
        vc_lora_peft_path(m, mod, sizeof mod);
        const vc_st_tensor *x = find_alias(ck, mod, 0), *y = find_alias(ck, mod, 1);
        if (x && y && x->ndim == 2 && y->ndim == 2 && x->shape[0] == r * E && x->shape[1] == in &&
            y->shape[0] == P * O && y->shape[1] == r * E)
            A = x, B = y;
    }
    const char *what = a->slot_of[i] == VC_W_EXP_GATE ? "gate_up_proj" : "down_proj";
    if (!A)
        return vc_fail(VC_ERR_MISSING, "%s: no adapter of %s for layer %d's %lld experts ([%lld, %lld] and [%lld, "
                       "%lld] under model.layers.%d.mlp.experts)", path, what, a->layer_of[i], (long long)E,
                       (long long)(r * E), (long long)in, (long long)(P * O), (long long)(r * E), a->layer_of[i]);
    float *hA = vc_malloc(sizeof(float) * (size_t)(r * E * in)), *hB = vc_malloc(sizeof(float) * (size_t)(P * O * r * E));
    float *oA = vc_malloc(sizeof(float) * (size_t)ta->n), *oB = vc_malloc(sizeof(float) * (size_t)tb->n);
    vc_status st = hA && hB && oA && oB ? VC_OK : VC_ERR_NOMEM;
    if (!st) {
        vc_st_tensor_to_f32(A, hA);
        vc_st_tensor_to_f32(B, hB);
        if (expert_ab(hA, hB, oA, oB, P, E, d.Ea, O, r, in, 0, gate_up_interleaved(m)))
            st = vc_fail(VC_ERR_FORMAT, "%s: layer %d's %s adapters differ between experts, but this run shares one "
                         "adapter among them (Megatron's linear_fc1 / linear_fc2)", path, a->layer_of[i], what);
    }
    if (!st) {
        put(m, ta, oA);
        put(m, tb, oB);
    }
    free(hA);
    free(hB);
    free(oA);
    free(oB);
    return st;
}

vc_status vc_model_lora_load(vc_model *m, const char *dir) {
    vc_lora *a = m->lora;
    if (!a) return vc_fail(VC_ERR_ARG, "model: attach LoRA adapters before loading them");
    char *path = vc_path_join(dir, "adapter_model.safetensors");
    if (path && !vc_file_exists(path)) { /* older PEFT versions saved adapter_model.bin (torch.save) */
        char *bin = vc_path_join(dir, "adapter_model.bin");
        if (bin && vc_file_exists(bin)) {
            free(path);
            path = bin;
        } else free(bin);
    }
    vc_checkpoint *ck = NULL;
    vc_status st = path ? vc_ckpt_open(path, &ck) : VC_ERR_NOMEM;
    for (int i = 0; !st && i < a->n; i++) {
        if (a->slot_of[i] == VC_W_EXP_GATE || a->slot_of[i] == VC_W_EXP_DOWN) {
            st = load_expert(m, path, ck, i);
            continue;
        }
        unit u;
        int owner;
        unit_of(m, i, &u, &owner);
        if (u.n > 1 && !owner) continue;
        const vc_st_tensor *ta = u.n > 1 ? find_alias(ck, u.mod, 0) : NULL;
        const vc_st_tensor *tb = u.n > 1 ? find_alias(ck, u.mod, 1) : NULL;
        if (ta && tb) st = load_fused(m, path, &u, ta, tb);
        else /* per part: a unit of one, or the parts of a fused tensor as earlier verlc files name them */
            for (int p = 0; !st && p < u.n; p++) st = load_one(m, path, ck, u.ad[p]);
    }
    vc_ckpt_close(ck);
    free(path);
    if (!st) st = m->be->sync();
    return st;
}
