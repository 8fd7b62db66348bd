/* Helpers of the in-process RL trainer tests (test_trainer_ckpt.c, test_trainer_errors.c): the demo's
 * tiny random model with its tokenizer at <dir>/model, and a quiet trainer run from config overrides.
 * Include after src/rl/demo_internal.h. */
#ifndef VC_RL_DEMO_UTIL_H
#define VC_RL_DEMO_UTIL_H
#include "verlc/config.h"
#include "verlc/model.h"
#include "verlc/trainer.h"
#include "vc_test.h"
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* creates dir and writes <dir>/config.json and <dir>/model (random weights from seed, the demo
 * tokenizer); four checks */
static inline void demo_model_setup(const char *dir, uint64_t seed) {
    char *md = vc_path_join(dir, "model"), *cp = vc_path_join(dir, "config.json");
    mkdir(dir, 0755);
    CHECK_OK(demo_write_model_config(cp, DEMO_VOCAB));
    vc_model *m = NULL;
    CHECK_OK(vc_model_init_random(cp, seed, &m));
    CHECK_OK(vc_model_save_hf(m, md, VC_F32));
    CHECK_OK(demo_write_tokenizer(md));
    vc_model_free(m);
    free(md);
    free(cp);
}

/* <dir>/train.jsonl: two addition prompts ("1+2=", "2+2=") of data source ds, in verl's row schema (one check) */
static inline void demo_rows_setup(const char *dir, const char *ds) {
    char p[300], rows[600];
    snprintf(p, sizeof p, "%s/train.jsonl", dir);
    snprintf(rows, sizeof rows,
             "{\"data_source\":\"%s\",\"prompt\":[{\"role\":\"user\",\"content\":\"1+2=\"}],"
             "\"reward_model\":{\"ground_truth\":\"3\"}}\n"
             "{\"data_source\":\"%s\",\"prompt\":[{\"role\":\"user\",\"content\":\"2+2=\"}],"
             "\"reward_model\":{\"ground_truth\":\"4\"}}\n", ds, ds);
    CHECK_OK(vc_write_file_atomic(p, rows, strlen(rows)));
}

/* verl's FileLogger at <dir>/<name>.jsonl for the next run (an old file removed) */
static inline void demo_file_logger(const char *dir, const char *name) {
    char log[300];
    snprintf(log, sizeof log, "%s/%s.jsonl", dir, name);
    unlink(log);
    setenv("VERL_FILE_LOGGER_PATH", log, 1);
}

/* <dir>/rm: a reward model in the demo's vocabulary (LlamaForSequenceClassification, one label, random
 * weights from seed) with the demo tokenizer and its own chat template: contents joined by '+' */
static inline void demo_rm_setup(const char *dir, uint64_t seed) {
    char *rd = vc_path_join(dir, "rm"), *cp = vc_path_join(dir, "rm_config.json");
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"architectures\":[\"LlamaForSequenceClassification\"],\"model_type\":\"llama\",\"vocab_size\":%d,"
             "\"hidden_size\":32,\"num_hidden_layers\":1,\"num_attention_heads\":4,\"intermediate_size\":64,"
             "\"max_position_embeddings\":64,\"rms_norm_eps\":1e-5,\"rope_theta\":10000,\"hidden_act\":\"silu\","
             "\"id2label\":{\"0\":\"LABEL_0\"},\"eos_token_id\":1,\"pad_token_id\":0,\"torch_dtype\":\"float32\"}",
             DEMO_VOCAB);
    CHECK_OK(vc_write_file_atomic(cp, cfg, strlen(cfg)));
    vc_model *m = NULL;
    CHECK_OK(vc_model_init_random(cp, seed, &m));
    CHECK_OK(vc_model_save_hf(m, rd, VC_F32));
    CHECK_OK(demo_write_tokenizer(rd));
    char *tc = vc_path_join(rd, "tokenizer_config.json");
    static const char TC[] = "{\"eos_token\":\"<eos>\",\"pad_token\":\"<pad>\",\"model_max_length\":64,"
                             "\"chat_template\":\"{% for m in messages %}{{ m['content'] }}+{% endfor %}\"}";
    CHECK_OK(vc_write_file_atomic(tc, TC, strlen(TC)));
    vc_model_free(m);
    free(tc);
    free(rd);
    free(cp);
}

/* loads a config from "|"-separated overrides (buf is split in place; engine: VC_ENGINE_DP, or the defaults of
 * verl's ppo_megatron_trainer or later verl's veomni engine) and runs vc_rl_trainer_new and vc_rl_trainer_fit
 * quietly; *step (when fit succeeded): the trainer's global steps done */
static inline vc_status demo_fit_ex(char *buf, int engine, int64_t *step) {
    char *argv[64];
    int n = 0;
    for (char *s = strtok(buf, "|"); s && n < 64; s = strtok(NULL, "|")) argv[n++] = s;
    vc_config *cfg = NULL;
    vc_status st = vc_config_load_ex(NULL, engine, n, argv, &cfg);
    if (!st) {
        vc_config_set_quiet(cfg, 1);
        vc_rl_trainer *t = NULL;
        st = vc_rl_trainer_new(cfg, &t);
        if (!st) {
            vc_rl_trainer_set_verbose(t, 0);
            st = vc_rl_trainer_fit(t);
        }
        if (!st) *step = vc_rl_trainer_step(t);
        vc_rl_trainer_free(t);
    }
    vc_config_free(cfg);
    return st;
}

/* a GRPO run of n_lrs steps on the demo model and rows of <dir> (demo_model_setup, demo_rows_setup) on an engine's
 * defaults, its verl file logger at <dir>/<name>.jsonl, with "|"-separated extra overrides; lrs: each step's
 * actor/lr (one check: every step logged) */
static inline vc_status demo_run_lrs(const char *dir, int engine, const char *name, const char *extra, double *lrs,
                                     int n_lrs) {
    char buf[4096], log[300];
    demo_file_logger(dir, name);
    snprintf(log, sizeof log, "%s/%s.jsonl", dir, name);
    snprintf(buf, sizeof buf,
             "actor_rollout_ref.model.path=%s/model|data.train_files=%s/train.jsonl|data.val_files=null|"
             "data.train_batch_size=2|data.max_prompt_length=16|data.max_response_length=3|"
             "actor_rollout_ref.rollout.n=2|algorithm.adv_estimator=grpo|actor_rollout_ref.actor.ppo_mini_batch_size=2|"
             "actor_rollout_ref.actor.optim.lr=1e-2|trainer.total_training_steps=%d|trainer.save_freq=-1|"
             "trainer.logger=[file]|trainer.default_local_dir=%s/%s|%s",
             dir, dir, n_lrs, dir, name, extra);
    int64_t done = 0;
    vc_status st = demo_fit_ex(buf, engine, &done);
    if (st) return st;
    FILE *f = fopen(log, "r");
    char *line = NULL;
    size_t cap = 0;
    int k = 0;
    while (f && getline(&line, &cap, f) > 0 && k < n_lrs) {
        const char *p = strstr(line, "\"actor/lr\":");
        lrs[k++] = p ? atof(p + 11) : -1;
    }
    free(line);
    if (f) fclose(f);
    CHECK_MSG(k == n_lrs, "%s: %d logged steps", name, k);
    return VC_OK;
}

/* ... on verl's ppo_trainer defaults */
static inline vc_status demo_fit(char *buf, int64_t *step) { return demo_fit_ex(buf, 0, step); }
#endif