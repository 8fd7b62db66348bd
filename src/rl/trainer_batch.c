/* The trainer's rollout batch and the no-grad passes over it: old / reference log-probs and critic
 * values, computed over packed micro-batches of whole sequences (prompt + response). The log-prob of
 * response token j is read at packed position plen - 1 + j (the position that predicts it). */
#include "rl_internal.h"
#include "core/vmath.h"
#include "verlc/ops.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

vc_status rl_batch_alloc(rl_batch *b, int B, int T, int64_t n_tokens) {
    memset(b, 0, sizeof *b);
    b->B = B;
    b->T = T > 0 ? T : 1;
    size_t bt = (size_t)B * (size_t)b->T;
    b->cu = vc_calloc((size_t)B + 1, sizeof(int64_t));
    b->ids = vc_calloc((size_t)n_tokens + 1, sizeof(int32_t));
    b->plen = vc_calloc((size_t)B, sizeof(int64_t));
    b->rlen = vc_calloc((size_t)B, sizeof(int64_t));
    b->prompt = vc_calloc((size_t)B, sizeof(int));
    b->uid = vc_calloc((size_t)B, sizeof(char *));
    b->finish = vc_calloc((size_t)B, sizeof(int));
    b->turns = vc_calloc((size_t)B + 1, sizeof(int));
    b->text = vc_calloc((size_t)B, sizeof(char *));
    b->info = vc_calloc((size_t)B + 1, sizeof(char *));
    b->score = vc_calloc((size_t)B, sizeof(float));
    float **f[] = { &b->mask, &b->rollout_logp, &b->old_logp, &b->ref_logp, &b->values,
                    &b->token_scores, &b->rewards, &b->adv, &b->ret, &b->is_w, &b->sum_pi_sq, &b->teacher_logp };
    int ok = b->cu && b->ids && b->plen && b->rlen && b->prompt && b->uid && b->finish && b->turns && b->text && b->info &&
             b->score;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) ok &= (*f[i] = vc_calloc(bt, sizeof(float))) != NULL;
    if (!ok) {
        rl_batch_free(b);
        return VC_ERR_NOMEM;
    }
    return VC_OK;
}

void rl_batch_arrays(const rl_batch *b, float *out[RL_BATCH_ARRAYS]) {
    float *f[RL_BATCH_ARRAYS] = { b->mask, b->rollout_logp, b->old_logp, b->ref_logp, b->values,
                                  b->token_scores, b->rewards, b->adv, b->ret, b->is_w, b->sum_pi_sq, b->teacher_logp };
    memcpy(out, f, sizeof f);
}

void rl_batch_free(rl_batch *b) {
    for (int i = 0; b->uid && i < b->B; i++) free(b->uid[i]);
    for (int i = 0; b->text && i < b->B; i++) free(b->text[i]);
    for (int i = 0; b->info && i < b->B; i++) free(b->info[i]);
    free(b->info);
    free(b->uid);
    free(b->text);
    free(b->cu);
    free(b->ids);
    free(b->plen);
    free(b->rlen);
    free(b->prompt);
    free(b->finish);
    free(b->turns);
    free(b->score);
    float *f[RL_BATCH_ARRAYS];
    rl_batch_arrays(b, f);
    for (size_t i = 0; i < RL_BATCH_ARRAYS; i++) free(f[i]);
    for (int i = 0; b->rimg && i < b->B; i++)
        free((void *)b->rimg[i].grid), free((void *)b->rimg[i].pixels), free((void *)b->rimg[i].t_scale);
    free(b->rimg);
    free(b->rspan);
    free(b->route);
    free(b->tk_ids);
    free(b->tk_lp);
    memset(b, 0, sizeof *b);
}

vc_status rl_batch_topk_alloc(rl_batch *b, int k) {
    size_t n = (size_t)b->B * (size_t)b->T * (size_t)k + 1;
    free(b->tk_ids);
    free(b->tk_lp);
    b->tk_k = k;
    b->tk_ids = vc_calloc(n, sizeof(int32_t));
    b->tk_lp = vc_calloc(n, sizeof(float));
    return b->tk_ids && b->tk_lp ? VC_OK : vc_fail(VC_ERR_NOMEM, "distillation: top-%d of %d x %d positions", k, b->B, b->T);
}

vc_status rl_batch_route_alloc(rl_batch *b, int64_t route_lk) {
    free(b->route);
    b->route_lk = route_lk;
    b->route = vc_malloc(sizeof(int32_t) * (size_t)(b->cu[b->B] * route_lk + 1));
    return b->route ? VC_OK : vc_fail(VC_ERR_NOMEM, "router replay: %lld tokens x %lld experts", (long long)b->cu[b->B],
                                      (long long)route_lk);
}

/* Packs rows[0..n) into a vc_batch in the graph's arena with next-token targets on response
 * positions (-1 elsewhere). */
vc_status rl_mb_build(vc_graph *g, const rl_batch *b, const int *rows, int n, rl_mb *mb) {
    memset(mb, 0, sizeof *mb);
    int64_t tot = 0;
    for (int i = 0; i < n; i++) tot += b->cu[rows[i] + 1] - b->cu[rows[i]];
    mb->cu = vc_graph_alloc(g, sizeof(int64_t) * (size_t)(n + 1), 1);
    mb->ids = vc_graph_alloc(g, sizeof(int32_t) * (size_t)tot, 0);
    mb->tgt = vc_graph_alloc(g, sizeof(int32_t) * (size_t)tot, 0);
    if (!mb->cu || !mb->ids || !mb->tgt) return vc_fail(VC_ERR_NOMEM, "micro-batch of %lld tokens", (long long)tot);
    for (int i = 0; i < n; i++) {
        int r = rows[i];
        int64_t len = b->cu[r + 1] - b->cu[r], o = mb->cu[i];
        memcpy(mb->ids + o, b->ids + b->cu[r], sizeof(int32_t) * (size_t)len);
        for (int64_t t = 0; t < len; t++) mb->tgt[o + t] = -1;
        for (int64_t j = 0; j < b->rlen[r]; j++) mb->tgt[o + b->plen[r] - 1 + j] = b->ids[b->cu[r] + b->plen[r] + j];
        mb->cu[i + 1] = o + len;
    }
    mb->rows = rows;
    mb->n = n;
    mb->batch = (vc_batch){ n, mb->cu, mb->ids };
    return rl_images_of_rows(g, b, rows, n, &mb->batch);
}

/* token values src (packed) -> dst rows [n, T] in the micro-batch's row order (dst row i <- rows[i]),
 * or, with to_batch, straight into the [B,T] batch array. */
void rl_mb_gather(const rl_batch *b, const rl_mb *mb, const float *src, float *dst, int to_batch) {
    for (int i = 0; i < mb->n; i++) {
        int r = mb->rows[i];
        float *d = dst + (size_t)(to_batch ? r : i) * b->T;
        const float *s = src + mb->cu[i] + b->plen[r] - 1;
        for (int64_t j = 0; j < b->T; j++) d[j] = j < b->rlen[r] ? s[j] : 0.0f;
    }
}

/* [n, T] row weights -> packed token weights (arena) */
float *rl_mb_scatter(vc_graph *g, const rl_batch *b, const rl_mb *mb, const float *w) {
    float *out = vc_graph_alloc(g, sizeof(float) * (size_t)mb->cu[mb->n], 1);
    if (!out) return NULL;
    for (int i = 0; i < mb->n; i++) {
        int r = mb->rows[i];
        for (int64_t j = 0; j < b->rlen[r]; j++) out[mb->cu[i] + b->plen[r] - 1 + j] = w[(size_t)i * b->T + j];
    }
    return out;
}

/* Consecutive groups of rows whose packed length stays within max_tokens (at least one row each). */
int rl_split_rows(const rl_batch *b, const int *rows, int n, int64_t max_tokens, int max_rows, int *starts) {
    int k = 0;
    int64_t acc = 0;
    int cnt = 0;
    for (int i = 0; i < n; i++) {
        int64_t len = b->cu[rows[i] + 1] - b->cu[rows[i]];
        if (i == 0 || (max_tokens > 0 && acc + len > max_tokens) || (max_rows > 0 && cnt >= max_rows)) {
            starts[k++] = i;
            acc = 0;
            cnt = 0;
        }
        acc += len;
        cnt++;
    }
    starts[k] = n;
    return k;
}

/* With shared prompts: consecutive rows of one uid stay in one forward where the group fits, and a row
 * after its group's first in that forward counts only the tokens it adds (its prompt is computed once). lin: a model
 * with linear mixers, which run every row's prompt over its gathered rows: rows count in full, and a group's prompt
 * once more for its own sequence. */
static int split_rows_shared(const rl_batch *b, const int *rows, int n, int64_t max_tokens, int lin, int *starts) {
    int k = 0;
    int64_t acc = 0;
    for (int i = 0; i < n;) {
        int e = i + 1;
        int64_t cost = b->cu[rows[i] + 1] - b->cu[rows[i]] + (lin ? b->plen[rows[i]] - 1 : 0);
        while (e < n && b->uid && b->uid[rows[e]] && b->uid[rows[i]] && !strcmp(b->uid[rows[e]], b->uid[rows[i]])) {
            cost += b->cu[rows[e] + 1] - b->cu[rows[e]] - (lin ? 0 : b->plen[rows[e]] - 1);
            e++;
        }
        if (max_tokens > 0 && cost > max_tokens) { /* a group beyond the budget: its rows by the budget alone */
            int first = 1;
            for (int r = i; r < e; r++) {
                int64_t len = b->cu[rows[r] + 1] - b->cu[rows[r]], pl = b->plen[rows[r]] - 1;
                int64_t add = lin ? (first ? len + pl : len) : first ? len : len - pl;
                if (r == i || acc + add > max_tokens) starts[k++] = r, acc = 0, add = lin ? len + pl : len;
                acc += add;
                first = 0;
            }
        } else {
            if (i == 0 || (max_tokens > 0 && acc + cost > max_tokens)) starts[k++] = i, acc = 0;
            acc += cost;
        }
        i = e;
    }
    starts[k] = n;
    return k;
}

/* fn over packed micro-batches of the rows `only` lists (NULL: every row), in order */
static vc_status pass_rows_of(vc_model *m, vc_graph *g, rl_batch *b, const int *only, int n_only, int64_t max_tokens,
                              int share, void *ctx, vc_status (*fn)(void *ctx, vc_model *m, vc_graph *g, rl_batch *b,
                                                                   rl_mb *mb)) {
    int n = only ? n_only : b->B;
    int *rows = vc_malloc(sizeof(int) * (size_t)(n + 1)), *starts = vc_malloc(sizeof(int) * (size_t)(n + 1));
    vc_status st = rows && starts ? VC_OK : VC_ERR_NOMEM;
    for (int i = 0; rows && i < n; i++) rows[i] = only ? only[i] : i;
    int k = st ? 0 : share ? split_rows_shared(b, rows, n, max_tokens, vc_model_cfg(m)->n_linear > 0, starts)
                           : rl_split_rows(b, rows, n, max_tokens, 0, starts);
    vc_model_weight_copies(m, 1); /* forward passes only: the weights do not change */
    for (int s = 0; !st && s < k; s++) {
        vc_graph_reset(g);
        vc_graph_set_grad(g, 0);
        rl_mb mb;
        st = rl_mb_build(g, b, rows + starts[s], starts[s + 1] - starts[s], &mb);
        if (!vc_model_vision(m)) mb.batch.images = NULL, mb.batch.image_span = NULL; /* a text model's image tokens */
        if (!st) st = fn(ctx, m, g, b, &mb);
    }
    vc_model_weight_copies(m, 0);
    free(rows);
    free(starts);
    return st;
}

static vc_status pass_rows(vc_model *m, vc_graph *g, rl_batch *b, int64_t max_tokens, int share, void *ctx,
                           vc_status (*fn)(void *ctx, vc_model *m, vc_graph *g, rl_batch *b, rl_mb *mb)) {
    return pass_rows_of(m, g, b, NULL, 0, max_tokens, share, ctx, fn);
}

/* t's data copied to host memory of the graph's arena */
vc_status rl_host_copy(vc_graph *g, const vc_tensor *t, float **out) {
    *out = NULL;
    if (!t) return vc_fail(VC_ERR_INTERNAL, "host copy: no tensor");
    float *h = vc_graph_alloc(g, sizeof(float) * (size_t)(t->n ? t->n : 1), 0);
    if (!h) return vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_NOMEM;
    vc_status st = vc_tensor_read(t, h);
    if (!st) *out = h;
    return st;
}

vc_status rl_mb_groups(vc_graph *g, const rl_batch *b, const int *rows, int n, int32_t **group, int64_t **share) {
    const char **uid = vc_graph_alloc(g, sizeof(char *) * (size_t)(n ? n : 1), 0);
    *group = vc_graph_alloc(g, sizeof(int32_t) * (size_t)(n ? n : 1), 0);
    *share = vc_graph_alloc(g, sizeof(int64_t) * (size_t)(n ? n : 1), 0);
    if (!uid || !*group || !*share) return vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_NOMEM;
    for (int i = 0; i < n; i++) {
        uid[i] = b->uid[rows[i]];
        (*share)[i] = b->plen[rows[i]] - 1; /* the prompt's last token predicts the first response token */
    }
    int ng = 0;
    return vc_group_ids(uid, n, *group, &ng);
}

typedef struct {
    float temp, *out, *ent, *sq;
    int share;
} lp_ctx;

/* the experts each layer chose for the micro-batch's tokens ([n_layer][T][K] over the forward's packing)
 * into the rows' token-major route of the batch (a shared prompt position from where it was computed) */
static void route_back(rl_batch *b, const rl_mb *mb, const vc_share *sh, int64_t L, int64_t K) {
    for (int i = 0; i < mb->n; i++) {
        int r = mb->rows[i];
        for (int64_t t = 0; t < mb->cu[i + 1] - mb->cu[i]; t++) {
            int64_t j = mb->cu[i] + t, p = sh->saved ? sh->back_host[j] : j;
            int32_t *dst = b->route + (size_t)(b->cu[r] + t) * (size_t)b->route_lk;
            for (int64_t l = 0; l < L; l++)
                memcpy(dst + l * K, sh->b.route + ((size_t)l * (size_t)sh->T + (size_t)p) * (size_t)K,
                       sizeof(int32_t) * (size_t)K);
        }
    }
}

static vc_status lp_fn(void *ctx, vc_model *m, vc_graph *g, rl_batch *b, rl_mb *mb) {
    lp_ctx *c = ctx;
    int32_t *grp = NULL, *tgt = mb->tgt;
    int64_t *share = NULL;
    vc_share sh;
    vc_status st = c->share ? rl_mb_groups(g, b, mb->rows, mb->n, &grp, &share) : VC_OK;
    if (!st) st = vc_share_plan(g, &mb->batch, grp, share, 2, &sh);
    if (!st && sh.saved && !(tgt = vc_graph_alloc(g, sizeof(int32_t) * (size_t)(sh.T ? sh.T : 1), 0)))
        st = vc_graph_status(g);
    for (int64_t i = 0; !st && sh.saved && i < sh.T; i++) tgt[i] = mb->tgt[sh.rep[i]];
    if (st) return st;
    const vc_model_config *mc = vc_model_cfg(m);
    int64_t K = mc->top_k, TL = sh.T * mc->n_layer * K;
    if (b->route && b->route_rec) { /* router replay: this pass records every MoE layer's experts */
        if (!(sh.b.route = vc_graph_alloc(g, sizeof(int32_t) * (size_t)(TL ? TL : 1), 0))) return vc_graph_status(g);
        sh.b.route_mode = VC_ROUTE_RECORD;
    }
    vc_tensor *h = vc_model_forward(m, g, &sh.b, NULL), *lp = NULL, *ent = NULL, *sq = NULL;
    if (!h) return vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_INTERNAL;
    if (sh.b.route) route_back(b, mb, &sh, mc->n_layer, K);
    uint8_t *need = vc_graph_alloc(g, (size_t)(sh.T ? sh.T : 1), 0); /* the LM head on response positions only */
    for (int64_t i = 0; need && i < sh.T; i++) need[i] = tgt[i] >= 0;
    st = vc_model_logprobs_rows(m, g, h, tgt, c->temp, need, &lp, c->ent ? &ent : NULL, c->sq ? &sq : NULL);
    if (st) return st;
    /* log-probs, entropies and sums of squares live in backend memory: read them back, then gather on the host
     * (from the shared packing: each position from the one that computed it) */
    vc_tensor *t[3] = { lp, ent, sq };
    float *dst[3] = { c->out, c->ent, c->sq };
    int64_t T0 = mb->cu[mb->n];
    float *own = sh.saved ? vc_graph_alloc(g, sizeof(float) * (size_t)(T0 ? T0 : 1), 0) : NULL;
    if (sh.saved && !own) return vc_graph_status(g);
    for (int k = 0; k < 3; k++) {
        float *host = NULL;
        if (!dst[k]) continue;
        if ((st = rl_host_copy(g, t[k], &host))) return st;
        for (int64_t i = 0; own && i < T0; i++) own[i] = host[sh.back_host[i]];
        rl_mb_gather(b, mb, own ? own : host, dst[k], 1);
    }
    return VC_OK;
}

vc_status rl_batch_logprobs_ex(vc_model *m, vc_graph *g, rl_batch *b, int64_t max_tokens, float temperature,
                               int share, float *out, float *entropy, float *sum_pi_sq) {
    lp_ctx c = { temperature, out, entropy, sum_pi_sq, share };
    return pass_rows(m, g, b, max_tokens, share, &c, lp_fn);
}

typedef struct {
    int K;
} topk_ctx;

/* the teacher's full distribution at each response position of the micro-batch, chunk by chunk (the logits of
 * 32 positions at a time, rewound after each), kept as its top K tokens and their log-probs */
static vc_status topk_fn(void *ctx, vc_model *m, vc_graph *g, rl_batch *b, rl_mb *mb) {
    int K = ((topk_ctx *)ctx)->K;
    int64_t V = vc_cfg_out_vocab(vc_model_cfg(m)), T = mb->cu[mb->n], P = 0;
    for (int i = 0; i < mb->n; i++) P += b->rlen[mb->rows[i]];
    int32_t *pos = vc_graph_alloc(g, sizeof(int32_t) * (size_t)(P + 1), 0); /* packed position of each */
    size_t *dst = vc_graph_alloc(g, sizeof(size_t) * (size_t)(P + 1), 0);   /* its [B, T, K] offset */
    if (!pos || !dst) return vc_graph_status(g);
    for (int i = 0, q = 0; i < mb->n; i++) {
        int r = mb->rows[i];
        for (int64_t j = 0; j < b->rlen[r]; j++, q++) {
            pos[q] = (int32_t)(mb->cu[i] + b->plen[r] - 1 + j);
            dst[q] = ((size_t)r * (size_t)b->T + (size_t)j) * (size_t)K;
        }
    }
    vc_tensor *h = vc_model_forward(m, g, &mb->batch, NULL);
    if (!h) return vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_INTERNAL;
    enum { C = 32 };
    float *host = vc_malloc(sizeof(float) * (size_t)(C * V));
    vc_status st = host ? VC_OK : VC_ERR_NOMEM;
    for (int64_t q0 = 0; !st && q0 < P; q0 += C) {
        int c = (int)(P - q0 < C ? P - q0 : C);
        vc_graph_mark mk = vc_graph_get_mark(g);
        int32_t *dpos = vc_graph_upload(g, pos + q0, sizeof(int32_t) * (size_t)c);
        vc_tensor *hc = dpos ? vc_op_gather_rows(g, h, T, dpos, c) : NULL, *lg = hc ? vc_model_logits(m, g, hc) : NULL;
        st = lg ? vc_tensor_read(lg, host) : vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_INTERNAL;
        for (int q = 0; !st && q < c; q++) {
            const float *row = host + (size_t)q * V;
            double lse = vc_logsumexp_row(row, V);
            size_t at = dst[q0 + q];
            vc_topk_row(row, V, K, b->tk_ids + at);
            for (int k = 0; k < K; k++) b->tk_lp[at + k] = (float)((double)row[b->tk_ids[at + k]] - lse);
        }
        vc_graph_rewind(g, mk);
    }
    free(host);
    return st;
}

vc_status rl_batch_teacher_topk(vc_model *m, vc_graph *g, rl_batch *b, const int *rows, int n, int64_t max_tokens) {
    topk_ctx c = { b->tk_k };
    int64_t V = vc_cfg_out_vocab(vc_model_cfg(m));
    if (!b->tk_ids || b->tk_k < 1 || b->tk_k > V)
        return vc_fail(VC_ERR_ARG, "distillation: top-%d of a %lld-token LM head", b->tk_k, (long long)V);
    return pass_rows_of(m, g, b, rows, n, max_tokens, 0, &c, topk_fn);
}

vc_status rl_batch_logprobs_of(vc_model *m, vc_graph *g, rl_batch *b, const int *rows, int n, int64_t max_tokens,
                               float temperature, int share, float *out) {
    lp_ctx c = { temperature, out, NULL, NULL, share };
    return pass_rows_of(m, g, b, rows, n, max_tokens, share, &c, lp_fn);
}

vc_status rl_batch_logprobs(vc_model *m, vc_graph *g, rl_batch *b, int64_t max_tokens, float temperature, float *out,
                            float *entropy, float *sum_pi_sq) {
    return rl_batch_logprobs_ex(m, g, b, max_tokens, temperature, 0, out, entropy, sum_pi_sq);
}

/* ---- critic ---- */
vc_status rl_lora_attach(vc_model *m, const rl_lora_opts *o) {
    vc_lora_spec sp = { o->rank, o->alpha, o->targets, *o->params ? o->params : NULL, o->exclude, o->seed, 0 };
    return vc_model_lora_attach(m, &sp);
}

vc_status rl_critic_load(const char *path, const rl_lora_opts *lora, rl_critic *c) {
    memset(c, 0, sizeof *c);
    vc_status st = vc_model_load(path, &c->m);
    if (st) return vc_fail_ctx(st, "critic.model.path");
    if (lora && lora->rank > 0 &&
        (st = rl_lora_attach(c->m, lora))) {
        rl_critic_free(c);
        return vc_fail_ctx(st, "critic.model.lora_rank");
    }
    int64_t H = vc_cfg_out_hidden(vc_model_cfg(c->m));
    /* the value head is a trained tensor: backend memory, zeroed */
    c->w = vc_train_backend_alloc((size_t)H + 1);
    c->gw = vc_train_backend_alloc((size_t)H + 1);
    if (!c->w || !c->gw) {
        rl_critic_free(c);
        return vc_fail(VC_ERR_NOMEM, "critic value head of %lld floats", (long long)H + 1);
    }
    /* a value head that starts at 0 everywhere (small init keeps early value losses bounded), or, as
     * verl's AutoModelForTokenClassification critic does, the checkpoint's score head (a critic started
     * from a reward model) */
    vc_param_init(&c->head_w, c->w, c->gw, 2, (int64_t[]){ 1, H });
    vc_param_init(&c->head_b, c->w + H, c->gw + H, 1, (int64_t[]){ 1 });
    if (vc_model_cfg(c->m)->n_labels == 1) {
        float *hw = vc_calloc((size_t)H + 1, sizeof(float));
        vc_tensor whole;
        vc_param_init(&whole, c->w, NULL, 1, (int64_t[]){ H + 1 });
        st = hw ? vc_model_score_head(c->m, 0, hw, hw + H) : VC_ERR_NOMEM;
        if (!st) st = vc_train_param_write(&whole, hw);
        free(hw);
        if (st) {
            rl_critic_free(c);
            return vc_fail_ctx(st, "critic.model.path: the score head as value head");
        }
    }
    c->head[0] = &c->head_w;
    c->head[1] = &c->head_b;
    vc_tensor *const *ad = NULL;
    int na = vc_model_lora_params(c->m, &ad);
    if (!(c->extra = vc_malloc(sizeof *c->extra * (size_t)(2 + na)))) {
        rl_critic_free(c);
        return VC_ERR_NOMEM;
    }
    c->extra[0] = c->head[0];
    c->extra[1] = c->head[1];
    for (int i = 0; i < na; i++) c->extra[2 + i] = ad[i];
    c->n_extra = 2 + na;
    return vc_model_enable_grad(c->m);
}

void rl_critic_free(rl_critic *c) {
    vc_model_free(c->m);
    free(c->extra);
    vc_train_backend_free(c->w);
    vc_train_backend_free(c->gw);
    memset(c, 0, sizeof *c);
}

/* value of every packed token [T_packed] */
vc_tensor *rl_critic_forward(rl_critic *c, vc_graph *g, rl_mb *mb) {
    vc_tensor *h = vc_model_forward(c->m, g, &mb->batch, NULL);
    vc_tensor *v = vc_op_linear(g, h, &c->head_w, &c->head_b);
    return v ? vc_reshape(g, v, 1, (int64_t[]){ v->n }) : NULL;
}

static vc_status val_fn(void *ctx, vc_model *m, vc_graph *g, rl_batch *b, rl_mb *mb) {
    (void)m;
    void **cc = ctx;
    vc_tensor *v = rl_critic_forward(cc[0], g, mb);
    if (!v) return vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_INTERNAL;
    float *hv = NULL;
    vc_status st = rl_host_copy(g, v, &hv);
    if (st) return st;
    rl_mb_gather(b, mb, hv, cc[1], 1);
    return VC_OK;
}

static vc_status last_fn(void *ctx, vc_model *m, vc_graph *g, rl_batch *b, rl_mb *mb) {
    (void)b;
    vc_tensor *h = vc_model_forward(m, g, &mb->batch, NULL), *s = h ? vc_model_score(m, g, h) : NULL;
    if (!s) return vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_INTERNAL;
    float *hs = NULL;
    vc_status st = rl_host_copy(g, s, &hs);
    if (st) return st;
    int64_t L = vc_model_cfg(m)->n_labels;
    for (int i = 0; i < mb->n; i++) ((float *)ctx)[mb->rows[i]] = hs[(mb->cu[i + 1] - 1) * L];
    return VC_OK;
}

vc_status rl_batch_last_scores(vc_model *m, vc_graph *g, rl_batch *b, int64_t max_tokens, float *out) {
    return pass_rows(m, g, b, max_tokens, 0, out, last_fn);
}

vc_status rl_critic_values(rl_critic *c, vc_graph *g, rl_batch *b, int64_t max_tokens, float *out) {
    void *cc[2] = { c, out };
    return pass_rows(c->m, g, b, max_tokens, 0, cc, val_fn);
}
