/* Data-parallel internals of the trainer (trainer.c, dp.c, memplan.c, train_ckpt.c, ckpt_dp.c). */
#ifndef VC_TRAINER_DP_H
#define VC_TRAINER_DP_H
#include "verlc/train.h"

/* The trained tensors as one flat vector of n_flat floats (tensor order). With N ranks it is cut into
 * N blocks of shard_len = ceil(n_flat / N) (the last ones padded); rank r owns [r * shard_len, ...). */
struct vc_trainer_dp {
    vc_comm *comm;
    int rank, world, zero1; /* zero1: sharded optimiser state (ZeRO-1 and ZeRO-2) */
    int zero2;            /* also sharded gradients: no full-size gradient buffer (dp_zero2.c) */
    struct vc_dp_zero2 *z2;
    int zero3;            /* also sharded weights, gathered per layer (dp_zero3.c; implies zero2) */
    int lw;               /* layer-wise Muon (muon.layer_wise): each tensor's state on its owner only (vc_adamw_holds) */
    struct vc_dp_zero3 *z3;
    vc_tensor **tens;     /* [n_params] the trained tensors */
    int z2_local;         /* ZeRO-2 micro-batches run now are local (the memory plan's trial): no reduction */
    int dev_comm;         /* the communicator takes device buffers (NCCL): buf is device memory */
    size_t n_flat, shard_len;
    size_t first, count;  /* this rank's range of the flat vector (count may be < shard_len, or 0) */
    size_t *offs;         /* [n_params + 1] flat offset of each trained tensor */
    float **w;            /* [n_params] weights of the trained tensors (backend memory) */
    int *decay;           /* [n_params] */
    float *shard_grad;    /* [shard_len] reduced gradient of this rank's range (ZeRO-1; backend memory) */
    float *buf;           /* [(world + 1) * bucket] communication buffer (vc_comm_mem_alloc: host for MPI) */
    size_t bucket;        /* elements per rank per round */
    /* overlapped reduction (cfg.overlap_grad_reduce, dp_overlap.c) */
    struct vc_dp_overlap *ov;
    int armed;            /* the micro-batch running now is this rank's last of the step */
    int reduced;          /* the gradients of this step are reduced already */
    int early;            /* of them, buckets final before the end of backward (could start during it) */
};

/* vc_trainer_accumulate_ex's use_dp for vc_trainer_step: data parallel, and the reduction may start
 * during the last backward (overlap_grad_reduce) */
#define VC_DP_STEP 2

/* Sets up t->dp and t->opt (the whole model, or this rank's shard with ZeRO-1) from the trained
 * tensors in op[0..t->n_params). Without a communicator of more than one rank: t->opt only. */
vc_status vc_dp_init(vc_trainer *t, const vc_optim_param *op, vc_tensor **tens);
void vc_dp_free(vc_trainer *t);
/* Micro-batches [*first, *first + *count) of n_groups that this rank runs. */
void vc_dp_share(const vc_trainer *t, size_t n_groups, size_t *first, size_t *count);
/* The same for rank `rank` (global mode) */
void vc_dp_share_of(const vc_trainer *t, int rank, size_t n_groups, size_t *first, size_t *count);
/* Local mode: sums token/sequence counts over ranks, maxes the longest-sequence factor. */
vc_status vc_dp_reduce_norm(vc_trainer *t, vc_loss_norm *n, int fixed_factor);
/* Sums x[0..n) over ranks in rank order (f64). */
vc_status vc_dp_sum(vc_trainer *t, double *x, size_t n);
/* After the local backward passes: reduce gradients, global norm, clip, AdamW (unless skipped),
 * all-gather (ZeRO-1). st->loss must already be global. */
vc_status vc_dp_update(vc_trainer *t, vc_step_stats *st);
/* Gradient buckets: their number, the flat range of bucket b (ZeRO-1: the offset inside every rank's
 * block), and the reduction of one bucket (a collective; every rank must reduce the same buckets in the
 * same order). */
size_t vc_dp_n_buckets(const vc_trainer *t);
void vc_dp_bucket_ranges(const vc_trainer *t, size_t b, size_t *start, size_t *len);
vc_status vc_dp_reduce_bucket(vc_trainer *t, size_t b);
/* Overlap (dp_overlap.c). begin: after the last micro-batch's forward and loss, before its backward;
 * finds for each bucket the earliest tape node that writes one of its gradients, hooks the backward and
 * starts a communication thread that reduces the buckets (last to first) as soon as backward has passed
 * their earliest writer. end: after that backward (or instead of it): lets the thread finish every
 * bucket, joins it and marks the gradients reduced. Bits equal the non-overlapped reduce_grads'. */
/* With overlap on, a rank without micro-batches reduces at the point where the others finish their last
 * backward (before the step's loss sums), so that every rank issues the collectives in the same order. */
vc_status vc_dp_reduce_all(vc_trainer *t);
vc_status vc_dp_overlap_begin(vc_trainer *t);
vc_status vc_dp_overlap_end(vc_trainer *t);
void vc_dp_overlap_free(vc_trainer *t);

/* ZeRO-2 (dp_zero2.c). init: the working area and bookkeeping for the trained tensors tens[0..n_params)
 * (whose grad pointers it takes over). begin: after a micro-batch's forward and loss, before its backward:
 * packs the gradients into the working area from the tape and hooks backward to reduce each chunk as
 * soon as it is final (local: no communication, the gradients are dropped: the memory plan's trial), by
 * an ordered reduce-scatterv (each rank receives its block's piece). With cfg.overlap_grad_reduce a
 * communication thread reduces the chunks the hook posts while backward goes on (the same bits).
 * end: after that backward (or instead of it): reduces the rest (joins the thread). empty_round: the reductions of a
 * micro-batch this rank does not have (zeros). step_start: the next round copies into the shard. */
vc_status vc_dp_zero2_init(vc_trainer *t, vc_tensor **tens);
void vc_dp_zero2_free(vc_trainer *t);
vc_status vc_dp_zero2_begin(vc_trainer *t, int local);
vc_status vc_dp_zero2_end(vc_trainer *t);
vc_status vc_dp_zero2_empty_round(vc_trainer *t);
void vc_dp_zero2_step_start(vc_trainer *t);
int vc_dp_zero2_rounds(const vc_trainer *t);
size_t vc_dp_zero2_chunks(const vc_trainer *t);
size_t vc_dp_zero2_area(const vc_trainer *t); /* floats of the working area */
/* This rank's gradient floats in backend memory (full buffer + shard, or ZeRO-2's shard + working area). */
size_t vc_dp_grad_floats(const vc_trainer *t);
/* The largest x over ranks (a collective). */
vc_status vc_dp_max(vc_trainer *t, double *x);

/* ZeRO-3 (dp_zero3.c). init (after ZeRO-2's): the master shard from the weights, the model compacted to
 * the tensors every rank keeps, layer slots, the model's layer hook. master: the shard AdamW updates.
 * active: gathers allowed (the trainer's micro-batches). begin/end: around a micro-batch's backward
 * (the pre-node hook that gathers layers). refresh: after the optimiser step. replicated: trained tensor
 * i holds the same values on every rank now. weight_floats: this rank's weight memory (master shard,
 * slots and any full buffer, tensors kept whole). gathers: layers gathered so far. */
vc_status vc_dp_zero3_init(vc_trainer *t);
void vc_dp_zero3_free(vc_trainer *t);
float *vc_dp_zero3_master(const vc_trainer *t);
void vc_dp_zero3_active(vc_trainer *t, int on);
vc_status vc_dp_zero3_begin(vc_trainer *t);
void vc_dp_zero3_end(vc_trainer *t);
vc_status vc_dp_zero3_refresh(vc_trainer *t);
int vc_dp_zero3_replicated(const vc_trainer *t, int i);
size_t vc_dp_zero3_weight_floats(const vc_trainer *t, size_t *master, size_t *slots, size_t *kept);
int64_t vc_dp_zero3_gathers(const vc_trainer *t);
/* Copies between backend memory and communication memory (device-to-device with NCCL). */
void vc_dp_to_comm(const struct vc_trainer_dp *d, float *dst, const float *src, size_t n);
void vc_dp_from_comm(const struct vc_trainer_dp *d, float *dst, const float *src, size_t n);

/* "ZeRO-2, AdamW state and gradients for its 1/N shard" etc. (d may be NULL) */
const char *vc_dp_sharding_name(const struct vc_trainer_dp *d);

/* Compares a checksum of the trained weights with rank 0's: VC_ERR_INTERNAL naming the step if not equal. */
vc_status vc_dp_check_weights(vc_trainer *t);
/* Flat-vector copies between per-tensor buffers (backend memory) and communication memory (host for
 * MPI, device for NCCL): reads [first, first + len) (zeros past the end) into dst; writes src back
 * (positions past the end ignored). Only vc_be() copies touch the tensors. */
void vc_dp_flat_read(const vc_trainer *t, float *const *bufs, size_t first, size_t len, float *dst);
void vc_dp_flat_write(const vc_trainer *t, float *const *bufs, size_t first, size_t len, const float *src);

/* Accumulates gradients; use_dp = 0 runs every micro-batch here without talking to other ranks. */
/* trained MTP layers (trainer_mtp.c): n[k] the mini-batch's masked targets of depth k (summed over the ranks in local
 * mode); vc_mtp_loss adds the micro-batch's MTP loss over depth hidden states hid to *L, val[k] depth k's share of its
 * mean cross-entropy */
vc_status vc_mtp_counts(vc_trainer *t, const vc_minibatch *b, int use_dp, double *n);
vc_status vc_mtp_loss(vc_trainer *t, vc_graph *g, const vc_micro_batch *mb, vc_tensor *const *hid, const double *n,
                      vc_tensor **L, double *val);
vc_status vc_trainer_accumulate_ex(vc_trainer *t, const vc_minibatch *b, vc_token_loss_fn fn, void *ctx,
                                   vc_step_stats *st, int use_dp);

/* Checkpoint parts for data parallelism (ckpt_dp.c). */
/* Writes this rank's optimiser shard into dir (ZeRO-1), or nothing. */
vc_status vc_dp_save_optim(const char *dir, const vc_trainer *t);
/* Loads the moments of this trainer's optimiser range from dir: optim.bin or optim_shard_*_of_N.bin. */
vc_status vc_dp_load_optim(const char *dir, vc_trainer *t);
/* a vc_adamw_put_fn writing to a vc_afile (checkpoints' optimiser state) */
static inline vc_status vc_put_afile(void *f, const void *p, size_t n) { return vc_afile_write(f, p, n); }

#endif
