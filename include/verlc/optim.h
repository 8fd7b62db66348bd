/* verlc optimiser: AdamW as torch.optim.AdamW, global-norm gradient clipping as
 * torch.nn.utils.clip_grad_norm_, and verl's learning-rate schedules. */
#ifndef VERLC_OPTIM_H
#define VERLC_OPTIM_H
#include "verlc/core.h"
#include <stddef.h>
#include <stdint.h>

/* Muon (verl's megatron optim.optimizer=muon: Megatron-core's TensorParallelMuon over emerging_optimizers'
 * OrthogonalizedOptimizer) on the matrices (vc_optim_param.mats > 0); AdamW on the rest. Per matrix group G [R, C]
 * (a parameter's k-th matrix, row blocks of the params sharing a fuse id stacked): w *= 1 - lr wd;
 * m = lerp(m, g, 1 - momentum); u = nesterov ? lerp(g, m, momentum) : m; w -= lr * extra_scale * scale(R, C) *
 * NS(u), NS the Newton-Schulz orthogonalisation of u / max(|u|_F, 1e-7) over the smaller side, ns_steps steps of
 * X = a X + (b A + c A A) X, A = X X^T, with the coefficient set's (a, b, c) */
enum vc_muon_scale { VC_MUON_SPECTRAL, VC_MUON_SHAPE_SCALING, VC_MUON_UNIT_RMS_NORM };
typedef struct vc_muon_config {
    int on;
    double momentum;    /* muon_momentum: 0.95 */
    int nesterov;       /* muon_nesterov: 0 */
    int split_qkv;      /* muon_split_qkv: 1 (q, k and v orthogonalised apart; the caller's grouping) */
    int scale_mode;     /* muon_scale_mode: enum vc_muon_scale */
    int coeff;          /* muon_coefficient_type: an index of vc_muon_coeff_parse's names (quintic) */
    int ns_steps;       /* muon_num_ns_steps: 5 */
    int bf16;           /* muon_fp32_matmul_prec=medium: the iteration in bf16 (X rounded, each product's result
                         * rounded), as emerging_optimizers runs it; high / highest: f32 */
    double extra_scale; /* muon_extra_scale_factor: 1.0 */
    /* use_layer_wise_distributed_optimizer (Megatron-core's LayerWiseDistributedOptimizer): with data parallelism
     * every tensor has one owner rank, which alone keeps its optimiser state, updates it and broadcasts its new
     * weights (vc_adamw_init_dp); off, every rank keeps the whole state and only the orthogonalisation is shared */
    int layer_wise;
} vc_muon_config;
void vc_muon_config_default(vc_muon_config *c);
/* the names verl passes: muon_coefficient_type (simple, quintic, polar_express, cans, aol, deepseekv4),
 * muon_scale_mode (spectral, shape_scaling, unit_rms_norm), muon_fp32_matmul_prec (medium, high, highest);
 * others VC_ERR_UNSUPPORTED naming key */
vc_status vc_muon_coeff_parse(const char *key, const char *value, int *coeff);
vc_status vc_muon_scale_parse(const char *key, const char *value, int *mode);
vc_status vc_muon_prec_parse(const char *key, const char *value, int *bf16);
/* verl's megatron optim keys for Muon (optim/megatron.yaml) as read: vc_muon_configure checks them as verl and
 * Megatron-core do (muon_match_adamw_update_rms derives the extra scale sqrt((1 - beta1) / (1 + beta1)) from
 * optim.betas[0] and refuses an explicit muon_extra_scale_factor beside it; muon_scalar_optimizer adam only; the
 * tensor-parallel modes are one and the same without tensor parallelism) and fills c (c->on set) */
typedef struct vc_muon_keys {
    const char *prefix; /* the keys' group, for messages ("actor_rollout_ref.actor.optim", "optim") */
    double momentum, extra_scale, beta1;
    int64_t ns_steps;
    int nesterov, split_qkv, match_adamw_rms, layer_wise;
    int quiet; /* no notices (ranks other than 0) */
    const char *scale_mode, *coefficient_type, *tp_mode, *fp32_matmul_prec, *scalar_optimizer;
} vc_muon_keys;
void vc_muon_keys_default(vc_muon_keys *k);
vc_status vc_muon_configure(const vc_muon_keys *k, vc_muon_config *c);
/* NS(x) of one row-major [R, C] matrix in place (x: memory of the active backend), without the scales */
vc_status vc_muon_orthogonalize(const vc_muon_config *c, float *x, int64_t R, int64_t C);
/* get_muon_scale_factor(R, C, mode) */
double vc_muon_scale_factor(int mode, int64_t R, int64_t C);

typedef struct vc_adamw_config {
    double lr;           /* base learning rate (a schedule passes the current one to each step) */
    double beta1, beta2; /* 0.9, 0.999 */
    double eps;          /* 1e-8 */
    double weight_decay; /* decoupled; 0.01 as torch's AdamW default */
    /* TransformerEngine's FusedAdam with exp_avg_dtype / exp_avg_sq_dtype bfloat16 (Megatron's precision-aware
     * optimizer, Automodel's FusedAdam): the first / second moment stored rounded to bf16 (nearest even) after each
     * step; the step's own update uses them before rounding. 0: float32, as torch. */
    int m_bf16, v_bf16;
    vc_muon_config muon; /* muon.on: Muon on the params with mats > 0 */
    /* the gradients times this (in float) as the AdamW step reads them, where 0 < grad_scale: gradient clipping's
     * factor, set by the trainer for one step instead of scaling them in place (the same bits, one pass over the
     * gradients fewer); 0 (the default): as they are. Not read by the Muon step */
    float grad_scale;
} vc_adamw_config;

void vc_adamw_config_default(vc_adamw_config *c);
/* A moment dtype as verl and its engines name it: "fp32" / "float32" / "32" / torch.float32 (and NULL or "null":
 * the default) give *bf16 = 0, "bf16" / "bfloat16" / torch.bfloat16 give 1; others (fp16, fp8) VC_ERR_UNSUPPORTED
 * naming `key`. */
vc_status vc_adamw_moment_dtype(const char *key, const char *value, int *bf16);
/* Megatron's precision-aware optimizer as verl configures it: the bf16 flags of optim (prefix: the keys' group, for
 * the messages) exp_avg_dtype, exp_avg_sq_dtype and main_grads_dtype (bf[0..2]) apply with use_precision_aware_optimizer
 * in a bf16 run only, and Megatron's CPU optimizer keeps fp32 moments (notices); main_grads bf16 is refused. Sets
 * a->m_bf16 / v_bf16. */
vc_status vc_adamw_megatron_moments(const char *prefix, const int bf[3], int precision_aware, int bf16_run,
                                    int cpu_offload, vc_adamw_config *a);

/* One parameter tensor: f32 weights updated in place, its gradient, and whether weight decay
 * applies (the caller turns it off for norms and biases). w and g are BACKEND memory (the active
 * backend's, src/tensor/backend.h: device memory on a GPU); the descriptor itself is host memory. */
typedef struct vc_optim_param {
    float *w;
    const float *g;
    size_t n;
    int decay;
    /* Muon (cfg.muon.on): mats > 0 makes this tensor `mats` row-major [rows, cols] matrices (n = mats rows cols)
     * that Muon updates; params with the same fuse id (> 0) are one module's fused weight: their k-th matrices
     * stacked by rows (in param order) are orthogonalised as one (Megatron's linear_fc1 = [gate; up]) */
    int64_t mats, rows, cols;
    int fuse;
} vc_optim_param;

typedef struct vc_adamw {
    vc_adamw_config cfg;
    size_t n_params;
    vc_optim_param *params; /* copy of the descriptors; g pointers may be changed between steps */
    float **m, **v;         /* first and second moments, owned: BACKEND memory (host array of pointers);
                               read them with the backend's d2h, never on the host; NULL for the tensors another
                               rank holds (vc_adamw_holds) */
    int64_t step;           /* steps taken (torch's state["step"]) */
    struct vc_muon_plan *muon; /* cfg.muon.on: its matrix groups (m holds their momentum; v is NULL for them) */
    const struct vc_backend *be; /* the backend active at init: owns m and v and runs the steps */
} vc_adamw;

/* Moments are allocated zeroed on the active backend; init, step and free must see the same one. */
vc_status vc_adamw_init(vc_adamw *opt, const vc_adamw_config *cfg, const vc_optim_param *params, size_t n_params);
/* One AdamW step with learning rate `lr`, per torch's _single_tensor_adam(decoupled_weight_decay=True)
 * in float32: t += 1; w *= 1 - lr*wd; m = lerp(m, g, 1-b1); v = v*b2 + (1-b2)*g*g;
 * w += (-lr/(1-b1^t)) * m / (sqrt(v)/sqrt(1-b2^t) + eps). */
vc_status vc_adamw_step(vc_adamw *opt, double lr);
void vc_adamw_free(vc_adamw *opt);
/* "AdamW", or "Muon+AdamW" when Muon updates the matrices (memory plans name the optimiser state so) */
const char *vc_adamw_name(const vc_adamw *opt);
/* vc_adamw_init as one of `world` data-parallel ranks (rank `rank`): with Muon the ranks share out its matrix groups
 * (balanced by their Newton-Schulz work, the same assignment on every rank): each step this rank orthogonalises and
 * applies only the groups it owns, and the caller broadcasts each owned tensor's new weights from
 * vc_adamw_muon_owner's rank. Without cfg->muon.layer_wise every rank keeps (and updates) every momentum; with it
 * AdamW's tensors get owners too (balanced by state size after Muon's) and a rank allocates and updates the state of
 * the tensors it owns only (vc_adamw_holds), so the state per rank falls about as 1/world. vc_adamw_init is rank 0
 * of 1. */
vc_status vc_adamw_init_dp(vc_adamw *opt, const vc_adamw_config *cfg, const vc_optim_param *params, size_t n_params,
                           int rank, int world);
/* the rank whose step computes param i's new weights (-1: every rank updates it: AdamW's without layer_wise) */
int vc_adamw_muon_owner(const vc_adamw *opt, size_t i);
/* whether this rank keeps param i's optimiser state (m[i] != NULL): all but layer-wise Muon's other owners' */
int vc_adamw_holds(const vc_adamw *opt, size_t i);
/* floating-point operations of one Muon step's Newton-Schulz iterations (per matrix [R, C], r = min, c = max, and
 * step: r r c for X X^T, r r r for A A, r r c for B X, each 2 flops); 0 without Muon */
double vc_adamw_muon_flops(const vc_adamw *opt);
/* floats of optimiser state this optimiser holds: two moments per AdamW value, one momentum per Muon value (of the
 * tensors it holds) */
size_t vc_adamw_state_floats(const vc_adamw *opt);

/* Optimiser state (step and moments, not the weights) as bytes in HOST memory (copied from / to the
 * backend's moments), for checkpoints. The layout is
 * "VCADAMW1", param count, step, then per param its size and m, v in little-endian f32. */
size_t vc_adamw_state_size(const vc_adamw *opt);
vc_status vc_adamw_state_save(const vc_adamw *opt, void *buf, size_t len);
/* The same bytes handed to put(ctx, bytes, n) in order, a few MiB at a time (a checkpoint streamed to its file,
 * never whole in host memory) */
typedef vc_status (*vc_adamw_put_fn)(void *ctx, const void *p, size_t n);
vc_status vc_adamw_state_stream(const vc_adamw *opt, vc_adamw_put_fn put, void *ctx);
/* floats of backend memory staged on the host at a time when the state is streamed (or read back) */
#define VC_ADAMW_STAGE_FLOATS ((size_t)1 << 22)
/* n floats of the optimiser backend's memory at src handed to put() in pieces, through stage
 * (VC_ADAMW_STAGE_FLOATS host floats) */
vc_status vc_adamw_put_floats(const vc_adamw *opt, const float *src, size_t n, float *stage, vc_adamw_put_fn put,
                              void *ctx);
/* Fails with VC_ERR_FORMAT / VC_ERR_SHAPE when the buffer does not match this optimiser's params. */
vc_status vc_adamw_state_load(vc_adamw *opt, const void *buf, size_t len);

/* Global L2 norm of all gradients (double, fixed order); grads are BACKEND memory of the active
 * backend (host array of pointers), the norm a host double (NaN when the backend fails). When finite and
 * max_norm / (norm + 1e-6) < 1, every gradient is multiplied by that coefficient (in float), as
 * clip_grad_norm_ does. Returns 1 when the norm is finite; 0 means skip the step (grads untouched).
 * max_norm <= 0 only measures. */
int vc_clip_grad_norm(float *const *grads, const size_t *sizes, size_t n_tensors, double max_norm, double *norm);
/* every gradient times c in place (float), as vc_clip_grad_norm scales them */
void vc_grads_scale(float *const *grads, const size_t *sizes, size_t n_tensors, float c);
/* vc_clip_grad_norm without the scaling: *coef the factor it would multiply by (1 when none) */
int vc_clip_grad_coef(float *const *grads, const size_t *sizes, size_t n_tensors, double max_norm, double *norm,
                      double *coef);
double vc_grad_norm(const float *const *grads, const size_t *sizes, size_t n_tensors);

/* ---- learning-rate schedules (verl/utils/torch_functional.py) -------------------------------- */
typedef enum vc_lr_kind {
    VC_LR_CONSTANT, /* get_constant_schedule_with_warmup */
    VC_LR_COSINE,   /* get_cosine_schedule_with_warmup (min_lr_ratio, num_cycles, init_lr_ratio) */
    VC_LR_LINEAR,   /* linear warmup, then linear decay to min_lr_ratio at total_steps (Megatron's "linear") */
    VC_LR_WSD,      /* get_wsd_schedule_with_warmup (stable_ratio) */
    VC_LR_MEGATRON, /* Megatron-core's OptimizerParamScheduler (verl's megatron strategy): vc_lr_megatron_init */
    VC_LR_VEOMNI,   /* VeOmni's build_lr_scheduler (verl's veomni strategy): vc_lr_veomni_init */
    VC_LR_MLITE,    /* Megatron-lite's scheduler (verl's mlite actor): vc_lr_mlite_init */
} vc_lr_kind;

typedef struct vc_lr_schedule {
    vc_lr_kind kind;
    double base_lr;
    int64_t warmup_steps; /* resolved */
    int64_t total_steps;
    double min_lr_ratio;  /* 0 */
    double num_cycles;    /* 0.5 */
    double init_lr_ratio; /* 0: warmup starts from init_lr_ratio * base_lr */
    double stable_ratio;  /* 0.9 (wsd) */
    int one_indexed;      /* cosine: step + 1 (later verl's zero_indexed_step=false) */
    /* VC_LR_MEGATRON: warmup from init_lr to base_lr over warmup_steps, then lr_decay_style to min_lr at
     * decay_steps ("constant", "linear", "cosine", "inverse-square-root", "WSD" with its own style over
     * wsd_steps: "linear", "cosine", "exponential", "minus_sqrt"); VC_LR_VEOMNI: the same fields, mg_style its
     * style (constant, linear, cosine) */
    double init_lr, min_lr;
    int64_t decay_steps, wsd_steps;
    int mg_style, wsd_style;
} vc_lr_schedule;

/* verl's optimizer keys: lr_scheduler_type ("constant", "cosine", also "linear", "wsd") or the
 * deprecated warmup_style (wins when set, as in verl); lr_warmup_steps > 0 is used as is, otherwise
 * warmup = int(lr_warmup_steps_ratio * total_steps). */
typedef struct vc_lr_config {
    const char *lr_scheduler_type; /* NULL: constant */
    const char *warmup_style;      /* NULL unless set */
    double lr;
    int64_t total_training_steps;
    int64_t lr_warmup_steps;       /* -1 */
    double lr_warmup_steps_ratio;  /* 0 */
    double min_lr_ratio;           /* 0 */
    double num_cycles;             /* 0.5 */
    int one_indexed;               /* 0; 1: later verl's optim.zero_indexed_step=false (the cosine schedule counts
                                    * steps from 1, as torchtitan) */
} vc_lr_config;

void vc_lr_config_default(vc_lr_config *c);
/* verl's megatron optimizer keys (verl/utils/megatron/optimizer.py): lr, lr_warmup_init, min_lr,
 * lr_decay_steps (<= 0: total_training_steps), lr_warmup_steps (> 0 as is, else
 * int(lr_warmup_steps_ratio * lr_decay_steps)), lr_decay_style, lr_wsd_decay_style, lr_wsd_decay_steps
 * (needed by WSD); checked as Megatron-core checks them */
typedef struct vc_lr_megatron_config {
    double lr, lr_warmup_init, min_lr, lr_warmup_steps_ratio;
    int64_t total_training_steps, lr_decay_steps, lr_warmup_steps, lr_wsd_decay_steps;
    const char *lr_decay_style, *lr_wsd_decay_style;
} vc_lr_megatron_config;
vc_status vc_lr_megatron_init(vc_lr_schedule *s, const vc_lr_megatron_config *c);
/* Megatron-lite's own scheduler (_MegatronLiteLRScheduler, as its verl engine builds it from the same keys): none (the
 * constant lr) without total_training_steps > 0; warmup lr_warmup_steps (> 0), else int(lr_warmup_steps_ratio x
 * total_training_steps), from lr_warmup_init; lr_decay_steps (<= 0: the total; at least warmup + 1); then
 * lr_decay_style constant / linear / cosine / inverse-square-root / wsd (any case) to min_lr, the WSD decay over the last
 * lr_wsd_decay_steps in linear / cosine / exponential (start (end / start)^ratio) / constant; the styles Megatron-lite
 * lacks (minus_sqrt) are refused */
vc_status vc_lr_mlite_init(vc_lr_schedule *s, const vc_lr_megatron_config *c);
/* VeOmni's schedules (veomni/optim/lr_scheduler.py, as verl's veomni engine builds them from its optim keys):
 * warmup int(total x lr_warmup_steps_ratio) steps from lr_start to lr, then lr_scheduler_type "constant",
 * "linear" (to 0 at total, floored at 1e-7: VeOmni does not pass lr_min there) or "cosine" (to lr_min at
 * int(total x lr_decay_ratio) steps, lr_min after) */
typedef struct vc_lr_veomni_config {
    double lr, lr_min, lr_start, lr_warmup_steps_ratio, lr_decay_ratio;
    int64_t total_training_steps;
    const char *lr_scheduler_type;
} vc_lr_veomni_config;
vc_status vc_lr_veomni_init(vc_lr_schedule *s, const vc_lr_veomni_config *c);
vc_status vc_lr_schedule_init(vc_lr_schedule *s, const vc_lr_config *c);
/* Learning rate for optimiser step `step` (0-based: the first step uses vc_lr_at(s, 0), as torch's
 * LambdaLR before its first scheduler.step()). */
double vc_lr_at(const vc_lr_schedule *s, int64_t step);

#endif
