/* vc_perf_verl_flops, the FLOP count behind perf/mfu/actor, perf/mfu/critic, perf/mfu/actor_infer and SFT's
 * train/mfu, against verl's FlopsCounter formulas (verl/utils/flops_counter.py) written out here from each
 * fixture's config.json, as verl reads a Hugging Face config: the dense (Qwen2 / Llama), MoE (Qwen3-MoE),
 * DeepSeek-V3 (MLA, shared experts, dense first layers) and Gemma 3 (sliding layers by layer_types) estimates.
 * verl's own Mistral entry ignores the sliding window; verlc counts it as verl's Gemma 3 and gpt-oss entries do. */
#include "verlc/model.h"
#include "verlc/perf.h"
#include "vc_test.h"
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int64_t CU[] = { 0, 37, 42, 162, 163 }; /* rows of 37, 5, 120 and 1 tokens */
enum { ROWS = 4 };

static double num(const cJSON *c, const char *k, double def) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, k);
    return cJSON_IsNumber(v) ? v->valuedouble : def;
}

static cJSON *config(const char *fixture) {
    char path[512], text[1 << 16];
    snprintf(path, sizeof path, "%s/fixtures/models/%s/config.json", vc_test_shared(), fixture);
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    text[n] = 0;
    cJSON *c = n ? cJSON_Parse(text) : NULL;
    CHECK_MSG(c != NULL, "%s: config.json parses", fixture);
    return c;
}

/* verl's 12 x sum of s x keys(s) over rows (x layers where every layer is alike) */
static double sq_sum(double window) {
    double s2 = 0;
    for (int r = 0; r < ROWS; r++) {
        double s = (double)(CU[r + 1] - CU[r]);
        s2 += s * (window > 0 && window < s ? window : s);
    }
    return s2;
}

/* _estimate_qwen2_flops; moe: _estimate_qwen2_moe_flops (a router, the top-k experts) */
static double verl_qwen2(const cJSON *c, int moe) {
    double H = num(c, "hidden_size", 0), V = num(c, "vocab_size", 0), L = num(c, "num_hidden_layers", 0);
    double nh = num(c, "num_attention_heads", 0), nkv = num(c, "num_key_value_heads", nh);
    double hd = num(c, "head_dim", H / nh);
    double mlp = moe ? H * num(c, "num_experts_per_tok", 0) * num(c, "moe_intermediate_size", 0) * 3 +
                           H * num(c, "num_experts", num(c, "num_local_experts", 0))
                     : H * num(c, "intermediate_size", 0) * 3;
    double attn_lin = H * (nh * hd + 2 * nkv * hd + nh * hd);
    double dense = (mlp + attn_lin) * L + 2 * V * H;
    return 6 * dense * (double)CU[ROWS] + 12 * sq_sum(0) * hd * nh * L;
}

/* _estimate_deepseek_v3_flops */
static double verl_deepseek_v3(const cJSON *c) {
    double H = num(c, "hidden_size", 0), V = num(c, "vocab_size", 0), L = num(c, "num_hidden_layers", 0);
    double nh = num(c, "num_attention_heads", 0), E = num(c, "n_routed_experts", 0), dense_l = num(c, "first_k_dense_replace", 0);
    double qk = num(c, "qk_nope_head_dim", 0) + num(c, "qk_rope_head_dim", 0), rope = num(c, "qk_rope_head_dim", 0);
    double qr = num(c, "q_lora_rank", 0), kvr = num(c, "kv_lora_rank", 0), vd = num(c, "v_head_dim", 0);
    double expert = H * num(c, "moe_intermediate_size", 0) * (num(c, "num_experts_per_tok", 0) + num(c, "n_shared_experts", 0)) * 3;
    double attn = qr > 0 ? H * qr + nh * qk * qr : H * nh * qk;
    attn += H * (kvr + rope) + nh * (qk - rope + vd) * kvr + nh * vd * H;
    double n = (H * E + expert + attn) * (L - dense_l) + (H * num(c, "intermediate_size", 0) * 3 + attn) * dense_l + 2 * V * H;
    return 6 * n * (double)CU[ROWS] + 12 * sq_sum(0) * L * qk * nh;
}

/* _estimate_gemma3_flops: the sliding layers' keys at most the window (without layer_types, a sliding_window makes
 * every layer sliding, as transformers' Mistral runs it: verlc's count, where verl's Mistral entry ignores it) */
static double verl_gemma3(const cJSON *c) {
    double H = num(c, "hidden_size", 0), V = num(c, "vocab_size", 0), L = num(c, "num_hidden_layers", 0);
    double nh = num(c, "num_attention_heads", 0), nkv = num(c, "num_key_value_heads", nh), hd = num(c, "head_dim", H / nh);
    double dense = (H * num(c, "intermediate_size", 0) * 3 + H * (2 * nh * hd + 2 * nkv * hd)) * L + 2 * V * H;
    const cJSON *types = cJSON_GetObjectItemCaseSensitive(c, "layer_types");
    double win = num(c, "sliding_window", 0), s2 = 0;
    for (int l = 0; l < (int)L; l++) {
        const cJSON *t = cJSON_GetArrayItem(types, l);
        int sliding = types ? cJSON_IsString(t) && !strcmp(t->valuestring, "sliding_attention") : win > 0;
        s2 += sq_sum(sliding ? win : 0);
    }
    return 6 * dense * (double)CU[ROWS] + 12 * s2 * hd * nh;
}

static void check(const char *fixture, int kind) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/fixtures/models/%s", vc_test_shared(), fixture);
    vc_model *m = NULL;
    cJSON *c = config(fixture);
    CHECK_OK(vc_model_load(dir, &m));
    if (!m || !c) return;
    double want = kind == 0 ? verl_qwen2(c, 0) : kind == 1 ? verl_qwen2(c, 1) : kind == 2 ? verl_deepseek_v3(c)
                                                                                        : verl_gemma3(c);
    double got = vc_perf_verl_flops(m, 0, CU, ROWS);
    CHECK_MSG(want > 0 && fabs(got - want) <= 1e-12 * want, "%s: verl's FlopsCounter %.17g, verlc %.17g", fixture, want,
              got);
    /* one row alone: the sum over rows is additive */
    double parts = 0;
    for (int r = 0; r < ROWS; r++) parts += vc_perf_verl_flops(m, 0, CU + r, 1);
    CHECK_MSG(fabs(parts - got) <= 1e-12 * got, "%s: rows one by one %.17g, together %.17g", fixture, parts, got);
    /* a critic's value head (1 row) in place of the LM head: (vocab - 1) x hidden fewer weights */
    double critic = vc_perf_verl_flops(m, 1, CU, ROWS);
    double less = 6 * (num(c, "vocab_size", 0) - 1) * num(c, "hidden_size", 0) * (double)CU[ROWS];
    CHECK_MSG(fabs(got - critic - less) <= 1e-12 * got, "%s: with a value head %.17g, expected %.17g", fixture, critic,
              got - less);
    cJSON_Delete(c);
    vc_model_free(m);
}

int main(void) {
    if (!vc_test_have_shared()) return vc_test_done();
    check("qwen2", 0);
    check("llama", 0);
    check("qwen3_moe", 1);
    check("deepseek_v3", 2);
    check("gemma2", 3);      /* Gemma 2's alternating sliding layers, as verl's Gemma 3 entry counts them */
    check("mistral_swa", 3); /* every layer sliding (no layer_types): the window applies to all */
    return vc_test_done();
}
