/* Model accessors: parameters, gradients, the checkpoint mapping. */
#include "model_internal.h"
#include "verlc/vision.h"
#include "verlc/cuda.h"
#include "backend/cpu/cpu.h"
#include "verlc/train.h"
#include "verlc/json.h"
#include <string.h>

const vc_model_config *vc_model_cfg(const vc_model *m) { return &m->cfg; }

int vc_model_mtp_layers(const vc_model *m) {
    cJSON *o = m->config_text ? cJSON_Parse(m->config_text) : NULL;
    static const char *const KEYS[] = { "num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_layers" };
    const cJSON *where[2] = { o, vc_json_member(o, "text_config") };
    int n = 0;
    for (int w = 0; w < 2; w++)
        for (int k = 0; k < 3; k++) {
            const cJSON *v = vc_json_member(where[w], KEYS[k]);
            if (cJSON_IsNumber(v) && v->valuedouble > n && v->valuedouble < 1e6) n = (int)v->valuedouble;
        }
    cJSON_Delete(o);
    return n;
}

vc_status vc_mtp_enable_check(const vc_model *m, const char *dir, const char *key, int say) {
    int n = vc_model_mtp_layers(m);
    if (!n)
        return vc_fail(VC_ERR_ARG, "%s=true: %s/config.json declares no multi-token-prediction layers "
                       "(num_nextn_predict_layers or mtp_num_hidden_layers), as verl requires", key, dir);
    if (say)
        vc_info("%s=true: the checkpoint's %d multi-token-prediction layer%s kept as loaded and copied through on "
                "export (verl's MTP parameters without enable_train, which trains them)", key, n, n == 1 ? " is" : "s are");
    return VC_OK;
}

int64_t vc_model_param_count(const vc_model *m) {
    int64_t n = 0;
    for (int i = 0; i < m->n_params; i++) n += m->params[i].t.n;
    return n;
}

int vc_model_n_params(const vc_model *m) { return m->n_params; }

int64_t vc_model_active_weights(const vc_model *m) {
    const vc_model_config *c = &m->cfg;
    double n = 0;
    for (int i = 0; i < m->n_params; i++) {
        const vc_param *p = &m->params[i];
        int s = p->slot;
        if (!p->decay || vc_slot_is_buffer(s)) continue; /* norms, biases and buffers: not matrices */
        if (s == VC_W_TOK_EMBD || s == VC_W_LM_HEAD || s == VC_W_POS_EMBD || s == VC_W_PLE_EMBD || s == VC_W_SCORE)
            continue; /* lookups, and the heads verl counts as 2 vocab x hidden */
        if ((s == VC_W_EXP_GATE || s == VC_W_EXP_UP || s == VC_W_EXP_DOWN) && c->n_expert > 0)
            n += (double)p->t.n * (double)c->top_k / (double)c->n_expert; /* a token's top-k experts */
        else n += (double)p->t.n;
    }
    return (int64_t)(n + 0.5);
}

vc_tensor *vc_model_param(vc_model *m, int i, const char **name, int *decay) {
    if (i < 0 || i >= m->n_params) return NULL;
    if (name) *name = m->params[i].name;
    if (decay) *decay = m->params[i].decay;
    return &m->params[i].t;
}

vc_status vc_model_enable_grad(vc_model *m) {
    if (m->lora) { /* frozen base: only the adapters have gradients */
        m->be->zero(m->lora->grad, sizeof(float) * (size_t)m->lora->n_floats);
        return VC_OK;
    }
    if (m->compacted)
        return vc_fail(VC_ERR_UNSUPPORTED, "model: its layer weights are sharded (ZeRO-3); full gradient storage "
                       "is not available");
    if (!m->grad_storage) {
        m->grad_storage = m->be->alloc((size_t)(m->n_floats ? m->n_floats : 1) * sizeof(float));
        if (!m->grad_storage)
            return vc_fail(VC_ERR_NOMEM, "cannot allocate %.1f MB of gradients in %s memory", m->n_floats * 4e-6,
                           m->be->name);
        for (int i = 0; i < m->n_params; i++) {
            vc_tensor *t = &m->params[i].t;
            if (vc_slot_is_buffer(m->params[i].slot) || m->params[i].frozen) continue; /* a buffer: not trained */
            t->grad = m->grad_storage + (t->data - m->storage);
            t->requires_grad = 1;
        }
    }
    vc_model_zero_grad(m);
    return VC_OK;
}

vc_status vc_model_freeze_vision(vc_model *m, int frozen) {
    vc_status st = vc_model_load_vision(m);
    if (st) return st;
    for (int i = 0; i < m->n_params; i++) {
        vc_param *p = &m->params[i];
        if (p->slot != VC_SLOT_VISION || p->buffer) continue;
        p->frozen = frozen;
        p->t.requires_grad = !frozen && m->grad_storage;
        p->t.grad = p->t.requires_grad ? m->grad_storage + (p->t.data - m->storage) : NULL;
    }
    vc_lora_freeze_tower(m, frozen); /* its LoRA adapters too (kept, untrained: verl freezes after PEFT) */
    return VC_OK;
}

void vc_model_freeze_mtp(vc_model *m, int frozen) {
    for (int i = 0; i < m->n_params; i++) {
        vc_param *p = &m->params[i];
        if (p->layer <= m->cfg.n_layer) continue; /* (the MTP rows follow the globals' row n_layer) */
        p->frozen = frozen;
        p->t.requires_grad = !frozen && m->grad_storage;
        p->t.grad = p->t.requires_grad ? m->grad_storage + (p->t.data - m->storage) : NULL;
    }
}

/* ZeRO-2 (src/train/dp_zero2.c): no full-size gradient storage; the trainer owns a bucket-sized working
 * area and repoints the trained parameters' grad pointers into it before every backward. */
vc_status vc_model_enable_grad_at(vc_model *m, float *area) {
    if (m->lora && area) return vc_fail(VC_ERR_UNSUPPORTED, "LoRA adapters with ZeRO-2/3: use plain data parallelism or ZeRO-1");
    if (m->grad_storage) m->be->free(m->grad_storage);
    m->grad_storage = NULL;
    for (int i = 0; i < m->n_params; i++) {
        vc_tensor *t = &m->params[i].t;
        if (vc_slot_is_buffer(m->params[i].slot) || m->params[i].frozen) continue; /* as in vc_model_enable_grad */
        t->grad = area;
        t->requires_grad = area != NULL;
    }
    return VC_OK;
}

void vc_model_zero_grad(vc_model *m) {
    if (m->grad_storage) m->be->zero(m->grad_storage, (size_t)m->n_floats * sizeof(float));
    if (m->lora) m->be->zero(m->lora->grad, (size_t)m->lora->n_floats * sizeof(float));
}

const vc_backend *vc_model_backend(const vc_model *m) { return m->be; }

vc_status vc_model_param_read(const vc_model *m, int i, int grad, float *dst) {
    if (i < 0 || i >= m->n_params) return vc_fail(VC_ERR_ARG, "model: no parameter %d", i);
    const vc_param *p = &m->params[i];
    const float *src = grad ? p->t.grad : p->t.data;
    if (!src) return vc_fail(VC_ERR_ARG, "model: parameter %s has no gradient buffer", p->name);
    m->be->d2h(dst, src, (size_t)p->t.n * sizeof(float));
    return m->be->sync();
}

vc_status vc_model_param_read_range(const vc_model *m, int i, size_t offset, size_t n, float *dst) {
    if (i < 0 || i >= m->n_params) return vc_fail(VC_ERR_ARG, "model: no parameter %d", i);
    const vc_param *p = &m->params[i];
    if (offset > (size_t)p->t.n || n > (size_t)p->t.n - offset)
        return vc_fail(VC_ERR_ARG, "model: floats [%zu, %zu) are outside parameter %s (%lld)", offset, offset + n, p->name,
                       (long long)p->t.n);
    m->be->d2h(dst, p->t.data + offset, n * sizeof(float));
    return m->be->sync();
}

vc_status vc_model_param_write(vc_model *m, int i, const float *src) {
    if (i < 0 || i >= m->n_params) return vc_fail(VC_ERR_ARG, "model: no parameter %d", i);
    m->be->h2d(m->params[i].t.data, src, (size_t)m->params[i].t.n * sizeof(float));
    return m->be->sync();
}

void vc_model_set_checkpointing(vc_model *m, int on) { m->checkpointing = on; }

void vc_model_set_layer_hook(vc_model *m, vc_status (*fn)(void *ctx, int layer), void *ctx) {
    m->layer_hook = fn;
    m->layer_hook_ctx = ctx;
}

int vc_model_param_layer(const vc_model *m, int i) { return i >= 0 && i < m->n_params ? m->params[i].layer : -1; }

#define COMPACT_ALIGN 16 /* floats */

vc_status vc_model_compact(vc_model *m, const uint8_t *external) {
    size_t total = 0;
    for (int i = 0; i < m->n_params; i++)
        if (!external[i]) total += ((size_t)m->params[i].t.n + COMPACT_ALIGN - 1) / COMPACT_ALIGN * COMPACT_ALIGN;
    float *st = m->be->alloc((total ? total : 1) * sizeof(float));
    if (!st)
        return vc_fail(VC_ERR_NOMEM, "model: cannot allocate %.1f MB for the unsharded weights in %s memory",
                       total * 4e-6, m->be->name);
    size_t off = 0;
    for (int i = 0; i < m->n_params; i++) {
        vc_tensor *t = &m->params[i].t;
        if (external[i]) {
            t->data = NULL;
            continue;
        }
        m->be->d2d(st + off, t->data, (size_t)t->n * sizeof(float));
        t->data = st + off;
        off += ((size_t)t->n + COMPACT_ALIGN - 1) / COMPACT_ALIGN * COMPACT_ALIGN;
    }
    m->be->free(m->storage);
    m->storage = st;
    m->n_floats = (int64_t)total;
    m->compacted = 1;
    return VC_OK;
}

static const vc_source *find_source(const vc_model *m, const char *hf_name) {
    for (int i = 0; i < m->n_src; i++)
        if (!strcmp(m->src[i].name, hf_name)) return &m->src[i];
    return NULL;
}

vc_status vc_model_hf_grad(const vc_model *m, const char *hf_name, float **out, int64_t *n) {
    *out = NULL;
    if (!m->grad_storage) return vc_fail(VC_ERR_ARG, "gradients are not enabled");
    vc_source tmp;
    const vc_source *s = find_source(m, hf_name);
    if (!s && vc_rule_for_name(m, hf_name, &tmp)) s = &tmp; /* another name of the same slots */
    char alt[320]; /* an image-text model's names of its text decoder (model.language_model.* for model.*) */
    for (const char *const *n = m->cfg.arch->nested; !s && n && n[0]; n += 2) {
        size_t k = strlen(n[1]);
        if (strncmp(hf_name, n[1], k)) continue;
        snprintf(alt, sizeof alt, "%s%s", n[0], hf_name + k);
        if (!(s = find_source(m, alt)) && vc_rule_for_name(m, alt, &tmp)) s = &tmp;
    }
    if (!s && m->vision && (vc_vision_owns(m->vision, hf_name) || strstr(hf_name, "visual.") ||
                            !strncmp(hf_name, "vision_tower.", 13) ||
                            !strncmp(hf_name, "multi_modal_projector.", 22))) /* (Kimi-VL's tower and projector) */
        return vc_vision_hf_grad(m->vision, hf_name, out, n);
    if (!s) return vc_fail(VC_ERR_MISSING, "no model tensor is named '%s'", hf_name);
    vc_tensor *p[VC_RULE_PARTS];
    int np = vc_rule_parts(m, s->rule, s->layer, p);
    int64_t total = 0;
    for (int i = 0; i < np; i++)
        if (!p[i]->grad) return vc_fail(VC_ERR_MISSING, "'%s' has no gradient (a buffer, or not trained)", hf_name);
    for (int i = 0; i < np; i++) total += p[i]->n;
    if (s->rule->transform == VC_TR_EXPERT) total /= p[0]->shape[0];
    float *buf = vc_malloc((size_t)total * 4);
    if (!buf) return VC_ERR_NOMEM;
    vc_status st = vc_rule_transfer(m, s, buf, 2);
    if (!st) st = m->be->sync();
    if (st) {
        free(buf);
        return st;
    }
    *out = buf;
    *n = total;
    return VC_OK;
}

vc_status vc_model_describe(const vc_model *m, FILE *f) {
    const vc_model_config *c = &m->cfg;
    fprintf(f, "model %s: architecture %s (model_type %s), %lld parameters\n", m->dir ? m->dir : "(random)",
            c->arch->name, c->model_type, (long long)vc_model_param_count(m));
    for (int i = 0; i < m->n_src; i++) {
        const vc_source *s = &m->src[i];
        char shape[96] = "";
        for (int d = 0; d < s->ndim; d++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", d ? ", " : "", (long long)s->shape[d]);
        char slots[160] = "";
        int ids[VC_RULE_PARTS], nk = vc_rule_slots(s->rule, ids);
        for (int k = 0; k < nk; k++)
            snprintf(slots + strlen(slots), sizeof slots - strlen(slots), "%s%s", k ? " + " : "", vc_slot_name(ids[k]));
        const char *how = s->rule->transform == VC_TR_SPLIT_ROWS ? " (split rows)"
                          : s->rule->transform == VC_TR_GQA_QKV ? " (per-KV-group q/k/v)"
                          : s->rule->transform == VC_TR_CODEGEN_QKV ? " (4 blocks of q/v/k)"
                          : s->rule->transform == VC_TR_EXPERT ? " (expert slice)"
                          : s->rule->transform == VC_TR_EXPERT_GATE_UP ? " (fused experts)"
                          : s->mxfp4 ? " (gpt-oss experts, MXFP4 dequantized)"
                          : s->fp8 ? " (fp8, block scales applied)"
                          : s->rule->transform == VC_TR_T_GATE_UP || s->rule->transform == VC_TR_T_DOWN ||
                                    s->rule->transform == VC_TR_FLAT_T_DOWN
                              ? " (input-major experts)"
                          : s->rule->transform == VC_TR_FLAT ? " (flat experts)"
                          : s->rule->transform == VC_TR_CONV1D ? " (Conv1D, transposed)"
                          : s->rule->transform == VC_TR_HEAD_SPLIT ? " (per head: q, output gate)"
                          : s->rule->transform == VC_TR_QKVZ || s->rule->transform == VC_TR_BA ? " (per q/k head)"
                          : s->rule->transform >= VC_TR_OAI_GATE_UP ? " (gpt-oss experts)" : "";
        if (s->layer >= 0 && s->expert >= 0)
            fprintf(f, "  %-60s [%s] -> layer %d %s[expert %d]%s\n", s->name, shape, s->layer, slots, s->expert, how);
        else if (s->layer >= 0) fprintf(f, "  %-60s [%s] -> layer %d %s%s\n", s->name, shape, s->layer, slots, how);
        else fprintf(f, "  %-60s [%s] -> %s%s\n", s->name, shape, slots, how);
    }
    for (int i = 0; i < m->n_ignored; i++) fprintf(f, "  ignored: %s\n", m->ignored[i]);
    if (c->tied) fprintf(f, "  lm_head: tied to the token embedding\n");
    return VC_OK;
}

/* the bf16 copies' bytes: every weight matrix at 2 bytes an element */
static size_t matrix_bytes(const vc_model *m) {
    size_t n = 0;
    for (int i = 0; i < m->n_params; i++)
        if (m->params[i].t.ndim >= 2) n += (size_t)m->params[i].t.n * 2;
    return n;
}

/* the backend that keeps bf16 weight copies for m: 1 the GPU, 2 the CPU, 0 none */
static int copies_backend(const vc_model *m) {
    const char *env = getenv("VERLC_CUDA_WEIGHT_COPIES"), *any = getenv("VERLC_WEIGHT_COPIES"); /* 0: off (A/B) */
    if ((any && *any == '0') || vc_matmul_precision() != VC_PREC_BF16 || m->be != vc_be()) return 0;
    if (vc_backend_cuda() && vc_be() == vc_backend_cuda()) return env && *env == '0' ? 0 : 1;
    return vc_be() == vc_backend_cpu() ? 2 : 0;
}

/* copies_backend, less the CPU where the copies would take over half of the memory available (MemAvailable, or
 * VERLC_MEMORY_AVAILABLE): a large model's rollout then rounds in each GEMM as before instead of meeting the
 * out-of-memory killer. Asked when the copies are made; dropping them does not ask again (memory may have changed) */
static int copies_fit(const vc_model *m) {
    int where = copies_backend(m);
    size_t avail = 0;
    if (where == 2 && vc_plan_available(0, &avail) != VC_OK) vc_clear_error(); /* (unknown: 0, no limit) */
    return where == 2 && avail && matrix_bytes(m) > avail / 2 ? 0 : where;
}

size_t vc_model_weight_copies_bytes(const vc_model *m) { return copies_fit(m) ? matrix_bytes(m) : 0; }

static int64_t copies(vc_model *m, int on);
int64_t vc_model_weight_copies(vc_model *m, int on) {
    if (on) vc_qat_hold(m, 1); /* (the copies round the quantized weights) */
    int64_t hits = copies(m, on);
    if (!on) vc_qat_hold(m, 0);
    return hits;
}

static int64_t copies(vc_model *m, int on) {
    int where = on ? copies_fit(m) : copies_backend(m);
    if (!where) return 0;
    if (!on) { /* (the CPU's drop: nothing to do where none were made) */
        int64_t hits = where == 1 ? vc_cuda_bf16_shadow_hits() : vc_cpu_bf16_copies_hits();
        if (where == 1) vc_cuda_bf16_shadow_drop();
        else vc_cpu_bf16_copies_drop();
        return hits;
    }
    int n = m->n_params, k = 0;
    const float **w = vc_malloc((size_t)(n ? n : 1) * sizeof *w);
    int64_t *rc = vc_malloc((size_t)(n ? n : 1) * 2 * sizeof *rc);
    for (int i = 0; w && rc && i < n; i++) {
        const vc_tensor *t = &m->params[i].t;
        if (t->ndim < 2) continue;
        int64_t cols = t->shape[t->ndim - 1], rows = t->n / cols;
        if (k && rc[n + k - 1] == cols && w[k - 1] + rc[k - 1] * cols == t->data) { /* one copy for matrices that lie */
            rc[k - 1] += rows; /* together (gate and up: vc_op_gated_mlp's one operand) */
            continue;
        }
        w[k] = t->data;
        rc[n + k] = cols;
        rc[k++] = rows;
    }
    vc_status st = !w || !rc ? VC_OK
                   : where == 1 ? vc_cuda_bf16_shadow_add(w, rc, rc + n, k)
                                : vc_cpu_bf16_copies_add(w, rc, rc + n, k);
    if (st != VC_OK) vc_clear_error(); /* GEMMs round as before */
    free(w);
    free(rc);
    return 0;
}
