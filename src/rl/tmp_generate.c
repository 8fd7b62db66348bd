/* TEMPORARY generator for the RL trainer until the rollout engine (src/infer/, include/verlc/rollout.h)
 * lands: batched sampling over vc_model_forward with a contiguous vc_kv_cache. Same request/sample
 * structs and semantics as vc_rollout_generate (n samples per prompt, log-probs before temperature,
 * finish reasons, random stream keyed by (seed, prompt_index, sample, position)); no stop strings,
 * no paging. Delete this file once the real engine is merged. */
#include "rl_internal.h"
#include "verlc/ops.h"
#include "verlc/rng.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct { float v; int id; } cand;

static int cand_cmp(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return x->id - y->id;
}

/* log-softmax normaliser of z [V] */
static double log_norm(const float *z, int64_t V, double scale) {
    double mx = -INFINITY, s = 0;
    for (int64_t v = 0; v < V; v++) mx = fmax(mx, z[v] * scale);
    for (int64_t v = 0; v < V; v++) s += exp(z[v] * scale - mx);
    return mx + log(s);
}

/* Chooses the next token from logits z [V]; writes log p before temperature and log p sampled. */
static int pick(const float *z, int64_t V, const vc_sampling *s, uint64_t a, uint64_t b, uint64_t c, cand *buf,
                float *lp, float *lp_s) {
    double ln = log_norm(z, V, 1.0);
    int best = 0;
    for (int64_t v = 1; v < V; v++)
        if (z[v] > z[best]) best = (int)v;
    if (s->greedy || s->temperature <= 0) {
        *lp = (float)(z[best] - ln);
        *lp_s = 0;
        return best;
    }
    double inv_t = 1.0 / s->temperature, lt = log_norm(z, V, inv_t);
    int64_t n = 0;
    for (int64_t v = 0; v < V; v++) buf[n++] = (cand){ (float)(z[v] * inv_t - lt), (int)v };
    int filtered = (s->top_k > 0 && s->top_k < V) || (s->top_p > 0 && s->top_p < 1) || s->min_p > 0;
    if (filtered) {
        qsort(buf, (size_t)n, sizeof *buf, cand_cmp);
        if (s->top_k > 0 && s->top_k < n) n = s->top_k;
        if (s->min_p > 0) {
            double thr = log(s->min_p) + buf[0].v;
            int64_t k = 1;
            while (k < n && buf[k].v >= thr) k++;
            n = k;
        }
        if (s->top_p > 0 && s->top_p < 1) {
            double cum = 0;
            int64_t k = 0;
            while (k < n) {
                cum += exp(buf[k].v);
                k++;
                if (cum >= s->top_p) break;
            }
            n = k;
        }
    }
    double tot = 0;
    for (int64_t k = 0; k < n; k++) tot += exp(buf[k].v);
    double u = vc_rng_uniform(s->seed, a, b, c) * tot, acc = 0;
    int64_t k = 0;
    for (; k < n - 1; k++) {
        acc += exp(buf[k].v);
        if (u < acc) break;
    }
    *lp = (float)(z[buf[k].id] - ln);
    *lp_s = (float)(buf[k].v - log(tot));
    return buf[k].id;
}

typedef struct gen_state {
    int n_seq;
    int64_t *cu;       /* [n_seq + 1] */
    int32_t *feed;     /* tokens fed this step */
    int *done;
    vc_rollout_sample *out;
} gen_state;

/* rows of h at the last token of each sequence that fed something -> logits [k, V] */
static vc_tensor *last_logits(vc_model *m, vc_graph *g, vc_tensor *h, const gen_state *st, int *rows) {
    int64_t H = vc_model_cfg(m)->hidden;
    int k = 0;
    for (int s = 0; s < st->n_seq; s++)
        if (st->cu[s + 1] > st->cu[s]) rows[k++] = s;
    vc_tensor *x = vc_tensor_2d(g, k, H, 0);
    if (!x || !h) return NULL;
    for (int i = 0; i < k; i++) memcpy(x->data + (int64_t)i * H, h->data + (st->cu[rows[i] + 1] - 1) * H, sizeof(float) * H);
    return vc_model_logits(m, g, x);
}

static int is_eos(const vc_sampling *s, int id) {
    for (int i = 0; i < s->n_eos; i++)
        if (s->eos_ids[i] == id) return 1;
    return 0;
}

static vc_status gen_loop(vc_model *m, vc_graph *g, vc_kv_cache *kc, const vc_rollout_request *reqs,
                          const vc_sampling *s, gen_state *st, const int32_t *prefill, int64_t *prefill_cu) {
    int64_t V = vc_model_cfg(m)->vocab;
    cand *buf = vc_malloc(sizeof(cand) * (size_t)V);
    int *rows = vc_malloc(sizeof(int) * (size_t)st->n_seq);
    vc_status rc = buf && rows ? VC_OK : VC_ERR_NOMEM;
    for (int step = 0; !rc && step < s->max_new_tokens; step++) {
        vc_graph_reset(g);
        vc_graph_set_grad(g, 0);
        vc_batch b = { st->n_seq, step ? st->cu : prefill_cu, step ? st->feed : prefill };
        const gen_state view = { st->n_seq, (int64_t *)b.cu_seqlens, NULL, NULL, NULL };
        vc_tensor *z = last_logits(m, g, vc_model_forward(m, g, &b, kc), &view, rows);
        if (!z) { rc = vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_INTERNAL; break; }
        int k = 0, active = 0;
        for (int q = 0; q < st->n_seq; q++) {
            int fed = b.cu_seqlens[q + 1] > b.cu_seqlens[q];
            if (!fed) continue;
            vc_rollout_sample *o = &st->out[q];
            float lp, lps;
            int id = pick(z->data + (int64_t)k * V, V, s, reqs[o->request].prompt_index, (uint64_t)o->sample,
                          (uint64_t)o->n_tokens, buf, &lp, &lps);
            k++;
            o->tokens[o->n_tokens] = id;
            o->logp[o->n_tokens] = lp;
            o->logp_sampled[o->n_tokens] = lps;
            o->n_tokens++;
            if (is_eos(s, id)) { st->done[q] = 1; o->finish = VC_FINISH_EOS; }
            st->feed[active] = id;
            active += !st->done[q];
        }
        /* next step feeds one token for every sequence still running */
        st->cu[0] = 0;
        int a = 0;
        for (int q = 0; q < st->n_seq; q++) {
            st->cu[q + 1] = st->cu[q] + !st->done[q];
            a += !st->done[q];
        }
        (void)a;
        if (!active) break;
    }
    free(buf);
    free(rows);
    return rc;
}

vc_status vc_rl_tmp_generate(vc_model *m, const vc_rollout_request *reqs, int n_req, const vc_sampling *s,
                             vc_rollout_sample **out, int *n_out) {
    *out = NULL;
    *n_out = 0;
    int n = 0;
    int64_t max_p = 0, tot_p = 0;
    for (int r = 0; r < n_req; r++) {
        n += reqs[r].n_samples;
        if (reqs[r].prompt_len > max_p) max_p = reqs[r].prompt_len;
        tot_p += reqs[r].prompt_len * reqs[r].n_samples;
    }
    if (n == 0) return VC_OK;
    gen_state st = { .n_seq = n };
    st.cu = vc_calloc((size_t)n + 1, sizeof(int64_t));
    st.feed = vc_calloc((size_t)n, sizeof(int32_t));
    st.done = vc_calloc((size_t)n, sizeof(int));
    st.out = vc_calloc((size_t)n, sizeof(vc_rollout_sample));
    int64_t *pcu = vc_calloc((size_t)n + 1, sizeof(int64_t));
    int32_t *pids = vc_calloc((size_t)tot_p + 1, sizeof(int32_t));
    vc_graph *g = vc_graph_new();
    vc_kv_cache *kc = NULL;
    int64_t maxnew = s->max_new_tokens > 0 ? s->max_new_tokens : 1;
    vc_status rc = st.cu && st.feed && st.done && st.out && pcu && pids && g ? VC_OK : VC_ERR_NOMEM;
    if (!rc) rc = vc_kv_cache_new(m, n, max_p + maxnew + 1, &kc);
    int q = 0;
    for (int r = 0; !rc && r < n_req; r++)
        for (int k = 0; k < reqs[r].n_samples; k++, q++) {
            vc_rollout_sample *o = &st.out[q];
            o->request = r;
            o->sample = k;
            o->finish = VC_FINISH_LENGTH;
            o->tokens = vc_calloc((size_t)maxnew, sizeof(int32_t));
            o->logp = vc_calloc((size_t)maxnew, sizeof(float));
            o->logp_sampled = vc_calloc((size_t)maxnew, sizeof(float));
            if (!o->tokens || !o->logp || !o->logp_sampled) rc = VC_ERR_NOMEM;
            memcpy(pids + pcu[q], reqs[r].prompt, sizeof(int32_t) * (size_t)reqs[r].prompt_len);
            pcu[q + 1] = pcu[q] + reqs[r].prompt_len;
        }
    double t0 = vc_now();
    if (!rc && s->max_new_tokens > 0) rc = gen_loop(m, g, kc, reqs, s, &st, pids, pcu);
    for (int i = 0; i < n && st.out; i++) st.out[i].seconds = vc_now() - t0;
    vc_kv_cache_free(kc);
    vc_graph_free(g);
    free(st.cu);
    free(st.feed);
    free(st.done);
    free(pcu);
    free(pids);
    if (rc) {
        vc_rl_tmp_samples_free(st.out, st.out ? n : 0);
        return rc;
    }
    *out = st.out;
    *n_out = n;
    return VC_OK;
}

void vc_rl_tmp_samples_free(vc_rollout_sample *s, int n) {
    if (!s) return;
    for (int i = 0; i < n; i++) {
        free(s[i].tokens);
        free(s[i].logp);
        free(s[i].logp_sampled);
    }
    free(s);
}
