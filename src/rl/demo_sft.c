/* The demo's supervised warm-up on the training core (train.h: vc_trainer_step with its default
 * next-token loss on "a+b=" -> "c<eos>", AdamW), stopped as soon as greedy accuracy (measured with the
 * rollout engine) reaches the target, so GRPO starts from an imperfect model. */
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
    vc_rollout_engine *e = NULL;
    vc_rollout_opts ro = { .max_batch = 256 };
    int no = 0;
    vc_status st = vc_rollout_new(m, &ro, &e);
    if (!st) st = vc_rollout_generate(e, r, n, &s, &out, &no);
    vc_rollout_free(e);
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
    vc_rollout_samples_free(out, no);
    free(r), free(ids), free(ans);
    return st;
}

/* one mini-batch of SFT sequences starting at problem k0; loss on the answer and <eos> tokens */
static void sft_batch(uint64_t seed, int n_train, int k0, int32_t *ids, int64_t *cu, float *mask) {
    cu[0] = 0;
    for (int i = 0; i < SFT_BATCH; i++) {
        int a, b;
        char txt[24];
        demo_problem(seed, 0, (k0 + i) % n_train, &a, &b);
        int pl = snprintf(txt, sizeof txt, "%d+%d=", a, b);
        snprintf(txt + pl, sizeof txt - (size_t)pl, "%d", a + b);
        int64_t o = cu[i];
        int n = demo_encode(txt, ids + o);
        ids[o + n++] = 1; /* eos */
        for (int t = 0; t < n; t++) mask[o + t] = t >= pl ? 1.0f : 0.0f;
        cu[i + 1] = o + n;
    }
}

vc_status demo_sft(vc_model *m, uint64_t seed, int n_train, int max_steps, double target, int verbose, double *acc,
                   int *steps_done) {
    vc_trainer_config tc;
    vc_trainer_config_default(&tc);
    vc_lr_config lc;
    vc_lr_config_default(&lc);
    lc.lr = 3e-3;
    lc.total_training_steps = max_steps;
    tc.adamw.lr = lc.lr;
    tc.adamw.weight_decay = 0;
    tc.micro_bs = SFT_BATCH;
    vc_trainer tr;
    int have = 0;
    vc_status st = vc_lr_schedule_init(&tc.sched, &lc);
    if (!st && !(st = vc_trainer_init(&tr, m, &tc))) have = 1;
    int32_t ids[SFT_BATCH * 12];
    int64_t cu[SFT_BATCH + 1];
    float mask[SFT_BATCH * 12];
    *acc = 0;
    double t0 = vc_now();
    int step = 0;
    for (; !st && step < max_steps; step++) {
        sft_batch(seed, n_train, step * SFT_BATCH, ids, cu, mask);
        vc_minibatch b = { SFT_BATCH, cu, ids, mask };
        vc_step_stats ss;
        st = vc_trainer_step(&tr, &b, NULL, NULL, &ss);
        if (!st && (step + 1) % 50 == 0) {
            st = demo_eval(m, seed, SFT_EVAL_N, acc, NULL, 0, 0);
            if (verbose) printf("  sft step %4d  loss %.3f  greedy accuracy %5.1f%%  (%.0f s)\n", step + 1, ss.loss, 100 * *acc, vc_now() - t0);
            fflush(stdout);
            if (*acc >= target) {
                step++;
                break;
            }
        }
    }
    *steps_done = step;
    if (have) vc_trainer_free(&tr);
    return st;
}
