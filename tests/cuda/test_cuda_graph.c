/* CUDA graphs for decode steps: the rollout engine on cuda gives the same tokens, log-probs and finish
 * reasons, bit for bit, with decode steps captured and replayed as graphs as without graphs
 * (VERLC_CUDA_GRAPHS=0), in f32 and bf16 (with the bf16 weight copies), for a GQA model and one with a
 * sliding window and soft-capping, and for a mixture-of-experts model (routing, grouping and the experts'
 * grouped GEMMs on the device, so its decode steps are graphs too); sequences finish at different steps (a set of EOS ids), so the batch
 * size changes: decode steps are padded to graph sizes (with graphs off too, so the GEMMs see the same
 * row counts), graphs are captured for several sizes, dropped when a step differs, and replayed; for linear-attention
 * models (Gated DeltaNet, Mamba 1) too, whose per-row state tables go up with the step's inputs. Also: two trainer steps with bf16 matmuls give the same weights with the bf16 weight copies as without, and with
 * the MLP activation (and a MoE model's expert inputs and activations) in bf16 as in f32.
 * Without a usable device: "no CUDA device: skipped", exit 0. */
#include "cuda_test_util.h"
#include "infer/infer_test_util.h"
#include "verlc/device.h"
#include "verlc/rng.h"
#include "verlc/train.h"

#define NCFG 7
static const char *CONFIGS[NCFG] = {
    "{\"architectures\": [\"Qwen2ForCausalLM\"], \"model_type\": \"qwen2\", \"hidden_size\": 64,"
    " \"intermediate_size\": 96, \"num_hidden_layers\": 3, \"num_attention_heads\": 8, \"num_key_value_heads\": 2,"
    " \"vocab_size\": 257, \"max_position_embeddings\": 512, \"rms_norm_eps\": 1e-6, \"rope_theta\": 10000.0,"
    " \"tie_word_embeddings\": true, \"hidden_act\": \"silu\", \"bos_token_id\": 1, \"eos_token_id\": 2,"
    " \"torch_dtype\": \"float32\"}",
    "{\"architectures\": [\"Gemma2ForCausalLM\"], \"model_type\": \"gemma2\", \"hidden_size\": 64,"
    " \"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
    " \"head_dim\": 32, \"vocab_size\": 300, \"max_position_embeddings\": 512, \"rms_norm_eps\": 1e-6,"
    " \"rope_theta\": 10000.0, \"sliding_window\": 6, \"attn_logit_softcapping\": 50.0,"
    " \"final_logit_softcapping\": 30.0, \"query_pre_attn_scalar\": 32, \"hidden_activation\": \"gelu_pytorch_tanh\","
    " \"bos_token_id\": 2, \"eos_token_id\": 1, \"torch_dtype\": \"float32\"}",
    /* heads of 64: with bf16 matmuls its decode rows take the tensor-core paged kernel, captured and replayed */
    "{\"architectures\": [\"Qwen3MoeForCausalLM\"], \"model_type\": \"qwen3_moe\", \"hidden_size\": 64,"
    " \"intermediate_size\": 96, \"moe_intermediate_size\": 32, \"num_experts\": 40, \"num_experts_per_tok\": 4,"
    " \"norm_topk_prob\": true, \"decoder_sparse_step\": 1, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
    " \"num_key_value_heads\": 2, \"head_dim\": 64, \"vocab_size\": 260, \"max_position_embeddings\": 512,"
    " \"rms_norm_eps\": 1e-6, \"rope_theta\": 10000.0, \"tie_word_embeddings\": false, \"hidden_act\": \"silu\","
    " \"bos_token_id\": 1, \"eos_token_id\": 2, \"torch_dtype\": \"float32\"}",
    /* linear-attention states: their per-row pointers change from step to step, their tables ride in the arena */
    "{\"architectures\": [\"Qwen3_5ForCausalLM\"], \"model_type\": \"qwen3_5_text\", \"hidden_size\": 48,"
    " \"intermediate_size\": 96, \"num_hidden_layers\": 3, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
    " \"head_dim\": 12, \"linear_num_key_heads\": 2, \"linear_num_value_heads\": 4, \"linear_key_head_dim\": 8,"
    " \"linear_value_head_dim\": 6, \"linear_conv_kernel_dim\": 4, \"vocab_size\": 260,"
    " \"layer_types\": [\"linear_attention\", \"full_attention\", \"linear_attention\"], \"rms_norm_eps\": 1e-6,"
    " \"tie_word_embeddings\": false, \"hidden_act\": \"silu\", \"bos_token_id\": 1, \"eos_token_id\": 2,"
    " \"torch_dtype\": \"float32\"}",
    "{\"architectures\": [\"JambaForCausalLM\"], \"model_type\": \"jamba\", \"hidden_size\": 48,"
    " \"intermediate_size\": 64, \"num_hidden_layers\": 3, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
    " \"num_experts\": 1, \"attn_layer_period\": 3, \"attn_layer_offset\": 1, \"mamba_d_state\": 8,"
    " \"mamba_d_conv\": 4, \"mamba_expand\": 2, \"vocab_size\": 260, \"rms_norm_eps\": 1e-6, \"hidden_act\": \"silu\","
    " \"tie_word_embeddings\": false, \"bos_token_id\": 1, \"eos_token_id\": 2, \"torch_dtype\": \"float32\"}",
    /* KV sharing: the last two layers read earlier layers' pages (and append none); full layers' wider rows */
    "{\"architectures\": [\"Gemma4ForCausalLM\"], \"model_type\": \"gemma4_text\", \"hidden_size\": 48,"
    " \"intermediate_size\": 64, \"num_hidden_layers\": 4, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
    " \"head_dim\": 12, \"global_head_dim\": 24, \"num_global_key_value_heads\": 1, \"attention_k_eq_v\": true,"
    " \"sliding_window\": 6, \"layer_types\": [\"sliding_attention\", \"full_attention\", \"sliding_attention\","
    " \"full_attention\"], \"hidden_size_per_layer_input\": 8, \"num_kv_shared_layers\": 2, \"vocab_size\": 260,"
    " \"rms_norm_eps\": 1e-6, \"bos_token_id\": 1, \"eos_token_id\": 2, \"torch_dtype\": \"float32\"}",
    /* DeepSeek Sparse Attention with index_topk 4: every step past 4 tokens selects keys, which no graph holds */
    "{\"architectures\": [\"GlmMoeDsaForCausalLM\"], \"model_type\": \"glm_moe_dsa\", \"hidden_size\": 48,"
    " \"intermediate_size\": 64, \"moe_intermediate_size\": 16, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
    " \"num_key_value_heads\": 4, \"q_lora_rank\": 24, \"kv_lora_rank\": 16, \"qk_nope_head_dim\": 8,"
    " \"qk_rope_head_dim\": 8, \"v_head_dim\": 8, \"n_routed_experts\": 4, \"num_experts_per_tok\": 2,"
    " \"first_k_dense_replace\": 1, \"index_topk\": 4, \"index_n_heads\": 4, \"index_head_dim\": 16,"
    " \"vocab_size\": 260, \"rms_norm_eps\": 1e-6, \"bos_token_id\": 1, \"eos_token_id\": 2, \"torch_dtype\": \"float32\"}",
};
static const char *NAMES[NCFG] = { "qwen2-like (GQA 8/2, tied)", "gemma2-like (window 6, soft-caps)",
                                   "qwen3-moe-like (40 experts, top 4)", "qwen3.5-like (Gated DeltaNet states)",
                                   "jamba-like (Mamba 1 states)", "gemma4-like (KV sharing, per-layer inputs)",
                                   "glm-5-like (sparse attention, top 4 keys: steps run eagerly)" };

/* where two sample lists first differ (printed when they do) */
static void first_difference(const vc_rollout_sample *a, const vc_rollout_sample *b, int n) {
    for (int i = 0; a && b && i < n; i++)
        for (int64_t t = 0; t < a[i].n_tokens && t < b[i].n_tokens; t++)
            if (a[i].tokens[t] != b[i].tokens[t] || a[i].logp[t] != b[i].logp[t]) {
                fprintf(stderr, "  first difference: sample %d, token %lld: %d (lp %.9g) vs %d (lp %.9g)\n", i,
                        (long long)t, a[i].tokens[t], a[i].logp[t], b[i].tokens[t], b[i].logp[t]);
                return;
            }
}

#define NP 5
static int32_t prompts[NP][24];
static const int plen[NP] = { 3, 17, 1, 9, 5 };
static const int nsamp[NP] = { 2, 1, 3, 1, 2 };

/* long 1: no EOS, 40 new tokens, one token per page, so the page table outgrows its buffer while the
 * batch decodes (every graph is dropped then, and captured again); long 2: no EOS, 56 new tokens, pages of 4 */
static vc_rollout_sample *run(vc_model *m, int graphs, int long_run, int *n_out, vc_rollout_stats *stats) {
    static int32_t eos[24];
    for (int i = 0; i < 24; i++) eos[i] = 10 + 7 * i; /* about 1 token in 12: samples end at various steps */
    vc_sampling sp = { .temperature = 1.0f, .top_p = 1.0f, .max_new_tokens = long_run == 2 ? 56 : long_run ? 40 : 14, .eos_ids = eos,
                       .n_eos = long_run ? 0 : 24, .seed = 5 };
    vc_rollout_request rq[NP];
    for (int i = 0; i < NP; i++) rq[i] = (vc_rollout_request){ prompts[i], plen[i], nsamp[i], (uint64_t)i };
    vc_rollout_opts o = { .kv_budget_bytes = 4e6, .page_tokens = long_run == 1 ? 1 : 4, .max_batch = 16, .prefill_chunk = 64 };
    vc_rollout_engine *e = NULL;
    vc_rollout_sample *out = NULL;
    *n_out = 0;
    if (graphs) unsetenv("VERLC_CUDA_GRAPHS");
    else setenv("VERLC_CUDA_GRAPHS", "0", 1);
    CHECK_OK(vc_rollout_new(m, &o, &e));
    if (e) CHECK_OK(vc_rollout_generate(e, rq, NP, &sp, &out, n_out));
    if (e) vc_rollout_last_stats(e, stats);
    vc_rollout_free(e);
    unsetenv("VERLC_CUDA_GRAPHS");
    return out;
}

/* q rounded by the paged attention as it reads it (default) or in place first (VERLC_ROUND_QKV=1), on the tensor-core
 * paged kernel (g: its samples) and on the f32 one (VERLC_CUDA_PAGED_MMA=0): the same bits either way */
static void same_rounding(vc_model *m, const vc_rollout_sample *g, int ng) {
    for (int f32k = 0; f32k < 2; f32k++) {
        vc_rollout_stats st = { 0 };
        int na = 0, nb = 0;
        if (f32k) setenv("VERLC_CUDA_PAGED_MMA", "0", 1);
        vc_rollout_sample *a = f32k ? run(m, 1, 0, &na, &st) : NULL;
        setenv("VERLC_ROUND_QKV", "1", 1);
        vc_rollout_sample *b = run(m, 1, 0, &nb, &st);
        unsetenv("VERLC_ROUND_QKV");
        unsetenv("VERLC_CUDA_PAGED_MMA");
        const vc_rollout_sample *ref = f32k ? a : g;
        int nr = f32k ? na : ng, eq = ref && b && nr == nb && same_samples(ref, b, nb);
        if (!eq) first_difference(ref, b, nr < nb ? nr : nb);
        CHECK_MSG(eq, "q rounded by the paged attention vs in place first (%s kernel): samples differ",
                  f32k ? "f32" : "tensor-core");
        printf("  q rounded by the %s paged attention as it reads it: samples %s with q rounded in place first\n",
               f32k ? "f32" : "tensor-core", eq ? "bitwise equal" : "DIFFERENT");
        if (a) vc_rollout_samples_free(a, na);
        if (b) vc_rollout_samples_free(b, nb);
    }
}

/* the samples with env=val against g's: the same tokens and finish reasons, log-probs within 1e-3 (another GEMM's
 * summation may change a GPU's last bits; a token's draw lies near a boundary of its CDF rarely); what: the report */
static void close_env(vc_model *m, const vc_rollout_sample *g, int ng, const char *env, const char *val,
                      const char *what) {
    vc_rollout_stats st = { 0 };
    int nb = 0;
    setenv(env, val, 1);
    vc_rollout_sample *b = run(m, 1, 0, &nb, &st);
    unsetenv(env);
    int same = b && nb == ng, bits = same && same_samples(g, b, ng);
    double worst = 0;
    for (int i = 0; same && i < ng; i++) {
        same = g[i].n_tokens == b[i].n_tokens && g[i].finish == b[i].finish &&
               !memcmp(g[i].tokens, b[i].tokens, (size_t)g[i].n_tokens * 4);
        for (int64_t t = 0; same && t < g[i].n_tokens; t++) worst = fmax(worst, fabs(g[i].logp[t] - b[i].logp[t]));
    }
    if (!same) first_difference(g, b, ng < nb ? ng : nb);
    CHECK_MSG(same && worst <= 1e-3, "%s=%s: tokens %s, log-probs within %.2e", env, val, same ? "equal" : "differ",
              worst);
    printf("  %s (%s=%s): samples %s the default's (log-probs within %.1e)\n", what, env, val,
           bits ? "bitwise equal to" : same ? "the same tokens as" : "DIFFERENT from", worst);
    if (b) vc_rollout_samples_free(b, nb);
}

/* two trainer steps with bf16 matmuls (two micro-batches each), weight copies on or off: the weights */
static float *train_bf16(int copies, const char *config, size_t *n_out) {
    if (copies) unsetenv("VERLC_CUDA_WEIGHT_COPIES");
    else setenv("VERLC_CUDA_WEIGHT_COPIES", "0", 1);
    vc_set_matmul_precision(VC_PREC_BF16);
    vc_model *m = model_from_config(config, 7);
    float *w = NULL;
    *n_out = 0;
    vc_trainer t;
    memset(&t, 0, sizeof t);
    vc_trainer_config tc;
    vc_trainer_config_default(&tc);
    tc.micro_bs = 2;
    int64_t cu[5] = { 0, 9, 20, 26, 40 };
    int32_t ids[40];
    for (int i = 0; i < 40; i++) ids[i] = 3 + (int32_t)vc_rng_below(250, 4, 0, 0, (uint64_t)i);
    vc_minibatch mb = { 4, cu, ids, NULL };
    vc_step_stats s;
    if (m && !vc_trainer_init(&t, m, &tc)) {
        int ok = !vc_trainer_step(&t, &mb, NULL, NULL, &s) && !vc_trainer_step(&t, &mb, NULL, NULL, &s);
        CHECK_MSG(ok, "trainer step: %s", vc_last_error());
        /* the memory plan counts the copies: 2 bytes per element of every matrix */
        size_t mat = 0;
        for (int i = 0; i < vc_model_n_params(m); i++) {
            vc_tensor *p = vc_model_param(m, i, NULL, NULL);
            if (p->ndim >= 2) mat += (size_t)p->n;
        }
        vc_mem_plan plan;
        CHECK_OK(vc_trainer_plan(&t, 20, 0, NULL, &plan));
        CHECK_MSG(plan.copies == (copies ? 2 * mat : 0) && plan.total >= plan.copies + plan.activations,
                  "plan: bf16 weight copies %zu bytes (copies %s, %zu matrix elements)", plan.copies, copies ? "on" : "off",
                  mat);
        size_t n = (size_t)vc_model_param_count(m), at = 0;
        w = ok ? malloc(n * sizeof *w) : NULL;
        for (int i = 0; w && i < vc_model_n_params(m); i++) {
            vc_tensor *p = vc_model_param(m, i, NULL, NULL);
            CHECK_OK(vc_model_param_read(m, i, 0, w + at));
            at += (size_t)p->n;
        }
        *n_out = w ? at : 0;
        vc_trainer_free(&t);
    } else CHECK_MSG(0, "trainer init: %s", vc_last_error());
    vc_model_free(m);
    unsetenv("VERLC_CUDA_WEIGHT_COPIES");
    vc_set_matmul_precision(VC_PREC_F32);
    return w;
}

/* training of config with bf16 matmuls, then again with env=val: the same weights bit for bit (what: the report,
 * %s for "bitwise equal to" or "DIFFERENT from") */
static void same_training_env(const char *config, const char *env, const char *val, const char *what) {
    size_t na = 0, nb = 0;
    float *a = train_bf16(1, config, &na);
    setenv(env, val, 1);
    float *b = train_bf16(1, config, &nb);
    unsetenv(env);
    int same = a && b && na == nb && na > 0 && !memcmp(a, b, na * sizeof *a);
    printf("training, bf16 matmuls, ");
    printf(what, same ? "bitwise equal to" : "DIFFERENT from");
    printf("\n");
    CHECK_MSG(same, "%s=%s changes training", env, val);
    free(a);
    free(b);
}

int main(void) {
    if (gpu_skip()) return 0;
    for (int i = 0; i < NP; i++)
        for (int t = 0; t < plen[i]; t++) prompts[i][t] = 3 + (int32_t)vc_rng_below(250, 9, (uint64_t)i, 0, (uint64_t)t);
    CHECK_OK(vc_device_select("cuda", "test"));
    int64_t captures = 0, replays = 0;
    for (int c = 0; c < NCFG; c++)
        for (int prec = 0; prec < (c < 3 || c == 5 ? 2 : 1); prec++) { /* the linear-attention models: f32 (their tables) */
            vc_set_matmul_precision(prec ? VC_PREC_BF16 : VC_PREC_F32);
            vc_model *m = model_from_config(CONFIGS[c], 3 + (uint64_t)c);
            CHECK(m != NULL);
            if (!m) continue;
            vc_rollout_stats sg = { 0 }, se = { 0 };
            int ng = 0, ne = 0;
            vc_rollout_sample *g = run(m, 1, 0, &ng, &sg), *ev = run(m, 0, 0, &ne, &se);
            int same = g && ev && ng == ne && same_samples(g, ev, ng);
            int lens[16] = { 0 }, distinct = 0;
            for (int i = 0; g && i < ng; i++) {
                int k = (int)g[i].n_tokens;
                if (k >= 0 && k < 16 && !lens[k]++) distinct++;
            }
            printf("%s, %s: %d samples, %d distinct lengths; graphs: %lld captured, %lld replayed, %lld fell back, of "
                   "%lld steps; %s\n", NAMES[c],
                   prec ? "bf16" : "f32", ng, distinct, (long long)sg.graph_captures, (long long)sg.graph_replays,
                   (long long)sg.graph_fallbacks, (long long)sg.steps,
                   same ? "tokens, log-probs and finish reasons bitwise equal to eager" : "DIFFERENT from eager");
            if (!same) first_difference(g, ev, ng < ne ? ng : ne);
            CHECK_MSG(same, "graph decode differs from eager decode");
            CHECK_MSG(se.graph_captures == 0 && se.graph_replays == 0, "VERLC_CUDA_GRAPHS=0 still used graphs");
            if (c == 6) /* every decode step selects keys: its capture is tainted, the step runs eagerly */
                CHECK_MSG(sg.graph_replays == 0 && sg.graph_captures == 0, "sparse attention steps ran as graphs");
            else CHECK_MSG(sg.graph_replays >= 3, "few decode steps replayed (%lld)", (long long)sg.graph_replays);
            CHECK_MSG(distinct >= 3, "samples of %d distinct lengths: the batch size hardly changed", distinct);
            /* bf16 matmuls read the call's bf16 weight copies (GEMMs in captures count; replays meet none) */
            CHECK_MSG(prec ? sg.weight_copy_hits > 0 && se.weight_copy_hits > sg.weight_copy_hits : !sg.weight_copy_hits,
                      "bf16 weight copies: %lld GEMM operands with graphs, %lld without", (long long)sg.weight_copy_hits,
                      (long long)se.weight_copy_hits);
            if (prec && c < 2) { /* bf16: the KV pool holds bf16 values; a float pool gives the same bits */
                vc_rollout_stats sf = { 0 };
                int nf = 0;
                setenv("VERLC_KV_BF16", "0", 1);
                vc_rollout_sample *f = run(m, 1, 0, &nf, &sf);
                unsetenv("VERLC_KV_BF16");
                int eq = f && g && nf == ng && same_samples(g, f, ng);
                if (!eq) first_difference(g, f, ng < nf ? ng : nf);
                CHECK_MSG(eq && sf.page_bytes == 2 * sg.page_bytes, "bf16 KV pool (%lld-byte pages) vs float "
                          "(%lld): %s", (long long)sg.page_bytes, (long long)sf.page_bytes, eq ? "same" : "differ");
                printf("  bf16 KV pages of %lld bytes (float %lld): samples %s\n", (long long)sg.page_bytes,
                       (long long)sf.page_bytes, eq ? "bitwise equal to a float pool" : "DIFFERENT");
                vc_rollout_samples_free(f, nf);
            }
            if (prec && c < 3) /* q rounded by the paged kernels as they read it (bf16 pages, heads the tensor-core
                                * kernels take: the MoE model's 64) or in place first (VERLC_ROUND_QKV=1) */
                same_rounding(m, g, ng);
            /* q, k and v as three linears and the ropes instead of one GEMM and one pass */
            if (prec && c < 3) close_env(m, g, ng, "VERLC_QKV_FUSED", "0", "q, k and v in three GEMMs");
            /* the gated MLP in blocks of 3 rows (decode steps of more rows, prefill chunks) */
            if (c < 3) close_env(m, g, ng, "VERLC_MLP_ROWS", "3", "the MLP in blocks of 3 rows");
            if (prec && c < 3) { /* no held operands (VERLC_CUDA_HOLD=0): each GEMM rounds its own operand, the
                                  * attention's output and the norms' included: the same bits */
                vc_rollout_stats sh = { 0 };
                int nh0 = 0;
                setenv("VERLC_CUDA_HOLD", "0", 1);
                vc_rollout_sample *h0 = run(m, 1, 0, &nh0, &sh);
                unsetenv("VERLC_CUDA_HOLD");
                int eq = h0 && nh0 == ng && same_samples(g, h0, ng);
                if (!eq) first_difference(g, h0, ng < nh0 ? ng : nh0);
                CHECK_MSG(eq, "held operands (norms, attention output) change the samples");
                printf("  held operands off: samples %s\n", eq ? "bitwise equal" : "DIFFERENT");
                if (h0) vc_rollout_samples_free(h0, nh0);
            }
            captures += sg.graph_captures;
            replays += sg.graph_replays;
            vc_rollout_samples_free(g, ng);
            vc_rollout_samples_free(ev, ne);
            vc_model_free(m);
        }
    vc_set_matmul_precision(VC_PREC_F32);
    {   /* training with bf16 matmuls: weights rounded once per step (copies) or in every GEMM, same bits (q, k and v
         * as three GEMMs in both: their one GEMM reads the copies) */
        size_t na = 0, nb = 0, n3 = 0;
        float *a = train_bf16(1, CONFIGS[0], &na);
        setenv("VERLC_QKV_FUSED", "0", 1);
        float *a3 = train_bf16(1, CONFIGS[0], &n3), *b = train_bf16(0, CONFIGS[0], &nb);
        unsetenv("VERLC_QKV_FUSED");
        int same = a3 && b && n3 == nb && n3 > 0 && !memcmp(a3, b, n3 * sizeof *a3);
        free(a3);
        printf("training, bf16 matmuls, 2 steps of 2 micro-batches: weights with the bf16 weight copies %s without\n",
               same ? "bitwise equal to" : "DIFFERENT from");
        CHECK_MSG(same, "bf16 weight copies change training");
        /* the gated MLP activation kept in bf16 (default) or f32 (VERLC_BF16_ACT=0): the same bits */
        size_t nc = 0;
        setenv("VERLC_BF16_ACT", "0", 1);
        float *c32 = train_bf16(1, CONFIGS[0], &nc);
        unsetenv("VERLC_BF16_ACT");
        int same_act = a && c32 && na == nc && !memcmp(a, c32, na * sizeof *a);
        printf("training, bf16 matmuls: weights with the MLP activation in bf16 %s with it in f32\n",
               same_act ? "bitwise equal to" : "DIFFERENT from");
        CHECK_MSG(same_act, "bf16 MLP activation storage changes training");
        free(c32);
        /* heads of 64 (the tensor-core attention rounds q, k, v as it loads them): not rounded in place first
         * (default) or rounded in place (VERLC_ROUND_QKV=1): the same bits */
        static const char *HD64 =
            "{\"architectures\": [\"Qwen2ForCausalLM\"], \"model_type\": \"qwen2\", \"hidden_size\": 128,"
            " \"intermediate_size\": 96, \"num_hidden_layers\": 2, \"num_attention_heads\": 2, \"num_key_value_heads\": 1,"
            " \"vocab_size\": 257, \"max_position_embeddings\": 512, \"rms_norm_eps\": 1e-6, \"rope_theta\": 10000.0,"
            " \"tie_word_embeddings\": true, \"hidden_act\": \"silu\", \"torch_dtype\": \"float32\"}";
        same_training_env(HD64, "VERLC_ROUND_QKV", "1", "heads of 64: weights with q, k, v rounded by the attention "
                          "kernels %s with them rounded in place first");
        /* the gated MLP's gradients of gate and up written straight into the bf16 copy their GEMMs read (default)
         * or in f32, then rounded by the hold (VERLC_CUDA_ACT_HELD=0): the same bits, gate and up in f32 or bf16 */
        same_training_env(CONFIGS[0], "VERLC_CUDA_ACT_HELD", "0", "weights with the gate / up gradients written into "
                          "their held bf16 copy %s with them written in f32 and rounded by the hold");
        setenv("VERLC_GATE_UP_BF16", "1", 1);
        same_training_env(CONFIGS[0], "VERLC_CUDA_ACT_HELD", "0", "gate and up in bf16 storage: weights with their "
                          "gradients written into the held bf16 copy %s with them written in f32");
        unsetenv("VERLC_GATE_UP_BF16");
        /* the LM head's logits kept from its forward for its backward (default) or formed again there
         * (VERLC_CUDA_HEAD_KEEP=0): the same bits */
        same_training_env(CONFIGS[0], "VERLC_CUDA_HEAD_KEEP", "0", "weights with the LM head's logits kept for its "
                          "backward %s with them formed again by a GEMM");
        /* q, k and v in one GEMM with a tape too (default; its backward one GEMM for x's gradient and one for the
         * weights') or three linears and two ropes (VERLC_QKV_FUSED=0): the same sums in another order. AdamW's first
         * steps move a weight by about the learning rate whatever its gradient's size, so a gradient near 0 whose sign
         * went the other way moves it by twice that: at most one weight in 1,000 further apart than a tenth of it (a
         * gradient left out or wrong moves whole matrices) */
        {
            size_t nq = 0, nu = 0;
            float *fq = train_bf16(1, CONFIGS[0], &nq);
            setenv("VERLC_QKV_FUSED", "0", 1);
            float *fu = train_bf16(1, CONFIGS[0], &nu);
            unsetenv("VERLC_QKV_FUSED");
            vc_trainer_config tc;
            vc_trainer_config_default(&tc);
            double worst = 0;
            size_t moved = 0, far = 0;
            for (size_t i = 0; fq && fu && nq == nu && i < nq; i++) {
                double e = fabs((double)fq[i] - fu[i]);
                worst = fmax(worst, e);
                moved += e > 0;
                far += e > tc.adamw.lr / 10;
            }
            printf("training, bf16 matmuls: weights with q, k and v in one GEMM (forward and backward) within %.2e of "
                   "three GEMMs' (%zu of %zu differ, %zu by over a tenth of the learning rate %g)\n", worst, moved, nq, far,
                   tc.adamw.lr);
            CHECK_MSG(fq && fu && nq == nu && moved > 0 && far <= nq / 1000,
                      "q, k and v in one GEMM: training differs (%zu weights by over lr / 10, %zu moved)", far, moved);
            free(fq);
            free(fu);
        }
        /* MoE: the experts' gathered inputs and gated activations in bf16 or f32, through the grouped GEMMs */
        same_training_env(CONFIGS[2], "VERLC_BF16_ACT", "0", "MoE: weights with the experts' inputs and activations in "
                          "bf16 %s with them in f32");
        /* MoE: the experts' output, gate and up gradients written straight into the bf16 copies their GEMMs read
         * (default) or in f32 and rounded by the GEMMs; the grouped GEMMs on mma.sync (default) or WMMA: the same bits */
        same_training_env(CONFIGS[2], "VERLC_CUDA_ACT_HELD", "0", "MoE: weights with the experts' output, gate and up "
                          "gradients written into their held bf16 copies %s with them written in f32");
        same_training_env(CONFIGS[2], "VERLC_CUDA_MOE_MMA", "0", "MoE: weights with the grouped expert GEMMs on "
                          "mma.sync %s with them on WMMA");
        free(a);
        free(b);
    }
    {   /* keys in chunks of 64 (VERLC_CUDA_PAGED_SPLIT=64; 512 by default): a dense model's heads of 64 on the
         * tensor-core paged kernel, 56 new tokens, so rows outgrow one chunk mid-decode (a step of another launch: its
         * graph is captured again): bitwise equal to eager, the same tokens as whole rows with log-probs within 1e-2
         * (other f32 sums flip a bf16 rounding of the attention's output now and then, carried over 56 tokens), and not
         * their bits (the chunks ran) */
        vc_set_matmul_precision(VC_PREC_BF16);
        vc_model *m = model_from_config(
            "{\"architectures\": [\"Qwen2ForCausalLM\"], \"model_type\": \"qwen2\", \"hidden_size\": 256,"
            " \"intermediate_size\": 96, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
            " \"vocab_size\": 260, \"max_position_embeddings\": 512, \"rms_norm_eps\": 1e-6, \"rope_theta\": 10000.0,"
            " \"tie_word_embeddings\": true, \"hidden_act\": \"silu\", \"bos_token_id\": 1, \"eos_token_id\": 2,"
            " \"torch_dtype\": \"float32\"}", 5);
        CHECK(m != NULL);
        vc_rollout_stats sg = { 0 }, se = { 0 }, sw = { 0 };
        int ng = 0, ne = 0, nw = 0;
        setenv("VERLC_CUDA_PAGED_SPLIT", "64", 1);
        vc_rollout_sample *g = m ? run(m, 1, 2, &ng, &sg) : NULL, *ev = m ? run(m, 0, 2, &ne, &se) : NULL;
        unsetenv("VERLC_CUDA_PAGED_SPLIT");
        vc_rollout_sample *w = m ? run(m, 1, 2, &nw, &sw) : NULL;
        int same = g && ev && ng == ne && same_samples(g, ev, ng), tok = g && w && ng == nw, bits = tok;
        double worst = 0;
        for (int i = 0; tok && i < ng; i++) {
            tok = g[i].n_tokens == w[i].n_tokens && !memcmp(g[i].tokens, w[i].tokens, (size_t)g[i].n_tokens * 4);
            for (int64_t t = 0; tok && t < g[i].n_tokens; t++) {
                worst = fmax(worst, fabs(g[i].logp[t] - w[i].logp[t]));
                bits = bits && g[i].logp[t] == w[i].logp[t];
            }
        }
        printf("keys in chunks of 64, 56 new tokens: graphs: %lld captured, %lld replayed, %lld fell back, of %lld steps; "
               "%s eager; %s whole rows' tokens (log-probs within %.1e, %s)\n", (long long)sg.graph_captures,
               (long long)sg.graph_replays, (long long)sg.graph_fallbacks, (long long)sg.steps,
               same ? "bitwise equal to" : "DIFFERENT from", tok ? "the same as" : "DIFFERENT from", worst,
               bits ? "the same bits: chunks never ran  FAIL" : "other bits");
        if (!same) first_difference(g, ev, ng < ne ? ng : ne);
        CHECK_MSG(same, "keys in chunks: graph decode differs from eager decode");
        CHECK_MSG(sg.graph_captures >= 2 && sg.graph_replays >= 30, "keys in chunks: %lld captures, %lld replays",
                  (long long)sg.graph_captures, (long long)sg.graph_replays);
        CHECK_MSG(tok && worst <= 1e-2 && !bits, "keys in chunks vs whole rows: tokens %s, log-probs within %.2e%s",
                  tok ? "equal" : "differ", worst, bits ? ", the same bits" : "");
        vc_rollout_samples_free(g, ng);
        vc_rollout_samples_free(ev, ne);
        vc_rollout_samples_free(w, nw);
        vc_model_free(m);
        vc_set_matmul_precision(VC_PREC_F32);
    }
    {   /* the page table outgrows its buffer mid-decode: graphs dropped and captured again, same bits */
        vc_model *m = model_from_config(CONFIGS[0], 3);
        CHECK(m != NULL);
        vc_rollout_stats sg = { 0 }, se = { 0 };
        int ng = 0, ne = 0;
        vc_rollout_sample *g = m ? run(m, 1, 1, &ng, &sg) : NULL, *ev = m ? run(m, 0, 1, &ne, &se) : NULL;
        int same = g && ev && ng == ne && same_samples(g, ev, ng);
        printf("long decode, one token per page: graphs: %lld captured, %lld replayed, %lld fell back, of %lld "
               "steps; %s\n", (long long)sg.graph_captures, (long long)sg.graph_replays, (long long)sg.graph_fallbacks,
               (long long)sg.steps, same ? "bitwise equal to eager" : "DIFFERENT from eager");
        if (!same) first_difference(g, ev, ng < ne ? ng : ne);
        CHECK_MSG(same, "graph decode differs from eager decode (growing page table)");
        CHECK_MSG(sg.graph_captures >= 2 && sg.graph_replays >= 20, "the batch size never changes here: graphs are "
                  "captured again only after the table moved (%lld captures, %lld replays)",
                  (long long)sg.graph_captures, (long long)sg.graph_replays);
        captures += sg.graph_captures;
        replays += sg.graph_replays;
        vc_rollout_samples_free(g, ng);
        vc_rollout_samples_free(ev, ne);
        vc_model_free(m);
    }
    check_sticky("graphs");
    printf("CUDA graphs: %lld captures, %lld replays in all\n", (long long)captures, (long long)replays);
    return vc_test_done();
}
