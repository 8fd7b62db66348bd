/* The trainers on the CUDA device against the cpu device, through the verlc binary: `verlc train` GRPO (2
 * steps, entropy bonus; 1 step on a mixture-of-experts model) and PPO (GAE with a critic, 1 step), and
 * `verlc sft` (2 steps) with the same seeds on both (the MoE step with use_prefix_grouper's shared prompts). The CUDA kernels sum in other orders than the CPU's, so
 * results are compared within a tolerance: every metric (timing, throughput and MFU aside) within 1e-3 relative
 * (1e-5 absolute near 0), and the exported weights within 1e-4 of the largest weight. With MPI, NCCL and
 * mpirun: `verlc sft` on 2 ranks with the NCCL communicator on cuda against 2 MPI ranks on cpu, plain data
 * parallel and ZeRO-2 with overlapped reduction (both ranks share the one GPU). Without a usable device: "no
 * CUDA device: skipped", exit 0. */
#include "../rl/rl_cli_util.h"
#include "cuda_test_util.h"
#include "mpi_launch.h"
#include "verlc/dist.h"
#include <cjson/cJSON.h>

#define MET_REL 1e-3
#define MET_ABS 1e-5
#define W_REL 1e-4

static int skip_metric(const char *k) {
    return !strncmp(k, "timing_s/", 9) || !strncmp(k, "perf/", 5) || !strncmp(k, "time", 4) ||
           !strncmp(k, "timing_per_token_ms/", 20) || !strcmp(k, "train/mfu"); /* (SFT's MFU: a timing) */
}

/* every numeric metric of every line of a's metrics.jsonl is close to b's */
static void close_metrics(const char *name, const char *a, const char *b) {
    char *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    CHECK_OK(vc_read_file(a, &x, &nx));
    CHECK_OK(vc_read_file(b, &y, &ny));
    int lines = 0, compared = 0, differ = 0;
    double worst = 0;
    char worst_key[128] = "";
    for (char *p = x, *q = y; p && q && *p && *q; lines++) {
        char *pe = strchr(p, '\n'), *qe = strchr(q, '\n');
        if (pe) *pe = 0;
        if (qe) *qe = 0;
        cJSON *ja = cJSON_Parse(p), *jb = cJSON_Parse(q);
        CHECK(ja && jb);
        for (cJSON *e = ja ? ja->child : NULL; e; e = e->next) {
            if (!cJSON_IsNumber(e) || skip_metric(e->string)) continue;
            cJSON *f = cJSON_GetObjectItemCaseSensitive(jb, e->string);
            compared++;
            double u = e->valuedouble, v = f ? f->valuedouble : NAN;
            double err = fabs(u - v);
            /* within 1e-3 relative, or 1e-5 absolute near 0 */
            double score = err / (fabs(u) > 1e-30 ? fabs(u) : 1e-30);
            if (!(err <= MET_ABS || score <= MET_REL)) {
                differ++;
                fprintf(stderr, "%s: %s: %.9g (cpu) vs %.9g (cuda)\n", name, e->string, u, v);
            }
            if (!(score <= worst) && err > 0) {
                worst = score;
                snprintf(worst_key, sizeof worst_key, "%s", e->string);
            }
        }
        cJSON_Delete(ja);
        cJSON_Delete(jb);
        p = pe ? pe + 1 : NULL;
        q = qe ? qe + 1 : NULL;
    }
    printf("  %-5s %d lines, %d metrics compared, worst relative difference %.2e (%s), %d over %.0e (and %.0e absolute)\n", name, lines,
           compared, worst, worst_key[0] ? worst_key : "-", differ, MET_REL, MET_ABS);
    CHECK(lines > 0 && compared > 10 && differ == 0);
    free(x);
    free(y);
}

/* two safetensors files with the same header (names, shapes, F32 offsets) and weights within W_REL of the
 * largest weight */
static void close_weights(const char *name, const char *a, const char *b) {
    char *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    CHECK_OK(vc_read_file(a, &x, &nx));
    CHECK_OK(vc_read_file(b, &y, &ny));
    uint64_t hx = 0;
    if (x && nx >= 8) memcpy(&hx, x, 8);
    int same_head = x && y && nx == ny && nx >= 8 + hx && !memcmp(x, y, 8 + hx);
    CHECK_MSG(same_head, "%s: safetensors headers differ (%s, %s)", name, a, b);
    double maxw = 0, maxd = 0;
    if (same_head) {
        size_t n = (nx - 8 - hx) / 4;
        const char *px = x + 8 + hx, *py = y + 8 + hx;
        for (size_t i = 0; i < n; i++) {
            float u, v;
            memcpy(&u, px + 4 * i, 4);
            memcpy(&v, py + 4 * i, 4);
            if (fabs(u) > maxw) maxw = fabs(u);
            double d = fabs((double)u - v);
            if (!(d <= maxd)) maxd = d;
        }
    }
    printf("  %-5s exported weights: max |cpu - cuda| %.2e, max |w| %.2e\n", name, maxd, maxw);
    CHECK_MSG(maxd <= W_REL * maxw, "%s: weights differ by %.2e > %.0e x %.2e", name, maxd, W_REL, maxw);
    free(x);
    free(y);
}

static void rl_pair(const char *name, const char *extra) {
    rl_cli_train_on(name, extra, "cpu");
    rl_cli_train_on(name, extra, "cuda");
    char a[600], b[600];
    rl_cli_out(a, sizeof a, name, "cpu", 0);
    rl_cli_out(b, sizeof b, name, "cuda", 0);
    close_metrics(name, a, b);
    rl_cli_out(a, sizeof a, name, "cpu", 1);
    rl_cli_out(b, sizeof b, name, "cuda", 1);
    close_weights(name, a, b);
}

static void sft_pair(void) {
    CHECK(cli_sh("head -4 %s/data/gsm8k/train.jsonl > %s/sft_train.jsonl && sed -n 11p %s/data/gsm8k/train.jsonl > "
                 "%s/sft_val.jsonl", shared, dir, shared, dir) == 0);
    const char *devs[2] = { "cpu", "cuda" };
    for (int i = 0; i < 2; i++)
        CHECK_MSG(cli_sh("%s sft --model %s/model --tokenizer %s/fixtures/tokenizers/qwen3 --train %s/sft_train.jsonl "
                         "--val %s/sft_val.jsonl --prompt-key question --response-key answer max_length=64 "
                         "truncation=left train_batch_size=2 micro_batch_size=1 lr=1e-2 epochs=1 seed=5 warmup_steps=0 "
                         "quiet=0 save_freq=2 --device %s --out %s/sft_%s > %s/sft_%s.log 2>&1 && "
                         "%s export %s/sft_%s --out %s/sft_hf_%s > /dev/null",
                         bin, dir, shared, dir, dir, devs[i], dir, devs[i], dir, devs[i], bin, dir, devs[i], dir, devs[i]) == 0,
                  "sft on %s failed; see %s/sft_%s.log", devs[i], dir, devs[i]);
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/sft_cpu/metrics.jsonl", dir);
    snprintf(b, sizeof b, "%s/sft_cuda/metrics.jsonl", dir);
    close_metrics("sft", a, b);
    snprintf(a, sizeof a, "%s/sft_hf_cpu/model.safetensors", dir);
    snprintf(b, sizeof b, "%s/sft_hf_cuda/model.safetensors", dir);
    close_weights("sft", a, b);
}

/* a Qwen3-MoE model (8 experts, top 2) in <dir>/moe, the dense model's vocabulary and tokenizer */
static void moe_setup(void) {
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"architectures\":[\"Qwen3MoeForCausalLM\"],\"model_type\":\"qwen3_moe\",\"vocab_size\":%d,"
             "\"hidden_size\":16,\"num_hidden_layers\":1,\"num_attention_heads\":2,\"num_key_value_heads\":1,"
             "\"head_dim\":8,\"intermediate_size\":32,\"moe_intermediate_size\":16,\"num_experts\":8,"
             "\"num_experts_per_tok\":2,\"norm_topk_prob\":true,\"decoder_sparse_step\":1,"
             "\"max_position_embeddings\":1024,\"rms_norm_eps\":1e-6,\"rope_theta\":1000000,\"hidden_act\":\"silu\","
             "\"tie_word_embeddings\":true,\"bos_token_id\":151643,\"eos_token_id\":151645,\"torch_dtype\":\"float32\"}",
             rl_cli_vocab());
    rl_cli_init_model("moe", cfg);
}

/* a Qwen3.5 hybrid (Gated DeltaNet layers beside gated attention) in <dir>/hybrid: its conv and recurrent states
 * through the paged rollout (state slots, forks) and the recurrence's backward in training */
static void hybrid_setup(void) {
    char cfg[1400];
    snprintf(cfg, sizeof cfg,
             "{\"architectures\":[\"Qwen3_5ForCausalLM\"],\"model_type\":\"qwen3_5_text\",\"vocab_size\":%d,"
             "\"hidden_size\":16,\"num_hidden_layers\":2,\"num_attention_heads\":2,\"num_key_value_heads\":1,"
             "\"head_dim\":8,\"intermediate_size\":32,\"linear_num_key_heads\":1,\"linear_num_value_heads\":2,"
             "\"linear_key_head_dim\":8,\"linear_value_head_dim\":4,\"linear_conv_kernel_dim\":4,"
             "\"layer_types\":[\"linear_attention\",\"full_attention\"],\"max_position_embeddings\":1024,"
             "\"rms_norm_eps\":1e-6,\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":1000000,"
             "\"partial_rotary_factor\":0.5},\"hidden_act\":\"silu\",\"tie_word_embeddings\":true,"
             "\"bos_token_id\":151643,\"eos_token_id\":151645,\"torch_dtype\":\"float32\"}",
             rl_cli_vocab());
    rl_cli_init_model("hybrid", cfg);
}

/* 2 ranks (one GPU: 1 rank): NCCL on cuda against MPI on cpu, same global batch */
static void dist_pair(const char *name, const char *extra) {
    const char *mpirun = getenv("VERLC_MPIRUN") && *getenv("VERLC_MPIRUN") ? getenv("VERLC_MPIRUN") : "mpirun";
    if (!vc_comm_available("nccl") || !vc_test_on_path(mpirun)) {
        printf("  %-5s skipped: this build has no NCCL communicator or %s is missing\n", name, mpirun);
        return;
    }
    const char *runs[2][2] = { { "mpi", "cpu" }, { "nccl", "cuda" } };
    int np = 2;
    if (vc_cuda_device_count() < 2) { /* NCCL needs a GPU per rank: the job is refused with one line */
        CHECK(cli_sh("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 VERLC_DIST=nccl %s --oversubscribe -np 2 "
                     "-x VERLC_DIST %s sft --model %s/model --train %s/sft_train.jsonl --prompt-key question "
                     "--response-key answer max_length=64 %s --device cuda --out %s/%s_nccl > %s/%s_nccl.log 2>&1",
                     mpirun, bin, dir, dir, extra, dir, name, dir, name) != 0);
        CHECK_MSG(cli_sh("grep -q 'ranks 0 and 1 on .* share the GPU' %s/%s_nccl.log", dir, name) == 0,
                  "%s: 2 NCCL ranks on one GPU are not refused by name (see %s/%s_nccl.log)", name, dir, name);
        printf("  %-5s one GPU: 2 NCCL ranks refused by name; the NCCL/MPI comparison on 1 rank\n", name);
        np = 1;
    }
    for (int i = 0; i < 2; i++)
        CHECK_MSG(cli_sh("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 VERLC_DIST=%s %s --oversubscribe -np %d "
                         "-x VERLC_DIST %s sft --model %s/model --train %s/sft_train.jsonl --prompt-key question "
                         "--response-key answer max_length=64 truncation=left train_batch_size=2 micro_batch_size=1 "
                         "lr=1e-2 epochs=1 seed=5 warmup_steps=0 save_freq=100 %s --device %s --out %s/%s_%s > "
                         "%s/%s_%s.log 2>&1",
                         runs[i][0], mpirun, np, bin, dir, dir, extra, runs[i][1], dir, name, runs[i][0], dir, name,
                         runs[i][0]) == 0,
                  "%s with %s failed; see %s/%s_%s.log", name, runs[i][0], dir, name, runs[i][0]);
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/%s_mpi/metrics.jsonl", dir, name);
    snprintf(b, sizeof b, "%s/%s_nccl/metrics.jsonl", dir, name);
    close_metrics(name, a, b);
    CHECK(cli_sh("grep -q 'nccl communicator' %s/%s_nccl.log", dir, name) == 0);
}

int main(void) {
    if (gpu_skip()) return 0;
    rl_cli_start("cuda_train");
    double t0 = vc_now();
    rl_cli_setup(16, 1, 8, 32);
    rl_pair("grpo", "algorithm.adv_estimator=grpo actor_rollout_ref.actor.use_kl_loss=False trainer.total_training_steps=2");
    char ppo[512];
    snprintf(ppo, sizeof ppo, "algorithm.adv_estimator=gae critic.model.path=%s/model critic.optim.lr=1e-3 "
                              "critic.ppo_micro_batch_size_per_gpu=1 trainer.total_training_steps=1", dir);
    rl_pair("ppo", ppo);
    moe_setup(); /* routing, grouping and the grouped expert GEMMs in rollout and training */
    char moe[512];
    /* with shared prompts (use_prefix_grouper, one micro-batch by token budget): the prefix attention and its
     * key gathers on the device; with QAT (fsdp_config.qat: the linears, experts' too, quantized on the host and
     * uploaded for the rollout, the log-prob pass and the update, the full-precision weights uploaded back) */
    snprintf(moe, sizeof moe, "actor_rollout_ref.model.path=%s/moe algorithm.adv_estimator=grpo "
                              "actor_rollout_ref.actor.use_kl_loss=False trainer.total_training_steps=1 "
                              "actor_rollout_ref.actor.use_dynamic_bsz=true actor_rollout_ref.actor.use_prefix_grouper=true "
                              "actor_rollout_ref.actor.fsdp_config.qat.enable=True",
             dir);
    rl_pair("grpo_moe", moe);
    hybrid_setup();
    char hyb[512];
    snprintf(hyb, sizeof hyb, "actor_rollout_ref.model.path=%s/hybrid algorithm.adv_estimator=grpo "
                              "actor_rollout_ref.actor.use_kl_loss=False trainer.total_training_steps=1", dir);
    rl_pair("grpo_hybrid", hyb);
    sft_pair();
    dist_pair("dp2", "");
    dist_pair("zero2", "sharding=zero2 overlap_grad_reduce=true");
    dist_pair("zero3", "sharding=zero3");
    printf("cuda train: %.1f s\n", vc_now() - t0);
    if (!vc_t_fail) cli_sh("rm -rf %s", dir);
    return vc_test_done();
}
