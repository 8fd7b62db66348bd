/* `verlc demo` orchestration: files, tiny model, warm-up, then GRPO through the real trainer. */
#include "demo_internal.h"
#include "verlc/report.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DEMO_TRAIN_N 4000
#define DEMO_VAL_N 200
#define DEMO_SFT_TARGET 0.35
#define DEMO_SFT_MAX 3000

/* random init, warm-up, save as a Hugging Face directory with the tokenizer next to it */
static vc_status make_sft_model(const vc_demo_opts *o, const char *model_dir, vc_demo_result *r) {
    char *cfg_path = vc_path_join(o->out_dir, "model_config.json");
    vc_model *m = NULL;
    vc_status st = cfg_path ? demo_write_model_config(cfg_path, DEMO_VOCAB) : VC_ERR_NOMEM;
    if (!st) st = vc_model_init_random(cfg_path, o->seed, &m);
    char ex[1024];
    double acc0 = 0;
    if (!st) st = demo_eval(m, o->seed, DEMO_VAL_N, &acc0, NULL, 0, 0);
    if (!st && o->verbose) {
        printf("[1/3] supervised warm-up of a %lld-parameter llama-style model (%d layers, hidden %d) on \"a+b=\" -> \"c\"\n",
               (long long)vc_model_param_count(m), DEMO_LAYERS, DEMO_HIDDEN);
        printf("  random init: greedy accuracy %.1f%%; stopping the warm-up at >= %.0f%% so that RL has work to do\n",
               100 * acc0, 100 * DEMO_SFT_TARGET);
    }
    double t0 = vc_now();
    if (!st) st = demo_sft(m, o->seed, DEMO_TRAIN_N, DEMO_SFT_MAX, DEMO_SFT_TARGET, o->verbose, &r->sft_acc, &r->sft_steps);
    r->sft_seconds = vc_now() - t0;
    if (!st) st = demo_eval(m, o->seed, DEMO_VAL_N, &r->sft_acc, ex, sizeof ex, 6);
    if (!st && o->verbose) printf("  after warm-up: greedy accuracy %.1f%% on %d held-out problems, e.g.\n%s", 100 * r->sft_acc, DEMO_VAL_N, ex);
    if (!st) st = vc_model_save_hf(m, model_dir, VC_F32);
    if (!st) st = demo_write_tokenizer(model_dir);
    vc_model_free(m);
    free(cfg_path);
    return st;
}

static vc_status run_grpo(const vc_demo_opts *o, const char *model_dir, const char *train, const char *val, vc_demo_result *r) {
    char ov[32][512];
    int n = 0;
#define OV(...) snprintf(ov[n++], sizeof ov[0], __VA_ARGS__)
    OV("actor_rollout_ref.model.path=%s", model_dir);
    OV("data.train_files=%s", train);
    OV("data.val_files=%s", val);
    OV("data.train_batch_size=32");
    OV("data.max_prompt_length=8");
    OV("data.max_response_length=4");
    OV("data.seed=%llu", (unsigned long long)o->seed);
    OV("algorithm.adv_estimator=grpo");
    OV("actor_rollout_ref.rollout.n=8");
    OV("actor_rollout_ref.rollout.temperature=1.0");
    OV("actor_rollout_ref.actor.ppo_mini_batch_size=32");
    OV("actor_rollout_ref.actor.optim.lr=3e-4");
    OV("actor_rollout_ref.actor.optim.weight_decay=0.0");
    OV("actor_rollout_ref.actor.use_kl_loss=false");
    OV("actor_rollout_ref.actor.entropy_coeff=0.0");
    OV("actor_rollout_ref.model.enable_gradient_checkpointing=false"); /* verl's default; a tiny model needs no recompute */
    OV("trainer.total_training_steps=%d", o->steps);
    OV("trainer.test_freq=%d", o->steps >= 4 ? o->steps / 4 : 1);
    OV("trainer.save_freq=%d", o->steps);
    OV("trainer.val_before_train=true");
    OV("trainer.resume_mode=disable");
    OV("trainer.default_local_dir=%s", o->out_dir);
    OV("trainer.experiment_name=verlc_demo");
    OV("trainer.device=%s", o->device ? o->device : "auto");
    OV("actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype=%s", o->precision ? o->precision : "fp32");
#undef OV
    char **argv = vc_calloc((size_t)(n + o->n_overrides), sizeof(char *));
    if (!argv) return VC_ERR_NOMEM;
    for (int i = 0; i < n; i++) argv[i] = ov[i];
    for (int i = 0; i < o->n_overrides; i++) argv[n++] = o->overrides[i];
    vc_config *cfg = NULL;
    vc_rl_trainer *t = NULL;
    vc_status st = vc_config_load(NULL, n, argv, &cfg);
    if (!st) st = vc_rl_trainer_new(cfg, &t);
    if (!st) vc_rl_trainer_set_verbose(t, o->verbose);
    double t0 = vc_now();
    if (!st) st = vc_rl_trainer_fit(t);
    r->rl_seconds = vc_now() - t0;
    if (!st && !vc_rl_trainer_metric(t, "val-core/verlc/addition/acc/mean@1", &r->acc_after))
        st = vc_fail(VC_ERR_INTERNAL, "demo: no validation accuracy");
    if (!st) {
        /* the config the run used, for the report */
        char *yaml = vc_config_to_yaml(cfg, NULL), *p = vc_path_join(o->out_dir, "config.yaml");
        if (yaml && p) st = vc_write_file_atomic(p, yaml, strlen(yaml));
        free(yaml);
        free(p);
    }
    vc_rl_trainer_free(t);
    vc_config_free(cfg);
    free(argv);
    return st;
}

static double first_value(const char *run_dir, const char *name) {
    char *p = vc_path_join(run_dir, "metrics.jsonl");
    vc_metrics *m = NULL;
    double v = 0;
    if (p && !vc_metrics_read(p, &m)) {
        const vc_metric_series *s = vc_metrics_find(m, name);
        if (s && s->n) v = s->y[0];
    }
    vc_metrics_free(m);
    free(p);
    return v;
}

vc_status vc_demo_run(const vc_demo_opts *o, vc_demo_result *r) {
    memset(r, 0, sizeof *r);
    if (o->steps < 1) return vc_fail(VC_ERR_ARG, "demo: --steps must be >= 1");
    char *model_dir = vc_path_join(o->out_dir, "sft_model"), *data = vc_path_join(o->out_dir, "data");
    char *train = data ? vc_path_join(data, "train.jsonl") : NULL, *val = data ? vc_path_join(data, "val.jsonl") : NULL;
    vc_status st = model_dir && train && val ? vc_mkdirs(o->out_dir) : VC_ERR_NOMEM;
    if (!st) st = vc_mkdirs(data);
    /* the warm-up model loads on the chosen device; the GRPO run selects the same one from its config */
    vc_train_device dev = { .device = o->device, .param_dtype = o->precision, .device_key = "--device" };
    if (!st) st = vc_train_setup_device(&dev, o->verbose ? stdout : NULL);
    if (!st) st = demo_write_dataset(train, o->seed, 0, DEMO_TRAIN_N);
    if (!st) st = demo_write_dataset(val, o->seed, 1, DEMO_VAL_N);
    if (!st) st = make_sft_model(o, model_dir, r);
    if (!st && o->verbose)
        printf("[2/3] GRPO (verl's trainer loop): %d steps x 32 prompts x 8 samples, reward 1 for the exact sum\n", o->steps);
    if (!st) st = run_grpo(o, model_dir, train, val, r);
    if (!st) r->acc_before = first_value(o->out_dir, "val-core/verlc/addition/acc/mean@1");
    if (!st) st = vc_report_write(o->out_dir, NULL);
    if (!st && o->verbose) {
        char ex[1024];
        double acc = 0;
        vc_model *m = NULL;
        char *hf = vc_path_join(o->out_dir, "hf_model");
        if (hf && !vc_model_load(hf, &m) && !demo_eval(m, o->seed, DEMO_VAL_N, &acc, ex, sizeof ex, 6))
            printf("[3/3] after GRPO, e.g.\n%s", ex);
        vc_model_free(m);
        free(hf);
    }
    free(model_dir);
    free(data);
    free(train);
    free(val);
    return st;
}
