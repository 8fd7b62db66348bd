/* SFT configuration: defaults (verl's sft_trainer.yaml where it has the key), key=value setting, help. */
#define _DEFAULT_SOURCE
#include "verlc/config.h"
#include "verlc/json.h"
#include "verlc/train.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void vc_sft_config_default(vc_sft_config *c) {
    memset(c, 0, sizeof *c);
    c->prompt_key = "prompt";
    c->response_key = "response";
    c->messages_key = "messages";
    c->tools_key = "tools";
    c->enable_thinking_key = "enable_thinking";
    c->image_key = "images";
    c->video_key = "videos";
    vc_muon_keys_default(&c->muon_keys);
    c->multiturn = -1;
    c->truncation = "error";
    c->max_length = 1024;
    c->train_batch_size = 32;
    c->micro_batch_size = 4;
    c->epochs = 1;
    c->shuffle = 1;
    c->seed = 1;
    c->lora_alpha = 16;
    c->mtp_scale = 0.1;
    c->qat_mode = "w4a16";
    c->qat_group = 16;
    c->init_lr_ratio = 0.1;
    c->num_cycles = 0.5;
    c->zero_indexed_step = 1;
    c->lora_targets = "all-linear";
    c->lr = 1e-5;
    c->weight_decay = 0.01;
    c->beta1 = 0.9;
    c->beta2 = 0.95;
    c->eps = 1e-8;
    c->grad_clip = 1.0;
    c->warmup_ratio = 0.1;
    c->warmup_steps = -1;
    c->lr_decay_steps = c->lr_wsd_decay_steps = -1;
    c->lr_decay_style = "constant";
    c->lr_wsd_decay_style = "exponential";
    c->lr_scheduler = "cosine";
    c->loss_agg_mode = "token-mean";
    c->legacy_impl = "auto";
    c->keep_last = 0;
    c->skip_bad_lines = 1;
    c->train_max_samples = c->val_max_samples = -1;
    c->sharding = "none";
    c->dp_check_freq = 100;
    c->device = "auto";
    c->logger = "console";
    c->project_name = "gsm8k-sft";
    c->experiment_name = "test";
    c->param_dtype = "fp32";
    c->reduce_dtype = "fp32";
    c->buffer_dtype = "fp32";
}

vc_status vc_sft_check_world(const vc_sft_config *c, const vc_comm *comm) {
    int world = vc_comm_size(comm), local = vc_comm_local_size(comm);
    if (c->nnodes > 0 && c->n_gpus_per_node > 0 && c->nnodes * c->n_gpus_per_node != world)
        return vc_fail(VC_ERR_ARG,
                       "trainer.nnodes=%d x trainer.n_gpus_per_node=%d = %d ranks, but this job has %d (%s): "
                       "launch with mpirun -np %d (or fix the keys)", c->nnodes, c->n_gpus_per_node,
                       c->nnodes * c->n_gpus_per_node, world, vc_comm_kind(comm), c->nnodes * c->n_gpus_per_node);
    if (c->n_gpus_per_node > 0 && c->nnodes <= 0 && c->n_gpus_per_node != local)
        return vc_fail(VC_ERR_ARG, "trainer.n_gpus_per_node=%d, but this node runs %d ranks of the job",
                       c->n_gpus_per_node, local);
    if (c->nnodes > 0 && c->n_gpus_per_node <= 0 && world % c->nnodes)
        return vc_fail(VC_ERR_ARG, "trainer.nnodes=%d does not divide the job's %d ranks", c->nnodes, world);
    return VC_OK;
}

enum kind { K_STR, K_I64, K_INT, K_F64, K_U64, K_BOOL, K_BYTES, K_BETAS };

typedef struct key_def {
    const char *name, *alias;
    enum kind kind;
    size_t off;
    const char *help;
} key_def;

#define F(x) offsetof(vc_sft_config, x)
static const key_def KEYS[] = {
    { "data.train_files", "train", K_STR, F(train_path), "training JSONL" },
    { "data.val_files", "val", K_STR, F(val_path), "validation JSONL (optional)" },
    { "data.prompt_key", "prompt_key", K_STR, F(prompt_key), "prompt field: a string or a list of messages" },
    { "data.response_key", "response_key", K_STR, F(response_key), "response field (EOS is appended)" },
    { "data.prompt_dict_keys", "prompt_dict_keys", K_STR, F(prompt_dict_keys),
      "keys into a nested prompt field, e.g. [content]: field[content]" },
    { "data.response_dict_keys", "response_dict_keys", K_STR, F(response_dict_keys),
      "keys into a nested response field" },
    { "data.messages_key", "messages_key", K_STR, F(messages_key), "multi-turn field (loss on assistant turns)" },
    { "data.tools_key", "tools_key", K_STR, F(tools_key), "messages rows: tool schemas for the chat template" },
    { "data.image_key", "image_key", K_STR, F(image_key),
      "messages rows: the row's images, one per <image> marker (image-text models: docs/images.md)" },
    { "data.video_key", "video_key", K_STR, F(video_key),
      "messages rows: the row's videos, one per <video> marker (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3.5: docs/images.md)" },
    /* verl's sft_trainer.yaml names (data.multiturn.*) for the same settings */
    { "data.multiturn.enable", "multiturn", K_BOOL, F(multiturn),
      "true: every row is a messages row; false: prompt/response rows (default: either, per row)" },
    { "data.multiturn.messages_key", "multiturn_messages_key", K_STR, F(messages_key), "verl's name of data.messages_key" },
    { "data.multiturn.tools_key", "multiturn_tools_key", K_STR, F(tools_key), "verl's name of data.tools_key" },
    { "data.multiturn.enable_thinking_key", "multiturn_enable_thinking_key", K_STR, F(enable_thinking_key),
      "verl's name of data.enable_thinking_key" },
    { "data.enable_thinking_key", "enable_thinking_key", K_STR, F(enable_thinking_key),
      "messages rows: the template's enable_thinking (true/false)" },
    { "data.enable_thinking_default", "enable_thinking_default", K_STR, F(enable_thinking_default),
      "messages rows without the enable_thinking key: true | false | none (the template's default)" },
    { "data.max_length", "max_length", K_I64, F(max_length), "tokens per row after truncation" },
    { "data.truncation", "truncation", K_STR, F(truncation), "over-long rows: error | left | right" },
    { "data.train_batch_size", "train_batch_size", K_I64, F(train_batch_size), "rows per optimiser step" },
    { "data.micro_batch_size_per_gpu", "micro_batch_size", K_INT, F(micro_batch_size), "rows per micro-batch" },
    { "data.micro_batch_size", "data_micro_batch_size", K_INT, F(micro_batch_size),
      "verl's older name of data.micro_batch_size_per_gpu" },
    { "data.use_dynamic_bsz", "use_dynamic_bsz", K_BOOL, F(use_dynamic_bsz), "micro-batches by token budget (packing)" },
    { "data.max_token_len_per_gpu", "max_token_len", K_I64, F(max_token_len),
      "token budget per micro-batch (default max_length * micro_batch_size)" },
    { "data.shuffle", "shuffle", K_BOOL, F(shuffle), "shuffle rows each epoch" },
    { "data.seed", "seed", K_U64, F(data_seed),
      "shuffle seed: epoch e's order is torch.randperm of a generator seeded seed + e (verl's DistributedSampler: 0)" },
    { "trainer.seed", "trainer_seed", K_U64, F(seed), "the LoRA adapters' initialisation seed" },
    { "data.train_max_samples", "train_max_samples", K_I64, F(train_max_samples),
      "> 0: the first N training rows (verl's max_samples; -1: all)" },
    { "data.val_max_samples", "val_max_samples", K_I64, F(val_max_samples), "> 0: the first N validation rows (-1: all)" },
    { "data.chat_template", "chat_template", K_STR, F(chat_template),
      "a chat template (Jinja) used in place of the tokenizer's" },
    { "data.skip_bad_lines", "skip_bad_lines", K_BOOL, F(skip_bad_lines), "skip malformed JSONL lines/rows (else stop)" },
    { "data.ignore_input_ids_mismatch", "ignore_input_ids_mismatch", K_BOOL, F(ignore_ids_mismatch),
      "messages rows whose turns rendered one by one differ from the whole conversation: train on the turns (else stop)" },
    { "optim.lr", "lr", K_F64, F(lr), "peak learning rate" },
    { "optim.weight_decay", "weight_decay", K_F64, F(weight_decay), "AdamW decoupled weight decay (every tensor, as verl)" },
    { "optim.betas", "betas", K_BETAS, F(beta1), "AdamW betas, e.g. [0.9,0.95]" },
    { "optim.beta1", "beta1", K_F64, F(beta1), "AdamW beta1" },
    { "optim.beta2", "beta2", K_F64, F(beta2), "AdamW beta2" },
    { "optim.eps", "eps", K_F64, F(eps), "AdamW epsilon" },
    { "optim.clip_grad", "grad_clip", K_F64, F(grad_clip), "global grad-norm clip (<= 0: off)" },
    { "optim.lr_warmup_steps_ratio", "warmup_ratio", K_F64, F(warmup_ratio), "warmup = ratio * total steps" },
    { "optim.lr_warmup_steps", "warmup_steps", K_I64, F(warmup_steps), "warmup steps (> 0 wins over the ratio)" },
    { "optim.lr_scheduler", "lr_scheduler", K_STR, F(lr_scheduler), "constant | cosine | linear | wsd" },
    { "optim.lr_scheduler_type", "lr_scheduler_type", K_STR, F(lr_scheduler), "verl's optimizer-config name of optim.lr_scheduler" },
    { "optim.min_lr_ratio", "min_lr_ratio", K_F64, F(min_lr_ratio), "final lr / peak lr" },
    { "optim.num_cycles", "num_cycles", K_F64, F(num_cycles), "cosine schedule: cycles over the decay (0.5: half)" },
    { "optim.init_lr_ratio", "init_lr_ratio", K_F64, F(init_lr_ratio),
      "optim=automodel: the lr warmup starts at lr times this" },
    { "optim.exp_avg_dtype", "exp_avg_dtype", K_STR, F(exp_avg_dtype),
      "AdamW's first moment stored in fp32 or bf16 (FusedAdam; optim=megatron: with its precision-aware optimizer)" },
    { "optim.exp_avg_sq_dtype", "exp_avg_sq_dtype", K_STR, F(exp_avg_sq_dtype),
      "AdamW's second moment stored in fp32 or bf16 (as optim.exp_avg_dtype)" },
    { "optim.main_grads_dtype", "main_grads_dtype", K_STR, F(main_grads_dtype),
      "optim=megatron's gradient buffer dtype: fp32 (verlc accumulates gradients in fp32)" },
    { "optim.use_precision_aware_optimizer", "use_precision_aware_optimizer", K_BOOL, F(precision_aware),
      "optim=megatron: Megatron's precision-aware optimizer (optim.exp_avg_dtype / exp_avg_sq_dtype in bf16 runs)" },
    { "optim.override_optimizer_config.optimizer_cpu_offload", "optimizer_cpu_offload", K_BOOL,
      F(optimizer_cpu_offload), "optim=megatron: Megatron's CPU optimizer (its moments stay fp32)" },
    { "optim.muon_momentum", "muon_momentum", K_F64, F(muon_keys.momentum), "optim.optimizer=muon: the momentum" },
    { "optim.muon_nesterov", "muon_nesterov", K_BOOL, F(muon_keys.nesterov), "optim.optimizer=muon: Nesterov momentum" },
    { "optim.muon_split_qkv", "muon_split_qkv", K_BOOL, F(muon_keys.split_qkv),
      "optim.optimizer=muon: q, k and v orthogonalised apart" },
    { "optim.muon_scale_mode", "muon_scale_mode", K_STR, F(muon_keys.scale_mode),
      "optim.optimizer=muon: spectral | shape_scaling | unit_rms_norm" },
    { "optim.muon_coefficient_type", "muon_coefficient_type", K_STR, F(muon_keys.coefficient_type),
      "optim.optimizer=muon: simple | quintic | polar_express | cans | aol | deepseekv4" },
    { "optim.muon_num_ns_steps", "muon_num_ns_steps", K_I64, F(muon_keys.ns_steps),
      "optim.optimizer=muon: Newton-Schulz steps" },
    { "optim.muon_tp_mode", "muon_tp_mode", K_STR, F(muon_keys.tp_mode),
      "optim.optimizer=muon: blockwise | duplicated | distributed (the same without tensor parallelism)" },
    { "optim.muon_fp32_matmul_prec", "muon_fp32_matmul_prec", K_STR, F(muon_keys.fp32_matmul_prec),
      "optim.optimizer=muon: medium (the iteration in bf16) | high | highest (f32)" },
    { "optim.muon_extra_scale_factor", "muon_extra_scale_factor", K_F64, F(muon_keys.extra_scale),
      "optim.optimizer=muon: the update's extra scale" },
    { "optim.muon_scalar_optimizer", "muon_scalar_optimizer", K_STR, F(muon_keys.scalar_optimizer),
      "optim.optimizer=muon: adam (on the tensors Muon does not take)" },
    { "optim.muon_match_adamw_update_rms", "muon_match_adamw_update_rms", K_BOOL, F(muon_keys.match_adamw_rms),
      "optim.optimizer=muon: extra scale sqrt((1 - beta1) / (1 + beta1))" },
    { "optim.use_layer_wise_distributed_optimizer", "use_layer_wise_distributed_optimizer", K_BOOL,
      F(muon_keys.layer_wise), "optim.optimizer=muon: each data-parallel rank keeps the state of the tensors it owns" },
    { "optim.lr_warmup_init", "lr_warmup_init", K_F64, F(lr_warmup_init), "optim=megatron: the lr warmup starts at" },
    { "optim.min_lr", "min_lr", K_F64, F(min_lr), "optim=megatron: the lr decays to" },
    { "optim.lr_decay_style", "lr_decay_style", K_STR, F(lr_decay_style),
      "optim=megatron: constant | linear | cosine | inverse-square-root | WSD" },
    { "optim.lr_decay_steps", "lr_decay_steps", K_I64, F(lr_decay_steps), "optim=megatron: decay steps (-1: all)" },
    { "optim.lr_wsd_decay_style", "lr_wsd_decay_style", K_STR, F(lr_wsd_decay_style),
      "optim=megatron, WSD: exponential | linear | cosine | minus_sqrt" },
    { "optim.lr_wsd_decay_steps", "lr_wsd_decay_steps", K_I64, F(lr_wsd_decay_steps), "optim=megatron, WSD: decay steps" },
    { "optim.zero_indexed_step", "zero_indexed_step", K_BOOL, F(zero_indexed_step),
      "cosine schedule: steps counted from 0 (false: from 1, as later verl's torchtitan setting)" },
    { "trainer.loss_agg_mode", "loss_agg_mode", K_STR, F(loss_agg_mode),
      "token-mean | seq-mean-token-sum | seq-mean-token-mean | seq-mean-token-sum-norm" },
    { "trainer.use_legacy_worker_impl", "use_legacy_worker_impl", K_STR, F(legacy_impl),
      "enable: verl b178a3cd's fsdp_sft_trainer normalisation (each micro-batch's token mean / micro-batches) | auto | "
      "disable (the global batch's token mean)" },
    { "data.balance_dp_token", "balance_dp_token", K_BOOL, F(balance_dp_token),
      "use_legacy_worker_impl=enable: a micro-batch's tokens counted over the ranks' i-th micro-batches" },
    { "trainer.total_epochs", "epochs", K_INT, F(epochs), "epochs over the training rows" },
    { "trainer.total_training_steps", "total_steps", K_I64, F(total_steps), "steps (0: epochs * batches)" },
    { "trainer.max_steps", "max_steps", K_I64, F(max_steps), "stop after this step (schedule unchanged)" },
    { "trainer.test_freq", "test_freq", K_INT, F(test_freq), "validate every N steps (0: at the end)" },
    { "trainer.save_freq", "save_freq", K_INT, F(save_freq), "checkpoint every N steps (0: at the end)" },
    { "trainer.max_ckpt_to_keep", "keep_last", K_INT, F(keep_last), "checkpoints kept (0: all)" },
    { "trainer.default_local_dir", "out", K_STR, F(out_dir), "run directory" },
    { "dump_data", "dump_data", K_STR, F(dump_data),
      "write the tokenized train rows ({input_ids, loss_mask} per line) to this JSONL file and stop without training" },
    { "trainer.resume_from_path", "resume", K_STR, F(resume), "latest | auto | a step_N directory" },
    { "model.partial_pretrain", "model", K_STR, F(model_dir), "Hugging Face model directory" },
    { "model.tokenizer_path", "tokenizer", K_STR, F(tokenizer_dir), "tokenizer directory (default: model)" },
    /* verl's engine-based SFT trainer (verl.trainer.sft_trainer, sft_trainer_engine.yaml) names */
    { "model.path", "model_path", K_STR, F(model_dir), "verl's engine-trainer name of model.partial_pretrain" },
    { "model.custom_chat_template", "custom_chat_template", K_STR, F(chat_template),
      "verl's engine-trainer name of data.chat_template" },
    { "optim.warmup_style", "warmup_style", K_STR, F(lr_scheduler), "verl's older name of optim.lr_scheduler_type" },
    { "engine.dtype", "engine_dtype", K_STR, F(param_dtype),
      "the engine's compute dtype: bfloat16 (bf16 matmul inputs, f32 accumulation) or float32" },
    { "model.enable_gradient_checkpointing", "checkpointing", K_BOOL, F(checkpointing), "recompute layers" },
    { "engine.activation_checkpointing", "activation_checkpointing", K_BOOL, F(checkpointing),
      "engine=automodel's name of model.enable_gradient_checkpointing" },
    { "engine.mp_param_dtype", "mp_param_dtype", K_STR, F(param_dtype),
      "engine=automodel's matmul input dtype: bf16 (f32 accumulation) or fp32" },
    { "model.lora_rank", "lora_rank", K_INT, F(lora_rank), "LoRA adapters of this rank (0: full fine-tuning)" },
    { "model.lora_alpha", "lora_alpha", K_F64, F(lora_alpha), "LoRA scale alpha (adapters add alpha/rank B A)" },
    { "model.target_modules", "target_modules", K_STR, F(lora_targets),
      "LoRA targets: all-linear or q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj" },
    { "model.target_parameters", "target_parameters", K_STR, F(lora_params),
      "LoRA on parameters (later verl, PEFT): mlp.experts.gate_up_proj, mlp.experts.down_proj, mlp.gate.weight" },
    { "model.lora_adapter_path", "lora_adapter_path", K_STR, F(lora_from),
      "LoRA: start the adapters from this PEFT directory (adapter_model.safetensors) instead of B = 0" },
    { "model.exclude_modules", "exclude_modules", K_STR, F(lora_exclude),
      "LoRA: leave out modules whose path (model.layers.N.mlp.up_proj) this regular expression matches" },
    { "model.mtp.enable", "mtp_enable", K_BOOL, F(mtp_enable),
      "the checkpoint's multi-token-prediction layers are kept (copied through on export; trained with enable_train)" },
    { "model.mtp.enable_train", "mtp_enable_train", K_BOOL, F(mtp_train),
      "with model.mtp.enable: the MTP layers are trained, their loss added (MiMo, MiMo-V2-Flash, Qwen3-Next / "
      "Qwen3.5, DeepSeek-V3 / GLM-4.5 layouts)" },
    { "engine.qat.enable", "qat_enable", K_BOOL, F(qat_enable),
      "quantization-aware training: linears computed with NVFP4 fake-quantized weights (verl's QAT, w4a16)" },
    { "engine.qat.mode", "qat_mode", K_STR, F(qat_mode), "QAT: w4a16 (weights only)" },
    { "engine.qat.group_size", "qat_group_size", K_INT, F(qat_group), "QAT: weights quantized in groups of this many" },
    { "engine.qat.ignore_patterns", "qat_ignore_patterns", K_STR, F(qat_ignore),
      "QAT: modules left unquantized, a list of path substrings or re:REGEX (default [lm_head, embed_tokens, re:.*mlp.gate$])" },
    { "engine.qat.quantization_config_path", "qat_quantization_config_path", K_STR, F(qat_config),
      "QAT: vLLM's quantization config JSON (checked; verlc's rollout needs nothing from it)" },
    { "model.mtp.detach_encoder", "mtp_detach_encoder", K_BOOL, F(mtp_detach),
      "MTP training: the loss reaches the MTP layers only (not the embeddings or the decoder)" },
    { "model.mtp.mtp_loss_scaling_factor", "mtp_loss_scaling_factor", K_F64, F(mtp_scale),
      "MTP training: the MTP loss's weight (divided among the MTP layers)" },
    { "threads", "threads", K_INT, F(threads), "compute threads (0: VERLC_THREADS or all cores)" },
    { "max_memory", "max_memory", K_BYTES, F(max_memory), "refuse to start above this (e.g. 20G)" },
    { "quiet", "quiet", K_BOOL, F(quiet), "no per-step console lines" },
    { "trainer.nnodes", "nnodes", K_INT, F(nnodes), "nodes (0: unchecked; else must match the MPI job)" },
    { "trainer.n_gpus_per_node", "n_gpus_per_node", K_INT, F(n_gpus_per_node),
      "ranks per node (0: unchecked; else must match the MPI job)" },
    { "trainer.sharding", "sharding", K_STR, F(sharding), "none | zero1 (AdamW state sharded over ranks) | zero2 (and gradients) | zero3 (and weights)" },
    { "trainer.dp_check_freq", "dp_check_freq", K_INT, F(dp_check_freq),
      "compare a weights checksum across ranks every N steps (0: never)" },
    { "trainer.device", "device", K_STR, F(device), "auto | cpu | cuda | cuda:N | sim (auto: cuda when a GPU is usable)" },
    { "model.fsdp_config.mixed_precision.param_dtype", "precision", K_STR, F(param_dtype),
      "fp32 | bf16: matmul inputs (bf16: f32 accumulation; weights, grads, AdamW stay fp32)" },
    { "model.fsdp_config.mixed_precision.reduce_dtype", "reduce_dtype", K_STR, F(reduce_dtype),
      "gradient reductions: fp32 only" },
    { "model.fsdp_config.mixed_precision.buffer_dtype", "buffer_dtype", K_STR, F(buffer_dtype), "buffers: fp32 only" },
    { "trainer.logger", "logger", K_STR, F(logger),
      "console lines and RUN_DIR/metrics.jsonl always; file and tensorboard also write verl's logs (others ignored)" },
    { "trainer.project_name", "project_name", K_STR, F(project_name), "verl's project name (file / tensorboard log paths)" },
    { "trainer.experiment_name", "experiment_name", K_STR, F(experiment_name), "verl's experiment name" },
    { "trainer.overlap_grad_reduce", "overlap_grad_reduce", K_BOOL, F(overlap_grad_reduce),
      "reduce gradient buckets on a communication thread during the last backward" },
};
#undef F
#define N_KEYS (sizeof KEYS / sizeof KEYS[0])

static vc_status parse_num(const char *key, const char *v, double *out) {
    char *end;
    errno = 0;
    *out = strtod(v, &end);
    if (end == v || *end || errno || !isfinite(*out)) return vc_fail(VC_ERR_ARG, "%s=%s: not a number", key, v);
    return VC_OK;
}

static size_t kind_size(enum kind k) {
    switch (k) {
    case K_STR: return sizeof(char *);
    case K_I64: return sizeof(int64_t);
    case K_U64: return sizeof(uint64_t);
    case K_F64: return sizeof(double);
    case K_BYTES: return sizeof(size_t);
    case K_BETAS: return 0; /* two doubles: left as they are */
    default: return sizeof(int);
    }
}

static vc_status set_key(vc_sft_config *c, const key_def *k, const char *key, const char *v) {
    char *p = (char *)c + k->off;
    double d = 0;
    vc_status st = VC_OK;
    if (!strcmp(v, "null") || !strcmp(v, "None") || !strcmp(v, "~")) { /* verl's "not set": the default */
        vc_sft_config d;
        vc_sft_config_default(&d);
        memcpy(p, (const char *)&d + k->off, kind_size(k->kind));
        return VC_OK;
    }
    switch (k->kind) {
    case K_STR: *(const char **)p = v; return VC_OK;
    case K_BYTES: return vc_parse_bytes(v, (size_t *)p);
    case K_BOOL:
        if (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes")) *(int *)p = 1;
        else if (!strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no")) *(int *)p = 0;
        else return vc_fail(VC_ERR_ARG, "%s=%s: expected true or false", key, v);
        return VC_OK;
    case K_BETAS: {
        double b1, b2;
        if (sscanf(v, " [ %lf , %lf ]", &b1, &b2) != 2 && sscanf(v, "%lf,%lf", &b1, &b2) != 2)
            return vc_fail(VC_ERR_ARG, "%s=%s: expected [beta1,beta2]", key, v);
        c->beta1 = b1;
        c->beta2 = b2;
        return VC_OK;
    }
    default: break;
    }
    if ((st = parse_num(key, v, &d))) return st;
    if (k->kind != K_F64 && d != floor(d)) return vc_fail(VC_ERR_ARG, "%s=%s: expected an integer", key, v);
    if (k->kind == K_I64) *(int64_t *)p = (int64_t)d;
    else if (k->kind == K_INT) *(int *)p = (int)d;
    else if (k->kind == K_U64) *(uint64_t *)p = strtoull(v, NULL, 10);
    else *(double *)p = d;
    return VC_OK;
}

/* verl's sft_trainer.yaml keys verlc takes without a setting of its own: `ok` lists the values that change
 * nothing ("*": any); another value is refused with `why`, or with `why` starting "note: " accepted with
 * that note (the run goes on as verlc runs it) */
typedef struct verl_key {
    const char *name, *ok, *why;
} verl_key;

static const verl_key VERL_KEYS[] = {
    { "data.num_workers", "*", "" },        /* later verl: data-loader processes */
    { "trainer.balance_batch", "*", "" },   /* later verl: verlc balances its packed micro-batches anyway */
    { "data.use_shm", "*", "" },
    { "model.use_shm", "*", "" },
    { "model.fsdp_config.*", "*", "" },
    { "model.trust_remote_code", "*", "" },
    { "model.use_liger", "*", "" },
    { "model.strategy", "*", "" },
    { "use_remove_padding", "*", "" },
    { "trainer.checkpoint.*", "*", "" },
    { "optim._target_", "*", "" },
    { "optim.total_training_steps", "*", "" },
    { "model.external_lib", "null", "no Python libraries are imported" },
    { "trainer.default_hdfs_dir", "null", "note: HDFS upload is not built in; checkpoints stay in the run directory" },
    { "ulysses_sequence_parallel_size", "1", "note: sequence parallelism is not implemented; each rank holds whole sequences" },
    { "data.custom_cls.*", "null", "custom Python dataset classes cannot be loaded" },
    { "optim.override_optimizer_config", "null,{}", "is not supported by verlc sft: set optim.eps / optim.betas" },
    /* verl's engine-based SFT trainer (sft_trainer_engine.yaml with its model, engine and optim groups) */
    { "engine", "fsdp", "is not built in: verlc trains with its own engine (the fsdp and megatron groups' keys are taken)" },
    { "optim", "fsdp", "is not built in: verlc has the fsdp (AdamW) and megatron (Megatron's adam) optimizer groups" },
    { "data.pad_mode", "no_padding,right,left", "is not a padding mode verl has (no_padding, right)" },
    { "checkpoint.*", "*", "" },                   /* verlc checkpoints hold model, optimizer and extra state */
    { "trainer.profile_interval", "*", "" },
    { "model.hf_config_path", "null", "is not supported: the model directory's config.json is used" },
    { "model.override_config", "{},null", "is not supported by verlc sft" },
    { "model.enable_activation_offload", "*", "" },
    { "model.use_remove_padding", "*", "" },
    { "model.use_fused_kernels", "*", "" },
    { "model.fused_kernel_options.*", "*", "" },
    { "model.tiled_mlp.*", "*", "" },
    { "model.mtp.*", "*", "" },
    { "engine.wrap_policy.*", "*", "" },
    { "engine.param_offload", "*", "" },
    { "engine.optimizer_offload", "*", "" },
    { "engine.offload_policy", "*", "" },
    { "engine.reshard_after_forward", "*", "" },
    { "engine.fsdp_size", "*", "" },
    { "engine.forward_prefetch", "*", "" },
    { "engine.use_orig_params", "*", "" },
    { "engine.seed", "*", "" },
    { "engine.full_determinism", "*", "" }, /* verlc's runs are bit-reproducible anyway */
    { "engine.entropy_from_logits_with_chunking", "*", "" },
    { "engine.use_torch_compile", "*", "" },
    { "engine.entropy_checkpointing", "*", "" },
    { "engine.model_dtype", "fp32,float32", "note: verlc keeps f32 master weights" },
    { "engine.strategy", "fsdp,fsdp2", "is not built in: verlc shards with trainer.sharding (zero1/2/3)" },
    { "engine.forward_only", "False,false", "is not supported: verlc sft trains" },
    { "engine.ulysses_sequence_parallel_size", "1", "note: sequence parallelism is not implemented; each rank holds whole sequences" },
    /* engine=megatron (verl's McoreEngineConfig): every rank is a data-parallel rank of verlc's own trainer */
    { "engine.tensor_model_parallel_size", "1", "note: every rank is a data-parallel rank (no tensor parallelism)" },
    { "engine.pipeline_model_parallel_size", "1", "note: every rank is a data-parallel rank (no pipeline parallelism)" },
    { "engine.expert_model_parallel_size", "1", "note: every rank is a data-parallel rank (no expert parallelism)" },
    { "engine.context_parallel_size", "1", "note: every rank holds whole sequences (no context parallelism)" },
    { "engine.expert_tensor_parallel_size", "null,1", "note: every rank is a data-parallel rank" },
    { "engine.virtual_pipeline_model_parallel_size", "null", "note: every rank is a data-parallel rank" },
    { "engine.override_transformer_config.*", "*", "" },
    { "engine.override_ddp_config.*", "*", "" },
    { "engine.override_mcore_model_config.*", "*", "" },
    { "engine.router_replay.mode", "disabled", "is not supported by verlc sft (router replay is an RL setting)" },
    { "engine.router_replay.*", "*", "" },
    { "engine.qat.activation_observer", "*", "" }, /* (w4a4's, refused) */
    { "engine.qat._target_", "*", "" },
    { "engine.grad_offload", "*", "" },
    { "engine.sequence_parallel", "*", "" },
    { "engine.use_distributed_optimizer", "*", "" }, /* trainer.sharding=zero1 is its counterpart */
    { "engine.use_dist_checkpointing", "False,false", "is not supported: verlc writes its own checkpoints" },
    { "engine.dist_checkpointing_*", "*", "" },
    { "engine.dist_ckpt_optim_fully_reshardable", "*", "" },
    { "engine.distrib_optim_fully_reshardable_mem_efficient", "*", "" },
    { "engine.dynamic_context_parallel", "False,false", "is not supported: every rank holds whole sequences" },
    { "engine.max_seqlen_per_dp_cp_rank", "*", "" },
    { "engine.entropy_from_logits_chunk_size", "*", "" },
    { "engine.use_mbridge", "*", "" },
    { "engine.vanilla_mbridge", "*", "" },
    { "engine.use_remove_padding", "*", "" },
    { "engine.pad_bshd_to_minibatch_max", "*", "" },
    { "engine.pad_to_length*", "*", "" },
    { "engine.use_megatron_fsdp", "*", "" },
    { "engine.param_offload", "*", "" },
    /* engine=automodel (verl's AutomodelEngineConfig) and engine=mlite (Megatron-lite): every rank is a data-parallel
     * rank of verlc's own trainer */
    { "engine.tp_size", "1", "note: every rank is a data-parallel rank (no tensor parallelism)" },
    { "engine.pp_size", "1", "note: every rank is a data-parallel rank (no pipeline parallelism)" },
    { "engine.ep_size", "1", "note: every rank is a data-parallel rank (no expert parallelism)" },
    { "engine.cp_size", "1", "note: every rank holds whole sequences (no context parallelism)" },
    { "engine.tp", "1", "note: every rank is a data-parallel rank (no tensor parallelism)" },
    { "engine.pp", "1", "note: every rank is a data-parallel rank (no pipeline parallelism)" },
    { "engine.vpp", "1,null", "note: every rank is a data-parallel rank (no pipeline parallelism)" },
    { "engine.ep", "1", "note: every rank is a data-parallel rank (no expert parallelism)" },
    { "engine.etp", "1,null", "note: every rank is a data-parallel rank (no expert parallelism)" },
    { "engine.cp", "1", "note: every rank holds whole sequences (no context parallelism)" },
    { "engine.dp_replicate_size", "*", "" },
    /* engine=mlite's scripts add Megatron-lite's config package to Hydra's search path */
    { "hydra.searchpath", "[]", "note: verlc sft reads no config packages; the engine and optim groups' keys are built in" },
    { "engine.distributed_strategy", "fsdp2,fsdp,ddp", "is not built in: verlc shards with trainer.sharding (zero1/2/3)" },
    { "engine.defer_fsdp_grad_sync", "*", "" },
    { "engine.enable_fp8", "False,false", "is not supported: verlc computes in fp32 or bf16" },
    { "engine.enable_compile", "*", "" },
    { "engine.attn_implementation", "*", "" },
    { "engine.attention_backend_override", "*", "" },
    { "engine.backend_config.*", "*", "" },
    { "engine.moe_config.*", "*", "" },
    { "engine.impl_cfg.*", "*", "" },
    { "engine.mp_reduce_dtype", "fp32,float32", "note: gradient reductions are fp32" },
    { "engine.mp_output_dtype", "*", "" },
    /* optim=automodel's keys that leave the update as it is (start and end weight decay are equal) */
    { "optim.wd_incr_style", "*", "" },
    { "optim.master_weights", "*", "" },
    { "optim.master_weight_dtype", "*", "" },
    { "optim.store_param_remainders", "*", "" },
    { "optim.total_training_steps", "*", "" },
    /* Megatron's optimizer offloading and precision-aware variants: where the same update runs */
    { "optim.override_optimizer_config.offload_fraction", "*", "" },
    { "optim.override_optimizer_config.optimizer_offload_fraction", "*", "" },
    { "optim.override_optimizer_config.overlap_cpu_optimizer_d2h_h2d", "*", "" },
    /* (verl passes the moment dtypes to Megatron only with optim.use_precision_aware_optimizer: through the override
     * alone they stay fp32) */
    { "optim.override_optimizer_config.use_precision_aware_optimizer", "*", "" },
    { "optim.override_optimizer_config.decoupled_weight_decay", "True,true",
      "is not supported: verlc's weight decay is decoupled (AdamW's)" },
    /* optim=megatron's keys that only change how Megatron runs the same update */
    { "optim.weight_decay_incr_style", "*", "" }, /* start and end weight decay are equal: constant */
    { "optim.use_checkpoint_opt_param_scheduler", "*", "" },
};

static int value_in(const char *v, const char *list) {
    if (!strcmp(list, "*")) return 1;
    size_t n = strlen(v);
    for (const char *p = list; *p;) {
        size_t k = strcspn(p, ",");
        if (k == n && !strncmp(p, v, n)) return 1;
        p += k + (p[k] == ',');
    }
    return 0;
}

/* 1 when key is one of VERL_KEYS (*st set), else 0 */
/* whether KEYS names key itself */
static int own_key(const char *key) {
    for (size_t i = 0; i < N_KEYS; i++)
        if (!strcmp(key, KEYS[i].name)) return 1;
    return 0;
}

static int verl_key_set(const char *key, const char *v, vc_status *st) {
    for (size_t i = 0; i < sizeof VERL_KEYS / sizeof VERL_KEYS[0]; i++) {
        const verl_key *k = &VERL_KEYS[i];
        size_t n = strlen(k->name);
        int wild = k->name[n - 1] == '*', match = wild ? !strncmp(key, k->name, n - 1) : !strcmp(key, k->name);
        if (!match || (wild && own_key(key))) continue; /* (a key of its own under a group taken whole: model.mtp.enable) */
        *st = VC_OK;
        if (value_in(v, k->ok)) return 1;
        if (!strncmp(k->why, "note: ", 6)) vc_info("verlc sft: note: %s=%s: %s", key, v, k->why + 6);
        else *st = vc_fail(VC_ERR_UNSUPPORTED, "%s=%s %s", key, v, k->why);
        return 1;
    }
    return 0;
}

/* trainer.resume_mode (verl: auto | disable | resume_path): disable clears a resume, auto resumes from the
 * run directory's latest checkpoint, resume_path uses trainer.resume_from_path */
static vc_status resume_mode(vc_sft_config *c, const char *v) {
    if (!strcmp(v, "disable")) c->resume = NULL;
    else if (!strcmp(v, "auto")) c->resume = c->resume ? c->resume : "auto";
    else if (strcmp(v, "resume_path"))
        return vc_fail(VC_ERR_ARG, "trainer.resume_mode=%s: expected auto, disable or resume_path", v);
    return VC_OK;
}

#define CHAT_KW "data.apply_chat_template_kwargs"

/* a YAML value text as JSON (NULL on a parse error, message set naming key) */
static cJSON *yaml_value(const char *key, const char *text) {
    size_t n = strlen(text) + 8;
    char *doc = vc_malloc(n);
    if (!doc) return NULL;
    snprintf(doc, n, "v: %s\n", text);
    vc_config *y = NULL;
    char *js = NULL;
    cJSON *j = NULL;
    if (vc_config_parse_yaml(doc, strlen(doc), key, &y) == VC_OK && (js = vc_config_to_json(y, "v", 0))) j = cJSON_Parse(js);
    if (!j) vc_fail(VC_ERR_ARG, "%s=%s: not a YAML value", key, text);
    free(js);
    vc_config_free(y);
    free(doc);
    return j;
}

vc_status vc_sft_qat_opts(const vc_sft_config *c, vc_qat_opts *o) {
    memset(o, 0, sizeof *o);
    o->enable = c->qat_enable, o->mode = c->qat_mode, o->group_size = c->qat_group, o->quant_config = c->qat_config;
    static const char *const DEF[] = { "lm_head", "embed_tokens", "re:.*mlp.gate$" };
    cJSON *j = c->qat_ignore ? yaml_value("engine.qat.ignore_patterns", c->qat_ignore) : NULL;
    if (c->qat_ignore && !j) return VC_ERR_ARG;
    int n = j ? (cJSON_IsArray(j) ? cJSON_GetArraySize(j) : cJSON_IsNull(j) ? 0 : -1) : 3;
    vc_status st = n < 0 ? vc_fail(VC_ERR_ARG, "engine.qat.ignore_patterns=%s: a list of strings", c->qat_ignore) : VC_OK;
    o->ignore = st ? NULL : calloc(n > 0 ? (size_t)n : 1, sizeof *o->ignore);
    if (!st && !o->ignore) st = VC_ERR_NOMEM;
    for (int i = 0; !st && i < n; i++) {
        const cJSON *v = j ? cJSON_GetArrayItem(j, i) : NULL;
        if (j && !cJSON_IsString(v)) st = vc_fail(VC_ERR_ARG, "engine.qat.ignore_patterns[%d]: a string", i);
        else if (!(o->ignore[o->n_ignore++] = strdup(j ? v->valuestring : DEF[i]))) st = VC_ERR_NOMEM;
    }
    cJSON_Delete(j);
    if (st) vc_qat_opts_free(o);
    return st;
}

vc_status vc_sft_chat_kwargs(const vc_sft_config *c, cJSON **out) {
    *out = NULL;
    cJSON *o = c->chat_kwargs ? yaml_value(CHAT_KW, c->chat_kwargs) : cJSON_CreateObject();
    if (!o) return VC_ERR_ARG;
    if (cJSON_IsNull(o)) {
        cJSON_Delete(o);
        o = cJSON_CreateObject();
    }
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return vc_fail(VC_ERR_ARG, "%s=%s: must be a mapping (e.g. {enable_thinking: false})", CHAT_KW, c->chat_kwargs);
    }
    for (int i = 0; i < c->n_chat_kw; i++) {
        cJSON *v = yaml_value(c->chat_kw_key[i], c->chat_kw_val[i]);
        if (!v || strchr(c->chat_kw_key[i], '.') || !*c->chat_kw_key[i]) {
            cJSON_Delete(v);
            cJSON_Delete(o);
            return v ? vc_fail(VC_ERR_ARG, "%s.%s: one template variable name expected", CHAT_KW, c->chat_kw_key[i])
                     : VC_ERR_ARG;
        }
        cJSON_DeleteItemFromObjectCaseSensitive(o, c->chat_kw_key[i]);
        cJSON_AddItemToObject(o, c->chat_kw_key[i], v);
    }
    if (!o->child) cJSON_Delete(o), o = NULL;
    *out = o;
    return VC_OK;
}

void vc_sft_config_select(vc_sft_config *c, int n, char *const *args) {
    for (int i = 0; i < n; i++) {
        const char *a = args[i];
        while (*a == '+') a++;
        if (strcmp(a, "optim=automodel")) continue;
        /* verl's optim/automodel.yaml */
        c->automodel_optim = 1;
        c->beta1 = 0.9, c->beta2 = 0.999, c->eps = 1e-8, c->weight_decay = 0.01, c->grad_clip = 1.0;
        c->init_lr_ratio = 0.1, c->min_lr_ratio = 0.01, c->lr_scheduler = "cosine";
        c->warmup_ratio = 0.0, c->warmup_steps = -1;
    }
}

vc_status vc_sft_config_set(vc_sft_config *c, const char *key, const char *value) {
    vc_status st = VC_OK;
    while (*key == '+') key++; /* Hydra's +key / ++key (add or replace): every key here exists */
    if (!strcmp(key, "trainer.resume_mode")) return resume_mode(c, value);
    if (!strcmp(key, "model") && !strcmp(value, "hf_model")) return VC_OK; /* verl's model group (else `model` is the model directory) */
    if (!strcmp(key, "engine") && !strcmp(value, "mlite")) return c->mlite_engine = 1, VC_OK; /* (keys: VERL_KEYS) */
    if (!strcmp(key, "engine") && (!strcmp(value, "megatron") || !strcmp(value, "automodel")))
        return VC_OK; /* their keys are taken (VERL_KEYS) */
    if (!strcmp(key, "optim") && !strcmp(value, "megatron")) return c->megatron_optim = 1, VC_OK;
    if (!strcmp(key, "optim") && !strcmp(value, "automodel")) return c->automodel_optim = 1, VC_OK;
    if (!strcmp(key, "optim.optimizer")) { /* torch's AdamW, or TransformerEngine's FusedAdam (the same update) */
        if (!strcmp(value, "AdamW") || !strcmp(value, "adamw")) return c->fused_adam = 0, VC_OK;
        if (!strcmp(value, "FusedAdam")) return c->fused_adam = 1, VC_OK;
        if (!strcmp(value, "adam")) return c->fused_adam = c->muon = 0, VC_OK; /* optim=megatron's: AdamW's update */
        if (!strcmp(value, "muon")) return c->fused_adam = 0, c->muon = 1, VC_OK;
        return vc_fail(VC_ERR_UNSUPPORTED, "optim.optimizer=%s is not built in: verlc trains with AdamW (torch.optim's, "
                       "or TransformerEngine's FusedAdam) and, with optim=megatron, Megatron's adam or muon", value);
    }
    if (!strcmp(key, "optim.optimizer_impl")) {
        if (!strcmp(value, "torch.optim")) return c->te_optim_impl = 0, VC_OK;
        if (!strcmp(value, "transformer_engine.pytorch.optimizers") ||
            !strcmp(value, "transformer_engine.pytorch.optimizers.fused_adam"))
            return c->te_optim_impl = 1, VC_OK;
        return vc_fail(VC_ERR_UNSUPPORTED, "optim.optimizer_impl=%s is not built in: verlc's AdamW is torch.optim's "
                       "AdamW or transformer_engine.pytorch.optimizers' FusedAdam", value);
    }
    if (!strcmp(key, "engine.impl_cfg.recompute")) { /* Megatron-lite's recompute list: [full] recomputes layers */
        c->checkpointing |= strstr(value, "full") != NULL;
        return VC_OK;
    }
    if (!strcmp(key, "engine.override_transformer_config.recompute_granularity")) { /* Megatron's full recompute */
        c->checkpointing |= !strcmp(value, "full");
        return VC_OK;
    }
    if (!strcmp(key, CHAT_KW)) {
        c->chat_kwargs = value;
        return VC_OK;
    }
    if (!strncmp(key, CHAT_KW ".", sizeof CHAT_KW)) {
        if (c->n_chat_kw == 8) return vc_fail(VC_ERR_ARG, "%s: more than 8 keys", CHAT_KW);
        c->chat_kw_key[c->n_chat_kw] = key + sizeof CHAT_KW;
        c->chat_kw_val[c->n_chat_kw++] = value;
        return VC_OK;
    }
    if ((!strcmp(key, "trainer.test_freq") || !strcmp(key, "test_freq") || !strcmp(key, "trainer.save_freq") ||
         !strcmp(key, "save_freq")) && !strcmp(value, "after_each_epoch")) { /* (verl's sft_trainer: an epoch's steps) */
        *(strstr(key, "test") ? &c->test_freq : &c->save_freq) = VC_SFT_EACH_EPOCH;
        return VC_OK;
    }
    if (verl_key_set(key, value, &st)) return st;
    for (size_t i = 0; i < N_KEYS; i++)
        if (!strcmp(key, KEYS[i].name) || !strcmp(key, KEYS[i].alias)) return set_key(c, &KEYS[i], key, value);
    return vc_fail(VC_ERR_ARG, "unknown SFT key '%s' (see verlc sft --help)", key);
}

static void print_default(FILE *f, const vc_sft_config *d, const key_def *k) {
    const char *p = (const char *)d + k->off;
    switch (k->kind) {
    case K_STR: fprintf(f, "%s", *(const char *const *)p ? *(const char *const *)p : "-"); break;
    case K_I64: fprintf(f, "%lld", (long long)*(const int64_t *)p); break;
    case K_INT: case K_BOOL: fprintf(f, "%d", *(const int *)p); break;
    case K_U64: fprintf(f, "%llu", (unsigned long long)*(const uint64_t *)p); break;
    case K_F64: fprintf(f, "%g", *(const double *)p); break;
    case K_BYTES: fprintf(f, "%zu", *(const size_t *)p); break;
    case K_BETAS: fprintf(f, "[%g,%g]", d->beta1, d->beta2); break;
    }
}

void vc_sft_config_help(FILE *f) {
    vc_sft_config d;
    vc_sft_config_default(&d);
    fprintf(f, "keys (KEY=VALUE or --ALIAS VALUE; verl name / alias = default: meaning):\n");
    for (size_t i = 0; i < N_KEYS; i++) {
        fprintf(f, "  %-36s %-16s = ", KEYS[i].name, KEYS[i].alias);
        print_default(f, &d, &KEYS[i]);
        fprintf(f, ": %s\n", KEYS[i].help);
    }
}

/* The configuration as JSON (recorded in checkpoints). */
char *vc_sft_config_json(const vc_sft_config *c) {
    cJSON *o = cJSON_CreateObject();
    for (size_t i = 0; i < N_KEYS; i++) {
        const char *p = (const char *)c + KEYS[i].off;
        const char *name = KEYS[i].name;
        switch (KEYS[i].kind) {
        case K_STR:
            if (*(const char *const *)p) cJSON_AddStringToObject(o, name, *(const char *const *)p);
            else cJSON_AddNullToObject(o, name);
            break;
        case K_I64: cJSON_AddNumberToObject(o, name, (double)*(const int64_t *)p); break;
        case K_INT: case K_BOOL: cJSON_AddNumberToObject(o, name, *(const int *)p); break;
        case K_U64: cJSON_AddNumberToObject(o, name, (double)*(const uint64_t *)p); break;
        case K_F64: cJSON_AddNumberToObject(o, name, *(const double *)p); break;
        case K_BYTES: cJSON_AddNumberToObject(o, name, (double)*(const size_t *)p); break;
        case K_BETAS: break;
        }
    }
    char *s = vc_json_print(o, 1);
    cJSON_Delete(o);
    return s;
}
