/* Sampling on the backend: the rollout engine on the sim device (weights, KV pages, logits and the
 * sample_rows outputs behind poisoned pointers; only tokens and log-probs cross to the host) gives the
 * same tokens, log-probs and finish reasons, bit for bit, as on the cpu device, for every sampling mode
 * (greedy, plain temperature, top-k, top-p, min-p, all together) with several samples per prompt. */
#include "tensor/backend.h"
#include "infer_test_util.h"
#include "vc_test.h"
#include "verlc/device.h"
#include "verlc/pool.h"
#include "verlc/rng.h"
#include "verlc/rollout.h"
#include <unistd.h>

static const char *CONFIG =
    "{\"architectures\": [\"Qwen2ForCausalLM\"], \"model_type\": \"qwen2\", \"hidden_size\": 32,"
    " \"intermediate_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
    " \"vocab_size\": 257, \"max_position_embeddings\": 512, \"rms_norm_eps\": 1e-6, \"rope_theta\": 10000.0,"
    " \"tie_word_embeddings\": false, \"hidden_act\": \"silu\", \"bos_token_id\": 1, \"eos_token_id\": 2,"
    " \"torch_dtype\": \"float32\"}";

#define NP 4
#define NMODE 6
static int32_t prompts[NP][40];
static const int plen[NP] = { 3, 21, 1, 9 };
static const int n_samples[NP] = { 3, 1, 2, 4 };

static vc_model *make_model(void) { return model_from_config(CONFIG, 11); }

static vc_sampling mode(int k) {
    static const int32_t eos[1] = { 2 };
    vc_sampling s = { .temperature = 1.0f, .top_p = 1.0f, .max_new_tokens = 10, .eos_ids = eos, .n_eos = 1,
                      .seed = 77 + (uint64_t)k };
    switch (k) {
    case 0: s.greedy = 1; break;
    case 1: s.temperature = 1.3f; break;                        /* verl's default: plain temperature */
    case 2: s.top_k = 20; break;
    case 3: s.top_p = 0.8f; s.temperature = 0.7f; break;
    case 4: s.min_p = 0.1f; break;
    default: s.top_k = 40; s.top_p = 0.9f; s.min_p = 0.02f; s.temperature = 0.8f; break;
    }
    return s;
}

static vc_rollout_sample *run(vc_model *m, const vc_sampling *sp, int *n_out) {
    vc_rollout_request rq[NP];
    for (int i = 0; i < NP; i++) rq[i] = (vc_rollout_request){ prompts[i], plen[i], n_samples[i], (uint64_t)i };
    vc_rollout_opts o = { .kv_budget_bytes = 8e6, .page_tokens = 4, .max_batch = 5, .prefill_chunk = 8 };
    vc_rollout_engine *e = NULL;
    vc_rollout_sample *out = NULL;
    *n_out = 0;
    CHECK_OK(vc_rollout_new(m, &o, &e));
    if (e) CHECK_OK(vc_rollout_generate(e, rq, NP, sp, &out, n_out));
    vc_rollout_free(e);
    return out;
}

int main(void) {
    for (int i = 0; i < NP; i++)
        for (int t = 0; t < plen[i]; t++) prompts[i][t] = 3 + (int32_t)vc_rng_below(250, 5, (uint64_t)i, 0, (uint64_t)t);
    vc_set_threads(2);
    vc_rollout_sample *ref[NMODE] = { 0 };
    int nref[NMODE] = { 0 }, same = 0, tokens = 0;
    CHECK_OK(vc_device_select("cpu", "test"));
    vc_model *m = make_model();
    CHECK(m != NULL);
    for (int k = 0; m && k < NMODE; k++) {
        vc_sampling sp = mode(k);
        ref[k] = run(m, &sp, &nref[k]);
    }
    vc_model_free(m);
    CHECK_OK(vc_device_select("sim", "test"));
    m = make_model();
    CHECK(m != NULL);
    for (int k = 0; m && k < NMODE; k++) {
        vc_sampling sp = mode(k);
        int n = 0;
        vc_rollout_sample *o = run(m, &sp, &n);
        int ok = o && ref[k] && n == nref[k] && same_samples(ref[k], o, n);
        CHECK_MSG(ok, "sampling mode %d: the sim device differs from the cpu device", k);
        same += ok;
        for (int i = 0; o && i < n; i++) tokens += (int)o[i].n_tokens;
        vc_rollout_samples_free(o, n);
    }
    CHECK_OK(vc_be()->sync());
    vc_model_free(m);
    CHECK_OK(vc_device_select("cpu", "test"));
    /* the modes really sample: a prompt's samples differ somewhere */
    int distinct = 0;
    for (int k = 1; k < NMODE; k++)
        for (int i = 0; ref[k] && i + 1 < nref[k]; i++)
            distinct += ref[k][i].request == ref[k][i + 1].request &&
                        (ref[k][i].n_tokens != ref[k][i + 1].n_tokens ||
                         memcmp(ref[k][i].tokens, ref[k][i + 1].tokens, (size_t)ref[k][i].n_tokens * 4));
    CHECK(distinct > 0);
    for (int k = 0; k < NMODE; k++) vc_rollout_samples_free(ref[k], nref[k]);
    printf("rollout on sim == cpu (tokens, lp, lps bitwise): %d/%d sampling modes, %d tokens\n", same, NMODE, tokens);
    return vc_test_done();
}
