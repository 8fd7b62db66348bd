/* The rollout engine: batched, paged, reproducible generation on the model's own weights.
 * Each step: plan (sched.c), one forward over the packed rows with the paged cache, logits for the
 * sequences whose pending tokens are all computed, sampling keyed by (seed, prompt, sample, position),
 * bookkeeping (forks of a prompt into its n samples, finished samples leave). The forward runs on a
 * row-invariant backend, so a token's logits are the same bits whatever the batch looks like. */
#include "backend/cpu/cpu.h"
#include "infer/sched.h"
#include "verlc/cuda.h"
#include "verlc/pool.h"
#include "verlc/rng.h"
#include "verlc/tokenizer.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* VERLC_CUDA_PROFILE_DECODE=1 (with VERLC_CUDA_PROFILE=1): the op profile counts the decode steps only */
static int profile_decode(void) {
    const char *p = getenv("VERLC_CUDA_PROFILE_DECODE");
    return p && *p == '1';
}

vc_status vc_rollout_new(vc_model *m, const vc_rollout_opts *opts, vc_rollout_engine **out) {
    *out = NULL;
    if (!m) return vc_fail(VC_ERR_ARG, "rollout: no model");
    vc_rollout_engine *e = vc_calloc(1, sizeof *e);
    if (!e) return VC_ERR_NOMEM;
    e->m = m;
    if (opts) e->o = *opts;
    if (e->o.kv_fraction <= 0) e->o.kv_fraction = 0.3;
    if (e->o.page_tokens <= 0) e->o.page_tokens = 16;
    if (e->o.max_batch <= 0) e->o.max_batch = 64;
    if (e->o.prefill_chunk <= 0) e->o.prefill_chunk = 512;
    if (e->o.kv_fraction > 1) {
        double f = e->o.kv_fraction;
        free(e);
        return vc_fail(VC_ERR_ARG, "rollout: kv_fraction %g must be in (0, 1]", f);
    }
    const vc_model_config *c = vc_model_cfg(m);
    if (e->o.speculative < 0 || e->o.speculative > VC_SPEC_MAX) {
        int k = e->o.speculative;
        free(e);
        return vc_fail(VC_ERR_ARG, "rollout: speculative %d: expected 0 (off) to %d drafts a step", k, VC_SPEC_MAX);
    }
    if (e->o.speculative && !c->n_mtp) {
        free(e);
        return vc_fail(VC_ERR_ARG, "rollout: speculative decoding drafts with the model's MTP layer, and %s was loaded "
                       "without one (vc_model_load_mtp; its config declares %s)", c->model_type,
                       "num_nextn_predict_layers or mtp_num_hidden_layers");
    }
    e->row = vc_kv_row_floats(m);
    e->kept_pad = -1;
    *out = e;
    return VC_OK;
}

void vc_rollout_session(vc_rollout_engine *e, int on) {
    e->session = on;
    if (!on && e->kept.mem) {
        vc_kv_pool_release(&e->kept);
        e->kept_pad = -1;
    }
}

void vc_rollout_free(vc_rollout_engine *e) {
    if (e) vc_rollout_session(e, 0);
    free(e);
}

void vc_rollout_last_stats(const vc_rollout_engine *e, vc_rollout_stats *out) { *out = e->stats; }

/* memory the KV pool may take a fraction of: free device memory on a GPU, else available host memory */
static double available_bytes(void) {
    size_t used, free_dev, total;
    if (vc_backend_cuda() && vc_be() == vc_backend_cuda() && vc_cuda_mem_info(&used, &free_dev, &total) == VC_OK)
        return (double)free_dev;
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    double kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1) break;
    if (f) fclose(f);
    if (kb > 0) return kb * 1024.0 + (double)vc_cpu_bf16_copies_spare(); /* (kept for copies: no longer in use) */
    return (double)sysconf(_SC_AVPHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
}

/* bf16 matmul precision rounds the attention inputs to bf16 (decoder.c), so the pool keeps them as bf16:
 * half the bytes, the same values (VERLC_KV_BF16=0 keeps floats, for comparisons) */
static int kv_bf16(const vc_rollout_engine *e) {
    const char *env = getenv("VERLC_KV_BF16");
    return vc_matmul_precision() == VC_PREC_BF16 && !(env && *env == '0') && e->row % 2 == 0;
}

/* drafts a step (vc_rollout_opts.speculative, within [0, VC_SPEC_MAX]: vc_rollout_new refuses others) */
static int spec_k(const vc_rollout_engine *e) { return e->o.speculative; }

/* the layers a page holds: the decoder's, and with speculative decoding the MTP layer's after them */
static int64_t kv_layers(const vc_rollout_engine *e) { return vc_model_cfg(e->m)->n_layer + (spec_k(e) > 0); }

static size_t page_bytes(const vc_rollout_engine *e) {
    return vc_kv_page_bytes(e->o.page_tokens, kv_layers(e), e->row, kv_bf16(e));
}

static double budget_bytes(const vc_rollout_engine *e) {
    return e->o.kv_budget_bytes > 0 ? e->o.kv_budget_bytes : e->o.kv_fraction * available_bytes();
}

/* floats a linear-attention state slot takes: the states, and with drafting their copy from before the step (a draft
 * not kept takes them back) */
static int64_t slot_floats(const vc_rollout_engine *e) {
    return vc_lin_state_floats(vc_model_cfg(e->m)) * (spec_k(e) ? 2 : 1);
}

/* linear-attention models: state slots for the running sequences (max_batch, or fewer when a call has fewer
 * samples: `seqs`), a forking prompt and the padding rows, at most half of the KV budget (fewer slots run fewer
 * sequences at once); 0 for other models */
static int state_slots(const vc_rollout_engine *e, int64_t seqs) {
    int64_t sf = slot_floats(e);
    if (!sf) return 0;
    double fit = 0.5 * budget_bytes(e) / ((double)sf * sizeof(float));
    int want = (seqs < e->o.max_batch ? (int)seqs : e->o.max_batch) + 2;
    return fit >= want ? want : fit >= 3 ? (int)fit : 3;
}

/* the KV pages the budget holds beside the states of `seqs` running sequences */
static int64_t budget_pages_for(const vc_rollout_engine *e, int64_t seqs) {
    double bytes = budget_bytes(e) - (double)state_slots(e, seqs) * (double)slot_floats(e) * 4.0;
    return bytes > 0 ? (int64_t)(bytes / (double)page_bytes(e)) : 0;
}

int64_t vc_rollout_budget_pages(const vc_rollout_engine *e) { return budget_pages_for(e, e->o.max_batch); }

static int64_t pages_for(const vc_rollout_engine *e, int64_t tokens) {
    return (tokens + e->o.page_tokens - 1) / e->o.page_tokens;
}

static vc_status check_inputs(vc_rollout_engine *e, const vc_rollout_request *reqs, int n_req, const vc_sampling *s,
                              int64_t budget_pages) {
    const vc_model_config *c = vc_model_cfg(e->m);
    if (n_req < 0 || (n_req && !reqs) || !s) return vc_fail(VC_ERR_ARG, "rollout: no requests or sampling options");
    if (s->max_new_tokens < 0) return vc_fail(VC_ERR_ARG, "rollout: max_new_tokens %d < 0", s->max_new_tokens);
    if (!s->greedy && !(s->temperature > 0))
        return vc_fail(VC_ERR_ARG, "rollout: temperature %g must be > 0 (or use greedy)", s->temperature);
    if (!s->greedy && !(s->top_p > 0 && s->top_p <= 1)) return vc_fail(VC_ERR_ARG, "rollout: top_p %g must be in (0, 1]", s->top_p);
    if (!s->greedy && !(s->min_p >= 0 && s->min_p < 1)) return vc_fail(VC_ERR_ARG, "rollout: min_p %g must be in [0, 1)", s->min_p);
    if (s->n_stop > 0 && !e->o.tokenizer) return vc_fail(VC_ERR_ARG, "rollout: stop strings need a tokenizer in the options");
    for (int i = 0; i < s->n_stop; i++)
        if (!s->stop[i] || !s->stop[i][0]) return vc_fail(VC_ERR_ARG, "rollout: stop string %d is empty", i);
    for (int r = 0; r < n_req; r++) {
        const vc_rollout_request *q = &reqs[r];
        if (q->n_samples < 1 || q->n_samples >= (1 << 20) - 1)
            return vc_fail(VC_ERR_ARG, "rollout: request %d asks for %d samples", r, q->n_samples);
        if (q->prompt_len < 1 || !q->prompt) return vc_fail(VC_ERR_ARG, "rollout: request %d has an empty prompt", r);
        for (int64_t t = 0; t < q->prompt_len; t++)
            if (q->prompt[t] < 0 || q->prompt[t] >= c->vocab)
                return vc_fail(VC_ERR_ARG, "rollout: request %d: token %d at position %lld is outside the vocabulary (%lld)",
                               r, q->prompt[t], (long long)t, (long long)c->vocab);
        int64_t need = pages_for(e, q->prompt_len + s->max_new_tokens);
        if (need > budget_pages)
            return vc_fail(VC_ERR_ARG,
                           "rollout: request %d (prompt %lld tokens + max_new_tokens %d) needs %lld KV pages of %d tokens "
                           "(%.2f MB) but the KV pool holds %lld pages (%.2f MB); raise the KV budget or shorten it",
                           r, (long long)q->prompt_len, s->max_new_tokens, (long long)need, e->o.page_tokens,
                           need * (double)page_bytes(e) / 1e6, (long long)budget_pages,
                           budget_pages * (double)page_bytes(e) / 1e6);
    }
    return VC_OK;
}

/* requests with images: the tower takes them and the prompt's runs of image tokens are theirs (a prompt without
 * images has none); R->delta gets each request's M-RoPE delta. Nothing to do when no request has images. */
static vc_status image_deltas(vc_run *R) {
    const vc_model *m = R->e->m;
    const vc_vision *v = vc_model_vision(m);
    int any = 0;
    for (int r = 0; r < R->n_req; r++) any |= R->reqs[r].images && R->reqs[r].images->n > 0;
    if (!any) return VC_OK;
    if (!(R->delta = vc_calloc((size_t)R->n_req, sizeof *R->delta))) return VC_ERR_NOMEM;
    for (int r = 0; r < R->n_req; r++) {
        const vc_rollout_request *q = &R->reqs[r];
        int64_t cu[2] = { 0, q->prompt_len };
        vc_batch b = { 1, cu, q->prompt };
        vc_status st = VC_OK;
        if (!q->images || q->images->n == 0) continue;
        if (!v) return vc_fail(VC_ERR_ARG, "rollout: request %d has images but the model's vision tower is not loaded", r);
        b.images = q->images;
        if ((st = vc_vision_check(v, q->images)) || (st = vc_mrope_positions(m, &b, NULL, NULL, &R->delta[r])))
            return vc_fail_ctx(st, "rollout: request %d", r);
    }
    return VC_OK;
}

/* ---- finishing ---- */
static int stop_hit(const vc_run *R, const vc_seq *s) {
    const vc_sampling *sp = R->sp;
    if (sp->n_stop <= 0) return 0;
    size_t longest = 0;
    for (int i = 0; i < sp->n_stop; i++) longest = strlen(sp->stop[i]) > longest ? strlen(sp->stop[i]) : longest;
    int64_t gen = s->n_tok - s->n_prompt, w = (int64_t)longest + 8;
    if (w > gen) w = gen;
    char *text = NULL;
    size_t len = 0;
    if (vc_tokenizer_decode(R->e->o.tokenizer, s->tok + s->n_tok - w, (size_t)w, 1, &text, &len)) return 0;
    int hit = 0;
    for (int i = 0; i < sp->n_stop && !hit; i++) hit = strstr(text, sp->stop[i]) != NULL;
    free(text);
    return hit;
}

/* finish reason after the token just appended, or -1 to continue */
static int finish_reason(const vc_run *R, const vc_seq *s) {
    int32_t t = s->tok[s->n_tok - 1];
    for (int i = 0; i < R->sp->n_eos; i++)
        if (R->sp->eos_ids[i] == t) return VC_FINISH_EOS;
    if (stop_hit(R, s)) return VC_FINISH_STOP;
    if (s->n_tok - s->n_prompt >= R->sp->max_new_tokens) return VC_FINISH_LENGTH;
    return -1;
}

static void request_sample_done(vc_run *R, int req) {
    if (--R->left[req] == 0) R->prompts_done++;
}

/* hands the sample's arrays over to the output and frees the sequence */
static void finalize(vc_run *R, vc_seq *s, int finish) {
    vc_rollout_sample *o = &R->out[R->base[s->req] + s->sample];
    int64_t n = s->n_tok - s->n_prompt;
    o->tokens = vc_malloc((size_t)(n ? n : 1) * sizeof *o->tokens);
    if (o->tokens) memcpy(o->tokens, s->tok + s->n_prompt, (size_t)n * sizeof *o->tokens);
    o->n_tokens = n;
    o->logp = s->logp;
    o->logp_sampled = s->logp_s;
    s->logp = s->logp_s = NULL;
    o->finish = finish;
    o->seconds = vc_now() - s->t0;
    if (s->state == S_RUN) vc_run_remove(R, s);
    vc_seq_free(R, s);
    request_sample_done(R, o->request);
}

/* ---- one step ---- */
static void append(vc_seq *s, int32_t tok, float lp, float lps) {
    int64_t gen = s->n_tok - s->n_prompt;
    s->logp[gen] = lp;
    s->logp_s[gen] = lps;
    s->tok[s->n_tok++] = tok;
}

/* a forked sample runs on from its prompt's pages (and state), or waits; a waiting sample of a linear-attention
 * model is recomputed from its first token (no state slot is kept for waiting sequences) */
static void admit_or_wait(vc_run *R, vc_seq *c, const vc_seq *prompt) {
    if (R->n_run < R->max_seqs) {
        vc_seq_take_slot(R, c, prompt);
        c->state = S_RUN;
        R->run[R->n_run++] = c;
    } else {
        if (R->state_floats) vc_seq_drop_cache(R, c);
        vc_wait_insert(R, c);
    }
}

/* a finished prompt prefill becomes its n samples, sharing its pages */
static vc_status fork_prompt(vc_run *R, vc_seq *p, const int32_t *tok, const float *lp, const float *lps) {
    int n = R->reqs[p->req].n_samples;
    vc_run_remove(R, p);
    for (int i = 0; i < n; i++) {
        vc_seq *c = vc_seq_fork(R, p, i);
        if (!c) {
            vc_seq_free(R, p);
            return VC_ERR_NOMEM;
        }
        append(c, tok[i], lp[i], lps[i]);
        int f = finish_reason(R, c);
        if (f >= 0) {
            finalize(R, c, f);
            continue;
        }
        admit_or_wait(R, c, p);
        if (R->spec) R->sb.kids[R->sb.n_kids++] = c;
    }
    vc_seq_free(R, p);
    return VC_OK;
}

typedef struct {
    int64_t *cu, *len;
    int64_t *c0;             /* [plan] each planned sequence's computed tokens before the step */
    int *pi;                 /* [rows] the plan entry of each sampling row */
    int8_t *kind;            /* [rows] ROW_ONE, or a drafted sequence's 1 + n_draft: ROW_SPEC, then ROW_AFTER */
    vc_tensor *h;            /* the step's final hidden states (speculative decoding reads them) */
    int32_t *ids, *slot;
    const int32_t **table;
    vc_seq **rows;
    int *off;
    int64_t *at;
    vc_sample_row *srow;
    float *u;
    int32_t *tok;
    float *lp, *lps;
    int64_t cap_tokens, cap_draws;
    int cap_rows;
    int64_t *delta;          /* calls with images: each row's M-RoPE delta (0 for a prompt computed from its start) */
    int64_t *span;           /* ... and its image span (vc_batch): its prompt's length, 0 for a prompt without images */
    vc_images im;            /* the images of the rows computed from their start this step (im.n 0: none) */
    int32_t *grid;           /* their grids, time steps and pixels, gathered from the requests */
    float *pix, *ts;
    int64_t cap_img, cap_pix;
} step_buf;

enum { ROW_ONE, ROW_SPEC, ROW_AFTER };

/* linear-attention models with drafting: a drafted sequence's states copied aside before its step (save) or back */
static void state_keep(vc_run *R, const vc_seq *s, int save) {
    size_t at = (size_t)s->slot * (size_t)R->state_floats, bytes = sizeof(float) * (size_t)R->state_floats;
    if (save) R->pool.be->d2d(R->snap + at, R->state + at, bytes);
    else R->pool.be->d2d(R->state + at, R->snap + at, bytes);
}

/* a drafted sequence's rows r .. r + n_draft (the pending token's, then each draft's): each row's sample, the next
 * row's kept while this one's equals the draft the next row read; the rows after the first mismatch are dropped, their
 * keys and values left behind the sequence's end (the next step overwrites them). Returns 0 when it finished. */
static int verify(vc_run *R, const step_buf *c, int r, vc_seq *s, int64_t c0) {
    int nd = s->n_draft, j = 0, f = -1;
    s->n_draft = 0;
    R->e->stats.draft_tokens += nd;
    for (;; j++) {
        int k = c->off[r + j];
        if (j) R->e->stats.generated++, R->e->stats.draft_accepted++;
        append(s, c->tok[k], c->lp[k], c->lps[k]);
        if ((f = finish_reason(R, s)) >= 0 || j == nd || c->tok[k] != s->draft[j]) break;
    }
    if (f >= 0) {
        finalize(R, s, f);
    } else if (j < nd && R->snap) { /* the states ran on past the drafts not kept: back to before the step, and the */
        state_keep(R, s, 0);       /* pending token and the samples since are computed next step */
        s->n_cached = c0;
    } else
        s->n_cached = c0 + j + 1; /* the rows whose inputs were the sequence's tokens */
    return f < 0;
}

static vc_status bookkeeping(vc_run *R, const step_buf *c, int n_rows) {
    vc_status st = VC_OK;
    for (int r = 0; r < n_rows && !st; r++) {
        vc_seq *s = c->rows[r];
        int k = c->off[r], i = c->pi[r];
        int64_t c0 = c->c0[i], hrow = c->cu[i];
        R->e->stats.generated += s->sample < 0 ? R->reqs[s->req].n_samples : 1;
        if (s->sample < 0) {
            if ((st = fork_prompt(R, s, c->tok + k, c->lp + k, c->lps + k))) return st;
            if (R->spec) st = vc_spec_fork(R, c0, hrow);
            continue;
        }
        int live;
        if (c->kind[r] == ROW_SPEC) {
            int nd = s->n_draft;
            live = verify(R, c, r, s, c0);
            r += nd;
        } else {
            append(s, c->tok[k], c->lp[k], c->lps[k]);
            int f = finish_reason(R, s);
            if (f >= 0) finalize(R, s, f);
            live = f < 0;
        }
        if (live && R->spec) st = vc_spec_add(R, s, c0, s->n_cached - c0, hrow, 1);
    }
    return st;
}

/* the sampling row of sequence s (whose logits are row r) and the uniforms of its draws, keyed by
 * (seed, prompt, sample, position); a prompt prefill draws its n samples from one row */
static void sample_row_setup(const vc_run *R, step_buf *b, int r, int n_draw, int64_t ahead) {
    const vc_sampling *sp = R->sp;
    const vc_seq *s = b->rows[r];
    const vc_rollout_request *q = &R->reqs[s->req];
    int nd = s->sample < 0 ? q->n_samples : 1;
    b->srow[r] = (vc_sample_row){ .temperature = sp->temperature, .top_p = sp->top_p, .min_p = sp->min_p,
                                  .top_k = sp->top_k, .greedy = sp->greedy, .first = n_draw, .n = nd };
    uint64_t pos = (uint64_t)(s->n_tok - s->n_prompt + ahead);
    for (int d = 0; d < nd; d++) {
        uint64_t smpl = (uint64_t)(s->sample < 0 ? d : s->sample);
        b->u[n_draw + d] = vc_rng_uniform(sp->seed, q->prompt_index, smpl, pos);
    }
}

/* samples the rows' logits z[n_rows, V] with the backend's entry; only tokens and log-probs come back,
 * in one copy (tokens, log-probs and sampled log-probs side by side) */
static vc_status sample_step(vc_graph *g, step_buf *b, const vc_tensor *z, int n_rows, int n_draw, int64_t V) {
    const vc_backend *be = vc_be();
    size_t nb = (size_t)n_draw * sizeof(float);
    _Static_assert(sizeof(int32_t) == sizeof(float), "token and log-prob slots have one size");
    char *out = vc_graph_dalloc(g, 3 * nb, 0), *host = vc_graph_alloc(g, 3 * nb, 0);
    if (!out || !host) return vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_NOMEM;
    be->sample_rows((int32_t *)out, (float *)(out + nb), (float *)(out + 2 * nb), z->data, n_rows, V, b->srow, b->u);
    be->d2h(host, out, 3 * nb);
    memcpy(b->tok, host, nb);
    memcpy(b->lp, host + nb, nb);
    memcpy(b->lps, host + 2 * nb, nb);
    vc_status st = be->sync();
    if (st) return st;
    for (int d = 0; d < n_draw; d++)
        if (b->tok[d] < 0 || b->tok[d] >= V)
            return vc_fail(VC_ERR_INTERNAL, "rollout: the %s backend's sampler returned token %d (vocabulary %lld)",
                           be->name, b->tok[d], (long long)V);
    return VC_OK;
}

/* the step's forward over the planned sequences (and n_pad padding sequences after them) and the logits of its n_rows
 * sampling rows (z; NULL when none samples; with padding, z has rows for the padding too, after them);
 * `identity`: every row is one token that samples, so the hidden states are the logits' input */
static vc_status forward_logits(vc_run *R, vc_graph *g, step_buf *b, int n_rows, int n_pad, int identity,
                                vc_tensor **z) {
    vc_model *m = R->e->m;
    int64_t H = vc_cfg_out_hidden(vc_model_cfg(m));
    *z = NULL;
    vc_graph_reset(g);
    vc_batch batch = { R->n_plan + n_pad, b->cu, b->ids, .images = b->im.n ? &b->im : NULL,
                       .mrope_delta = R->delta ? b->delta : NULL, .image_span = R->delta ? b->span : NULL };
    vc_kv_pages kv = { R->pool.mem, R->pool.page_tokens, b->table, b->len, R->pool.bf16, R->state, b->slot,
                       R->pool.n_layer };
    vc_tensor *h = b->h = vc_model_forward_paged(m, g, &batch, &kv);
    if (!h) return vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_INTERNAL;
    if (n_rows == 0) return VC_OK;
    vc_tensor *hs = h;
    if (!identity) { /* the rows that sample: their hidden states */
        hs = vc_tensor_2d(g, n_rows, H, 0);
        const int64_t *at = vc_graph_upload(g, b->at, sizeof(int64_t) * (size_t)n_rows);
        if (!hs || !at) return vc_graph_status(g);
        vc_be()->gather_rows(hs->data, h->data, at, n_rows, H);
    }
    *z = vc_model_logits(m, g, hs);
    return *z ? VC_OK : vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_INTERNAL;
}

/* graph sizes: 1, 2, 4, 8, then multiples of 8 (at most 7 padding rows), never beyond the step buffers */
static int graph_rows(const vc_run *R, int n) {
    int k = n <= 8 ? (n <= 1 ? 1 : n <= 2 ? 2 : n <= 4 ? 4 : 8) : (n + 7) / 8 * 8;
    return k <= R->e->o.max_batch + 1 ? k : n;
}

/* sequences n .. k-1 of `per` tokens (id 0) each at positions 0 .. per - 1, writing into the padding page; their
 * logits are computed and never sampled */
static void pad_rows(vc_run *R, step_buf *b, int n, int k, int per) {
    for (int i = n; i < k; i++) {
        for (int j = 0; j < per; j++) b->ids[b->cu[i] + j] = 0;
        b->cu[i + 1] = b->cu[i] + per;
        b->len[i] = 0;
        b->table[i] = &R->pad_page;
        b->slot[i] = R->n_slots - 1;
        if (R->delta) b->delta[i] = b->span[i] = 0;
    }
}

/* A pure decode step (every row one token that samples) queues the same work each time for a given row
 * count, its inputs at the same arena addresses: on a GPU it runs as a CUDA graph. The rows are padded up
 * to a graph size (graph_rows), so a batch that shrinks as samples finish keeps replaying one graph; a
 * size's graph is captured the second step in a row that uses it and replayed afterwards. So does a drafted step
 * whose sequences all compute 1 + K rows that sample (the pending token and K drafts each): its sequences padded
 * likewise, each pad sequence 1 + K rows, its graph another than a decode step's (keyed by both counts). Other steps
 * (prefill, mixed) run eagerly, and so does a step whose capture or replay does not take.
 * Pure decode steps on the GPU are padded whether graphs are on or off (VERLC_CUDA_GRAPHS=0), so the
 * GEMMs see the same row counts and turning graphs off changes no bit. Linear-attention layers' per-row state
 * pointers change from step to step: their tables go up into the arena with the step's other inputs
 * (ops_linear.c dev_tabs), so those steps are graphs too. per: the rows every sequence computes and samples (0:
 * not such a step). */
static vc_status forward_graph(vc_run *R, vc_graph *g, step_buf *b, int n_rows, int per, vc_tensor **z) {
    int padded = per > 0 && n_rows > 0 && R->pad_page >= 0;
    int ks = padded ? graph_rows(R, R->n_plan) : R->n_plan, k = ks * per;
    if (padded && (k > b->cap_rows || k > b->cap_tokens)) ks = R->n_plan, k = n_rows; /* (no room: unpadded, eager) */
    int key = per == 1 ? k : -(ks * 16 + per); /* (per <= 1 + VC_SPEC_MAX < 16) */
    int use = padded && ks == graph_rows(R, R->n_plan) && vc_cuda_graphs_enabled();
    int replay = use && vc_cuda_graph_ready(key), capture = use && !replay && R->last_decode == key;
    R->last_decode = use ? key : INT32_MIN;
    if (padded) pad_rows(R, b, R->n_plan, ks, per);
    if (replay || capture) {
        int done = 0;
        vc_status st = vc_cuda_graph_begin(replay);
        if (st == VC_ERR_UNSUPPORTED) { /* CUDA refused the capture: graphs are off, run eagerly */
            vc_clear_error();
            return forward_logits(R, g, b, k, ks - R->n_plan, 1, z);
        }
        if (st) return st;
        vc_status fs = forward_logits(R, g, b, k, ks - R->n_plan, 1, z);
        if ((st = vc_cuda_graph_end(key, &done))) return st;
        if (done && !fs && *z) {
            if (replay) R->e->stats.graph_replays++;
            else R->e->stats.graph_captures++;
            return VC_OK;
        }
        R->e->stats.graph_fallbacks++;
        vc_clear_error();
    }
    return padded ? forward_logits(R, g, b, k, ks - R->n_plan, 1, z) : forward_logits(R, g, b, n_rows, 0, per > 0, z);
}

/* the rows every planned sequence computes when each computes as many and all of them sample (a decode step: 1; a
 * drafted step: 1 + K), within a page (the padding sequences' rows lie in one); else 0 */
static int uniform_rows(const vc_run *R, const step_buf *b, int n_rows, int64_t T) {
    if (!R->n_plan || T != n_rows || T % R->n_plan) return 0;
    int per = (int)(T / R->n_plan);
    for (int i = 0; i < R->n_plan; i++)
        if (b->cu[i + 1] - b->cu[i] != per) return 0;
    return per <= R->pool.page_tokens ? per : 0;
}

/* calls with images: each planned row's M-RoPE delta, and the images of the rows computed from their first token (a
 * prompt, or a sequence recomputed after preemption) gathered in plan order */
static vc_status step_images(vc_run *R, step_buf *b) {
    b->im.n = 0;
    if (!R->delta) return VC_OK;
    int64_t rows = 0;
    int timed = 0;
    for (int i = 0; i < R->n_plan; i++) {
        const vc_seq *s = R->plan[i];
        const vc_images *q = R->reqs[s->req].images;
        b->delta[i] = s->n_cached ? R->delta[s->req] : 0;
        b->span[i] = vc_seq_images(R, s) ? s->n_prompt : 0; /* (without images, image tokens are plain tokens) */
        if (s->n_cached || !vc_seq_images(R, s)) continue;
        int64_t n = vc_images_rows(q, q->n);
        if (b->im.n + q->n > b->cap_img || (rows + n) * q->row > b->cap_pix) {
            int64_t ci = 2 * (b->im.n + q->n), cp = 2 * (rows + n) * q->row;
            int32_t *g = realloc(b->grid, sizeof *g * 3 * (size_t)ci);
            float *t = g ? realloc(b->ts, sizeof *t * (size_t)ci) : NULL;
            if (g) b->grid = g;
            if (t) b->ts = t, b->cap_img = ci;
            float *p = t ? realloc(b->pix, sizeof *p * (size_t)cp) : NULL;
            if (!p) return vc_fail(VC_ERR_NOMEM, "rollout: no memory for the images of request %d", s->req);
            b->pix = p, b->cap_pix = cp;
        }
        memcpy(b->grid + 3 * b->im.n, q->grid, sizeof *b->grid * 3 * (size_t)q->n);
        for (int k = 0; k < q->n; k++) b->ts[b->im.n + k] = q->t_scale ? q->t_scale[k] : 1.0f;
        timed |= q->t_scale != NULL;
        memcpy(b->pix + rows * q->row, q->pixels, sizeof *b->pix * (size_t)(n * q->row));
        b->im.n += q->n;
        b->im.row = q->row;
        rows += n;
    }
    b->im.grid = b->grid;
    b->im.pixels = b->pix;
    b->im.t_scale = timed ? b->ts : NULL;
    return VC_OK;
}

static vc_status step(vc_run *R, vc_graph *g, step_buf *b) {
    const vc_model_config *cfg = vc_model_cfg(R->e->m);
    vc_status st = vc_sched_plan(R);
    if (st) return st;
    if (R->n_plan == 0) return vc_fail(VC_ERR_INTERNAL, "rollout: no sequence could be scheduled (KV pool of %lld pages)",
                                       (long long)R->pool.n_pages);
    int64_t T = 0;
    b->cu[0] = 0;
    for (int i = 0; i < R->n_plan; i++) {
        vc_seq *s = R->plan[i];
        if (T + s->plan_n > b->cap_tokens) return vc_fail(VC_ERR_INTERNAL, "rollout: step buffer overflow");
        if (s->n_cached + s->plan_n > s->n_tok) { /* (the drafts' rows after the pending token) */
            memcpy(s->tok + s->n_tok, s->draft, sizeof *s->tok * (size_t)s->n_draft);
            if (R->snap) state_keep(R, s, 1);
        }
        b->c0[i] = s->n_cached;
        memcpy(b->ids + T, s->tok + s->n_cached, (size_t)s->plan_n * sizeof *b->ids);
        T += s->plan_n;
        b->cu[i + 1] = T;
        b->len[i] = s->n_cached;
        b->table[i] = s->pages;
        b->slot[i] = s->slot;
    }
    if ((st = step_images(R, b))) return st;
    /* the sequences whose pending tokens are all computed after this step sample: rows, draws, uniforms */
    int n_rows = 0, n_draw = 0;
    for (int i = 0; i < R->n_plan; i++) {
        vc_seq *s = R->plan[i];
        int64_t end = s->n_cached + s->plan_n;
        if (end < s->n_tok) continue;
        int nd = (int)(end - s->n_tok); /* the drafts' rows: the pending token's row samples, then each draft's */
        if (n_rows + 1 + nd > b->cap_rows) return vc_fail(VC_ERR_INTERNAL, "rollout: row buffer overflow");
        for (int j = 0; j <= nd; j++) {
            b->rows[n_rows] = s;
            b->pi[n_rows] = i;
            b->kind[n_rows] = nd ? (j ? ROW_AFTER : ROW_SPEC) : ROW_ONE;
            b->off[n_rows] = n_draw;
            b->at[n_rows] = b->cu[i + 1] - 1 - nd + j;
            int draws = s->sample < 0 ? R->reqs[s->req].n_samples : 1;
            if (n_draw + draws > b->cap_draws) return vc_fail(VC_ERR_INTERNAL, "rollout: draw buffer overflow");
            sample_row_setup(R, b, n_rows, n_draw, j);
            n_draw += draws;
            n_rows++;
        }
    }
    vc_tensor *z = NULL;
    if ((st = forward_graph(R, g, b, n_rows, uniform_rows(R, b, n_rows, T), &z))) return st;
    R->e->stats.steps++;
    for (int i = 0; i < R->n_plan; i++) {
        vc_seq *s = R->plan[i];
        if (s->n_tok - s->n_cached == 1) R->e->stats.decode_tokens += s->plan_n; /* (with the drafts' rows) */
        else R->e->stats.prefill_tokens += s->plan_n;
        s->n_cached += s->plan_n;
        vc_seq_register(R, s);
        /* a prompt chunk before its last: the MTP rows of its positions (their next tokens are the prompt's) */
        if (R->spec && s->n_cached < s->n_tok && (st = vc_spec_add(R, s, b->c0[i], s->plan_n, b->cu[i], 0))) return st;
    }
    if (n_rows && (st = sample_step(g, b, z, n_rows, n_draw, vc_cfg_out_vocab(cfg)))) return st;
    if (n_rows && (st = bookkeeping(R, b, n_rows))) return st;
    return R->spec ? vc_spec_draft(R, g, b->h) : VC_OK;
}

/* ---- the call ---- */
static void step_buf_free(step_buf *b) {
    free(b->c0);
    free(b->pi);
    free(b->kind);
    free(b->cu);
    free(b->len);
    free(b->ids);
    free(b->table);
    free(b->slot);
    free(b->rows);
    free(b->off);
    free(b->at);
    free(b->srow);
    free(b->u);
    free(b->tok);
    free(b->lp);
    free(b->lps);
    free(b->delta);
    free(b->span);
    free(b->grid);
    free(b->pix);
    free(b->ts);
}

/* rows: sampling rows a sequence may take (2 with speculative decoding) */
static vc_status step_buf_init(step_buf *b, int max_seqs, int64_t tokens, int64_t draws, int rows) {
    memset(b, 0, sizeof *b);
    size_t n = (size_t)max_seqs + 1, nr = n * (size_t)rows;
    b->cap_tokens = tokens;
    b->cap_draws = draws;
    b->cap_rows = (int)nr;
    b->c0 = vc_malloc(n * sizeof *b->c0);
    b->pi = vc_malloc(nr * sizeof *b->pi);
    b->kind = vc_malloc(nr * sizeof *b->kind);
    b->cu = vc_malloc((n + 1) * sizeof *b->cu);
    b->len = vc_malloc(n * sizeof *b->len);
    b->ids = vc_malloc((size_t)tokens * sizeof *b->ids);
    b->table = vc_malloc(n * sizeof *b->table);
    b->slot = vc_malloc(n * sizeof *b->slot);
    b->rows = vc_malloc(nr * sizeof *b->rows);
    b->off = vc_malloc(nr * sizeof *b->off);
    b->at = vc_malloc(nr * sizeof *b->at);
    b->srow = vc_malloc(nr * sizeof *b->srow);
    b->u = vc_malloc((size_t)draws * sizeof *b->u);
    b->tok = vc_malloc((size_t)draws * sizeof *b->tok);
    b->lp = vc_malloc((size_t)draws * sizeof *b->lp);
    b->lps = vc_malloc((size_t)draws * sizeof *b->lps);
    b->delta = vc_calloc(n, sizeof *b->delta);
    b->span = vc_calloc(n, sizeof *b->span);
    if (!b->c0 || !b->pi || !b->kind || !b->delta || !b->span || !b->cu || !b->len || !b->ids || !b->table || !b->slot || !b->rows || !b->off || !b->at || !b->srow || !b->u || !b->tok || !b->lp || !b->lps)
        return VC_ERR_NOMEM;
    return VC_OK;
}

static vc_status alloc_outputs(vc_run *R, int64_t total) {
    R->out = vc_calloc((size_t)(total ? total : 1), sizeof *R->out);
    R->base = vc_calloc((size_t)R->n_req + 1, sizeof *R->base);
    R->left = vc_calloc((size_t)R->n_req + 1, sizeof *R->left);
    if (!R->out || !R->base || !R->left) return VC_ERR_NOMEM;
    for (int r = 0; r < R->n_req; r++) {
        R->base[r + 1] = R->base[r] + R->reqs[r].n_samples;
        R->left[r] = R->reqs[r].n_samples;
        for (int i = 0; i < R->reqs[r].n_samples; i++) {
            R->out[R->base[r] + i].request = r;
            R->out[R->base[r] + i].sample = i;
        }
    }
    return VC_OK;
}

/* pool pages: the budget (beside the states of the call's `seqs` samples), capped at what this call could ever hold
 * at once */
static int64_t pool_pages(const vc_rollout_engine *e, const vc_rollout_request *reqs, int n_req, int max_new,
                          int64_t seqs) {
    int64_t most = 0;
    for (int r = 0; r < n_req; r++)
        most += pages_for(e, reqs[r].prompt_len) + reqs[r].n_samples * pages_for(e, reqs[r].prompt_len + max_new);
    int64_t b = budget_pages_for(e, seqs);
    return b < most ? b : most;
}

static void empty_outputs(vc_run *R, int64_t total) {
    for (int64_t i = 0; i < total; i++) {
        R->out[i].tokens = vc_calloc(1, sizeof(int32_t));
        R->out[i].logp = vc_calloc(1, sizeof(float));
        R->out[i].logp_sampled = vc_calloc(1, sizeof(float));
        R->out[i].finish = VC_FINISH_LENGTH;
    }
    R->prompts_done = R->n_req;
}

/* the call's KV pool: a new one of np pages (+ the padding page), or in a session the kept one when it
 * fits (else a new one of 4 np pages within the budget, kept afterwards: a turn later needs more); the
 * prefix cache on unless no_prefix_cache */
static vc_status pool_open(vc_rollout_engine *e, vc_run *R, int64_t np, int pad, const vc_backend *be) {
    vc_kv_pool *k = &e->kept;
    int bf = kv_bf16(e);
    if (e->session && k->mem) {
        int fits = k->be == be && k->page_tokens == e->o.page_tokens && k->row == e->row && k->bf16 == bf &&
                   k->n_layer == kv_layers(e) && k->n_pages >= np + pad && (e->kept_pad >= 0) == pad;
        if (fits) {
            R->pool = *k, R->pad_page = e->kept_pad;
            R->pool.peak_used = vc_kv_pool_used(&R->pool);
            *k = (vc_kv_pool){ 0 };
            e->kept_pad = -1;
            return VC_OK;
        }
        vc_rollout_session(e, 0);
        e->session = 1;
    }
    if (e->session) { /* room for the turns to come: four times this call's need, within the budget */
        int64_t b = vc_rollout_budget_pages(e);
        np = 4 * np < b ? 4 * np : b > np ? b : np;
    }
    vc_status st = vc_kv_pool_init(&R->pool, np + pad, e->o.page_tokens, kv_layers(e), e->row, bf);
    /* the prefix cache shares pages, not the linear-attention states at their ends: off for such models */
    if (!st && !e->o.no_prefix_cache && !vc_lin_state_floats(vc_model_cfg(e->m)))
        st = vc_kv_cache_enable(&R->pool);
    R->pad_page = !st && pad ? vc_kv_page_alloc(&R->pool) : -1;
    return st;
}

static vc_status generate(vc_rollout_engine *e, const vc_rollout_request *reqs, int n_req, const vc_sampling *s,
                          vc_rollout_sample **out, int *n_out);

/* linear-attention models: a state slot for every sequence that may run at once (max_batch or the call's `seqs`
 * samples, and a prompt forking into its samples, within half of the KV budget: state_slots), and one for padding
 * rows */
static vc_status state_open(vc_rollout_engine *e, vc_run *R, int64_t seqs) {
    R->state_floats = vc_lin_state_floats(vc_model_cfg(e->m));
    if (!R->state_floats) return VC_OK;
    R->n_slots = state_slots(e, seqs);
    if (R->max_seqs > R->n_slots - 2) R->max_seqs = R->n_slots - 2; /* the slots the budget holds run at once */
    size_t bytes = sizeof(float) * (size_t)R->n_slots * (size_t)R->state_floats;
    R->state = R->pool.be->alloc(bytes);
    R->snap = spec_k(e) ? R->pool.be->alloc(bytes) : NULL;
    R->slot_free = vc_malloc(sizeof(int32_t) * (size_t)R->n_slots);
    if (!R->state || !R->slot_free || (spec_k(e) && !R->snap))
        return vc_fail(VC_ERR_NOMEM, "rollout: no memory for %d linear-attention state slots (%.1f MB)", R->n_slots,
                       bytes / 1e6);
    for (int i = R->n_slots - 2; i >= 0; i--) R->slot_free[R->n_slot_free++] = i;
    return VC_OK;
}

vc_status vc_rollout_generate(vc_rollout_engine *e, const vc_rollout_request *reqs, int n_req, const vc_sampling *s,
                              vc_rollout_sample **out, int *n_out) {
    vc_model_weight_copies(e->m, 1); /* the weights do not change during the call */
    vc_status st = generate(e, reqs, n_req, s, out, n_out);
    if (vc_backend_cuda() && vc_be() == vc_backend_cuda()) vc_cuda_graph_drop(); /* they read this call's memory */
    int64_t hits = vc_model_weight_copies(e->m, 0);
    e->stats.weight_copy_hits = hits;
    return st;
}

static vc_status generate(vc_rollout_engine *e, const vc_rollout_request *reqs, int n_req, const vc_sampling *s,
                          vc_rollout_sample **out, int *n_out) {
    *out = NULL;
    *n_out = 0;
    int64_t seqs = 0; /* the call's samples: at most so many run at once (and hold linear-attention states) */
    for (int r = 0; r < n_req && reqs; r++) seqs += reqs[r].n_samples > 0 ? reqs[r].n_samples : 0;
    int64_t budget = budget_pages_for(e, seqs);
    vc_status st = check_inputs(e, reqs, n_req, s, budget);
    if (st) return st;
    memset(&e->stats, 0, sizeof e->stats);
    vc_run R = { .e = e, .reqs = reqs, .n_req = n_req, .sp = s, .max_seqs = e->o.max_batch, .t_start = vc_now(),
                 .last_decode = -1, .pad_page = -1 };
    int64_t total = seqs, max_n = 1; /* (check_inputs took every n_samples >= 1) */
    for (int r = 0; r < n_req; r++) max_n = reqs[r].n_samples > max_n ? reqs[r].n_samples : max_n;
    int64_t whole = 0; /* a sequence with images is computed whole: up to its prompt and all its new tokens at once */
    for (int r = 0; r < n_req; r++)
        if (reqs[r].images && reqs[r].images->n > 0 && reqs[r].prompt_len + s->max_new_tokens > whole)
            whole = reqs[r].prompt_len + s->max_new_tokens;
    vc_graph *g = vc_graph_new();
    step_buf b;
    const vc_backend *prev = vc_be();
    int rows = 1 + spec_k(e); /* (a drafted sequence: a row and a draw each draft more) */
    st = step_buf_init(&b, e->o.max_batch, (int64_t)rows * (e->o.max_batch + 1) + 1 + e->o.prefill_chunk + whole,
                       (int64_t)(e->o.max_batch + 1) * max_n * rows, rows);
    if (!st) st = image_deltas(&R);
    R.spec = R.delta ? 0 : spec_k(e);
    R.sb.kids = R.spec ? vc_malloc(sizeof *R.sb.kids * (size_t)max_n) : NULL;
    if (!st && R.spec && !R.sb.kids) st = VC_ERR_NOMEM;
    if (!st) st = alloc_outputs(&R, total);
    if (!st && !g) st = VC_ERR_NOMEM;
    if (st) goto out;
    R.run = vc_calloc((size_t)e->o.max_batch + 2, sizeof *R.run);
    R.plan = vc_calloc((size_t)e->o.max_batch + 2, sizeof *R.plan);
    R.wait = vc_calloc((size_t)(total + n_req + 1), sizeof *R.wait);
    if (!R.run || !R.plan || !R.wait) {
        st = VC_ERR_NOMEM;
        goto out;
    }
    if (s->max_new_tokens == 0) {
        empty_outputs(&R, total);
        goto out;
    }
    int64_t np = pool_pages(e, reqs, n_req, s->max_new_tokens, seqs);
    if (vc_model_backend(e->m)->alloc != prev->alloc) {
        st = vc_fail(VC_ERR_ARG, "rollout: the model's weights are in %s memory but the active backend is %s",
                     vc_model_backend(e->m)->name, prev->name);
        goto out;
    }
    /* decode steps on the GPU pad their rows to graph sizes: one more page for the padding rows to write into */
    int pad = vc_backend_cuda() && prev == vc_backend_cuda();
    if ((st = pool_open(e, &R, np, pad, prev)) || (st = state_open(e, &R, seqs))) goto out;
    e->stats.pool_pages = np;
    e->stats.page_tokens = e->o.page_tokens;
    e->stats.page_bytes = (int64_t)page_bytes(e);
    vc_set_backend(vc_infer_backend_for(prev));
    vc_graph_set_grad(g, 0);
    while (R.prompts_done < n_req) {
        int64_t pre = e->stats.prefill_tokens, dec = e->stats.decode_tokens;
        double t0 = vc_now();
        if ((st = step(&R, g, &b))) break;
        if (e->stats.prefill_tokens == pre) {
            e->stats.decode_only_tokens += e->stats.decode_tokens - dec;
            e->stats.decode_only_seconds += vc_now() - t0;
        } else if (profile_decode())
            vc_cuda_profile_reset(); /* the profile keeps the steps after the last one that read prompts */
        if (e->o.progress) {
            double dt = vc_now() - R.t_start;
            e->o.progress(e->o.progress_ctx, R.prompts_done, n_req, dt > 0 ? e->stats.generated / dt : 0);
        }
    }
    vc_set_backend(prev);
out:
    e->stats.peak_pages = R.pool.peak_used;
    e->stats.seconds = vc_now() - R.t_start;
    for (int i = 0; i < R.n_run; i++) vc_seq_free(&R, R.run[i]);
    for (int i = 0; i < R.n_wait; i++) vc_seq_free(&R, R.wait[i]);
    if (R.state) R.pool.be->free(R.state); /* (before the pool goes: its backend owns them) */
    if (R.snap) R.pool.be->free(R.snap);
    free(R.slot_free);
    if (e->session && !st && R.pool.mem) e->kept = R.pool, e->kept_pad = R.pad_page; /* kept for the next call */
    else vc_kv_pool_release(&R.pool); /* (a kept pool the call took is R.pool now) */
    free(R.run);
    free(R.plan);
    free(R.wait);
    free(R.base);
    free(R.left);
    free(R.delta);
    vc_spec_buf_free(&R.sb);
    vc_graph_free(g);
    step_buf_free(&b);
    if (st) {
        if (st == VC_ERR_NOMEM && !vc_last_error()[0]) vc_fail(st, "rollout: out of memory");
        vc_rollout_samples_free(R.out, (int)total);
        return st;
    }
    *out = R.out;
    *n_out = (int)total;
    return VC_OK;
}

void vc_rollout_samples_free(vc_rollout_sample *s, int n) {
    if (!s) return;
    for (int i = 0; i < n; i++) {
        free(s[i].tokens);
        free(s[i].logp);
        free(s[i].logp_sampled);
    }
    free(s);
}
