/* Internal interfaces of the RL trainer (src/rl/trainer*.c, dataset.c, demo*.c). */
#ifndef VC_RL_INTERNAL_H
#define VC_RL_INTERNAL_H
#include "verlc/config.h"
#include "verlc/model.h"
#include "verlc/optim.h"
#include "verlc/rl.h"
#include "verlc/rollout.h"
#include "verlc/train.h"
#include "verlc/trainer.h"
#include "verlc/vision.h"
#include "rollout_corr.h"
#include <stdint.h>

struct cJSON;
struct vc_tokenizer;
struct vc_chat_template;
struct vc_reward_proc;

/* ---- metrics: an ordered list of (name, value) for one step ---- */
typedef struct rl_metrics {
    int n, cap;
    char **name;
    double *value;
} rl_metrics;
void rl_metrics_set(rl_metrics *m, const char *name, double v);
void rl_metrics_setf(rl_metrics *m, double v, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int rl_metrics_get(const rl_metrics *m, const char *name, double *v);
void rl_metrics_clear(rl_metrics *m);
void rl_metrics_free(rl_metrics *m);
/* one JSON object line {"step": N, name: value, ...} appended to path */
vc_status rl_metrics_append_jsonl(const rl_metrics *m, int64_t step, const char *path);
void rl_metrics_console(const rl_metrics *m, int64_t step, int64_t total, FILE *f);

/* ---- the images of a step's prompts (rl_images.c) ---- */
typedef struct rl_images {
    const vc_rl_dataset *d;  /* NULL: its dataset has no images */
    vc_images *im;           /* [d->n] prompt i's images once made (n 0: none) */
    uint8_t *loaded;         /* [d->n] */
} rl_images;
/* for d's prompts (nothing when d has no images) */
vc_status rl_images_init(rl_images *c, const vc_rl_dataset *d);
/* prompt's images (made on first use; *out NULL when it has none or c is NULL) */
vc_status rl_images_get(rl_images *c, int prompt, const vc_images **out);
/* frees the images made so far (the end of a step) */
void rl_images_drop(rl_images *c);
void rl_images_free(rl_images *c);

/* ---- the rollout batch: B responses, [B,T] arrays with T = longest response ---- */
typedef struct rl_batch {
    int B, T;
    int64_t *cu;          /* [B+1] offsets of prompt+response sequences in ids */
    int32_t *ids;         /* packed prompt+response tokens */
    int64_t *plen, *rlen; /* [B] */
    int *prompt;          /* [B] dataset prompt index */
    char **uid;           /* [B] group id (one per prompt) */
    int *finish;          /* [B] */
    int *turns;           /* [B] verl's num_turns of each response (2: one prompt, one answer; 0: unknown) */
    char **text;          /* [B] decoded response */
    char **info;          /* [B] the reward's extra values as JSON text (verl's reward_extra_info), or NULL */
    float *mask, *rollout_logp, *old_logp, *ref_logp, *values, *token_scores, *rewards, *adv, *ret; /* [B,T] */
    float *is_w;          /* [B,T] rollout-correction importance weights (algorithm.rollout_correction) */
    float *sum_pi_sq;     /* [B,T] sum_v p_v^2 of the old policy (actor.calculate_sum_pi_squared) */
    float *teacher_logp;  /* [B,T] the distillation teacher's log-prob of each response token (temperature 1) */
    float *score;         /* [B] sequence score */
    int have_old, have_ref, have_values;
    /* verl's router_replay: each token's experts in every layer ([cu[B]][route_lk], route_lk = n_layer * top_k),
     * recorded by the actor's old-log-prob pass when route_rec, replayed by its update; NULL: none */
    int32_t *route;
    int64_t route_lk;
    int route_rec;
    /* distillation's forward_kl_topk: the teacher's top tk_k tokens of each response position and their
     * log-probs ([B, T, tk_k]); NULL: none */
    int32_t *tk_ids;
    float *tk_lp;
    int tk_k;
    /* image-text models: the images of the rows' prompts (b->prompt indexes them; not owned), NULL: none */
    rl_images *imgs;
    /* rows whose tool calls returned images (the multi-turn agent): row i's own images when rimg[i].n > 0 (its
     * prompt's, then the tools' in order; grid and pixels owned) and the tokens they lie in (rspan[i]); NULL: none */
    vc_images *rimg;
    int64_t *rspan;
} rl_batch;
/* row r's images (NULL: none) and the tokens they lie in: its own (rimg) or its prompt's (imgs, within plen) */
vc_status rl_batch_row_images(const rl_batch *b, int r, const vc_images **im, int64_t *span);
/* b->rimg / b->rspan for b->B rows (zeroed) unless there */
vc_status rl_batch_rimg_alloc(rl_batch *b);
/* the images of rows[0..n) (rl_batch_row_images) into batch (g's arena) */
vc_status rl_images_of_rows(vc_graph *g, const rl_batch *b, const int *rows, int n, vc_batch *batch);
/* b->tk_ids / tk_lp for k per response position (zeroed) */
vc_status rl_batch_topk_alloc(rl_batch *b, int k);
/* the teacher's top-k log-probs (temperature 1) of the response positions of rows[0..n) into b->tk_* */
vc_status rl_batch_teacher_topk(vc_model *m, vc_graph *g, rl_batch *b, const int *rows, int n, int64_t max_tokens);
/* the rows of b as byte records (balance_batch's exchange format; *buf allocated), and a batch (T response
 * positions) from such records, checked to fit the buffer */
vc_status rl_batch_rows_write(const rl_batch *b, char **buf, size_t *bytes);
vc_status rl_batch_rows_read(const char *buf, size_t bytes, int T, rl_batch *b);
/* b->route for route_lk ints per token (uninitialised), to be recorded */
vc_status rl_batch_route_alloc(rl_batch *b, int64_t route_lk);
vc_status rl_batch_alloc(rl_batch *b, int B, int T, int64_t n_tokens);
/* the [B,T] float arrays of a batch (mask first), RL_BATCH_ARRAYS of them */
enum { RL_BATCH_ARRAYS = 12 };
void rl_batch_arrays(const rl_batch *b, float *out[RL_BATCH_ARRAYS]);
void rl_batch_free(rl_batch *b);

/* a packed micro-batch of whole rows (graph arena memory) */
typedef struct rl_mb {
    int n;
    const int *rows;
    int64_t *cu;
    int32_t *ids, *tgt;
    vc_batch batch;
} rl_mb;
vc_status rl_mb_build(vc_graph *g, const rl_batch *b, const int *rows, int n, rl_mb *mb);
void rl_mb_gather(const rl_batch *b, const rl_mb *mb, const float *src, float *dst, int to_batch);
/* t's data (backend memory) copied into host memory of g's arena (*out) */
vc_status rl_host_copy(vc_graph *g, const vc_tensor *t, float **out);
float *rl_mb_scatter(vc_graph *g, const rl_batch *b, const rl_mb *mb, const float *w);
/* splits rows into consecutive groups (starts[0..k], starts[k] = n) by a token budget and/or a row count */
int rl_split_rows(const rl_batch *b, const int *rows, int n, int64_t max_tokens, int max_rows, int *starts);

/* log-probs of the response tokens of the batch's rows under m at `temperature` (verl's logits /
 * rollout.temperature), no grad, written into out[B,T] (NULL: not kept), with the entropies and
 * sum_v p_v^2 when those are not NULL; max_tokens bounds one forward's packed tokens. */
vc_status rl_batch_logprobs(vc_model *m, vc_graph *g, rl_batch *b, int64_t max_tokens, float temperature, float *out,
                            float *entropy, float *sum_pi_sq);
/* ... with share: the rows of a group (uid) in one forward compute their common prompt once (actor's
 * use_prefix_grouper; vc_share_plan) */
/* the same over rows[0..n) only (their rows of out written) */
vc_status rl_batch_logprobs_of(vc_model *m, vc_graph *g, rl_batch *b, const int *rows, int n, int64_t max_tokens,
                               float temperature, int share, float *out);
vc_status rl_batch_logprobs_ex(vc_model *m, vc_graph *g, rl_batch *b, int64_t max_tokens, float temperature,
                               int share, float *out, float *entropy, float *sum_pi_sq);
/* the micro-batch's rows' group ids (by uid) and shareable prompt lengths (prompt - 1), in g's arena */
vc_status rl_mb_groups(vc_graph *g, const rl_batch *b, const int *rows, int n, int32_t **group, int64_t **share);

/* ---- critic: backbone + scalar value head ---- */
typedef struct rl_critic {
    vc_model *m;
    float *w, *gw;        /* value head [hidden + 1] (last element is the bias) and its gradient: backend memory */
    vc_tensor head_w, head_b;
    vc_tensor *head[2];   /* &head_w, &head_b */
    vc_tensor **extra;    /* the trainer's extra parameters: the head, then any LoRA adapters */
    int n_extra;
} rl_critic;
/* the critic's backbone (with LoRA adapters when lora->rank > 0) and a zero value head */
typedef struct rl_lora_opts {
    int rank; /* 0: none */
    double alpha;
    char targets[512];
    char exclude[512];    /* a regular expression over module paths (PEFT's exclude_modules); "" none */
    char params[256];     /* later verl's target_parameters (PEFT's: routed experts, router); "" none */
    uint64_t seed;
} rl_lora_opts;
/* vc_model_lora_attach with these options */
vc_status rl_lora_attach(vc_model *m, const rl_lora_opts *o);
vc_status rl_critic_load(const char *path, const rl_lora_opts *lora, rl_critic *c);
void rl_critic_free(rl_critic *c);
vc_tensor *rl_critic_forward(rl_critic *c, vc_graph *g, rl_mb *mb);
vc_status rl_critic_values(rl_critic *c, vc_graph *g, rl_batch *b, int64_t max_tokens, float *out);
/* the memory plan's trial of a no-grad pass (trainer_plan.c): its step-arena peak on one row of seq tokens (the
 * last `tail` of them a response) and on two, extended to `rows` rows (such a pass keeps one layer's temporaries at
 * a time: its memory grows by rows), plus 2% for the steps in which small per-row buffers grow */
typedef enum { RL_PASS_LOGP, RL_PASS_TOPK, RL_PASS_VALUES, RL_PASS_SCORES } rl_pass_kind;
typedef struct {
    rl_pass_kind kind;
    vc_model *m;       /* LOGP, TOPK, SCORES: the model */
    rl_critic *critic; /* VALUES */
    int topk, sum_pi_sq;
    const vc_images *img; /* image-text models: every trial row leads with these images (NULL: none) */
} rl_pass_spec;
vc_status rl_pass_trial_bytes(const rl_pass_spec *p, vc_graph *g, int64_t rows, int64_t seq, int64_t tail,
                              size_t *bytes);
/* out[B]: a classification model's score head (vc_model_score, label 0) at each row's last token */
vc_status rl_batch_last_scores(vc_model *m, vc_graph *g, rl_batch *b, int64_t max_tokens, float *out);

/* ---- the training core (train.h's vc_trainer) configured with verl's keys ---- */
/* prefix: "actor_rollout_ref.actor" or "critic" (reads optim.* and grad_clip); extra: trained tensors
 * outside the model (the critic's value head, which also needs loss_on_hidden). */
vc_status rl_trainer_init(vc_trainer *tr, vc_model *m, vc_tensor *const *extra, int n_extra, const vc_config *cfg,
                          const char *prefix, int64_t total_steps, int loss_on_hidden);

/* ---- updates (trainer_update.c) ---- */
/* later verl's on-policy distillation (distillation.*): a per-token single-sample estimate of
 * KL(student || teacher) from the teacher's log-prob of each sampled token */
typedef struct rl_distill_cfg {
    int on;
    vc_kl_spec spec;      /* distillation_loss.loss_mode: kl / k1, abs, mse / k2, low_var_kl / k3 */
    double coef;          /* distillation_loss_coef, applied with use_task_rewards (else 1) */
    int use_task_rewards; /* the policy loss (pg, entropy, KL loss) stays, plus coef x the distillation loss */
    double clamp;         /* loss_max_clamp: losses clamped to [-clamp, clamp] (<= 0: none) */
    int use_pg;           /* use_policy_gradient: a vanilla policy loss with advantage -loss (detached) */
    vc_pg_config pg;      /* its clip ratios */
    int topk;             /* loss_mode forward_kl_topk: the teacher's top-k tokens per position (0: an estimator) */
    double lp_min_clamp;  /* log_prob_min_clamp of forward_kl_topk (NaN: none) */
    int64_t chunk_rows;   /* the student's head over this many positions at a time (0: vc_model_head_gather's) */
} rl_distill_cfg;

/* later verl's distillation_loss over [n, T] tokens: the per-token loss in kl (dkl its derivative), *o the
 * aggregated loss (or the vanilla policy loss of advantage -loss with use_pg) and verl's metrics, grad its
 * gradient w.r.t. the student's log-probs (tmp: scratch; old: the old log-probs and isw the rollout-correction
 * weights (NULL: none), for use_pg; norm: the mini-batch normalisers, NULL: this call's) */
typedef struct rl_distill_out {
    double loss, abs_loss, loss_min, loss_max, ppo_kl, pg_clipfrac, pg_clipfrac_lower;
} rl_distill_out;
vc_status rl_distill_tokens(const rl_distill_cfg *dc, vc_agg_mode agg, const vc_agg_norm *norm, const float *logp,
                            const float *teacher, const float *old, const float *mask, const float *isw, int n, int T,
                            float *kl, float *dkl, float *tmp, float *grad, rl_distill_out *o);
/* forward_kl_topk's per-position loss sum_k p_t(k) (log p_t(k) - log p_s(k)) over the teacher's top k tokens
 * (s, t: the student's and the teacher's log-probs of them, [P * k]), clamped at log_prob_min_clamp and then
 * at 0 below, as verl's compute_forward_kl_topk: loss[P], ds[P * k] = d loss / d s, the masses sum_k exp;
 * with tids and sids (the teacher's and the student's own top-k token ids, [P * k]; NULL: none) verl's overlap
 * diagnostics: ov_n[P] how many of the teacher's k are among the student's k, ov_adv[P] the mean of
 * -p_t(k) (log p_t(k) - log p_s(k)) over those (0 when none) */
typedef struct rl_topk_out {
    float *loss, *ds, *smass, *tmass, *ov_n, *ov_adv;
} rl_topk_out;
void rl_distill_topk(const rl_distill_cfg *dc, const float *s, const float *t, const int32_t *tids,
                     const int32_t *sids, int64_t P, int k, const rl_topk_out *o);

typedef struct rl_actor_cfg {
    vc_pg_mode mode;
    vc_pg_config pg;
    double entropy_coeff;
    int use_kl_loss;
    double kl_coef;
    vc_kl_spec kl_spec;
    int ppo_epochs, mini_rows, micro_rows; /* micro_rows 0: by tokens only */
    int64_t max_tokens;                    /* 0: no token budget */
    int shuffle;
    int use_is;                            /* token losses weighted by the batch's is_w */
    rl_rc_cfg rc;                          /* algorithm.rollout_correction (bypass mode and the actor's
                                            * rollout_corr/ metrics are computed per micro-batch) */
    uint64_t seed;
    int prefix_share;                      /* actor.use_prefix_grouper: each group's prompt computed once */
    rl_distill_cfg dist;                   /* distillation.*: the loss against b->teacher_logp */
    int legacy;                            /* trainer.use_legacy_worker_impl=enable: verl's legacy FSDP workers'
                                            * per-micro-batch loss normalisation (trainer_update.c) */
    /* seq-mean-token-sum-norm's divisor: verl's responses are padded to rollout.response_length (resp_width), the
     * divisor unless actor.loss_scale_factor (scale_len, 0: unset) names another; 0 and 0: the batch's width */
    int64_t resp_width;
    double scale_len;
    int calc_entropy;                      /* actor.calculate_entropy */
} rl_actor_cfg;
/* whether the update's entropy is verl's actor/entropy: its legacy workers report the update's (the micro-batches'
 * mean) when they compute it (entropy_coeff or calculate_entropy); otherwise, and always on its engine workers,
 * actor/entropy is the old policy's pass over the whole batch (the engine workers' update's is actor/entropy_loss) */
static inline int rl_legacy_update_entropy(const rl_actor_cfg *c) {
    return c->legacy && (c->entropy_coeff != 0 || c->calc_entropy);
}

typedef struct rl_critic_cfg {
    double cliprange_value;
    vc_agg_mode agg;
    int ppo_epochs, mini_rows, micro_rows;
    int64_t max_tokens;
    int shuffle;
    uint64_t seed;
    int legacy; /* as rl_actor_cfg's */
    int64_t resp_width; /* as rl_actor_cfg's */
} rl_critic_cfg;

/* ppo_epochs x mini-batches, one vc_trainer_step each (micro-batching, clipping, AdamW, schedule in
 * src/train/); the PPO losses enter through the step's loss callback. on_policy: old log-probs are the
 * current ones (verl's shortcut for one epoch and one mini-batch). */
vc_status rl_update_actor(vc_trainer *tr, rl_batch *b, const rl_actor_cfg *c, int on_policy, rl_metrics *met);
vc_status rl_update_critic(vc_trainer *tr, rl_critic *cr, rl_batch *b, const rl_critic_cfg *c, rl_metrics *met);

#endif
