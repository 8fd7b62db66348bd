/* Bad model directories: each fails with one message naming the file and the key or tensor at fault. */
#include "verlc/model.h"
#include "verlc/rollout.h"
#include "verlc/safetensors.h"
#include "vc_test.h"
#include <sys/stat.h>
#include <unistd.h>

static char base[256];

static void write_text(const char *dir, const char *name, const char *text) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    fputs(text, f);
    fclose(f);
}

/* copies the llama fixture's checkpoint into dir, dropping `drop` and adding `extra` (names may be NULL) */
static void copy_ckpt(const char *dir, const char *drop, const char *extra, int64_t reshape_rows) {
    char src[512];
    snprintf(src, sizeof src, "%s/fixtures/models/llama", vc_test_shared());
    vc_checkpoint *ck = NULL;
    vc_st_writer *w = NULL;
    CHECK_OK(vc_ckpt_open(src, &ck));
    CHECK_OK(vc_st_writer_new(&w));
    if (!ck || !w) return;
    for (int i = 0; i < vc_ckpt_count(ck); i++) {
        const vc_st_tensor *t = vc_ckpt_at(ck, i);
        if (drop && !strcmp(t->name, drop)) continue;
        int64_t shape[8];
        memcpy(shape, t->shape, sizeof shape);
        if (reshape_rows && !strcmp(t->name, "model.layers.0.mlp.up_proj.weight")) {
            shape[0] = reshape_rows;
            shape[1] = t->shape[0] * t->shape[1] / reshape_rows;
        }
        vc_st_writer_add(w, t->name, t->dtype, t->ndim, shape, t->data, 1);
    }
    if (extra) {
        float z[4] = { 0 };
        int64_t s[1] = { 4 };
        vc_st_writer_add(w, extra, VC_F32, 1, s, z, 1);
    }
    char out[512];
    snprintf(out, sizeof out, "%s/model.safetensors", dir);
    CHECK_OK(vc_st_writer_write(w, out));
    vc_st_writer_free(w);
    vc_ckpt_close(ck);
    char cfg[512], cmd[1200];
    snprintf(cfg, sizeof cfg, "%s/fixtures/models/llama/config.json", vc_test_shared());
    snprintf(cmd, sizeof cmd, "cp %s %s/config.json", cfg, dir);
    CHECK(system(cmd) == 0);
}

/* copies one of verlc's own fixtures (tests/fixtures/models/NAME) into dir, config.json included, dropping tensor
 * `drop` and giving tensor `cut` (both may be NULL) one row fewer in its first dimension */
static void copy_own(const char *dir, const char *name, const char *drop, const char *cut) {
    char src[512], cmd[1200];
    snprintf(src, sizeof src, "tests/fixtures/models/%s", name);
    vc_checkpoint *ck = NULL;
    vc_st_writer *w = NULL;
    CHECK_OK(vc_ckpt_open(src, &ck));
    CHECK_OK(vc_st_writer_new(&w));
    for (int i = 0; ck && w && i < vc_ckpt_count(ck); i++) {
        const vc_st_tensor *t = vc_ckpt_at(ck, i);
        if (drop && !strcmp(t->name, drop)) continue;
        int64_t shape[8];
        memcpy(shape, t->shape, sizeof shape);
        if (cut && !strcmp(t->name, cut)) shape[0]--;
        vc_st_writer_add(w, t->name, t->dtype, t->ndim, shape, t->data, 1);
    }
    char out[512];
    snprintf(out, sizeof out, "%s/model.safetensors", dir);
    if (w) CHECK_OK(vc_st_writer_write(w, out));
    vc_st_writer_free(w);
    vc_ckpt_close(ck);
    snprintf(cmd, sizeof cmd, "cp %s/config.json %s/config.json", src, dir);
    CHECK(system(cmd) == 0);
}

static const char *fresh(const char *name) {
    static char d[512];
    snprintf(d, sizeof d, "%s/%s", base, name);
    mkdir(d, 0755);
    return d;
}

static void expect(const char *dir, vc_status want, const char *needle1, const char *needle2) {
    vc_model *m = NULL;
    vc_status st = vc_model_load(dir, &m);
    const char *msg = vc_last_error();
    CHECK_MSG(st == want && m == NULL, "%s: status %s, want %s (%s)", dir, vc_status_name(st), vc_status_name(want), msg);
    CHECK_MSG(strstr(msg, needle1) != NULL, "%s: message '%s' lacks '%s'", dir, msg, needle1);
    if (needle2) CHECK_MSG(strstr(msg, needle2) != NULL, "%s: message '%s' lacks '%s'", dir, msg, needle2);
    CHECK_MSG(!strchr(msg, '\n'), "message is one line: %s", msg);
    vc_model_free(m);
}

/* a config.json of `text` in a fresh folder named tag; its path in cfgp */
static void config_dir(const char *tag, const char *text, char *cfgp, size_t cap) {
    const char *d = fresh(tag);
    write_text(d, "config.json", text);
    snprintf(cfgp, cap, "%s/config.json", d);
}

/* a random model of the config `text` is refused with a message containing needle */
static void expect_refused(const char *text, const char *needle, const char *what) {
    char cfgp[512];
    config_dir("bad_config", text, cfgp, sizeof cfgp);
    vc_model *bad = NULL;
    vc_status st = vc_model_init_random(cfgp, 3, &bad);
    CHECK_MSG(st != VC_OK && strstr(vc_last_error(), needle), "%s: '%s'", what, vc_last_error());
    vc_model_free(bad);
}

/* found by fuzzing config.json: an empty model_type matched every architecture's name list without advancing (the
 * lookup never ended); one with a space matched two adjacent names; a layer's MLP of width 0 (intermediate_size 0, or
 * missing where the family has no default) divided by zero in the forward */
static void model_type_errors(void) {
    expect_refused("{\"model_type\": \"llama\", \"vocab_size\": 8, \"hidden_size\": 8, \"num_hidden_layers\": 1, "
                   "\"num_attention_heads\": 2, \"intermediate_size\": 0}",
                   "config.json implies tensor gate of layer 0 with a zero size", "MLP of width 0");
    expect_refused("{\"model_type\": \"\", \"vocab_size\": 8}", "model_type '' is not a supported", "empty model_type");
    expect_refused("{\"model_type\": \"qwen2 qwen3\", \"vocab_size\": 8}", "is not a supported",
                   "model_type with a space");
    /* a type read as another family's (config_alias.c): the message names the key the file gave */
    expect_refused("{\"model_type\": \"exaone\", \"vocab_size\": 8, \"hidden_size\": 8, \"num_layers\": \"x\", "
                   "\"num_attention_heads\": 2, \"intermediate_size\": 8}", "num_layers as num_hidden_layers", "exaone's keys");
    expect_refused("{\"model_type\": \"sarvam_moe\", \"vocab_size\": 8, \"hidden_size\": 8, \"num_hidden_layers\": 1, "
                   "\"num_attention_heads\": 2, \"intermediate_size\": 8, \"num_experts\": -3}",
                   "must not be negative, got -3", "a negative expert count");
    expect_refused("{\"model_type\": \"gemma4_unified_text\", \"vocab_size\": 8, \"hidden_size\": 8, "
                   "\"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"intermediate_size\": 8, "
                   "\"use_bidirectional_attention\": \"all\"}", "not a causal language model", "a bidirectional Gemma 4");
}

/* Laguna's per-layer heads and Apertus 1.5's pruned LM head: malformed settings refused by key; a target the pruned
 * head cannot predict stops the loss with its row named */
static void family_errors(void) {
    static const char *LAGUNA = "{\"model_type\": \"laguna\", \"vocab_size\": 16, \"hidden_size\": 16,"
        " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"intermediate_size\": 16,"
        " \"num_experts\": 4, \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 8%s}";
    static const char *PHIMOE = "{\"model_type\": \"phimoe\", \"vocab_size\": 16, \"hidden_size\": 16,"
        " \"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"intermediate_size\": 16, \"num_local_experts\": 4%s}";
    static const char *APERTUS = "{\"model_type\": \"apertus1p5_text\", \"vocab_size\": 16, \"hidden_size\": 16,"
        " \"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"intermediate_size\": 16%s}";
    static const struct { const char *fmt, *extra, *needle; } BAD[] = {
        { "p", ", \"num_experts_per_tok\": 3", "sparsemixer routes to 2 experts" },
        { "p", ", \"num_experts_per_tok\": 2, \"router_jitter_noise\": -0.1", "router_jitter_noise in [0, 1]" },
        { NULL, ", \"num_attention_heads_per_layer\": [4]", "num_attention_heads_per_layer must list 2 layers" },
        { NULL, ", \"num_attention_heads_per_layer\": [4, 3]", "num_attention_heads_per_layer[1] = 3 is not a multiple" },
        { NULL, ", \"num_attention_heads_per_layer\": [4, \"x\"]", "num_attention_heads_per_layer[1] is not a number" },
        { NULL, ", \"moe_apply_router_weight_on_input\": true", "moe_apply_router_weight_on_input" },
        { NULL, ", \"moe_router_logit_softcapping\": -1", "moe_router_logit_softcapping" },
        { "a", ", \"output_vocab_size\": 17", "output_vocab_size is 17, outside [1, 16]" },
        { "a", ", \"output_vocab_size\": 8, \"tie_word_embeddings\": true", "a pruned LM head cannot be" },
    };
    char cfgp[512], text[1024], what[64];
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
        snprintf(text, sizeof text, !BAD[i].fmt ? LAGUNA : BAD[i].fmt[0] == 'p' ? PHIMOE : APERTUS, BAD[i].extra);
        snprintf(what, sizeof what, "config %zu", i);
        expect_refused(text, BAD[i].needle, what);
    }
    snprintf(text, sizeof text, APERTUS, ", \"output_vocab_size\": 8");
    config_dir("pruned_head", text, cfgp, sizeof cfgp);
    vc_model *m = NULL;
    CHECK_OK(vc_model_init_random(cfgp, 3, &m));
    int32_t ids[4] = { 12, 3, 7, 5 }, ok_tgt[4] = { 3, 7, 5, -1 }, bad_tgt[4] = { 3, 7, 9, -1 };
    int64_t cu[2] = { 0, 4 };
    vc_batch b = { .n_seq = 1, .cu_seqlens = cu, .ids = ids }; /* id 12: an input only the embeddings know */
    vc_graph *g = vc_graph_new();
    vc_tensor *h = m ? vc_model_forward(m, g, &b, NULL) : NULL, *lp = NULL;
    CHECK_MSG(h && vc_model_logprobs(m, g, h, ok_tgt, &lp, NULL) == VC_OK && lp && lp->n == 4, "pruned head: %s",
              vc_last_error());
    vc_graph_reset(g);
    h = m ? vc_model_forward(m, g, &b, NULL) : NULL;
    vc_status st = h ? vc_model_logprobs(m, g, h, bad_tgt, &lp, NULL) : VC_ERR_INTERNAL;
    CHECK_MSG(st == VC_ERR_ARG && strstr(vc_last_error(), "target token 9 at row 2 is outside the head's 8 rows"),
              "a target beyond the pruned head: '%s'", vc_last_error());
    vc_graph_free(g);
    /* rollout samples from the head's 8 tokens only (at temperature 3 a flat draw over 16 would reach past them) */
    vc_rollout_engine *e = NULL;
    vc_rollout_opts ro = { .kv_budget_bytes = 1 << 20 };
    vc_rollout_request rq = { .prompt = ids, .prompt_len = 4, .n_samples = 4, .prompt_index = 0 };
    vc_sampling sp = { .temperature = 3.0f, .top_p = 1.0f, .max_new_tokens = 24, .seed = 5 };
    vc_rollout_sample *out = NULL;
    int n_out = 0, inside = 1;
    CHECK_OK(m ? vc_rollout_new(m, &ro, &e) : VC_ERR_INTERNAL);
    CHECK_OK(e ? vc_rollout_generate(e, &rq, 1, &sp, &out, &n_out) : VC_ERR_INTERNAL);
    for (int i = 0; i < n_out; i++)
        for (int64_t t = 0; t < out[i].n_tokens; t++) inside &= out[i].tokens[t] >= 0 && out[i].tokens[t] < 8;
    CHECK_MSG(n_out == 4 && inside, "pruned head: rollout sampled a token past the head's 8 rows");
    vc_rollout_samples_free(out, n_out);
    vc_rollout_free(e);
    vc_model_free(m);
}

int main(void) {
    snprintf(base, sizeof base, "/tmp/verlc_bad_%d", (int)getpid());
    mkdir(base, 0755);
    expect("/nonexistent/model", VC_ERR_IO, "/nonexistent/model/config.json", NULL);

    const char *d = fresh("badjson");
    write_text(d, "config.json", "{\"model_type\": \"llama\", \"hidden_size\": 64,,}");
    expect(d, VC_ERR_FORMAT, "config.json", "byte");

    d = fresh("arch");
    write_text(d, "config.json", "{\"model_type\": \"rwkv\", \"hidden_size\": 64}");
    expect(d, VC_ERR_UNSUPPORTED, "config.json", "rwkv");

    /* hybrids: what is not built is refused by name (a negative Nemotron-H latent MoE width, a clamped Mamba time step, LFM2's conv
     * bias, a Gated DeltaNet layer type misspelt) */
    d = fresh("nemotron_latent");
    write_text(d, "config.json", "{\"model_type\": \"nemotron_h\", \"vocab_size\": 8, \"hidden_size\": 8,"
               " \"num_attention_heads\": 2, \"hybrid_override_pattern\": \"M*E\", \"moe_latent_size\": -4}");
    expect(d, VC_ERR_FORMAT, "config.json", "moe_latent_size");
    d = fresh("mamba_clamp");
    write_text(d, "config.json", "{\"model_type\": \"granitemoehybrid\", \"vocab_size\": 8, \"hidden_size\": 8,"
               " \"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"mamba_n_heads\": 2,"
               " \"time_step_limit\": [0.0, 0.1]}");
    expect(d, VC_ERR_UNSUPPORTED, "config.json", "time_step_limit");
    d = fresh("lfm2_bias");
    write_text(d, "config.json", "{\"model_type\": \"lfm2\", \"vocab_size\": 8, \"hidden_size\": 8,"
               " \"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"conv_bias\": true}");
    expect(d, VC_ERR_UNSUPPORTED, "config.json", "conv_bias");
    d = fresh("gdn_type");
    write_text(d, "config.json", "{\"model_type\": \"qwen3_5_text\", \"vocab_size\": 8, \"hidden_size\": 8,"
               " \"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"layer_types\": [\"sliding_attention\"]}");
    expect(d, VC_ERR_FORMAT, "config.json", "layer_types[0]");

    /* OLMo-hybrid without attention layers, Kimi-Linear's softmax router, MiniMax's attn_type_list of strings, Jamba's
     * dt rank and state size, Mamba's projection biases */
    d = fresh("olmo_all_linear");
    write_text(d, "config.json", "{\"model_type\": \"olmo_hybrid\", \"vocab_size\": 8, \"hidden_size\": 8,"
               " \"num_hidden_layers\": 2, \"num_attention_heads\": 2, \"layer_types\": [\"linear_attention\","
               " \"linear_attention\"]}");
    expect(d, VC_ERR_FORMAT, "config.json", "full_attention");
    d = fresh("kimi_router");
    write_text(d, "config.json", "{\"model_type\": \"kimi_linear\", \"vocab_size\": 8, \"hidden_size\": 8,"
               " \"num_hidden_layers\": 2, \"num_attention_heads\": 2, \"kv_lora_rank\": 4, \"qk_nope_head_dim\": 4,"
               " \"qk_rope_head_dim\": 2, \"v_head_dim\": 4, \"num_experts\": 4, \"num_experts_per_token\": 2,"
               " \"moe_router_activation_func\": \"softmax\"}");
    expect(d, VC_ERR_UNSUPPORTED, "config.json", "moe_router_activation_func");
    d = fresh("minimax_types");
    write_text(d, "config.json", "{\"model_type\": \"minimax\", \"vocab_size\": 8, \"hidden_size\": 8,"
               " \"num_hidden_layers\": 2, \"num_attention_heads\": 2, \"attn_type_list\": [\"lightning\", 1]}");
    expect(d, VC_ERR_FORMAT, "config.json", "attn_type_list");
    d = fresh("jamba_rank");
    write_text(d, "config.json", "{\"model_type\": \"jamba\", \"vocab_size\": 8, \"hidden_size\": 8,"
               " \"num_hidden_layers\": 2, \"num_attention_heads\": 2, \"mamba_dt_rank\": \"wide\"}");
    expect(d, VC_ERR_FORMAT, "config.json", "mamba_dt_rank");
    d = fresh("jamba_state");
    write_text(d, "config.json", "{\"model_type\": \"jamba\", \"vocab_size\": 8, \"hidden_size\": 8,"
               " \"num_hidden_layers\": 2, \"num_attention_heads\": 2, \"mamba_d_state\": 100}");
    expect(d, VC_ERR_FORMAT, "config.json", "mamba_d_state");
    d = fresh("mamba_bias");
    write_text(d, "config.json", "{\"model_type\": \"mamba\", \"vocab_size\": 8, \"hidden_size\": 8,"
               " \"num_hidden_layers\": 2, \"use_bias\": true}");
    expect(d, VC_ERR_UNSUPPORTED, "config.json", "use_bias");

    /* Gemma 4: attention without a causal mask, a KV-sharing layer with no earlier layer of its type, an MoE block
     * without its top-k, full layers' kv heads that do not divide the heads */
    d = fresh("gemma4_bidir");
    write_text(d, "config.json", "{\"model_type\": \"gemma4_text\", \"vocab_size\": 8, \"hidden_size\": 8,"
               " \"num_hidden_layers\": 2, \"num_attention_heads\": 2, \"use_bidirectional_attention\": \"all\"}");
    expect(d, VC_ERR_UNSUPPORTED, "config.json", "use_bidirectional_attention");
    d = fresh("gemma4_share");
    write_text(d, "config.json", "{\"model_type\": \"gemma4_text\", \"vocab_size\": 8, \"hidden_size\": 8,"
               " \"num_hidden_layers\": 3, \"num_attention_heads\": 2, \"head_dim\": 4, \"global_head_dim\": 8,"
               " \"sliding_window\": 2, \"num_kv_shared_layers\": 2,"
               " \"layer_types\": [\"full_attention\", \"sliding_attention\", \"full_attention\"]}");
    expect(d, VC_ERR_FORMAT, "config.json", "num_kv_shared_layers");
    d = fresh("gemma4_moe");
    write_text(d, "config.json", "{\"model_type\": \"gemma4_text\", \"vocab_size\": 8, \"hidden_size\": 8,"
               " \"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"enable_moe_block\": true, \"num_experts\": 4,"
               " \"moe_intermediate_size\": 4}");
    expect(d, VC_ERR_FORMAT, "config.json", "top_k_experts");
    d = fresh("gemma4_kv");
    write_text(d, "config.json", "{\"model_type\": \"gemma4_text\", \"vocab_size\": 8, \"hidden_size\": 8,"
               " \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"head_dim\": 2, \"global_head_dim\": 4,"
               " \"attention_k_eq_v\": true, \"num_global_key_value_heads\": 3}");
    expect(d, VC_ERR_FORMAT, "config.json", "kv heads");

    d = fresh("dtype");
    write_text(d, "config.json", "{\"model_type\": \"llama\", \"torch_dtype\": \"int4\", \"vocab_size\": 8, \"hidden_size\": 8,"
                                 "\"num_hidden_layers\": 1, \"num_attention_heads\": 2}");
    expect(d, VC_ERR_UNSUPPORTED, "config.json", "int4");

    d = fresh("rope");
    write_text(d, "config.json", "{\"model_type\": \"llama\", \"vocab_size\": 8, \"hidden_size\": 8, \"num_hidden_layers\": 1,"
                                 "\"num_attention_heads\": 2, \"rope_scaling\": {\"rope_type\": \"warp\", \"factor\": 2}}");
    expect(d, VC_ERR_UNSUPPORTED, "config.json", "warp");
    d = fresh("rope_huge"); /* a factor that would make the frequencies inf or 0 */
    write_text(d, "config.json", "{\"model_type\": \"llama\", \"vocab_size\": 8, \"hidden_size\": 8, \"num_hidden_layers\": 1,"
                                 "\"num_attention_heads\": 2, \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 1e308}}");
    expect(d, VC_ERR_ARG, "config.json", "factor 1e+308");

    d = fresh("heads");
    write_text(d, "config.json", "{\"model_type\": \"llama\", \"vocab_size\": 8, \"hidden_size\": 8, \"num_hidden_layers\": 1,"
                                 "\"num_attention_heads\": 4, \"num_key_value_heads\": 3}");
    expect(d, VC_ERR_FORMAT, "config.json", "num_key_value_heads");

    /* an image-text checkpoint: its text_config is the model */
    d = fresh("mm_notext");
    write_text(d, "config.json", "{\"model_type\": \"gemma3\", \"vision_config\": {}}");
    expect(d, VC_ERR_MISSING, "config.json", "text_config");
    d = fresh("mm_wrongtext");
    write_text(d, "config.json", "{\"model_type\": \"gemma3\", \"text_config\": {\"model_type\": \"llama\", \"vocab_size\": 8,"
                                 "\"hidden_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 2}}");
    expect(d, VC_ERR_UNSUPPORTED, "config.json", "llama");
    d = fresh("mm_badtext");
    write_text(d, "config.json", "{\"model_type\": \"gemma3\", \"text_config\": {\"vocab_size\": 8, \"hidden_size\": 8,"
                                 "\"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"sliding_window_pattern\": 0}}");
    expect(d, VC_ERR_FORMAT, "text_config", "sliding_window_pattern");

    /* found by fuzzing config.json: a negative intermediate_size overflowed the weight arena (heap overflow),
     * negative or huge sizes wrapped the allocation or overflowed int64, out-of-range numbers were cast to int */
    static const struct { const char *name, *extra, *needle; } bad[] = {
        { "inter_neg", "\"intermediate_size\": -1", "intermediate_size is -1" },
        { "head_neg", "\"head_dim\": -64", "head_dim is -64" },
        { "head_huge", "\"head_dim\": 9007199254740992", "head_dim is 9007199254740992" },
        { "hidden_huge", "\"hidden_size\": 9007199254740992", "hidden_size is 9007199254740992" },
        { "vocab_huge", "\"vocab_size\": 9007199254740992", "vocab_size is 9007199254740992" },
        { "heads_huge", "\"num_attention_heads\": 9007199254740992, \"num_key_value_heads\": 1", "num_attention_heads" },
        { "labels_huge", "\"architectures\": [\"LlamaForSequenceClassification\"], \"num_labels\": 9007199254740992", "num_labels" },
        { "eos_huge", "\"eos_token_id\": 1e300", "eos_token_id" },
        { "eos_neg", "\"eos_token_id\": [2, -1]", "eos_token_id" },
        { "bos_huge", "\"bos_token_id\": 9007199254740992", "bos_token_id" },
        { "window_huge", "\"sliding_window\": 1e300", "sliding_window" },
        { "rot_neg", "\"partial_rotary_factor\": -0.5", "partial_rotary_factor" },
        { "rot_huge", "\"partial_rotary_factor\": 1e300", "partial_rotary_factor" },
        { "maxpos_neg", "\"max_position_embeddings\": -1", "max_position_embeddings" },
        { "eps_neg", "\"rms_norm_eps\": -1", "epsilon" },
        { "quant_block", "\"quantization_config\": {\"quant_method\": \"fp8\", \"weight_block_size\": [0, 128]}",
          "weight_block_size[0]" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[512];
        /* the bad key comes last: a repeated key's last value counts, as in Python's json */
        snprintf(text, sizeof text, "{\"model_type\": \"llama\", \"vocab_size\": 8, \"hidden_size\": 8, "
                 "\"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"intermediate_size\": 16, %s}", bad[i].extra);
        d = fresh(bad[i].name);
        write_text(d, "config.json", text);
        expect(d, VC_ERR_FORMAT, "config.json", bad[i].needle);
    }

    d = fresh("quant_awq"); /* quantized checkpoints other than block-scaled fp8 and mxfp4 */
    write_text(d, "config.json", "{\"model_type\": \"llama\", \"vocab_size\": 8, \"hidden_size\": 8, \"num_hidden_layers\": 1,"
                                 "\"num_attention_heads\": 2, \"quantization_config\": {\"quant_method\": \"awq\", \"bits\": 4}}");
    expect(d, VC_ERR_UNSUPPORTED, "config.json", "'awq'");
    d = fresh("oai_limit"); /* gpt-oss's SwiGLU with other constants */
    write_text(d, "config.json", "{\"model_type\": \"gpt_oss\", \"vocab_size\": 8, \"hidden_size\": 8, \"num_hidden_layers\": 1,"
                                 "\"num_attention_heads\": 2, \"num_local_experts\": 2, \"swiglu_limit\": 5.0}");
    expect(d, VC_ERR_UNSUPPORTED, "config.json", "swiglu_limit 5");
    d = fresh("fp8_scale"); /* a block scale of the wrong shape */
    copy_own(d, "minimax_m2_fp8", NULL, "model.layers.0.self_attn.q_proj.weight_scale_inv");
    expect(d, VC_ERR_SHAPE, "model.layers.0.self_attn.q_proj.weight_scale_inv", "[16, 16]");
    d = fresh("fp8_noscale"); /* a float8 weight of an fp8 checkpoint without its scales: refused, not taken as 1 */
    copy_own(d, "minimax_m2_fp8", "model.layers.1.self_attn.k_proj.weight_scale_inv", NULL);
    expect(d, VC_ERR_MISSING, "model.layers.1.self_attn.k_proj.weight", "_scale_inv");
    d = fresh("mxfp4_scales"); /* MXFP4 blocks without their scales */
    copy_own(d, "gpt_oss_mxfp4", "model.layers.1.mlp.experts.down_proj_scales", NULL);
    expect(d, VC_ERR_FORMAT, "model.layers.1.mlp.experts.down_proj_blocks", "not used");
    d = fresh("mxfp4_shape");
    copy_own(d, "gpt_oss_mxfp4", NULL, "model.layers.0.mlp.experts.gate_up_proj_scales");
    expect(d, VC_ERR_SHAPE, "model.layers.0.mlp.experts.gate_up_proj_scales", "MXFP4");

    d = fresh("nockpt");
    write_text(d, "config.json", "{\"model_type\": \"llama\", \"vocab_size\": 8, \"hidden_size\": 8, \"num_hidden_layers\": 1,"
                                 "\"num_attention_heads\": 2, \"intermediate_size\": 16}");
    expect(d, VC_ERR_IO, "nockpt", NULL);

    d = fresh("missing");
    copy_ckpt(d, "model.layers.1.self_attn.k_proj.weight", NULL, 0);
    expect(d, VC_ERR_MISSING, "model.layers.1.self_attn.k_proj.weight", NULL);

    d = fresh("extra");
    copy_ckpt(d, NULL, "model.layers.0.mystery.weight", 0);
    expect(d, VC_ERR_FORMAT, "model.layers.0.mystery.weight", "not used");

    d = fresh("shape");
    copy_ckpt(d, NULL, NULL, 64);
    expect(d, VC_ERR_SHAPE, "model.layers.0.mlp.up_proj.weight", "[64,128]");

    d = fresh("truncated");
    copy_ckpt(d, NULL, NULL, 0);
    char p[512];
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    CHECK(truncate(p, 5000) == 0);
    expect(d, VC_ERR_FORMAT, "model.safetensors", NULL);

    /* DeepSeek Sparse Attention: longer sequences than index_topk run (each query keeps its 5 best keys); malformed
     * indexer settings are refused by key */
    static const char *DSA = "{\"model_type\": \"glm_moe_dsa\", \"vocab_size\": 16, \"hidden_size\": 16,"
        " \"num_hidden_layers\": 2, \"num_attention_heads\": 2, \"intermediate_size\": 16, \"kv_lora_rank\": 8,"
        " \"q_lora_rank\": %d, \"qk_rope_head_dim\": 4, \"qk_nope_head_dim\": 4, \"v_head_dim\": 4,"
        " \"n_routed_experts\": 4, \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 8,"
        " \"first_k_dense_replace\": 1, \"index_topk\": 5, \"index_n_heads\": 4, \"index_head_dim\": %d%s}";
    static const struct { int qr, dim; const char *extra, *needle; } DSA_BAD[] = {
        { 8, 8, ", \"indexer_types\": [\"full\"]", "indexer_types must list 2 layers" },
        { 8, 8, ", \"indexer_types\": [\"shared\", \"full\"]", "layer 0 cannot reuse" },
        { 8, 8, ", \"indexer_types\": [\"full\", \"half\"]", "indexer_types[1] must be" },
        { 8, 8, ", \"index_topk_pattern\": \"FX\"", "index_topk_pattern[1] must be" },
        { 8, 2, "", "index_head_dim (2) is narrower than qk_rope_head_dim (4)" },
        { 0, 8, "", "q_lora_rank must be set" },
        { 8, 8, ", \"index_topk\": 0", "index_topk" },
    };
    char cfgp[512], text[1024], what[64];
    for (size_t i = 0; i < sizeof DSA_BAD / sizeof *DSA_BAD; i++) {
        snprintf(text, sizeof text, DSA, DSA_BAD[i].qr, DSA_BAD[i].dim, DSA_BAD[i].extra);
        snprintf(what, sizeof what, "DSA config %zu", i);
        expect_refused(text, DSA_BAD[i].needle, what);
    }
    snprintf(text, sizeof text, DSA, 8, 8, ", \"indexer_types\": [\"full\", \"shared\"]");
    config_dir("dsa", text, cfgp, sizeof cfgp);
    vc_model *dm = NULL;
    CHECK_OK(vc_model_init_random(cfgp, 3, &dm));
    for (int len = 5; dm && len <= 9; len += 4) {
        int32_t ids[9] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
        int64_t cu[2] = { 0, len };
        vc_batch b = { .n_seq = 1, .cu_seqlens = cu, .ids = ids };
        vc_graph *g = vc_graph_new();
        vc_tensor *h = vc_model_forward(dm, g, &b, NULL);
        CHECK_MSG(h != NULL, "%d tokens with index_topk 5: %s", len, vc_last_error());
        vc_graph_free(g);
    }
    vc_model_free(dm);
    model_type_errors();
    family_errors();

    /* the CLI prints one line and exits non-zero */
    const char *bin = getenv("VERLC_BIN");
    if (bin) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "%s check %s/missing > %s/out.txt 2>&1", bin, base, base);
        int rc = system(cmd);
        CHECK(rc != 0 && WIFEXITED(rc));
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", base);
    CHECK(system(cmd) == 0);
    return vc_test_done();
}
