/* Reward models (reward_model.enable): a *ForSequenceClassification checkpoint loads with its score head
 * and no LM head; its per-token scores and the score at each row's last token must match transformers'
 * (tests/fixtures/rm/qwen2_rm, made by tools/fixtures/make_fixture.py qwen2_rm) for packed rows of
 * different lengths. The trainer's scoring: with input_tokenizer null the actor's tokens are scored;
 * with it set the chat is re-rendered through the reward model's own template (response decoded, EOS
 * text removed) and truncated at reward_model.max_length, and the score must equal the reward model's
 * score of exactly that text. A causal LM named as reward model is refused. A critic loaded from a
 * reward model starts with its score head as value head (verl's token-classification critic). */
#include "../../src/rl/demo_internal.h"
#include "../../src/rl/trainer_internal.h"
#include "rl_demo_util.h"
#include "verlc/chat_template.h"
#include "verlc/device.h"
#include "verlc/json.h"
#include "verlc/ops.h"
#include "verlc/tokenizer.h"
#include <cjson/cJSON.h>
#include <unistd.h>

static char dir[128];

/* a batch whose rows are the given token sequences (as prompts: no response part) */
static void rows_batch(rl_batch *b, int n, int32_t *const *ids, const int64_t *len) {
    int64_t tot = 0;
    for (int i = 0; i < n; i++) tot += len[i];
    CHECK_OK(rl_batch_alloc(b, n, 1, tot));
    for (int i = 0; i < n; i++) {
        memcpy(b->ids + b->cu[i], ids[i], sizeof(int32_t) * (size_t)len[i]);
        b->cu[i + 1] = b->cu[i] + len[i];
        b->plen[i] = len[i];
        b->rlen[i] = 0;
    }
}

static void test_golden(void) {
    vc_model *m = NULL;
    CHECK_OK(vc_model_load("tests/fixtures/rm/qwen2_rm", &m));
    cJSON *ref = NULL;
    vc_json_load_file("tests/fixtures/rm/qwen2_rm/reference_rm.json", &ref);
    CHECK_MSG(m && ref, "tests/fixtures/rm/qwen2_rm: model or reference_rm.json missing");
    if (!m || !ref) return;
    CHECK(vc_model_cfg(m)->n_labels == 1);
    const cJSON *ids = cJSON_GetObjectItem(ref, "input_ids"), *sc = cJSON_GetObjectItem(ref, "scores");
    const cJSON *tok = cJSON_GetObjectItem(ref, "token_scores");
    int n = cJSON_GetArraySize(ids);
    int32_t *rows[8];
    int64_t len[8];
    for (int i = 0; i < n && i < 8; i++) {
        const cJSON *r = cJSON_GetArrayItem(ids, i);
        len[i] = cJSON_GetArraySize(r);
        rows[i] = vc_malloc(sizeof(int32_t) * (size_t)len[i]);
        for (int j = 0; j < len[i]; j++) rows[i][j] = cJSON_GetArrayItem(r, j)->valueint;
    }
    rl_batch b;
    rows_batch(&b, n, rows, len);
    vc_graph *g = vc_graph_new();
    float got[8];
    CHECK_OK(rl_batch_last_scores(m, g, &b, 0, got));
    for (int i = 0; i < n; i++) {
        double want = cJSON_GetArrayItem(sc, i)->valuedouble;
        CHECK_MSG(fabs(got[i] - want) < 2e-5 * (1 + fabs(want)), "row %d score %.7f, transformers %.7f", i, got[i], want);
    }
    /* every token through the head, packed */
    vc_graph_reset(g);
    vc_graph_set_grad(g, 0);
    vc_batch vb = { n, b.cu, b.ids };
    vc_tensor *h = vc_model_forward(m, g, &vb, NULL), *s = h ? vc_model_score(m, g, h) : NULL;
    float *hs = NULL;
    CHECK(s && !rl_host_copy(g, s, &hs));
    double worst = 0;
    for (int i = 0; hs && i < n; i++)
        for (int j = 0; j < len[i]; j++)
            worst = fmax(worst, fabs(hs[b.cu[i] + j] - cJSON_GetArrayItem(cJSON_GetArrayItem(tok, i), j)->valuedouble));
    CHECK_MSG(worst < 5e-5, "per-token scores differ from transformers by %g", worst);
    /* no LM head: log-probs are refused with a message */
    vc_graph_reset(g);
    h = vc_model_forward(m, g, &vb, NULL);
    vc_tensor *lp = NULL;
    vc_status st = h ? vc_model_logprobs(m, g, h, b.ids, &lp, NULL) : VC_ERR_INTERNAL;
    CHECK_MSG(st == VC_ERR_UNSUPPORTED && strstr(vc_last_error(), "no LM head"), "logprobs on a reward model: %s",
              vc_last_error());
    /* a critic started from the reward model: its value head is the score head, so the values of the
     * response tokens (hidden state before each) are transformers' token scores */
    rl_critic cr;
    CHECK_OK(rl_critic_load("tests/fixtures/rm/qwen2_rm", NULL, &cr));
    rl_batch cb;
    int64_t plen = 5, rlen = len[0] - plen;
    CHECK_OK(rl_batch_alloc(&cb, 1, (int)rlen, len[0]));
    memcpy(cb.ids, rows[0], sizeof(int32_t) * (size_t)len[0]);
    cb.cu[1] = len[0];
    cb.plen[0] = plen;
    cb.rlen[0] = rlen;
    CHECK_OK(rl_critic_values(&cr, g, &cb, 0, cb.values));
    worst = 0;
    for (int j = 0; j < rlen; j++)
        worst = fmax(worst, fabs(cb.values[j] - cJSON_GetArrayItem(cJSON_GetArrayItem(tok, 0), (int)(plen - 1 + j))->valuedouble));
    CHECK_MSG(worst < 5e-5, "critic from a reward model: values differ from the score head's by %g", worst);
    rl_batch_free(&cb);
    rl_critic_free(&cr);
    for (int i = 0; i < n; i++) free(rows[i]);
    rl_batch_free(&b);
    vc_graph_free(g);
    cJSON_Delete(ref);
    vc_model_free(m);
}

/* the reward model's score of the token sequence of text (demo tokenizer) */
static double score_text(rl_rm *rm_unused, vc_model *m, vc_tokenizer *tok, vc_graph *g, const char *text, int64_t max) {
    (void)rm_unused;
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK_OK(vc_tokenizer_encode(tok, text, strlen(text), 0, &ids, &n));
    int64_t len = (int64_t)n < max ? (int64_t)n : max;
    rl_batch b;
    rows_batch(&b, 1, &ids, &len);
    float s = NAN;
    CHECK_OK(rl_batch_last_scores(m, g, &b, 0, &s));
    rl_batch_free(&b);
    free(ids);
    return s;
}

static void test_trainer_scoring(void) {
    snprintf(dir, sizeof dir, "/tmp/verlc_rm_%d", (int)getpid());
    demo_model_setup(dir, 3);
    demo_rm_setup(dir, 5);
    char data[300], rmp[300], mp[300];
    snprintf(data, sizeof data, "%s/train.jsonl", dir);
    snprintf(rmp, sizeof rmp, "%s/rm", dir);
    snprintf(mp, sizeof mp, "%s/model", dir);
    static const char ROWS[] = "{\"data_source\":\"x\",\"prompt\":[{\"role\":\"user\",\"content\":\"12+34=\"}]}\n"
                               "{\"data_source\":\"x\",\"prompt\":[{\"role\":\"user\",\"content\":\"7+8=\"}]}\n";
    CHECK_OK(vc_write_file_atomic(data, ROWS, strlen(ROWS)));
    vc_rl_trainer *t = vc_calloc(1, sizeof *t);
    CHECK_OK(vc_tokenizer_load(mp, &t->tok));
    CHECK_OK(vc_chat_template_load(mp, &t->tmpl));
    vc_rl_data_opts o = { .prompt_key = "prompt", .max_prompt_length = 64, .max_samples = -1 };
    CHECK_OK(vc_rl_dataset_load(data, t->tok, t->tmpl, &o, &t->train));
    t->g = vc_graph_new();
    /* responses "46<eos>" and "15" (no EOS: cut at the length limit) */
    static const char *RESP[] = { "46", "15" };
    rl_batch b;
    int64_t tot = t->train->p[0].len + t->train->p[1].len + 5;
    CHECK_OK(rl_batch_alloc(&b, 2, 3, tot));
    for (int i = 0; i < 2; i++) {
        const vc_rl_prompt *p = &t->train->p[i];
        int64_t o2 = b.cu[i];
        memcpy(b.ids + o2, p->ids, sizeof(int32_t) * (size_t)p->len);
        int32_t *r = NULL;
        size_t rn = 0;
        CHECK_OK(vc_tokenizer_encode(t->tok, RESP[i], 2, 0, &r, &rn));
        memcpy(b.ids + o2 + p->len, r, sizeof(int32_t) * rn);
        if (i == 0) b.ids[o2 + p->len + rn++] = 1; /* <eos> */
        free(r);
        b.plen[i] = p->len;
        b.rlen[i] = (int64_t)rn;
        b.prompt[i] = i;
        b.cu[i + 1] = o2 + p->len + (int64_t)rn;
    }
    vc_model *rmm = NULL;
    CHECK_OK(vc_model_load(rmp, &rmm));
    for (int pass = 0; pass < 3; pass++) {
        /* 0: input_tokenizer null (actor tokens); 1: re-rendered; 2: re-rendered, max_length 5 */
        char o1[340], o2[80], o3[64];
        snprintf(o1, sizeof o1, "reward_model.model.path=%s", rmp);
        snprintf(o2, sizeof o2, "reward_model.model.input_tokenizer=%s", pass ? "/some/actor" : "null");
        snprintf(o3, sizeof o3, "reward_model.max_length=%d", pass == 2 ? 5 : 0);
        char *ov[] = { "reward_model.enable=true", o1, o2, o3 };
        vc_config *cfg = NULL;
        CHECK_OK(vc_config_load(NULL, 4, ov, &cfg));
        CHECK_OK(rl_rm_open(cfg, &t->rm));
        /* the memory plan's row length for the reward model: the actor's rows as they are; re-rendered, the longest
         * prompt through the reward model's template plus the response tokens, at least every real row here (the
         * responses are at most 3 tokens), at most max_length */
        int64_t seq = t->train->p[0].len + 3, plen = 0, most = 0;
        CHECK_OK(rl_rm_plan_len(t->rm, t->train, seq, 3, &plen));
        for (int i = 0; i < 2 && pass; i++) {
            char text[64];
            snprintf(text, sizeof text, "%s+%s+", i ? "7+8=" : "12+34=", RESP[i]);
            int32_t *ids = NULL;
            size_t n = 0;
            CHECK_OK(vc_tokenizer_encode(t->tok, text, strlen(text), 0, &ids, &n));
            free(ids);
            most = (int64_t)n > most ? (int64_t)n : most;
        }
        CHECK_MSG(pass == 0 ? plen == seq : pass == 2 ? plen == 5 : plen >= most && plen <= most + 3,
                  "pass %d: the plan's reward-model rows are %lld tokens (actor rows %lld, longest real row %lld)", pass,
                  (long long)plen, (long long)seq, (long long)most);
        float got[2] = { NAN, NAN };
        CHECK_OK(rl_rm_score(t, t->train, &b, got));
        for (int i = 0; i < 2; i++) {
            double want;
            if (pass == 0) {
                int32_t *ids = b.ids + b.cu[i];
                int64_t len = b.cu[i + 1] - b.cu[i];
                rl_batch one;
                rows_batch(&one, 1, &ids, &len);
                float s = NAN;
                CHECK_OK(rl_batch_last_scores(rmm, t->g, &one, 0, &s));
                rl_batch_free(&one);
                want = s;
            } else {
                char text[64];
                snprintf(text, sizeof text, "%s+%s+", i ? "7+8=" : "12+34=", RESP[i]); /* the RM's template */
                want = score_text(t->rm, rmm, t->tok, t->g, text, pass == 2 ? 5 : 1000);
            }
            CHECK_MSG(fabs(got[i] - want) < 1e-5, "pass %d row %d: score %g, want %g", pass, i, got[i], want);
        }
        if (pass == 1) {
            CHECK_MSG(fabs(got[0] - got[1]) > 1e-6, "rows scored alike: %g", got[0]);
            /* the trainer's scoring of a training batch: the reward model's score on the last response token */
            CHECK_OK(rl_score_batch(t, t->train, &b, NULL, NULL));
            for (int i = 0; i < 2; i++)
                CHECK_MSG(b.score[i] == got[i] && b.token_scores[i * b.T + b.rlen[i] - 1] == got[i] &&
                              b.token_scores[i * b.T] == (b.rlen[i] == 1 ? got[i] : 0.0f),
                          "row %d: token score %g, reward model %g", i, b.token_scores[i * b.T + b.rlen[i] - 1], got[i]);
        }
        rl_rm_free(t->rm);
        t->rm = NULL;
        vc_config_free(cfg);
    }
    /* a causal LM is not a reward model */
    char o1[340];
    snprintf(o1, sizeof o1, "reward_model.model.path=%s", mp);
    char *ov[] = { "reward_model.enable=true", o1 };
    vc_config *cfg = NULL;
    CHECK_OK(vc_config_load(NULL, 2, ov, &cfg));
    vc_status st = rl_rm_open(cfg, &t->rm);
    CHECK_MSG(st == VC_ERR_UNSUPPORTED && strstr(vc_last_error(), "no score head"), "causal LM as RM: %s", vc_last_error());
    vc_config_free(cfg);
    vc_model_free(rmm);
    rl_batch_free(&b);
    vc_graph_free(t->g);
    vc_rl_dataset_free(t->train);
    vc_tokenizer_free(t->tok);
    vc_chat_template_free(t->tmpl);
    free(t);
}

/* the memory plan's trial of the reward model's pass (its score at each row's last token): measured on one and two
 * rows and extended to five, it bounds a real pass of five rows of that length and is within 5% of it */
static void test_pass_trial(void) {
    vc_model *m = NULL;
    CHECK_OK(vc_model_load("tests/fixtures/rm/qwen2_rm", &m));
    if (!m) return;
    enum { R = 5, SEQ = 20, TAIL = 6 };
    vc_graph *g = vc_graph_new();
    rl_pass_spec spec = { RL_PASS_SCORES, m, NULL, 0, 0 };
    size_t est = 0;
    CHECK_OK(rl_pass_trial_bytes(&spec, g, R, SEQ, TAIL, &est));
    rl_batch b;
    CHECK_OK(rl_batch_alloc(&b, R, TAIL, R * SEQ));
    for (int i = 0; i < R; i++) {
        b.cu[i + 1] = b.cu[i] + SEQ;
        b.plen[i] = SEQ - TAIL;
        b.rlen[i] = TAIL;
    }
    int64_t V = vc_model_cfg(m)->vocab;
    for (int64_t k = 0; k < R * SEQ; k++) b.ids[k] = (int32_t)((k * 31 + 7) % V);
    vc_graph_reset(g);
    vc_graph_clear_peak(g);
    CHECK_OK(rl_batch_last_scores(m, g, &b, 0, b.score));
    size_t real = vc_graph_peak_bytes(g);
    CHECK_MSG(real <= est && real >= est - est / 20, "a reward-model pass of %d rows peaks at %zu bytes, the trial says %zu",
              R, real, est);
    rl_batch_free(&b);
    vc_graph_free(g);
    vc_model_free(m);
}

int main(void) {
    test_pass_trial();
    test_golden();
    /* the score head on another device: VC_RM_DEVICE=sim (the default here) or cuda (gpu-check.sh, the
     * emulator's build): the same golden scores through backend memory */
    const char *dev = getenv("VC_RM_DEVICE");
    CHECK_OK(vc_device_select(dev && *dev ? dev : "sim", "test"));
    test_golden();
    CHECK_OK(vc_device_select("cpu", "test"));
    test_trainer_scoring();
    if (!vc_t_fail) {
        char cmd[200];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd)) fprintf(stderr, "cleanup failed\n");
    }
    return vc_test_done();
}
