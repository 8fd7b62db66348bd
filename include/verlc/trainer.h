/* verlc trainer: verl's PPO/GRPO loop (verl/trainer/ppo/ray_trainer.py RayPPOTrainer.fit) in one
 * process: rollout -> rewards -> old/ref log-probs -> values -> KL-in-reward -> advantages ->
 * critic and actor updates -> metrics, validation and checkpoints. Configured with verl's keys
 * (include/verlc/config.h). The actor and the rollout share one vc_model. */
#ifndef VERLC_TRAINER_H
#define VERLC_TRAINER_H
#include "verlc/config.h"
#include "verlc/core.h"
#include <stddef.h>
#include <stdint.h>

struct vc_tokenizer;
struct vc_chat_template;
struct vc_jsonl;

/* ---- prompt datasets (verl's RLHFDataset) -------------------------------------------------------- */
typedef struct vc_rl_prompt {
    int32_t *ids;              /* chat-template-rendered, tokenized prompt */
    int64_t len;
    const char *data_source;   /* points into the dataset */
    const char *ground_truth;  /* text of reward_model.ground_truth, NULL when absent */
    char *extra_info;          /* JSON text of extra_info or NULL */
    int64_t line;              /* source line */
} vc_rl_prompt;

typedef struct vc_rl_dataset {
    struct vc_jsonl *rows;
    size_t n;
    vc_rl_prompt *p;
    size_t n_filtered;         /* prompts dropped by filter_overlong_prompts */
    size_t n_truncated;
} vc_rl_dataset;

typedef struct vc_rl_data_opts {
    const char *prompt_key;     /* "prompt" */
    int64_t max_prompt_length;  /* tokens */
    int filter_overlong;        /* drop longer prompts (counted) */
    const char *truncation;     /* "error", "left", "right", "middle" */
    int64_t max_samples;        /* < 0: all */
    int need_ground_truth;      /* rows without reward_model.ground_truth are an error */
} vc_rl_data_opts;

/* Reads a JSONL file in verl's row schema; errors name file:line and the key. */
vc_status vc_rl_dataset_load(const char *path, const struct vc_tokenizer *tok, const struct vc_chat_template *tmpl,
                             const vc_rl_data_opts *opts, vc_rl_dataset **out);
void vc_rl_dataset_free(vc_rl_dataset *d);

/* ---- the trainer -------------------------------------------------------------------------------- */
typedef struct vc_rl_trainer vc_rl_trainer;

/* Loads model(s), tokenizer, datasets and the reward function from the config; resumes from the
 * latest checkpoint in trainer.default_local_dir when trainer.resume_mode is auto. */
vc_status vc_rl_trainer_new(const vc_config *cfg, vc_rl_trainer **out);
/* Runs validation (when configured), the training steps, checkpoints and the final export. */
vc_status vc_rl_trainer_fit(vc_rl_trainer *t);
/* One validation pass; its metrics are returned by vc_rl_trainer_metric afterwards. */
vc_status vc_rl_trainer_validate(vc_rl_trainer *t);
/* Latest value of a metric ("val-core/openai/gsm8k/acc/mean@1", "critic/score/mean", ...). */
int vc_rl_trainer_metric(const vc_rl_trainer *t, const char *name, double *value);
int64_t vc_rl_trainer_step(const vc_rl_trainer *t); /* global steps done */
/* Console output: 0 quiet, 1 one line per step (default). */
void vc_rl_trainer_set_verbose(vc_rl_trainer *t, int verbose);
void vc_rl_trainer_free(vc_rl_trainer *t);

/* new + fit + free */
vc_status vc_rl_train_run(const vc_config *cfg);

/* ---- `verlc demo`: RL that runs anywhere in minutes -------------------------------------------- */
typedef struct vc_demo_opts {
    uint64_t seed;       /* everything (data, init, sampling) derives from it */
    int steps;           /* GRPO steps */
    const char *out_dir; /* run directory */
    int verbose;
    int n_overrides;     /* extra verl key=value overrides for the GRPO run (after the demo's own) */
    char **overrides;
} vc_demo_opts;

typedef struct vc_demo_result {
    double sft_acc;      /* greedy validation accuracy after the warm-up */
    double acc_before;   /* val-core/verlc/addition/acc/mean@1 before GRPO (trainer's own validation) */
    double acc_after;    /* ... after the last GRPO step */
    int sft_steps;
    double sft_seconds, rl_seconds;
} vc_demo_result;

vc_status vc_demo_run(const vc_demo_opts *o, vc_demo_result *r);

#endif
