/* Shared prompt prefixes (vc_share_plan, the decoder's prefix attention): on models of many shapes (GQA,
 * MoE, MLA, soft-caps, sliding windows smaller than the prompt, partial and 2D rotary, layer types, bf16),
 * a batch of three groups (a prompt of 9 tokens answered three times, one of 6 answered twice with a
 * member whose prompt differs after 3 tokens, and a sequence on its own) gives the same log-probs of every
 * response token and the same weight gradients when each group's prompt is computed once, to float
 * rounding, also with the LM head on the response positions only (vc_model_logprobs_rows: the others 0); the
 * plan's packing and the positions it saves are as stated; malformed prefixes are refused. Gated DeltaNet, KDA,
 * Mamba 2, Mamba 1 and lightning-attention models also with a prompt of 150 and of 129 tokens, whose responses start
 * from the prompt's state at row 128 (Mamba 1: at its end). */
#include "verlc/device.h"
#include "verlc/model.h"
#include "verlc/ops.h"
#include "model_test_util.h"
#include "vc_test.h"
#include <math.h>

#define NS 7
static const int32_t GROUP[NS] = { 0, 0, 1, 0, 1, -1, 1 };
#define TMAX 1024
/* group 0's prompt: 9 tokens, or (long_prompt) longer than the Gated DeltaNet's chunks of 64 rows, so that its
 * members start from the prompt's state at row 128 (vc_gdn_shared_tap) */
static int64_t PLEN[NS] = { 9, 9, 6, 9, 6, 4, 6 };
static const int64_t RLEN[NS] = { 5, 1, 4, 7, 3, 5, 2 };
static int32_t ids[TMAX], tgt[TMAX];
static int64_t cu[NS + 1], share[NS];
static float w[TMAX];

static void prompt_len(int64_t P) {
    for (int s = 0; s < NS; s++)
        if (GROUP[s] == 0) PLEN[s] = P;
}

static void build(int V) {
    static const int32_t PA[9] = { 3, 14, 15, 9, 2, 6, 5, 35, 8 }, PB[6] = { 27, 18, 28, 18, 28, 4 };
    int64_t t = 0;
    cu[0] = 0;
    for (int s = 0; s < NS; s++) {
        for (int64_t j = 0; j < PLEN[s]; j++, t++) {
            int32_t pa = j < 9 ? PA[j] : (int32_t)((j * 37 + 11) % 89);
            int32_t x = GROUP[s] == 0 ? pa : GROUP[s] == 1 ? PB[j] : (int32_t)(40 + j);
            if (s == 6 && j >= 3) x = 50 + (int32_t)j; /* differs from its group's prompt after 3 tokens */
            ids[t] = x % V;
        }
        for (int64_t j = 0; j < RLEN[s]; j++, t++) ids[t] = (int32_t)((7 * s + 11 * j + 1) % V);
        cu[s + 1] = t;
        share[s] = PLEN[s] - 1; /* the prompt's last token predicts the first response token */
    }
    for (int s = 0; s < NS; s++)
        for (int64_t t2 = cu[s]; t2 < cu[s + 1]; t2++) {
            int last = t2 + 1 >= cu[s + 1];
            tgt[t2] = last ? -1 : ids[t2 + 1];
            w[t2] = !last && t2 - cu[s] >= share[s] ? -1.0f / 32 : 0.0f; /* the response tokens' loss */
        }
}

/* the loss's log-probs [T] and every parameter's gradient (grads: one buffer of all, in order) */
static void run(vc_model *m, vc_graph *g, int shared, float *lp_out, float *grads, int64_t *saved) {
    vc_model_zero_grad(m);
    vc_graph_reset(g);
    vc_graph_set_grad(g, 1);
    vc_batch b = { NS, cu, ids, NULL };
    vc_share sh;
    CHECK_OK(vc_share_plan(g, &b, shared ? GROUP : NULL, share, 2, &sh));
    *saved = sh.saved;
    int32_t *t2 = vc_graph_alloc(g, sizeof(int32_t) * (size_t)sh.T, 0);
    for (int64_t t = 0; t < sh.T; t++) t2[t] = sh.saved ? tgt[sh.rep[t]] : tgt[t];
    vc_tensor *h = vc_model_forward(m, g, &sh.b, NULL), *lp = NULL;
    CHECK_MSG(h != NULL, "forward: %s", vc_last_error());
    uint8_t need[TMAX]; /* shared == 2: the LM head on the response positions only */
    for (int64_t t = 0; t < sh.T; t++) need[t] = w[sh.saved ? sh.rep[t] : t] != 0;
    if (!h || vc_model_logprobs_rows(m, g, h, t2, 1.0f, shared == 2 ? need : NULL, &lp, NULL, NULL)) return;
    if (sh.saved) lp = vc_op_gather_rows(g, lp, sh.T, sh.back, cu[NS]);
    vc_tensor *L = vc_op_dot_const(g, lp, w);
    CHECK_OK(vc_graph_backward(g, L, 1.0f));
    CHECK_OK(vc_tensor_read(lp, lp_out));
    for (int i = 0, off = 0; i < vc_model_n_params(m); i++) {
        vc_tensor *p = vc_model_param(m, i, NULL, NULL);
        if (p->grad) CHECK_OK(vc_model_param_read(m, i, 1, grads + off));
        off += (int)p->n;
    }
}

static void check_model(vc_model *m, int k);
static void long_prompts(int i);
static int on_device; /* VC_SHARE_DEVICE: log-probs within 1e-4 (the GEMMs' bits depend on their row counts there) */

static void one_model(int k) {
    vc_model *m = random_model(RANDOM_CONFIGS[k], k);
    if (m) check_model(m, k);
}

/* models with linear mixers (verlc's fixtures): Gated DeltaNet (Qwen3-Next, OLMo-hybrid's separate q, k, v), Kimi
 * Delta Attention, LFM2's short convolution, Mamba 2 (alone, beside attention as Falcon-H1's, in Nemotron-H's
 * blocks), Mamba 1 (Jamba, Mamba, FalconMamba), MiniMax's lightning attention: the mixers project the prompt once,
 * convolve its last rows again per member and start their recurrence from its state */
static const char *const LINEAR[] = { "qwen3_next", "olmo_hybrid", "kimi_linear", "lfm2", "mamba2", "falcon_h1",
                                      "nemotron_h", "jamba", "minimax", "mamba", "falcon_mamba" };

static void linear_model(int i) {
    char root[512], dir[700];
    snprintf(dir, sizeof dir, "%s/%s", vc_test_model_root(1, root, sizeof root), LINEAR[i]);
    vc_model *m = NULL;
    CHECK_MSG(vc_model_load(dir, &m) == VC_OK, "%s: %s", dir, vc_last_error());
    if (!m) return;
    CHECK_OK(vc_model_enable_grad(m));
    check_model(m, 100 + i);
    if (i != 3 && i < 9) long_prompts(i); /* Gated DeltaNet, KDA, Mamba 2, Mamba 1, lightning attention */
}

/* Gated DeltaNet, KDA, Mamba 2, Mamba 1 or lightning attention (LINEAR[i]): prompts whose members start from the
 * prompt's state (row 128 inside its last chunk, and at its end; Mamba 1: at its end) */
static void long_prompts(int i) {
    char root[512], dir[700];
    snprintf(dir, sizeof dir, "%s/%s", vc_test_model_root(1, root, sizeof root), LINEAR[i]);
    for (int64_t P = 150; P >= 129; P -= on_device ? 1000 : 21) { /* (a device: the first only) */
        vc_model *m = NULL;
        prompt_len(P);
        CHECK_MSG(vc_model_load(dir, &m) == VC_OK, "%s: %s", dir, vc_last_error());
        if (m) check_model(m, 200 + (int)P);
        prompt_len(9);
    }
}

static void check_model(vc_model *m, int k) {
    CHECK_OK(vc_model_enable_grad(m));
    build((int)vc_cfg_out_vocab(vc_model_cfg(m))); /* ids are targets too: within the LM head */
    int64_t np = 0, T = cu[NS];
    for (int i = 0; i < vc_model_n_params(m); i++) np += vc_model_param(m, i, NULL, NULL)->n;
    float *g0 = calloc((size_t)np, 4), *g1 = calloc((size_t)np, 4), lp0[TMAX], lp1[TMAX];
    vc_graph *g = vc_graph_new();
    int64_t s0 = -1, s1 = -1, s2 = -1;
    float *g2 = calloc((size_t)np, 4), lp2[TMAX];
    run(m, g, 0, lp0, g0, &s0);
    run(m, g, 1, lp1, g1, &s1);
    run(m, g, 2, lp2, g2, &s2);
    double d2 = 0, z2 = 0;
    for (int64_t t = 0; t < T; t++) {
        if (w[t] != 0) d2 = fmax(d2, fabs(lp2[t] - lp1[t]));
        else z2 = fmax(z2, fabs(lp2[t]));
    }
    for (int64_t i = 0; i < np; i++) d2 = fmax(d2, fabs(g2[i] - g1[i]));
    CHECK_MSG(d2 < 1e-5 && z2 == 0, "config %d, LM head on the response rows only: difference %g, others %g", k, d2, z2);
    free(g2);
    /* group 0 shares all but its prompt's last token with 2 more members; group 1's third member only 3 */
    CHECK_MSG(s0 == 0 && s1 == 2 * (PLEN[0] - 1) + 2 * 3, "config %d: saved %lld / %lld positions", k, (long long)s0,
              (long long)s1);
    double dl = 0, dg = 0, gmax = 0;
    for (int64_t t = 0; t < T; t++)
        if (w[t] != 0) dl = fmax(dl, fabs(lp0[t] - lp1[t]));
    for (int64_t i = 0; i < np; i++) dg = fmax(dg, fabs(g0[i] - g1[i])), gmax = fmax(gmax, fabs(g0[i]));
    printf("config %d (%s): %lld of %lld positions shared; max |log-prob diff| %.2g, max |grad diff| %.2g of %.2g\n",
           k, vc_model_cfg(m)->model_type, (long long)s1, (long long)T, dl, dg, gmax);
    CHECK_MSG(dl < (on_device ? 1e-4 : 2e-5) && dg < 1e-4 * fmax(1, gmax) && gmax > 0, "config %d: log-prob %g, "
              "gradient %g", k, dl, dg);
    /* refusals: a prefix that is not an earlier sequence without one */
    int32_t bad[NS] = { -1, 0, -1, 1, -1, -1, -1 };
    vc_batch b = { NS, cu, ids, bad };
    vc_graph_reset(g);
    CHECK(vc_model_forward(m, g, &b, NULL) == NULL && strstr(vc_last_error(), "prefix"));
    vc_graph_free(g);
    free(g0);
    free(g1);
    vc_model_free(m);
}

int main(void) {
    const char *dev = getenv("VC_SHARE_DEVICE");
    if (dev && *dev) { /* (e.g. cuda on the emulator's build): the linear mixers' shared starts only */
        CHECK_OK(vc_device_select(dev, "test"));
        on_device = 1;
        long_prompts(4), long_prompts(7); /* Mamba 2, Jamba's Mamba 1; with VC_SHARE_ALL=1 Qwen3-Next's Gated
                                           * DeltaNet, Kimi's KDA and MiniMax's lightning attention too (the ops' own
                                           * CUDA tests check them all on shared starts) */
        if (getenv("VC_SHARE_ALL")) long_prompts(0), long_prompts(2), long_prompts(8);
        return vc_test_done();
    }
    for (int k = 0; k < N_RANDOM_CONFIGS; k++) one_model(k);
    for (int i = 0; i < (int)(sizeof LINEAR / sizeof *LINEAR); i++) linear_model(i);
    return vc_test_done();
}
