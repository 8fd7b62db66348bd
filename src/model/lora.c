/* LoRA adapters (Hu et al., arXiv 2106.09685, in PEFT's layout): on the chosen linear projections of every
 * decoder layer, y = x W^T + b + (alpha / r) (x A^T) B^T with A [r, in] drawn as PEFT draws it (uniform
 * in +-1/sqrt(in), seeded) and B [out, r] zero, so a fresh adapter leaves the model unchanged. With an
 * adapter the base weights get no gradient storage: only A and B are trained (the trainer's extra
 * parameters). Rollout runs the same decoder, so it samples from the adapted model; with the adapter
 * switched off the model is the base model (verl's reference policy under LoRA).
 * PEFT's target_parameters reach what is not nn.Linear in transformers 5: the routed experts' fused
 * tensors (mlp.experts.gate_up_proj [E, 2I, H], mlp.experts.down_proj [E, H, I]: one rank-r adapter per
 * expert, gate and up sharing A as the fused tensor does) and the router (mlp.gate.weight); gpt-oss's input-major
 * experts ([E, H, 2I] with gate and up columns alternating, [E, I, H]; PEFT's adapters the same [r E, in] and
 * [out, r E], B's gate_up rows alternating: src/model/lora_io.c) and its router (mlp.router.weight, beside its bias).
 * The vision tower of a Qwen-VL model takes adapters on its nn.Linear modules as PEFT gives them (all-linear reaches
 * every one; a name matches a module path equal to it or ending in "." + it; exclude_modules as for the text): its
 * adapters are numbered after the text's, slot_of VC_LORA_TOWER + the tower's slot. */
#include "model_internal.h"
#include "tensor/backend.h"
#include "verlc/ops.h"
#include "verlc/rng.h"
#include "verlc/json.h"
#include "verlc/safetensors.h"
#include "verlc/vision.h"
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
    { "gate_proj", VC_W_ATTN_GATE }, /* AFMoE's attention output gate, a gate_proj under self_attn (Qwen3.5's: in
                                      * q_proj, reached by the architecture's module names) */
    { "g_proj", VC_W_ATTN_GATE },    /* LFM3's gate per head */
    /* Gated DeltaNet layers (Qwen3.5; Qwen3-Next fuses them as in_proj_qkvz and in_proj_ba) */
    { "in_proj_qkv", VC_W_LIN_QKV }, { "in_proj_z", VC_W_LIN_Z }, { "in_proj_b", VC_W_LIN_B },
    { "in_proj_a", VC_W_LIN_A }, { "out_proj", VC_W_LIN_OUT },
    { "in_proj", VC_W_LIN_QKV }, /* LFM2's short convolutions (B, C, x) */
    { "k_proj", VC_W_LIN_K }, { "v_proj", VC_W_LIN_V }, /* OLMo-hybrid's linear layers (q_proj: LIN_QKV by its name) */
    { "f_a_proj", VC_W_LIN_FA }, { "f_b_proj", VC_W_LIN_FB }, /* Kimi Delta Attention's low-rank decay and gate */
    { "g_a_proj", VC_W_LIN_GA }, { "g_b_proj", VC_W_LIN_GB },
    { "x_proj", VC_W_LIN_XPROJ }, { "dt_proj", VC_W_LIN_DTPROJ }, /* Mamba 1 (Jamba) */
    { "fc1_latent_proj", VC_W_LAT_IN }, { "fc2_latent_proj", VC_W_LAT_OUT }, /* Nemotron-H's latent MoE */
    { "per_layer_input_gate", VC_W_PLE_GATE }, { "per_layer_projection", VC_W_PLE_PROJ }, /* Gemma 4's per-layer input */
};
#define N_TARGETS (sizeof TARGETS / sizeof TARGETS[0])
_Static_assert(VC_W_COUNT <= 128, "slot masks are 128 bits");

/* Megatron's module names (verl's megatron strategy: model.lora.target_modules), for the same slots */
static const struct { const char *name; int slot; } MEGATRON_NAMES[] = {
    { "linear_qkv", VC_W_Q }, { "linear_qkv", VC_W_K }, { "linear_qkv", VC_W_V }, { "linear_proj", VC_W_O },
    { "linear_fc1", VC_W_GATE }, { "linear_fc1", VC_W_UP }, { "linear_fc2", VC_W_DOWN },
    { "linear_fc1", VC_W_SH_GATE }, { "linear_fc1", VC_W_SH_UP }, { "linear_fc2", VC_W_SH_DOWN },
    { "linear_q_down_proj", VC_W_Q_A }, { "linear_q_up_proj", VC_W_Q_BPROJ }, { "linear_q_proj", VC_W_Q },
    { "linear_kv_down_proj", VC_W_KV_A }, { "linear_kv_up_proj", VC_W_KV_B },
};

/* target_parameters: the tensors of an MoE layer PEFT wraps as parameters, by their transformers 5 names
 * under model.layers.N (slot: the adapter's; gate_up's adapter also covers VC_W_EXP_UP) */
static const int PARAMS[] = { VC_W_EXP_GATE, VC_W_EXP_DOWN, VC_W_ROUTER }; /* their paths: vc_arch_param_path */
#define N_PARAMS (sizeof PARAMS / sizeof PARAMS[0])

int vc_lora_linear_slots(int *slots, int cap) {
    int n = 0;
    for (size_t i = 0; i < N_TARGETS; i++) {
        int seen = 0;
        for (int k = 0; k < n && !seen; k++) seen = slots[k] == TARGETS[i].slot;
        if (!seen && n < cap) slots[n++] = TARGETS[i].slot;
    }
    return n;
}

static int is_expert_slot(int slot) { return slot == VC_W_EXP_GATE || slot == VC_W_EXP_DOWN; }

static const char *target_name(int slot) {
    for (size_t i = 0; i < N_TARGETS; i++)
        if (TARGETS[i].slot == slot) return TARGETS[i].name;
    return "?";
}

/* what module names reach in MoE layers, as PEFT maps transformers 4's per-expert nn.Linear names onto
 * transformers 5's fused expert tensors (gate and up only together, as one adapter of twice the rank) */
enum { MOE_GATE = 1, MOE_UP = 2, MOE_DOWN = 4, MOE_ROUTER = 8, MOE_SHARED_FC1 = 16, MOE_SHARED_FC2 = 32 };
static const struct { const char *name; unsigned bit; } MOE_NAMES[] = {
    { "gate_proj", MOE_GATE }, { "w1", MOE_GATE }, { "up_proj", MOE_UP }, { "w3", MOE_UP },
    { "down_proj", MOE_DOWN }, { "w2", MOE_DOWN }, { "gate", MOE_ROUTER },
    /* Megatron-Bridge: one adapter of a layer's grouped expert linear, shared by all its experts */
    { "linear_fc1", MOE_SHARED_FC1 }, { "linear_fc2", MOE_SHARED_FC2 }, { "router", MOE_ROUTER },
};

/* "all-linear" or comma/space-separated module names -> a bit per slot, and in *moe (models with MoE
 * layers) the MOE_* bits. Names are the Llama-style ones (q_proj ... down_proj) or the architecture's own
 * module names (Phi-2's fc1/fc2/dense, InternLM2's wqkv/wo/w1/w2/w3, Qwen's c_attn/c_proj/w1/w2,
 * Baichuan's W_pack, Phi-3's qkv_proj/gate_up_proj, Mixtral's w1/w2/w3 and gate, ...); a fused module
 * targets each of its parts. all-linear reaches what was nn.Linear in transformers 4, the routed experts
 * and the router too, as PEFT does. */
static int tower_matches(const vc_model *m, const char *tok);
static int path_matches(const char *path, const char *name);
/* the tower's module that PEFT adapts and verlc does not which name tok reaches (its Conv3d patch embedding, Qwen3-VL's
 * and GLM-4V's position nn.Embedding, GLM-4V's Conv2d downsample), or NULL */
static const char *tower_other(const vc_model *m, const char *tok) {
    static const char *const OTHER[][2] = { { "patch_embed.proj", "Conv3d patch_embed.proj" },
                                            { "pos_embed", "nn.Embedding pos_embed" },
                                            { "embeddings.position_embedding",
                                              "nn.Embedding embeddings.position_embedding" },
                                            { "downsample", "Conv2d downsample" } };
    for (int i = 0; m->vision && i < vc_vision_count(m->vision); i++) {
        const char *name = NULL, *v;
        vc_vision_tensor(m->vision, i, &name);
        v = name ? strstr(name, "visual.") : NULL;
        for (size_t k = 0; v && k < sizeof OTHER / sizeof OTHER[0]; k++) {
            char path[160], w[96];
            snprintf(path, sizeof path, "model.visual.%s", OTHER[k][0]);
            snprintf(w, sizeof w, "%s.weight", OTHER[k][0]);
            if (!strcmp(v + 7, w) && path_matches(path, tok)) return OTHER[k][1];
        }
    }
    return NULL;
}
static vc_status parse_targets(const vc_model *m, const char *spec, int has_moe, vc_slot_mask *mask, unsigned *moe) {
    const vc_arch *arch = m->cfg.arch;
    int tower = 0; /* a name reaches modules of the vision tower */
    *mask = 0;
    *moe = 0;
    /* PEFT refuses out_proj on its Mamba model types (their kernels read the weight directly): all-linear leaves
     * it out there, naming it is refused */
    int mamba = arch && (!strcmp(arch->name, "nemotron_h") || !strcmp(arch->name, "falcon_h1") ||
                         !strcmp(arch->name, "mamba") || !strcmp(arch->name, "mamba2"));
    if (!spec || !*spec || !strcmp(spec, "all-linear")) {
        for (size_t i = 0; i < N_TARGETS; i++)
            if (!(mamba && TARGETS[i].slot == VC_W_LIN_OUT)) *mask |= VC_SLOT_BIT(TARGETS[i].slot);
        *moe = has_moe ? MOE_GATE | MOE_UP | MOE_DOWN | MOE_ROUTER : 0;
        return VC_OK;
    }
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", spec);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ", []'\"", &save); tok; tok = strtok_r(NULL, ", []'\"", &save)) {
        vc_slot_mask own = 0, gate = VC_SLOT_BIT(VC_W_ATTN_GATE);
        for (size_t i = 0; i < N_TARGETS; i++)
            if (!strcmp(tok, TARGETS[i].name)) own |= VC_SLOT_BIT(TARGETS[i].slot);
        for (size_t i = 0; i < sizeof MEGATRON_NAMES / sizeof MEGATRON_NAMES[0]; i++)
            if (!strcmp(tok, MEGATRON_NAMES[i].name)) own |= VC_SLOT_BIT(MEGATRON_NAMES[i].slot);
        vc_slot_mask mod = 0; /* the architecture's own module names, dense projections only */
        for (size_t k = 0; k < N_TARGETS && arch; k++) mod |= vc_arch_module_slots(arch, tok) & VC_SLOT_BIT(TARGETS[k].slot);
        /* the attention gate by the module that holds it (AFMoE's gate_proj, Qwen3.5's q_proj), never by the name alone */
        if (arch) own = (own & ~gate) | (mod & gate);
        own |= mod; /* PEFT matches a module name wherever it is: LFM2's out_proj is attention's and the convolution's */
        unsigned mb = 0;
        for (size_t k = 0; k < sizeof MOE_NAMES / sizeof MOE_NAMES[0] && has_moe; k++)
            if (!strcmp(tok, MOE_NAMES[k].name)) mb |= MOE_NAMES[k].bit;
        *moe |= mb;
        if (mamba && (own & VC_SLOT_BIT(VC_W_LIN_OUT)))
            return vc_fail(VC_ERR_ARG, "LoRA target module '%s': PEFT refuses out_proj on Mamba models (%s: its mixers' "
                           "kernels read the weight directly); leave it out", tok, arch->name);
        const char *other = tower_other(m, tok);
        if (other)
            return vc_fail(VC_ERR_UNSUPPORTED, "LoRA target module '%s' reaches the vision tower's %s (PEFT adapts that "
                           "module too); LoRA on it is not built: name the tower's linears (attn.qkv, attn.proj, its "
                           "MLP's and mergers')", tok, other);
        int tw = tower_matches(m, tok);
        tower |= tw;
        if (!own && !mb && !tw)
            return vc_fail(VC_ERR_ARG, "LoRA target module '%s' is not one of all-linear, q_proj, k_proj, v_proj, "
                                       "o_proj, gate_proj, up_proj, down_proj or a projection module of %s%s", tok,
                           arch ? arch->name : "the model", m->vision ? " or its vision tower" : "");
        *mask |= own;
    }
    return *mask || *moe || tower ? VC_OK : vc_fail(VC_ERR_ARG, "LoRA target_modules names no module");
}

int vc_lora_index(const vc_model *m, int layer, int slot) {
    const vc_lora *a = m->lora;
    if (!a || !a->on || layer < 0 || layer >= m->cfg.n_layer) return -1; /* (MTP rows: no adapters) */
    return a->index[(size_t)layer * VC_W_COUNT + slot];
}

int vc_lora_tower_index(const vc_model *m, int s) {
    const vc_lora *a = m ? m->lora : NULL;
    if (!a || !a->on || !a->vindex || s < 0 || s >= a->n_vslots) return -1;
    return a->vindex[s];
}

vc_tensor *vc_lora_apply(const vc_model *m, vc_graph *g, int i, vc_tensor *x, vc_tensor *y) {
    if (i < 0 || !y) return y;
    const vc_lora *a = m->lora;
    vc_tensor *d = vc_op_linear(g, vc_op_linear(g, x, &a->t[2 * i], NULL), &a->t[2 * i + 1], NULL);
    return vc_op_add(g, y, vc_op_scale(g, d, a->scale));
}

/* the base weight adapter i's (layer, slot) adapts: a decoder slot's, or the tower's */
static vc_tensor *base_w(const vc_model *m, int layer, int slot) {
    char path[160];
    return slot >= VC_LORA_TOWER ? vc_vision_linear(m->vision, slot - VC_LORA_TOWER, path, sizeof path)
                                 : vc_w(m, layer, slot);
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
    free(a->rank_of);
    free(a->shared_of);
    free(a->off);
    free(a->t);
    free(a->ptr);
    free(a->vindex);
    free(a->exclude);
    free(a);
}

/* A's floats, B's offset after it (both 16-float aligned) */
static int64_t span(int64_t n) { return (n + 15) & ~(int64_t)15; }

/* the shapes of (layer, slot)'s A and B: [r, in] and [out, r] on a matrix; on the experts' gate and up
 * A [E, r, H] and B [2, E, I, r], on their down A [E, r, I] and B [E, H, r]; E = 1 when shared by the
 * experts (Megatron-Bridge's adapter of a grouped linear) */
typedef struct { int na, nb; int64_t a[4], b[4], an, bn; } ab_shape;
static ab_shape shapes(const vc_model *m, int layer, int slot, int64_t r, int shared) {
    const vc_tensor *W = base_w(m, layer, slot);
    ab_shape s = { 2, 2, { r, W->shape[W->ndim - 1] }, { W->shape[W->ndim - 2], r }, 0, 0 };
    if (W->ndim == 3) {
        int64_t E = shared ? 1 : W->shape[0], o = W->shape[1], in = W->shape[2];
        s.na = 3, s.a[0] = E, s.a[1] = r, s.a[2] = in;
        if (slot == VC_W_EXP_GATE) s.nb = 4, s.b[0] = 2, s.b[1] = E, s.b[2] = o, s.b[3] = r;
        else s.nb = 3, s.b[0] = E, s.b[1] = o, s.b[2] = r;
    }
    s.an = s.bn = 1;
    for (int k = 0; k < s.na; k++) s.an *= s.a[k];
    for (int k = 0; k < s.nb; k++) s.bn *= s.b[k];
    return s;
}

/* the tower is frozen (vc_model_freeze_vision) */
static int tower_frozen(const vc_model *m) {
    for (int i = m->n_params - 1; i >= 0 && m->params[i].slot == VC_SLOT_VISION; i--)
        if (m->params[i].frozen && !m->params[i].buffer) return 1; /* (its buffers never train) */
    return 0;
}

/* the adapters' tensors over the allocated storage, A drawn, B zero */
static vc_status place(vc_model *m, vc_lora *a, uint64_t seed) {
    float *host = vc_calloc((size_t)a->n_floats, sizeof(float));
    if (!host) return VC_ERR_NOMEM;
    for (int i = 0; i < a->n; i++) {
        ab_shape sh = shapes(m, a->layer_of[i], a->slot_of[i], a->rank_of[i], a->shared_of[i]);
        int64_t off = a->off[i], boff = off + span(sh.an), in = sh.a[sh.na - 1];
        vc_param_init(&a->t[2 * i], a->data + off, a->grad + off, sh.na, sh.a);
        vc_param_init(&a->t[2 * i + 1], a->data + boff, a->grad + boff, sh.nb, sh.b);
        for (int k = 0; k < 2; k++) {
            a->t[2 * i + k].requires_grad = !(a->slot_of[i] >= VC_LORA_TOWER && tower_frozen(m));
            a->ptr[2 * i + k] = &a->t[2 * i + k];
        }
        float bound = (float)(1.0 / sqrt((double)in)); /* PEFT: kaiming_uniform_(a = sqrt(5)) */
        for (int64_t e = 0; e < sh.an; e++)
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
static void module_name(const vc_model *m, int layer, int slot, char *buf, size_t cap);
void vc_lora_module_name(const vc_model *m, int layer, int slot, char *buf, size_t cap) {
    if (slot >= VC_LORA_TOWER) {
        if (!vc_vision_linear(m->vision, slot - VC_LORA_TOWER, buf, cap)) snprintf(buf, cap, "model.visual.?");
        return;
    }
    module_name(m, layer, slot, buf, cap);
    vc_lora_peft_path(m, buf, cap);
}

int vc_lora_peft_path(const vc_model *m, char *buf, size_t cap) {
    static const char *const HUB[2][2] = { { "model.", "model.language_model." }, { "visual.", "model.visual." } };
    if (!vc_vision_model_type(m->cfg.model_type)) return 0;
    for (int k = 0; k < 2; k++) {
        size_t n = strlen(HUB[k][0]);
        if (strncmp(buf, HUB[k][0], n) || !strncmp(buf, HUB[k][1], strlen(HUB[k][1])) ||
            !strncmp(buf, "model.visual.", 13))
            continue;
        char tmp[256];
        snprintf(tmp, sizeof tmp, "%s%s", HUB[k][1], buf + n);
        snprintf(buf, cap, "%s", tmp);
        return 1;
    }
    return 0;
}

/* the path of a layer's modules as the checkpoint names them ("model.layers.3.", a nested text model's
 * "language_model.model.layers.3."): from a tensor of the layer it loaded */
void vc_lora_layer_prefix(const vc_model *m, int layer, char *buf, size_t cap) {
    char key[32];
    snprintf(key, sizeof key, "layers.%d.", layer);
    for (int i = 0; i < m->n_src; i++) {
        const char *at = m->src[i].layer == layer ? strstr(m->src[i].name, key) : NULL;
        if (at) {
            snprintf(buf, cap, "%.*s%s", (int)(at - m->src[i].name), m->src[i].name, key);
            return;
        }
    }
    snprintf(buf, cap, "model.%s", key);
}

static void module_name(const vc_model *m, int layer, int slot, char *buf, size_t cap) {
    if (is_expert_slot(slot) || slot == VC_W_ROUTER) { /* PEFT's path on transformers 5's model */
        char path[96], pre[160];
        vc_arch_param_path(m->cfg.arch, slot == VC_W_ROUTER ? VC_W_ROUTER : VC_W_EXP_DOWN, path, sizeof path);
        char *dot = strrchr(path, '.'); /* the router's module, or the experts' */
        if (dot) *dot = 0;
        vc_lora_layer_prefix(m, layer, pre, sizeof pre);
        snprintf(buf, cap, "%s%s", pre, path);
        return;
    }
    /* LFM3's per-head gate is the module g_proj, which transformers 5.24 saves as gate_proj: PEFT names the module */
    if (slot == VC_W_ATTN_GATE && m->cfg.attn_out_gate == 2 && vc_arch_module_name(m->cfg.arch, layer, slot, buf, cap)) return;
    if (m->cfg.arch && m->cfg.arch->model_names && vc_arch_module_name(m->cfg.arch, layer, slot, buf, cap)) return;
    for (int i = 0; i < m->n_src; i++) { /* the tensor the checkpoint loaded it from (families share rules) */
        const vc_source *s = &m->src[i];
        size_t n = strlen(s->name);
        int part = s->rule && (s->rule->slot == slot || (s->rule->transform == VC_TR_HEAD_SPLIT && s->rule->slot2 == slot));
        int whole = s->rule && (s->rule->transform == VC_TR_NONE || s->rule->transform == VC_TR_HEAD_SPLIT ||
                                (s->rule->transform == VC_TR_CONV1D && !s->rule->slot2)); /* GPT-2's c_proj, c_fc */
        if (s->layer == layer && part && whole &&
            n > 7 && !strcmp(s->name + n - 7, ".weight")) {
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
    vc_lora_spec sp = { rank, alpha, targets, NULL, exclude, seed };
    return vc_model_lora_attach(m, &sp);
}

/* target_parameters (comma/space-separated, as PEFT matches them: a name equal to a parameter's path under
 * the model, model.layers.N.mlp.experts.gate_up_proj, or ending it after a dot) -> a bit per (layer,
 * PARAMS entry) in want[n_layer] */
static vc_status parse_params(const vc_model *m, const char *spec, unsigned *want) {
    const vc_model_config *c = &m->cfg;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", spec ? spec : "");
    char *save = NULL;
    for (char *tok = strtok_r(buf, ", []'\"", &save); tok; tok = strtok_r(NULL, ", []'\"", &save)) {
        int hit = 0;
        size_t n = strlen(tok);
        for (int l = 0; l < c->n_layer; l++)
            for (size_t k = 0; k < N_PARAMS && c->is_moe[l]; k++) {
                char key[160], path[96];
                vc_arch_param_path(c->arch, PARAMS[k], path, sizeof path);
                size_t kl = (size_t)snprintf(key, sizeof key, "model.layers.%d.%s", l, path);
                if (!strcmp(key, tok) || (kl > n && key[kl - n - 1] == '.' && !strcmp(key + kl - n, tok)))
                    want[l] |= 1u << k, hit = 1;
            }
        if (!hit)
            return vc_fail(VC_ERR_ARG, "LoRA target_parameters '%s' names no parameter of %s (verlc adapts the MoE "
                           "layers' mlp.experts.gate_up_proj, mlp.experts.down_proj and mlp.gate.weight)", tok,
                           c->arch ? c->arch->name : "the model");
    }
    return VC_OK;
}

/* adapter n of the list: (layer, slot) of rank r at the next offset (unless that slot has one); shared: one
 * adapter for all the layer's experts */
static void add_adapter(vc_model *m, vc_lora *a, int l, int slot, int r, int shared) {
    if (a->index[(size_t)l * VC_W_COUNT + slot] >= 0) return;
    ab_shape sh = shapes(m, l, slot, r, shared);
    a->shared_of[a->n] = shared;
    a->index[(size_t)l * VC_W_COUNT + slot] = a->n;
    a->layer_of[a->n] = l;
    a->slot_of[a->n] = slot;
    a->rank_of[a->n] = r;
    a->off[a->n] = a->n_floats;
    a->n_floats += span(sh.an) + span(sh.bn);
    a->n++;
}

static vc_lora *lora_new(size_t cells, size_t most, int vslots) {
    vc_lora *a = vc_calloc(1, sizeof *a);
    if (!a) return NULL;
    most += (size_t)vslots;
    a->n_vslots = vslots;
    if (vslots && !(a->vindex = vc_malloc(sizeof(int) * (size_t)vslots))) {
        free(a);
        return NULL;
    }
    for (int s = 0; s < vslots; s++) a->vindex[s] = -1;
    a->index = vc_malloc(sizeof(int) * cells);
    a->layer_of = vc_malloc(sizeof(int) * most);
    a->slot_of = vc_malloc(sizeof(int) * most);
    a->rank_of = vc_malloc(sizeof(int) * most);
    a->shared_of = vc_calloc(most, sizeof(int));
    a->off = vc_malloc(sizeof(int64_t) * most);
    a->t = vc_calloc(2 * most, sizeof *a->t);
    a->ptr = vc_calloc(2 * most, sizeof *a->ptr);
    if (!a->index || !a->layer_of || !a->slot_of || !a->rank_of || !a->shared_of || !a->off || !a->t || !a->ptr) {
        vc_lora_free(a, NULL);
        return NULL;
    }
    for (size_t i = 0; i < cells; i++) a->index[i] = -1;
    return a;
}

/* PEFT's match of a target_modules name: the module's path is the name or ends in "." + the name */
static int path_matches(const char *path, const char *name) {
    size_t n = strlen(path), k = strlen(name);
    return n >= k && !strcmp(path + n - k, name) && (n == k || path[n - k - 1] == '.');
}

static int tower_matches(const vc_model *m, const char *tok) {
    char path[160];
    for (int s = 0; m->vision && s < vc_vision_n_slots(m->vision); s++)
        if (vc_vision_linear(m->vision, s, path, sizeof path) && path_matches(path, tok)) return 1;
    return 0;
}

/* the tower's module at path is a target: all-linear (or no list) reaches every one, "[]" none, else a name */
static int tower_target(const char *spec, const char *path) {
    if (!spec || !*spec || !strcmp(spec, "all-linear")) return 1;
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", spec);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ", []'\"", &save); tok; tok = strtok_r(NULL, ", []'\"", &save))
        if (path_matches(path, tok)) return 1;
    return 0;
}

/* the vision tower's adapters (after the decoder's), in the tower's slot order */
static void choose_tower(vc_model *m, vc_lora *a, const char *spec, OnigRegex ex) {
    char path[160];
    for (int s = 0; s < a->n_vslots; s++) {
        if (!vc_vision_linear(m->vision, s, path, sizeof path) || !tower_target(spec, path)) continue;
        if (ex && excluded(ex, path)) continue;
        int slot = VC_LORA_TOWER + s;
        ab_shape sh = shapes(m, -1, slot, a->rank, 0);
        a->vindex[s] = a->n;
        a->layer_of[a->n] = -1;
        a->slot_of[a->n] = slot;
        a->rank_of[a->n] = a->rank;
        a->off[a->n] = a->n_floats;
        a->n_floats += span(sh.an) + span(sh.bn);
        a->n++;
    }
}

/* the adapters' list: target_modules' dense projections not excluded and what they reach in the MoE
 * layers (moe: MOE_* bits; gate_up of rank 2 r, as PEFT converts gate and up), then target_parameters' */
static vc_status choose(vc_model *m, vc_lora *a, vc_slot_mask mask, unsigned moe, OnigRegex ex, const unsigned *want,
                        int gu_rank, const char *spec) {
    const vc_model_config *c = &m->cfg;
    int r = a->rank;
    for (int l = 0; l < c->n_layer; l++) { /* the dense projections this layer has */
        for (size_t i = 0; i < N_TARGETS; i++) {
            vc_tensor *W = vc_w(m, l, TARGETS[i].slot);
            if (!(mask >> TARGETS[i].slot & 1) || !W || W->ndim != 2) continue;
            char name[128];
            vc_lora_module_name(m, l, TARGETS[i].slot, name, sizeof name);
            if (ex && excluded(ex, name)) continue;
            add_adapter(m, a, l, TARGETS[i].slot, r, 0);
        }
        char name[128];
        vc_lora_module_name(m, l, VC_W_EXP_GATE, name, sizeof name);
        int ex_exp = ex && excluded(ex, name);
        vc_lora_module_name(m, l, VC_W_ROUTER, name, sizeof name);
        int ex_router = ex && excluded(ex, name);
        if (c->is_moe[l] && !ex_exp && (moe & (MOE_GATE | MOE_UP)) == (MOE_GATE | MOE_UP) && vc_w(m, l, VC_W_EXP_GATE))
            add_adapter(m, a, l, VC_W_EXP_GATE, gu_rank > 0 ? gu_rank : 2 * r, 0);
        if (c->is_moe[l] && !ex_exp && moe & MOE_DOWN) add_adapter(m, a, l, VC_W_EXP_DOWN, r, 0);
        if (c->is_moe[l] && !ex_exp && moe & MOE_SHARED_FC1 && vc_w(m, l, VC_W_EXP_GATE)) add_adapter(m, a, l, VC_W_EXP_GATE, r, 1);
        if (c->is_moe[l] && !ex_exp && moe & MOE_SHARED_FC2) add_adapter(m, a, l, VC_W_EXP_DOWN, r, 1);
        if (c->is_moe[l] && !ex_router && moe & MOE_ROUTER) add_adapter(m, a, l, VC_W_ROUTER, r, 0);
        for (size_t k = 0; k < N_PARAMS; k++)
            if (want[l] >> k & 1 && vc_w(m, l, PARAMS[k]))
                add_adapter(m, a, l, PARAMS[k], PARAMS[k] == VC_W_EXP_GATE && gu_rank > 0 ? gu_rank : r, 0);
    }
    if (a->vindex) choose_tower(m, a, spec, ex);
    return a->n ? VC_OK : vc_fail(VC_ERR_ARG, "LoRA: the model has none of the target modules (or all are excluded)");
}

vc_status vc_model_lora_attach(vc_model *m, const vc_lora_spec *sp) {
    int rank = sp->rank;
    if (m->lora) return vc_fail(VC_ERR_ARG, "model: LoRA adapters are already attached");
    if (rank < 1 || rank > 4096) return vc_fail(VC_ERR_ARG, "LoRA rank must be in 1..4096, got %d", rank);
    if (!(sp->alpha > 0)) return vc_fail(VC_ERR_ARG, "LoRA alpha must be positive, got %g", sp->alpha);
    if (m->compacted || m->grad_storage) return vc_fail(VC_ERR_ARG, "model: attach LoRA before training starts");
    const vc_model_config *c = &m->cfg;
    vc_slot_mask mask = 0;
    unsigned moe = 0;
    int has_moe = 0;
    for (int l = 0; l < c->n_layer; l++) has_moe |= c->is_moe[l];
    int has_params = sp->params && strspn(sp->params, ", []'\"") < strlen(sp->params);
    /* target_modules "[]" (an empty list): no module, as with PEFT (target_parameters only) */
    int none = sp->targets && *sp->targets && !sp->targets[strspn(sp->targets, "[] ")];
    vc_status st = none ? VC_OK : parse_targets(m, sp->targets, has_moe, &mask, &moe);
    if (st) return st;
    int dbrx = c->arch && !strcmp(c->arch->name, "dbrx");
    int named = sp->targets && *sp->targets && strcmp(sp->targets, "all-linear");
    if (dbrx) { /* its experts and router in a layout of their own */
        if ((moe && named) || has_params)
            return vc_fail(VC_ERR_UNSUPPORTED, "LoRA on DBRX's experts and router (its own expert layout) is not built; "
                           "target the attention projections (all-linear does)");
        moe = 0;
    }
    if (c->expert_bias) { /* gpt-oss: its experts and router are parameters (target_parameters reach them) */
        if (moe && named)
            return vc_fail(VC_ERR_UNSUPPORTED, "LoRA target_modules reach no expert or router of gpt-oss (parameters, "
                           "not nn.Linear modules): name them in target_parameters (mlp.experts.gate_up_proj, "
                           "mlp.experts.down_proj, mlp.router.weight), as PEFT does");
        moe = 0;
    }
    if (c->route_scale_input) { /* Llama 4: the routing scales the experts' inputs; the router is an nn.Linear */
        int named = sp->targets && *sp->targets && strcmp(sp->targets, "all-linear");
        if ((moe & ~(unsigned)MOE_ROUTER && named) || has_params)
            return vc_fail(VC_ERR_UNSUPPORTED, "LoRA on %s's routed experts (their inputs scaled by the routing) is not "
                           "built; target the attention, shared-expert and router projections (all-linear does)",
                           c->arch ? c->arch->name : "the model");
        moe &= MOE_ROUTER;
    }
    if (c->moe_dense) /* Gemma 4: no transformers 4 layout to convert from, so module names reach the router's nn.Linear
                       * only (the experts: target_parameters) */
        moe &= MOE_ROUTER;
    /* MoE families new in transformers 5 (no per-expert layout PEFT converts module names to; their routers are no
     * nn.Linear): module names reach no expert or router, as PEFT's all-linear (target_parameters do) */
    if (c->arch && (!strcmp(c->arch->name, "mimo_v2_flash") || !strcmp(c->arch->name, "hy_v3"))) moe = 0;
    if (!(moe & MOE_GATE) != !(moe & MOE_UP)) /* PEFT refuses this conversion on transformers 5 */
        vc_warn("LoRA target_modules names %s without %s: the routed experts' fused gate_up_proj gets no adapter",
                moe & MOE_GATE ? "gate_proj (w1)" : "up_proj (w3)", moe & MOE_GATE ? "up_proj (w3)" : "gate_proj (w1)");
    unsigned *want = vc_calloc((size_t)c->n_layer + 1, sizeof *want);
    if (!want) return VC_ERR_NOMEM;
    if (has_params && (st = parse_params(m, sp->params, want))) {
        free(want);
        return st;
    }
    OnigRegex ex = NULL; /* PEFT: a Python regular expression that must match the whole module path */
    if (sp->exclude && *sp->exclude && (st = exclude_compile(sp->exclude, &ex))) {
        free(want);
        return st;
    }
    vc_lora *a = lora_new((size_t)c->n_layer * VC_W_COUNT, (size_t)c->n_layer * (N_TARGETS + N_PARAMS) + 1,
                          m->vision ? vc_vision_n_slots(m->vision) : 0);
    if (!a) st = VC_ERR_NOMEM;
    else {
        a->rank = rank;
        a->alpha = sp->alpha;
        a->scale = (float)(sp->alpha / rank);
        a->on = 1;
        if (sp->exclude && *sp->exclude && !(a->exclude = vc_strdup(sp->exclude))) st = VC_ERR_NOMEM;
        if (!st) st = choose(m, a, mask, moe, ex, want, sp->gu_rank, sp->targets);
    }
    onig_free(ex);
    free(want);
    if (!st) {
        a->data = m->be->alloc(sizeof(float) * (size_t)a->n_floats);
        a->grad = a->data ? m->be->alloc(sizeof(float) * (size_t)a->n_floats) : NULL;
        st = a->data && a->grad ? place(m, a, sp->seed)
                                : vc_fail(VC_ERR_NOMEM, "LoRA: cannot allocate %.1f MB of adapters", a->n_floats * 8e-6);
    }
    if (st) {
        vc_lora_free(a, m->be);
        return st;
    }
    m->lora = a;
    return VC_OK;
}

int vc_model_lora_params(vc_model *m, vc_tensor *const **out) {
    vc_lora *a = m ? m->lora : NULL;
    int n = 0;
    for (int i = 0; a && i < 2 * a->n; i++) /* the trained ones (a frozen tower's are not) */
        if (a->t[i].requires_grad) a->ptr[n++] = &a->t[i];
    *out = a ? a->ptr : NULL;
    return n;
}

void vc_lora_freeze_tower(vc_model *m, int frozen) {
    vc_lora *a = m->lora;
    for (int i = 0; a && i < a->n; i++)
        if (a->slot_of[i] >= VC_LORA_TOWER) a->t[2 * i].requires_grad = a->t[2 * i + 1].requires_grad = !frozen;
}

int vc_model_lora_enable(vc_model *m, int on) {
    if (!m || !m->lora) return 0;
    int was = m->lora->on;
    m->lora->on = on;
    return was;
}

int vc_model_has_lora(const vc_model *m) { return m && m->lora != NULL; }

/* the base tensors adapter i changes: its slot's, and up's beside gate's on the experts; returns how many */
static int touched(const vc_lora *a, int i, int slot[2]) {
    slot[0] = a->slot_of[i];
    slot[1] = VC_W_EXP_UP;
    return slot[0] == VC_W_EXP_GATE ? 2 : 1;
}

/* W += sign * scale * B A for every adapter (f32 GEMMs; per expert on the experts), for export */
static vc_status merge(vc_model *m, float sign) {
    vc_lora *a = m->lora;
    int prec = vc_matmul_precision();
    vc_set_matmul_precision(VC_PREC_F32);
    for (int i = 0; i < a->n; i++) {
        int sl[2], np = touched(a, i, sl);
        const vc_tensor *A = &a->t[2 * i], *B = &a->t[2 * i + 1];
        int64_t r = A->shape[A->ndim - 2];
        for (int p = 0; p < np; p++) {
            vc_tensor *W = base_w(m, a->layer_of[i], sl[p]);
            int64_t E = W->ndim == 3 ? W->shape[0] : 1, out = W->shape[W->ndim - 2], in = W->shape[W->ndim - 1];
            int64_t Ea = A->ndim == 3 ? A->shape[0] : 1; /* 1: one adapter for every expert */
            const float *bp = B->data + p * Ea * out * r; /* up's B after gate's */
            for (int64_t e = 0; e < E; e++) {
                int64_t ea = Ea == 1 ? 0 : e;
                m->be->gemm(0, 0, out, in, r, sign * a->scale, bp + ea * out * r, r, A->data + ea * r * in, in, 1.0f,
                            W->data + e * out * in, in);
            }
        }
    }
    vc_set_matmul_precision(prec);
    return m->be->sync();
}

/* runs fn(m, ctx) with the adapters merged into the base weights, which are restored exactly after */
vc_status vc_model_lora_merged(vc_model *m, vc_status (*fn)(vc_model *m, void *ctx), void *ctx) {
    vc_lora *a = m->lora;
    if (!a) return fn(m, ctx);
    float **keep = vc_calloc((size_t)a->n * 2, sizeof *keep); /* [2 i + p]: part p of adapter i's base */
    vc_status st = keep ? VC_OK : VC_ERR_NOMEM;
    for (int i = 0; !st && i < a->n; i++) {
        int sl[2], np = touched(a, i, sl);
        for (int p = 0; !st && p < np; p++) {
            vc_tensor *W = base_w(m, a->layer_of[i], sl[p]);
            if (!(keep[2 * i + p] = vc_malloc(sizeof(float) * (size_t)W->n))) st = VC_ERR_NOMEM;
            else m->be->d2h(keep[2 * i + p], W->data, sizeof(float) * (size_t)W->n);
        }
    }
    int was = a->on;
    a->on = 0; /* the merged weights carry the adapters */
    if (!st) st = merge(m, 1.0f);
    if (!st) st = fn(m, ctx);
    for (int i = 0; keep && i < a->n; i++) {
        int sl[2], np = touched(a, i, sl);
        for (int p = 0; p < np; p++)
            if (keep[2 * i + p]) {
                vc_tensor *W = base_w(m, a->layer_of[i], sl[p]);
                m->be->h2d(W->data, keep[2 * i + p], sizeof(float) * (size_t)W->n);
                free(keep[2 * i + p]);
            }
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

/* a JSON list's strings, comma-separated */
static void names_of(const cJSON *list, char *buf, size_t cap) {
    const cJSON *e;
    *buf = 0;
    if (cJSON_IsArray(list))
        cJSON_ArrayForEach(e, list) if (cJSON_IsString(e))
            snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", *buf ? "," : "", e->valuestring);
}

/* rank_pattern's rank for the experts' gate_up_proj (0: none), whose alpha_pattern must keep alpha / r */
static vc_status gate_up_pattern(const cJSON *j, const char *path, int r, double alpha, int *gu) {
    const cJSON *e, *rp = vc_json_member(j, "rank_pattern"), *ap = vc_json_member(j, "alpha_pattern");
    double a2 = 0;
    *gu = 0;
    if (cJSON_IsObject(rp))
        cJSON_ArrayForEach(e, rp) if (strstr(e->string, "gate_up_proj") && cJSON_IsNumber(e)) *gu = e->valueint;
    if (cJSON_IsObject(ap))
        cJSON_ArrayForEach(e, ap) if (strstr(e->string, "gate_up_proj") && cJSON_IsNumber(e)) a2 = e->valuedouble;
    if (*gu < 0 || *gu > 8192) return vc_fail(VC_ERR_FORMAT, "%s: rank_pattern gate_up_proj = %d", path, *gu);
    double want = alpha / r * (*gu ? *gu : r);
    if (a2 && fabs(a2 - want) > 1e-9 * want)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: alpha_pattern gives gate_up_proj alpha %g: verlc scales every adapter "
                       "by lora_alpha / r, so it must be %g", path, a2, want);
    return VC_OK;
}

/* adapter_config.json's r, lora_alpha, target_modules and target_parameters */
vc_status vc_model_lora_attach_from(vc_model *m, const char *dir) {
    char *p = vc_path_join(dir, "adapter_config.json");
    cJSON *j = NULL;
    vc_status st = p ? vc_json_load_file(p, &j) : VC_ERR_NOMEM;
    int64_t r = 0;
    double alpha = 0;
    char targets[4096] = "", params[512] = "";
    if (!st) st = vc_json_req_int(j, "r", &r, p);
    if (!st) st = vc_json_req_num(j, "lora_alpha", &alpha, p);
    const cJSON *tm = st ? NULL : vc_json_member(j, "target_modules");
    if (tm && cJSON_IsString(tm)) snprintf(targets, sizeof targets, "%s", tm->valuestring);
    else if (tm && cJSON_IsArray(tm)) {
        names_of(tm, targets, sizeof targets);
        if (!*targets) snprintf(targets, sizeof targets, "[]"); /* PEFT: no module (target_parameters only) */
    }
    names_of(st ? NULL : vc_json_member(j, "target_parameters"), params, sizeof params);
    char exclude[1024] = ""; /* PEFT's exclude_modules: a regular expression, or names matched at the end of paths */
    const cJSON *ex = st ? NULL : vc_json_member(j, "exclude_modules");
    if (ex && cJSON_IsString(ex)) snprintf(exclude, sizeof exclude, "%s", ex->valuestring);
    else if (ex && cJSON_IsArray(ex) && cJSON_GetArraySize(ex) > 0) {
        char names[900];
        names_of(ex, names, sizeof names);
        for (char *c = names; *c; c++) *c = *c == ',' ? '|' : *c;
        snprintf(exclude, sizeof exclude, "(.*\\.)?(%s)", names);
    }
    if (!st && r > 4096) st = vc_fail(VC_ERR_FORMAT, "%s: r = %lld", p, (long long)r);
    int gu = 0; /* rank_pattern / alpha_pattern of the experts' gate_up_proj */
    if (!st) st = gate_up_pattern(j, p, (int)r, alpha, &gu);
    vc_lora_spec sp = { (int)r, alpha, *targets ? targets : NULL, *params ? params : NULL, *exclude ? exclude : NULL,
                        0, gu };
    if (!st) st = vc_model_lora_attach(m, &sp);
    if (!st) st = vc_model_lora_load(m, dir);
    cJSON_Delete(j);
    free(p);
    return st;
}
