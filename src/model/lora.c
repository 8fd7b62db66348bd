/* LoRA adapters (Hu et al., arXiv 2106.09685, in PEFT's layout): on the chosen linear projections of every
 * decoder layer, y = x W^T + b + (alpha / r) (x A^T) B^T with A [r, in] drawn as PEFT draws it (uniform
 * in +-1/sqrt(in), seeded) and B [out, r] zero, so a fresh adapter leaves the model unchanged. With an
 * adapter the base weights get no gradient storage: only A and B are trained (the trainer's extra
 * parameters). Rollout runs the same decoder, so it samples from the adapted model; with the adapter
 * switched off the model is the base model (verl's reference policy under LoRA). */
#include "model_internal.h"
#include "tensor/backend.h"
#include "verlc/rng.h"
#include "verlc/json.h"
#include "verlc/safetensors.h"
#include <oniguruma.h>
#include <sys/stat.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* the projections that take adapters, by PEFT's module short names: what `all-linear` reaches in
 * transformers 5 (nn.Linear modules; MoE routers and fused expert tensors are not nn.Linear there) */
static const struct { const char *name; int slot; } TARGETS[] = {
    { "q_proj", VC_W_Q }, { "k_proj", VC_W_K }, { "v_proj", VC_W_V }, { "o_proj", VC_W_O },
    { "gate_proj", VC_W_GATE }, { "up_proj", VC_W_UP }, { "down_proj", VC_W_DOWN },
    /* MLA (DeepSeek V2/V3) */
    { "q_a_proj", VC_W_Q_A }, { "q_b_proj", VC_W_Q_BPROJ }, { "kv_a_proj_with_mqa", VC_W_KV_A },
    { "kv_b_proj", VC_W_KV_B },
    /* shared experts of MoE layers (modules named like the dense MLP's) and Qwen2-MoE's shared gate */
    { "gate_proj", VC_W_SH_GATE }, { "up_proj", VC_W_SH_UP }, { "down_proj", VC_W_SH_DOWN },
    { "shared_expert_gate", VC_W_SH_GATE_PROJ },
};
#define N_TARGETS (sizeof TARGETS / sizeof TARGETS[0])

/* Megatron's module names (verl's megatron strategy: model.lora.target_modules), for the same slots */
static const struct { const char *name; int slot; } MEGATRON_NAMES[] = {
    { "linear_qkv", VC_W_Q }, { "linear_qkv", VC_W_K }, { "linear_qkv", VC_W_V }, { "linear_proj", VC_W_O },
    { "linear_fc1", VC_W_GATE }, { "linear_fc1", VC_W_UP }, { "linear_fc2", VC_W_DOWN },
    { "linear_fc1", VC_W_SH_GATE }, { "linear_fc1", VC_W_SH_UP }, { "linear_fc2", VC_W_SH_DOWN },
    { "linear_q_down_proj", VC_W_Q_A }, { "linear_q_up_proj", VC_W_Q_BPROJ }, { "linear_q_proj", VC_W_Q },
    { "linear_kv_down_proj", VC_W_KV_A }, { "linear_kv_up_proj", VC_W_KV_B },
};

static const char *target_name(int slot) {
    for (size_t i = 0; i < N_TARGETS; i++)
        if (TARGETS[i].slot == slot) return TARGETS[i].name;
    return "?";
}

/* "all-linear" or comma/space-separated module names -> a bit per slot. Names are the Llama-style ones
 * (q_proj ... down_proj) or the architecture's own module names (Phi-2's fc1/fc2/dense, InternLM2's
 * wqkv/wo/w1/w2/w3, Qwen's c_attn/c_proj/w1/w2, Baichuan's W_pack, Phi-3's qkv_proj/gate_up_proj, ...);
 * a fused module targets each of its parts. */
static vc_status parse_targets(const vc_arch *arch, const char *spec, uint64_t *mask) {
    *mask = 0;
    if (!spec || !*spec || !strcmp(spec, "all-linear")) {
        for (size_t i = 0; i < N_TARGETS; i++) *mask |= 1ull << TARGETS[i].slot;
        return VC_OK;
    }
    char buf[512];
    snprintf(buf, sizeof buf, "%s", spec);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ", []'\"", &save); tok; tok = strtok_r(NULL, ", []'\"", &save)) {
        uint64_t own = 0;
        for (size_t i = 0; i < N_TARGETS; i++)
            if (!strcmp(tok, TARGETS[i].name)) own |= 1ull << TARGETS[i].slot;
        for (size_t i = 0; i < sizeof MEGATRON_NAMES / sizeof MEGATRON_NAMES[0]; i++)
            if (!strcmp(tok, MEGATRON_NAMES[i].name)) own |= 1ull << MEGATRON_NAMES[i].slot;
        if (!own && arch) /* the architecture's own module names, dense projections only */
            for (size_t k = 0; k < N_TARGETS; k++) own |= vc_arch_module_slots(arch, tok) & (1ull << TARGETS[k].slot);
        if (!own)
            return vc_fail(VC_ERR_ARG, "LoRA target module '%s' is not one of all-linear, q_proj, k_proj, v_proj, "
                                       "o_proj, gate_proj, up_proj, down_proj or a projection module of %s", tok,
                           arch ? arch->name : "the model");
        *mask |= own;
    }
    return *mask ? VC_OK : vc_fail(VC_ERR_ARG, "LoRA target_modules names no module");
}

int vc_lora_index(const vc_model *m, int layer, int slot) {
    const vc_lora *a = m->lora;
    if (!a || !a->on || layer < 0) return -1;
    return a->index[(size_t)layer * VC_W_COUNT + slot];
}

void vc_lora_free(vc_lora *a, const vc_backend *be) {
    if (!a) return;
    if (be) {
        be->free(a->data);
        be->free(a->grad);
    }
    free(a->index);
    free(a->layer_of);
    free(a->slot_of);
    free(a->off);
    free(a->t);
    free(a->ptr);
    free(a);
}

/* A's floats, B's offset after it (both 16-float aligned) */
static int64_t a_span(int64_t rank, int64_t in) { return (rank * in + 15) & ~(int64_t)15; }
static int64_t b_span(int64_t out, int64_t rank) { return (out * rank + 15) & ~(int64_t)15; }

/* the adapters' tensors over the allocated storage, A drawn, B zero */
static vc_status place(vc_model *m, vc_lora *a, uint64_t seed) {
    float *host = vc_calloc((size_t)a->n_floats, sizeof(float));
    if (!host) return VC_ERR_NOMEM;
    for (int i = 0; i < a->n; i++) {
        vc_tensor *W = vc_w(m, a->layer_of[i], a->slot_of[i]);
        int64_t out = W->shape[0], in = W->shape[1], off = a->off[i], boff = off + a_span(a->rank, in);
        int64_t sa[2] = { a->rank, in }, sb[2] = { out, a->rank };
        vc_param_init(&a->t[2 * i], a->data + off, a->grad + off, 2, sa);
        vc_param_init(&a->t[2 * i + 1], a->data + boff, a->grad + boff, 2, sb);
        for (int k = 0; k < 2; k++) {
            a->t[2 * i + k].requires_grad = 1;
            a->ptr[2 * i + k] = &a->t[2 * i + k];
        }
        float bound = (float)(1.0 / sqrt((double)in)); /* PEFT: kaiming_uniform_(a = sqrt(5)) */
        for (int64_t e = 0; e < a->rank * in; e++)
            host[off + e] = bound * (2.0f * vc_rng_uniform(seed, (uint64_t)a->layer_of[i], (uint64_t)a->slot_of[i],
                                                           (uint64_t)e) - 1.0f);
    }
    m->be->h2d(a->data, host, sizeof(float) * (size_t)a->n_floats);
    m->be->zero(a->grad, sizeof(float) * (size_t)a->n_floats);
    free(host);
    return m->be->sync();
}

/* the module path PEFT matches exclude_modules against and names adapters by: the checkpoint's own
 * (model.layers.3.mlp.fc1 for Phi-2), or, for a part of a fused tensor (W_pack, qkv_proj, c_attn), the
 * Llama-style path of the part, since verlc adapts each part on its own */
void vc_lora_module_name(const vc_model *m, int layer, int slot, char *buf, size_t cap) {
    for (int i = 0; i < m->n_src; i++) { /* the tensor the checkpoint loaded it from (families share rules) */
        const vc_source *s = &m->src[i];
        size_t n = strlen(s->name);
        if (s->layer == layer && s->rule && s->rule->slot == slot && s->rule->transform == VC_TR_NONE && n > 7 &&
            !strcmp(s->name + n - 7, ".weight")) {
            snprintf(buf, cap, "%.*s", (int)(n - 7), s->name);
            return;
        }
    }
    if (m->cfg.arch && vc_arch_module_name(m->cfg.arch, layer, slot, buf, cap)) return;
    int attn = slot == VC_W_Q || slot == VC_W_K || slot == VC_W_V || slot == VC_W_O;
    snprintf(buf, cap, "model.layers.%d.%s.%s", layer, attn ? "self_attn" : "mlp", target_name(slot));
}

/* exclude_modules as PEFT reads it: Python regular-expression syntax (Oniguruma's), a whole-path match */
static vc_status exclude_compile(const char *pat, OnigRegex *out) {
    OnigErrorInfo ei;
    char full[600]; /* re.fullmatch: anchored at the end too, so backtracking finds a whole-path match */
    snprintf(full, sizeof full, "(?:%s)\\Z", pat);
    int r = onig_new(out, (const UChar *)full, (const UChar *)full + strlen(full), ONIG_OPTION_NONE,
                     ONIG_ENCODING_UTF8, ONIG_SYNTAX_PYTHON, &ei);
    if (r == ONIG_NORMAL) return VC_OK;
    UChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(msg, r, &ei);
    *out = NULL;
    return vc_fail(VC_ERR_ARG, "LoRA exclude_modules '%s' is not a regular expression: %s", pat, (const char *)msg);
}

static int excluded(OnigRegex re, const char *name) {
    const UChar *s = (const UChar *)name, *e = s + strlen(name);
    return onig_match(re, s, e, s, NULL, ONIG_OPTION_NONE) == (int)(e - s);
}

vc_status vc_model_lora_init(vc_model *m, int rank, double alpha, const char *targets, uint64_t seed) {
    return vc_model_lora_init_ex(m, rank, alpha, targets, NULL, seed);
}

vc_status vc_model_lora_init_ex(vc_model *m, int rank, double alpha, const char *targets, const char *exclude,
                                uint64_t seed) {
    if (m->lora) return vc_fail(VC_ERR_ARG, "model: LoRA adapters are already attached");
    if (rank < 1 || rank > 4096) return vc_fail(VC_ERR_ARG, "LoRA rank must be in 1..4096, got %d", rank);
    if (!(alpha > 0)) return vc_fail(VC_ERR_ARG, "LoRA alpha must be positive, got %g", alpha);
    if (m->compacted || m->grad_storage) return vc_fail(VC_ERR_ARG, "model: attach LoRA before training starts");
    uint64_t mask;
    vc_status st = parse_targets(m->cfg.arch, targets, &mask);
    if (st) return st;
    OnigRegex ex = NULL; /* PEFT: a Python regular expression that must match the whole module path */
    if (exclude && *exclude && (st = exclude_compile(exclude, &ex))) return st;
    const vc_model_config *c = &m->cfg;
    size_t cells = (size_t)c->n_layer * VC_W_COUNT, most = (size_t)c->n_layer * N_TARGETS + 1;
    vc_lora *a = vc_calloc(1, sizeof *a);
    if (!a) {
        onig_free(ex);
        return VC_ERR_NOMEM;
    }
    a->index = vc_malloc(sizeof(int) * cells);
    a->layer_of = vc_malloc(sizeof(int) * most);
    a->slot_of = vc_malloc(sizeof(int) * most);
    a->off = vc_malloc(sizeof(int64_t) * most);
    a->t = vc_calloc(2 * most, sizeof *a->t);
    a->ptr = vc_calloc(2 * most, sizeof *a->ptr);
    if (!a->index || !a->layer_of || !a->slot_of || !a->off || !a->t || !a->ptr) {
        onig_free(ex);
        vc_lora_free(a, NULL);
        return VC_ERR_NOMEM;
    }
    for (size_t i = 0; i < cells; i++) a->index[i] = -1;
    a->rank = rank;
    a->alpha = alpha;
    a->scale = (float)(alpha / rank);
    a->on = 1;
    for (int l = 0; l < c->n_layer; l++) /* the dense projections this layer has */
        for (size_t i = 0; i < N_TARGETS; i++) {
            vc_tensor *W = vc_w(m, l, TARGETS[i].slot);
            if (!(mask >> TARGETS[i].slot & 1) || !W || W->ndim != 2) continue;
            char name[128];
            vc_lora_module_name(m, l, TARGETS[i].slot, name, sizeof name);
            if (ex && excluded(ex, name)) continue;
            a->index[(size_t)l * VC_W_COUNT + TARGETS[i].slot] = a->n;
            a->layer_of[a->n] = l;
            a->slot_of[a->n] = TARGETS[i].slot;
            a->off[a->n] = a->n_floats;
            a->n_floats += a_span(rank, W->shape[1]) + b_span(W->shape[0], rank);
            a->n++;
        }
    onig_free(ex);
    if (!a->n) {
        vc_lora_free(a, NULL);
        return vc_fail(VC_ERR_ARG, "LoRA: the model has none of the target modules (or all are excluded)");
    }
    a->data = m->be->alloc(sizeof(float) * (size_t)a->n_floats);
    a->grad = a->data ? m->be->alloc(sizeof(float) * (size_t)a->n_floats) : NULL;
    st = a->data && a->grad ? place(m, a, seed)
                            : vc_fail(VC_ERR_NOMEM, "LoRA: cannot allocate %.1f MB of adapters", a->n_floats * 8e-6);
    if (st) {
        vc_lora_free(a, m->be);
        return st;
    }
    m->lora = a;
    return VC_OK;
}

int vc_model_lora_params(vc_model *m, vc_tensor *const **out) {
    *out = m && m->lora ? m->lora->ptr : NULL;
    return m && m->lora ? 2 * m->lora->n : 0;
}

int vc_model_lora_enable(vc_model *m, int on) {
    if (!m || !m->lora) return 0;
    int was = m->lora->on;
    m->lora->on = on;
    return was;
}

int vc_model_has_lora(const vc_model *m) { return m && m->lora != NULL; }

/* W += sign * scale * B A for every adapter (f32 GEMMs), for export */
static vc_status merge(vc_model *m, float sign) {
    vc_lora *a = m->lora;
    int prec = vc_matmul_precision();
    vc_set_matmul_precision(VC_PREC_F32);
    for (int i = 0; i < a->n; i++) {
        vc_tensor *W = vc_w(m, a->layer_of[i], a->slot_of[i]);
        int64_t out = W->shape[0], in = W->shape[1];
        m->be->gemm(0, 0, out, in, a->rank, sign * a->scale, a->t[2 * i + 1].data, a->rank, a->t[2 * i].data, in, 1.0f,
                    W->data, in);
    }
    vc_set_matmul_precision(prec);
    return m->be->sync();
}

/* runs fn(m, ctx) with the adapters merged into the base weights, which are restored exactly after */
vc_status vc_model_lora_merged(vc_model *m, vc_status (*fn)(vc_model *m, void *ctx), void *ctx) {
    vc_lora *a = m->lora;
    if (!a) return fn(m, ctx);
    float **keep = vc_calloc((size_t)a->n, sizeof *keep);
    vc_status st = keep ? VC_OK : VC_ERR_NOMEM;
    for (int i = 0; !st && i < a->n; i++) {
        vc_tensor *W = vc_w(m, a->layer_of[i], a->slot_of[i]);
        if (!(keep[i] = vc_malloc(sizeof(float) * (size_t)W->n))) st = VC_ERR_NOMEM;
        else m->be->d2h(keep[i], W->data, sizeof(float) * (size_t)W->n);
    }
    int was = a->on;
    a->on = 0; /* the merged weights carry the adapters */
    if (!st) st = merge(m, 1.0f);
    if (!st) st = fn(m, ctx);
    for (int i = 0; keep && i < a->n; i++)
        if (keep[i]) {
            vc_tensor *W = vc_w(m, a->layer_of[i], a->slot_of[i]);
            m->be->h2d(W->data, keep[i], sizeof(float) * (size_t)W->n);
            free(keep[i]);
        }
    free(keep);
    a->on = was;
    vc_status s2 = m->be->sync();
    return st ? st : s2;
}

struct save_args { const char *dir; vc_dtype dtype; };
static vc_status save_fn(vc_model *m, void *p) {
    const struct save_args *a = p;
    return vc_model_save_hf(m, a->dir, a->dtype);
}

vc_status vc_model_save_hf_merged(vc_model *m, const char *dir, vc_dtype dtype) {
    struct save_args a = { dir, dtype };
    vc_status st = vc_model_lora_merged(m, save_fn, &a);
    if (st || !m->lora) return st;
    char *p = vc_path_join(dir, "lora_adapter");
    if (!p) return VC_ERR_NOMEM;
    if (mkdir(p, 0755) != 0 && !vc_file_exists(p)) st = vc_fail(VC_ERR_IO, "%s: cannot create directory", p);
    if (!st) st = vc_model_lora_save(m, p);
    free(p);
    return st;
}

/* adapter_config.json's r, lora_alpha and target_modules */
vc_status vc_model_lora_attach_from(vc_model *m, const char *dir) {
    char *p = vc_path_join(dir, "adapter_config.json");
    cJSON *j = NULL;
    vc_status st = p ? vc_json_load_file(p, &j) : VC_ERR_NOMEM;
    int64_t r = 0;
    double alpha = 0;
    char targets[512] = "";
    if (!st) st = vc_json_req_int(j, "r", &r, p);
    if (!st) st = vc_json_req_num(j, "lora_alpha", &alpha, p);
    const cJSON *tm = st ? NULL : vc_json_member(j, "target_modules"), *e;
    if (tm && cJSON_IsString(tm)) snprintf(targets, sizeof targets, "%s", tm->valuestring);
    else if (tm && cJSON_IsArray(tm))
        cJSON_ArrayForEach(e, tm) if (cJSON_IsString(e))
            snprintf(targets + strlen(targets), sizeof targets - strlen(targets), "%s%s", *targets ? "," : "",
                     e->valuestring);
    if (!st && r > 4096) st = vc_fail(VC_ERR_FORMAT, "%s: r = %lld", p, (long long)r);
    if (!st) st = vc_model_lora_init(m, (int)r, alpha, *targets ? targets : NULL, 0);
    if (!st) st = vc_model_lora_load(m, dir);
    cJSON_Delete(j);
    free(p);
    return st;
}
