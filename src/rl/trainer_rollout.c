/* Rollout of a batch of prompts (n samples each) into the trainer's rl_batch (rewards: trainer_reward.c). */
#include "trainer_internal.h"
#include "verlc/device.h"
#include "verlc/tokenizer.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- generation ---- */
vc_status rl_generate(vc_rl_trainer *t, const vc_rollout_request *r, int n, const vc_sampling *s,
                      vc_rollout_sample **out, int *n_out) {
    if (t->gen) return t->gen(t->gen_ctx, r, n, s, out, n_out);
    /* on a GPU the actor's step arena goes back to the pool first, so the KV pool may take its memory (the next
     * update takes it again from the pool); on the CPU it stays, the KV pool has the host's available memory */
    if (t->g && vc_device_is_gpu()) vc_graph_trim(t->g);
    vc_status st = vc_rollout_generate(t->eng, r, n, s, out, n_out);
    vc_rollout_stats rs;
    vc_rollout_last_stats(t->eng, &rs);
    t->drafts += rs.draft_tokens;
    t->drafts_kept += rs.draft_accepted;
    return st;
}

static void samples_free(vc_rollout_sample *s, int n) { vc_rollout_samples_free(s, n); }

rl_images *rl_images_for(vc_rl_trainer *t, const vc_rl_dataset *d) {
    return d == t->train && t->train_img.d ? &t->train_img : d == t->val && t->val_img.d ? &t->val_img : NULL;
}

static vc_status fill_batch(vc_rl_trainer *t, const vc_rl_dataset *d, const uint32_t *idx, const vc_rollout_sample *smp,
                            int ns, const vc_sampling *sp, uint64_t step_key, rl_batch *b) {
    int64_t tot = 0, T = 1;
    for (int i = 0; i < ns; i++) {
        tot += d->p[idx[smp[i].request]].len + smp[i].n_tokens;
        if (smp[i].n_tokens > T) T = smp[i].n_tokens;
    }
    vc_status st = rl_batch_alloc(b, ns, (int)T, tot);
    if (!st) b->imgs = rl_images_for(t, d);
    for (int i = 0; !st && i < ns; i++) {
        const vc_rl_prompt *p = &d->p[idx[smp[i].request]];
        int64_t o = b->cu[i];
        memcpy(b->ids + o, p->ids, sizeof(int32_t) * (size_t)p->len);
        memcpy(b->ids + o + p->len, smp[i].tokens, sizeof(int32_t) * (size_t)smp[i].n_tokens);
        b->cu[i + 1] = o + p->len + smp[i].n_tokens;
        b->plen[i] = p->len;
        b->rlen[i] = smp[i].n_tokens;
        b->prompt[i] = (int)idx[smp[i].request];
        b->finish[i] = smp[i].finish;
        b->turns[i] = 2; /* verl's single-turn agent loop: the prompt and the answer */
        const float *lp = rl_rollout_logp(t, &smp[i], sp);
        for (int64_t j = 0; j < smp[i].n_tokens; j++) {
            b->mask[(size_t)i * b->T + j] = 1;
            b->rollout_logp[(size_t)i * b->T + j] = lp[j];
        }
        char uid[64];
        snprintf(uid, sizeof uid, "%llu:%d", (unsigned long long)step_key, smp[i].request);
        size_t len = 0;
        if (!(b->uid[i] = vc_strdup(uid))) st = VC_ERR_NOMEM;
        if (!st) st = vc_tokenizer_decode(t->tok, smp[i].tokens, (size_t)smp[i].n_tokens, 1, &b->text[i], &len);
    }
    return st;
}

vc_status rl_rollout_batch(vc_rl_trainer *t, const vc_rl_dataset *d, const uint32_t *idx, int n, const vc_sampling *s,
                           int n_samples, uint64_t step_key, rl_batch *b) {
    if (t->agent) return rl_agent_rollout(t, d, idx, n, s, n_samples, step_key, b);
    memset(b, 0, sizeof *b);
    vc_rollout_request *r = vc_calloc((size_t)n, sizeof *r);
    if (!r) return VC_ERR_NOMEM;
    rl_images *im = rl_images_for(t, d);
    for (int i = 0; i < n; i++) {
        r[i] = (vc_rollout_request){ d->p[idx[i]].ids, d->p[idx[i]].len, n_samples, idx[i] };
        vc_status st = rl_images_get(im, (int)idx[i], &r[i].images);
        if (st) {
            free(r);
            return st;
        }
    }
    vc_sampling sp = *s;
    /* a fresh random stream per step: (seed, step) -> sampling seed */
    sp.seed = t->seed * 0x9E3779B97F4A7C15ull + step_key * 0xD1B54A32D192ED03ull + 1;
    vc_rollout_sample *smp = NULL;
    int ns = 0;
    vc_status st = rl_generate(t, r, n, &sp, &smp, &ns);
    if (!st) st = fill_batch(t, d, idx, smp, ns, &sp, step_key, b);
    samples_free(smp, ns);
    free(r);
    if (st) rl_batch_free(b);
    return st;
}
