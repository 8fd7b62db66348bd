/* Rollout engine: reproducibility across batch size / threads / request order / preemption, prompt page
 * sharing, rollout vs training log-probs, row invariance of the GEMM and of the paged forward, errors. */
#include "infer/infer.h"
#include "backend/cpu/cpu.h"
#include "core/sanitize.h"
#include "infer_test_util.h"
#include "vc_test.h"
#include "verlc/pool.h"
#include "verlc/rng.h"
#include "verlc/rollout.h"
#include <unistd.h>
#include <xmmintrin.h>
#include <fcntl.h>
#include <sys/wait.h>

static const char *CONFIG =
    "{\"architectures\": [\"Qwen2ForCausalLM\"], \"model_type\": \"qwen2\", \"hidden_size\": 48,"
    " \"intermediate_size\": 96, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
    " \"vocab_size\": 300, \"max_position_embeddings\": 1024, \"rms_norm_eps\": 1e-6, \"rope_theta\": 10000.0,"
    " \"tie_word_embeddings\": false, \"hidden_act\": \"silu\", \"bos_token_id\": 1, \"eos_token_id\": 2,"
    " \"torch_dtype\": \"float32\"}";

#define NP 6
static int32_t prompts[NP][80];
static const int plen[NP] = { 5, 17, 1, 33, 70, 9 };

/* Qwen3.5's hybrid: Gated DeltaNet layers carry per-sequence states through prefill chunks, forks and preemption */
static const char *CONFIG_HYBRID =
    "{\"architectures\": [\"Qwen3_5ForCausalLM\"], \"model_type\": \"qwen3_5_text\", \"hidden_size\": 48,"
    " \"intermediate_size\": 96, \"num_hidden_layers\": 4, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
    " \"head_dim\": 12, \"linear_num_key_heads\": 2, \"linear_num_value_heads\": 4, \"linear_key_head_dim\": 8,"
    " \"linear_value_head_dim\": 6, \"linear_conv_kernel_dim\": 4, \"vocab_size\": 300,"
    " \"max_position_embeddings\": 1024, \"rms_norm_eps\": 1e-6, \"rope_parameters\": {\"rope_type\": \"default\","
    " \"rope_theta\": 10000.0, \"partial_rotary_factor\": 0.5}, \"tie_word_embeddings\": false, \"hidden_act\": \"silu\","
    " \"bos_token_id\": 1, \"eos_token_id\": 2, \"torch_dtype\": \"float32\"}";

/* LFM2: short convolutions carry their last inputs */
static const char *CONFIG_LFM2 =
    "{\"architectures\": [\"Lfm2ForCausalLM\"], \"model_type\": \"lfm2\", \"hidden_size\": 48,"
    " \"intermediate_size\": 96, \"num_hidden_layers\": 3, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
    " \"layer_types\": [\"conv\", \"full_attention\", \"conv\"], \"conv_L_cache\": 3, \"block_multiple_of\": 16,"
    " \"vocab_size\": 300, \"max_position_embeddings\": 1024, \"norm_eps\": 1e-5, \"rope_theta\": 1000000.0,"
    " \"bos_token_id\": 1, \"eos_token_id\": 2, \"torch_dtype\": \"float32\"}";

/* Granite 4: Mamba 2 layers carry a conv state and an SSM state per head */
static const char *CONFIG_MAMBA =
    "{\"architectures\": [\"GraniteMoeHybridForCausalLM\"], \"model_type\": \"granitemoehybrid\", \"hidden_size\": 48,"
    " \"intermediate_size\": 32, \"shared_intermediate_size\": 64, \"num_local_experts\": 0, \"num_hidden_layers\": 3,"
    " \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"layer_types\": [\"mamba\", \"attention\", \"mamba\"],"
    " \"mamba_n_heads\": 4, \"mamba_n_groups\": 2, \"mamba_d_state\": 8, \"mamba_d_conv\": 4, \"mamba_expand\": 2,"
    " \"vocab_size\": 300, \"max_position_embeddings\": 1024, \"rms_norm_eps\": 1e-6, \"hidden_act\": \"silu\","
    " \"bos_token_id\": 1, \"eos_token_id\": 2, \"torch_dtype\": \"float32\"}";

/* Falcon-H1: every layer keeps keys and values and a Mamba 2 state side by side */
static const char *CONFIG_FALCON =
    "{\"architectures\": [\"FalconH1ForCausalLM\"], \"model_type\": \"falcon_h1\", \"hidden_size\": 48,"
    " \"intermediate_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
    " \"mamba_n_heads\": 4, \"mamba_d_ssm\": 64, \"mamba_n_groups\": 1, \"mamba_d_state\": 8, \"mamba_d_conv\": 4,"
    " \"mamba_rms_norm\": true, \"key_multiplier\": 0.9, \"ssm_multipliers\": [1, 1.2, 1, 1, 0.8],"
    " \"vocab_size\": 300, \"max_position_embeddings\": 1024, \"rms_norm_eps\": 1e-6, \"hidden_act\": \"silu\","
    " \"bos_token_id\": 1, \"eos_token_id\": 2, \"torch_dtype\": \"float32\"}";

/* Kimi-Linear: Kimi Delta Attention (a decay per key channel) beside MLA without rope, MoE after a dense layer */
static const char *CONFIG_KIMI =
    "{\"architectures\": [\"KimiLinearForCausalLM\"], \"model_type\": \"kimi_linear\", \"hidden_size\": 48,"
    " \"intermediate_size\": 64, \"moe_intermediate_size\": 24, \"num_hidden_layers\": 3, \"num_attention_heads\": 4,"
    " \"num_key_value_heads\": 4, \"kv_lora_rank\": 16, \"q_lora_rank\": null, \"qk_rope_head_dim\": 8,"
    " \"qk_nope_head_dim\": 8, \"v_head_dim\": 8, \"num_experts\": 4, \"num_experts_per_token\": 2,"
    " \"num_shared_experts\": 1, \"linear_num_heads\": 3, \"linear_head_dim\": 8, \"linear_conv_kernel_dim\": 4,"
    " \"layer_types\": [\"linear_attention\", \"full_attention\", \"linear_attention\"], \"vocab_size\": 300,"
    " \"rms_norm_eps\": 1e-5, \"hidden_act\": \"silu\", \"tie_word_embeddings\": false, \"bos_token_id\": 1,"
    " \"eos_token_id\": 2, \"torch_dtype\": \"float32\"}";

/* MiniMax-Text-01: lightning attention (a fixed decay per head, no conv) beside attention, residuals of the normed
 * input */
static const char *CONFIG_MINIMAX =
    "{\"architectures\": [\"MiniMaxForCausalLM\"], \"model_type\": \"minimax\", \"hidden_size\": 48,"
    " \"intermediate_size\": 32, \"num_hidden_layers\": 3, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
    " \"head_dim\": 12, \"num_local_experts\": 4, \"num_experts_per_tok\": 2, \"mlp_alpha_factor\": 1.1,"
    " \"layer_types\": [\"linear_attention\", \"full_attention\", \"linear_attention\"], \"vocab_size\": 300,"
    " \"rms_norm_eps\": 1e-5, \"hidden_act\": \"silu\", \"tie_word_embeddings\": false, \"bos_token_id\": 1,"
    " \"eos_token_id\": 2, \"torch_dtype\": \"float32\"}";

/* Jamba: Mamba 1 layers (a state per channel) beside attention without rope, experts on odd layers */
static const char *CONFIG_JAMBA =
    "{\"architectures\": [\"JambaForCausalLM\"], \"model_type\": \"jamba\", \"hidden_size\": 48,"
    " \"intermediate_size\": 32, \"num_hidden_layers\": 3, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
    " \"num_experts\": 4, \"num_experts_per_tok\": 2, \"attn_layer_period\": 3, \"attn_layer_offset\": 1,"
    " \"mamba_d_state\": 8, \"mamba_d_conv\": 4, \"mamba_expand\": 2, \"mamba_dt_rank\": \"auto\", \"vocab_size\": 300,"
    " \"rms_norm_eps\": 1e-6, \"hidden_act\": \"silu\", \"tie_word_embeddings\": false, \"bos_token_id\": 1,"
    " \"eos_token_id\": 2, \"torch_dtype\": \"float32\"}";

/* FalconMamba: Mamba 1 mixers only (no attention layer, no keys or values), dt / B / C normed without weights */
static const char *CONFIG_FALCON_MAMBA =
    "{\"architectures\": [\"FalconMambaForCausalLM\"], \"model_type\": \"falcon_mamba\", \"hidden_size\": 48,"
    " \"num_hidden_layers\": 2, \"state_size\": 8, \"conv_kernel\": 4, \"expand\": 2, \"time_step_rank\": \"auto\","
    " \"vocab_size\": 300, \"layer_norm_epsilon\": 1e-5, \"mixer_rms_eps\": 1e-6, \"hidden_act\": \"silu\","
    " \"tie_word_embeddings\": false, \"bos_token_id\": 1, \"eos_token_id\": 2, \"torch_dtype\": \"float32\"}";

/* Gemma 4: KV sharing (the last two layers attend with earlier layers' cached keys and values, appending none),
 * full layers with wider heads and one kv head (rows of two widths in one pool), per-layer embeddings, MoE beside the
 * MLP */
static const char *CONFIG_GEMMA4 =
    "{\"architectures\": [\"Gemma4ForCausalLM\"], \"model_type\": \"gemma4_text\", \"hidden_size\": 48,"
    " \"intermediate_size\": 32, \"num_hidden_layers\": 5, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
    " \"head_dim\": 12, \"global_head_dim\": 24, \"num_global_key_value_heads\": 1, \"attention_k_eq_v\": true,"
    " \"sliding_window\": 5, \"layer_types\": [\"sliding_attention\", \"full_attention\", \"sliding_attention\","
    " \"sliding_attention\", \"full_attention\"], \"hidden_size_per_layer_input\": 8, \"num_kv_shared_layers\": 2,"
    " \"use_double_wide_mlp\": true, \"enable_moe_block\": true, \"num_experts\": 4, \"top_k_experts\": 2,"
    " \"moe_intermediate_size\": 16, \"final_logit_softcapping\": 30.0, \"vocab_size\": 300, \"rms_norm_eps\": 1e-6,"
    " \"bos_token_id\": 1, \"eos_token_id\": 2, \"torch_dtype\": \"float32\"}";

/* MiMo-V2-Flash: values narrower than keys, sliding layers with twice the kv heads and sinks (KV rows of two layouts) */
static const char *CONFIG_MIMO =
    "{\"architectures\": [\"MiMoV2FlashForCausalLM\"], \"model_type\": \"mimo_v2_flash\", \"hidden_size\": 48,"
    " \"intermediate_size\": 64, \"moe_intermediate_size\": 16, \"num_hidden_layers\": 3, \"num_attention_heads\": 4,"
    " \"num_key_value_heads\": 1, \"head_dim\": 16, \"v_head_dim\": 8, \"n_routed_experts\": 4, \"num_experts_per_tok\": 2,"
    " \"sliding_window\": 5, \"layer_types\": [\"full_attention\", \"sliding_attention\", \"sliding_attention\"],"
    " \"vocab_size\": 300, \"rms_norm_eps\": 1e-5, \"bos_token_id\": 1, \"eos_token_id\": 2, \"torch_dtype\": \"float32\"}";

/* LFM3: short convolutions beside sliding and full (proportional rope) attention with a gate per head */
static const char *CONFIG_LFM3 =
    "{\"architectures\": [\"Lfm3ForCausalLM\"], \"model_type\": \"lfm3\", \"hidden_size\": 48, \"intermediate_size\": 64,"
    " \"num_hidden_layers\": 4, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 12,"
    " \"sliding_window\": 5, \"conv_L_cache\": 3, \"layer_types\": [\"conv\", \"sliding_attention\", \"full_attention\","
    " \"conv\"], \"vocab_size\": 300, \"norm_eps\": 1e-5, \"bos_token_id\": 1, \"eos_token_id\": 2,"
    " \"torch_dtype\": \"float32\"}";

/* GPT-2: learned positions (each decode step looks its own up), Conv1D weights, no rope */
static const char *CONFIG_GPT2 =
    "{\"architectures\": [\"GPT2LMHeadModel\"], \"model_type\": \"gpt2\", \"n_embd\": 48, \"n_layer\": 2, \"n_head\": 4,"
    " \"n_positions\": 512, \"vocab_size\": 300, \"activation_function\": \"gelu_new\", \"layer_norm_epsilon\": 1e-5,"
    " \"bos_token_id\": 1, \"eos_token_id\": 2, \"torch_dtype\": \"float32\"}";

/* GLM-5 (DeepSeek Sparse Attention): each query attends to its indexer's 4 best keys (the indexer's keys kept behind the
 * values in the KV rows); layer 1 reuses layer 0's selection */
static const char *CONFIG_DSA =
    "{\"architectures\": [\"GlmMoeDsaForCausalLM\"], \"model_type\": \"glm_moe_dsa\", \"hidden_size\": 48,"
    " \"intermediate_size\": 64, \"moe_intermediate_size\": 16, \"num_hidden_layers\": 3, \"num_attention_heads\": 4,"
    " \"num_key_value_heads\": 4, \"q_lora_rank\": 24, \"kv_lora_rank\": 16, \"qk_nope_head_dim\": 8,"
    " \"qk_rope_head_dim\": 8, \"v_head_dim\": 8, \"n_routed_experts\": 4, \"num_experts_per_tok\": 2,"
    " \"n_shared_experts\": 1, \"first_k_dense_replace\": 1, \"index_topk\": 4, \"index_n_heads\": 8,"
    " \"index_head_dim\": 16, \"indexer_types\": [\"full\", \"shared\", \"full\"], \"vocab_size\": 300,"
    " \"rms_norm_eps\": 1e-6, \"bos_token_id\": 1, \"eos_token_id\": 2, \"torch_dtype\": \"float32\"}";

static vc_model *make_model(void) { return model_from_config(CONFIG, 7); }

typedef struct {
    int max_batch, threads, reverse, chunk, page;
    double budget;
} run_cfg;

static vc_rollout_sample *generate(vc_model *m, const vc_sampling *sp, run_cfg rc, int n, int *n_out,
                                   vc_rollout_stats *stats) {
    vc_rollout_opts o = { .kv_budget_bytes = rc.budget ? rc.budget : 64e6, .page_tokens = rc.page ? rc.page : 16,
                          .max_batch = rc.max_batch, .prefill_chunk = rc.chunk ? rc.chunk : 512 };
    vc_rollout_request rq[NP];
    for (int i = 0; i < NP; i++) {
        int k = rc.reverse ? NP - 1 - i : i;
        rq[i] = (vc_rollout_request){ prompts[k], plen[k], n, (uint64_t)k };
    }
    vc_set_threads(rc.threads);
    vc_rollout_engine *e = NULL;
    vc_rollout_sample *out = NULL;
    CHECK_OK(vc_rollout_new(m, &o, &e));
    CHECK_OK(vc_rollout_generate(e, rq, NP, sp, &out, n_out));
    if (stats) vc_rollout_last_stats(e, stats);
    vc_rollout_free(e);
    if (rc.reverse && out) { /* back to prompt order */
        vc_rollout_sample *r = calloc((size_t)*n_out, sizeof *r);
        for (int i = 0; i < NP; i++)
            for (int j = 0; j < n; j++) {
                r[(NP - 1 - i) * n + j] = out[i * n + j];
                r[(NP - 1 - i) * n + j].request = NP - 1 - i;
            }
        free(out);
        out = r;
    }
    return out;
}

/* the training path: one packed forward without cache, fused head log-probs */
static void compare_train_logprobs(vc_model *m, const vc_rollout_sample *s, int n, double *mean, double *max) {
    vc_graph *g = vc_graph_new();
    double sum = 0, mx = 0;
    int64_t cnt = 0;
    for (int i = 0; i < n; i++) {
        int r = s[i].request, L = plen[r] + (int)s[i].n_tokens;
        int32_t ids[256], tgt[256];
        memcpy(ids, prompts[r], (size_t)plen[r] * 4);
        memcpy(ids + plen[r], s[i].tokens, (size_t)s[i].n_tokens * 4);
        for (int t = 0; t < L; t++) tgt[t] = t + 1 < L && t + 1 >= plen[r] ? ids[t + 1] : -1;
        vc_graph_reset(g);
        vc_graph_set_grad(g, 0);
        int64_t cu[2] = { 0, L };
        vc_batch b = { 1, cu, ids };
        vc_tensor *h = vc_model_forward(m, g, &b, NULL), *lp = NULL, *ent = NULL;
        CHECK(h != NULL);
        if (!h) continue;
        CHECK_OK(vc_model_logprobs(m, g, h, tgt, &lp, &ent));
        float lph[256];
        CHECK_OK(vc_tensor_read(lp, lph));
        for (int64_t t = 0; t < s[i].n_tokens; t++) {
            double d = fabs((double)lph[plen[r] - 1 + t] - s[i].logp[t]);
            sum += d;
            mx = d > mx ? d : mx;
            cnt++;
        }
    }
    vc_graph_free(g);
    *mean = cnt ? sum / (double)cnt : 0;
    *max = mx;
}

/* the documented sequence of an element: one fused multiply-add chain over k in order, then the scaling */
static float gemm_chain(const float *a, const float *b, int64_t K, float alpha, float beta, float c) {
    float s = 0.0f;
    for (int64_t k = 0; k < K; k++) s = fmaf(a[k], b[k], s);
    return beta != 0.0f ? fmaf(beta, c, alpha * s) : alpha * s;
}

/* the chain under flush-to-zero and denormals-are-zero (bf16 matmuls' chain, as AVX-512 BF16 computes it) */
static float gemm_chain_ftz(const float *a, const float *b, int64_t K, float alpha, float beta, float c) {
    unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040u);
    float r = gemm_chain(a, b, K, alpha, beta, c);
    _mm_setcsr(csr);
    return r;
}

/* rows [0, M) of A (M rows of K) times B (53 rows of K) with alpha 0.75 and beta -0.5 over C0: every element the
 * chain's bits; returns the mismatches */
static int gemm_vs_chain(const float *A, const float *B, int64_t M, int64_t N, int64_t K, const float *C0) {
    float *C = malloc((size_t)(M * N) * 4);
    memcpy(C, C0, (size_t)(M * N) * 4);
    vc_infer_gemm(0, 1, M, N, K, 0.75f, A, K, B, K, -0.5f, C, N);
    int bad = 0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            float r = gemm_chain(A + i * K, B + j * K, K, 0.75f, -0.5f, C0[i * N + j]);
            bad += memcmp(&r, C + i * N + j, 4) != 0;
        }
    free(C);
    return bad;
}

/* every instruction set this CPU has (AVX-512, AVX2, scalar: each its own kernels, tiles and task shapes), at sums
 * of K terms (K % 16 and K % 8: the column kernel's scalar tail): row r alone or among others gives the same bits,
 * and every element is the documented chain, bit for bit, so every instruction set gives the same bits; M from 1
 * to 800 (the column kernel below 16 rows, panels of 48 rows with a last one of 1-3 vectors above, packed 768 rows
 * at a time), N 53 (a last block of 5 columns) */
static void test_gemm_row_invariance_isa(int isa, int64_t K) {
    int64_t M = 37, N = 53, MX = 800;
    float *A = malloc(MX * K * 4), *B = malloc(N * K * 4), *C = malloc(MX * N * 4), *C0 = malloc(MX * N * 4);
    for (int64_t i = 0; i < MX * K; i++) A[i] = vc_rng_normal(1, 0, 0, (uint64_t)i);
    for (int64_t i = 0; i < N * K; i++) B[i] = vc_rng_normal(2, 0, 0, (uint64_t)i);
    for (int64_t i = 0; i < MX * N; i++) C0[i] = vc_rng_normal(3, 0, 0, (uint64_t)i);
    int bad = 0, chain = 0;
    for (int th = 1; th <= 2; th++) {
        vc_set_threads(th);
        vc_infer_gemm(0, 1, M, N, K, 1.0f, A, K, B, K, 0.0f, C, N);
        for (int64_t r = 0; r < M; r++)
            for (int64_t m = 1; m <= 4; m++) { /* row r alone, and as the first of m rows */
                if (r + m > M) break;
                float *cm = malloc(m * N * 4);
                vc_infer_gemm(0, 1, m, N, K, 1.0f, A + r * K, K, B, K, 0.0f, cm, N);
                bad += memcmp(cm, C + r * N, (size_t)N * 4) != 0;
                free(cm);
            }
        /* transposed operands give the same bits */
        float *Bt = malloc(N * K * 4), *At = malloc(M * K * 4), *C2 = malloc(M * N * 4);
        for (int64_t n = 0; n < N; n++)
            for (int64_t k = 0; k < K; k++) Bt[k * N + n] = B[n * K + k];
        for (int64_t i = 0; i < M; i++)
            for (int64_t k = 0; k < K; k++) At[k * M + i] = A[i * K + k];
        vc_infer_gemm(0, 0, M, N, K, 1.0f, A, K, Bt, N, 0.0f, C2, N);
        bad += memcmp(C2, C, (size_t)(M * N) * 4) != 0;
        vc_infer_gemm(1, 1, M, N, K, 1.0f, At, M, B, K, 0.0f, C2, N);
        bad += memcmp(C2, C, (size_t)(M * N) * 4) != 0;
        free(Bt);
        free(At);
        free(C2);
        const int64_t ms[] = { 1, 7, 15, 16, 17, 48, 49, 100, 800 };
        for (int i = 0; i < (LIGHT ? 4 : 9); i++) chain += gemm_vs_chain(A, B, ms[i], N, K, C0);
    }
    double err = 0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double ref = 0;
            for (int64_t k = 0; k < K; k++) ref += (double)A[i * K + k] * B[j * K + k];
            err = fmax(err, fabs(ref - C[i * N + j]));
        }
    CHECK_MSG(bad == 0, "instruction set %d, K %lld: %d row-invariance mismatches", isa, (long long)K, bad);
    CHECK_MSG(chain == 0, "instruction set %d, K %lld: %d elements not the fma chain's bits", isa, (long long)K,
              chain);
    CHECK_MSG(err < 1e-3, "instruction set %d, K %lld: error %g", isa, (long long)K, err);
    free(A);
    free(B);
    free(C);
    free(C0);
}

static float bf16_round(float x) { return vc_bf16_to_f32(vc_f32_to_bf16(x)); }

/* equal bits, or both NaN (which NaN an fma returns is the hardware's choice of operand) */
static int same_float(float a, float b) { return memcmp(&a, &b, 4) == 0 || (isnan(a) && isnan(b)); }

/* random shapes, transposes, leading dimensions past the minimum, alpha and beta (K 0 among them): every element the
 * chain's bits, elements outside C's columns untouched; with bf16 matmuls the chain of the operands rounded to bf16
 * (ties to even, among them a NaN and an infinity in some cases); returns the mismatches */
static int gemm_random_cases(int cases, uint64_t seed, int bf16) {
    int bad = 0;
    for (int t = 0; t < cases; t++) {
        uint64_t r = vc_rng_u64(seed, (uint64_t)t, 0, 0);
        int ta = (int)(r & 1), tb = (int)(r >> 1 & 1);
        int64_t M = 1 + (int64_t)(r >> 8 & 127), N = 1 + (int64_t)(r >> 16 & 63), K = (int64_t)(r >> 24 & 63);
        int64_t pad = (int64_t)(r >> 32 & 3);
        /* every other bf16 case with B registered as a weight's bf16 copy (B's whole rows: no padding), its rows
         * from the second group of 16 of a larger registered matrix where r says so: the same bits */
        int copy = bf16 && tb && (t & 1), mid = (int)(r >> 44 & 1);
        int64_t lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + (copy ? 0 : pad), ldc = N + pad;
        float alpha = (r >> 40 & 1) ? 1.0f : -0.625f, beta = (r >> 41 & 3) == 0 ? 0.0f : 1.5f;
        int64_t na = (ta ? K : M) * lda + 1, nb = (tb ? N : K) * ldb + 1;
        float *A = malloc((size_t)na * 4), *Bm = malloc((size_t)(nb + 16 * ldb) * 4), *B = Bm + 16 * ldb; /* (16
                                                                                             rows before B) */
        float *C = malloc((size_t)(M * ldc) * 4);
        float *C0 = malloc((size_t)(M * ldc) * 4), *a = malloc((size_t)(K + 1) * 4), *b = malloc((size_t)(K + 1) * 4);
        for (int64_t i = 0; i < na; i++) A[i] = vc_rng_normal(seed + 1, (uint64_t)t, 0, (uint64_t)i);
        for (int64_t i = 0; i < nb + 16 * ldb; i++) Bm[i] = vc_rng_normal(seed + 2, (uint64_t)t, 0, (uint64_t)i);
        for (int64_t i = 0; i < M * ldc; i++) C0[i] = vc_rng_normal(seed + 3, (uint64_t)t, 0, (uint64_t)i);
        if (bf16 && (t >> 1) % 4 == 1) { /* products about 2^-126: denormal products, partial sums and results flushed */
            for (int64_t i = 0; i < na; i++) A[i] = ldexpf(A[i], -60);
            for (int64_t i = 0; i < nb + 16 * ldb; i++) Bm[i] = ldexpf(Bm[i], -66);
            for (int64_t i = 0; i < M * ldc; i++) C0[i] = ldexpf(C0[i], -125);
        } else if (bf16 && (t >> 1) % 4 == 3) /* denormal operands, taken as zeros */
            for (int64_t i = 0; i < na; i += 2) A[i] = ldexpf(A[i], -128);
        if (bf16 && na > 8) { /* 1 + 2^-8 and 1 + 3 2^-8: ties to even (down, up); a signalling NaN whose bf16 rounding must stay a NaN, and an infinity */
            const uint32_t special[4] = { 0x3f808000u, 0x3f818000u, 0x7f800001u, 0x7f800000u };
            for (int e = 0; e < (t % 3 == 0 ? 4 : 2); e++) {
                memcpy(A + (na / 5) * e, special + e, 4);
                memcpy(B + (nb / 5) * e + 1, special + (e + 1) % 4, 4);
            }
        }
        memcpy(C, C0, (size_t)(M * ldc) * 4);
        const float *w = mid ? Bm : B;
        int64_t wr = mid ? N + 16 : N;
        if (copy) CHECK_OK(vc_cpu_bf16_copies_add(&w, &wr, &ldb, 1));
        if (bf16) vc_set_matmul_precision(VC_PREC_BF16);
        vc_infer_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        vc_set_matmul_precision(VC_PREC_F32);
        if (copy) {
            int64_t hits = vc_cpu_bf16_copies_hits();
            CHECK_MSG(hits == (vc_infer_gemm_isa() != VC_GEMM_SCALAR && K > 0), "case %d: B's copy read %lld times", t,
                      (long long)hits);
            vc_cpu_bf16_copies_drop();
        }
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < ldc; j++) {
                float want = C0[i * ldc + j];
                if (j < N) {
                    for (int64_t k = 0; k < K; k++) {
                        a[k] = ta ? A[k * lda + i] : A[i * lda + k];
                        b[k] = tb ? B[j * ldb + k] : B[k * ldb + j];
                        if (bf16) {
                            a[k] = bf16_round(a[k]);
                            b[k] = bf16_round(b[k]);
                        }
                    }
                    want = (bf16 ? gemm_chain_ftz : gemm_chain)(a, b, K, alpha, beta, C0[i * ldc + j]);
                }
                bad += !same_float(want, C[i * ldc + j]);
            }
        free(A);
        free(Bm);
        free(C);
        free(C0);
        free(a);
        free(b);
    }
    return bad;
}

/* which operands the registered bf16 copies serve: a weight or a run of its rows from a multiple of 16, all its
 * columns, at its leading dimension, nothing else; the copy holds the rounded values in its layout (groups of 16
 * rows, pairs of k side by side, zeros past the last row and an odd K's last column) */
static void test_copy_find(void) {
    float *w = malloc(60 * 5 * 4), *other = w + 40 * 5; /* w: 40 x 5, other: 20 x 5 */
    for (int i = 0; i < 300; i++) w[i] = 1.0f + (float)i / 1024.0f;
    const float *ws[2] = { other, w }; /* (registered in any order) */
    int64_t rows[2] = { 20, 40 }, cols[2] = { 5, 5 };
    CHECK_OK(vc_cpu_bf16_copies_add(ws, rows, cols, 2));
    const uint16_t *h = vc_cpu_bf16_copy_find(w, 40, 5, 5);
    CHECK(h && vc_cpu_bf16_copy_find(w + 16 * 5, 24, 5, 5) == h + 16 * 6);
    CHECK(vc_cpu_bf16_copy_find(other + 16 * 5, 4, 5, 5) != NULL && !vc_cpu_bf16_copy_find(other + 16 * 5, 5, 5, 5));
    CHECK(!vc_cpu_bf16_copy_find(w + 16 * 5, 25, 5, 5) && !vc_cpu_bf16_copy_find(w + 5, 1, 5, 5) &&
          !vc_cpu_bf16_copy_find(w, 40, 4, 5) && !vc_cpu_bf16_copy_find(w, 40, 5, 6) &&
          !vc_cpu_bf16_copy_find((const float *)((const char *)w + 2), 1, 5, 5));
    int bad = 0;
    for (int r = 0; h && r < 48; r++)
        for (int k = 0; k < 6; k++) {
            uint16_t want = r < 40 && k < 5 ? vc_f32_to_bf16(w[r * 5 + k]) : 0;
            bad += h[(r / 16) * 6 * 16 + (k / 2) * 32 + (r % 16) * 2 + 1 - k % 2] != want; /* (an even k high) */
        }
    CHECK_MSG(bad == 0, "%d elements of the copy not the weight's bf16 rounding in its layout", bad);
    CHECK(vc_cpu_bf16_copies_hits() == 3);
    CHECK(vc_cpu_bf16_copies_spare() == 0); /* (live) */
    vc_cpu_bf16_copies_drop();
    CHECK(vc_cpu_bf16_copies_hits() == 0 && !vc_cpu_bf16_copy_find(w, 40, 5, 5));
    /* the memory is kept for the next add of a like size (the same block), counted as spare meanwhile; an add of
     * under half its size takes a new one; release frees it */
    size_t spare = vc_cpu_bf16_copies_spare();
    CHECK(spare >= 2 * 48 * 6 + 2 * 32 * 6);
    CHECK_OK(vc_cpu_bf16_copies_add(ws, rows, cols, 2));
    const uint16_t *h2 = vc_cpu_bf16_copy_find(w, 40, 5, 5), *h3 = vc_cpu_bf16_copy_find(other, 20, 5, 5);
    CHECK(h2 && h3 && (h2 == h || h3 == h) && vc_cpu_bf16_copies_spare() == 0);
    int bad2 = 0;
    for (int r = 0; h2 && r < 40; r++)
        for (int k = 0; k < 5; k++) bad2 += h2[(r / 16) * 6 * 16 + (k / 2) * 32 + (r % 16) * 2 + 1 - k % 2] != vc_f32_to_bf16(w[r * 5 + k]);
    CHECK_MSG(bad2 == 0, "%d elements of the copy in the kept memory wrong", bad2);
    vc_cpu_bf16_copies_release(); /* (live: nothing freed) */
    CHECK(vc_cpu_bf16_copy_find(w, 40, 5, 5) == h2);
    vc_cpu_bf16_copies_drop();
    CHECK(vc_cpu_bf16_copies_add(ws + 1, rows + 1, cols, 1) == VC_OK && vc_cpu_bf16_copies_spare() == 0);
    vc_cpu_bf16_copies_drop();
    CHECK(vc_cpu_bf16_copies_spare() == spare); /* (40 rows of 60: more than half, the same block) */
    int64_t one = 1, c5 = 5;
    CHECK_OK(vc_cpu_bf16_copies_add(ws, &one, &c5, 1));
    vc_cpu_bf16_copies_drop();
    CHECK(vc_cpu_bf16_copies_spare() < spare); /* (a new, smaller one) */
    vc_cpu_bf16_copies_release();
    CHECK(vc_cpu_bf16_copies_spare() == 0);
    free(w);
}

/* A packed once for several products (the LM head's slices): each product the bits of vc_infer_gemm's, in f32 and
 * bf16 (B also from a registered copy), under every instruction set; NULL where packing does not apply */
static int apack_cases(void) {
    int bad = 0;
    const int64_t Ms[] = { 16, 49, 130 }, Ks[] = { 7, 64, 203 };
    for (int bf16 = 0; bf16 <= 1; bf16++)
        for (int c = 0; c < 3; c++) {
            int64_t M = Ms[c], K = Ks[c], N = 100, lda = K + 3;
            float *A = malloc((size_t)(M * lda) * 4), *B = malloc((size_t)(N * K) * 4);
            float *C1 = malloc((size_t)(M * 48) * 4), *C2 = malloc((size_t)(M * 48) * 4);
            for (int64_t i = 0; i < M * lda; i++) A[i] = vc_rng_normal(5, (uint64_t)c, 0, (uint64_t)i);
            for (int64_t i = 0; i < N * K; i++) B[i] = vc_rng_normal(6, (uint64_t)c, 0, (uint64_t)i);
            if (bf16 && c == 1) CHECK_OK(vc_cpu_bf16_copies_add((const float *const *)&B, &N, &K, 1));
            vc_set_matmul_precision(bf16 ? VC_PREC_BF16 : VC_PREC_F32);
            vc_infer_apack *ap = vc_infer_apack_new(M, K, A, lda);
            CHECK(ap != NULL || vc_infer_gemm_isa() == VC_GEMM_SCALAR);
            for (int64_t v0 = 0; ap && v0 < N; v0 += 48) { /* slices of 48 (the last 4), C's rows 48 apart */
                int64_t n = N - v0 < 48 ? N - v0 : 48;
                for (int64_t i = 0; i < M * 48; i++) C1[i] = C2[i] = (float)i;
                vc_infer_gemm(0, 1, M, n, K, 0.5f, A, lda, B + v0 * K, K, 1.0f, C1, 48);
                vc_infer_gemm_apack(ap, n, 0.5f, B + v0 * K, K, 1.0f, C2, 48);
                bad += memcmp(C1, C2, (size_t)(M * 48) * 4) != 0;
            }
            vc_infer_apack_free(ap);
            vc_set_matmul_precision(VC_PREC_F32);
            vc_cpu_bf16_copies_drop();
            free(A);
            free(B);
            free(C1);
            free(C2);
        }
    vc_set_matmul_precision(VC_PREC_BF16);
    float x[8 * 4] = { 0 };
    CHECK(vc_infer_apack_new(vc_infer_gemm_isa() >= VC_GEMM_AVX512 ? 15 : 7, 4, x, 4) == NULL); /* (too few rows) */
    vc_set_matmul_precision(VC_PREC_F32);
    return bad;
}

/* decode-sized products (1 to 17 rows: the column kernels, AVX2's 16-column tiles up to 5 rows) from a registered
 * bf16 copy, K odd and even, a last column group cut short: the bits of the same product rounding B itself */
static int copy_small_rows(void) {
    int bad = 0;
    int64_t N = 37, ks[2] = { 6, 9 };
    for (int kk = 0; kk < 2; kk++) {
        int64_t K = ks[kk];
        float *A = malloc((size_t)(17 * K) * 4), *B = malloc((size_t)(N * K) * 4);
        float *C1 = malloc((size_t)(17 * N) * 4), *C2 = malloc((size_t)(17 * N) * 4);
        for (int64_t i = 0; i < 17 * K; i++) A[i] = vc_rng_normal(8, (uint64_t)kk, 0, (uint64_t)i);
        for (int64_t i = 0; i < N * K; i++) B[i] = vc_rng_normal(9, (uint64_t)kk, 0, (uint64_t)i);
        vc_set_matmul_precision(VC_PREC_BF16);
        for (int64_t M = 1; M <= 17; M++) {
            vc_infer_gemm(0, 1, M, N, K, 1.0f, A, K, B, K, 0.0f, C1, N);
            CHECK_OK(vc_cpu_bf16_copies_add((const float *const *)&B, &N, &K, 1));
            vc_infer_gemm(0, 1, M, N, K, 1.0f, A, K, B, K, 0.0f, C2, N);
            bad += memcmp(C1, C2, (size_t)(M * N) * 4) != 0;
            vc_cpu_bf16_copies_drop();
        }
        vc_set_matmul_precision(VC_PREC_F32);
        free(A);
        free(B);
        free(C1);
        free(C2);
    }
    return bad;
}

static void test_gemm_row_invariance(void) {
    int n = 0;
    for (int isa = VC_GEMM_AVX512BF16; isa >= VC_GEMM_SCALAR; isa--)
        if (vc_infer_gemm_set_isa(isa) == 0) {
            const int64_t ks[] = { 203, 16, 64, 45, 300 }; /* (sanitizers: the first two) */
            for (int k = 0; k < (LIGHT ? 2 : 5); k++) test_gemm_row_invariance_isa(isa, ks[k]);
            for (int bf16 = 0; bf16 <= 1; bf16++) {
                int bad = gemm_random_cases(LIGHT ? 20 : 120, 77 + (uint64_t)bf16, bf16);
                CHECK_MSG(bad == 0, "instruction set %d%s: %d elements of random cases not the chain's bits", isa,
                          bf16 ? ", bf16 matmuls" : "", bad);
            }
            int bad = copy_small_rows();
            CHECK_MSG(bad == 0, "instruction set %d: %d decode-sized products from a bf16 copy differ", isa, bad);
            bad = apack_cases();
            CHECK_MSG(bad == 0, "instruction set %d: %d products with A packed once differ from vc_infer_gemm's", isa,
                      bad);
            n++;
        }
    printf("row-invariant GEMM: %d instruction sets checked\n", n);
    CHECK(n >= 1);
    vc_infer_gemm_set_isa(-1); /* the best again */
    test_copy_find();
}

/* the sanitizer build: the GEMM's tiles are not instrumented, its entry checks the operands' extents, so an operand
 * one float short still stops the process with AddressSanitizer's report (here in a child, its report discarded) */
static void test_gemm_asan_extents(void) {
    if (!VC_ASAN) return;
    for (int which = 0; which < 3; which++) {
        pid_t pid = fork();
        if (pid == 0) {
            int null = open("/dev/null", O_WRONLY);
            if (null >= 0) dup2(null, 2);
            int64_t M = 5, N = 7, K = 19;
            float *A = calloc((size_t)(M * K - (which == 0)), 4), *B = calloc((size_t)(N * K - (which == 1)), 4);
            float *C = calloc((size_t)(M * N - (which == 2)), 4);
            vc_infer_gemm(0, 1, M, N, K, 1.0f, A, K, B, K, 0.0f, C, N);
            _exit(0);
        }
        int st = 0;
        CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
        CHECK_MSG(!(WIFEXITED(st) && WEXITSTATUS(st) == 0), "a GEMM past operand %d's end went unreported", which);
    }
    printf("sanitizer build: the GEMM's reads and writes past its operands are reported\n");
}

/* hidden states of prompt 4 computed alone in one chunk == computed in 3 chunks batched with prompt 3 */
static void test_forward_invariance(vc_model *m) {
    const vc_backend *prev = vc_be();
    vc_set_backend(vc_infer_backend()); /* with OpenBLAS's sgemm the chunks below differ in their last bits */
    vc_kv_pool pool;
    CHECK_OK(vc_kv_pool_init(&pool, 64, 8, 2, vc_kv_row_floats(m), 0));
    int32_t pa[10], pb[10];
    for (int i = 0; i < 10; i++) pa[i] = i, pb[i] = 10 + i;
    const int32_t *tab[2] = { pa, pb };
    vc_graph *g = vc_graph_new();
    int64_t H = vc_cfg_out_hidden(vc_model_cfg(m)), L = plen[4];
    float *alone = malloc((size_t)(L * H) * 4);
    int64_t cu[3] = { 0, L }, len[2] = { 0, 0 };
    vc_batch b = { 1, cu, prompts[4] };
    vc_kv_pages kv = { pool.mem, 8, tab, len };
    vc_tensor *h = vc_model_forward_paged(m, g, &b, &kv);
    CHECK(h != NULL);
    if (h) CHECK_OK(vc_tensor_read(h, alone));
    int bad = 0;
    int64_t cuts[4] = { 0, 1, 40, L };
    for (int c = 0; c < 3 && h; c++) { /* prompt 3 (33 tokens) first, then the chunk of prompt 4 */
        int64_t n4 = cuts[c + 1] - cuts[c], n3 = c == 0 ? plen[3] : 1;
        int32_t ids[128];
        memcpy(ids, prompts[3], (size_t)n3 * 4);
        memcpy(ids + n3, prompts[4] + cuts[c], (size_t)n4 * 4);
        int64_t cu2[3] = { 0, n3, n3 + n4 }, len2[2] = { c == 0 ? 0 : plen[3] + c - 1, cuts[c] };
        const int32_t *tab2[2] = { pb, pa };
        vc_graph_reset(g);
        vc_batch b2 = { 2, cu2, ids };
        vc_kv_pages kv2 = { pool.mem, 8, tab2, len2 };
        vc_tensor *h2 = vc_model_forward_paged(m, g, &b2, &kv2);
        CHECK(h2 != NULL);
        float *h2h = h2 ? malloc((size_t)h2->n * 4) : NULL;
        if (h2h && !vc_tensor_read(h2, h2h)) bad += memcmp(h2h + n3 * H, alone + cuts[c] * H, (size_t)(n4 * H) * 4) != 0;
        free(h2h);
    }
    CHECK_MSG(bad == 0, "%d chunks differ from the unbatched forward", bad);
    free(alone);
    vc_graph_free(g);
    vc_kv_pool_release(&pool);
    vc_set_backend(prev);
}

/* bf16 matmuls: the KV pool holds bf16 keys and values (the attention inputs are bf16 values already):
 * half the bytes per page, the same tokens and log-probs bitwise as a float pool (VERLC_KV_BF16=0), also
 * when a small pool preempts sequences; and the training path's log-probs stay close */
static void test_bf16_kv(vc_model *m, const vc_sampling *sp, int n) {
    vc_set_matmul_precision(VC_PREC_BF16);
    vc_rollout_stats s16, s32, sp16;
    int n16 = 0, n32 = 0, np16 = 0;
    vc_rollout_sample *a = generate(m, sp, (run_cfg){ 64, 2, 0, 0, 4, 0 }, n, &n16, &s16);
    setenv("VERLC_KV_BF16", "0", 1);
    vc_rollout_sample *b = generate(m, sp, (run_cfg){ 64, 2, 0, 0, 4, 0 }, n, &n32, &s32);
    unsetenv("VERLC_KV_BF16");
    /* the CPU's bf16 weight copies skipped where they would take over half the memory available: the same samples */
    int nm = 0;
    vc_rollout_stats sm;
    setenv("VERLC_MEMORY_AVAILABLE", "4K", 1);
    vc_rollout_sample *lowmem = generate(m, sp, (run_cfg){ 64, 2, 0, 0, 4, 0 }, n, &nm, &sm);
    unsetenv("VERLC_MEMORY_AVAILABLE");
    CHECK_MSG(lowmem && nm == n16 && same_samples(a, lowmem, n16) && sm.weight_copy_hits == 0 && s16.weight_copy_hits > 0,
              "bf16 weight copies with 4 KiB available: %lld GEMM operands from them (%lld with room)",
              (long long)sm.weight_copy_hits, (long long)s16.weight_copy_hits);
    vc_rollout_samples_free(lowmem, nm);
    /* copies made with room are dropped at the end even where the memory available fell meanwhile */
    const float *w0 = NULL;
    int64_t rows0 = 0, cols0 = 0;
    for (int i = 0; i < vc_model_n_params(m) && !w0; i++) {
        vc_tensor *t = vc_model_param(m, i, NULL, NULL);
        if (t && t->ndim == 2) w0 = t->data, rows0 = t->shape[0], cols0 = t->shape[1];
    }
    vc_model_weight_copies(m, 1);
    int made = w0 && vc_cpu_bf16_copy_find(w0, rows0, cols0, cols0) != NULL;
    setenv("VERLC_MEMORY_AVAILABLE", "4K", 1);
    vc_model_weight_copies(m, 0);
    unsetenv("VERLC_MEMORY_AVAILABLE");
    CHECK_MSG(made && !vc_cpu_bf16_copy_find(w0, rows0, cols0, cols0) && vc_cpu_bf16_copies_hits() == 0,
              "bf16 weight copies: made %d, still registered after the memory available fell", made);
    size_t pb32 = vc_kv_page_bytes(4, 2, vc_kv_row_floats(m), 0);
    vc_rollout_sample *c = generate(m, sp, (run_cfg){ 64, 2, 0, 7, 4, 11.0 * (double)pb32 }, n, &np16, &sp16);
    CHECK_MSG(s16.page_bytes * 2 == s32.page_bytes, "bf16 KV page %lld bytes, float %lld", (long long)s16.page_bytes,
              (long long)s32.page_bytes);
    CHECK_MSG(a && b && n16 == n32 && same_samples(a, b, n16), "bf16 KV pool: samples differ from a float pool");
    CHECK_MSG(c && np16 == n16 && same_samples(a, c, n16) && sp16.preemptions > 0 && sp16.pool_pages == 22,
              "bf16 KV pool of 11 float pages' bytes: %lld pages, %lld preemptions", (long long)sp16.pool_pages,
              (long long)sp16.preemptions);
    double mean = 1, max = 1;
    if (a) compare_train_logprobs(m, a, n16, &mean, &max);
    printf("bf16 matmuls: KV pages of %lld bytes (float: %lld), samples bitwise equal to a float pool, also with "
           "%lld preemptions in %lld pages; train/rollout log-prob mismatch mean %.3g max %.3g\n",
           (long long)s16.page_bytes, (long long)s32.page_bytes, (long long)sp16.preemptions,
           (long long)sp16.pool_pages, mean, max);
    CHECK(max <= 1e-4); /* the rollout's row-invariant GEMM rounds its inputs to bf16 as training's does */
    vc_rollout_samples_free(a, n16);
    vc_rollout_samples_free(b, n32);
    vc_rollout_samples_free(c, np16);
    vc_set_matmul_precision(VC_PREC_F32);
}

/* the same on fixture architectures (MLA + MoE, window + soft-caps, fused qkv, ...): with bf16 matmuls,
 * bf16 KV pages and the bf16 MLP activation give the samples of a float pool and an f32 activation,
 * bitwise, also when a small pool preempts */
static int64_t g_copy_hits; /* gen_env's last call: GEMM operands read from bf16 weight copies */

static vc_rollout_sample *gen_env(vc_model *m, const char *kv, const char *act, double budget, int *n, int64_t *pre) {
    setenv("VERLC_KV_BF16", kv, 1);
    setenv("VERLC_BF16_ACT", act, 1);
    int64_t V = vc_model_cfg(m)->vocab;
    static int32_t pr[3][20];
    vc_rollout_request rq[3];
    for (int i = 0; i < 3; i++) {
        for (int t = 0; t < 20; t++) pr[i][t] = (int32_t)((3 + 37 * i + 11 * t) % V);
        rq[i] = (vc_rollout_request){ pr[i], 6 + 7 * i, 2, (uint64_t)i };
    }
    vc_sampling sp = { .temperature = 1.0f, .top_p = 1.0f, .max_new_tokens = 10, .seed = 9 };
    vc_rollout_opts o = { .kv_budget_bytes = budget, .page_tokens = 4, .max_batch = 8 };
    vc_rollout_engine *e = NULL;
    vc_rollout_sample *out = NULL;
    vc_rollout_stats st = { 0 };
    *n = 0;
    CHECK_OK(vc_rollout_new(m, &o, &e));
    if (e) CHECK_OK(vc_rollout_generate(e, rq, 3, &sp, &out, n));
    if (e) vc_rollout_last_stats(e, &st);
    *pre = st.preemptions;
    g_copy_hits = st.weight_copy_hits;
    vc_rollout_free(e);
    unsetenv("VERLC_KV_BF16");
    unsetenv("VERLC_BF16_ACT");
    return out;
}

static void test_bf16_archs(void) {
    /* shared fixtures, and (a path) verlc's own */
    const char *names[] = { "deepseek_v2", "gemma2", "phi3", "chatglm3", "qwen2_moe", "internlm2",
                            "tests/fixtures/models/glm_moe_dsa" };
    vc_set_matmul_precision(VC_PREC_BF16);
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char dir[1024];
        if (!strncmp(names[i], "tests/", 6)) snprintf(dir, sizeof dir, "%s", names[i]);
        else snprintf(dir, sizeof dir, "%s/fixtures/models/%s", vc_test_shared(), names[i]);
        vc_model *m = NULL;
        if (vc_model_load(dir, &m)) {
            CHECK_MSG(0, "%s: %s", dir, vc_last_error());
            continue;
        }
        double pb = (double)vc_kv_page_bytes(4, vc_model_cfg(m)->n_layer, vc_kv_row_floats(m), 0);
        int na = 0, nb = 0, nc = 0, nd = 0, ne = 0;
        int64_t pa, pbp, pc, pd, pe;
        vc_rollout_sample *a = gen_env(m, "1", "1", 64e6, &na, &pa), *b = gen_env(m, "0", "1", 64e6, &nb, &pbp);
        int64_t hits = g_copy_hits;
        vc_rollout_sample *c = gen_env(m, "1", "0", 64e6, &nc, &pc), *d = gen_env(m, "1", "1", 4.0 * pb, &nd, &pd);
        setenv("VERLC_WEIGHT_COPIES", "0", 1); /* every GEMM rounding the f32 weights itself */
        vc_rollout_sample *e = gen_env(m, "1", "1", 64e6, &ne, &pe);
        unsetenv("VERLC_WEIGHT_COPIES");
        int ok = a && b && c && d && e && na == 6 && nb == na && nc == na && nd == na && ne == na &&
                 same_samples(a, b, na) && same_samples(a, c, na) && same_samples(a, d, na) && same_samples(a, e, na);
        CHECK_MSG(ok, "%s: bf16 KV / bf16 MLP activation / weight copies change the samples (float KV %d, f32 act %d, "
                  "preempted %d, no copies %d; %d samples)", names[i], a && b && same_samples(a, b, na),
                  a && c && same_samples(a, c, na), a && d && same_samples(a, d, na), a && e && same_samples(a, e, na),
                  na);
        CHECK_MSG(hits > 0 && g_copy_hits == 0, "%s: %lld GEMM operands from the bf16 weight copies, %lld with them off",
                  names[i], (long long)hits, (long long)g_copy_hits);
        printf("%s, bf16 matmuls: bf16 KV pages, MLP activation and weight copies (%lld GEMM operands) %s a float pool, "
               "f32 activation and rounding in every GEMM (also with %lld preemptions)\n", names[i], (long long)hits,
               ok ? "bitwise equal to" : "DIFFERENT from", (long long)pd);
        vc_rollout_samples_free(e, ne);
        vc_rollout_samples_free(a, na);
        vc_rollout_samples_free(b, nb);
        vc_rollout_samples_free(c, nc);
        vc_rollout_samples_free(d, nd);
        vc_model_free(m);
    }
    vc_set_matmul_precision(VC_PREC_F32);
}

/* reproducibility across batch size, threads, request order, prefill chunking, page size and preemption; the
 * rollout's log-probs against the training path */
static void suite(vc_model *m, const char *what, const vc_sampling *spp, int n) {
    vc_sampling sp = *spp;
    int nr = 0, n2 = 0;
    vc_rollout_stats st;
    vc_rollout_sample *ref = generate(m, &sp, (run_cfg){ 64, 1, 0, 0, 0, 0 }, n, &nr, &st);
    CHECK(nr == NP * n && ref);
    if (!ref) return;
    /* batch sizes, threads, request order, prefill chunking, page size */
    run_cfg cfgs[] = { { 1, 1, 0, 0, 0, 0 }, { 7, 2, 0, 0, 0, 0 }, { 64, 2, 1, 0, 0, 0 }, { 7, 1, 1, 5, 4, 0 },
                       { 64, 2, 0, 3, 8, 0 } };
    for (int c = 0; c < (int)(sizeof cfgs / sizeof *cfgs); c++) {
        vc_rollout_sample *o = generate(m, &sp, cfgs[c], n, &n2, NULL);
        CHECK_MSG(o && n2 == nr && same_samples(ref, o, nr), "%s: config %d (max_batch %d threads %d reverse %d) differs", what, c,
                  cfgs[c].max_batch, cfgs[c].threads, cfgs[c].reverse);
        vc_rollout_samples_free(o, n2);
    }
    /* forced preemption: a pool of a few pages */
    vc_rollout_stats ps;
    size_t pb = vc_kv_page_bytes(4, vc_model_cfg(m)->n_layer, vc_kv_row_floats(m), 0);
    double sb = 9.0 * 4.0 * (double)vc_lin_state_floats(vc_model_cfg(m)); /* linear layers' states: 7 + 2 slots */
    vc_rollout_sample *o = generate(m, &sp, (run_cfg){ 7, 2, 0, 7, 4, 22.0 * (double)pb + sb }, n, &n2, &ps);
    CHECK_MSG(o && same_samples(ref, o, nr), "%s: preempted run differs", what);
    CHECK_MSG(ps.preemptions > 0, "no preemption with a %lld-page pool", (long long)ps.pool_pages);
    printf("%s preemption: %lld pages of 4 tokens, %lld preemptions, %lld steps\n", what, (long long)ps.pool_pages,
           (long long)ps.preemptions, (long long)ps.steps);
    vc_rollout_samples_free(o, n2);
    /* a linear-attention model's state slots follow the call's samples, not max_batch: a bound of 1,024 sequences leaves
     * the KV pages a bound of the call's NP * n leaves (a bound's worth of slots took up to half the budget) */
    if (vc_lin_state_floats(vc_model_cfg(m))) {
        double b2 = 20.0 * (double)pb + 400.0 * (double)vc_lin_state_floats(vc_model_cfg(m)); /* 100 slots' states */
        vc_rollout_stats s1, s2;
        int n3 = 0;
        vc_rollout_sample *o1 = generate(m, &sp, (run_cfg){ 1024, 2, 0, 7, 4, b2 }, n, &n2, &s1);
        vc_rollout_sample *o2 = generate(m, &sp, (run_cfg){ NP * n, 2, 0, 7, 4, b2 }, n, &n3, &s2);
        CHECK_MSG(o1 && o2 && n2 == nr && n3 == nr && same_samples(ref, o1, nr) && same_samples(ref, o2, nr),
                  "%s: max_batch 1024 or %d differs", what, NP * n);
        CHECK_MSG(o1 && o2 && s1.pool_pages == s2.pool_pages, "%s: KV pages with max_batch 1024: %lld, with %d: %lld",
                  what, (long long)s1.pool_pages, NP * n, (long long)s2.pool_pages);
        printf("%s state slots: max_batch 1024 and %d both leave %lld KV pages of 4 tokens\n", what, NP * n,
               (long long)s1.pool_pages);
        vc_rollout_samples_free(o1, n2);
        vc_rollout_samples_free(o2, n3);
    }
    /* rollout log-probs against the training path */
    double mean, max;
    compare_train_logprobs(m, ref, nr, &mean, &max);
    printf("%s train/rollout log-prob mismatch: mean %.3g max %.3g over %d samples\n", what, mean, max, nr);
    CHECK(max <= 1e-5);
    int finished_eos = 0;
    for (int i = 0; i < nr; i++) {
        CHECK(ref[i].request == i / n && ref[i].sample == i % n);
        CHECK(ref[i].n_tokens >= 1 && ref[i].n_tokens <= 12);
        finished_eos += ref[i].finish == VC_FINISH_EOS;
        CHECK(ref[i].finish == VC_FINISH_EOS || ref[i].n_tokens == 12);
        for (int64_t t = 0; t < ref[i].n_tokens; t++) CHECK(ref[i].logp_sampled[t] <= 0 && ref[i].logp[t] <= 0);
    }
    /* samples of a prompt differ (different random streams) */
    int distinct = 0;
    for (int r = 0; r < NP; r++)
        distinct += ref[r * n].n_tokens != ref[r * n + 1].n_tokens ||
                    memcmp(ref[r * n].tokens, ref[r * n + 1].tokens, (size_t)ref[r * n].n_tokens * 4);
    CHECK(distinct >= NP / 2);
    vc_rollout_samples_free(ref, nr);
}

int main(void) {
    for (int i = 0; i < NP; i++)
        for (int t = 0; t < plen[i]; t++) prompts[i][t] = 3 + (int32_t)vc_rng_below(290, 99, (uint64_t)i, 0, (uint64_t)t);
    test_gemm_row_invariance();
    test_gemm_asan_extents();
    vc_model *m = make_model();
    CHECK(m != NULL);
    if (!m) return vc_test_done();
    test_forward_invariance(m);
    int32_t eos[1] = { 2 };
    vc_sampling sp = { .temperature = 0.9f, .top_k = 50, .top_p = 0.95f, .min_p = 0.0f, .max_new_tokens = 12,
                       .eos_ids = eos, .n_eos = 1, .seed = 1234 };
    int n = 3;
    suite(m, "qwen2", &sp, n);
    test_bf16_kv(m, &sp, n);
    vc_model_free(m);
    /* models whose layers carry states: Gated DeltaNet, short convolutions, Mamba 2, Mamba 2 beside attention; and
     * Gemma 4, whose cache is laid out its own way */
    static const struct { const char *const *config, *name; uint64_t seed; } HYBRIDS[] = {
        { &CONFIG_HYBRID, "qwen3.5 hybrid", 11 }, { &CONFIG_LFM2, "lfm2", 13 },
        { &CONFIG_MAMBA, "granite 4 (mamba 2)", 17 }, { &CONFIG_FALCON, "falcon-h1", 19 },
        { &CONFIG_KIMI, "kimi-linear (kda)", 23 }, { &CONFIG_MINIMAX, "minimax-text-01 (lightning)", 29 },
        { &CONFIG_JAMBA, "jamba (mamba 1)", 31 }, { &CONFIG_FALCON_MAMBA, "falcon-mamba (no attention)", 37 },
        { &CONFIG_GEMMA4, "gemma 4 (kv sharing)", 41 }, { &CONFIG_MIMO, "mimo-v2-flash (sinks, v narrower)", 43 },
        { &CONFIG_LFM3, "lfm3 (conv, gated heads)", 47 }, { &CONFIG_GPT2, "gpt-2 (learned positions)", 53 },
        { &CONFIG_DSA, "glm-5 (sparse attention, top 4 keys)", 59 } };
    for (size_t i = 0; i < sizeof HYBRIDS / sizeof HYBRIDS[0]; i++) {
        vc_model *h = model_from_config(*HYBRIDS[i].config, HYBRIDS[i].seed);
        CHECK_MSG(h != NULL, "%s: %s", HYBRIDS[i].name, vc_last_error());
        if (h) suite(h, HYBRIDS[i].name, &sp, n);
        vc_model_free(h);
    }
    test_bf16_archs();
    return vc_test_done();
}
