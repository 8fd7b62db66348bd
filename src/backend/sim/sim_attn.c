/* sim wrappers of the attention entries: the descriptor's host arrays of backend pointers (per
 * sequence keys/values, their gradients, and the page tables of paged attention) are copied into host
 * scratch with translated pointers. */
#include "sim.h"
#include "backend/cpu/cpu.h"
#include <string.h>

typedef struct {
    vc_attn_desc d;
    const float **ptrs;      /* k_seq, v_seq, dk_seq, dv_seq: 4 * n_seq */
    const float ***pages;    /* k_pages, v_pages: 2 * n_seq */
    const float **page_ptrs; /* all page pointers */
} attn_tr;

static void tr_free(attn_tr *t) {
    free(t->ptrs);
    free(t->pages);
    free(t->page_ptrs);
}

static const float **tr_array(const float *const *src, const float **dst, int n, int *bad, const char *op) {
    if (!src) return NULL;
    for (int i = 0; i < n; i++) dst[i] = vc_sim_tr(src[i], bad, op);
    return dst;
}

/* fills t from d; 0 on success (else the sticky error is set or memory ran out) */
static int tr_desc(attn_tr *t, const vc_attn_desc *d, const char *op) {
    int bad = 0, n = d->n_seq;
    memset(t, 0, sizeof *t);
    t->d = *d;
    t->ptrs = vc_calloc((size_t)(4 * n + 1), sizeof *t->ptrs);
    if (!t->ptrs) return -1;
    t->d.k_seq = tr_array(d->k_seq, t->ptrs, n, &bad, op);
    t->d.v_seq = tr_array(d->v_seq, t->ptrs + n, n, &bad, op);
    t->d.dk_seq = (float *const *)tr_array((const float *const *)d->dk_seq, t->ptrs + 2 * n, n, &bad, op);
    t->d.dv_seq = (float *const *)tr_array((const float *const *)d->dv_seq, t->ptrs + 3 * n, n, &bad, op);
    if (d->sinks) t->d.sinks = vc_sim_tr(d->sinks, &bad, op);
    if (d->sel) t->d.sel = vc_sim_tr(d->sel, &bad, op);
    if (d->page_tokens > 0 && (d->k_pages || d->v_pages)) {
        int64_t total = 0;
        for (int s = 0; s < n; s++) total += (d->kv_len[s] + d->page_tokens - 1) / d->page_tokens;
        t->pages = vc_calloc((size_t)(2 * n + 1), sizeof *t->pages);
        t->page_ptrs = vc_calloc((size_t)(2 * total + 1), sizeof *t->page_ptrs);
        if (!t->pages || !t->page_ptrs) return -1;
        int64_t at = 0;
        for (int s = 0; s < n; s++) {
            int np = (int)((d->kv_len[s] + d->page_tokens - 1) / d->page_tokens);
            if (d->k_pages) t->pages[s] = tr_array(d->k_pages[s], t->page_ptrs + at, np, &bad, op);
            if (d->v_pages) t->pages[n + s] = tr_array(d->v_pages[s], t->page_ptrs + total + at, np, &bad, op);
            at += np;
        }
        t->d.k_pages = d->k_pages ? (const float *const *const *)t->pages : NULL;
        t->d.v_pages = d->v_pages ? (const float *const *const *)(t->pages + n) : NULL;
    }
    return bad ? -1 : 0;
}

void vc_sim_attn_fwd(float *o, float *lse, const float *q, const vc_attn_desc *d) {
    SIM_BEGIN("attn_fwd");
    float *O = D(o), *L = D(lse);
    const float *Q = D(q);
    SIM_END;
    attn_tr t;
    if (!tr_desc(&t, d, "attn_fwd")) vc_cpu_attn_fwd(O, L, Q, &t.d);
    else vc_sim_error("attn_fwd", "cannot translate the descriptor");
    tr_free(&t);
}

void vc_sim_attn_bwd(float *dq, const float *dout, const float *o, const float *lse, const float *q,
                     const vc_attn_desc *d) {
    SIM_BEGIN("attn_bwd");
    float *DQ = D(dq);
    const float *DO = D(dout), *O = D(o), *L = D(lse), *Q = D(q);
    SIM_END;
    attn_tr t;
    if (!tr_desc(&t, d, "attn_bwd")) vc_cpu_attn_bwd(DQ, DO, O, L, Q, &t.d);
    else vc_sim_error("attn_bwd", "cannot translate the descriptor");
    tr_free(&t);
}

void vc_sim_dsa_select(uint32_t *sel, int64_t words, const float *q, const float *w, int64_t topk,
                       const vc_attn_desc *d) {
    SIM_BEGIN("dsa_select");
    uint32_t *S = D(sel);
    const float *Q = D(q), *W = D(w);
    SIM_END;
    attn_tr t;
    if (!tr_desc(&t, d, "dsa_select")) vc_cpu_dsa_select(S, words, Q, W, topk, &t.d);
    else vc_sim_error("dsa_select", "cannot translate the descriptor");
    tr_free(&t);
}

void vc_sim_attn_sink_bwd(float *dsink, const float *dout, const float *o, const float *lse, const float *sinks,
                          int64_t T, int nh, int dv) {
    SIM_BEGIN("attn_sink_bwd");
    float *DS = D(dsink);
    const float *DO = D(dout), *O = D(o), *L = D(lse), *S = D(sinks);
    SIM_END;
    vc_cpu_attn_sink_bwd(DS, DO, O, L, S, T, nh, dv);
}
