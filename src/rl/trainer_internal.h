/* The trainer's state, shared by src/rl/trainer*.c. */
#ifndef VC_TRAINER_INTERNAL_H
#define VC_TRAINER_INTERNAL_H
#include "rl_internal.h"
#include "sandbox.h"
#include "verlc/data.h"
#include "verlc/dist.h"

#define RL_MAX_EOS 8
#define RL_MAX_GDPO 16

struct vc_rl_trainer {
    const vc_config *cfg;
    vc_model *actor, *ref;
    vc_model **teacher;         /* distillation.teacher_models: n_teacher models, teacher_key[i] the data source
                                 * each serves ("" when one teacher serves every row) */
    char **teacher_key;
    int n_teacher;
    rl_critic critic;
    int use_critic;
    struct vc_tokenizer *tok;
    struct vc_chat_template *tmpl;
    vc_rl_dataset *train, *val;
    rl_images train_img, val_img; /* image-text models: the images of a step's train / validation prompts */
    vc_epoch_iter it;
    vc_trainer atr, ctr;        /* training cores of the actor and the critic */
    vc_rollout_engine *eng;     /* generation on the actor's weights */
    int spec;                   /* ... drafting with the first MTP layer (model.mtp.enable_rollout) */
    int64_t drafts, drafts_kept; /* its drafts since the last step's metrics */
    vc_graph *g;
    rl_actor_cfg acfg;
    rl_critic_cfg ccfg;
    /* data and rollout */
    int batch_prompts, n;
    int64_t max_resp, fwd_tokens; /* fwd_tokens: rollout.log_prob_max_token_len_per_gpu (old log-probs) */
    int64_t ref_tokens, critic_tokens, rm_tokens; /* ref / critic / reward-model forward token budgets */
    size_t planned_act;         /* the memory plan's activations (the actor's arena: updates and passes) */
    int64_t overlong_len;       /* reward_model.overlong_buffer (DAPO): 0 off, else the buffer's tokens */
    char fg_key[8];             /* filter_groups.metric read from the reward's extra values: "acc", "score" or "" */
    int filter_groups, fg_acc, fg_max; /* algorithm.filter_groups (DAPO's dynamic sampling): on, metric acc,
                                         * max_num_gen_batches (<= 0: no bound) */
    int gen_prompts;            /* data.gen_batch_size: prompts per generation batch (filter_groups) */
    /* later verl's skip.rollout: the steps whose generation is read from / dumped to skip_dir (rollout_skip.c) */
    int skip_on, skip_repeat, skip_n;
    int64_t *skip_steps;
    char skip_dir[512], project_name[128];
    double overlong_factor;     /* the penalty at overlong_max */
    int64_t overlong_max;       /* the length the buffer ends at (data.max_response_length, or the dapo
                                 * manager's reward_kwargs.max_resp_len) */
    int overlong_log;           /* overlong_buffer.log: overlong_reward and overlong in the reward's extra values */
    vc_sampling samp, val_samp;
    int val_n;
    int64_t val_batch;          /* data.val_batch_size: prompts per validation batch over all ranks (0: verlc's 64 per
                                 * rank); the samples do not depend on it (streams are keyed by prompt) */
    double kv_fraction;         /* rollout.gpu_memory_utilization */
    int max_seqs;               /* rollout.max_num_seqs (0: the engine's default) */
    int prefill_chunk;          /* rollout.max_num_batched_tokens: prompt tokens computed per step at most */
    int64_t max_prompt;         /* data.max_prompt_length (prompt_length/clip_ratio) */
    int prefix_cache;           /* rollout.enable_prefix_caching: full KV pages reused between sequences (and
                                 * between the turns of a multi-turn rollout) */
    int32_t eos[RL_MAX_EOS];
    int n_eos;
    uint64_t seed;
    /* algorithm */
    char adv[48];
    int norm_adv;
    char gdpo_key[RL_MAX_GDPO][64]; /* adv_estimator=gdpo: algorithm.gdpo_reward_keys */
    float gdpo_w[RL_MAX_GDPO];      /* and their weights */
    int n_gdpo;
    int calc_sum_pi_sq;         /* actor.calculate_sum_pi_squared: sum_v p_v^2 in the old-log-prob pass */
    double old_entropy;         /* the step's old-log-prob pass's entropy by loss_agg_mode over the global batch (verl's
                                 * actor/entropy); NAN where the pass did not run */
    int router_replay;          /* actor.router_replay.mode R2 / R3 (later verl): the old-log-prob pass records every
                                 * MoE layer's experts, the update routes to them (0: disabled) */
    int raw_logprobs;           /* rollout.logprobs_mode=raw_logprobs (default processed_logprobs) */
    double gamma, lam;
    int use_kl_in_reward, need_ref;
    vc_kl_spec kl_reward_spec;
    vc_kl_ctrl kl_ctrl;
    /* trainer */
    int64_t total_steps, step, test_freq, save_freq, critic_warmup, max_ckpt_keep;
    int balance_batch;          /* trainer.balance_batch (several ranks only) */
    char pf_method[16];         /* algorithm.use_pf_ppo with GAE: pf_ppo.reweight_method ("" off) */
    double pf_pow;              /* pf_ppo.weight_pow */
    int lora_rank;              /* actor_rollout_ref.model.lora_rank: LoRA adapters on the actor; the
                                 * reference policy is then the actor with its adapters off (ref == NULL) */
    int val_before_train, val_only;
    const char *rollout_dir, *val_dir; /* trainer.rollout_data_dir, validation_data_dir (NULL: off) */
    const char *out_dir, *model_path;
    char *metrics_path;
    struct vc_tracker *tracker; /* trainer.logger file / tensorboard (rank 0; NULL: neither) */
    int log_val_gen;            /* trainer.log_val_generations when the tensorboard logger is on (else 0) */
    /* reward */
    struct rl_rm *rm;           /* reward_model.enable: the reward model (NULL: rule rewards) */
    struct rl_agent *agent;     /* multi-turn tool agent (NULL: single-turn rollouts) */
    struct cJSON *chat_kwargs;  /* data.apply_chat_template_kwargs (NULL: none) */
    /* the rollout engine call (NULL: vc_rollout_generate on eng); tests script generations with it */
    vc_status (*gen)(void *ctx, const vc_rollout_request *r, int n, const vc_sampling *s, vc_rollout_sample **out,
                     int *n_out);
    void *gen_ctx;
    struct vc_reward_proc *proc;
    const char *reward_cmd;     /* custom_reward_function.path (NULL: built-in scorers) */
    const char *reward_name;    /* custom_reward_function.name (a Python function) */
    char *reward_kwargs;        /* the Python function's extra keyword arguments as JSON (NULL: none) */
    int reward_py;              /* reward_cmd is verl's Python file / pkg:// module (else a program) */
    int reward_mgr;             /* reward_model.reward_manager: RL_RM_* */
    vc_sandbox_opts sandbox;    /* reward_model.sandbox_fusion (url NULL: none): the code data sources' reward */
    char exp_name[128];         /* trainer.experiment_name (the gdpo manager puts it in extra_info) */
    int reward_timeout_ms;
    rl_metrics met;   /* this step */
    rl_metrics last;  /* latest value of every metric */
    int verbose;
    double peak_flops;
    /* data parallelism: comm NULL or one rank = none (not owned unless own_comm) */
    vc_comm *comm;
    int own_comm, rank, world;
};

/* Where this rank's rows sit in the step's global batch (trainer_update.c). NULL: one rank. */
typedef struct rl_dp {
    vc_comm *comm;
    int world;
    int g_off, g_B; /* first global row of this rank, rows of the global batch */
    int g_T;        /* longest response of the global batch (seq-mean-token-sum-norm's default factor) */
    int *g_idx;     /* after balance_batch: each local row's global index, ascending (owned); NULL: g_off + i */
} rl_dp;

/* trainer_update.c: a rank's n rows in an update's epoch as verl's engine workers shuffle them (order[0..n), the
 * generator seeded data_loader_seed + the rank); each mini-batch is the rank's next slice of them */
void rl_engine_rows(int *order, int n, uint64_t seed, int64_t epoch);
/* balance.c: trainer.balance_batch's rows of lengths len[0..GB) over world ranks as verl's _balance_batch deals them:
 * owner[g] its rank, label[g] its place (each rank's rows a block, in verl's order within the rank); start (or NULL):
 * each row's flag whether it starts a group of shared prompts (use_prefix_grouper: whole groups to the ranks) */
vc_status rl_balance_partition(const int64_t *len, const int64_t *start, int GB, int world, int *owner, int *label);
/* trainer.c: the rollout's, actor's (with algorithm.rollout_correction) and critic's settings of c into t (zeroed), for a
 * tool running an update alone */
vc_status rl_read_update_settings(vc_rl_trainer *t, const vc_config *c);
/* actor_rollout_ref.model.lora_rank > 0: LoRA adapters on t->actor (from lora_adapter_path when given) */
vc_status rl_attach_actor_lora(vc_rl_trainer *t, const vc_config *c);

/* trainer_corr.c: algorithm.rollout_correction over the global batch (decoupled mode, before the
 * advantages): b->is_w from old_logp vs rollout_logp (truncated, optionally batch-normalised), the
 * rejection mask applied to b->mask, and the rollout_corr/ metrics (t->acfg.rc) */
vc_status rl_rollout_correction(vc_rl_trainer *t, rl_batch *b, rl_metrics *met);

/* balance.c: trainer.balance_batch, rows moved between ranks for equal work (dp->g_idx set) */
vc_status rl_balance_batch(vc_rl_trainer *t, rl_batch *b, rl_dp *dp, rl_metrics *met);
/* dynamic_sampling.c: DAPO's filter_groups rollout: a scored batch of data.train_batch_size groups with
 * varied rewards (this rank's share), drawn over *n_rounds generation batches */
vc_status rl_dynamic_rollout(vc_rl_trainer *t, rl_metrics *met, rl_batch *out, int *n_rounds);
/* this rank's rows replaced by rows of the step's global batch: local row i becomes global row src[i]
 * (rows may repeat; every rank passes its own src, all ranks take part); before balance_batch */
vc_status rl_batch_take_global(vc_rl_trainer *t, rl_batch *b, const rl_dp *dp, const int *src);
/* pf_ppo.c: algorithm.use_pf_ppo (GAE): the global batch resampled with replacement by reward weights */
vc_status rl_pf_ppo(vc_rl_trainer *t, rl_batch *b, const rl_dp *dp);
/* weights of verl's compute_pf_ppo_reweight_data (method: pow, max_min, max_random) for n sequence scores */
vc_status rl_pf_weights(const char *method, double weight_pow, const double *score, int n, double *w);
/* rows[0..n) of src appended to acc (which may be empty: B 0) */
vc_status rl_batch_append_rows(rl_batch *acc, const rl_batch *src, const int *rows, int n);

/* trainer_update.c: the training cores with data parallelism (local_batch = 1 over comm) */
/* <prefix>.strategy is megatron (verl's ppo_megatron_trainer): Megatron-core's optimizer and schedule */
int rl_strategy_megatron(const vc_config *cfg, const char *prefix);
/* <prefix>.strategy is veomni (later verl's model_engine=veomni): VeOmni's optimizer keys and schedule */
int rl_strategy_veomni(const vc_config *cfg, const char *prefix);
/* Megatron-lite's actor (mlite_actor): <prefix>.strategy mlite */
int rl_strategy_mlite(const vc_config *cfg, const char *prefix);
vc_status rl_trainer_init_dp(vc_trainer *tr, vc_model *m, vc_tensor *const *extra, int n_extra, const vc_config *cfg,
                             const char *prefix, int64_t total_steps, int loss_on_hidden, vc_comm *comm);
vc_status rl_update_actor_dp(vc_trainer *tr, rl_batch *b, const rl_actor_cfg *c, int on_policy, const rl_dp *dp,
                             rl_metrics *met);
vc_status rl_update_critic_dp(vc_trainer *tr, rl_critic *cr, rl_batch *b, const rl_critic_cfg *c, const rl_dp *dp,
                              rl_metrics *met);

/* trainer_dist.c: reductions over the trainer's ranks (no-ops on one rank) */
vc_status rl_dist_reduce(vc_rl_trainer *t, double *v, int n, vc_reduce_op op);
/* this rank's contiguous block [*lo, *hi) of n items */
void rl_dist_block(const vc_rl_trainer *t, int n, int *lo, int *hi);
/* every rank learns whether any failed (st of this rank, or VC_ERR_IO naming the peer failure) */
vc_status rl_dist_agree(vc_rl_trainer *t, vc_status st, const char *what);
/* rollout_skip.c: this rank's prompts idx[0..n) generated (rl_rollout_batch with the training sampling and
 * key), or for a step of skip.rollout.steps read from its dump when there and dumped otherwise; round: the
 * generation batch of the step (DAPO's dynamic sampling draws several) */
vc_status rl_rollout_or_skip(vc_rl_trainer *t, const uint32_t *idx, int n, uint64_t key, int round, rl_batch *b);
vc_status rl_dist_check_world(vc_rl_trainer *t, const vc_config *cfg);
/* <prefix>.zero_stage: 0 (plain data parallelism) or 1 (ZeRO-1) into *sharding (VC_SHARD_*);
 * <prefix>.overlap_grad_reduce (bool) into *overlap. */
vc_status rl_dist_sharding(const vc_config *cfg, const char *prefix, int *sharding, int *overlap);
/* Checkpoint contents of every rank into dir: rank 0 everything (fill), every rank its optimiser shards. */
vc_status rl_dist_fill_sharded(vc_rl_trainer *t, const char *dir, vc_status (*fill)(void *ctx, const char *dir));
/* Whether the actor's or the critic's optimiser state is sharded. */
int rl_dist_sharded(const vc_rl_trainer *t);

/* trainer_metrics.c: trainer.logger's file and tensorboard backends (trainer.project_name / experiment_name) */
vc_status rl_open_tracker(vc_rl_trainer *t, const vc_config *c);
vc_status rl_read_val_generations(vc_rl_trainer *t, const vc_config *c);

/* trainer_plan.c: the memory plan before the first step (VC_ERR_NOMEM with the numbers when it cannot fit) */
vc_status rl_memory_plan(vc_rl_trainer *t);

/* trainer_reward.c: verl's reward managers */
enum { RL_RM_NAIVE, RL_RM_PRIME, RL_RM_DAPO, RL_RM_BATCH, RL_RM_GDPO };

/* GDPO (trainer_gdpo.c): the keys and weights; each row's components out[k * B + i]; verl's gdpo/ metrics */
vc_status rl_gdpo_config(vc_rl_trainer *t, const vc_config *c);
vc_status rl_gdpo_scores(const vc_rl_trainer *t, const vc_rl_dataset *d, const rl_batch *b, float *out);
vc_status rl_gdpo_metrics(vc_rl_trainer *t, const vc_rl_dataset *d, const rl_batch *b, rl_metrics *met);
/* reward_model.reward_manager and reward_kwargs, reward_model.overlong_buffer, custom_reward_function.* */
vc_status rl_reward_config(vc_rl_trainer *t, const vc_config *c);
vc_status rl_reward_open(vc_rl_trainer *t);
/* info (NULL: not wanted): verl's reward_extra_info of the row, a JSON object the caller deletes ({"acc": score}
 * for a scalar reward; a math_dapo or custom program's dict as it came); num_turns: the response's (rl_batch.turns,
 * 0: unknown), handed to a custom function in extra_info as verl's naive manager does */
struct cJSON;
vc_status rl_reward_score(vc_rl_trainer *t, const vc_rl_prompt *p, const char *text, int num_turns, double *score,
                          int *failed, struct cJSON **info);
void rl_reward_close(vc_rl_trainer *t);

/* trainer_dump.c: trainer.rollout_data_dir / validation_data_dir; rl_dump_add collects a batch's lines
 * (creating *d), rl_dump_write (every rank) writes DIR/<step>.jsonl from rank 0 and frees d */
typedef struct rl_dump rl_dump;
vc_status rl_dump_add(vc_rl_trainer *t, const vc_rl_dataset *ds, const rl_batch *b, struct cJSON *const *infos,
                      rl_dump **dp);
vc_status rl_dump_write(vc_rl_trainer *t, rl_dump *d, const char *dir);
/* every rank's lines of d to rank 0 (*text malloc'd there; NULL on the other ranks); d stays d's caller's */
vc_status rl_dump_gather(vc_rl_trainer *t, rl_dump *d, char **text, size_t *len);
/* trainer_valgen.c: trainer.log_val_generations with the tensorboard logger: verl's sample of the validation
 * generations (sorted by input, numpy RandomState(42) shuffle, the first N) as one text summary; every rank
 * calls it with its lines (d freed) */
vc_status rl_log_val_generations(vc_rl_trainer *t, rl_dump *d);
void rl_dump_free(rl_dump *d);
/* rl_dump_add + rl_dump_write of one batch */
vc_status rl_dump_batch(vc_rl_trainer *t, const vc_rl_dataset *ds, const rl_batch *b, const char *dir);

/* agent.c: multi-turn tool rollouts (verl's tool_agent loop); rl_agent_open sets t->agent when
 * multi_turn / a tool config / default_agent_loop=tool_agent asks for it */
typedef struct rl_agent rl_agent;
vc_status rl_agent_open(vc_rl_trainer *t, const vc_config *c);
void rl_agent_free(rl_agent *a);
/* a bound on the images the tools may add to one response of prompt p (of dataset d) within max_resp tokens: at most
 * *k images of grid[3] patches or fewer each (k 0: none; only ImageZoomInTool returns images) */
vc_status rl_agent_tool_images(const vc_rl_trainer *t, const vc_rl_dataset *d, const vc_rl_prompt *p, int64_t max_resp,
                               int32_t grid[3], int *k);
vc_status rl_agent_rollout(vc_rl_trainer *t, const vc_rl_dataset *d, const uint32_t *idx, int n, const vc_sampling *s,
                           int n_samples, uint64_t step_key, rl_batch *b);
/* num_turns/{mean,min,max} of the last rollout over every rank */
vc_status rl_agent_metrics(vc_rl_trainer *t, rl_metrics *met);
/* adds the last rollout's num_turns to acc: {sum, count, min, max} */
void rl_agent_turns(const vc_rl_trainer *t, double acc[4]);

/* reward_model.c: reward_model.enable (*out NULL when off); scores[B] of the batch's responses */
typedef struct rl_rm rl_rm;
vc_status rl_rm_open(const vc_config *c, rl_rm **out);
vc_model *rl_rm_model(const rl_rm *rm);
vc_status rl_rm_score(vc_rl_trainer *t, const vc_rl_dataset *d, const rl_batch *b, float *scores);
/* the reward model's longest row for the memory plan, for actor rows of seq tokens ending in tail response tokens:
 * seq when it scores the actor's tokens; re-rendered, the longest prompt of d through its template and tokenizer
 * plus tail, at most reward_model.max_length */
vc_status rl_rm_plan_len(const rl_rm *rm, const vc_rl_dataset *d, int64_t seq, int64_t tail, int64_t *len);
void rl_rm_free(rl_rm *rm);

/* trainer_rollout.c: generates a batch for prompts idx[0..n) of dataset d */
/* DAPO's overlong reward shaping of a response of rlen tokens: min(-(rlen - (max - buffer)) / buffer *
 * factor, 0); 0 without reward_model.overlong_buffer */
double rl_overlong_penalty(const vc_rl_trainer *t, int64_t rlen);
/* the images of d's prompts (t's train or validation set; NULL when it has none) */
rl_images *rl_images_for(vc_rl_trainer *t, const vc_rl_dataset *d);
vc_status rl_rollout_batch(vc_rl_trainer *t, const vc_rl_dataset *d, const uint32_t *idx, int n, const vc_sampling *s,
                           int n_samples, uint64_t step_key, rl_batch *b);
/* scores of a generated batch (token scores at the last response token) */
/* infos: NULL, or [B] reward_extra_info objects (rl_reward_score's; the caller deletes them) */
vc_status rl_score_batch(vc_rl_trainer *t, const vc_rl_dataset *d, rl_batch *b, rl_metrics *met, struct cJSON **infos);

/* trainer_step.c */
vc_status rl_train_step(vc_rl_trainer *t, rl_metrics *met);
vc_status rl_compute_advantages(vc_rl_trainer *t, rl_batch *b, const float *baselines);
vc_status rl_data_metrics(vc_rl_trainer *t, const rl_batch *b, rl_metrics *met);

/* trainer_ckpt.c */
vc_status rl_ckpt_save(vc_rl_trainer *t);
/* finds the latest checkpoint (trainer.resume_mode auto / resume_path) and sets *dir (malloc'd) or NULL */
vc_status rl_ckpt_find(const vc_config *cfg, const char *out_dir, char **dir);
vc_status rl_ckpt_load_state(vc_rl_trainer *t, const char *dir);
vc_status rl_export_hf(vc_rl_trainer *t, const char *dir);
vc_status rl_copy_tokenizer_files(const char *from_dir, const char *to_dir);

/* trainer_val.c */
vc_status rl_validate(vc_rl_trainer *t, rl_metrics *met);

/* val_metrics.c: verl's validation metrics over this rank's samples (whole prompts; comm NULL or one rank:
 * no exchange). info: the reward function's extra values (acc, pred, a custom program's keys), or NULL. */
struct cJSON;
typedef struct rl_val_sample {
    const char *data_source;
    uint64_t uid; /* the prompt: its responses share it */
    double reward;
    const struct cJSON *info;
} rl_val_sample;
vc_status rl_val_metrics(vc_comm *comm, const rl_val_sample *s, int n, rl_metrics *met);

/* The rollout log-probs the batch keeps, by verl's rollout.logprobs_mode: processed_logprobs (its default,
 * as vLLM returns them) under the distribution sampled from (temperature, top-k, top-p, min-p); the model's
 * own (raw_logprobs, and greedy decoding) otherwise. */
static inline const float *rl_rollout_logp(const vc_rl_trainer *t, const vc_rollout_sample *s, const vc_sampling *sp) {
    return t->raw_logprobs || sp->greedy || !s->logp_sampled ? s->logp : s->logp_sampled;
}

/* trainer_rollout.c: the rollout engine's generation (or the test hook t->gen's) */
vc_status rl_generate(vc_rl_trainer *t, const vc_rollout_request *r, int n, const vc_sampling *s,
                      vc_rollout_sample **out, int *n_out);

#endif
