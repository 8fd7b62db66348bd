/* The trainer step: micro-batches, gradient accumulation with mini-batch normalisers, clipping, AdamW. */
#include "trainer_dp.h"
#include "tensor/backend.h"
#include "verlc/data.h"
#include "verlc/ops.h"
#include "verlc/vision.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ALIGN_HOLD 64

void vc_trainer_config_default(vc_trainer_config *c) {
    memset(c, 0, sizeof *c);
    vc_adamw_config_default(&c->adamw);
    c->sched.kind = VC_LR_CONSTANT;
    c->sched.base_lr = c->adamw.lr;
    c->sched.num_cycles = 0.5;
    c->grad_clip = 1.0;
    c->agg = VC_AGG_TOKEN_MEAN;
    c->micro_bs = 1;
    c->temperature = 1.0f;
}

/* n items in order into k contiguous groups whose sizes differ by at most one (ZeRO-3's equal counts;
 * never more than the micro-batch size when k is at least the count it gives) */
static vc_status even_split(size_t n, size_t k, vc_partition *out) {
    if (n < k)
        return vc_fail(VC_ERR_ARG, "ZeRO-3: every rank must run the same number of micro-batches, but %zu "
                       "sequences cannot make %zu (give every rank at least as many sequences)", n, k);
    out->offsets = vc_malloc((k + 1) * sizeof *out->offsets);
    out->items = vc_malloc(n * sizeof *out->items);
    if (!out->offsets || !out->items) {
        vc_partition_free(out);
        return VC_ERR_NOMEM;
    }
    out->n_groups = k;
    out->n_items = n;
    for (size_t g = 0; g <= k; g++) out->offsets[g] = g * n / k;
    for (size_t i = 0; i < n; i++) out->items[i] = (uint32_t)i;
    return VC_OK;
}

/* leading positions of sequence i whose targets carry no loss (a prompt's), at most all but its last */
static int64_t free_rows(const vc_minibatch *b, int i) {
    int64_t a = b->cu_seqlens[i], L = b->cu_seqlens[i + 1] - a, j = 0;
    while (j < L - 1 && b->mask && b->mask[a + j + 1] == 0.0f) j++;
    return b->mask ? j : 0;
}

/* token-budget micro-batches that keep each group (b->group) whole: a group is one item whose tokens are its
 * first sequence's plus what the others add to its shared prompt (lin: a model with linear mixers, which run
 * every member's prompt over its gathered rows: every member's tokens plus the prompt once); 0 (*out untouched)
 * when a group alone is beyond the budget or there are no groups */
static int partition_groups(const vc_minibatch *b, int64_t max_tokens, size_t min_groups, int lin, vc_partition *out,
                            vc_status *st) {
    int n = b->n_seq, nu = 0, ok = 1;
    int *unit = vc_malloc(sizeof(int) * (size_t)n), *first = vc_malloc(sizeof(int) * (size_t)n);
    int64_t *cost = vc_calloc((size_t)n, sizeof(int64_t));
    vc_partition up = { 0 };
    *st = unit && first && cost ? VC_OK : VC_ERR_NOMEM;
    for (int i = 0; !*st && i < n; i++) {
        int u = -1;
        for (int k = 0; b->group[i] >= 0 && k < nu && u < 0; k++)
            if (b->group[first[k]] == b->group[i]) u = k;
        int64_t len = b->cu_seqlens[i + 1] - b->cu_seqlens[i];
        if (u < 0) first[nu] = i, cost[nu] = len, u = nu++;
        else cost[u] += len - (lin ? 0 : free_rows(b, i));
        unit[i] = u;
    }
    for (int k = 0; !*st && lin && k < nu; k++) cost[k] += free_rows(b, first[k]); /* the prompt's own sequence */
    for (int k = 0; !*st && k < nu; k++) ok &= cost[k] <= max_tokens;
    ok &= nu < n;
    if (!*st && ok) *st = vc_micro_batches_by_tokens(cost, (size_t)nu, max_tokens, min_groups, &up);
    if (!*st && ok) {
        out->n_groups = up.n_groups;
        out->n_items = (size_t)n;
        out->offsets = vc_malloc((up.n_groups + 1) * sizeof *out->offsets);
        out->items = vc_malloc((size_t)n * sizeof *out->items);
        if (!out->offsets || !out->items) *st = VC_ERR_NOMEM;
        size_t w = 0;
        for (size_t g = 0; !*st && g < up.n_groups; g++) {
            out->offsets[g] = w;
            for (size_t q = up.offsets[g]; q < up.offsets[g + 1]; q++)
                for (int i = 0; i < n; i++)
                    if (unit[i] == (int)up.items[q]) out->items[w++] = (uint32_t)i;
        }
        if (!*st) out->offsets[up.n_groups] = w;
        if (*st) vc_partition_free(out);
    }
    vc_partition_free(&up);
    free(unit);
    free(first);
    free(cost);
    return !*st && ok;
}

/* micro-batches of b (at least min_groups: ZeRO-3); share: a token budget keeps b's groups whole (2: the model has
 * linear mixers, partition_groups' lin) */
static vc_status partition_min(const vc_minibatch *b, int micro_bs, int64_t max_tokens, size_t min_groups, int share,
                               vc_partition *out) {
    memset(out, 0, sizeof *out);
    if (b->n_seq <= 0) return vc_fail(VC_ERR_ARG, "empty mini-batch");
    vc_status st = VC_OK;
    if (share && b->group && max_tokens > 0 && partition_groups(b, max_tokens, min_groups, share == 2, out, &st))
        return VC_OK;
    if (st) return st;
    if (max_tokens <= 0) {
        if (micro_bs <= 0) return vc_fail(VC_ERR_ARG, "micro batch size must be positive (got %d)", micro_bs);
        size_t n = (size_t)b->n_seq, k = (n + (size_t)micro_bs - 1) / (size_t)micro_bs;
        if (min_groups <= k) return vc_micro_batches_by_count(n, (size_t)micro_bs, out);
        return even_split(n, min_groups, out);
    }
    int64_t *lens = vc_malloc(sizeof *lens * (size_t)b->n_seq);
    if (!lens) return VC_ERR_NOMEM;
    for (int i = 0; i < b->n_seq; i++) lens[i] = b->cu_seqlens[i + 1] - b->cu_seqlens[i];
    st = vc_micro_batches_by_tokens(lens, (size_t)b->n_seq, max_tokens, min_groups, out);
    free(lens);
    return st;
}

/* partition_min's share for the trainer's model */
static int share_mode(const vc_trainer *t) {
    return !t->cfg.share_prefix ? 0 : vc_model_cfg(t->model)->n_linear ? 2 : 1;
}

vc_status vc_train_micro_partition(const vc_minibatch *b, int micro_bs, int64_t max_tokens, vc_partition *out) {
    return partition_min(b, micro_bs, max_tokens, 1, 0, out);
}

static double seq_targets(const vc_minibatch *b, int i) {
    double s = 0;
    for (int64_t k = b->cu_seqlens[i] + 1; k < b->cu_seqlens[i + 1]; k++) s += b->mask ? b->mask[k] : 1.0;
    return s;
}

/* the normalisers of sequences seq[0..n) of b (all of them when seq is NULL) */
static void norm_of(const vc_minibatch *b, const uint32_t *seq, int n, double loss_scale_factor, vc_loss_norm *out) {
    memset(out, 0, sizeof *out);
    double longest = 0;
    for (int i = 0; i < n; i++) {
        double s = seq_targets(b, seq ? (int)seq[i] : i);
        out->n_tokens += s;
        if (s > 0) out->n_seqs += 1;
        if (s > longest) longest = s;
    }
    out->loss_scale_factor = loss_scale_factor > 0 ? loss_scale_factor : longest;
}

void vc_train_loss_norm(const vc_minibatch *b, double loss_scale_factor, vc_loss_norm *n) {
    norm_of(b, NULL, b->n_seq, loss_scale_factor, n);
}

static double group_targets(const vc_minibatch *b, const vc_partition *p, size_t g) {
    vc_loss_norm n;
    norm_of(b, p->items + p->offsets[g], (int)(p->offsets[g + 1] - p->offsets[g]), 1, &n);
    return n.n_tokens;
}

/* cfg.micro_norm (verl b178a3cd's fsdp_sft_trainer): micro-batch gi of this rank's [g0, g0 + gn) normalised by
 * its own counts, its loss divided by gn and by the ranks (FSDP's mean of the gradients, where verlc sums
 * them); with micro_norm_dp_tokens its token count is that of every rank's (gi - g0)-th micro-batch, times
 * the ranks (verl's all-reduced valid tokens times dp_size, then the mean) */
static void micro_norm(const vc_trainer *t, const vc_minibatch *b, const vc_partition *p, size_t g0, size_t gi,
                       size_t gn, vc_loss_norm *n) {
    size_t k = p->offsets[gi];
    norm_of(b, p->items + k, (int)(p->offsets[gi + 1] - k), t->cfg.loss_scale_factor, n);
    double f = (double)gn * t->world;
    if (t->cfg.micro_norm_dp_tokens && t->world > 1) {
        double pooled = 0;
        for (int r = 0; r < t->world; r++) {
            size_t first, count;
            vc_dp_share_of(t, r, p->n_groups, &first, &count);
            if (gi - g0 < count) pooled += group_targets(b, p, first + (gi - g0));
        }
        n->n_tokens = pooled;
    }
    n->n_tokens *= t->cfg.micro_norm_dp_tokens ? (double)gn : f;
    n->n_seqs *= f;
    n->loss_scale_factor *= f;
}

/* The weights of verl's agg_loss (rl/stats.c vc_agg_loss) with the mini-batch's normalisers: the
 * per-sequence terms are linear, so summing micro-batches gives the mini-batch loss. */
vc_status vc_train_token_weights(const float *mask, int64_t count, vc_agg_mode mode, const vc_loss_norm *n,
                                 float *weight) {
    double denom;
    switch (mode) {
    case VC_AGG_TOKEN_MEAN: denom = n->n_tokens; break;
    case VC_AGG_SEQ_MEAN_TOKEN_SUM:
    case VC_AGG_SEQ_MEAN_TOKEN_MEAN: denom = n->n_seqs; break;
    case VC_AGG_SEQ_MEAN_TOKEN_SUM_NORM: denom = n->loss_scale_factor; break;
    case VC_AGG_TOKEN_SUM: denom = 1.0; break;
    default: return vc_fail(VC_ERR_ARG, "invalid loss_agg_mode %d", (int)mode);
    }
    double ms = 0, w = denom != 0 ? 1.0 / denom : 0.0;
    for (int64_t t = 0; t < count; t++) ms += mask[t];
    if (mode == VC_AGG_SEQ_MEAN_TOKEN_MEAN) w = ms > 0 ? w / (ms + 1e-8) : 0.0;
    for (int64_t t = 0; t < count; t++) weight[t] = mask[t] != 0.0f ? (float)(w * mask[t]) : 0.0f;
    return VC_OK;
}

/* ZeRO-2 on more than one rank: no full-size gradient storage; every trained tensor's grad points at a
 * small placeholder until dp_zero2.c packs them into its working area (before each backward) */
static int zero2_on(const vc_trainer_config *cfg) {
    return (cfg->sharding == VC_SHARD_ZERO2 || cfg->sharding == VC_SHARD_ZERO3) && cfg->comm &&
           vc_comm_size(cfg->comm) > 1;
}

static vc_status enable_grads(vc_model *m, const vc_trainer_config *cfg, float **hold) {
    if (!zero2_on(cfg)) return vc_model_enable_grad(m);
    *hold = vc_be()->alloc(sizeof(float) * ALIGN_HOLD);
    if (!*hold) return vc_fail(VC_ERR_NOMEM, "trainer: out of memory");
    return vc_model_enable_grad_at(m, *hold);
}

/* whether an extra parameter is one of the model's LoRA adapters (the critic's value head is not) */
static int is_lora(vc_model *m, const vc_tensor *p) {
    vc_tensor *const *ad = NULL;
    for (int i = 0, n = vc_model_lora_params(m, &ad); i < n; i++)
        if (ad[i] == p) return 1;
    return 0;
}

vc_status vc_trainer_init(vc_trainer *t, vc_model *m, const vc_trainer_config *cfg) {
    memset(t, 0, sizeof *t);
    t->model = m;
    t->cfg = *cfg;
    t->sched_pos = -1;
    if (cfg->micro_norm && cfg->local_batch)
        return vc_fail(VC_ERR_ARG, "trainer: per-micro-batch normalisation needs the global batch (local_batch 0)");
    if (cfg->mtp_train && !vc_model_cfg(m)->n_mtp)
        return vc_fail(VC_ERR_ARG, "trainer: MTP training of a model loaded without MTP layers (vc_model_load_mtp)");
    vc_model_freeze_mtp(m, !cfg->mtp_train); /* (a model's MTP rows otherwise kept as they are) */
    if (cfg->mtp_train && (cfg->share_prefix || cfg->loss_on_hidden || vc_model_has_lora(m) ||
                                   (cfg->comm && cfg->sharding == VC_SHARD_ZERO3)))
        return vc_fail(VC_ERR_UNSUPPORTED, "trainer: training multi-token-prediction layers with %s is not built",
                       cfg->share_prefix ? "shared prompt prefixes (use_prefix_grouper)" : cfg->loss_on_hidden
                       ? "a loss on the hidden states (a critic)" : vc_model_has_lora(m) ? "LoRA" : "ZeRO-3");
    float *hold = NULL;
    vc_status st = enable_grads(m, cfg, &hold);
    if (st) return st;
    vc_model_set_checkpointing(m, cfg->checkpointing);
    int np = vc_model_n_params(m);
    int ne = cfg->extra_params ? cfg->n_extra_params : 0;
    vc_optim_param *op = vc_calloc((size_t)(np + ne) + 1, sizeof *op);
    vc_tensor **tens = vc_calloc((size_t)(np + ne) + 1, sizeof *tens);
    t->grads = vc_calloc((size_t)(np + ne) + 1, sizeof *t->grads);
    t->sizes = vc_calloc((size_t)(np + ne) + 1, sizeof *t->sizes);
    t->g = vc_graph_new();
    if (!op || !tens || !t->grads || !t->sizes || !t->g) {
        st = vc_fail(VC_ERR_NOMEM, "trainer: out of memory");
        goto out;
    }
    for (int i = 0; i < np; i++) {
        int decay = 0;
        vc_tensor *p = vc_model_param(m, i, NULL, &decay);
        if (!p->grad) continue; /* a buffer */
        op[t->n_params] = (vc_optim_param){ p->data, p->grad, (size_t)p->n, cfg->decay_matrices_only ? decay : 1 };
        vc_optim_param *q = &op[t->n_params];
        if (cfg->adamw.muon.on && !vc_model_param_matrix(m, i, cfg->adamw.muon.split_qkv, &q->mats, &q->rows, &q->cols,
                                                         &q->fuse))
            q->mats = 0;
        tens[t->n_params] = p;
        t->grads[t->n_params] = p->grad;
        t->sizes[t->n_params] = (size_t)p->n;
        t->n_params++;
    }
    for (int i = 0; i < ne; i++) {
        vc_tensor *p = cfg->extra_params[i];
        if (!p || !p->grad) {
            st = vc_fail(VC_ERR_ARG, "trainer: extra parameter %d has no gradient buffer", i);
            goto out;
        }
        op[t->n_params] = (vc_optim_param){ p->data, p->grad, (size_t)p->n, 1 };
        if (cfg->adamw.muon.on && is_lora(m, p) && p->ndim >= 2) { /* LoRA's A and B: Muon's (Megatron-Bridge's) */
            vc_optim_param *q = &op[t->n_params];
            q->rows = p->shape[p->ndim - 2];
            q->cols = p->shape[p->ndim - 1];
            q->mats = p->n / (q->rows * q->cols);
        }
        tens[t->n_params] = p;
        t->grads[t->n_params] = p->grad;
        t->sizes[t->n_params] = (size_t)p->n;
        t->n_params++;
    }
    st = vc_dp_init(t, op, tens); /* ZeRO-2: the trained tensors' grad pointers move into its working area */
out:
    free(op);
    free(tens);
    if (st) vc_trainer_free(t);
    if (hold && st) vc_model_enable_grad_at(m, NULL);
    vc_be()->free(hold); /* no tensor points at it any more */
    return st;
}

int vc_trainer_sharding(const vc_trainer *t) { return t->dp ? t->cfg.sharding : VC_SHARD_NONE; }

void vc_trainer_free(vc_trainer *t) {
    if (t->opt.params) vc_adamw_free(&t->opt);
    vc_dp_free(t);
    if (!t->borrowed_g) vc_graph_free(t->g);
    free(t->grads);
    free(t->sizes);
    memset(t, 0, sizeof *t);
}

void vc_trainer_use_graph(vc_trainer *t, vc_graph *g) {
    if (!t->borrowed_g) vc_graph_free(t->g);
    t->g = g;
    t->borrowed_g = 1;
}

/* Buffers of one micro-batch, sized for the largest group. */
typedef struct mb_buf {
    vc_micro_batch mb;
    int64_t *cu, *src, *share;
    int32_t *ids, *target, *group;
    float *mask, *weight, *negw;
    uint32_t *seq;
    int64_t saved; /* the last forward's positions not computed (shared prefixes) */
    const int32_t *route; /* the mini-batch's recorded experts (vc_minibatch.route), or NULL */
    const vc_minibatch *b; /* the mini-batch (its images) */
    /* trained MTP layers: the mini-batch's targets of each depth, the forward's hidden states of each, and the last
     * micro-batch's share of each depth's mean cross-entropy */
    double mtp_n[VC_MTP_MAX], mtp_val[VC_MTP_MAX];
    vc_tensor *mtp_h[VC_MTP_MAX];
} mb_buf;

static void mb_free(mb_buf *m) {
    free(m->cu); free(m->src); free(m->ids); free(m->target); free(m->share); free(m->group);
    free(m->mask); free(m->weight); free(m->negw); free(m->seq);
}

static vc_status mb_alloc(mb_buf *m, const vc_minibatch *b, const vc_partition *p) {
    memset(m, 0, sizeof *m);
    int64_t most = 1;
    for (size_t g = 0; g < p->n_groups; g++) {
        int64_t s = 0;
        for (size_t k = p->offsets[g]; k < p->offsets[g + 1]; k++)
            s += b->cu_seqlens[p->items[k] + 1] - b->cu_seqlens[p->items[k]];
        if (s > most) most = s;
    }
    size_t n = (size_t)most, ns = (size_t)b->n_seq + 1;
    m->cu = vc_malloc(ns * 8); m->seq = vc_malloc(ns * 4); m->share = vc_malloc(ns * 8); m->group = vc_malloc(ns * 4);
    m->src = vc_malloc(n * 8); m->ids = vc_malloc(n * 4); m->target = vc_malloc(n * 4);
    m->mask = vc_malloc(n * 4); m->weight = vc_malloc(n * 4); m->negw = vc_malloc(n * 4);
    if (!m->cu || !m->seq || !m->share || !m->group || !m->src || !m->ids || !m->target || !m->mask || !m->weight || !m->negw) {
        mb_free(m);
        return vc_fail(VC_ERR_NOMEM, "trainer: cannot allocate micro-batch buffers");
    }
    return VC_OK;
}

static vc_status mb_fill(mb_buf *m, const vc_minibatch *b, const vc_partition *p, size_t g, vc_agg_mode mode,
                         const vc_loss_norm *norm) {
    vc_micro_batch *mb = &m->mb;
    int64_t T = 0;
    int ns = 0;
    m->cu[0] = 0;
    for (size_t k = p->offsets[g]; k < p->offsets[g + 1]; k++) {
        uint32_t s = p->items[k];
        int64_t a = b->cu_seqlens[s], L = b->cu_seqlens[s + 1] - a;
        for (int64_t j = 0; j < L; j++) {
            m->ids[T + j] = b->ids[a + j];
            m->src[T + j] = a + j;
            int last = j + 1 >= L;
            m->target[T + j] = last ? -1 : b->ids[a + j + 1];
            m->mask[T + j] = last ? 0.0f : (b->mask ? b->mask[a + j + 1] : 1.0f);
        }
        vc_status st = vc_train_token_weights(m->mask + T, L, mode, norm, m->weight + T);
        if (st) return st;
        for (int64_t j = 0; j < L; j++) m->negw[T + j] = -m->weight[T + j];
        T += L;
        m->share[ns] = free_rows(b, (int)s);
        m->group[ns] = b->group ? b->group[s] : -1;
        m->seq[ns++] = s;
        m->cu[ns] = T;
    }
    *mb = (vc_micro_batch){ (int)g, (int)p->n_groups, ns, m->cu, m->ids, m->target, m->mask, m->weight, m->seq,
                            m->src, T, NULL, NULL, 0 };
    m->route = b->route;
    m->b = b;
    return VC_OK;
}

/* the micro-batch's images (vc_minibatch.images or image_get) and image spans into the forward's batch; 1 when it has
 * any */
static vc_status mb_images(vc_trainer *t, const mb_buf *m, vc_batch *fb, int *any) {
    const vc_minibatch *b = m->b;
    int ns = m->mb.n_seq;
    *any = 0;
    if (!b || (!b->images && !b->image_get) || !vc_model_vision(t->model)) return VC_OK; /* (text: tokens) */
    const vc_images **each = vc_graph_alloc(t->g, sizeof *each * (size_t)ns, 0);
    int64_t *span = vc_graph_alloc(t->g, sizeof *span * (size_t)ns, 0);
    vc_images *im = vc_graph_alloc(t->g, sizeof *im, 0);
    if (!each || !span || !im) return vc_graph_status(t->g);
    for (int i = 0; i < ns; i++) {
        if (!b->images) {
            vc_status st = b->image_get(b->image_ctx, (int)m->seq[i], &each[i]);
            if (st) return st;
        } else each[i] = b->images[m->seq[i]];
        span[i] = b->image_span ? b->image_span[m->seq[i]] : m->mb.cu_seqlens[i + 1] - m->mb.cu_seqlens[i];
    }
    vc_status st = vc_images_gather(t->g, each, ns, im);
    if (st || !im->n) return st;
    fb->images = im;
    fb->image_span = span;
    *any = 1;
    return VC_OK;
}

/* router replay: the forward batch's [n_layer][T][K] experts from the mini-batch's token-major record,
 * each (shared) position from the token it computes */
static vc_status replay_routes(vc_trainer *t, const mb_buf *m, const vc_share *sh, vc_batch *fb) {
    const vc_model_config *c = vc_model_cfg(t->model);
    int64_t L = c->n_layer, K = c->top_k, T = sh->T;
    int32_t *r = vc_graph_alloc(t->g, sizeof(int32_t) * (size_t)(L * T * K + 1), 0);
    if (!r) return vc_graph_status(t->g);
    for (int64_t i = 0; i < T; i++) {
        const int32_t *src = m->route + (size_t)m->mb.src[sh->saved ? sh->rep[i] : i] * (size_t)(L * K);
        for (int64_t l = 0; l < L; l++) memcpy(r + (l * T + i) * K, src + l * K, sizeof(int32_t) * (size_t)K);
    }
    fb->route = r;
    fb->route_mode = VC_ROUTE_REPLAY;
    return VC_OK;
}

/* Forward + loss (+ backward when grad) of one micro-batch; *loss gets its value. */
/* the micro-batch's forward and log-probs (or hidden states): with share_prefix over the shared packing,
 * gathered back to the micro-batch's own */
static vc_status forward_shared(vc_trainer *t, mb_buf *m, vc_tensor **h, vc_tensor **logp, vc_tensor **ent) {
    vc_graph *g = t->g;
    const vc_micro_batch *mb = &m->mb;
    vc_batch batch = { mb->n_seq, mb->cu_seqlens, mb->ids, NULL }, imgs = { 0 };
    m->saved = 0;
    vc_share sh;
    int any = 0;
    vc_status st = mb_images(t, m, &imgs, &any); /* (a prompt's image features are computed with it: unshared) */
    if (!st) st = vc_share_plan(g, &batch, t->cfg.share_prefix && !any ? m->group : NULL, m->share, 2, &sh);
    const int32_t *tg = mb->target;
    int32_t *tg2 = sh.saved ? vc_graph_alloc(g, sizeof(int32_t) * (size_t)(sh.T ? sh.T : 1), 0) : NULL;
    if (!st && sh.saved && !tg2) st = vc_graph_status(g);
    for (int64_t i = 0; !st && tg2 && i < sh.T; i++) tg2[i] = tg[sh.rep[i]];
    if (tg2) tg = tg2;
    /* the batch outlives this call: checkpointed layers read it again in backward */
    vc_batch *fb = st ? NULL : vc_graph_alloc(g, sizeof *fb, 0);
    if (!st && !fb) st = vc_graph_status(g);
    if (fb) *fb = sh.b;
    if (fb && any) fb->images = imgs.images, fb->image_span = imgs.image_span;
    if (fb && m->route) st = replay_routes(t, m, &sh, fb);
    if (fb && t->cfg.mtp_train && vc_graph_grad_enabled(g)) { /* (their loss: mb_run) */
        fb->mtp_out = m->mtp_h;
        fb->mtp_detach = t->cfg.mtp_detach;
    }
    if (!st && !(*h = vc_model_forward(t->model, g, fb, NULL)))
        st = vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_INTERNAL;
    /* the LM head skips each sequence's leading positions whose targets carry no loss (a prompt's) */
    uint8_t *need = st || t->cfg.loss_on_hidden ? NULL : vc_graph_alloc(g, (size_t)(sh.T ? sh.T : 1), 0);
    for (int s = 0; need && s < mb->n_seq; s++)
        for (int64_t p = mb->cu_seqlens[s]; p < mb->cu_seqlens[s + 1]; p++)
            need[sh.saved ? sh.back_host[p] : p] = p - mb->cu_seqlens[s] >= m->share[s];
    if (!st && t->cfg.loss_on_hidden) *logp = *h;
    else if (!st)
        st = vc_model_logprobs_rows(t->model, g, *h, tg, t->cfg.temperature, need, logp,
                                    t->cfg.need_entropy ? ent : NULL, NULL);
    m->saved = sh.saved;
    if (!st) { /* the hidden states, for a callback's own losses */
        m->mb.hidden = *h;
        m->mb.hidden_pos = sh.saved ? sh.back_host : NULL;
        m->mb.hidden_rows = sh.T;
    }
    if (st || !sh.saved) return st;
    *logp = vc_op_gather_rows(g, *logp, sh.T, sh.back, mb->n_tokens);
    if (*ent) *ent = vc_op_gather_rows(g, *ent, sh.T, sh.back, mb->n_tokens);
    int ok = *logp && (!t->cfg.need_entropy || t->cfg.loss_on_hidden || *ent);
    return ok ? VC_OK : vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_NOMEM;
}

static vc_status mb_run(vc_trainer *t, mb_buf *m, vc_token_loss_fn fn, void *ctx, int grad, double *loss) {
    vc_graph *g = t->g;
    const vc_micro_batch *mb = &m->mb;
    vc_graph_reset(g);
    vc_graph_set_grad(g, grad);
    vc_tensor *h = NULL, *logp = NULL, *ent = NULL, *L = NULL;
    if (t->cfg.loss_on_hidden && !fn) return vc_fail(VC_ERR_ARG, "trainer: loss_on_hidden needs a loss callback");
    vc_status st = forward_shared(t, m, &h, &logp, &ent);
    if (!st) st = fn ? fn(ctx, g, mb, logp, ent, &L) : ((L = vc_op_dot_const(g, logp, m->negw)) ? VC_OK
                                                                                                 : vc_graph_status(g));
    if (!st && !L) st = vc_fail(VC_ERR_INTERNAL, "loss callback returned no tensor");
    float lv = 0; /* the loss lives in backend memory */
    if (!st) st = vc_tensor_read(L, &lv);
    if (st) return st;
    *loss = lv;
    if (t->cfg.mtp_train && grad && (st = vc_mtp_loss(t, g, mb, m->mtp_h, m->mtp_n, &L, m->mtp_val)))
        return st;
    /* scale-out hook: the last micro-batch's gradient buckets are reduced while backward runs; ZeRO-2:
     * every micro-batch's, into the shard, chunk by chunk as backward finishes them (dp_zero2.c) */
    int overlap = grad && t->dp && t->dp->armed, z2 = grad && t->dp && t->dp->zero2;
    if (overlap && (st = vc_dp_overlap_begin(t))) return st;
    if (z2 && (st = vc_dp_zero2_begin(t, t->dp->z2_local))) return st;
    if (z2 && t->dp->zero3) st = vc_dp_zero3_begin(t); /* layers gathered again before their nodes */
    /* ZeRO-3 issues its gathers also where the loss is not finite: every rank the same collectives */
    if (!st && grad && (isfinite(*loss) || (z2 && t->dp->zero3))) st = vc_graph_backward(g, L, 1.0f);
    if (z2 && t->dp->zero3) vc_dp_zero3_end(t);
    if (!st) st = vc_graph_status(g);
    if (overlap || z2) {
        vc_status e = overlap ? vc_dp_overlap_end(t) : vc_dp_zero2_end(t);
        if (!st) st = e;
    }
    return st;
}

/* ZeRO-2 rounds of this step (VC_DP_STEP): the most micro-batches of any rank; use_dp 0 (the memory
 * plan's trial) runs locally; plain accumulation without a step is not possible (nowhere to keep the
 * unreduced gradients) */
static vc_status zero2_rounds(vc_trainer *t, int use_dp, const vc_partition *p, size_t gn, double *rounds) {
    *rounds = (double)gn;
    if (!t->dp || !t->dp->zero2) return VC_OK;
    t->dp->z2_local = !use_dp;
    if (!use_dp) return VC_OK;
    if (use_dp != VC_DP_STEP)
        return vc_fail(VC_ERR_UNSUPPORTED, "trainer: with ZeRO-2 gradients are reduced during backward; "
                       "vc_trainer_accumulate cannot keep them (use vc_trainer_step, or zero1)");
    if (!t->cfg.local_batch) {
        *rounds = (double)((p->n_groups + (size_t)t->world - 1) / (size_t)t->world);
        return VC_OK;
    }
    return vc_dp_max(t, rounds);
}

/* ZeRO-3: every rank runs the same number of micro-batches (each one's layer gathers are collectives).
 * A global partition needs a multiple of the ranks; local partitions must agree. Partitions are redone
 * with more, smaller groups until they do (verl's same_micro_num_in_dp): token budgets with a higher
 * minimum count, fixed sizes as an even split. The loss is normalised over the mini-batch, so only the
 * float rounding of the sums changes. A rank with too few sequences fails every rank. */
static vc_status zero3_equal(vc_trainer *t, const vc_minibatch *b, vc_partition *p) {
    int local = t->cfg.local_batch;
    for (int tries = 0;; tries++) {
        double hi = (double)p->n_groups, lo = -(double)p->n_groups;
        vc_status st = local ? vc_dp_max(t, &hi) : VC_OK;
        if (!st && local) st = vc_dp_max(t, &lo);
        if (st) return st;
        size_t want = local ? (size_t)hi : (p->n_groups + (size_t)t->world - 1) / (size_t)t->world * (size_t)t->world;
        if (local ? -lo == hi : want == p->n_groups) return VC_OK;
        if (tries >= 8 || (local && lo == 0)) /* a rank with none (or too few sequences) cannot match */
            return vc_fail(VC_ERR_ARG, "ZeRO-3: every rank must run the same number of micro-batches, but %s (give "
                           "every rank at least %zu sequences)", local ? "the ranks' counts differ" :
                           "the mini-batch's micro-batches cannot be spread evenly", want);
        vc_partition q;
        st = partition_min(b, t->cfg.micro_bs, t->cfg.max_tokens, want, share_mode(t), &q);
        if (st && !local) return st;
        vc_partition_free(p);
        if (st) { /* the others must learn it: a count they cannot match */
            vc_clear_error();
            memset(p, 0, sizeof *p);
        } else *p = q;
    }
}

/* Each rank's own rows under a token budget (local_batch): as many micro-batches on every rank as on the one needing
 * the most, as verl's rearrange_micro_batches makes them (same_micro_num_in_dp; a rank with fewer rows than that count
 * keeps one a row) */
static vc_status same_micro_count(vc_trainer *t, const vc_minibatch *b, int empty, vc_partition *p) {
    double k = empty ? 0 : (double)p->n_groups;
    vc_status st = vc_dp_max(t, &k);
    size_t want = k < (double)b->n_seq ? (size_t)k : (size_t)b->n_seq;
    if (st || empty || want <= p->n_groups) return st;
    vc_partition_free(p);
    return partition_min(b, t->cfg.micro_bs, t->cfg.max_tokens, want, share_mode(t), p);
}

vc_status vc_trainer_accumulate_ex(vc_trainer *t, const vc_minibatch *b, vc_token_loss_fn fn, void *ctx,
                                   vc_step_stats *stats, int use_dp) {
    vc_partition p;
    vc_loss_norm norm;
    mb_buf m;
    memset(stats, 0, sizeof *stats);
    double t0 = vc_now();
    int local = !use_dp || !t->dp || t->cfg.local_batch;
    /* local mode: a rank may hold no sequence of the global mini-batch */
    int empty = use_dp && t->dp && t->cfg.local_batch && b->n_seq == 0;
    vc_status st = empty ? VC_OK : partition_min(b, t->cfg.micro_bs, t->cfg.max_tokens, 1, share_mode(t), &p);
    if (st) return st;
    if (empty) memset(&p, 0, sizeof p);
    if (empty) memset(&norm, 0, sizeof norm);
    else vc_train_loss_norm(b, t->cfg.loss_scale_factor, &norm);
    if (use_dp && t->dp && t->cfg.local_batch && (st = vc_dp_reduce_norm(t, &norm, t->cfg.loss_scale_factor > 0)))
        goto out_p;
    int n_mtp = stats->n_mtp = t->cfg.mtp_train ? vc_model_cfg(t->model)->n_mtp : 0;
    double mtp_n[VC_MTP_MAX] = { 0 };
    if (n_mtp && (st = vc_mtp_counts(t, b, use_dp, mtp_n))) goto out_p;
    int z3 = t->dp && t->dp->zero3; /* (zero3_equal makes the counts equal itself, or fails) */
    if (!z3 && use_dp && t->dp && t->cfg.local_batch && t->cfg.max_tokens > 0 &&
        (st = same_micro_count(t, b, empty, &p)))
        goto out_p;
    if (z3 && use_dp && (st = zero3_equal(t, b, &p))) goto out_p;
    size_t g0 = 0, gn = p.n_groups;
    if (!local) vc_dp_share(t, p.n_groups, &g0, &gn);
    double rounds = 0; /* ZeRO-2: micro-batches of the busiest rank; this one reduces zeros for the rest */
    if ((st = zero2_rounds(t, use_dp, &p, gn, &rounds))) goto out_p;
    if (gn && (st = mb_alloc(&m, b, &p))) goto out_p;
    if (gn) memcpy(m.mtp_n, mtp_n, sizeof mtp_n);
    int overlap = use_dp == VC_DP_STEP && t->dp && !t->dp->zero2 && t->cfg.overlap_grad_reduce;
    if (!z3) vc_model_weight_copies(t->model, 1); /* the weights do not change before the optimiser step */
    vc_dp_zero3_active(t, 1); /* (ZeRO-3: they move between slots) */
    for (size_t gi = g0; gi < g0 + gn && !st; gi++) {
        double l = 0;
        if (overlap) t->dp->armed = gi + 1 == g0 + gn; /* scale-out hook: reduce during the last backward */
        vc_loss_norm own;
        if (t->cfg.micro_norm) micro_norm(t, b, &p, g0, gi, gn, &own);
        st = mb_fill(&m, b, &p, gi, t->cfg.agg, t->cfg.micro_norm ? &own : &norm);
        if (!st) st = mb_run(t, &m, fn, ctx, 1, &l);
        stats->loss += l;
        for (int k = 0; !st && k < n_mtp; k++) stats->mtp_loss[k] += m.mtp_val[k];
        stats->n_tokens += m.mb.n_tokens;
        stats->n_shared += m.saved;
    }
    vc_dp_zero3_active(t, 0);
    if (!z3) vc_model_weight_copies(t->model, 0);
    if (overlap) t->dp->armed = 0;
    if (overlap && !st && !gn) st = vc_dp_reduce_all(t); /* no backward here: reduce where the others do */
    for (size_t r = gn; use_dp && t->dp && t->dp->zero2 && !st && r < (size_t)rounds; r++)
        st = vc_dp_zero2_empty_round(t);
    stats->n_micro = (int)gn;
    stats->n_loss_tokens = (int64_t)norm.n_tokens;
    stats->seconds = vc_now() - t0;
    vc_graph_reset(t->g);
    if (gn) mb_free(&m);
out_p:
    vc_partition_free(&p);
    return st;
}

vc_status vc_trainer_accumulate(vc_trainer *t, const vc_minibatch *b, vc_token_loss_fn fn, void *ctx,
                                vc_step_stats *stats) {
    return vc_trainer_accumulate_ex(t, b, fn, ctx, stats, 1);
}

/* Data-parallel step: global loss and counts, then the reduced update (every rank, same bits). */
static vc_status dp_step(vc_trainer *t, vc_step_stats *st) {
    double sums[3 + VC_MTP_MAX] = { st->loss, (double)st->n_tokens, (double)st->n_micro };
    memcpy(sums + 3, st->mtp_loss, sizeof st->mtp_loss);
    vc_status s = vc_dp_sum(t, sums, 3 + (size_t)st->n_mtp);
    if (s) return s;
    st->loss = sums[0];
    st->n_tokens = (int64_t)sums[1];
    st->n_micro = (int)sums[2];
    memcpy(st->mtp_loss, sums + 3, sizeof st->mtp_loss);
    if ((s = vc_dp_update(t, st))) return s;
    t->step++;
    if (t->cfg.check_every > 0 && t->step % t->cfg.check_every == 0) s = vc_dp_check_weights(t);
    return s;
}

vc_status vc_trainer_step(vc_trainer *t, const vc_minibatch *b, vc_token_loss_fn fn, void *ctx, vc_step_stats *st) {
    double t0 = vc_now();
    vc_model_zero_grad(t->model);
    for (int i = 0; t->cfg.extra_params && i < t->cfg.n_extra_params; i++)
        vc_be()->zero(t->cfg.extra_params[i]->grad, sizeof(float) * (size_t)t->cfg.extra_params[i]->n);
    if (t->dp) t->dp->reduced = 0;
    vc_dp_zero2_step_start(t);
    int64_t g0 = vc_dp_zero3_gathers(t);
    vc_status s = vc_trainer_accumulate_ex(t, b, fn, ctx, st, VC_DP_STEP);
    if (!s) s = vc_be()->sync(); /* a backend fault in backward (a CPU op without scratch memory) stops the step */
    if (s) return s;
    st->n_gathers = vc_dp_zero3_gathers(t) - g0;
    st->lr = vc_lr_at(&t->cfg.sched, t->sched_pos >= 0 ? t->sched_pos : t->step);
    if (t->dp) {
        s = dp_step(t, st);
        st->seconds = vc_now() - t0;
        return s;
    }
    /* clipping's factor read by the AdamW step as it reads each gradient (the same bits as scaling them in place, a
     * pass over the gradients fewer); Muon's step does not read it: the gradients scaled first */
    double coef = 1.0;
    int finite = vc_clip_grad_coef(t->grads, t->sizes, (size_t)t->n_params, t->cfg.grad_clip, &st->grad_norm, &coef);
    if (finite && coef < 1.0 && t->opt.muon) vc_grads_scale(t->grads, t->sizes, (size_t)t->n_params, (float)coef);
    else if (finite && coef < 1.0) t->opt.cfg.grad_scale = (float)coef;
    if (!finite || !isfinite(st->loss)) {
        st->skipped = 1;
        t->n_skipped++;
    } else if ((s = vc_adamw_step(&t->opt, st->lr))) {
        t->opt.cfg.grad_scale = 0;
        return s;
    }
    t->opt.cfg.grad_scale = 0;
    t->step++;
    st->seconds = vc_now() - t0;
    return VC_OK;
}

/* one micro-batch's log-probs read back, each sequence's masked NLL and target count added at its index in b */
static vc_status seq_nll_run(vc_trainer *t, mb_buf *m, double *nll, double *tok) {
    vc_graph_reset(t->g);
    vc_graph_set_grad(t->g, 0);
    vc_tensor *h = NULL, *logp = NULL, *ent = NULL;
    vc_status st = forward_shared(t, m, &h, &logp, &ent);
    float *lp = st ? NULL : vc_malloc(sizeof(float) * (size_t)(m->mb.n_tokens + 1));
    if (!st && !lp) st = VC_ERR_NOMEM;
    if (!st) st = vc_tensor_read(logp, lp);
    for (int s = 0; !st && s < m->mb.n_seq; s++)
        for (int64_t k = m->mb.cu_seqlens[s]; k < m->mb.cu_seqlens[s + 1]; k++)
            if (m->mask[k] != 0.0f) nll[m->seq[s]] -= (double)m->mask[k] * lp[k], tok[m->seq[s]] += m->mask[k];
    free(lp);
    return st;
}

/* the NLL of b without gradients: summed (nll_sum, n_tok), or per sequence (seq_nll, seq_tok: global mode) */
static vc_status eval_run(vc_trainer *t, const vc_minibatch *b, double *nll_sum, double *n_tok, double *seq_nll,
                          double *seq_tok) {
    vc_partition p;
    vc_loss_norm norm;
    mb_buf m;
    *nll_sum = *n_tok = 0;
    int empty = t->dp && t->cfg.local_batch && b->n_seq == 0;
    if (seq_nll && (t->cfg.local_batch || t->cfg.loss_on_hidden))
        return vc_fail(VC_ERR_ARG, "trainer: per-sequence NLL needs the global batch and the LM head");
    vc_status st = empty ? VC_OK : vc_train_micro_partition(b, t->cfg.micro_bs, t->cfg.max_tokens, &p);
    if (st) return st;
    if (empty) memset(&p, 0, sizeof p);
    else vc_train_loss_norm(b, 0, &norm);
    /* token-sum weights: n_tokens = 1 turns token-mean into a plain sum */
    norm.n_tokens = 1;
    size_t g0 = 0, gn = p.n_groups;
    vc_dp_share(t, p.n_groups, &g0, &gn);
    if ((st = vc_trainer_full_weights(t, 1))) goto out_p; /* ZeRO-3: ranks may run different counts here */
    int z3 = t->dp && t->dp->zero3;
    if (!z3) vc_model_weight_copies(t->model, 1); /* (as a step's forward reads them: bf16 copies, QAT's weights) */
    if (gn && (st = mb_alloc(&m, b, &p))) goto out_full;
    for (size_t gi = g0; gi < g0 + gn && !st; gi++) {
        double l = 0;
        st = mb_fill(&m, b, &p, gi, VC_AGG_TOKEN_MEAN, &norm);
        if (!st && seq_nll) st = seq_nll_run(t, &m, seq_nll, seq_tok);
        else if (!st) st = mb_run(t, &m, NULL, NULL, 0, &l);
        *nll_sum += l;
        for (int64_t k = 0; k < m.mb.n_tokens; k++) *n_tok += m.mask[k];
    }
    vc_graph_reset(t->g);
    if (gn) mb_free(&m);
out_full:
    if (!z3) vc_model_weight_copies(t->model, 0);
    if (!st) st = vc_trainer_full_weights(t, 0);
    else vc_trainer_full_weights(t, 0);
    if (!st && t->dp && seq_nll) { /* the others' sequences are zeros here: the sums are exact */
        if (!(st = vc_dp_sum(t, seq_nll, (size_t)b->n_seq))) st = vc_dp_sum(t, seq_tok, (size_t)b->n_seq);
    } else if (!st && t->dp) {
        double s[2] = { *nll_sum, *n_tok };
        st = vc_dp_sum(t, s, 2);
        *nll_sum = s[0];
        *n_tok = s[1];
    }
out_p:
    vc_partition_free(&p);
    return st;
}

vc_status vc_trainer_eval_nll(vc_trainer *t, const vc_minibatch *b, double *nll_sum, double *n_tok) {
    return eval_run(t, b, nll_sum, n_tok, NULL, NULL);
}

vc_status vc_trainer_eval_seq_nll(vc_trainer *t, const vc_minibatch *b, double *nll, double *tok) {
    double s, n;
    memset(nll, 0, sizeof *nll * (size_t)b->n_seq);
    memset(tok, 0, sizeof *tok * (size_t)b->n_seq);
    return eval_run(t, b, &s, &n, nll, tok);
}
