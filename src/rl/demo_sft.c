/* The demo's supervised warm-up: teacher-forced next-token loss on "a+b=" -> "c<eos>" with AdamW,
 * stopped as soon as greedy accuracy reaches the target, so GRPO starts from an imperfect model. */
#include "demo_internal.h"
#include "verlc/ops.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SFT_BATCH 32
#define SFT_EVAL_N 200

vc_status demo_eval(vc_model *m, uint64_t seed, int n, double *acc, char *examples, size_t cap, int n_show) {
    vc_rollout_request *r = vc_calloc((size_t)n, sizeof *r);
    int32_t *ids = vc_calloc((size_t)n * 8, sizeof(int32_t));
    int *ans = vc_calloc((size_t)n, sizeof(int));
    if (!r || !ids || !ans) {
        free(r), free(ids), free(ans);
        return VC_ERR_NOMEM;
    }
    for (int k = 0; k < n; k++) {
        int a, b;
        char txt[16];
        demo_problem(seed, 1, k, &a, &b);
        snprintf(txt, sizeof txt, "%d+%d=", a, b);
        ans[k] = a + b;
        r[k] = (vc_rollout_request){ ids + k * 8, demo_encode(txt, ids + k * 8), 1, (uint64_t)k };
    }
    int32_t eos = 1;
    vc_sampling s = { .greedy = 1, .temperature = 1, .top_p = 1, .max_new_tokens = 4, .eos_ids = &eos, .n_eos = 1 };
    vc_rollout_sample *out = NULL;
    int no = 0;
    vc_status st = vc_rl_tmp_generate(m, r, n, &s, &out, &no);
    int ok = 0;
    size_t used = 0;
    if (examples && cap) examples[0] = 0;
    for (int i = 0; !st && i < no; i++) {
        char txt[16], want[16], prompt[16];
        demo_decode(out[i].tokens, (int)out[i].n_tokens, txt);
        snprintf(want, sizeof want, "%d", ans[i]);
        int good = !strcmp(txt, want) && out[i].finish == VC_FINISH_EOS;
        ok += good;
        demo_decode(r[i].prompt, (int)r[i].prompt_len, prompt);
        if (examples && i < n_show && used < cap)
            used += (size_t)snprintf(examples + used, cap - used, "    %s%-4s %s\n", prompt, txt, good ? "ok" : "wrong");
    }
    *acc = no ? (double)ok / no : 0;
    vc_rl_tmp_samples_free(out, no);
    free(r), free(ids), free(ans);
    return st;
}

/* one batch of SFT sequences starting at problem k0 */
static vc_status sft_batch(vc_model *m, vc_graph *g, uint64_t seed, int n_train, int k0, double *loss) {
    int32_t ids[SFT_BATCH * 12], tgt[SFT_BATCH * 12];
    int64_t cu[SFT_BATCH + 1] = { 0 };
    float w[SFT_BATCH * 12];
    int n_tgt = 0;
    for (int i = 0; i < SFT_BATCH; i++) {
        int a, b;
        char txt[24];
        demo_problem(seed, 0, (k0 + i) % n_train, &a, &b);
        int pl = snprintf(txt, sizeof txt, "%d+%d=", a, b);
        snprintf(txt + pl, sizeof txt - (size_t)pl, "%d", a + b);
        int64_t o = cu[i];
        int n = demo_encode(txt, ids + o);
        ids[o + n++] = 1; /* eos */
        for (int t = 0; t < n; t++) {
            tgt[o + t] = t >= pl - 1 && t + 1 < n ? ids[o + t + 1] : -1;
            n_tgt += tgt[o + t] >= 0;
        }
        cu[i + 1] = o + n;
    }
    for (int64_t t = 0; t < cu[SFT_BATCH]; t++) w[t] = tgt[t] >= 0 ? -1.0f / n_tgt : 0;
    vc_graph_reset(g);
    vc_graph_set_grad(g, 1);
    vc_batch bt = { SFT_BATCH, cu, ids };
    vc_tensor *h = vc_model_forward(m, g, &bt, NULL), *lp = NULL;
    if (!h) return vc_graph_status(g);
    vc_status st = vc_model_logprobs(m, g, h, tgt, &lp, NULL);
    vc_tensor *L = st ? NULL : vc_op_dot_const(g, lp, w);
    if (!st && !L) st = vc_graph_status(g);
    if (!st) st = vc_graph_backward(g, L, 1.0f);
    if (!st) *loss = L->data[0];
    return st;
}

vc_status demo_sft(vc_model *m, uint64_t seed, int n_train, int max_steps, double target, int verbose, double *acc,
                   int *steps_done) {
    vc_config *cfg = NULL;
    char *ov[] = { "actor_rollout_ref.actor.optim.lr=3e-3", "actor_rollout_ref.actor.optim.weight_decay=0.0" };
    vc_status st = vc_config_load(NULL, 2, ov, &cfg);
    rl_optim o;
    int have_opt = 0;
    if (!st && !(st = rl_optim_init(&o, m, NULL, 0, cfg, "actor_rollout_ref.actor", max_steps))) have_opt = 1;
    vc_graph *g = vc_graph_new();
    if (!st && !g) st = VC_ERR_NOMEM;
    *acc = 0;
    double t0 = vc_now(), loss = 0;
    int step = 0;
    for (; !st && step < max_steps; step++) {
        double gn, lr;
        int stepped;
        st = sft_batch(m, g, seed, n_train, step * SFT_BATCH, &loss);
        if (!st) st = rl_optim_step(&o, &gn, &lr, &stepped);
        if (!st && (step + 1) % 50 == 0) {
            st = demo_eval(m, seed, SFT_EVAL_N, acc, NULL, 0, 0);
            if (verbose) printf("  sft step %4d  loss %.3f  greedy accuracy %5.1f%%  (%.0f s)\n", step + 1, loss, 100 * *acc, vc_now() - t0);
            fflush(stdout);
            if (*acc >= target) {
                step++;
                break;
            }
        }
    }
    *steps_done = step;
    if (have_opt) rl_optim_free(&o);
    vc_graph_free(g);
    vc_config_free(cfg);
    return st;
}
