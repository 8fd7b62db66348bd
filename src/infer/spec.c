/* Speculative decoding with the model's first MTP layer (verl's model.mtp.enable_rollout). The MTP layer at position
 * i reads the decoder's final hidden state there and the embedding of token i + 1, and its logits draft token i + 2.
 * Its keys and values lie in the same pages as the decoder's, as one more layer (vc_kv_pages.n_layers), so a
 * sequence's pages hold the MTP layer's rows of the positions it has computed: a step computes the MTP rows of the
 * positions the decoder computed that step (their next tokens known by then: the prompt's own, or the ones just
 * sampled), and the last of them drafts the sequence's next token; with K drafts a step the MTP layer then goes on
 * at the next positions reading its own hidden state and its last draft (chain_step). The drafts only change how many
 * tokens a step yields: the engine samples each row as it would without them and keeps a draft's row while the row
 * before samples the draft (engine.c, which also takes linear-attention states back). A sequence whose MTP rows fall
 * behind (no page for its copy at a fork) goes on without drafts until it is recomputed. */
#include "infer/sched.h"
#include <string.h>

vc_status vc_spec_add(vc_run *R, vc_seq *s, int64_t pos, int64_t n, int64_t hrow, int draft) {
    vc_spec_buf *b = &R->sb;
    if (n <= 0 || s->n_mtp != pos) return VC_OK; /* (behind: no rows, no drafts) */
    if (b->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 64;
        vc_spec_entry *e = realloc(b->e, sizeof *e * (size_t)cap);
        if (!e) return vc_fail(VC_ERR_NOMEM, "rollout: no memory for the MTP layer's rows");
        b->e = e, b->cap = cap;
    }
    b->e[b->n++] = (vc_spec_entry){ s, pos, n, hrow, draft };
    return VC_OK;
}

vc_status vc_spec_fork(vc_run *R, int64_t c0, int64_t hrow) {
    vc_kv_pool *P = &R->pool;
    int first = 1;
    for (int k = 0; k < R->sb.n_kids; k++) {
        vc_seq *s = R->sb.kids[k];
        int64_t end = s->n_prompt, lp = (end - 1) / P->page_tokens, ls = lp * P->page_tokens;
        if (s->n_cached != end || lp >= s->n_pg) continue; /* (a waiting sample that dropped its pages) */
        int32_t pg = s->pages[lp];
        if (P->refc[pg] > 1) { /* the MTP layer's row at the prompt's last position reads this sample's first token */
            int32_t own = vc_kv_page_alloc(P);
            if (own < 0) continue; /* no page: this sample goes on without drafts */
            vc_kv_page_copy(P, own, pg, end - ls);
            vc_kv_page_unref(P, pg);
            s->pages[lp] = own;
        }
        /* the first sample with a page of its own writes the shared pages' rows too */
        int64_t from = first ? c0 : ls > c0 ? ls : c0;
        s->n_mtp = from; /* (the first one's rows write the shared pages' positions before it) */
        vc_status st = vc_spec_add(R, s, from, end - from, hrow + (from - c0), 1);
        if (st) return st;
        first = 0;
    }
    R->sb.n_kids = 0;
    return VC_OK;
}

/* greedy tokens of the rows `at` (n of them, host) of the MTP layer's hidden states y into tok (host) */
static vc_status greedy_rows(vc_run *R, vc_graph *g, vc_tensor *y, const int64_t *at, int n, int32_t *tok) {
    vc_model *m = R->e->m;
    const vc_backend *be = vc_be();
    int64_t H = vc_model_cfg(m)->hidden, V = vc_cfg_out_vocab(vc_model_cfg(m));
    size_t nb = sizeof(float) * (size_t)n;
    vc_sample_row *srow = vc_graph_alloc(g, sizeof *srow * (size_t)n, 0);
    float *u = vc_graph_alloc(g, nb, 1);
    vc_tensor *ys = vc_tensor_2d(g, n, H, 0);
    const int64_t *at_d = vc_graph_upload(g, at, sizeof(int64_t) * (size_t)n);
    char *out = vc_graph_dalloc(g, 3 * nb, 0);
    if (!srow || !u || !ys || !at_d || !out) return vc_graph_status(g);
    for (int i = 0; i < n; i++) srow[i] = (vc_sample_row){ .temperature = 1, .top_p = 1, .greedy = 1, .first = i, .n = 1 };
    be->gather_rows(ys->data, y->data, at_d, n, H);
    vc_tensor *z = vc_model_logits(m, g, ys);
    if (!z) return vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_INTERNAL;
    be->sample_rows((int32_t *)out, (float *)(out + nb), (float *)(out + 2 * nb), z->data, n, V, srow, u);
    be->d2h(tok, out, nb);
    vc_status st = be->sync();
    for (int i = 0; !st && i < n; i++)
        if (tok[i] < 0 || tok[i] >= vc_model_cfg(m)->vocab) tok[i] = -1; /* (an LM head past the embedding's rows) */
    return st;
}

/* the MTP layer over n sequences (cu, ids, len and page tables tab: host, in g's arena) reading rows `at` (T of them)
 * of the hidden states src: its hidden states [T, H], or NULL (the graph's status says why) */
static vc_tensor *mtp_rows(vc_run *R, vc_graph *g, int n, const int64_t *cu, const int32_t *ids, const int64_t *len,
                           const int32_t **tab, const int64_t *at, const vc_tensor *src) {
    vc_kv_pool *P = &R->pool;
    int64_t T = cu[n], H = vc_model_cfg(R->e->m)->hidden;
    vc_tensor *hs = vc_tensor_2d(g, T, H, 0);
    const int64_t *at_d = vc_graph_upload(g, at, sizeof(int64_t) * (size_t)T);
    if (!hs || !at_d) return NULL;
    vc_be()->gather_rows(hs->data, src->data, at_d, T, H);
    vc_batch batch = { n, cu, ids };
    vc_kv_pages kv = { P->mem, P->page_tokens, tab, len, P->bf16, .n_layers = P->n_layer };
    return vc_model_mtp_forward_paged(R->e->m, g, &batch, &kv, hs);
}

/* the drafts s may take: n_draft of them where its MTP rows reach its pending token, within the tokens still to come
 * (a step yields up to 1 + n_draft) */
static int draft_room(const vc_run *R, const vc_seq *s) {
    if (s->n_mtp != s->n_cached || s->n_cached != s->n_tok - 1) return 0;
    int64_t left = R->sp->max_new_tokens - (s->n_tok - s->n_prompt) - 1;
    return left < R->spec ? (int)(left > 0 ? left : 0) : R->spec;
}

/* one more draft for each of the n sequences s[i] (host arrays in g's arena): the MTP layer at the position after
 * their last draft's, reading its own hidden state there (rows of y) and that draft; its keys and values there are
 * overwritten by the next step's rows. A sequence without a page for it drafts no further (s[i] NULL). */
static vc_status chain_step(vc_run *R, vc_graph *g, vc_seq **s, int n, vc_tensor **y, int64_t *yrow) {
    vc_kv_pool *P = &R->pool;
    int64_t *cu = vc_graph_alloc(g, sizeof(int64_t) * (size_t)(n + 1), 0), *len = vc_graph_alloc(g, sizeof(int64_t) * (size_t)n, 0);
    int32_t *ids = vc_graph_alloc(g, sizeof(int32_t) * (size_t)n, 0), *tok = vc_graph_alloc(g, sizeof(int32_t) * (size_t)n, 0);
    const int32_t **tab = vc_graph_alloc(g, sizeof(int32_t *) * (size_t)n, 0);
    int64_t *at = vc_graph_alloc(g, sizeof(int64_t) * (size_t)n, 0);
    if (!cu || !len || !ids || !tok || !tab || !at) return vc_graph_status(g);
    int k = 0;
    for (int i = 0; i < n; i++) {
        vc_seq *q = s[i];
        int64_t pos = q->n_cached + q->n_draft - 1, pg = pos / P->page_tokens;
        if (pg >= q->n_pg) { /* (the drafts' rows took the pages up to the last draft; this row may need one more) */
            int32_t *np = realloc(q->pages, sizeof *np * (size_t)(pg + 1)), page = np ? vc_kv_page_alloc(P) : -1;
            if (np) q->pages = np;
            if (page < 0) {
                s[i] = NULL;
                continue;
            }
            q->pages[q->n_pg++] = page;
        }
        cu[k] = k, len[k] = pos, ids[k] = q->draft[q->n_draft - 1], tab[k] = q->pages, at[k] = yrow[i];
        s[k] = q, yrow[k] = k;
        k++;
    }
    cu[k] = k;
    for (int i = k; i < n; i++) s[i] = NULL;
    if (!k) return VC_OK;
    vc_tensor *y2 = mtp_rows(R, g, k, cu, ids, len, tab, at, *y);
    if (!y2) return vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_INTERNAL;
    *y = y2;
    vc_status st = greedy_rows(R, g, y2, cu, k, tok);
    for (int i = 0; !st && i < k; i++)
        if (tok[i] >= 0) s[i]->draft[s[i]->n_draft++] = tok[i];
        else s[i] = NULL;
    return st;
}

vc_status vc_spec_draft(vc_run *R, vc_graph *g, vc_tensor *h) {
    vc_spec_buf *sb = &R->sb;
    int n = sb->n, nd = 0;
    sb->n = 0;
    if (!n) return VC_OK;
    int64_t T = 0;
    for (int i = 0; i < n; i++) T += sb->e[i].n;
    int64_t *cu = vc_graph_alloc(g, sizeof(int64_t) * (size_t)(n + 1), 0), *len = vc_graph_alloc(g, sizeof(int64_t) * (size_t)n, 0);
    int64_t *at = vc_graph_alloc(g, sizeof(int64_t) * (size_t)T, 0), *last = vc_graph_alloc(g, sizeof(int64_t) * (size_t)n, 0);
    int32_t *ids = vc_graph_alloc(g, sizeof(int32_t) * (size_t)T, 0), *tok = vc_graph_alloc(g, sizeof(int32_t) * (size_t)n, 0);
    const int32_t **tab = vc_graph_alloc(g, sizeof(int32_t *) * (size_t)n, 0);
    vc_seq **ds = vc_graph_alloc(g, sizeof(vc_seq *) * (size_t)n, 0);
    if (!cu || !len || !at || !last || !ids || !tok || !tab || !ds) return vc_graph_status(g);
    cu[0] = 0;
    for (int i = 0; i < n; i++) {
        const vc_spec_entry *e = &sb->e[i];
        for (int64_t j = 0; j < e->n; j++) {
            ids[cu[i] + j] = e->s->tok[e->pos + j + 1];
            at[cu[i] + j] = e->hrow + j;
        }
        cu[i + 1] = cu[i] + e->n;
        len[i] = e->pos;
        tab[i] = e->s->pages;
        e->s->n_mtp = e->pos + e->n;
        e->s->n_draft = 0;
        if (e->draft && draft_room(R, e->s) > 0) last[nd] = cu[i + 1] - 1, ds[nd++] = e->s;
    }
    vc_tensor *y = mtp_rows(R, g, n, cu, ids, len, tab, at, h);
    if (!y) return vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_INTERNAL;
    for (int i = 0; i < n; i++) vc_seq_register(R, sb->e[i].s); /* (pages whose MTP rows are all written now) */
    vc_status st = nd ? greedy_rows(R, g, y, last, nd, tok) : VC_OK;
    int k = 0; /* the sequences drafting further: the MTP layer on its own last row and draft */
    for (int i = 0; !st && i < nd; i++) {
        if (tok[i] < 0) continue;
        ds[i]->draft[ds[i]->n_draft++] = tok[i];
        if (draft_room(R, ds[i]) > 1) ds[k] = ds[i], last[k++] = last[i];
    }
    for (int depth = 2; !st && k > 0 && depth <= R->spec; depth++) {
        if ((st = chain_step(R, g, ds, k, &y, last))) break;
        int k2 = 0;
        for (int i = 0; i < k; i++)
            if (ds[i] && draft_room(R, ds[i]) > ds[i]->n_draft) ds[k2] = ds[i], last[k2++] = last[i];
        k = k2;
    }
    return st;
}

void vc_spec_buf_free(vc_spec_buf *b) {
    free(b->e);
    free(b->kids);
    memset(b, 0, sizeof *b);
}
