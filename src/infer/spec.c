/* Speculative decoding with the model's first MTP layer (verl's model.mtp.enable_rollout). The MTP layer at position
 * i reads the decoder's final hidden state there and the embedding of token i + 1, and its logits draft token i + 2.
 * Its keys and values lie in the same pages as the decoder's, as one more layer (vc_kv_pages.n_layers), so a
 * sequence's pages hold the MTP layer's rows of the positions it has computed: a step computes the MTP rows of the
 * positions the decoder computed that step (their next tokens known by then: the prompt's own, or the ones just
 * sampled), and the last of them drafts the sequence's next token. The draft only changes how many tokens a step
 * yields: the engine samples the first row as it would without it and keeps the draft's row where the sample equals
 * the draft (engine.c). A sequence whose MTP rows fall behind (no page for its copy at a fork) goes on without drafts
 * until it is recomputed. */
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

vc_status vc_spec_draft(vc_run *R, vc_graph *g, vc_tensor *h) {
    vc_spec_buf *sb = &R->sb;
    vc_model *m = R->e->m;
    const vc_backend *be = vc_be();
    int n = sb->n, nd = 0;
    sb->n = 0;
    if (!n) return VC_OK;
    int64_t T = 0, H = vc_model_cfg(m)->hidden, V = vc_cfg_out_vocab(vc_model_cfg(m));
    for (int i = 0; i < n; i++) T += sb->e[i].n;
    int64_t *cu = vc_graph_alloc(g, sizeof(int64_t) * (size_t)(n + 1), 0), *len = vc_graph_alloc(g, sizeof(int64_t) * (size_t)n, 0);
    int64_t *at = vc_graph_alloc(g, sizeof(int64_t) * (size_t)T, 0), *last = vc_graph_alloc(g, sizeof(int64_t) * (size_t)n, 0);
    int32_t *ids = vc_graph_alloc(g, sizeof(int32_t) * (size_t)T, 0);
    const int32_t **tab = vc_graph_alloc(g, sizeof(int32_t *) * (size_t)n, 0);
    vc_sample_row *srow = vc_graph_alloc(g, sizeof *srow * (size_t)n, 0);
    float *u = vc_graph_alloc(g, sizeof(float) * (size_t)n, 1);
    if (!cu || !len || !at || !last || !ids || !tab || !srow || !u) return vc_graph_status(g);
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
        if (e->draft) {
            last[nd] = cu[i + 1] - 1;
            srow[nd] = (vc_sample_row){ .temperature = 1, .top_p = 1, .greedy = 1, .first = nd, .n = 1 };
            nd++;
        }
    }
    vc_tensor *hs = vc_tensor_2d(g, T, H, 0);
    const int64_t *at_d = vc_graph_upload(g, at, sizeof(int64_t) * (size_t)T);
    if (!hs || !at_d) return vc_graph_status(g);
    be->gather_rows(hs->data, h->data, at_d, T, H);
    vc_batch batch = { n, cu, ids };
    vc_kv_pages kv = { R->pool.mem, R->pool.page_tokens, tab, len, R->pool.bf16, .n_layers = R->pool.n_layer };
    vc_tensor *y = vc_model_mtp_forward_paged(m, g, &batch, &kv, hs);
    if (!y) return vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_INTERNAL;
    int32_t *tok = NULL;
    if (nd) {
        vc_tensor *ys = vc_tensor_2d(g, nd, H, 0);
        const int64_t *last_d = vc_graph_upload(g, last, sizeof(int64_t) * (size_t)nd);
        if (!ys || !last_d) return vc_graph_status(g);
        be->gather_rows(ys->data, y->data, last_d, nd, H);
        vc_tensor *z = vc_model_logits(m, g, ys);
        size_t nb = sizeof(float) * (size_t)nd;
        char *out = vc_graph_dalloc(g, 3 * nb, 0);
        tok = vc_graph_alloc(g, nb, 0);
        if (!z || !out || !tok) return vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_INTERNAL;
        be->sample_rows((int32_t *)out, (float *)(out + nb), (float *)(out + 2 * nb), z->data, nd, V, srow, u);
        be->d2h(tok, out, nb);
        vc_status st = be->sync();
        if (st) return st;
    }
    for (int i = 0, d = 0; i < n; i++) {
        vc_seq *s = sb->e[i].s;
        s->n_mtp = sb->e[i].pos + sb->e[i].n;
        if (!sb->e[i].draft) continue;
        int32_t t = tok[d++];
        /* a draft where the MTP rows reach the pending token and two or more tokens are still to come */
        int useful = s->n_mtp == s->n_cached && s->n_cached == s->n_tok - 1 &&
                     s->n_tok - s->n_prompt + 2 <= R->sp->max_new_tokens;
        s->draft = useful && t >= 0 && t < vc_model_cfg(m)->vocab ? t : -1;
    }
    return VC_OK;
}

void vc_spec_buf_free(vc_spec_buf *b) {
    free(b->e);
    free(b->kids);
    memset(b, 0, sizeof *b);
}
