/* Continuous batching over the KV page pool. Each step, running sequences (oldest first) get their next
 * token (decode) or their next prefill chunk (within prefill_chunk tokens per step), then waiting
 * sequences and new prompts join while there is room. When a sequence needs a page and the pool is
 * full, the newest sequences are preempted: their pages are freed and they are recomputed later
 * (results do not change: every row is computed independently of the batch). */
#include "infer/sched.h"
#include <string.h>

vc_seq *vc_seq_new(vc_run *R, int req) {
    const vc_rollout_request *q = &R->reqs[req];
    vc_seq *s = vc_calloc(1, sizeof *s);
    if (!s) return NULL;
    s->req = req;
    s->sample = -1;
    s->n_prompt = s->n_tok = q->prompt_len;
    s->cap = q->prompt_len + R->sp->max_new_tokens;
    s->order = (int64_t)req << 20;
    s->tok = vc_malloc((size_t)s->cap * sizeof *s->tok);
    if (!s->tok) {
        free(s);
        return NULL;
    }
    memcpy(s->tok, q->prompt, (size_t)q->prompt_len * sizeof *s->tok);
    s->t0 = vc_now();
    s->last_reg = -1;
    s->slot = -1;
    return s;
}

void vc_seq_take_slot(vc_run *R, vc_seq *s, const vc_seq *from) {
    if (!R->state_floats || s->slot >= 0) return;
    s->slot = R->slot_free[--R->n_slot_free]; /* running sequences never outnumber the slots */
    size_t bytes = sizeof(float) * (size_t)R->state_floats;
    if (from) R->pool.be->d2d(R->state + (size_t)s->slot * (size_t)R->state_floats,
                             R->state + (size_t)from->slot * (size_t)R->state_floats, bytes);
}

void vc_seq_prefix(vc_run *R, vc_seq *s) {
    vc_kv_pool *P = &R->pool;
    int64_t pt = P->page_tokens, most = (s->n_tok - 1) / pt, k = 0;
    if (!P->c_parent || s->n_pg || s->n_cached || most <= 0 || vc_seq_images(R, s)) return;
    int32_t *pages = realloc(s->pages, (size_t)most * sizeof *pages);
    if (!pages) return; /* no reuse: the tokens are computed */
    s->pages = pages;
    for (int32_t parent = -1, pg; k < most && (pg = vc_kv_cache_take(P, parent, s->tok + k * pt)) >= 0; k++)
        s->pages[k] = parent = pg;
    s->n_pg = s->n_reg = k;
    s->n_cached = k * pt;
    s->last_reg = k ? s->pages[k - 1] : -1;
    /* drafting: the MTP layer's row at the chain's last position read the token after it of the sequence that computed
     * it; this one's may differ, so that position is computed again (into a copy of its page) with its MTP row */
    if (R->spec && k) s->n_cached--;
    s->n_mtp = s->n_cached;
    R->e->stats.prefix_hit_tokens += s->n_cached;
}

void vc_seq_register(vc_run *R, vc_seq *s) {
    vc_kv_pool *P = &R->pool;
    int64_t pt = P->page_tokens;
    /* drafting: a page once its tokens are the sequence's own (not drafts) and its MTP rows are computed */
    int64_t done = R->spec && s->n_mtp < s->n_cached ? s->n_mtp : s->n_cached;
    if (!P->c_parent || vc_seq_images(R, s)) return; /* the same image tokens stand for other images elsewhere */
    if (R->e->o.speculative && !R->spec) return; /* (a drafting engine's call that does not draft: no MTP rows) */
    for (; (s->n_reg + 1) * pt <= done && s->n_reg < s->n_pg; s->n_reg++) {
        int32_t pg = s->pages[s->n_reg], canon = vc_kv_cache_put(P, s->last_reg, s->tok + s->n_reg * pt, pg);
        /* the same tokens were registered first by another sequence: share that page (not with drafting, where the MTP
         * layer's row at a page's last position read the token after it, which may be this sequence's own) */
        if (canon != pg && !R->spec) {
            vc_kv_page_ref(P, canon);
            vc_kv_page_unref(P, pg);
            s->pages[s->n_reg] = canon;
        }
        s->last_reg = canon;
    }
}

vc_seq *vc_seq_fork(vc_run *R, const vc_seq *p, int sample) {
    vc_seq *s = vc_calloc(1, sizeof *s);
    if (!s) return NULL;
    *s = *p;
    s->slot = -1;
    s->sample = sample;
    s->order = p->order + 1 + sample;
    s->planned = 0;
    s->state = S_WAIT;
    int64_t gen = s->cap - s->n_prompt;
    s->tok = vc_malloc((size_t)s->cap * sizeof *s->tok);
    s->pages = vc_malloc((size_t)(p->n_pg ? p->n_pg : 1) * sizeof *s->pages);
    s->logp = vc_malloc((size_t)(gen ? gen : 1) * sizeof(float));
    s->logp_s = vc_malloc((size_t)(gen ? gen : 1) * sizeof(float));
    if (!s->tok || !s->pages || !s->logp || !s->logp_s) {
        s->n_pg = 0;
        vc_seq_free(R, s);
        return NULL;
    }
    memcpy(s->tok, p->tok, (size_t)p->n_tok * sizeof *s->tok);
    memcpy(s->pages, p->pages, (size_t)p->n_pg * sizeof *s->pages);
    for (int64_t i = 0; i < s->n_pg; i++) vc_kv_page_ref(&R->pool, s->pages[i]);
    return s;
}

void vc_seq_drop_cache(vc_run *R, vc_seq *s) {
    for (int64_t i = 0; i < s->n_pg; i++) vc_kv_page_unref(&R->pool, s->pages[i]);
    s->n_pg = 0;
    s->n_cached = s->n_mtp = 0;
    s->n_draft = 0;
    s->n_reg = 0;
    s->last_reg = -1;
    if (s->slot >= 0) R->slot_free[R->n_slot_free++] = s->slot;
    s->slot = -1;
}

void vc_seq_free(vc_run *R, vc_seq *s) {
    if (!s) return;
    vc_seq_drop_cache(R, s);
    free(s->tok);
    free(s->pages);
    free(s->logp);
    free(s->logp_s);
    free(s);
}

void vc_run_remove(vc_run *R, vc_seq *s) {
    for (int i = 0; i < R->n_run; i++)
        if (R->run[i] == s) {
            memmove(R->run + i, R->run + i + 1, (size_t)(R->n_run - i - 1) * sizeof *R->run);
            R->n_run--;
            break;
        }
    s->state = S_WAIT;
}

void vc_wait_insert(vc_run *R, vc_seq *s) {
    int i = R->n_wait;
    while (i > 0 && R->wait[i - 1]->order > s->order) {
        R->wait[i] = R->wait[i - 1];
        i--;
    }
    R->wait[i] = s;
    R->n_wait++;
    s->state = S_WAIT;
}

static void wait_remove(vc_run *R, int i) {
    memmove(R->wait + i, R->wait + i + 1, (size_t)(R->n_wait - i - 1) * sizeof *R->wait);
    R->n_wait--;
}

/* pages for tokens [n_cached, n_cached + n): a shared partially filled page is copied first */
static int ensure_pages(vc_run *R, vc_seq *s, int64_t n) {
    vc_kv_pool *P = &R->pool;
    int64_t pt = P->page_tokens, at = s->n_cached;
    if (at % pt && P->refc[s->pages[at / pt]] > 1) {
        int32_t pg = vc_kv_page_alloc(P);
        if (pg < 0) return 0;
        vc_kv_page_copy(P, pg, s->pages[at / pt], at % pt);
        vc_kv_page_unref(P, s->pages[at / pt]);
        s->pages[at / pt] = pg;
    }
    int64_t need = (at + n + pt - 1) / pt;
    if (need > s->n_pg) {
        int32_t *np = realloc(s->pages, (size_t)need * sizeof *np);
        if (!np) return 0;
        s->pages = np;
    }
    while (s->n_pg < need) {
        int32_t pg = vc_kv_page_alloc(P);
        if (pg < 0) return 0;
        s->pages[s->n_pg++] = pg;
    }
    return 1;
}

static void preempt(vc_run *R, vc_seq *v) {
    vc_seq_drop_cache(R, v);
    R->e->stats.preemptions++;
    if (v->state == S_RUN) {
        vc_run_remove(R, v);
        vc_wait_insert(R, v);
    }
}

/* frees the pages of the newest sequence younger than s that is not already in this step's plan:
 * running ones first, then waiting ones that hold pages; 0 when there is none */
static int make_room(vc_run *R, const vc_seq *s) {
    vc_seq *best = NULL;
    for (int i = 0; i < R->n_run; i++) {
        vc_seq *c = R->run[i];
        if (c != s && !c->planned && c->order > s->order && (!best || c->order > best->order)) best = c;
    }
    if (!best)
        for (int i = R->n_wait - 1; i >= 0 && !best; i--)
            if (R->wait[i] != s && R->wait[i]->n_pg && R->wait[i]->order > s->order) best = R->wait[i];
    if (!best) return 0;
    preempt(R, best);
    return 1;
}

/* the tokens s computes this step within what is left of the step's prefill budget; a sequence with images computes
 * all its tokens at once (its images' features are computed whole), alone when they exceed the budget */
static int64_t step_tokens(const vc_run *R, const vc_seq *s, int64_t budget) {
    int64_t pend = s->n_tok - s->n_cached;
    if (pend == 1) return 1 + s->n_draft; /* (the drafts' rows after the pending token's) */
    if (s->n_cached == 0 && vc_seq_images(R, s)) return pend <= budget || budget == R->e->o.prefill_chunk ? pend : 0;
    return pend < budget ? pend : budget;
}

static void plan_add(vc_run *R, vc_seq *s, int64_t n) {
    s->planned = 1;
    s->plan_n = n;
    R->plan[R->n_plan++] = s;
}

static int by_order(const void *a, const void *b) {
    int64_t x = (*(vc_seq *const *)a)->order, y = (*(vc_seq *const *)b)->order;
    return (x > y) - (x < y);
}

/* the next sequence to admit: a waiting one, else a new prompt */
static vc_seq *next_candidate(vc_run *R, int *from_wait) {
    if (R->n_wait) {
        *from_wait = 1;
        return R->wait[0];
    }
    *from_wait = 0;
    return R->next_req < R->n_req ? vc_seq_new(R, R->next_req) : NULL;
}

vc_status vc_sched_plan(vc_run *R) {
    int64_t budget = R->e->o.prefill_chunk;
    R->n_plan = 0;
    qsort(R->run, (size_t)R->n_run, sizeof *R->run, by_order);
    for (int i = 0; i < R->n_run; i++) R->run[i]->planned = 0;
    for (int i = 0; i < R->n_run; i++) {
        vc_seq *s = R->run[i];
        int64_t n = step_tokens(R, s, budget);
        if (n <= 0) continue;
        int ok;
        while (!(ok = ensure_pages(R, s, n)) && make_room(R, s)) {}
        if (!ok) { /* everything younger is gone: s waits for the older ones to finish */
            preempt(R, s);
            i--;
            continue;
        }
        if (s->n_tok - s->n_cached > 1) budget -= n; /* (prompt tokens; a decode's draft rows are not) */
        plan_add(R, s, n);
    }
    /* admissions: a prompt brings its n samples, so it needs room for all of them unless alone */
    while (R->n_run < R->max_seqs) {
        int from_wait;
        vc_seq *c = next_candidate(R, &from_wait);
        if (!c) {
            if (R->next_req < R->n_req) return VC_ERR_NOMEM;
            break;
        }
        int slots = c->sample < 0 ? R->reqs[c->req].n_samples : 1;
        vc_seq_prefix(R, c); /* a new or preempted sequence starts from its cached prefix */
        int64_t n = step_tokens(R, c, budget);
        int fits = (R->n_run == 0 || R->n_run + slots <= R->max_seqs) && n > 0;
        int ok = fits && ensure_pages(R, c, n);
        while (fits && !ok && R->n_run == 0 && make_room(R, c)) ok = ensure_pages(R, c, n);
        if (!from_wait) R->next_req++;
        if (!ok) {
            if (!from_wait) vc_wait_insert(R, c);
            break;
        }
        if (from_wait) wait_remove(R, 0);
        vc_seq_take_slot(R, c, NULL);
        c->state = S_RUN;
        R->run[R->n_run++] = c;
        if (c->n_tok - c->n_cached > 1) budget -= n;
        plan_add(R, c, n);
    }
    return VC_OK;
}
