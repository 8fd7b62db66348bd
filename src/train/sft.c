/* verlc sft: supervised fine-tuning on prompt/response or messages rows (verl's fsdp_sft_trainer). */
#define _DEFAULT_SOURCE
#include "verlc/tracking.h"
#include "sft_internal.h"
#include "verlc/report.h"
#include "data/vl_rows.h"
#include "verlc/image.h"
#include "verlc/vision.h"
#include "verlc/pool.h"
#include "verlc/perf.h"
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct sft_run {
    const vc_sft_config *c;
    vc_comm *comm;           /* c->comm or our own */
    int own_comm, rank, world;
    int val_noted;           /* the note on too few validation rows printed */
    uint32_t *dealt;         /* use_legacy_worker_impl=enable on several ranks, micro-batches by count: a step's rows as
                              * verl deals them */
    vc_tokenizer *tok;
    vc_chat_template *tmpl;
    vc_model *model;
    sft_data train, val;
    vc_trainer tr;
    vc_epoch_iter it;
    vc_train_state state;
    int64_t total_steps;
    int64_t test_every, save_every; /* trainer.test_freq / save_freq in steps ("after_each_epoch": an epoch's) */
    FILE *metrics;
    vc_tracker *tracker;     /* trainer.logger file / tensorboard (rank 0; NULL: neither) */
    double peak;             /* the promised peak FLOP/s train/mfu divides by (vc_perf_promised_peak) */
    size_t planned_act;      /* the memory plan's activations (the step arena), reported against its peak at the end */
    /* mini-batch buffers */
    int64_t *cu;
    int32_t *ids;
    float *mask;
    /* image inputs: the processor's settings (has_vl 0: off, why says so), and a mini-batch's images (made when a
     * micro-batch of this rank first needs them, freed after the mini-batch) */
    vc_vl_image_config vl;
    int has_vl;
    char why[512];
    vc_vl_videos vv; /* videos (has_vv 0: off, why_v says so) */
    int has_vv;
    char why_v[512];
    vc_images *im;
    int64_t *im_span;
    size_t im_n;
    const sft_data *im_d;   /* the mini-batch's rows: im_row[i] of im_d */
    uint32_t *im_row;
    uint8_t *im_made;
} sft_run;

/* progress and notices: rank 0 only (warnings and errors: every rank) */
#define R0_INFO(r, ...)                       \
    do {                                      \
        if ((r)->rank == 0) vc_info(__VA_ARGS__); \
    } while (0)

/* videos beside the images (verl's MultiTurnSFTDataset: data.video_key, fetch_video's frames handed to the processor
 * without their timing): Qwen2-VL's and Qwen2.5-VL's as fetched; Qwen3-VL's and Qwen3.5's processor samples them
 * again, taking them for 24 per second, and stamps the frame groups so */
static vc_status setup_videos(sft_run *r, const char *dir, sft_tok *tk) {
    int ok = 0;
    tk->no_video_reason = r->why_v;
    tk->video_pad_id = -1;
    vc_status st = vc_vl_videos_setup(r->model, dir, r->vl.patch_size, &r->vv, r->why_v, sizeof r->why_v, &ok);
    if (st || !ok) return st;
    r->vv.no_metadata = 1;
    int id = vc_model_cfg(r->model)->video_id; /* (as the images' pad: the processor's default without the id) */
    tk->video_pad = id >= 0 ? vc_tokenizer_id_to_token(r->tok, id) : VC_VL_VIDEO_TOKEN;
    tk->video_pad_id = tk->video_pad ? vc_tokenizer_token_to_id(r->tok, tk->video_pad) : -1;
    if (tk->video_pad_id < 0)
        return vc_fail(VC_ERR_MISSING, "tokenizer: no %s token for the model's videos (config.json's video_token_id %d)",
                       tk->video_pad ? tk->video_pad : "video pad", id);
    tk->vv = &r->vv;
    r->has_vv = 1;
    return VC_OK;
}

/* images on when the model's vision tower loaded and its folder has the processor's preprocessor_config.json (as the
 * RL trainer decides); tk gets the processor's settings and the pad token (config.json's image_token_id) */
static vc_status setup_images(sft_run *r, sft_tok *tk) {
    const vc_sft_config *c = r->c;
    tk->image_key = c->image_key && *c->image_key ? c->image_key : NULL;
    tk->video_key = c->video_key && *c->video_key ? c->video_key : NULL;
    tk->no_image_reason = r->why;
    tk->pad_id = -1;
    if (!vc_model_vision(r->model)) {
        const char *mt = vc_model_cfg(r->model)->model_type;
        snprintf(r->why, sizeof r->why, "the model %s (model_type %s) has no vision tower", c->model_dir,
                 mt[0] ? mt : "?");
        return VC_OK;
    }
    char *dir = NULL, *pre = NULL;
    vc_status st = vc_hf_resolve(c->model_dir, &dir);
    if (!st && !(pre = vc_path_join(dir, "preprocessor_config.json"))) st = VC_ERR_NOMEM;
    if (!st && !vc_file_exists(pre))
        snprintf(r->why, sizeof r->why, "%s/preprocessor_config.json is not there", c->model_dir);
    else if (!st && !(st = vc_vl_image_config_load(pre, &r->vl))) r->has_vl = 1;
    free(pre);
    if (!st && r->has_vl) st = setup_videos(r, dir, tk);
    free(dir);
    if (st) return vc_fail_ctx(st, "model %s", c->model_dir);
    if (!r->has_vl) return VC_OK;
    int id = vc_model_cfg(r->model)->image_id;
    tk->pad = id >= 0 ? vc_tokenizer_id_to_token(r->tok, id) : VC_VL_IMAGE_TOKEN;
    tk->pad_id = vc_tokenizer_token_to_id(r->tok, tk->pad);
    if (tk->pad_id < 0) return vc_fail(VC_ERR_MISSING, "tokenizer: no %s token for the model's images", tk->pad);
    tk->vl = &r->vl;
    tk->wrap = vc_vl_markup_texts(vc_model_cfg(r->model), r->tok, &tk->boi, &tk->eoi); /* (Gemma 3, Gemma 4, InternVL) */
    return VC_OK;
}

static vc_status load_inputs(sft_run *r) {
    const vc_sft_config *c = r->c;
    const char *tdir = c->tokenizer_dir ? c->tokenizer_dir : c->model_dir;
    vc_status st = vc_tokenizer_load(tdir, &r->tok);
    if (st) return vc_fail_ctx(st, "tokenizer %s", tdir);
    if (c->chat_template) { /* verl sets data.chat_template as the tokenizer's chat_template */
        const char *bos = vc_tokenizer_id_to_token(r->tok, vc_tokenizer_bos_id(r->tok));
        const char *eos = vc_tokenizer_id_to_token(r->tok, vc_tokenizer_eos_id(r->tok));
        if ((st = vc_chat_template_from_string(c->chat_template, bos, eos, &r->tmpl)))
            return vc_fail_ctx(st, "data.chat_template");
    } else st = vc_chat_template_load(tdir, &r->tmpl);
    if (st == VC_ERR_MISSING) {
        R0_INFO(r, "sft: %s has no chat template; prompts are used as plain text", tdir);
        r->tmpl = NULL;
        st = VC_OK;
    }
    if (st) return st;
    int mtp = c->mtp_enable && c->mtp_train; /* (verl: enable_train without enable loads no MTP layers) */
    if (c->mtp_train && !c->mtp_enable) R0_INFO(r, "sft: model.mtp.enable_train without model.mtp.enable: no MTP layers");
    if ((st = mtp ? vc_model_load_mtp(c->model_dir, &r->model) : vc_model_load(c->model_dir, &r->model)))
        return vc_fail_ctx(st, "%s", mtp ? "model.mtp.enable_train" : "model.path");
    if (c->mtp_enable && !mtp && (st = vc_mtp_enable_check(r->model, c->model_dir, "model.mtp.enable", r->rank == 0)))
        return st;
    if (mtp && c->lora_rank > 0) return vc_fail(VC_ERR_UNSUPPORTED, "model.mtp.enable_train with model.lora_rank > 0 is not built");
    if (mtp) R0_INFO(r, "sft: training %d multi-token-prediction layer%s, their loss scaled by %g%s", vc_model_cfg(r->model)->n_mtp,
                     vc_model_cfg(r->model)->n_mtp == 1 ? "" : "s", c->mtp_scale, c->mtp_detach ? " (detach_encoder)" : "");
    vc_lora_spec ls = { c->lora_rank, c->lora_alpha, c->lora_targets, c->lora_params, c->lora_exclude, c->seed, 0 };
    if (c->lora_rank > 0 && (st = vc_model_lora_attach(r->model, &ls))) return vc_fail_ctx(st, "model.lora_rank");
    if (c->lora_from && *c->lora_from) { /* (verl's FSDP engine: PeftModel.from_pretrained over the adapters) */
        if (c->lora_rank <= 0)
            return vc_fail(VC_ERR_ARG, "model.lora_adapter_path=%s needs model.lora_rank > 0", c->lora_from);
        if ((st = vc_model_lora_load(r->model, c->lora_from))) return vc_fail_ctx(st, "model.lora_adapter_path");
    }
    vc_qat_opts qo;
    if ((st = vc_sft_qat_opts(c, &qo))) return st;
    st = vc_qat_setup(r->model, &qo, "engine.qat.", c->sharding && !strcmp(c->sharding, "zero3"), r->rank == 0 && !c->quiet);
    vc_qat_opts_free(&qo);
    if (st) return st;
    const vc_model_config *mc = vc_model_cfg(r->model);
    cJSON *kw = NULL;
    if ((st = vc_sft_chat_kwargs(c, &kw))) return st;
    sft_tok tk = { r->tok, r->tmpl, vc_tokenizer_eos_id(r->tok), kw };
    if (tk.eos < 0 && mc->n_eos > 0) tk.eos = mc->eos_ids[0];
    st = setup_images(r, &tk);
    if (!st) st = sft_data_load(c, c->train_path, &tk, &r->train);
    if (!st && c->val_path) st = sft_data_load(c, c->val_path, &tk, &r->val);
    cJSON_Delete(kw);
    if (st) return st;
    if (c->train_max_samples > 0 && (size_t)c->train_max_samples < r->train.n) r->train.n = (size_t)c->train_max_samples;
    if (c->val_max_samples > 0 && (size_t)c->val_max_samples < r->val.n) r->val.n = (size_t)c->val_max_samples;
    int32_t top = r->train.max_id > r->val.max_id ? r->train.max_id : r->val.max_id;
    if (top >= mc->vocab && !c->dump_data) /* (a dump shows the rows whatever model it names) */
        return vc_fail(VC_ERR_ARG, "token id %d from tokenizer %s is outside the model's vocab_size %lld", top, tdir,
                       (long long)mc->vocab);
    R0_INFO(r, "sft: %zu train rows (%zu truncated, %zu without targets, %zu bad rows, %zu bad lines), %zu val rows",
            r->train.n, r->train.n_truncated, r->train.n_no_target, r->train.n_bad_rows, r->train.n_bad_lines,
            r->val.n);
    return VC_OK;
}

/* optim=megatron: Megatron-core's adam (betas and eps Megatron's: verl does not pass optim.betas on; decay on
 * matrices only) and its OptimizerParamScheduler, as the RL trainer's megatron strategy; with engine=mlite
 * Megatron-lite's (its engine passes optim.betas and eps on) and its own scheduler, as the RL trainer's mlite actor */
static vc_status megatron_schedule(sft_run *r, vc_trainer_config *tc) {
    const vc_sft_config *c = r->c;
    vc_lr_megatron_config mc = { .lr = c->lr, .lr_warmup_init = c->lr_warmup_init, .min_lr = c->min_lr,
                                 .lr_warmup_steps_ratio = c->warmup_ratio, .total_training_steps = r->total_steps,
                                 .lr_decay_steps = c->lr_decay_steps, .lr_warmup_steps = c->warmup_steps,
                                 .lr_wsd_decay_steps = c->lr_wsd_decay_steps, .lr_decay_style = c->lr_decay_style,
                                 .lr_wsd_decay_style = c->lr_wsd_decay_style };
    tc->adamw.beta1 = 0.9, tc->adamw.beta2 = 0.999, tc->adamw.eps = 1e-8;
    if (c->mlite_engine) tc->adamw.beta1 = c->beta1, tc->adamw.beta2 = c->beta2, tc->adamw.eps = c->eps;
    tc->decay_matrices_only = 1;
    vc_status st = c->mlite_engine ? vc_lr_mlite_init(&tc->sched, &mc) : vc_lr_megatron_init(&tc->sched, &mc);
    return st ? vc_fail_ctx(st, c->mlite_engine ? "optim=megatron engine=mlite" : "optim=megatron") : VC_OK;
}

/* optim=automodel: Automodel's OptimizerParamScheduler (Megatron's) as verl's automodel engine builds it; torch's AdamW
 * over every tensor with the group's betas, eps and weight decay */
static vc_status automodel_schedule(sft_run *r, vc_trainer_config *tc) {
    const vc_sft_config *c = r->c;
    vc_lr_megatron_config mc = { .lr = c->lr, .lr_warmup_init = c->lr * c->init_lr_ratio,
                                 .min_lr = c->lr * c->min_lr_ratio, .lr_warmup_steps_ratio = c->warmup_ratio,
                                 .total_training_steps = r->total_steps, .lr_decay_steps = -1,
                                 .lr_warmup_steps = c->warmup_steps, .lr_wsd_decay_steps = -1,
                                 .lr_decay_style = c->lr_scheduler, .lr_wsd_decay_style = "exponential" };
    if (!(c->init_lr_ratio >= 0 && c->init_lr_ratio <= 1) || !(c->min_lr_ratio >= 0 && c->min_lr_ratio <= 1))
        return vc_fail(VC_ERR_ARG, "optim=automodel: init_lr_ratio %g and min_lr_ratio %g must lie in [0, 1]",
                       c->init_lr_ratio, c->min_lr_ratio);
    vc_status st = vc_lr_megatron_init(&tc->sched, &mc);
    if (st) return vc_fail_ctx(st, "optim=automodel");
    R0_INFO(r, "optim=automodel: AdamW betas (%g, %g), eps %g, weight decay %g; OptimizerParamScheduler total_steps=%lld, "
            "decay_style=%s, init_lr=%.2e, max_lr=%.2e, min_lr=%.2e", c->beta1, c->beta2, c->eps, c->weight_decay,
            (long long)r->total_steps, c->lr_scheduler, mc.lr_warmup_init, c->lr, mc.min_lr);
    return VC_OK;
}

/* where AdamW keeps its moments: TransformerEngine's FusedAdam takes optim.exp_avg_dtype / exp_avg_sq_dtype; verl's
 * megatron optimizer passes them to Megatron with use_precision_aware_optimizer in bf16 runs only (Megatron's CPU
 * optimizer keeps fp32 moments); torch's AdamW takes none */
static vc_status adam_moments(const sft_run *r, vc_adamw_config *a) {
    const vc_sft_config *c = r->c;
    if (c->fused_adam != c->te_optim_impl)
        return vc_fail(VC_ERR_ARG, c->fused_adam ? "optim.optimizer=FusedAdam: it comes from optim.optimizer_impl="
                                                   "transformer_engine.pytorch.optimizers, not torch.optim"
                                                 : "optim.optimizer_impl=transformer_engine.pytorch.optimizers holds "
                                                   "FusedAdam (optim.optimizer=FusedAdam), not AdamW");
    int m = 0, v = 0, g = 0;
    vc_status st = vc_adamw_moment_dtype("optim.exp_avg_dtype", c->exp_avg_dtype, &m);
    if (!st) st = vc_adamw_moment_dtype("optim.exp_avg_sq_dtype", c->exp_avg_sq_dtype, &v);
    if (!st) st = vc_adamw_moment_dtype("optim.main_grads_dtype", c->main_grads_dtype, &g);
    if (st) return st;
    if (c->megatron_optim) {
        const int bf[3] = { m, v, g };
        return vc_adamw_megatron_moments("optim", bf, c->precision_aware,
                                         !strcmp(c->param_dtype, "bf16") || !strcmp(c->param_dtype, "bfloat16"),
                                         c->optimizer_cpu_offload, a);
    }
    if (g) return vc_fail(VC_ERR_UNSUPPORTED, "optim.main_grads_dtype=bf16 is optim=megatron's, and not supported");
    if ((m || v) && !c->fused_adam)
        return vc_fail(VC_ERR_ARG, "optim.%s=bf16: torch.optim.AdamW keeps fp32 moments (TransformerEngine's "
                       "FusedAdam, optim.optimizer=FusedAdam, stores them in bf16)", m ? "exp_avg_dtype" : "exp_avg_sq_dtype");
    a->m_bf16 = m, a->v_bf16 = v;
    if (m || v)
        R0_INFO(r, "optim: AdamW's first moment stored in %s, its second in %s", m ? "bf16" : "fp32", v ? "bf16" : "fp32");
    return VC_OK;
}

/* optim.optimizer=muon: optim=megatron's (later verl's Megatron optimizer group), with its muon_* keys */
static vc_status muon_config(const sft_run *r, vc_muon_config *m) {
    const vc_sft_config *c = r->c;
    if (!c->megatron_optim)
        return vc_fail(VC_ERR_ARG, "optim.optimizer=muon is Megatron-core's (optim=megatron engine=megatron), not the "
                       "fsdp optimizer group's");
    vc_muon_keys k = c->muon_keys;
    k.prefix = "optim";
    k.beta1 = c->beta1;
    k.quiet = r->rank != 0; /* the notices once */
    return vc_muon_configure(&k, m);
}

/* image-text models: the training row with the most image patches, its images with zero pixels, for the memory
 * plan's trial row (the tower's activations grow with the patches); im->n 0: none. grid and pixels malloc'd. */
static vc_status largest_images(const sft_run *r, vc_images *im) {
    const sft_data *d = &r->train;
    memset(im, 0, sizeof *im);
    if (!d->n_img || !vc_model_vision(r->model)) return VC_OK;
    int64_t best = 0;
    size_t at = 0;
    for (size_t i = 0; i < d->n; i++) {
        int64_t p = 0;
        for (int64_t k = d->img_cu[i]; k < d->img_cu[i + 1]; k++)
            p += (int64_t)d->img[k].grid[0] * d->img[k].grid[1] * d->img[k].grid[2];
        if (p > best) best = p, at = i;
    }
    if (!best) return VC_OK;
    int n = (int)(d->img_cu[at + 1] - d->img_cu[at]);
    int64_t row = vc_vision_row(vc_model_vision(r->model));
    int32_t *grid = vc_malloc(sizeof(int32_t) * 3 * (size_t)n);
    float *pix = vc_calloc((size_t)(best * row), sizeof(float));
    if (!grid || !pix) {
        free(grid), free(pix);
        return vc_fail(VC_ERR_NOMEM, "memory plan: images of %lld patches", (long long)best);
    }
    for (int k = 0; k < n; k++) memcpy(grid + 3 * k, d->img[d->img_cu[at] + k].grid, sizeof(int32_t) * 3);
    *im = (vc_images){ n, grid, pix, row };
    return VC_OK;
}

/* trainer.use_legacy_worker_impl=enable: verl b178a3cd's fsdp_sft_trainer arithmetic (sft_legacy.c) */
static int legacy(const vc_sft_config *c) { return !strcmp(c->legacy_impl, "enable"); }

static vc_status make_trainer(sft_run *r) {
    const vc_sft_config *c = r->c;
    vc_trainer_config tc;
    vc_trainer_config_default(&tc);
    tc.adamw = (vc_adamw_config){ c->lr, c->beta1, c->beta2, c->eps, c->weight_decay };
    vc_lr_config lc;
    vc_lr_config_default(&lc);
    lc.lr_scheduler_type = c->lr_scheduler;
    lc.lr = c->lr;
    lc.total_training_steps = r->total_steps;
    lc.lr_warmup_steps = c->warmup_steps;
    lc.lr_warmup_steps_ratio = c->warmup_ratio;
    lc.min_lr_ratio = c->min_lr_ratio;
    lc.num_cycles = c->num_cycles;
    lc.one_indexed = !c->zero_indexed_step;
    vc_status st = c->megatron_optim    ? megatron_schedule(r, &tc)
                   : c->automodel_optim ? automodel_schedule(r, &tc)
                                        : vc_lr_schedule_init(&tc.sched, &lc);
    if (!st) st = adam_moments(r, &tc.adamw);
    if (!st && r->c->muon) st = muon_config(r, &tc.adamw.muon);
    if (!st) st = vc_agg_mode_parse(c->loss_agg_mode, &tc.agg);
    if (st) return st;
    tc.grad_clip = c->grad_clip;
    tc.micro_norm = legacy(c);
    tc.micro_norm_dp_tokens = tc.micro_norm && c->balance_dp_token;
    tc.micro_bs = c->micro_batch_size;
    tc.max_tokens = c->use_dynamic_bsz ? (c->max_token_len > 0 ? c->max_token_len : c->max_length * c->micro_batch_size) : 0;
    tc.checkpointing = c->checkpointing;
    tc.mtp_train = c->mtp_enable && c->mtp_train;
    tc.mtp_scale = c->mtp_scale;
    tc.mtp_detach = c->mtp_detach;
    tc.comm = r->comm;
    tc.check_every = c->dp_check_freq;
    tc.overlap_grad_reduce = c->overlap_grad_reduce;
    if ((st = vc_sharding_parse(c->sharding, &tc.sharding))) return st;
    vc_tensor *const *lora = NULL;
    tc.n_extra_params = vc_model_lora_params(r->model, &lora); /* LoRA: the adapters are what is trained */
    tc.extra_params = lora;
    if ((st = vc_trainer_init(&r->tr, r->model, &tc))) return st;
    /* the largest micro-batch: the token budget (no more than a mini-batch of the longest rows holds), or the
     * micro_batch_size longest rows; its sequences no longer than the longest row */
    int64_t most = tc.max_tokens, whole = r->train.longest * c->train_batch_size;
    if (most <= 0) most = r->train.longest * (int64_t)c->micro_batch_size;
    if (whole > 0 && most > whole) most = whole;
    vc_mem_plan plan;
    /* every rank prints its own plan: the optimiser state is per rank (1/N with ZeRO-1) */
    /* the loss on all but each row's first token: the LM head on gathered loss positions, as rows whose prompt is
     * masked run it */
    vc_images im;
    if ((st = largest_images(r, &im))) return st;
    r->tr.plan_images = im.n ? &im : NULL;
    st = vc_trainer_plan_rows(&r->tr, most, r->train.longest, r->train.longest - 1, c->max_memory, stderr, &plan);
    r->tr.plan_images = NULL;
    free((void *)im.grid), free((void *)im.pixels);
    r->planned_act = plan.activations;
    vc_graph_trim(r->tr.g); /* the steps take what they use; their peak from here */
    vc_graph_clear_peak(r->tr.g);
    r->peak = vc_perf_promised_peak();
    return st;
}

static void images_free(sft_run *r) {
    for (size_t i = 0; i < r->im_n; i++)
        free((void *)r->im[i].grid), free((void *)r->im[i].pixels), free((void *)r->im[i].t_scale);
    free(r->im), free(r->im_span), free(r->im_row), free(r->im_made);
    r->im = NULL, r->im_span = NULL, r->im_row = NULL, r->im_made = NULL, r->im_n = 0;
}

/* vc_minibatch.image_get: sequence seq's pixels, made the first time a micro-batch of this rank needs them (with data
 * parallelism a rank never makes the images of the other ranks' rows) */
static vc_status image_get(void *ctx, int seq, const vc_images **out) {
    sft_run *r = ctx;
    *out = NULL;
    if (seq < 0 || (size_t)seq >= r->im_n) return vc_fail(VC_ERR_INTERNAL, "sft: image of sequence %d of %zu", seq, r->im_n);
    const sft_data *d = r->im_d;
    size_t row = r->im_row[seq];
    int k = (int)(d->img_cu[row + 1] - d->img_cu[row]);
    if (k && !r->im_made[seq]) {
        char where[512];
        float *px = NULL, *ts = NULL;
        int32_t *grid = NULL;
        int64_t cols = 0;
        snprintf(where, sizeof where, "%s:%lld", d == &r->train ? r->c->train_path : r->c->val_path,
                 (long long)d->line[row]);
        vc_status st = vc_vl_visuals_pixels(&r->vl, 0, r->has_vv ? &r->vv : NULL, d->img + d->img_cu[row], k, where,
                                            &px, &grid, &cols, &ts);
        if (st) return st;
        r->im[seq] = (vc_images){ k, grid, px, cols, ts };
        r->im_made[seq] = 1;
    }
    *out = &r->im[seq];
    return VC_OK;
}

/* the mini-batch's image rows and spans into b; the pixels come through image_get (freed with the next mini-batch or
 * images_free) */
static vc_status gather_images(sft_run *r, const sft_data *d, const uint32_t *idx, size_t n, vc_minibatch *b) {
    images_free(r);
    if (!d->n_img || !r->has_vl) return VC_OK;
    r->im = vc_calloc(n, sizeof *r->im);
    r->im_span = vc_calloc(n, sizeof *r->im_span);
    r->im_row = vc_calloc(n, sizeof *r->im_row);
    r->im_made = vc_calloc(n, sizeof *r->im_made);
    if (!r->im || !r->im_span || !r->im_row || !r->im_made) return vc_fail(VC_ERR_NOMEM, "out of memory");
    r->im_n = n;
    r->im_d = d;
    for (size_t i = 0; i < n; i++) {
        size_t row = idx[i];
        r->im_row[i] = (uint32_t)row;
        r->im_span[i] = d->img_cu[row + 1] > d->img_cu[row] ? d->span[row] : 0;
    }
    b->image_get = image_get;
    b->image_ctx = r;
    b->image_span = r->im_span;
    return VC_OK;
}

static vc_status gather(sft_run *r, const sft_data *d, const uint32_t *idx, size_t n, vc_minibatch *b) {
    size_t tot = 0;
    for (size_t i = 0; i < n; i++) tot += (size_t)(d->cu[idx[i] + 1] - d->cu[idx[i]]);
    free(r->cu); free(r->ids); free(r->mask);
    r->cu = vc_malloc((n + 1) * sizeof *r->cu);
    r->ids = vc_malloc((tot + 1) * sizeof *r->ids);
    r->mask = vc_malloc((tot + 1) * sizeof *r->mask);
    if (!r->cu || !r->ids || !r->mask) return vc_fail(VC_ERR_NOMEM, "out of memory");
    r->cu[0] = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t a = d->cu[idx[i]], L = d->cu[idx[i] + 1] - a;
        memcpy(r->ids + r->cu[i], d->ids + a, (size_t)L * sizeof *r->ids);
        memcpy(r->mask + r->cu[i], d->mask + a, (size_t)L * sizeof *r->mask);
        r->cu[i + 1] = r->cu[i] + L;
    }
    *b = (vc_minibatch){ (int)n, r->cu, r->ids, r->mask };
    return gather_images(r, d, idx, n, b);
}

/* verl b178a3cd's fsdp_sft_trainer asserts that the ranks split data.train_batch_size evenly and that each rank's
 * share splits into micro-batches (its _normalize_config_bsz); on one rank verlc runs verl's training_step on any
 * split (a shorter last micro-batch), on several the rows it deals would no longer be verl's, so it refuses (before
 * loading anything) */
static vc_status check_legacy_split(const sft_run *r) {
    const vc_sft_config *c = r->c;
    long long b = c->train_batch_size, w = r->world, m = c->micro_batch_size;
    if (!legacy(c) || w < 2 || c->use_dynamic_bsz) return VC_OK;
    if (b % w)
        return vc_fail(VC_ERR_ARG, "data.train_batch_size=%lld is not divisible by the %lld data-parallel ranks "
                       "(trainer.use_legacy_worker_impl=enable: verl's fsdp_sft_trainer refuses it too)", b, w);
    if (b / w % m)
        return vc_fail(VC_ERR_ARG, "data.micro_batch_size_per_gpu=%lld does not divide a rank's %lld rows of "
                       "data.train_batch_size=%lld over %lld ranks (trainer.use_legacy_worker_impl=enable: verl's "
                       "fsdp_sft_trainer refuses it too)", m, b / w, b, w);
    return VC_OK;
}

/* use_legacy_worker_impl=enable: verl b178a3cd's batches and means (sft_legacy.c), train_batch_size rows or more at
 * a time; *done 0 where fewer rows than a batch of every rank's (the token mean of all of them then) */
static vc_status validate_legacy(sft_run *r, double *loss, int *done) {
    const vc_sft_config *c = r->c;
    size_t n = r->val.n, chunk = (size_t)r->tr.world * (size_t)c->micro_batch_size;
    size_t step = ((size_t)c->train_batch_size + chunk - 1) / chunk * chunk;
    uint32_t *order = vc_malloc(sizeof *order * (n + 1));
    double *nll = vc_malloc(sizeof *nll * (n + 1)), *tok = vc_malloc(sizeof *tok * (n + 1));
    vc_status st = order && nll && tok ? VC_OK : VC_ERR_NOMEM;
    size_t kept = st ? 0 : sft_legacy_val_order(n, r->tr.world, c->micro_batch_size, order);
    for (size_t a = 0; !st && a < kept; a += step) {
        vc_minibatch b;
        size_t k = kept - a < step ? kept - a : step;
        st = gather(r, &r->val, order + a, k, &b);
        if (!st) st = vc_trainer_eval_seq_nll(&r->tr, &b, nll + a, tok + a);
    }
    *done = kept > 0;
    if (!st && kept) *loss = sft_legacy_val_loss(nll, tok, kept, r->tr.world, c->micro_batch_size, c->balance_dp_token);
    if (!st && !kept && !r->val_noted++)
        R0_INFO(r, "sft: use_legacy_worker_impl=enable: %zu validation rows, fewer than micro_batch_size x ranks (%zu), "
                "where verl's loader has no batch: val/loss is their token mean", n, chunk);
    free(order), free(nll), free(tok);
    return st;
}

/* verl's engine-based sft_trainer: its validation loader (a DistributedSampler without shuffling, batches of
 * train_batch_size rows, drop_last) yields consecutive slices of the rows, each one's loss the slice's token mean;
 * val/loss is their mean. With fewer rows than a batch (where verl's mean is of nothing) the rows' token mean. */
static vc_status validate(sft_run *r, double *loss) {
    int done = 0;
    vc_status st = legacy(r->c) ? validate_legacy(r, loss, &done) : VC_OK;
    if (st || done) return st;
    size_t bs = (size_t)r->c->train_batch_size, whole = legacy(r->c) ? 0 : r->val.n / bs * bs; /* 0: the token mean */
    if (!whole && !r->val_noted++)
        R0_INFO(r, "sft: %zu validation rows, fewer than data.train_batch_size=%zu (verl's loader has no batch): val/loss "
                "is their token mean", r->val.n, bs);
    uint32_t *idx = vc_malloc(bs * sizeof *idx);
    if (!idx) return VC_ERR_NOMEM;
    double means = 0, sum = 0, cnt = 0;
    size_t batches = 0;
    for (size_t a = 0; a < (whole ? whole : r->val.n) && !st; a += bs) {
        size_t n = r->val.n - a < bs ? r->val.n - a : bs;
        for (size_t i = 0; i < n; i++) idx[i] = (uint32_t)(a + i);
        vc_minibatch b;
        double s = 0, k = 0;
        st = gather(r, &r->val, idx, n, &b);
        if (!st) st = vc_trainer_eval_nll(&r->tr, &b, &s, &k);
        if (!st) sum += s, cnt += k, means += k > 0 ? s / k : 0.0, batches++;
    }
    free(idx);
    *loss = whole ? means / (double)batches : cnt > 0 ? sum / cnt : NAN;
    return st;
}

static void fmt_eta(double s, char *buf, size_t cap) {
    if (!isfinite(s) || s < 0) s = 0;
    long t = (long)s;
    if (t >= 3600) snprintf(buf, cap, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else snprintf(buf, cap, "%ldm%02lds", t / 60, t % 60);
}

static vc_status save(sft_run *r) {
    r->state.epoch = r->it.epoch;
    r->state.batch = (int64_t)r->it.batch;
    char *p = NULL;
    vc_status st = vc_train_ckpt_save(r->c->out_dir, &r->tr, &r->state, r->c->keep_last, &p);
    if (!st) R0_INFO(r, "sft: saved %s", p);
    free(p);
    return st;
}

/* flops: the step's count by verl's FlopsCounter (train/mfu) */
static vc_status log_step(sft_run *r, double flops, const vc_step_stats *s, double val, double elapsed, int64_t done) {
    int64_t step = r->tr.step;
    double tps = s->seconds > 0 ? s->n_tokens / s->seconds : 0;
    /* verl's engine SFT trainer's train/mfu: its FlopsCounter over this rank's rows, against the promised peak */
    double mfu = s->seconds > 0 ? flops / s->seconds / r->peak : 0;
    if (s->skipped && r->rank == 0)
        vc_warn("sft: step %lld: non-finite %s (loss %g, grad_norm %g): update skipped (%lld so far)", (long long)step,
                isfinite(s->loss) ? "gradient norm" : "loss", s->loss, s->grad_norm, (long long)r->tr.n_skipped);
    if (r->rank != 0) return VC_OK; /* rank 0 prints and writes the metrics */
    if (!r->c->quiet) {
        char eta[32];
        fmt_eta(done > 0 ? elapsed / done * (double)(r->total_steps - step) : 0, eta, sizeof eta);
        printf("step %lld/%lld | loss %.4f | lr %.3e | grad_norm %.3f | %.0f tok/s | ETA %s", (long long)step,
               (long long)r->total_steps, s->loss, s->lr, s->grad_norm, tps, eta);
        if (isfinite(val)) printf(" | val/loss %.4f", val);
        printf("\n");
        fflush(stdout);
    }
    fprintf(r->metrics,
            "{\"step\": %lld, \"epoch\": %lld, \"train/loss\": %.9g, \"train/lr\": %.9g, \"train/grad_norm\": %.9g, "
            "\"train/skipped\": %d, \"train/n_tokens\": %lld, \"train/mfu\": %.6g, \"perf/throughput\": %.6g, "
            "\"perf/step_time\": %.6g",
            (long long)step, (long long)r->it.epoch, isfinite(s->loss) ? s->loss : 0.0, s->lr,
            isfinite(s->grad_norm) ? s->grad_norm : 0.0, s->skipped, (long long)s->n_tokens, mfu, tps, s->seconds);
    if (isfinite(val)) fprintf(r->metrics, ", \"val/loss\": %.9g", val);
    for (int k = 0; k < s->n_mtp; k++) /* (verl's get_megatron_mtp_loss names them mtp_losses/mtp_K_loss) */
        fprintf(r->metrics, ", \"train/mtp_losses/mtp_%d_loss\": %.9g", k + 1, s->mtp_loss[k]);
    double mem[3]; /* verl's engine SFT trainer logs its memory with each step */
    vc_mem_metrics(&mem[0], &mem[1], &mem[2]);
    if (isfinite(mem[0]))
        fprintf(r->metrics, ", \"perf/max_memory_allocated_gb\": %.6g, \"perf/max_memory_reserved_gb\": %.6g", mem[0], mem[1]);
    fprintf(r->metrics, ", \"perf/cpu_memory_used_gb\": %.6g}\n", mem[2]);
    fflush(r->metrics);
    if (ferror(r->metrics)) return vc_fail(VC_ERR_IO, "%s/metrics.jsonl: write failed", r->c->out_dir);
    static const char *const names[] = { "train/loss", "train/lr", "train/grad_norm", "perf/throughput", "val/loss" };
    double v[] = { s->loss, s->lr, s->grad_norm, tps, val };
    return vc_tracker_log(r->tracker, step, isfinite(val) ? 5 : 4, names, v);
}

static vc_status resume(sft_run *r) {
    const char *res = r->c->resume;
    if (!res || !*res) return VC_OK;
    char *dir = NULL;
    vc_status st;
    if (!strcmp(res, "latest") || !strcmp(res, "auto")) {
        st = vc_train_ckpt_latest(r->c->out_dir, &dir);
        if (st == VC_ERR_MISSING || st == VC_ERR_IO) {
            if (!strcmp(res, "latest")) return st;
            R0_INFO(r, "sft: no checkpoint in %s: starting fresh", r->c->out_dir);
            return VC_OK;
        }
    } else {
        st = vc_train_ckpt_resolve(res, &dir);
    }
    vc_train_state s;
    memset(&s, 0, sizeof s);
    if (!st) st = vc_train_ckpt_load(dir, &r->tr, &s);
    if (!st && s.seed != r->c->data_seed)
        st = vc_fail(VC_ERR_ARG, "%s: checkpoint was made with data.seed %llu, this run has %llu", dir,
                     (unsigned long long)s.seed, (unsigned long long)r->c->data_seed);
    if (!st) {
        vc_epoch_iter_seek(&r->it, s.epoch, (size_t)s.batch);
        R0_INFO(r, "sft: resumed from %s (step %lld, epoch %lld, batch %lld)", dir, (long long)s.step,
                (long long)s.epoch, (long long)s.batch);
    }
    vc_train_state_clear(&s);
    free(dir);
    return st;
}

static vc_status check_config(const vc_sft_config *c) {
    if (!c->model_dir || !c->train_path || !c->out_dir) return vc_fail(VC_ERR_ARG, "sft needs --model, --train and --out");
    if (strcmp(c->truncation, "error") && strcmp(c->truncation, "left") && strcmp(c->truncation, "right"))
        return vc_fail(VC_ERR_ARG, "truncation=%s: expected error, left or right", c->truncation);
    if (c->max_length < 2 || c->train_batch_size < 1 || c->micro_batch_size < 1 || c->epochs < 1)
        return vc_fail(VC_ERR_ARG, "max_length >= 2, train_batch_size, micro_batch_size and epochs >= 1 required");
    if (strcmp(c->legacy_impl, "auto") && strcmp(c->legacy_impl, "enable") && strcmp(c->legacy_impl, "disable"))
        return vc_fail(VC_ERR_ARG, "trainer.use_legacy_worker_impl: `%s` is not auto, enable or disable", c->legacy_impl);
    return VC_OK;
}

static vc_status run_loop(sft_run *r) {
    const vc_sft_config *c = r->c;
    double t0 = vc_now();
    int64_t done = 0, last_saved = -1;
    vc_status st = VC_OK;
    int64_t stop = c->max_steps > 0 && c->max_steps < r->total_steps ? c->max_steps : r->total_steps;
    while (r->tr.step < stop && !st) {
        const uint32_t *idx;
        size_t n = vc_epoch_iter_next(&r->it, &idx);
        vc_minibatch b;
        vc_step_stats s;
        if (r->dealt && sft_legacy_deal(idx, n, r->tr.world, c->micro_batch_size, r->dealt))
            idx = r->dealt;
        if ((st = gather(r, &r->train, idx, n, &b))) break;
        if ((st = vc_trainer_step(&r->tr, &b, NULL, NULL, &s))) break;
        images_free(r); /* (a step's pixels live for the step) */
        double flops = vc_perf_verl_flops(r->model, 0, b.cu_seqlens, b.n_seq); /* (validation reuses b's buffers) */
        done++;
        int64_t step = r->tr.step;
        double val = NAN;
        int last = step >= stop;
        if (r->val.n && ((r->test_every > 0 && step % r->test_every == 0) || last) && (st = validate(r, &val))) break;
        if ((st = log_step(r, flops, &s, val, vc_now() - t0, done))) break;
        if ((r->save_every > 0 && step % r->save_every == 0) || last) {
            st = save(r);
            last_saved = step;
        }
    }
    (void)last_saved;
    if (!st && done && r->planned_act)
        R0_INFO(r, "memory: the step arena peaked at %.2f MiB, planned %.2f MiB", vc_graph_peak_bytes(r->tr.g) / 1048576.0,
                r->planned_act / 1048576.0);
    return st;
}

/* The communicator (given, or "auto": MPI under a parallel launcher) and verl's node/GPU counts. */
static vc_status setup_dist(sft_run *r) {
    const vc_sft_config *c = r->c;
    r->comm = c->comm;
    if (!r->comm) {
        vc_status st = vc_comm_init(NULL, NULL, "auto", &r->comm);
        if (st) return vc_fail_ctx(st, "sft: communicator");
        r->own_comm = 1;
    }
    r->rank = vc_comm_rank(r->comm);
    r->world = vc_comm_size(r->comm);
    return vc_sft_check_world(c, r->comm);
}

/* trainer.device and mixed_precision, before the model loads (rank 0 prints the choice) */
static vc_status setup_device(sft_run *r) {
    const vc_sft_config *c = r->c;
    vc_train_device d = { c->device, c->param_dtype, c->reduce_dtype, c->buffer_dtype, "trainer.device",
                          "model.fsdp_config.mixed_precision.param_dtype",
                          "model.fsdp_config.mixed_precision.reduce_dtype",
                          "model.fsdp_config.mixed_precision.buffer_dtype" };
    return vc_train_setup_device(&d, r->rank == 0 && !c->quiet ? stderr : NULL);
}

/* --dump-data: every train row as {"input_ids": [...], "loss_mask": [...]} (the mask on the tokens themselves, as
 * verl's datasets return it), one row at a time into an atomic file (vc_afile) */
static vc_status dump_rows(const sft_data *d, const char *path) {
    vc_afile *f = NULL;
    vc_strbuf b = { 0 };
    vc_status st = vc_afile_open(path, &f);
    for (size_t i = 0; i < d->n && !st; i++) {
        b.n = 0;
        vc_sb_puts(&b, "{\"input_ids\": [");
        for (int64_t k = d->cu[i]; k < d->cu[i + 1]; k++) vc_sb_printf(&b, k > d->cu[i] ? ", %d" : "%d", d->ids[k]);
        vc_sb_puts(&b, "], \"loss_mask\": [");
        for (int64_t k = d->cu[i]; k < d->cu[i + 1]; k++) vc_sb_printf(&b, k > d->cu[i] ? ", %g" : "%g", (double)d->mask[k]);
        vc_sb_puts(&b, "]}\n");
        st = b.oom ? vc_fail(VC_ERR_NOMEM, "out of memory") : vc_afile_write(f, b.p, b.n);
    }
    free(b.p);
    if (!f) return st;
    if (st) vc_afile_abort(f);
    return st ? st : vc_afile_commit(f);
}

vc_status vc_sft_run(const vc_sft_config *c) {
    sft_run r;
    memset(&r, 0, sizeof r);
    r.c = c;
    vc_status st = check_config(c);
    if (st) return st;
    if ((st = setup_dist(&r)) || (st = check_legacy_split(&r))) goto out;
    if (c->threads > 0) vc_set_threads(c->threads);
    if (!c->dump_data && (st = vc_mkdirs(c->out_dir))) goto out;
    if (r.world > 1 || (r.comm && strcmp(vc_comm_kind(r.comm), "single")))
        R0_INFO((&r), "sft: data parallel over %d rank(s) (%s communicator, %d per node), sharding %s; each rank "
                "runs 1/%d of the micro-batches of every global batch of %lld rows", r.world, vc_comm_kind(r.comm),
                vc_comm_local_size(r.comm), c->sharding ? c->sharding : "none", r.world,
                (long long)c->train_batch_size);
    if ((st = setup_device(&r))) goto out;
    if ((st = load_inputs(&r))) goto out;
    if (c->dump_data) { /* the rows as they would be trained on, and no training */
        if (r.rank == 0 && !(st = dump_rows(&r.train, c->dump_data)))
            R0_INFO((&r), "sft: %zu train rows written to %s", r.train.n, c->dump_data);
        goto out;
    }
    int drop_last = r.train.n >= (size_t)c->train_batch_size;
    if ((st = vc_epoch_iter_init(&r.it, r.train.n, (size_t)c->train_batch_size, c->shuffle, drop_last, c->data_seed)) ||
        (st = vc_epoch_iter_torch(&r.it, VC_ORDER_TORCH_EPOCH, c->data_seed, 1, 0)))
        goto out;
    r.total_steps = c->total_steps > 0 ? c->total_steps : (int64_t)vc_epoch_iter_batches(&r.it) * c->epochs;
    r.test_every = c->test_freq == VC_SFT_EACH_EPOCH ? (int64_t)vc_epoch_iter_batches(&r.it) : c->test_freq;
    r.save_every = c->save_freq == VC_SFT_EACH_EPOCH ? (int64_t)vc_epoch_iter_batches(&r.it) : c->save_freq;
    if ((st = make_trainer(&r))) goto out;
    if (r.tr.world > 1 && legacy(c) && !c->use_dynamic_bsz &&
        !(r.dealt = vc_malloc(sizeof *r.dealt * (size_t)c->train_batch_size))) {
        st = VC_ERR_NOMEM;
        goto out;
    }
    r.state.seed = c->data_seed;
    if (!realpath(c->model_dir, r.state.model_dir)) snprintf(r.state.model_dir, sizeof r.state.model_dir, "%s", c->model_dir);
    if (c->tokenizer_dir && !realpath(c->tokenizer_dir, r.state.tokenizer_dir))
        snprintf(r.state.tokenizer_dir, sizeof r.state.tokenizer_dir, "%s", c->tokenizer_dir);
    r.state.config_json = vc_sft_config_json(c);
    if ((st = resume(&r))) goto out;
    char *mp = r.rank == 0 ? vc_path_join(c->out_dir, "metrics.jsonl") : NULL;
    r.metrics = mp ? fopen(mp, r.tr.step > 0 ? "a" : "w") : NULL;
    free(mp);
    if (!r.metrics && r.rank == 0) {
        st = vc_fail(VC_ERR_IO, "%s/metrics.jsonl: cannot open", c->out_dir);
        goto out;
    }
    if (r.rank == 0 && (st = vc_tracker_open_spec(c->logger, c->project_name, c->experiment_name, &r.tracker))) goto out;
    R0_INFO((&r), "sft: %lld steps (%zu batches/epoch x %d epochs), batch %lld, micro-batch %s %lld", (long long)r.total_steps,
            vc_epoch_iter_batches(&r.it), c->epochs, (long long)c->train_batch_size,
            r.tr.cfg.max_tokens > 0 ? "token budget" : "rows",
            (long long)(r.tr.cfg.max_tokens > 0 ? r.tr.cfg.max_tokens : c->micro_batch_size));
    if (r.val.n && r.tr.step == 0) {
        double v;
        if ((st = validate(&r, &v))) goto out;
        R0_INFO((&r), "sft: initial val/loss %.4f", v);
        if (r.metrics) fprintf(r.metrics, "{\"step\": 0, \"val/loss\": %.9g}\n", v);
    }
    st = run_loop(&r);
    if (!st && r.tr.n_skipped && r.rank == 0) vc_warn("sft: %lld steps skipped for non-finite loss or gradients", (long long)r.tr.n_skipped);
out:
    if (r.metrics) fclose(r.metrics);
    vc_tracker_close(r.tracker);
    free(r.cu); free(r.ids); free(r.mask); free(r.dealt);
    images_free(&r);
    vc_epoch_iter_free(&r.it);
    if (r.tr.g) vc_trainer_free(&r.tr);
    vc_train_state_clear(&r.state);
    sft_data_free(&r.train);
    sft_data_free(&r.val);
    vc_model_free(r.model);
    vc_chat_template_free(r.tmpl);
    vc_tokenizer_free(r.tok);
    if (r.own_comm) {
        if (st && r.world > 1) {
            /* the other ranks may wait in a collective: end the job rather than leave them to time out */
            fprintf(stderr, "rank %d: sft: %s\n", r.rank, vc_last_error());
            vc_comm_abort(r.comm, 1);
        }
        vc_comm_free(r.comm);
    }
    return st;
}
