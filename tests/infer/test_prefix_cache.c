/* The rollout engine's prefix cache (vLLM's automatic prefix caching, verl's rollout.enable_prefix_caching):
 * requests that share a prefix reuse its full KV pages, within a call and, in a session, across calls (a
 * multi-turn conversation's next turn starts with the last turn's prompt and response); a tight pool
 * evicts cached pages least recently used first and preempts. Every case must give the same tokens and
 * log-probs, bit for bit, as the engine without the cache, while computing fewer prompt tokens. */
#include "vc_test.h"
#include "verlc/pool.h"
#include "verlc/rng.h"
#include "verlc/rollout.h"
#include <unistd.h>

#define PT 16

static vc_model *make_model(void) {
    char path[] = "/tmp/vc_prefix_cfgXXXXXX";
    const char *cfg = "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 32,"
                      " \"intermediate_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
                      " \"num_key_value_heads\": 2, \"vocab_size\": 300, \"max_position_embeddings\": 1024,"
                      " \"rms_norm_eps\": 1e-6, \"rope_theta\": 10000.0, \"tie_word_embeddings\": false,"
                      " \"hidden_act\": \"silu\", \"bos_token_id\": 1, \"eos_token_id\": 2, \"torch_dtype\": \"float32\"}";
    int fd = mkstemp(path);
    if (fd < 0) return NULL;
    (void)!write(fd, cfg, strlen(cfg));
    close(fd);
    vc_model *m = NULL;
    if (vc_model_init_random(path, 11, &m)) fprintf(stderr, "init: %s\n", vc_last_error());
    unlink(path);
    return m;
}

static int same(const vc_rollout_sample *a, const vc_rollout_sample *b, int n) {
    for (int i = 0; i < n; i++)
        if (a[i].n_tokens != b[i].n_tokens || memcmp(a[i].tokens, b[i].tokens, sizeof(int32_t) * (size_t)a[i].n_tokens) ||
            memcmp(a[i].logp, b[i].logp, sizeof(float) * (size_t)a[i].n_tokens) ||
            memcmp(a[i].logp_sampled, b[i].logp_sampled, sizeof(float) * (size_t)a[i].n_tokens) || a[i].finish != b[i].finish)
            return 0;
    return 1;
}

static vc_rollout_sample *run(vc_rollout_engine *e, const vc_rollout_request *rq, int nr, const vc_sampling *sp, int *n,
                              vc_rollout_stats *st) {
    vc_rollout_sample *out = NULL;
    CHECK_OK(vc_rollout_generate(e, rq, nr, sp, &out, n));
    vc_rollout_last_stats(e, st);
    return out;
}

/* 6 prompts: a shared 50-token head (3 full pages) and their own tails; 2 samples each */
static void test_within_call(vc_model *m, double budget, const char *what) {
    static int32_t p[6][90];
    vc_rollout_request rq[6];
    for (int r = 0; r < 6; r++) {
        for (int t = 0; t < 90; t++) p[r][t] = 3 + (int32_t)vc_rng_below(290, t < 50 ? 0 : 1 + r, 0, 0, (uint64_t)t);
        rq[r] = (vc_rollout_request){ p[r], 60 + 5 * r, 2, (uint64_t)r };
    }
    vc_sampling sp = { .temperature = 1.0f, .top_p = 1.0f, .max_new_tokens = 24, .seed = 9 };
    vc_rollout_opts on = { .kv_budget_bytes = budget, .page_tokens = PT, .max_batch = 4, .prefill_chunk = 64 }, off = on;
    off.no_prefix_cache = 1;
    vc_rollout_engine *a = NULL, *b = NULL;
    CHECK_OK(vc_rollout_new(m, &on, &a));
    CHECK_OK(vc_rollout_new(m, &off, &b));
    int na = 0, nb = 0;
    vc_rollout_stats sa, sb;
    vc_rollout_sample *oa = run(a, rq, 6, &sp, &na, &sa), *ob = run(b, rq, 6, &sp, &nb, &sb);
    CHECK_MSG(na == 12 && nb == 12 && same(oa, ob, 12), "%s: outputs differ with the prefix cache", what);
    printf("%s: %lld prompt tokens computed with the cache (%lld reused), %lld without; preemptions %lld / %lld\n",
           what, (long long)sa.prefill_tokens, (long long)sa.prefix_hit_tokens, (long long)sb.prefill_tokens,
           (long long)sa.preemptions, (long long)sb.preemptions);
    CHECK(sb.prefix_hit_tokens == 0);
    CHECK_MSG(sa.prefix_hit_tokens >= 3 * PT && sa.prefill_tokens < sb.prefill_tokens, "%s: %lld reused, %lld vs %lld computed", what,
              (long long)sa.prefix_hit_tokens, (long long)sa.prefill_tokens, (long long)sb.prefill_tokens);
    vc_rollout_samples_free(oa, na);
    vc_rollout_samples_free(ob, nb);
    vc_rollout_free(a);
    vc_rollout_free(b);
}

/* three turns of 3 conversations x 1 sample: each turn's prompt is the last one + its response + a tool
 * reply; in a session the engine reuses the last turn's pages, without one it computes them again */
static void test_session(vc_model *m) {
    vc_rollout_opts on = { .kv_budget_bytes = 4e6, .page_tokens = PT, .max_batch = 8 }, off = on;
    off.no_prefix_cache = 1;
    vc_rollout_engine *a = NULL, *b = NULL;
    CHECK_OK(vc_rollout_new(m, &on, &a));
    CHECK_OK(vc_rollout_new(m, &off, &b));
    vc_rollout_session(a, 1);
    int32_t conv[3][400];
    int64_t len[3];
    for (int c = 0; c < 3; c++) {
        len[c] = 30 + 7 * c;
        for (int t = 0; t < len[c]; t++) conv[c][t] = 3 + (int32_t)vc_rng_below(290, 50 + c, 0, 0, (uint64_t)t);
    }
    vc_sampling sp = { .temperature = 1.0f, .top_p = 1.0f, .max_new_tokens = 40, .seed = 4 };
    int64_t reused = 0, prior = 0;
    for (int turn = 0; turn < 3; turn++) {
        vc_rollout_request rq[3];
        for (int c = 0; c < 3; c++) rq[c] = (vc_rollout_request){ conv[c], len[c], 1, (uint64_t)(c + 16 * turn) };
        int na = 0, nb = 0;
        vc_rollout_stats sa, sb;
        vc_rollout_sample *oa = run(a, rq, 3, &sp, &na, &sa), *ob = run(b, rq, 3, &sp, &nb, &sb);
        CHECK_MSG(same(oa, ob, 3), "turn %d: outputs differ with the session's cache", turn);
        printf("turn %d: %lld prompt tokens computed in the session (%lld reused), %lld without\n", turn,
               (long long)sa.prefill_tokens, (long long)sa.prefix_hit_tokens, (long long)sb.prefill_tokens);
        if (turn > 0) /* every full page of the last turn's conversations */
            CHECK_MSG(sa.prefix_hit_tokens >= prior, "turn %d: %lld tokens reused, the last turn left %lld in full pages",
                      turn, (long long)sa.prefix_hit_tokens, (long long)prior);
        reused += sa.prefix_hit_tokens;
        prior = 0;
        for (int c = 0; c < 3; c++) { /* the response and a 9-token "tool reply" join the conversation */
            memcpy(conv[c] + len[c], oa[c].tokens, sizeof(int32_t) * (size_t)oa[c].n_tokens);
            len[c] += oa[c].n_tokens;
            prior += (len[c] - 1) / PT * PT;
            for (int t = 0; t < 9; t++) conv[c][len[c]++] = 3 + (int32_t)vc_rng_below(290, 99, (uint64_t)c, (uint64_t)turn, (uint64_t)t);
        }
        vc_rollout_samples_free(oa, na);
        vc_rollout_samples_free(ob, nb);
    }
    CHECK(reused > 0);
    vc_rollout_session(a, 0);
    vc_rollout_free(a);
    vc_rollout_free(b);
}

int main(void) {
    vc_set_threads(1);
    vc_model *m = make_model();
    CHECK(m != NULL);
    if (!m) return vc_test_done();
    test_within_call(m, 4e6, "roomy pool");
    /* 13 pages of 16 tokens: cached pages are evicted and sequences preempted */
    test_within_call(m, 13.0 * PT * 2 * 2 * 16 * 4, "tight pool");
    test_session(m);
    vc_model_free(m);
    return vc_test_done();
}
