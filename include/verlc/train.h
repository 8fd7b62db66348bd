/* verlc training core: one optimiser step over a mini-batch of packed sequences (micro-batches,
 * gradient accumulation, verl's loss aggregation with global normalisers, clipping, AdamW, LR
 * schedule), a memory plan, checkpoints that resume bit-identically, and SFT on top of them.
 *
 * Token alignment: a sequence of tokens x_0..x_{L-1} is scored at positions 0..L-2; position t holds
 * log p(x_{t+1} | x_0..x_t). Masks given by callers are token-aligned (mask[k] = 1: token k is a loss
 * target, as verl's response_mask); micro-batches hand them to loss callbacks position-aligned. */
#ifndef VERLC_TRAIN_H
#define VERLC_TRAIN_H
#include "verlc/core.h"
#include "verlc/data.h"
#include "verlc/dist.h"
#include "verlc/model.h"
#include "verlc/optim.h"
#include "verlc/rl.h"
#include "verlc/tensor.h"

/* ---- mini-batches and micro-batches ------------------------------------------------------------ */
typedef struct vc_minibatch {
    int n_seq;
    const int64_t *cu_seqlens; /* [n_seq + 1] */
    const int32_t *ids;        /* [cu_seqlens[n_seq]] */
    const float *mask;         /* [same] token-aligned loss mask (the first token of a sequence is ignored); NULL = all */
    /* optional [n_seq] group ids (NULL or -1: none): with the trainer's share_prefix, sequences of one group
     * in one micro-batch compute their common leading tokens that carry no loss once (vc_share_plan) */
    const int32_t *group;
    /* optional (NULL: none), verl's router replay: [cu_seqlens[n_seq]][n_layer * top_k] the experts each
     * token was routed to in every layer (a dense layer's unused); the forward routes to them */
    const int32_t *route;
    /* optional [n_seq] (NULL: none), image-text models (include/verlc/vision.h): each sequence's images (NULL or n 0:
     * none), and optional [n_seq] the leading tokens whose image tokens stand for them (its prompt's length; NULL:
     * the whole sequence; vc_batch.image_span). Sequences with images compute their prefixes unshared. */
    const struct vc_images *const *images;
    const int64_t *image_span;
    /* optional instead of images (NULL: none): sequence seq's images (*out NULL or n 0: none), asked for when a
     * micro-batch this rank runs first needs them, so the images of the other ranks' sequences are never made */
    vc_status (*image_get)(void *ctx, int seq, const struct vc_images **out);
    void *image_ctx;
} vc_minibatch;

/* One micro-batch as a loss callback sees it. Arrays are position-aligned and packed. */
typedef struct vc_micro_batch {
    int index, count;          /* this micro-batch and how many the mini-batch has */
    int n_seq;
    const int64_t *cu_seqlens; /* [n_seq + 1] */
    const int32_t *ids;        /* [T] */
    const int32_t *target;     /* [T] ids[t + 1] inside a sequence, -1 at its last position */
    const float *mask;         /* [T] mask of the target token */
    const float *weight;       /* [T] d loss / d token_loss[t] under loss_agg_mode with mini-batch normalisers */
    const uint32_t *seq;       /* [n_seq] index of each sequence in the mini-batch */
    const int64_t *src;        /* [T] index of position t in the mini-batch's token arrays (target: src[t] + 1) */
    int64_t n_tokens;          /* T */
    /* the forward's last hidden states (after the final norm), for losses beyond the log-probs: [hidden_rows,
     * H]; position t's row is hidden_pos[t] (host; NULL: t), shared prompts being computed once */
    vc_tensor *hidden;
    const int32_t *hidden_pos;
    int64_t hidden_rows;
} vc_micro_batch;

/* Mini-batch normalisers, known before the micro-batches run (verl's global_batch_info). */
typedef struct vc_loss_norm {
    double n_tokens;          /* masked target tokens in the mini-batch */
    double n_seqs;            /* sequences with at least one masked token */
    double loss_scale_factor; /* seq-mean-token-sum-norm denominator */
} vc_loss_norm;

/* Custom loss: receives the micro-batch's per-position log-probs (and entropies when the trainer was
 * configured with need_entropy, else NULL) and returns the scalar loss tensor [1] to back-propagate,
 * already normalised for the whole mini-batch (sum over micro-batches = mini-batch loss), e.g.
 * vc_op_dot_const(g, logp, dloss_dlogp) with mb->weight folded in. *value may be set to a metric the
 * caller wants summed (or left alone). */
typedef vc_status (*vc_token_loss_fn)(void *ctx, vc_graph *g, const vc_micro_batch *mb, vc_tensor *logp,
                                      vc_tensor *entropy, vc_tensor **loss);

/* Splits a mini-batch into micro-batches: by count (micro_bs sequences, in order) or, when
 * max_tokens > 0, verl's token-budget balanced partition (use_dynamic_bsz). */
vc_status vc_train_micro_partition(const vc_minibatch *b, int micro_bs, int64_t max_tokens, vc_partition *out);
/* Mini-batch normalisers; loss_scale_factor <= 0 takes the longest sequence's masked token count. */
void vc_train_loss_norm(const vc_minibatch *b, double loss_scale_factor, vc_loss_norm *n);
/* Per-position weights of `count` tokens of one sequence (position-aligned mask) under `mode`. */
vc_status vc_train_token_weights(const float *mask, int64_t count, vc_agg_mode mode, const vc_loss_norm *n,
                                 float *weight);

/* ---- the trainer ---------------------------------------------------------------------------------- */
typedef struct vc_trainer_config {
    vc_adamw_config adamw;
    vc_lr_schedule sched;    /* resolved (vc_lr_schedule_init) */
    double grad_clip;        /* <= 0: measure only */
    vc_agg_mode agg;
    double loss_scale_factor;/* seq-mean-token-sum-norm; <= 0: longest sequence's target count */
    int micro_bs;            /* sequences per micro-batch when max_tokens <= 0 */
    int64_t max_tokens;      /* token budget per micro-batch (use_dynamic_bsz); <= 0: by count */
    int need_entropy;
    int decay_matrices_only; /* weight decay on matrices only (Hugging Face Trainer's rule); 0 (default): on every
                              * trained tensor, as verl's optimizer over module.parameters() */
    float temperature;       /* log-probs and entropies of the logits divided by it (RL: rollout.temperature); <= 0: 1 */
    int checkpointing;       /* recompute layers in backward */
    /* Data parallelism (see "data parallelism" below). comm NULL (or one rank): none. Not owned. */
    vc_comm *comm;
    int sharding;            /* VC_SHARD_NONE, VC_SHARD_ZERO1, VC_SHARD_ZERO2 or VC_SHARD_ZERO3 */
    int local_batch;         /* 0: every rank passes the same global mini-batch; 1: each rank its own part */
    size_t bucket_bytes;     /* gradient/weight communication bucket per rank (0: 32 MiB) */
    int overlap_grad_reduce; /* reduce gradient buckets on a communication thread during the last backward
                              * (ZeRO-2: its chunks, during every backward) */
    int check_every;         /* compare a weights checksum across ranks every N steps (0: never) */
    /* hooks for trainers with their own heads (the RL critic's value head) */
    vc_tensor *const *extra_params; /* trained tensors outside the model (decayed; the array must outlive the trainer) */
    int n_extra_params;
    int loss_on_hidden;      /* the loss callback gets the final hidden states [T, hidden] as `logp` (no LM head, no entropy) */
    int share_prefix;        /* share the loss-free prompt of a mini-batch's groups within a micro-batch (verl's
                              * use_prefix_grouper); the loss callback still sees the micro-batch's own packing */
    int micro_norm;          /* verl b178a3cd's fsdp_sft_trainer: each micro-batch normalised by its own counts, divided
                              * by the rank's micro-batches and averaged over the ranks (global mode only) */
    int micro_norm_dp_tokens;/* with micro_norm: the token count pooled over the ranks' i-th micro-batches (its
                              * data.balance_dp_token) */
    /* mtp_train: the model's MTP layers trained (vc_model_load_mtp; verl's model.mtp.enable_train; 0: a model's MTP
     * rows are frozen, no gradient, kept as they are): the loss gains mtp_scale
     * (mtp_loss_scaling_factor) / n_mtp times each depth's mean cross-entropy over the mini-batch's masked targets of
     * it (depth k at position t: token t + k + 2 of the sequence, under that token's mask), through an LM head whose
     * weights it does not train; mtp_detach: verl's detach_encoder (only the MTP layers learn from it) */
    int mtp_train;
    double mtp_scale;
    int mtp_detach;
} vc_trainer_config;

/* ---- data parallelism ------------------------------------------------------------------------------
 * With cfg.comm of N > 1 ranks (host buffers: "single" or "mpi"), every rank holds the whole model and
 * calls vc_trainer_step together with the others (it is a collective).
 * Global mode (local_batch = 0, SFT): every rank passes the same global mini-batch; the micro-batch
 * partition is computed from it exactly as on one rank, and rank r runs the contiguous block r of the
 * micro-batches (balanced by count; a rank may have none). Normalisers come from the whole mini-batch.
 * Local mode (local_batch = 1, e.g. RL where each rank rolled out its own sequences): each rank passes
 * its part; token and sequence counts are summed over ranks (and the longest sequence maxed) before the
 * micro-batches run, so the loss is aggregated over the global mini-batch exactly as on one rank.
 * Then: gradients are summed in rank order (vc_comm ordered reductions, bucket_bytes at a time), the
 * global gradient norm and clipping use every rank's gradients, and every rank applies the same AdamW
 * update, so the weights stay bitwise identical on every rank (check_every verifies it).
 * VC_SHARD_ZERO1: each rank keeps AdamW moments for 1/N of the flattened parameters only; gradients are
 * reduce-scattered (ordered), each rank updates its shard, and the updated weights are all-gathered.
 * Plain DP and ZeRO-1 give bitwise identical weights (same sums, same norm, elementwise AdamW).
 * The gradient norm with N ranks is sqrt of the rank-order sum of per-shard sums of squares (shards of
 * the flattened parameters, ceil(P / N) each), so it can differ from one rank's in the last bits. */
/* VC_SHARD_ZERO2: ZeRO-1 plus sharded gradients. The model has no full-size gradient buffer: before each
 * micro-batch's backward the trained tensors' grad pointers are packed into a reusable working area (from
 * the tape: two tensors share memory only when their gradients are never live at the same time), and a
 * backward hook reduces each flat chunk of bucket_bytes (ordered all-reduce, fixed order last chunk
 * first) as soon as backward has passed every node that writes it, adding this rank's part into its f32
 * gradient shard and freeing the chunk's tensors for reuse. Every micro-batch is reduced (ranks with
 * fewer micro-batches reduce zeros), so the sums associate per micro-batch first: bitwise equal to
 * ZeRO-1 with one micro-batch per rank, within float rounding otherwise. With one rank: as ZeRO-1. */
/* VC_SHARD_ZERO3: ZeRO-2 plus sharded weights (FSDP's FULL_SHARD). Each rank keeps the f32 weights of its
 * block only (AdamW updates them there) and full copies of the tensors outside the decoder layers; a
 * layer's weights are gathered (broadcast from their owners) into one of two layer-sized slots before the
 * decoder runs it and again before backward reaches it, unless still resident. Same bits as ZeRO-2. Every
 * rank must run the same number of micro-batches per step (token-budget partitions are made equal, as
 * verl's same_micro_num_in_dp; otherwise a one-line error), and overlap_grad_reduce is unsupported.
 * Work outside vc_trainer_step that reads the weights runs between vc_trainer_full_weights(t, 1) and
 * (t, 0) (evaluation, checkpoints and resume do it themselves). See src/train/dp_zero3.c. */
enum { VC_SHARD_NONE = 0, VC_SHARD_ZERO1 = 1, VC_SHARD_ZERO2 = 2, VC_SHARD_ZERO3 = 3 };
/* "none"/"dp"/"ddp", "zero1"/"zero"/"zero-1", "zero2"/"zero-2" or "zero3"/"zero-3"/"fsdp"/"full_shard"
 * (VC_ERR_ARG otherwise). */
vc_status vc_sharding_parse(const char *s, int *out);

void vc_trainer_config_default(vc_trainer_config *c);

typedef struct vc_step_stats {
    double loss;             /* sum of the micro-batch losses = aggregated mini-batch loss */
    double grad_norm;        /* before clipping */
    double lr;
    int skipped;             /* non-finite loss or gradient norm: no update */
    int n_micro;
    int64_t n_tokens;        /* tokens of the micro-batches */
    int64_t n_shared;        /* of those, prompt tokens computed once for their group instead (share_prefix) */
    int64_t n_loss_tokens;   /* masked targets */
    double seconds;
    /* data parallelism: gradient buckets reduced, and how many of them were final before the last
     * backward ended, so the communication thread could reduce them during it (overlap_grad_reduce; 0 otherwise) */
    int n_buckets, n_buckets_early;
    int64_t n_gathers;       /* ZeRO-3: decoder layers gathered in this step (forward and backward) */
    int n_mtp;               /* trained MTP layers: mtp_loss[k] depth k's mean cross-entropy (verl's mtp_losses) */
    double mtp_loss[VC_MTP_MAX];
} vc_step_stats;

typedef struct vc_trainer {
    vc_model *model;
    vc_trainer_config cfg;
    vc_adamw opt;
    vc_graph *g;
    int borrowed_g;          /* g is another trainer's (vc_trainer_use_graph) */
    int n_params;            /* trained tensors (grad != NULL) */
    float **grads;
    size_t *sizes;
    int64_t step;            /* trainer steps taken (skipped ones included: the LR schedule position) */
    int64_t sched_pos;       /* >= 0: the LR schedule's position for the next steps instead of step (RL: the update's
                              * index, as verl steps its scheduler once per training step, after all its mini-batches
                              * and epochs); -1 (vc_trainer_init): step */
    int64_t n_skipped;
    /* data parallelism (from cfg.comm; rank 0 of 1 without) */
    int rank, world;
    struct vc_trainer_dp *dp; /* NULL without a communicator of more than one rank */
    /* image-text models: images the memory plan's trial gives its first row (their tokens leading it), e.g. the
     * largest prompt's, so the vision tower's activations are measured too; NULL: none. Not owned. */
    const struct vc_images *plan_images;
} vc_trainer;

/* Parameter groups from the model (buffers without grad are skipped; weight decay on every tensor, or on
 * matrices only with cfg.decay_matrices_only),
 * gradient buffers, AdamW state over the model's f32 weights (the master weights). */
vc_status vc_trainer_init(vc_trainer *t, vc_model *m, const vc_trainer_config *cfg);
void vc_trainer_free(vc_trainer *t);
/* t's steps run in g's arena (another trainer's, whose steps never overlap t's: an RL critic beside its actor):
 * t's own graph is freed, g stays its owner's */
void vc_trainer_use_graph(vc_trainer *t, vc_graph *g);
/* One optimiser step over mini-batch b. fn == NULL: negative log-likelihood of the masked targets.
 * A non-finite loss or gradient norm skips the update (counted in n_skipped); the step still counts. With grad_clip,
 * the AdamW step reads the gradients times clipping's factor and their buffers keep what was accumulated (Muon and
 * data parallelism scale them in place first); st->grad_norm is the norm before clipping. */
vc_status vc_trainer_step(vc_trainer *t, const vc_minibatch *b, vc_token_loss_fn fn, void *ctx, vc_step_stats *st);
/* Accumulates gradients of b into the model's grad buffers without stepping (for tests and custom loops).
 * With data parallelism: this rank's share only, gradients not reduced (stats local too). */
vc_status vc_trainer_accumulate(vc_trainer *t, const vc_minibatch *b, vc_token_loss_fn fn, void *ctx,
                                vc_step_stats *st);
/* Forward only: sum of NLL over the masked targets and their count (validation loss = sum / count).
 * With data parallelism, a collective: the sums are over the global mini-batch, on every rank. */
vc_status vc_trainer_eval_nll(vc_trainer *t, const vc_minibatch *b, double *nll_sum, double *n_tok);
/* Each sequence's masked NLL sum and target count (nll[b->n_seq], tok[b->n_seq]; every rank gets all of them) */
vc_status vc_trainer_eval_seq_nll(vc_trainer *t, const vc_minibatch *b, double *nll, double *tok);

/* ---- parameters across the device boundary (src/train/param_io.c) ---------------------------------
 * Tensor data and gradients live in backend memory (device memory on a GPU, see include/verlc/device.h);
 * these copy a parameter (p->n floats) to or from host floats and wait for the copy. */
vc_status vc_train_param_read(const vc_tensor *p, float *dst);
vc_status vc_train_param_write(vc_tensor *p, const float *src);
/* A new host copy of p (caller frees). */
vc_status vc_train_param_host(const vc_tensor *p, float **out);
/* Zeroed backend memory of n floats from the active backend (NULL on failure, message set), and its free:
 * for trained tensors outside the model (the critic's value head). */
float *vc_train_backend_alloc(size_t n_floats);
void vc_train_backend_free(float *p);

/* ---- device and precision (src/train/device_setup.c) ---------------------------------------------
 * verl's trainer.device ("auto": cuda:0 when a GPU is usable, else cpu; "cpu", "cuda", "cuda:N", "sim")
 * and fsdp_config.mixed_precision: param_dtype fp32 | bf16 (bf16: GEMM inputs rounded to bf16 with f32
 * accumulation, PyTorch autocast numerics; master weights, gradients, AdamW state and reductions stay
 * f32); reduce_dtype and buffer_dtype must be fp32. Process-wide: call before loading a model. */
typedef struct vc_train_device {
    const char *device;        /* NULL/"" = "auto" */
    const char *param_dtype, *reduce_dtype, *buffer_dtype; /* NULL = fp32 */
    const char *device_key, *precision_key, *reduce_key, *buffer_key; /* option names for messages */
} vc_train_device;
/* Validates the dtypes, selects the device (vc_device_select), sets the matmul precision and prints
 * "verlc: device cpu (trainer.device=auto), matmul precision f32" to log (may be NULL). */
vc_status vc_train_setup_device(const vc_train_device *d, FILE *log);
/* "f32"/"fp32"/"float32" -> 0 (VC_PREC_F32), "bf16"/"bfloat16" -> 1 (VC_PREC_BF16); fp16 is unsupported. */
vc_status vc_train_precision_parse(const char *s, const char *who, int *prec);
const char *vc_train_precision_name(int prec);

/* ---- memory plan ---------------------------------------------------------------------------------- */
/* weights, grads, optim, activations and total are BACKEND memory (device memory on a GPU; host memory
 * on the cpu device): the model's f32 weights, the trained tensors' gradients, this rank's AdamW moments
 * and the step arena's peak (measured; it includes the arena's small host part: tensor headers and tape).
 * host: the trainer's host staging of the largest micro-batch (ids, targets, masks, loss weights). */
typedef struct vc_mem_plan {
    size_t weights, grads, optim, activations, total;
    size_t copies;           /* bf16 copies of the weight matrices a step's GEMMs read (bf16 matmuls; 0 in f32) */
    size_t host;
    size_t available;        /* free device memory on a GPU, else MemAvailable, at planning time (0 when unknown), after
                              * the weights, gradients and AdamW state were allocated; VERLC_MEMORY_AVAILABLE=24G
                              * plans against that much instead (what fits a smaller device) */
    size_t limit;            /* the limit applied to total (0: none) */
    int on_gpu;              /* available is the GPU's free memory */
} vc_mem_plan;

/* Parses "24G", "512M", "1.5GiB", plain bytes. */
vc_status vc_parse_bytes(const char *s, size_t *out);
size_t vc_mem_available(void);
/* what a memory plan may still take: VERLC_MEMORY_AVAILABLE (a byte size: "24G") if set, else the GPU's free memory
 * (on_gpu) or MemAvailable; and the name of that source, for messages */
vc_status vc_plan_available(int on_gpu, size_t *out);
const char *vc_plan_available_source(int on_gpu);
/* the system's used memory (total - free - buffers - page cache, as psutil's virtual_memory().used), and this
 * process's peak resident memory (VmHWM), bytes; 0 where /proc cannot tell */
size_t vc_mem_used_system(void);
size_t vc_mem_peak_rss(void);
/* verl's memory metrics, GiB: perf/max_memory_allocated_gb and perf/max_memory_reserved_gb (the CUDA pool's
 * high-water marks; on the CPU, without a pool, both the process's peak resident memory; NaN if unknown) and
 * perf/cpu_memory_used_gb (the system's used memory) */
void vc_mem_metrics(double *allocated_gb, double *reserved_gb, double *cpu_used_gb);
/* Measures activations with one trial forward+backward of max_micro_tokens tokens (gradients zeroed
 * afterwards; local, no communication), fills the plan (optim: this rank's AdamW state, 1/N with ZeRO-1)
 * and prints it to `log` (may be NULL), naming the device. Fails with VC_ERR_NOMEM and the numbers when
 * total exceeds max_bytes (> 0), or when max_bytes == 0 and the activations (and bf16 weight copies) exceed the
 * memory available (vc_plan_available: what is left once weights, gradients and AdamW state are allocated). */
vc_status vc_trainer_plan(vc_trainer *t, int64_t max_micro_tokens, size_t max_bytes, FILE *log, vc_mem_plan *plan);
/* ... with the trial micro-batch packed from sequences of at most max_seq_len tokens (the longest row: a token
 * budget far above it would otherwise be measured as one sequence, with attention's quadratic cost) */
vc_status vc_trainer_plan_ex(vc_trainer *t, int64_t max_micro_tokens, int64_t max_seq_len, size_t max_bytes, FILE *log,
                             vc_mem_plan *plan);
/* ... with a loss on the last loss_tail tokens of each trial row only (0: every token), as RL updates have on their
 * responses: the LM head then runs on those positions only, as it does in the updates */
vc_status vc_trainer_plan_rows(vc_trainer *t, int64_t max_micro_tokens, int64_t max_seq_len, int64_t loss_tail,
                               size_t max_bytes, FILE *log, vc_mem_plan *plan);
/* ... with the trainer's own loss callback (NULL: the masked NLL), e.g. a critic's value head on the hidden states */
vc_status vc_trainer_plan_loss(vc_trainer *t, int64_t max_micro_tokens, int64_t max_seq_len, int64_t loss_tail,
                               vc_token_loss_fn fn, void *ctx, size_t max_bytes, FILE *log, vc_mem_plan *plan);
/* ZeRO-3: on 1 gathers the whole model's weights into a full-size buffer on every rank (a collective)
 * for work outside vc_trainer_step; on 0 copies this rank's block back into its master shard (so weights
 * written meanwhile are kept) and frees the buffer. Calls nest. Nothing to do otherwise. */
vc_status vc_trainer_full_weights(vc_trainer *t, int on);
/* The sharding in effect: cfg.sharding with a communicator of more than one rank, else VC_SHARD_NONE. */
int vc_trainer_sharding(const vc_trainer *t);
/* One line per rank with data parallelism: `who` (e.g. "actor"), the sharding, and this rank's bytes of
 * weights, gradients and AdamW state (1/N with ZeRO-1). Prints nothing without data parallelism. */
void vc_trainer_print_memory(const vc_trainer *t, const char *who, FILE *log);

/* ---- checkpoints ---------------------------------------------------------------------------------- */
#define VC_TRAIN_CKPT_FORMAT "verlc-train-checkpoint-1"

/* Everything besides weights and optimiser state that a resumed run needs. */
typedef struct vc_train_state {
    int64_t step, n_skipped;
    int64_t epoch;           /* data cursor */
    int64_t batch;
    uint64_t seed;           /* shuffle and RNG seed (the RNG is counter-based: seed + step is its state) */
    char model_dir[4096];    /* the base Hugging Face directory (absolute) */
    char tokenizer_dir[4096];/* where tokenizer files come from on export ("" = model_dir) */
    char *config_json;       /* the run's configuration as JSON text (owned; may be NULL) */
} vc_train_state;

void vc_train_state_clear(vc_train_state *s);
/* Writes RUN_DIR/step_N atomically (RUN_DIR/.tmp_step_N, fsync, rename), updates
 * RUN_DIR/latest_checkpointed_iteration.txt and keeps the newest keep_last (> 0) checkpoints.
 * *path (may be NULL) receives the directory written (caller frees). */
vc_status vc_train_ckpt_save(const char *run_dir, const vc_trainer *t, const vc_train_state *s, int keep_last,
                             char **path);
/* Writes a trainer's checkpoint contents (model.safetensors, optim.bin, trainer_state.json, ...) into an
 * existing directory: for runs that keep several trainers in one checkpoint (the RL actor and critic).
 * Extra parameters (cfg.extra_params) are in optim.bin but not in model.safetensors: the caller saves them. */
vc_status vc_train_ckpt_write(const char *dir, const vc_trainer *t, const vc_train_state *s);
/* The atomic save of vc_train_ckpt_save for any contents: fill(ctx, tmp) writes into RUN_DIR/.tmp_<prefix>N,
 * which is fsynced and renamed to RUN_DIR/<prefix>N; latest_checkpointed_iteration.txt gets N and only the
 * newest keep_last (> 0) <prefix>M directories are kept. */
vc_status vc_train_ckpt_save_as(const char *run_dir, const char *prefix, int64_t step,
                                vc_status (*fill)(void *ctx, const char *tmp_dir), void *ctx, int keep_last,
                                char **path);
/* The same for data-parallel trainers with sharded optimiser state: a collective over t's ranks; `fill` runs
 * on every rank (rank 0 writes the shared contents, every rank its own shard, e.g. with
 * vc_train_ckpt_write_shard) before rank 0 publishes the directory. */
vc_status vc_train_ckpt_save_as_dp(const char *run_dir, const char *prefix, int64_t step, const vc_trainer *t,
                                   vc_status (*fill)(void *ctx, const char *tmp_dir), void *ctx, int keep_last,
                                   char **path);
/* Writes this rank's optimiser shard (optim_shard_R_of_N.bin) into dir when t is sharded (ZeRO-1), else nothing.
 * vc_train_ckpt_write writes everything else (rank 0). */
vc_status vc_train_ckpt_write_shard(const char *dir, const vc_trainer *t);
/* Whether t keeps only its shard of the optimiser state (every rank must then write its own). */
int vc_trainer_sharded(const vc_trainer *t);
/* The newest step_N in run_dir (by N); VC_ERR_MISSING when there is none. */
vc_status vc_train_ckpt_latest(const char *run_dir, char **path);
/* A checkpoint dir, or a run dir (its latest checkpoint). */
vc_status vc_train_ckpt_resolve(const char *path, char **ckpt_dir);
vc_status vc_train_ckpt_read_state(const char *ckpt_dir, vc_train_state *s);
/* Checkpoints and data parallelism: vc_train_ckpt_save and vc_train_ckpt_load are collectives when the
 * trainer has a communicator. Rank 0 writes the weights, trainer state and (plain DP) optim.bin; with
 * ZeRO-1 every rank writes optim_shard_R_of_N.bin (its flat range of the moments). Loading reads the
 * moments of this rank's range from either layout, so a checkpoint resumes on any number of ranks, with
 * or without sharding. The run directory must be shared by the ranks (one file system). */
/* Overwrites the model's parameters with the checkpoint's (names and shapes must match exactly). */
vc_status vc_train_ckpt_load_weights(const char *ckpt_dir, vc_model *m);
/* Weights, optimiser state, step and skip count into a trainer built on the same model. */
vc_status vc_train_ckpt_load(const char *ckpt_dir, vc_trainer *t, vc_train_state *s);
/* Hugging Face directory from a checkpoint (or run dir): base structure from the recorded model dir
 * (or the checkpoint's model_config.json), trained weights, vc_model_save_hf. dtype VC_UNKNOWN-like
 * values (< 0) mean the base checkpoint's dtype. */
vc_status vc_train_export(const char *ckpt_or_run, const char *out_dir, int dtype);

/* ---- SFT ------------------------------------------------------------------------------------------ */
typedef struct vc_sft_config {
    const char *model_dir, *tokenizer_dir, *train_path, *val_path, *out_dir;
    const char *dump_data;   /* --dump-data FILE: the tokenized train rows as JSONL, then stop (NULL: train) */
    const char *prompt_key, *response_key, *messages_key; /* "prompt", "response", "messages" */
    const char *tools_key, *enable_thinking_key; /* messages rows: the chat template's tools and
                                                  * enable_thinking per row ("tools", "enable_thinking") */
    const char *image_key;   /* messages rows: the row's images ("images"; image-text models, docs/images.md) */
    const char *video_key;   /* messages rows: the row's videos ("videos"; Qwen2-VL and Qwen2.5-VL models) */
    const char *enable_thinking_default; /* later verl's data.enable_thinking_default: "true" / "false" for rows
                                          * without the key; NULL or "none": the template's default */
    const char *prompt_dict_keys, *response_dict_keys; /* verl's: keys into nested prompt / response fields
                                                        * ("[a,b]" or "a,b": field[a][b]); NULL none */
    int multiturn;           /* data.multiturn.enable: -1 either kind of row, 1 messages rows only, 0 prompt/response */
    int ignore_ids_mismatch; /* data.ignore_input_ids_mismatch: a messages row whose turns rendered one by one differ
                              * from the whole conversation trains on the turns (as verl), instead of stopping */
    const char *truncation;  /* "error" | "left" | "right" */
    const char *resume;      /* NULL, "latest"/"auto" or a checkpoint dir */
    int64_t max_length;      /* 1024 */
    int64_t train_batch_size;/* 32 sequences per optimiser step */
    int micro_batch_size;    /* 4 */
    int use_dynamic_bsz;     /* 0 */
    int64_t max_token_len;   /* token budget per micro-batch when use_dynamic_bsz (default max_length * micro) */
    int epochs;              /* 1 */
    int64_t total_steps;     /* 0: epochs * batches per epoch */
    int64_t max_steps;       /* stop after this step (the schedule still uses total_steps); 0 = no limit */
    int shuffle;             /* 1 */
    uint64_t seed;           /* trainer.seed: 1 (LoRA adapters' initialisation) */
    uint64_t data_seed;      /* data.seed: the shuffle's, verl's DistributedSampler's seed 0 (epoch e: randperm of seed + e) */
    double lr, weight_decay, beta1, beta2, eps, grad_clip, warmup_ratio, min_lr_ratio;
    double num_cycles;       /* optim.num_cycles: the cosine schedule's (0.5) */
    int zero_indexed_step;   /* optim.zero_indexed_step (later verl): 0 counts the cosine schedule from 1 */
    int64_t warmup_steps;
    const char *lr_scheduler;/* "cosine" */
    /* optim=megatron (verl's Megatron optimizer group, with engine=megatron): Megatron-core's adam (betas 0.9,
     * 0.999 and eps 1e-8, which verl does not pass on; no weight decay on biases and norms) and its
     * OptimizerParamScheduler with the keys below (and optim.lr, lr_warmup_steps(_ratio), weight_decay) */
    int megatron_optim;
    int mlite_engine;        /* engine=mlite (Megatron-lite): optim=megatron runs its optimizer and scheduler (betas and
                              * eps as set, vc_lr_mlite_init) */
    double lr_warmup_init, min_lr;
    /* optim=automodel (verl's AutomodelOptimizerConfig, with engine=automodel): torch's AdamW over every tensor with
     * optim.betas / eps / weight_decay, and Automodel's OptimizerParamScheduler (Megatron's) from init_lr = lr *
     * init_lr_ratio to lr, then decaying to lr * min_lr_ratio in the style optim.lr_scheduler_type over the total steps
     * (the group's defaults, applied by vc_sft_config_select before the keys: betas [0.9, 0.999], init_lr_ratio 0.1,
     * min_lr_ratio 0.01, cosine, no warmup) */
    int automodel_optim;
    double init_lr_ratio;
    /* optim.optimizer=FusedAdam from optim.optimizer_impl=transformer_engine.pytorch.optimizers (TransformerEngine's
     * FusedAdam: AdamW's update), with optim.exp_avg_dtype / exp_avg_sq_dtype (bf16: the moments stored in bf16,
     * vc_adamw_config); optim=megatron: those dtypes with optim.use_precision_aware_optimizer in bf16 runs only, as verl
     * passes them to Megatron (its CPU offload keeps fp32 moments) */
    int fused_adam, te_optim_impl, precision_aware, optimizer_cpu_offload;
    /* optim=megatron with optim.optimizer=muon (later verl): Megatron-core's Muon on the matrices with the muon_* keys
     * (vc_muon_configure), Megatron's adam on the rest */
    int muon;
    vc_muon_keys muon_keys;
    const char *exp_avg_dtype, *exp_avg_sq_dtype, *main_grads_dtype; /* NULL: fp32 */
    int64_t lr_decay_steps, lr_wsd_decay_steps;   /* -1: the total steps / none */
    const char *lr_decay_style, *lr_wsd_decay_style; /* "constant", "exponential" */
    const char *loss_agg_mode; /* "token-mean" */
    const char *legacy_impl; /* trainer.use_legacy_worker_impl: "enable" normalises as verl b178a3cd's fsdp_sft_trainer
                              * (each micro-batch by itself; "auto", "disable": the global batch's token mean) */
    int balance_dp_token;    /* data.balance_dp_token, with "enable": the ranks' i-th micro-batches' tokens pooled */
    int test_freq, save_freq, keep_last; /* steps; 0 = only at the end / keep all; VC_SFT_EACH_EPOCH: verl's
                                          * "after_each_epoch" (the steps of an epoch) */
    int skip_bad_lines;      /* malformed JSONL lines: skip and count (1) or stop (0) */
    int64_t train_max_samples, val_max_samples; /* > 0: the first N rows only (verl's max_samples without shuffle) */
    const char *chat_template; /* data.chat_template: a Jinja template in place of the tokenizer's (NULL: its own) */
    const char *chat_kwargs;   /* data.apply_chat_template_kwargs: a mapping ("{enable_thinking: false}"), NULL none */
    const char *chat_kw_key[8], *chat_kw_val[8]; /* data.apply_chat_template_kwargs.KEY=VALUE, set on top of it */
    int n_chat_kw;
    int checkpointing;
    int lora_rank;           /* 0: full fine-tuning; > 0: LoRA adapters (model.lora_rank) */
    double lora_alpha;       /* 16 */
    const char *lora_targets; /* model.target_modules: all-linear or names */
    const char *lora_exclude; /* model.exclude_modules: a regular expression over module paths, or NULL */
    const char *lora_params;  /* model.target_parameters (later verl; PEFT's): routed experts / router, or NULL */
    const char *lora_from;    /* model.lora_adapter_path: the adapters start from this PEFT directory, or NULL */
    int mtp_enable;          /* model.mtp.enable: the checkpoint must have MTP layers (kept, copied through on export) */
    int mtp_train;           /* model.mtp.enable_train (with enable): those layers trained (vc_model_load_mtp) */
    int mtp_detach;          /* model.mtp.detach_encoder: only they learn from their loss */
    double mtp_scale;        /* model.mtp.mtp_loss_scaling_factor (0.1) */
    int qat_enable;          /* engine.qat.enable: quantization-aware training (vc_qat_setup) */
    const char *qat_mode;    /* engine.qat.mode: w4a16 */
    int qat_group;           /* engine.qat.group_size: 16 */
    const char *qat_ignore;  /* engine.qat.ignore_patterns: a YAML list as written (NULL: verl's default) */
    const char *qat_config;  /* engine.qat.quantization_config_path, or NULL */
    int threads;             /* 0: default */
    size_t max_memory;       /* 0: MemAvailable */
    int quiet;
    /* distributed: a communicator (not owned; NULL: vc_sft_run makes one with "auto") */
    vc_comm *comm;
    const char *sharding;    /* "none" | "zero1" | "zero2" */
    int nnodes, n_gpus_per_node; /* when > 0, nnodes * n_gpus_per_node must equal the world size */
    int dp_check_freq;       /* weights checksum across ranks every N steps (0: never) */
    /* device and precision (see vc_train_setup_device) */
    const char *device;      /* trainer.device: "auto" */
    const char *param_dtype, *reduce_dtype, *buffer_dtype; /* model.fsdp_config.mixed_precision.*: "fp32" */
    int overlap_grad_reduce; /* gradient reduction overlapped with the last backward (same bits) */
    const char *logger;      /* trainer.logger: file and tensorboard are written (tracking.h) besides
                              * RUN_DIR/metrics.jsonl; "console" */
    const char *project_name, *experiment_name; /* "gsm8k-sft", "test" (verl's defaults) */
} vc_sft_config;
#define VC_SFT_EACH_EPOCH (-2)

void vc_sft_config_default(vc_sft_config *c);
/* Hydra's group selections among args[0..n) ("KEY=VALUE" strings; others skipped): optim=automodel's defaults,
 * which the keys then override whatever their order */
void vc_sft_config_select(vc_sft_config *c, int n, char *const *args);
/* Sets one key=value (verl-style dotted keys and short names); VC_ERR_ARG names an unknown key. */
vc_status vc_sft_config_set(vc_sft_config *c, const char *key, const char *value);
/* Prints the keys with defaults and meanings. */
void vc_sft_config_help(FILE *f);
/* verl's QAT settings (QATEngineConfig) */
typedef struct {
    int enable;
    const char *mode;         /* "w4a16" (w4a4 refused) */
    int64_t group_size;       /* 16 */
    char **ignore;            /* ignore_patterns (owned) */
    int n_ignore;
    const char *quant_config; /* quantization_config_path: checked where given, else NULL */
} vc_qat_opts;
/* the keys under prefix ("actor_rollout_ref.actor.fsdp_config.qat."), verl's defaults where absent */
struct vc_config;
vc_status vc_qat_opts_read(const struct vc_config *cfg, const char *prefix, vc_qat_opts *o);
/* model.engine.qat.* of an SFT configuration */
vc_status vc_sft_qat_opts(const vc_sft_config *c, vc_qat_opts *o);
void vc_qat_opts_free(vc_qat_opts *o);
/* o onto m (vc_model_qat) when enabled: errors name prefix's keys; zero3: refused; say: one line of what it did */
vc_status vc_qat_setup(vc_model *m, const vc_qat_opts *o, const char *prefix, int zero3, int say);
vc_status vc_sft_run(const vc_sft_config *c);

#endif
