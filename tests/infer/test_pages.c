/* Rollout engine: n samples share the prompt's pages (copy-on-write), the prompt is computed once,
 * clear errors for bad inputs, stop strings, max_new_tokens 0, sampling knobs. */
#include "vc_test.h"
#include "verlc/rng.h"
#include "verlc/rollout.h"
#include "verlc/tokenizer.h"
#include <unistd.h>

static vc_model *make_model(int vocab) {
    char cfg[1024], path[] = "/tmp/vc_rollout_cfgXXXXXX";
    snprintf(cfg, sizeof cfg,
             "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 32,"
             " \"intermediate_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
             " \"num_key_value_heads\": 4, \"vocab_size\": %d, \"max_position_embeddings\": 512,"
             " \"rms_norm_eps\": 1e-6, \"rope_theta\": 10000.0, \"tie_word_embeddings\": false,"
             " \"hidden_act\": \"silu\", \"bos_token_id\": 1, \"eos_token_id\": 2, \"torch_dtype\": \"float32\"}",
             vocab);
    int fd = mkstemp(path);
    if (fd < 0) return NULL;
    (void)!write(fd, cfg, strlen(cfg));
    close(fd);
    vc_model *m = NULL;
    if (vc_model_init_random(path, 3, &m)) fprintf(stderr, "init: %s\n", vc_last_error());
    unlink(path);
    return m;
}

static vc_status gen(vc_model *m, vc_rollout_opts o, const vc_rollout_request *rq, int nr, const vc_sampling *sp,
                     vc_rollout_sample **out, int *n, vc_rollout_stats *stats) {
    vc_rollout_engine *e = NULL;
    vc_status st = vc_rollout_new(m, &o, &e);
    if (!st) st = vc_rollout_generate(e, rq, nr, sp, out, n);
    if (e && stats) vc_rollout_last_stats(e, stats);
    vc_rollout_free(e);
    return st;
}

static void test_sharing(vc_model *m) {
    int32_t p[70];
    for (int t = 0; t < 70; t++) p[t] = 3 + (int32_t)vc_rng_below(200, 1, 0, 0, (uint64_t)t);
    vc_sampling sp = { .temperature = 1.0f, .top_p = 1.0f, .max_new_tokens = 4, .seed = 5 };
    vc_rollout_opts o = { .kv_budget_bytes = 16e6, .page_tokens = 16, .max_batch = 8 };
    for (int aligned = 0; aligned < 2; aligned++) {
        int len = aligned ? 64 : 70;
        vc_rollout_request rq = { p, len, 4, 0 };
        vc_rollout_sample *out = NULL;
        int n = 0;
        vc_rollout_stats st;
        CHECK_OK(gen(m, o, &rq, 1, &sp, &out, &n, &st));
        /* 64 tokens: 4 shared pages + one new page per sample; 70: 5 shared pages, 3 copies of the last
         * partial page (the 4th sample writes into it in place) */
        printf("prompt %d, 4 samples: %lld pages at peak (unshared: %d), %lld prompt tokens computed\n", len,
               (long long)st.peak_pages, 4 * ((len + 4 + 15) / 16), (long long)st.prefill_tokens);
        CHECK(st.peak_pages == 8);
        CHECK(st.prefill_tokens == len);
        CHECK(st.decode_tokens == 4 * 3);
        CHECK(n == 4);
        vc_rollout_samples_free(out, n);
    }
}

static void test_errors(vc_model *m) {
    int32_t p[100] = { 0 };
    vc_sampling sp = { .temperature = 1.0f, .top_p = 1.0f, .max_new_tokens = 20, .seed = 5 };
    vc_rollout_opts o = { .page_tokens = 16, .max_batch = 8 };
    size_t page = 16 * 2 * 2 * 32 * 4; /* tokens * layers * (k + v) * width * 4 bytes */
    o.kv_budget_bytes = 5.0 * (double)page; /* 80 tokens */
    vc_rollout_request rq = { p, 100, 1, 0 };
    vc_rollout_sample *out = NULL;
    int n = 0;
    vc_status st = gen(m, o, &rq, 1, &sp, &out, &n, NULL);
    CHECK(st == VC_ERR_ARG);
    CHECK_MSG(strstr(vc_last_error(), "needs 8 KV pages") && strstr(vc_last_error(), "holds 5 pages"), "%s", vc_last_error());
    printf("too long: %s\n", vc_last_error());
    rq.prompt_len = 50; /* 50 + 20 = 70 tokens: fits alone */
    CHECK_OK(gen(m, o, &rq, 1, &sp, &out, &n, NULL));
    vc_rollout_samples_free(out, n);
    p[3] = 5000;
    CHECK(gen(m, o, &rq, 1, &sp, &out, &n, NULL) == VC_ERR_ARG && strstr(vc_last_error(), "outside the vocabulary"));
    p[3] = 7;
    vc_sampling bad = sp;
    bad.temperature = 0;
    CHECK(gen(m, o, &rq, 1, &bad, &out, &n, NULL) == VC_ERR_ARG && strstr(vc_last_error(), "temperature"));
    bad = sp;
    bad.top_p = 0;
    CHECK(gen(m, o, &rq, 1, &bad, &out, &n, NULL) == VC_ERR_ARG);
    const char *stop[1] = { "x" };
    bad = sp;
    bad.stop = stop;
    bad.n_stop = 1;
    CHECK(gen(m, o, &rq, 1, &bad, &out, &n, NULL) == VC_ERR_ARG && strstr(vc_last_error(), "tokenizer"));
    rq.prompt_len = 0;
    CHECK(gen(m, o, &rq, 1, &sp, &out, &n, NULL) == VC_ERR_ARG && strstr(vc_last_error(), "empty prompt"));
    rq.prompt_len = 10;
    rq.n_samples = 0;
    CHECK(gen(m, o, &rq, 1, &sp, &out, &n, NULL) == VC_ERR_ARG);
    /* max_new_tokens 0: empty responses */
    rq.n_samples = 2;
    sp.max_new_tokens = 0;
    CHECK_OK(gen(m, o, &rq, 1, &sp, &out, &n, NULL));
    CHECK(n == 2 && out && out[1].n_tokens == 0 && out[1].finish == VC_FINISH_LENGTH);
    vc_rollout_samples_free(out, n);
}

/* top-k 1 is greedy; min-p close to 1 keeps only the most likely token */
static void test_knobs(vc_model *m) {
    int32_t p[9] = { 5, 6, 7, 8, 9, 10, 11, 12, 13 };
    vc_rollout_request rq = { p, 9, 2, 4 };
    vc_rollout_opts o = { .kv_budget_bytes = 8e6 };
    vc_sampling g = { .greedy = 1, .max_new_tokens = 8 };
    vc_rollout_sample *a = NULL, *b = NULL, *c = NULL;
    int n = 0;
    CHECK_OK(gen(m, o, &rq, 1, &g, &a, &n, NULL));
    vc_sampling k1 = { .temperature = 0.7f, .top_k = 1, .top_p = 1.0f, .max_new_tokens = 8, .seed = 9 };
    CHECK_OK(gen(m, o, &rq, 1, &k1, &b, &n, NULL));
    vc_sampling mp = { .temperature = 0.05f, .top_p = 1.0f, .min_p = 0.999f, .max_new_tokens = 8, .seed = 9 };
    CHECK_OK(gen(m, o, &rq, 1, &mp, &c, &n, NULL));
    if (a && b && c) {
        for (int i = 0; i < 2; i++) {
            CHECK(!memcmp(a[0].tokens, b[i].tokens, 8 * 4) && !memcmp(a[0].tokens, c[i].tokens, 8 * 4));
            for (int t = 0; t < 8; t++) {
                CHECK(b[i].logp_sampled[t] == 0.0f && c[i].logp_sampled[t] == 0.0f);
                CHECK(a[0].logp[t] == b[i].logp[t]);
            }
        }
    }
    vc_rollout_samples_free(a, n);
    vc_rollout_samples_free(b, n);
    vc_rollout_samples_free(c, n);
}

static void test_stop(void) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/fixtures/tokenizers/llama2", vc_test_shared());
    vc_tokenizer *tk = NULL;
    CHECK_OK(vc_tokenizer_load(dir, &tk));
    vc_model *m = tk ? make_model(vc_tokenizer_vocab_size(tk)) : NULL;
    if (!m) {
        vc_tokenizer_free(tk);
        return;
    }
    int32_t p[4] = { 1, 450, 4996, 17354 };
    vc_rollout_request rq = { p, 4, 1, 0 };
    vc_rollout_opts o = { .kv_budget_bytes = 8e6, .tokenizer = tk };
    vc_sampling sp = { .greedy = 1, .max_new_tokens = 24 };
    vc_rollout_sample *a = NULL, *b = NULL;
    int n = 0;
    CHECK_OK(gen(m, o, &rq, 1, &sp, &a, &n, NULL));
    char *text = NULL, *full = NULL;
    size_t len = 0, flen = 0;
    /* stop at the text of tokens 5..6 of the unstopped response */
    if (a && !vc_tokenizer_decode(tk, a[0].tokens + 5, 2, 1, &text, &len) && len > 0 &&
        !vc_tokenizer_decode(tk, a[0].tokens, (size_t)a[0].n_tokens, 1, &full, &flen)) {
        const char *stop[1] = { text };
        sp.stop = stop;
        sp.n_stop = 1;
        CHECK_OK(gen(m, o, &rq, 1, &sp, &b, &n, NULL));
        const char *at = strstr(full, text);
        char *resp = NULL;
        size_t rl = 0;
        if (b && at && !vc_tokenizer_decode(tk, b[0].tokens, (size_t)b[0].n_tokens, 1, &resp, &rl)) {
            CHECK(b[0].finish == VC_FINISH_STOP);
            CHECK(b[0].n_tokens <= 7 && strstr(resp, text) != NULL);
            CHECK(!memcmp(a[0].tokens, b[0].tokens, (size_t)b[0].n_tokens * 4));
            printf("stop string \"%s\": %lld tokens \"%s\"\n", text, (long long)b[0].n_tokens, resp);
        }
        free(resp);
    }
    free(text);
    free(full);
    vc_rollout_samples_free(a, 1);
    vc_rollout_samples_free(b, 1);
    vc_model_free(m);
    vc_tokenizer_free(tk);
}

int main(void) {
    vc_model *m = make_model(256);
    CHECK(m != NULL);
    if (!m) return vc_test_done();
    test_sharing(m);
    test_errors(m);
    test_knobs(m);
    vc_model_free(m);
    test_stop();
    return vc_test_done();
}
