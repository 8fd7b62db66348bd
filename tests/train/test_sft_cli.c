/* verlc sft end to end on a tiny model with the real Qwen3 tokenizer: GSM8K raw rows, messages rows,
 * a malformed line (file:line, skipped), interrupt + resume = uninterrupted (bit-identical), export. */
#include "sft_util.h"
#include "../optim_file.h"
#include "verlc/check.h"
#include "verlc/model.h"
#include "verlc/optim.h"
#include "verlc/report.h"
#include "verlc/safetensors.h"


int main(void) {
    cli_quiet = 1; /* the failures some commands must give stay off stderr */
    sft_start("test_sft");
    /* 10 GSM8K rows, a malformed line, a row without fields; validation rows */
    CHECK(sh("head -5 %3$s/data/gsm8k/train.jsonl > %2$s/train.jsonl && echo '{\"question\": broken' >> %2$s/train.jsonl"
             " && echo '{\"other\": 1}' >> %2$s/train.jsonl && sed -n 6,10p %3$s/data/gsm8k/train.jsonl >> %2$s/train.jsonl"
             " && sed -n 11,13p %3$s/data/gsm8k/train.jsonl > %2$s/val.jsonl%4$s", NULL) == 0);
    const char *common = "%1$s sft --model %2$s/model --tokenizer %3$s/fixtures/tokenizers/qwen3 --train %2$s/train.jsonl "
                         "--val %2$s/val.jsonl --prompt-key question --response-key answer max_length=40 "
                         "truncation=left train_batch_size=3 micro_batch_size=2 lr=1e-2 epochs=2 seed=5 "
                         "warmup_steps=1 threads=1 quiet=1 %4$s 2> %2$s/log.txt";
    char extra[512];
    snprintf(extra, sizeof extra, "--out %s/full save_freq=2", TMP);
    CHECK(sh(common, extra) == 0);
    /* the step arena's peak over the run within the memory plan's activations (two rows of the longest length) */
    char sft_log[400];
    snprintf(sft_log, sizeof sft_log, "%s/log.txt", TMP);
    CHECK(cli_arena_within_plan(sft_log) == 0);
    snprintf(extra, sizeof extra, "--out %s/part save_freq=2 max_steps=3", TMP);
    CHECK(sh(common, extra) == 0);
    CHECK(sh("grep -q 'train.jsonl:6' %2$s/log.txt%4$s", NULL) == 0); /* malformed line reported by number */
    snprintf(extra, sizeof extra, "--out %s/part save_freq=2 --resume latest", TMP);
    CHECK(sh(common, extra) == 0);
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/full/step_6/model.safetensors", TMP);
    snprintf(b, sizeof b, "%s/part/step_6/model.safetensors", TMP);
    CHECK_MSG(cli_file_eq(a, b), "resumed run's step_6 weights differ from the uninterrupted run");
    snprintf(a, sizeof a, "%s/full/step_6/optim.bin", TMP);
    snprintf(b, sizeof b, "%s/part/step_6/optim.bin", TMP);
    CHECK(cli_file_eq(a, b));
    /* metrics: verl names, 6 step lines plus the initial validation */
    CHECK(sh("test $(grep -c 'train/loss' %2$s/full/metrics.jsonl) = 6 && grep -q 'val/loss' %2$s/full/metrics.jsonl"
             " && grep -q 'perf/throughput' %2$s/part/metrics.jsonl%4$s", NULL) == 0);
    /* verl's train/mfu on every step line: above 0 and not absurd (verl's count can pass 1 on this model's shape: see
     * test_trainer_e2e's check_mfu) */
    CHECK(sh("test $(grep -c '\"train/mfu\": [0-9]' %2$s/full/metrics.jsonl) = 6 && "
             "! grep -q '\"train/mfu\": 0[,}]' %2$s/full/metrics.jsonl && "
             "! grep -q '\"train/mfu\": [0-9]\\{3\\}' %2$s/full/metrics.jsonl%4$s", NULL) == 0);
    /* and verl's memory figures with each step (the CPU: the process's peak resident memory) */
    CHECK(sh("test $(grep -c '\"perf/max_memory_allocated_gb\": [0-9.e-]*, \"perf/max_memory_reserved_gb\": [0-9.e-]*, "
             "\"perf/cpu_memory_used_gb\": [0-9.e-]*}' %2$s/full/metrics.jsonl) = 6%4$s", NULL) == 0);
    /* verl b178a3cd's fsdp_sft_trainer normalisation (the arithmetic: test_trainer.c, test_dp.c, test_sft_data.c; against
     * verl's own code: tools/fuzz/diff_sft_loss.py): micro-batches of 2 and 1 rows, so the first step's loss differs,
     * and the validation takes one batch of the 3 rows' first 2 */
    snprintf(extra, sizeof extra, "--out %s/legacy trainer.use_legacy_worker_impl=enable max_steps=1", TMP);
    CHECK(sh(common, extra) == 0);
    vc_metrics *ml = NULL, *mf = NULL;
    snprintf(a, sizeof a, "%s/legacy/metrics.jsonl", TMP);
    snprintf(b, sizeof b, "%s/full/metrics.jsonl", TMP);
    CHECK_OK(vc_metrics_read(a, &ml));
    CHECK_OK(vc_metrics_read(b, &mf));
    const vc_metric_series *tl = ml ? vc_metrics_find(ml, "train/loss") : NULL, *tf = mf ? vc_metrics_find(mf, "train/loss") : NULL;
    const vc_metric_series *vl = ml ? vc_metrics_find(ml, "val/loss") : NULL, *vf = mf ? vc_metrics_find(mf, "val/loss") : NULL;
    CHECK_MSG(tl && tf && vl && vf && tl->n == 1 && fabs(tl->y[0] - tf->y[0]) > 1e-4 * tf->y[0] &&
              fabs(vl->y[0] - vf->y[0]) > 1e-4 * vf->y[0], "use_legacy_worker_impl=enable: train/loss %.9g (default %.9g), "
              "first val/loss %.9g (default %.9g)", tl ? tl->y[0] : NAN, tf ? tf->y[0] : NAN, vl ? vl->y[0] : NAN,
              vf ? vf->y[0] : NAN);
    vc_metrics_free(ml), vc_metrics_free(mf);
    /* the validation loss of verl's engine-based sft_trainer: the mean of each whole batch's token mean (5 rows in
     * batches of 2: the fifth left out), here the same batches as the legacy trainer's micro-batches of 2 (whose
     * validation diff_sft_loss.py checks against verl's own code; one micro-batch a step: the same training) */
    CHECK(sh("sed -n 11,15p %3$s/data/gsm8k/train.jsonl > %2$s/val5.jsonl && head -4 %2$s/val5.jsonl > %2$s/val4.jsonl%4$s",
             NULL) == 0);
    double v[3];
    const char *runs[3][2] = { { "v5", "" }, { "v5l", "trainer.use_legacy_worker_impl=enable" }, { "v4", "" } };
    for (int i = 0; i < 3; i++) {
        snprintf(extra, sizeof extra, "--out %s/%s --val %s/val%d.jsonl train_batch_size=2 max_steps=1 %s", TMP, runs[i][0],
                 TMP, i == 2 ? 4 : 5, runs[i][1]);
        CHECK(sh(common, extra) == 0);
        snprintf(a, sizeof a, "%s/%s/metrics.jsonl", TMP, runs[i][0]);
        vc_metrics *mv = NULL;
        CHECK_OK(vc_metrics_read(a, &mv));
        const vc_metric_series *se = mv ? vc_metrics_find(mv, "val/loss") : NULL;
        v[i] = se && se->n ? se->y[se->n - 1] : NAN;
        vc_metrics_free(mv);
    }
    CHECK_MSG(fabs(v[0] - v[1]) <= 1e-6 * v[0] && v[0] == v[2], "val/loss of 5 rows in batches of 2: %.9g, legacy %.9g, "
              "of their first 4 %.9g", v[0], v[1], v[2]);
    /* skip_bad_lines=false stops at the malformed line with file:line */
    snprintf(extra, sizeof extra, "--out %s/strict skip_bad_lines=false", TMP);
    CHECK(sh(common, extra) != 0);
    CHECK(sh("grep -q 'train.jsonl:6' %2$s/log.txt%4$s", NULL) == 0);
    /* messages rows (chat template, loss on assistant turns) */
    const char *msgs = "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Hello!\"},"
                       " {\"role\": \"user\", \"content\": \"2+2?\"}, {\"role\": \"assistant\", \"content\": \"4\"}]}\n";
    char mp[512];
    snprintf(mp, sizeof mp, "%s/msgs.jsonl", TMP);
    char rows[2048] = "";
    for (int i = 0; i < 4; i++) strcat(rows, msgs);
    CHECK_OK(vc_write_file_atomic(mp, rows, strlen(rows)));
    CHECK(sh("VERL_FILE_LOGGER_PATH=%2$s/verl_file.jsonl "
             "%1$s sft --model %2$s/model --tokenizer %3$s/fixtures/tokenizers/qwen3 --train %2$s/msgs.jsonl "
             "--out %2$s/msgs train_batch_size=2 micro_batch_size=1 threads=1 quiet=1 data.train_max_samples=2 "
             "\"trainer.logger=['console','file']\" "
             "'data.chat_template={%% for m in messages %%}<{{ m.role }}>{{ m.content }}{{ eos_token }}{%% endfor %%}' "
             "2> %2$s/log2.txt%4$s", NULL) == 0);
    /* data.train_max_samples=2: the first 2 of the 4 rows, one step of 2; verl's file logger line for it */
    CHECK(sh("test $(grep -c train/loss %2$s/msgs/metrics.jsonl) -eq 1%4$s", NULL) == 0);
    CHECK(sh("grep -q '^{\"step\": 1, \"data\": {\"train/loss\": ' %2$s/verl_file.jsonl && "
             "test $(wc -l < %2$s/verl_file.jsonl) -eq 1%4$s", NULL) == 0);
    /* --dump-data: the rows as trained (4 messages rows, token-aligned masks with targets), no run directory made */
    CHECK(sh("%1$s sft --model %2$s/model --tokenizer %3$s/fixtures/tokenizers/qwen3 --train %2$s/msgs.jsonl "
             "--out %2$s/msgs_dump --dump-data %2$s/dump.jsonl threads=1 quiet=1 "
             "'data.chat_template={%% for m in messages %%}<{{ m.role }}>{{ m.content }}{{ eos_token }}{%% endfor %%}' "
             "2> %2$s/log4.txt && test $(grep -c '^{\"input_ids\": \\[[0-9, ]*\\], \"loss_mask\": \\[[01, ]*1[01, ]*\\]}$' "
             "%2$s/dump.jsonl) -eq 4 && test ! -e %2$s/msgs_dump%4$s", NULL) == 0);
    /* data.chat_template is the template used: a broken one stops the run naming the key */
    CHECK(sh("%1$s sft --model %2$s/model --tokenizer %3$s/fixtures/tokenizers/qwen3 --train %2$s/msgs.jsonl "
             "--out %2$s/msgs_bad 'data.chat_template={%% for m in %%}' threads=1 quiet=1 2> %2$s/log3.txt; "
             "test $? -ne 0 && grep -q data.chat_template %2$s/log3.txt%4$s", NULL) == 0);
    /* export of the run (latest checkpoint) to a Hugging Face directory that loads and checks */
    CHECK(sh("%1$s export %2$s/full --out %2$s/hf > /dev/null%4$s", NULL) == 0);
    snprintf(a, sizeof a, "%s/hf", TMP);
    vc_check_result r;
    CHECK_OK(vc_check_model(a, &r));
    CHECK(sh("test -f %2$s/hf/tokenizer.json && test -f %2$s/hf/config.json%4$s", NULL) == 0);
    CHECK(sh("%1$s export %2$s/nothing --out %2$s/hf2 2> /dev/null%4$s", NULL) != 0);
    /* LoRA: adapters trained (the loss falls), frozen base weights, exact resume, merged export */
    snprintf(extra, sizeof extra, "--out %s/lora save_freq=2 lora_rank=8 lora_alpha=16 "
                                  "target_modules=q_proj,v_proj,gate_proj,down_proj", TMP);
    CHECK(sh(common, extra) == 0);
    if (!LIGHT) { /* (resume: the full run's above under sanitizers; this one with adapters in the release build) */
        snprintf(extra, sizeof extra, "--out %s/lora_part save_freq=2 lora_rank=8 lora_alpha=16 "
                                      "target_modules=q_proj,v_proj,gate_proj,down_proj max_steps=3", TMP);
        CHECK(sh(common, extra) == 0);
        snprintf(extra, sizeof extra, "--out %s/lora_part save_freq=2 lora_rank=8 lora_alpha=16 "
                                      "target_modules=q_proj,v_proj,gate_proj,down_proj --resume latest", TMP);
        CHECK(sh(common, extra) == 0);
        snprintf(a, sizeof a, "%s/lora/step_6/lora_adapter/adapter_model.safetensors", TMP);
        snprintf(b, sizeof b, "%s/lora_part/step_6/lora_adapter/adapter_model.safetensors", TMP);
        CHECK_MSG(cli_file_eq(a, b), "resumed LoRA run's adapters differ from the uninterrupted run");
    }
    snprintf(a, sizeof a, "%s/lora/step_2/model.safetensors", TMP);
    snprintf(b, sizeof b, "%s/lora/step_6/model.safetensors", TMP);
    CHECK_MSG(cli_file_eq(a, b), "LoRA run: the base weights changed between steps 2 and 6");
    CHECK(sh("python3 -c \"import json,sys; L=[json.loads(l)['train/loss'] for l in open('%2$s/lora/metrics.jsonl') "
             "if 'train/loss' in l]; sys.exit(0 if L[-1] < L[0] else 1)\"%4$s", NULL) == 0);
    /* model.lora_adapter_path: a run starting from the trained adapters (lr 0: they come back unchanged, bit for bit)
     * begins below the first run's first loss; without lora_rank, or from a missing directory, it stops naming the key */
    snprintf(extra, sizeof extra, "--out %s/lora_from lora_rank=8 lora_alpha=16 target_modules=q_proj,v_proj,gate_proj,"
             "down_proj model.lora_adapter_path=%s/lora/step_6/lora_adapter lr=0 max_steps=1 save_freq=1", TMP, TMP);
    CHECK(sh(common, extra) == 0);
    snprintf(a, sizeof a, "%s/lora/step_6/lora_adapter/adapter_model.safetensors", TMP);
    snprintf(b, sizeof b, "%s/lora_from/step_1/lora_adapter/adapter_model.safetensors", TMP);
    CHECK_MSG(cli_file_eq(a, b), "adapters loaded from lora_adapter_path and kept by lr 0 differ from the file");
    CHECK(sh("python3 -c \"import json,sys; f=lambda p: [json.loads(l)['train/loss'] for l in open(p) if 'train/loss' "
             "in l][0]; sys.exit(0 if f('%2$s/lora_from/metrics.jsonl') < f('%2$s/lora/metrics.jsonl') else 1)\"%4$s",
             NULL) == 0);
    CHECK(sh("%1$s sft --model %2$s/model --tokenizer %3$s/fixtures/tokenizers/qwen3 --train %2$s/train.jsonl "
             "--prompt-key question --response-key answer --out %2$s/lora_bad model.lora_adapter_path=%2$s/lora "
             "threads=1 quiet=1 2> %2$s/log4.txt; test $? -ne 0 && grep -q 'lora_adapter_path.*lora_rank' "
             "%2$s/log4.txt%4$s", NULL) == 0);
    CHECK(sh("%1$s sft --model %2$s/model --tokenizer %3$s/fixtures/tokenizers/qwen3 --train %2$s/train.jsonl "
             "--prompt-key question --response-key answer --out %2$s/lora_bad lora_rank=8 "
             "model.lora_adapter_path=%2$s/nowhere threads=1 quiet=1 2> %2$s/log4.txt; test $? -ne 0 && "
             "grep -q 'lora_adapter_path' %2$s/log4.txt%4$s", NULL) == 0);
    CHECK(sh("%1$s export %2$s/lora --out %2$s/hf_lora > /dev/null%4$s", NULL) == 0);
    CHECK(sh("test -f %2$s/hf_lora/lora_adapter/adapter_config.json%4$s", NULL) == 0);
    /* the merged export moved the targeted projections only */
    snprintf(a, sizeof a, "%s/hf_lora", TMP);
    snprintf(b, sizeof b, "%s/model", TMP);
    vc_model *x = NULL, *y = NULL;
    CHECK_OK(vc_model_load(a, &x));
    CHECK_OK(vc_model_load(b, &y));
    double moved_q = 0, moved_k = 0;
    for (int i = 0; x && y && i < vc_model_n_params(x); i++) {
        const char *name;
        vc_tensor *tx = vc_model_param(x, i, &name, NULL), *ty = vc_model_param(y, i, NULL, NULL);
        float *hx = malloc((size_t)tx->n * 4), *hy = malloc((size_t)tx->n * 4);
        double d = 0;
        if (hx && hy && !vc_tensor_read(tx, hx) && !vc_tensor_read(ty, hy))
            for (int64_t k = 0; k < tx->n; k++) d = fmax(d, fabs((double)hx[k] - hy[k]));
        if (strstr(name, ".q")) moved_q = fmax(moved_q, d);
        if (strstr(name, ".k") && !strstr(name, "norm")) moved_k = fmax(moved_k, d);
        free(hx);
        free(hy);
    }
    printf("LoRA sft export: q projections moved by %.3g, k projections by %g\n", moved_q, moved_k);
    CHECK(moved_q > 1e-4 && moved_k == 0);
    vc_model_free(x);
    vc_model_free(y);
    /* verl's engine.qat (w4a16): the linears fake-quantized to NVFP4 in training and validation: another first loss
     * and validation loss than full precision's; w4a4 refused (the release build's: QAT itself is checked under
     * sanitizers by test_qat and test_trainer_later) */
    if (!LIGHT) {
    snprintf(extra, sizeof extra, "--out %s/qat max_steps=2 engine.qat.enable=True engine.qat.mode=w4a16 "
             "'engine.qat.ignore_patterns=[lm_head, embed_tokens]'", TMP);
    CHECK(sh(common, extra) == 0);
    CHECK(sh("a=$(grep -m1 -o '\"train/loss\": [0-9.e-]*' %2$s/qat/metrics.jsonl) && "
             "b=$(grep -m1 -o '\"train/loss\": [0-9.e-]*' %2$s/full/metrics.jsonl) && test -n \"$a\" && test \"$a\" != \"$b\" && "
             "a=$(grep -m1 -o '\"val/loss\": [0-9.e-]*' %2$s/qat/metrics.jsonl) && "
             "b=$(grep -m1 -o '\"val/loss\": [0-9.e-]*' %2$s/full/metrics.jsonl) && test -n \"$a\" && test \"$a\" != \"$b\"%4$s",
             NULL) == 0);
    snprintf(extra, sizeof extra, "--out %s/qat4 max_steps=1 engine.qat.enable=True engine.qat.mode=w4a4", TMP);
    CHECK(sh(common, extra) != 0 && sh("grep -q 'engine.qat.mode=w4a4' %2$s/log.txt%4$s", NULL) == 0);
    }
    /* verl's engine=megatron optim=megatron groups: Megatron's OptimizerParamScheduler drives the steps' lr (config
     * and schedule logic the release build covers: skipped under sanitizers, where every run is several times slower) */
    if (LIGHT) goto done;
    snprintf(extra, sizeof extra, "--out %s/mg optim=megatron engine=megatron engine.tensor_model_parallel_size=1 "
             "engine.use_mbridge=True optim.lr_warmup_init=1e-3 optim.min_lr=1e-4 optim.lr_decay_style=cosine "
             "+engine.override_transformer_config.gradient_accumulation_fusion=False", TMP);
    CHECK(sh(common, extra) == 0);
    vc_lr_schedule ls;
    vc_lr_megatron_config mc = { .lr = 1e-2, .lr_warmup_init = 1e-3, .min_lr = 1e-4, .total_training_steps = 6,
                                 .lr_decay_steps = -1, .lr_warmup_steps = 1, .lr_wsd_decay_steps = -1,
                                 .lr_decay_style = "cosine", .lr_wsd_decay_style = "exponential" };
    CHECK_OK(vc_lr_megatron_init(&ls, &mc));
    char mpath[512];
    snprintf(mpath, sizeof mpath, "%s/mg/metrics.jsonl", TMP);
    vc_metrics *mt = NULL;
    CHECK_OK(vc_metrics_read(mpath, &mt));
    const vc_metric_series *lr = mt ? vc_metrics_find(mt, "train/lr") : NULL;
    int lr_ok = lr && lr->n == 6;
    for (int i = 0; lr_ok && i < 6; i++) lr_ok = fabs(lr->y[i] - vc_lr_at(&ls, i)) <= 1e-7 * vc_lr_at(&ls, i);
    CHECK_MSG(lr_ok, "optim=megatron: train/lr is not Megatron's schedule (%d values)", lr ? (int)lr->n : -1);
    vc_metrics_free(mt);
    /* engine=mlite (Megatron-lite) with its optim=megatron group: Megatron-lite's scheduler (its WSD's exponential decay
     * start (end / start)^ratio, not Megatron-core's) */
    snprintf(extra, sizeof extra, "--out %s/ml optim=megatron engine=mlite engine.tp=1 optim.min_lr=1e-4 "
             "optim.lr_decay_style=wsd optim.lr_wsd_decay_steps=3 optim.lr_warmup_steps=0", TMP);
    CHECK(sh(common, extra) == 0);
    mc = (vc_lr_megatron_config){ .lr = 1e-2, .min_lr = 1e-4, .total_training_steps = 6, .lr_decay_steps = -1,
                                  .lr_warmup_steps = 0, .lr_wsd_decay_steps = 3, .lr_decay_style = "wsd",
                                  .lr_wsd_decay_style = "exponential" };
    CHECK_OK(vc_lr_mlite_init(&ls, &mc));
    snprintf(mpath, sizeof mpath, "%s/ml/metrics.jsonl", TMP);
    CHECK_OK(vc_metrics_read(mpath, &mt));
    lr = mt ? vc_metrics_find(mt, "train/lr") : NULL;
    lr_ok = lr && lr->n == 6 && fabs(lr->y[5] - 1e-2 * pow(1e-2, 2.0 / 3.0)) <= 1e-7 * lr->y[5];
    for (int i = 0; lr_ok && i < 6; i++) lr_ok = fabs(lr->y[i] - vc_lr_at(&ls, i)) <= 1e-7 * vc_lr_at(&ls, i);
    CHECK_MSG(lr_ok, "engine=mlite: train/lr is not Megatron-lite's schedule (%d values)", lr ? (int)lr->n : -1);
    vc_metrics_free(mt);
    /* verl's engine=automodel optim=automodel groups (the group's defaults under the keys before it: betas [0.9, 0.999],
     * init_lr_ratio 0.1, min_lr_ratio 0.01, cosine): Automodel's OptimizerParamScheduler, written out here */
    snprintf(extra, sizeof extra, "--out %s/am engine=automodel optim=automodel engine.tp_size=1 "
             "engine.distributed_strategy=fsdp2 engine.activation_checkpointing=True engine.mp_param_dtype=fp32 "
             "optim.wd_incr_style=constant engine.backend_config.attn=sdpa", TMP);
    CHECK(sh(common, extra) == 0);
    snprintf(mpath, sizeof mpath, "%s/am/metrics.jsonl", TMP);
    CHECK_OK(vc_metrics_read(mpath, &mt));
    lr = mt ? vc_metrics_find(mt, "train/lr") : NULL;
    lr_ok = lr && lr->n == 6;
    for (int s = 0; lr_ok && s < 6; s++) { /* warmup 1 step from 1e-3 to 1e-2, then cosine to 1e-4 at step 6 */
        double want = s <= 1 ? 1e-3 + 9e-3 * s : 1e-4 + 0.5 * (cos(M_PI * (s - 1) / 5.0) + 1) * (1e-2 - 1e-4);
        lr_ok = fabs(lr->y[s] - want) <= 1e-7 * want;
    }
    CHECK_MSG(lr_ok, "optim=automodel: train/lr is not Automodel's schedule (%d values)", lr ? (int)lr->n : -1);
    vc_metrics_free(mt);
    CHECK(sh("grep -q 'optim=automodel: AdamW betas (0.9, 0.999).*init_lr=1.00e-03, max_lr=1.00e-02, min_lr=1.00e-04' "
             "%2$s/log.txt%4$s", NULL) == 0);
    /* TransformerEngine's FusedAdam (AdamW's update) with its moments in bf16 (the arithmetic: test_optim.c); the
     * combinations verl's optimizers refuse, refused */
    snprintf(extra, sizeof extra, "--out %s/amf engine=automodel optim=automodel optim.optimizer=FusedAdam "
             "optim.optimizer_impl=transformer_engine.pytorch.optimizers.fused_adam optim.exp_avg_dtype=bf16 "
             "optim.exp_avg_sq_dtype=bf16 optim.master_weights=true max_steps=1 save_freq=1", TMP);
    CHECK(sh(common, extra) == 0);
    CHECK(sh("grep -q 'first moment stored in bf16, its second in bf16' %2$s/log.txt%4$s", NULL) == 0);
    long nb[2], nz[2], fb[2], fz[2];
    snprintf(a, sizeof a, "%s/amf/step_1/optim.bin", TMP);
    snprintf(b, sizeof b, "%s/full/step_6/optim.bin", TMP); /* torch's AdamW: fp32 moments */
    CHECK(optim_file_moments(a, nb, nz) == 0 && optim_file_moments(b, fb, fz) == 0);
    CHECK_MSG(nz[0] > 1000 && nb[0] == nz[0] && nb[1] == nz[1] && fb[0] < fz[0] / 100 && fb[1] < fz[1] / 100,
              "moments in bf16: %ld / %ld and %ld / %ld; in fp32 %ld / %ld and %ld / %ld", nb[0], nz[0], nb[1], nz[1],
              fb[0], fz[0], fb[1], fz[1]);
    static const char *const refused[][2] = {
        { "optim=automodel optim.exp_avg_dtype=bf16", "torch.optim.AdamW keeps fp32 moments" },
        { "optim.optimizer=FusedAdam", "it comes from optim.optimizer_impl=transformer_engine" },
        { "optim=megatron optim.use_precision_aware_optimizer=true engine.dtype=bf16 optim.main_grads_dtype=bf16",
          "main_grads_dtype=bf16 is not supported" },
        { "optim.exp_avg_dtype=fp8", "optim.exp_avg_dtype=fp8: verlc keeps" },
        { "optim.optimizer=muon", "optim.optimizer=muon is Megatron-core" },
        { "optim=megatron optim.optimizer=muon optim.muon_scale_mode=rms", "optim.muon_scale_mode=rms" },
        { "trainer.use_legacy_worker_impl=fsdp", "trainer.use_legacy_worker_impl: `fsdp` is not auto, enable or disable" },
        { "model.mtp.enable=True", "model.mtp.enable=true: .*declares no multi-token-prediction layers" },
        { "model.mtp.enable=True model.mtp.enable_train=True", "declares no multi-token-prediction layers" },
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        snprintf(extra, sizeof extra, "--out %s/amr %s max_steps=1", TMP, refused[i][0]);
        CHECK_MSG(sh(common, extra) != 0, "%s: not refused", refused[i][0]);
        char grep[300];
        snprintf(grep, sizeof grep, "grep -q '%s' %%2$s/log.txt%%4$s", refused[i][1]);
        CHECK_MSG(sh(grep, NULL) == 0, "%s: no line with '%s'", refused[i][0], refused[i][1]);
    }
    /* verl's MTP parameters loaded only (MiMo's SFT example: model.mtp.enable=True): a config that declares an MTP layer
     * trains as without it, with a notice */
    CHECK(sh("cp -r %2$s/model %2$s/mtpmodel && sed -i 's/^{/{\"num_nextn_predict_layers\": 1,/' "
             "%2$s/mtpmodel/config.json%4$s", NULL) == 0);
    /* ... with MiMo's script's trainer.test_freq / save_freq=after_each_epoch (verl's sft_trainer: every epoch's steps,
     * here 3 of 10 rows in batches of 3): validation before the first step and after steps 3 and 6, saves at both */
    snprintf(extra, sizeof extra, "--out %s/mtp --model %s/mtpmodel model.mtp.enable=True "
             "trainer.test_freq=after_each_epoch trainer.save_freq=after_each_epoch", TMP, TMP);
    CHECK(sh(common, extra) == 0);
    CHECK(sh("grep -q \"1 multi-token-prediction layer is kept\" %2$s/log.txt%4$s", NULL) == 0);
    CHECK(sh("test $(grep -c val/loss %2$s/mtp/metrics.jsonl) = 3 && test -d %2$s/mtp/step_3 && test -d %2$s/mtp/step_6"
             "%4$s", NULL) == 0);
    /* MTP training (model.mtp.enable_train) of a MiMo config `verlc init` wrote with its MTP layer: verl's mtp_losses
     * metric on each step, the layer trained and exported under MiMo's names (the loss and gradients: test_mtp.c) */
    CHECK(sh("sed 's/\"Qwen3ForCausalLM\"/\"MiMoForCausalLM\"/; s/\"qwen3\"/\"mimo\"/; s/^{/{\"num_nextn_predict_layers\": 1,/' "
             "%2$s/tiny.json > %2$s/mimo.json && %1$s init --config %2$s/mimo.json --out %2$s/mimo --seed 3 > /dev/null%4$s",
             NULL) == 0);
    snprintf(extra, sizeof extra, "--out %s/mtpt --model %s/mimo model.mtp.enable=True model.mtp.enable_train=True "
             "model.mtp.mtp_loss_scaling_factor=0.3 max_steps=2 save_freq=2", TMP, TMP);
    CHECK(sh(common, extra) == 0);
    CHECK(sh("grep -q 'training 1 multi-token-prediction layer, their loss scaled by 0.3' %2$s/log.txt && "
             "test $(grep -c '\"train/mtp_losses/mtp_1_loss\": [0-9]' %2$s/mtpt/metrics.jsonl) = 2 && "
             "%1$s export %2$s/mtpt --out %2$s/mtphf > /dev/null%4$s", NULL) == 0);
    vc_checkpoint *c0 = NULL, *c1 = NULL;
    snprintf(a, sizeof a, "%s/mimo", TMP);
    snprintf(b, sizeof b, "%s/mtphf", TMP);
    CHECK_OK(vc_ckpt_open(a, &c0));
    CHECK_OK(vc_ckpt_open(b, &c1));
    const vc_st_tensor *p0 = c0 ? vc_ckpt_find(c0, "model.mtp_layers.0.input_proj.weight") : NULL;
    const vc_st_tensor *p1 = c1 ? vc_ckpt_find(c1, "model.mtp_layers.0.input_proj.weight") : NULL;
    CHECK_MSG(p0 && p1 && vc_ckpt_count(c0) == vc_ckpt_count(c1) && p0->nbytes == p1->nbytes &&
              memcmp(p0->data, p1->data, p0->nbytes) != 0, "the MTP layer's input_proj trained and exported");
    /* ... exported again with the base model gone (its structure from the checkpoint's model_config.json): the same */
    CHECK(sh("mv %2$s/mimo %2$s/mimo_gone && %1$s export %2$s/mtpt --out %2$s/mtphf2 > /dev/null; r=$?; "
             "mv %2$s/mimo_gone %2$s/mimo; test $r = 0%4$s", NULL) == 0);
    vc_checkpoint *c2 = NULL;
    snprintf(b, sizeof b, "%s/mtphf2", TMP);
    CHECK_OK(vc_ckpt_open(b, &c2));
    const vc_st_tensor *p2 = c2 ? vc_ckpt_find(c2, "model.mtp_layers.0.input_proj.weight") : NULL;
    CHECK_MSG(p1 && p2 && vc_ckpt_count(c2) == vc_ckpt_count(c1) && p1->nbytes == p2->nbytes &&
              !memcmp(p1->data, p2->data, p1->nbytes), "the export without the base model differs");
    vc_ckpt_close(c2);
    vc_ckpt_close(c0);
    vc_ckpt_close(c1);
    /* ... stopped after a step and resumed: the same weights, MTP layer and optimiser state */
    snprintf(extra, sizeof extra, "--out %s/mtpr --model %s/mimo model.mtp.enable=True model.mtp.enable_train=True "
             "model.mtp.mtp_loss_scaling_factor=0.3 max_steps=1 save_freq=1", TMP, TMP);
    CHECK(sh(common, extra) == 0);
    snprintf(extra, sizeof extra, "--out %s/mtpr --model %s/mimo model.mtp.enable=True model.mtp.enable_train=True "
             "model.mtp.mtp_loss_scaling_factor=0.3 max_steps=2 save_freq=1 --resume latest", TMP, TMP);
    CHECK(sh(common, extra) == 0);
    snprintf(a, sizeof a, "%s/mtpt/step_2/model.safetensors", TMP);
    snprintf(b, sizeof b, "%s/mtpr/step_2/model.safetensors", TMP);
    CHECK_MSG(cli_file_eq(a, b), "MTP training resumed: step_2's weights differ from the uninterrupted run's");
    /* trainer.use_legacy_worker_impl=enable on 2 ranks: the rows dealt as verl's DistributedSampler deals them (against
     * verl's own code on 2 ranks: tools/fuzz/diff_sft_loss.py with DIFF_SFT_WORLD=2), and the splits verl's
     * fsdp_sft_trainer refuses refused */
    if (cli_mpirun_usable()) {
        char dp[1024];
        snprintf(dp, sizeof dp, "%s%s", CLI_MPIRUN_2, common);
        snprintf(extra, sizeof extra, "--out %s/ldp trainer.use_legacy_worker_impl=enable train_batch_size=4 max_steps=1", TMP);
        CHECK_MSG(sh(dp, extra) == 0, "legacy sft on 2 ranks failed: see %s/log.txt", TMP);
        CHECK(sh("test $(grep -c train/loss %2$s/ldp/metrics.jsonl) = 1%4$s", NULL) == 0);
        static const char *const split[][2] = {
            { "train_batch_size=3", "train_batch_size=3 is not divisible by the 2 data-parallel ranks" },
            { "train_batch_size=6", "micro_batch_size_per_gpu=2 does not divide a rank's 3 rows" },
        };
        for (size_t i = 0; i < 2; i++) {
            snprintf(extra, sizeof extra, "--out %s/ldp2 trainer.use_legacy_worker_impl=enable %s max_steps=1", TMP,
                     split[i][0]);
            CHECK_MSG(sh(dp, extra) != 0, "legacy sft on 2 ranks, %s: not refused", split[i][0]);
            char grep[300];
            snprintf(grep, sizeof grep, "grep -q \"%s\" %%2$s/log.txt%%4$s", split[i][1]);
            CHECK_MSG(sh(grep, NULL) == 0, "%s on 2 ranks: no line with '%s'", split[i][0], split[i][1]);
        }
        /* MTP training on 2 ranks: each depth's token mean over the whole mini-batch (counts summed over the ranks),
         * the same losses as on one rank */
        for (int z = 0; z < 2; z++) { /* plain data parallelism, then ZeRO-2 (gradients reduced during backward) */
            snprintf(extra, sizeof extra, "--out %s/mdp%d --model %s/mimo model.mtp.enable=True "
                     "model.mtp.enable_train=True model.mtp.mtp_loss_scaling_factor=0.3 max_steps=2 save_freq=2 "
                     "trainer.sharding=%s", TMP, z, TMP, z ? "zero2" : "none");
            CHECK_MSG(sh(dp, extra) == 0, "MTP sft on 2 ranks (%s) failed: see %s/log.txt", z ? "zero2" : "plain", TMP);
            char cmp[700];
            snprintf(cmp, sizeof cmp, "python3 -c \"import json,sys; f=lambda p: [(d['train/loss'], "
                     "d['train/mtp_losses/mtp_1_loss']) for d in map(json.loads, open(p)) if 'train/loss' in d]; "
                     "a, b = f('%%2$s/mtpt/metrics.jsonl'), f('%%2$s/mdp%d/metrics.jsonl'); sys.exit(0 if len(a) == "
                     "len(b) == 2 and all(abs(x - y) <= 1e-5 * abs(x) for p, q in zip(a, b) for x, y in zip(p, q)) "
                     "else 1)\"%%4$s", z);
            CHECK_MSG(sh(cmp, NULL) == 0, "MTP sft on 2 ranks (%s): losses differ from one rank's", z ? "zero2" : "plain");
        }
    } else
        printf("legacy sft on 2 ranks skipped: a sanitizer build, no MPI in this build or no mpirun\n");
    /* later verl's optim.optimizer=muon (Megatron-core's Muon on the matrices, its arithmetic: test_muon.c): one momentum
     * buffer for them, second moments only for adam's tensors (embeddings, head, norms: most of this tiny model) */
    snprintf(extra, sizeof extra, "--out %s/mu optim=megatron engine=megatron optim.optimizer=muon "
             "optim.muon_fp32_matmul_prec=highest optim.muon_nesterov=true max_steps=2 save_freq=2", TMP);
    CHECK(sh(common, extra) == 0);
    long mb[2], mz[2];
    snprintf(a, sizeof a, "%s/mu/step_2/optim.bin", TMP);
    CHECK(optim_file_moments(a, mb, mz) == 0);
    CHECK_MSG(mz[0] > 1000 && mz[1] > 0 && mz[0] - mz[1] > 1000, "muon: %ld first, %ld second moments not 0", mz[0],
              mz[1]);
    CHECK(sh("grep -q 'Muon+AdamW' %2$s/log.txt%4$s", NULL) == 0);
    /* LoRA under Muon: every adapter matrix is Muon's (as Megatron-Bridge's adapters are 2-D weights): no second moment */
    snprintf(extra, sizeof extra, "--out %s/mul optim=megatron engine=megatron optim.optimizer=muon model.lora_rank=4 "
             "model.lora_alpha=8 max_steps=1 save_freq=1", TMP);
    CHECK(sh(common, extra) == 0);
    snprintf(a, sizeof a, "%s/mul/step_1/optim.bin", TMP);
    CHECK(optim_file_moments(a, mb, mz) == 0);
    CHECK_MSG(mz[0] > 100 && mz[1] == 0, "muon + LoRA: %ld first, %ld second moments not 0", mz[0], mz[1]);
    /* without --out: verl's trainer.default_local_dir, checkpoints/PROJECT/EXPERIMENT under the working directory */
    CHECK(sh("B=$(realpath %1$s) && cd %2$s && $B sft --model %2$s/model --tokenizer %3$s/fixtures/tokenizers/qwen3 --train %2$s/train.jsonl "
             "--prompt-key question --response-key answer max_length=40 truncation=left train_batch_size=3 "
             "micro_batch_size=2 max_steps=1 threads=1 quiet=1 trainer.project_name=proj trainer.experiment_name=exp 2> %2$s/log.txt && "
             "test $(grep -c train/loss %2$s/checkpoints/proj/exp/metrics.jsonl) = 1%4$s", NULL) == 0);
    snprintf(extra, sizeof extra, "--out %s/mg2 optim=megatron engine.tensor_model_parallel_size=2 max_steps=1", TMP);
    CHECK(sh(common, extra) == 0); /* a parallel size is noticed: every rank is a data-parallel rank */
    CHECK(sh("grep -q 'data-parallel rank' %2$s/log.txt%4$s", NULL) == 0);
done:
    if (!getenv("VERLC_KEEP")) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "rm -rf %s", TMP);
        CHECK(system(cmd) == 0);
    }
    return vc_test_done();
}
