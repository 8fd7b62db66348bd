/* Speculative decoding with the MTP layer (vc_rollout_opts.speculative, verl's model.mtp.enable_rollout): the MTP
 * layer over the paged cache gives a training forward's MTP hidden states; generating with drafts gives the tokens
 * and log-probs of generating without them, bitwise, for MiMo's, DeepSeek-V3's (latent attention, experts) and
 * MiMo-V2-Flash's (sliding layers with sinks) layouts, greedy and sampled, with n samples a prompt, chunked prompts,
 * pages of 4 tokens, preemption, bf16 matmuls and pages; an MTP layer made to repeat the decoder's own prediction
 * keeps most drafts (the drafts read the right positions and tokens); refusals. */
#include "infer/infer.h"
#include "infer_test_util.h"
#include "verlc/device.h"
#include "verlc/rng.h"
#include "vc_test.h"
#include <math.h>

#define NP 5
static int32_t prompts[NP][40];
static const int plen[NP] = { 6, 13, 1, 29, 8 }; /* (8: a prompt filling its last page of 4) */

static const char *CFG_MIMO =
    "{\"architectures\": [\"MiMoForCausalLM\"], \"model_type\": \"mimo\", \"hidden_size\": 48, \"intermediate_size\": 64,"
    " \"num_hidden_layers\": %d, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"vocab_size\": 300,"
    " \"rms_norm_eps\": 1e-6, \"rope_theta\": 10000.0, \"num_nextn_predict_layers\": 1, \"bos_token_id\": 1,"
    " \"eos_token_id\": 2, \"torch_dtype\": \"float32\"}";
static const char *CFG_DSV3 =
    "{\"architectures\": [\"DeepseekV3ForCausalLM\"], \"model_type\": \"deepseek_v3\", \"hidden_size\": 48,"
    " \"intermediate_size\": 64, \"moe_intermediate_size\": 16, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
    " \"num_key_value_heads\": 4, \"q_lora_rank\": 24, \"kv_lora_rank\": 16, \"qk_nope_head_dim\": 8,"
    " \"qk_rope_head_dim\": 8, \"v_head_dim\": 8, \"n_routed_experts\": 4, \"num_experts_per_tok\": 2,"
    " \"n_shared_experts\": 1, \"first_k_dense_replace\": 1, \"n_group\": 1, \"topk_group\": 1,"
    " \"num_nextn_predict_layers\": 1, \"vocab_size\": 300, \"rms_norm_eps\": 1e-6, \"bos_token_id\": 1,"
    " \"eos_token_id\": 2, \"torch_dtype\": \"float32\"}";
static const char *CFG_MIMO_V2 =
    "{\"architectures\": [\"MiMoV2FlashForCausalLM\"], \"model_type\": \"mimo_v2_flash\", \"hidden_size\": 48,"
    " \"intermediate_size\": 64, \"moe_intermediate_size\": 16, \"num_hidden_layers\": 3, \"num_attention_heads\": 4,"
    " \"num_key_value_heads\": 1, \"head_dim\": 16, \"v_head_dim\": 8, \"n_routed_experts\": 4, \"num_experts_per_tok\": 2,"
    " \"sliding_window\": 5, \"layer_types\": [\"full_attention\", \"sliding_attention\", \"full_attention\"],"
    " \"num_nextn_predict_layers\": 1, \"vocab_size\": 300, \"rms_norm_eps\": 1e-5, \"bos_token_id\": 1,"
    " \"eos_token_id\": 2, \"torch_dtype\": \"float32\"}";

/* Qwen3.5: Gated DeltaNet layers before a full-attention one, its MTP layer behind `mtp.fc` (a draft not kept takes the
 * linear layers' states back) */
static const char *CFG_Q35 =
    "{\"architectures\": [\"Qwen3_5ForCausalLM\"], \"model_type\": \"qwen3_5_text\", \"hidden_size\": 48,"
    " \"intermediate_size\": 96, \"num_hidden_layers\": 4, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
    " \"head_dim\": 12, \"linear_num_key_heads\": 2, \"linear_num_value_heads\": 4, \"linear_key_head_dim\": 8,"
    " \"linear_value_head_dim\": 6, \"linear_conv_kernel_dim\": 4, \"vocab_size\": 300, \"mtp_num_hidden_layers\": 1,"
    " \"max_position_embeddings\": 1024, \"rms_norm_eps\": 1e-6, \"rope_parameters\": {\"rope_type\": \"default\","
    " \"rope_theta\": 10000.0, \"partial_rotary_factor\": 0.5}, \"tie_word_embeddings\": false,"
    " \"bos_token_id\": 1, \"eos_token_id\": 2, \"torch_dtype\": \"float32\"}";

static const char *CFG_Q35_2 =
    "{\"architectures\": [\"Qwen3_5ForCausalLM\"], \"model_type\": \"qwen3_5_text\", \"hidden_size\": 48,"
    " \"intermediate_size\": 96, \"num_hidden_layers\": 2, \"layer_types\": [\"linear_attention\", \"full_attention\"],"
    " \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 12, \"linear_num_key_heads\": 2,"
    " \"linear_num_value_heads\": 4, \"linear_key_head_dim\": 8, \"linear_value_head_dim\": 6,"
    " \"linear_conv_kernel_dim\": 4, \"vocab_size\": 300, \"mtp_num_hidden_layers\": 1, \"rms_norm_eps\": 1e-6,"
    " \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 10000.0, \"partial_rotary_factor\": 0.5},"
    " \"tie_word_embeddings\": false, \"bos_token_id\": 1, \"eos_token_id\": 2, \"torch_dtype\": \"float32\"}";

/* a random model of config text (a %d for the layers where it has one) with its MTP layer */
static vc_model *mtp_model(const char *fmt, int layers, uint64_t seed) {
    char text[2048], path[] = "/tmp/vc_spec_cfgXXXXXX";
    snprintf(text, sizeof text, fmt, layers);
    int fd = mkstemp(path);
    if (fd < 0) return NULL;
    (void)!write(fd, text, strlen(text));
    close(fd);
    vc_model *m = NULL;
    vc_status st = vc_model_init_random_ex(path, seed, 1, &m);
    unlink(path);
    CHECK_MSG(st == VC_OK, "init: %s", vc_last_error());
    return st ? NULL : m;
}

typedef struct {
    int spec, max_batch, chunk, page, pages; /* pages: the KV pool's (0: room for all) */
} run;

static vc_rollout_sample *generate(vc_model *m, const vc_sampling *sp, run rc, int n, int *n_out, vc_rollout_stats *st) {
    const vc_model_config *c = vc_model_cfg(m);
    int pt = rc.page ? rc.page : 16, bf = vc_matmul_precision() == VC_PREC_BF16;
    double page = (double)vc_kv_page_bytes(pt, c->n_layer + (rc.spec != 0), vc_kv_row_floats(m), bf);
    int mb = rc.max_batch ? rc.max_batch : 16, seqs = NP * n < mb ? NP * n : mb;
    double states = (double)(seqs + 2) * (double)vc_lin_state_floats(c) * 4.0 * (rc.spec ? 2 : 1); /* (their slots) */
    vc_rollout_opts o = { .kv_budget_bytes = rc.pages ? (rc.pages + 0.5) * page + states : 32e6, .page_tokens = pt,
                          .max_batch = mb, .prefill_chunk = rc.chunk ? rc.chunk : 512,
                          .speculative = rc.spec };
    vc_rollout_request rq[NP];
    for (int i = 0; i < NP; i++) rq[i] = (vc_rollout_request){ prompts[i], plen[i], n, (uint64_t)i };
    vc_rollout_engine *e = NULL;
    vc_rollout_sample *out = NULL;
    *n_out = 0;
    CHECK_OK(vc_rollout_new(m, &o, &e));
    if (e) CHECK_MSG(vc_rollout_generate(e, rq, NP, sp, &out, n_out) == VC_OK, "generate: %s", vc_last_error());
    if (e && st) vc_rollout_last_stats(e, st);
    vc_rollout_free(e);
    return out;
}

/* the MTP layer over paged pages, prompt in two chunks, equals the training forward's MTP hidden states */
static void test_paged_vs_training(vc_model *m, const char *name) {
    const vc_model_config *c = vc_model_cfg(m);
    int64_t T = 14, H = c->hidden, cut = 5;
    int32_t ids[14];
    for (int t = 0; t < T; t++) ids[t] = 3 + (int32_t)vc_rng_below(290, 5, 0, 0, (uint64_t)t);
    vc_graph *g = vc_graph_new();
    vc_tensor *mo[VC_MTP_MAX] = { 0 };
    int64_t cu[2] = { 0, T };
    vc_batch b = { 1, cu, ids, .mtp_out = mo };
    vc_tensor *h = vc_model_forward(m, g, &b, NULL);
    float *ref = malloc(sizeof(float) * (size_t)(T * H)), *got = malloc(sizeof(float) * (size_t)(T * H));
    CHECK(h && mo[0]);
    if (h && mo[0]) CHECK_OK(vc_tensor_read(mo[0], ref));
    vc_graph_free(g);
    g = vc_graph_new();
    vc_graph_set_grad(g, 0);
    vc_kv_pool pool;
    CHECK_OK(vc_kv_pool_init(&pool, 8, 4, c->n_layer + 1, vc_kv_row_floats(m), 0));
    int32_t pages[8] = { 5, 2, 7, 0, 1, 3, 4, 6 }, slot[1] = { 0 };
    const int32_t *tab[1] = { pages };
    int64_t sf = vc_lin_state_floats(c); /* (linear-attention layers: the decoder's states in a slot) */
    float *state = sf ? pool.be->alloc(sizeof(float) * (size_t)sf) : NULL;
    double err = 0, scale = 0;
    for (int k = 0; k < 2; k++) { /* positions [0, cut) then [cut, T - 1): each reads the token after it */
        int64_t p0 = k ? cut : 0, n = k ? T - 1 - cut : cut, len[1] = { p0 }, cu2[2] = { 0, n };
        vc_graph_reset(g);
        vc_batch bm = { 1, cu2, ids + p0 };
        vc_kv_pages kv = { pool.mem, 4, tab, len, 0, state, slot, c->n_layer + 1 };
        vc_tensor *hm = vc_model_forward_paged(m, g, &bm, &kv);
        vc_batch bt = { 1, cu2, ids + p0 + 1 };
        vc_tensor *y = hm ? vc_model_mtp_forward_paged(m, g, &bt, &kv, hm) : NULL;
        CHECK_MSG(y != NULL, "%s: %s", name, vc_last_error());
        if (!y || vc_tensor_read(y, got)) break;
        for (int64_t i = 0; i < n * H; i++) {
            double d = fabs((double)got[i] - ref[p0 * H + i]);
            err = d > err ? d : err;
            scale = fabs(ref[p0 * H + i]) > scale ? fabs(ref[p0 * H + i]) : scale;
        }
    }
    CHECK_MSG(err <= 2e-5 * (scale > 1 ? scale : 1), "%s: the paged MTP layer is %.3g off the training forward's", name,
              err);
    printf("%s: MTP layer over pages (two chunks) within %.2g of the training forward's (largest %.2f)\n", name, err,
           scale);
    if (state) pool.be->free(state);
    vc_kv_pool_release(&pool);
    vc_graph_free(g);
    free(ref);
    free(got);
}

static int g_cuda; /* the CUDA backend: a sequence's row count changes kernels (and last bits), not tokens */

/* where two sample lists differ: tokens, or only log-probs (by how much); returns 1 when only log-probs do, by 1e-5 at
 * most with f32 matmuls, 1e-3 with bf16 ones (what the CUDA backend may show: GEMMs over other row counts; measured on
 * the emulator 9.5e-7 and 9.2e-5) */
static int diff_note(const vc_rollout_sample *x, const vc_rollout_sample *y, int n) {
    int tok = 0;
    double lp = 0;
    for (int i = 0; x && y && i < n; i++) {
        tok += x[i].n_tokens != y[i].n_tokens;
        for (int64_t t = 0; t < x[i].n_tokens && t < y[i].n_tokens; t++) {
            tok += x[i].tokens[t] != y[i].tokens[t];
            if (x[i].tokens[t] == y[i].tokens[t]) lp = fmax(lp, fabs((double)x[i].logp[t] - y[i].logp[t]));
        }
    }
    fprintf(stderr, " (%d samples' tokens differ; log-probs of equal tokens within %.3g)\n", tok, lp);
    return x && y && n && !tok && lp <= (vc_matmul_precision() == VC_PREC_BF16 ? 1e-3 : 1e-5);
}

/* generating with drafts: the same samples as without, bitwise, in every run configuration */
static void test_same(vc_model *m, const char *name, int64_t *drafts, int64_t *kept) {
    int32_t eos[1] = { 2 };
    vc_sampling sampled = { .temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .max_new_tokens = 14, .eos_ids = eos,
                            .n_eos = 1, .seed = 77 };
    vc_sampling greedy = { .greedy = 1, .max_new_tokens = 11, .seed = 1 };
    const vc_sampling *sps[2] = { &sampled, &greedy };
    static const run RUNS[] = { { 0, 16, 0, 0, 0 }, { 0, 2, 5, 4, 0 }, { 0, 16, 7, 4, 0 }, { 0, 3, 0, 4, 14 } };
    int bad = 0, cases = 0, near = 0;
    for (int s = 0; s < 2; s++)
        for (size_t r = 0; r < sizeof RUNS / sizeof RUNS[0]; r++) {
            if (g_cuda && (r == 0 || r == 2)) continue; /* (the emulator's time: chunks, forks and preemption kept) */
            int n = s ? 1 : 3, na = 0, nb = 0;
            run a = RUNS[r], b = RUNS[r];
            b.spec = 1 + 2 * (int)(r % 2); /* (one draft a step, or three: the MTP layer on its own drafts) */
            vc_rollout_stats sa, sb;
            vc_rollout_sample *x = generate(m, sps[s], a, n, &na, &sa), *y = generate(m, sps[s], b, n, &nb, &sb);
            cases++;
            if (!x || !y || na != nb || !same_samples(x, y, na)) {
                fprintf(stderr, "%s: %s, run %zu: drafting changed the samples", name, s ? "greedy" : "sampled", r);
                int close = diff_note(x, y, na == nb ? na : 0);
                bad += !(g_cuda && close);
                near += g_cuda && close;
            }
            if (b.pages) CHECK_MSG(sb.preemptions > 0, "%s: run %zu preempted nothing", name, r);
            CHECK_MSG(sa.draft_tokens == 0 && sb.draft_tokens > 0, "%s: %lld drafts", name, (long long)sb.draft_tokens);
            *drafts += sb.draft_tokens;
            *kept += sb.draft_accepted;
            vc_rollout_samples_free(x, na);
            vc_rollout_samples_free(y, nb);
        }
    CHECK_MSG(bad == 0, "%s: %d of %d runs differ with drafts", name, bad, cases);
    if (!bad) printf("%s: %d runs the same with drafts as without%s\n", name, cases, near ? " (cuda: the same tokens, "
                     "log-probs within 1e-5 (bf16: 1e-3) where the rows' kernels differ)" : "");
}

/* a model whose MTP layer repeats its last decoder layer: the MTP layer's copy of it reading the next token's embedding
 * (the projection passes the embedding half through, embedding rows of unit RMS) sees the sequence one position on,
 * the layers before it contribute a hundredth of their outputs (so the states of Qwen3.5's Gated DeltaNet layer still
 * move every log-prob), so it predicts what the decoder will; greedy drafts are then mostly kept. hidden_first: MiMo's
 * [hidden, embedding] projection (else [embedding, hidden]) */
static vc_model *repeating_model(const char *cfg, int layers, int hidden_first) {
    vc_model *m = mtp_model(cfg, layers, 21);
    if (!m) return NULL;
    int np = vc_model_n_params(m), L = (int)vc_model_cfg(m)->n_layer;
    int64_t H = vc_model_cfg(m)->hidden;
    char mtp[32], last[32];
    snprintf(mtp, sizeof mtp, "layers.%d.", L + 1); /* (the MTP row: past the decoder's layers and the globals' row) */
    snprintf(last, sizeof last, "layers.%d.", L - 1);
    for (int i = 0; i < np; i++) {
        const char *name = NULL;
        vc_tensor *t = vc_model_param(m, i, &name, NULL);
        float *v = malloc(sizeof(float) * (size_t)t->n);
        CHECK_OK(vc_model_param_read(m, i, 0, v));
        const char *rest = !strncmp(name, mtp, strlen(mtp)) ? name + strlen(mtp) : NULL, *dot = strrchr(name, '.');
        if (!strcmp(name, "tok_embd")) {
            for (int64_t r = 0; r < t->shape[0]; r++) {
                double ss = 0;
                for (int64_t k = 0; k < H; k++) ss += (double)v[r * H + k] * v[r * H + k];
                for (int64_t k = 0; k < H; k++) v[r * H + k] = (float)(v[r * H + k] / sqrt(ss / (double)H));
            }
        } else if (rest && !strcmp(rest, "mtp.proj")) { /* -> the embedding */
            memset(v, 0, sizeof(float) * (size_t)t->n);
            for (int64_t r = 0; r < H; r++) v[r * 2 * H + (hidden_first ? H : 0) + r] = 1;
        } else if (rest && strcmp(rest, "mtp.enorm") && strcmp(rest, "mtp.hnorm")) {
            char want[256];
            snprintf(want, sizeof want, "%s%s", last, rest);
            if (!strcmp(rest, "mtp.final_norm")) snprintf(want, sizeof want, "out_norm");
            int found = 0;
            for (int j = 0; j < np; j++) {
                const char *o = NULL;
                vc_model_param(m, j, &o, NULL);
                if (!strcmp(o, want)) found = !vc_model_param_read(m, j, 0, v);
            }
            CHECK_MSG(found, "no %s for %s", want, name);
        } else if (!strncmp(name, "layers.", 7) && atoi(name + 7) < L - 1 && dot &&
                   (!strcmp(dot, ".o") || !strcmp(dot, ".down") || !strcmp(dot, ".out"))) {
            for (int64_t k = 0; k < t->n; k++) v[k] *= 0.01f; /* (an earlier layer's outputs, a hundredth of them) */
        }
        CHECK_OK(vc_model_param_write(m, i, v));
        free(v);
    }
    return m;
}

static void test_kept(const char *cfg, int layers, int hidden_first, const char *what) {
    vc_model *m = repeating_model(cfg, layers, hidden_first);
    if (!m) return;
    vc_sampling greedy = { .greedy = 1, .max_new_tokens = 24, .seed = 1 };
    int na = 0;
    vc_rollout_stats sa;
    vc_rollout_sample *x = generate(m, &greedy, (run){ 0 }, 2, &na, &sa);
    for (int k = g_cuda ? 3 : 1; k <= 3; k += 2) { /* one draft a step; three (the MTP layer on its own hidden states) */
        int nb = 0;
        vc_rollout_stats sb;
        vc_rollout_sample *y = generate(m, &greedy, (run){ k, 0, 0, 4, 0 }, 2, &nb, &sb);
        CHECK(x && y && na == nb && (same_samples(x, y, na) || (g_cuda && diff_note(x, y, na))));
        double rate = sb.draft_tokens ? (double)sb.draft_accepted / (double)sb.draft_tokens : 0;
        CHECK_MSG(rate > 0.9 && sb.steps <= (sa.steps + k - 1) / k + 2,
                  "an MTP layer repeating the decoder kept %.2f of its drafts (%d a step)", rate, k);
        printf("%s, an MTP layer repeating the decoder, %d draft%s a step: %lld of %lld greedy drafts kept (%.2f), "
               "%lld steps against %lld\n", what, k, k > 1 ? "s" : "", (long long)sb.draft_accepted,
               (long long)sb.draft_tokens, rate, (long long)sb.steps, (long long)sa.steps);
        if (g_cuda) { /* drafted steps replayed as CUDA graphs: the same bits as run eagerly */
            int ne = 0;
            vc_rollout_stats se;
            setenv("VERLC_CUDA_GRAPHS", "0", 1);
            vc_rollout_sample *z = generate(m, &greedy, (run){ k, 0, 0, 4, 0 }, 2, &ne, &se);
            unsetenv("VERLC_CUDA_GRAPHS");
            CHECK_MSG(z && ne == nb && same_samples(y, z, nb), "%s: drafted steps as graphs differ from eager", what);
            CHECK_MSG(sb.graph_replays >= 1 && se.graph_replays == 0, "%s: %lld drafted steps replayed (eager: %lld)",
                      what, (long long)sb.graph_replays, (long long)se.graph_replays);
            printf("%s, %d drafts a step on cuda: %lld steps captured, %lld replayed as graphs, of %lld; samples bitwise "
                   "equal to eager\n", what, k, (long long)sb.graph_captures, (long long)sb.graph_replays,
                   (long long)sb.steps);
            vc_rollout_samples_free(z, ne);
        }
        vc_rollout_samples_free(y, nb);
    }
    vc_rollout_samples_free(x, na);
    /* sampled: drafts kept and not, 1 to 3 a step (a Gated DeltaNet layer's states taken back to before the step and
     * the kept tokens computed again) */
    vc_sampling sp = { .temperature = 0.7f, .top_k = 4, .top_p = 1.0f, .max_new_tokens = 24, .seed = 5 };
    vc_rollout_stats sa2, sb2;
    int n1 = 0, n2 = 0;
    vc_rollout_sample *a = generate(m, &sp, (run){ 0 }, 3, &n1, &sa2), *b = generate(m, &sp, (run){ 3, 2, 5, 4, 0 }, 3, &n2, &sb2);
    CHECK_MSG(a && b && n1 == n2 && (same_samples(a, b, n1) || (g_cuda && diff_note(a, b, n1))),
              "%s: sampled drafts changed the samples", what);
    CHECK_MSG(sb2.draft_accepted > 0 && sb2.draft_accepted < sb2.draft_tokens, "%s: %lld of %lld sampled drafts kept", what,
              (long long)sb2.draft_accepted, (long long)sb2.draft_tokens);
    /* a draft is a function of its sequence's tokens (the MTP layer's rows, as the decoder's, row-invariant on the CPU):
     * the same drafts, and the same kept, with prompts whole on pages of 16 as in chunks of 5 on pages of 4 (where a
     * prompt of 8 fills its last page and its samples' first MTP rows need copies of it); no sample waits in either
     * (a waiting sample of a linear-attention model is recomputed, drafting later) */
    if (!g_cuda) {
        vc_rollout_stats sc, sd;
        int n3 = 0, n4 = 0;
        vc_rollout_sample *c3 = generate(m, &sp, (run){ 3 }, 3, &n3, &sc), *c4 = generate(m, &sp, (run){ 3, 16, 5, 4, 0 }, 3,
                                                                                           &n4, &sd);
        CHECK_MSG(sc.draft_tokens == sd.draft_tokens && sc.draft_accepted == sd.draft_accepted,
                  "%s: drafts depend on the chunks and pages: %lld / %lld kept against %lld / %lld", what,
                  (long long)sc.draft_accepted, (long long)sc.draft_tokens, (long long)sd.draft_accepted,
                  (long long)sd.draft_tokens);
        vc_rollout_samples_free(c3, n3);
        vc_rollout_samples_free(c4, n4);
    }
    printf("%s, sampled at 0.7 (top 4), 3 drafts a step: the same samples, %lld of %lld drafts kept\n", what,
           (long long)sb2.draft_accepted, (long long)sb2.draft_tokens);
    vc_rollout_samples_free(a, n1);
    vc_rollout_samples_free(b, n2);
    vc_model_free(m);
}

/* one engine's two calls in a session (a conversation's next turn: the first call's prompt and response, then 3 more
 * tokens), with prompts sharing their first 8 tokens; prefix cache on or off (no_prefix_cache); the second call's
 * samples, both calls' drafts and reused tokens */
static vc_rollout_sample *two_turns(vc_model *m, int spec, int no_cache, int *n_out, vc_rollout_stats *st) {
    vc_rollout_opts o = { .kv_budget_bytes = 32e6, .page_tokens = 4, .max_batch = 4, .speculative = spec,
                          .no_prefix_cache = no_cache };
    vc_sampling greedy = { .temperature = 1.0f, .top_k = 3, .top_p = 1.0f, .max_new_tokens = 12, .seed = 3 };
    int32_t p1[NP][40], p2[NP][64];
    vc_rollout_request rq[NP];
    for (int i = 0; i < NP; i++) {
        /* (8 tokens every prompt shares: two full pages of 4, whose last MTP row reads each prompt's own ninth token) */
        memcpy(p1[i], prompts[3], sizeof(int32_t) * 8);
        memcpy(p1[i] + 8, prompts[i], sizeof(int32_t) * (size_t)plen[i]);
        rq[i] = (vc_rollout_request){ p1[i], 8 + plen[i], 1, (uint64_t)i };
    }
    vc_rollout_engine *e = NULL;
    vc_rollout_sample *a = NULL, *b = NULL;
    int na = 0;
    *n_out = 0;
    CHECK_OK(vc_rollout_new(m, &o, &e));
    if (!e) return NULL;
    vc_rollout_session(e, 1);
    CHECK_OK(vc_rollout_generate(e, rq, NP, &greedy, &a, &na));
    vc_rollout_stats s1;
    vc_rollout_last_stats(e, &s1);
    for (int i = 0; a && i < NP; i++) { /* turn 2: turn 1's prompt and response, then 3 tokens */
        int64_t n = rq[i].prompt_len, k = a[i].n_tokens;
        memcpy(p2[i], p1[i], sizeof(int32_t) * (size_t)n);
        memcpy(p2[i] + n, a[i].tokens, sizeof(int32_t) * (size_t)k);
        for (int j = 0; j < 3; j++) p2[i][n + k + j] = 5 + j;
        rq[i] = (vc_rollout_request){ p2[i], n + k + 3, 1, (uint64_t)i };
    }
    if (a) CHECK_OK(vc_rollout_generate(e, rq, NP, &greedy, &b, n_out));
    vc_rollout_last_stats(e, st);
    st->draft_tokens += s1.draft_tokens, st->draft_accepted += s1.draft_accepted; /* (both turns') */
    st->prefix_hit_tokens += s1.prefix_hit_tokens;
    vc_rollout_samples_free(a, na);
    vc_rollout_free(e);
    return b;
}

/* the prefix cache with drafting: a reused chain's last position is computed again with its MTP row (the row there
 * read the next token of the sequence that computed it); the same samples as without drafts or without the cache, and
 * the same drafts kept as without the cache (the cached pages' MTP rows are right) */
static void test_prefix_cache(void) {
    vc_model *m = repeating_model(CFG_MIMO, 1, 1);
    if (!m) return;
    int n0 = 0, n1 = 0, n2 = 0;
    vc_rollout_stats s0, s1, s2;
    vc_rollout_sample *plain = two_turns(m, 0, 0, &n0, &s0), *cached = two_turns(m, 3, 0, &n1, &s1);
    vc_rollout_sample *fresh = two_turns(m, 3, 1, &n2, &s2);
    CHECK(plain && cached && fresh && n0 == n1 && n1 == n2 && same_samples(plain, cached, n0) &&
          same_samples(fresh, cached, n0));
    CHECK_MSG(s1.prefix_hit_tokens > 0 && s2.prefix_hit_tokens == 0, "prefix hits %lld and %lld",
              (long long)s1.prefix_hit_tokens, (long long)s2.prefix_hit_tokens);
    CHECK_MSG(s1.draft_tokens == s2.draft_tokens && s1.draft_accepted == s2.draft_accepted && s1.draft_accepted > 0,
              "drafts with the prefix cache %lld / %lld kept, without %lld / %lld", (long long)s1.draft_accepted,
              (long long)s1.draft_tokens, (long long)s2.draft_accepted, (long long)s2.draft_tokens);
    printf("prefix cache with drafting (a session's second turn, shared prompt pages): %lld prompt tokens reused, the "
           "same samples, %lld of %lld drafts kept as without the cache\n", (long long)s1.prefix_hit_tokens,
           (long long)s1.draft_accepted, (long long)s1.draft_tokens);
    vc_rollout_samples_free(plain, n0);
    vc_rollout_samples_free(cached, n1);
    vc_rollout_samples_free(fresh, n2);
    vc_model_free(m);
}

static void test_refusals(void) {
    vc_rollout_opts o = { .speculative = 1 };
    vc_rollout_engine *e = NULL;
    char path[] = "/tmp/vc_spec_cfgXXXXXX", text[2048];
    snprintf(text, sizeof text, CFG_MIMO, 2);
    int fd = mkstemp(path);
    (void)!write(fd, text, strlen(text));
    close(fd);
    vc_model *plain = NULL;
    CHECK_OK(vc_model_init_random_ex(path, 3, 0, &plain));
    unlink(path);
    if (plain) {
        CHECK(vc_rollout_new(plain, &o, &e) == VC_ERR_ARG && !e);
        CHECK_MSG(strstr(vc_last_error(), "MTP") != NULL, "%s", vc_last_error());
        vc_rollout_opts o9 = { .speculative = VC_SPEC_MAX + 1 };
        CHECK(vc_rollout_new(plain, &o9, &e) == VC_ERR_ARG && !e);
        CHECK_MSG(strstr(vc_last_error(), "speculative 9") != NULL, "%s", vc_last_error());
        vc_clear_error();
        vc_graph *g = vc_graph_new();
        int64_t cu[2] = { 0, 1 }, len[1] = { 0 };
        int32_t ids[1] = { 5 }, pg[1] = { 0 };
        const int32_t *tab[1] = { pg };
        vc_batch b = { 1, cu, ids };
        vc_kv_pages kv = { NULL, 4, tab, len, 0, .n_layers = 3 };
        CHECK(vc_model_mtp_forward_paged(plain, g, &b, &kv, NULL) == NULL && vc_graph_status(g) == VC_ERR_ARG);
        vc_graph_free(g);
    }
    vc_model_free(plain);
    vc_model *m = mtp_model(CFG_MIMO, 2, 3);
    if (m) { /* pages without the MTP layer's room */
        vc_graph *g = vc_graph_new();
        vc_graph_set_grad(g, 0);
        vc_kv_pool pool;
        CHECK_OK(vc_kv_pool_init(&pool, 2, 4, 2, vc_kv_row_floats(m), 0));
        int64_t cu[2] = { 0, 1 }, len[1] = { 0 };
        int32_t ids[1] = { 5 }, pg[1] = { 0 }, bad[1] = { 400 };
        const int32_t *tab[1] = { pg };
        vc_batch b = { 1, cu, ids }, bb = { 1, cu, bad };
        vc_kv_pages kv = { pool.mem, 4, tab, len, 0 };
        vc_tensor *h = vc_model_forward_paged(m, g, &b, &kv);
        CHECK(h && !vc_model_mtp_forward_paged(m, g, &b, &kv, h));
        CHECK_MSG(strstr(vc_last_error(), "layers") != NULL, "%s", vc_last_error());
        kv.n_layers = 3;
        vc_graph_reset(g);
        CHECK(!vc_model_mtp_forward_paged(m, g, &bb, &kv, h));
        CHECK_MSG(strstr(vc_last_error(), "400") != NULL, "%s", vc_last_error());
        vc_kv_pool_release(&pool);
        vc_graph_free(g);
    }
    vc_model_free(m);
    printf("refused: drafting without an MTP layer, 9 drafts a step, pages without its room, a token past the vocabulary\n");
}

static void run_all(const char *dev) {
    static const struct { const char **cfg, *name; int layers; uint64_t seed; } MODELS[] = {
        { &CFG_MIMO, "mimo", 2, 5 }, { &CFG_DSV3, "deepseek-v3 (latent attention, experts)", 0, 7 },
        { &CFG_MIMO_V2, "mimo-v2-flash (sliding layers, sinks)", 0, 9 },
        { &CFG_Q35, "qwen3.5 (gated deltanet states taken back)", 0, 11 } };
    int64_t drafts = 0, kept = 0;
    for (size_t i = 0; i < sizeof MODELS / sizeof MODELS[0]; i++) {
        vc_model *m = mtp_model(*MODELS[i].cfg, MODELS[i].layers, MODELS[i].seed);
        if (!m) continue;
        test_paged_vs_training(m, MODELS[i].name);
        if (!g_cuda || i == 0 || i == 3) test_same(m, MODELS[i].name, &drafts, &kept); /* (the emulator's time) */
        if (i == 0) { /* bf16 matmuls, bf16 pages */
            vc_set_matmul_precision(VC_PREC_BF16);
            test_same(m, "mimo, bf16 matmuls and pages", &drafts, &kept);
            vc_set_matmul_precision(VC_PREC_F32);
        }
        vc_model_free(m);
    }
    printf("%s: random MTP layers: %lld of %lld drafts kept\n", dev, (long long)kept, (long long)drafts);
    if (!g_cuda) test_kept(CFG_MIMO, 1, 1, "mimo");
    if (!g_cuda) test_prefix_cache();
    test_kept(CFG_Q35_2, 0, 0, "qwen3.5 (a gated deltanet layer first)");
}

int main(void) {
    for (int i = 0; i < NP; i++)
        for (int t = 0; t < plen[i]; t++) prompts[i][t] = 3 + (int32_t)vc_rng_below(290, 41, (uint64_t)i, 0, (uint64_t)t);
    /* the CPU, then the sim device (the CPU kernels behind poisoned pointers) or VC_SPEC_DEVICE (cuda: the emulator's) */
    const char *dev = getenv("VC_SPEC_DEVICE"), *devs[2] = { "cpu", dev && *dev ? dev : "sim" };
    for (int d = 0; d < 2; d++) {
        CHECK_OK(vc_device_select(devs[d], "test"));
        g_cuda = !strcmp(devs[d], "cuda");
        printf("device %s\n", devs[d]);
        run_all(devs[d]);
    }
    CHECK_OK(vc_device_select("cpu", "test"));
    test_refusals();
    return vc_test_done();
}
