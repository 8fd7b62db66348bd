/* Peaks and FLOP counts (the GEMM peak is measured through the CPU backend's own GEMM). */
#include "verlc/perf.h"
#include "verlc/pool.h"
#include "cpu.h"
#include "verlc/cuda.h"
#include "tensor/backend.h"
#include "infer/infer.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

double vc_perf_peak_theoretical(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return 0;
    char line[4096];
    double mhz = 0;
    int avx512 = 0, avx2 = 0, fma = 0;
    while (fgets(line, sizeof line, f)) {
        if (!mhz && !strncmp(line, "cpu MHz", 7)) mhz = atof(strchr(line, ':') + 1);
        if (!strncmp(line, "flags", 5)) {
            avx512 |= strstr(line, " avx512f") != NULL;
            avx2 |= strstr(line, " avx2") != NULL;
            fma |= strstr(line, " fma") != NULL;
        }
    }
    fclose(f);
    int lanes = avx512 ? 16 : avx2 ? 8 : 4;
    double flops_per_cycle = lanes * (fma ? 2.0 : 1.0) * 2.0; /* two FMA pipes */
    return flops_per_cycle * mhz * 1e-3 * vc_get_threads();
}

/* the best GFLOP/s of three n x n x n products C = A B^T through gemm (copy: B as a registered bf16 weight copy) */
static double peak_of(vc_gemm_fn gemm, int n, int copy) {
    float *a = malloc((size_t)n * n * 4), *b = malloc((size_t)n * n * 4), *c = malloc((size_t)n * n * 4);
    double best = 0;
    if (a && b && c) {
        for (size_t i = 0; i < (size_t)n * n; i++) {
            a[i] = (float)(i % 7) * 0.1f;
            b[i] = (float)(i % 5) * 0.2f;
        }
        int64_t rows = n;
        const float *w = b;
        if (copy && vc_cpu_bf16_copies_add(&w, &rows, &rows, 1) != VC_OK) vc_clear_error(); /* (then rounded per call) */
        for (int r = 0; r < 3; r++) {
            double t0 = vc_now();
            gemm(0, 1, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
            double dt = vc_now() - t0, g = 2.0 * n * n * (double)n / dt * 1e-9;
            if (g > best) best = g;
        }
        if (copy) vc_cpu_bf16_copies_drop();
    }
    free(a);
    free(b);
    free(c);
    return best;
}

double vc_perf_peak_sgemm(int n) { return peak_of(vc_cpu_sgemm, n, 0); }

double vc_perf_peak_rowinv(int n) { return peak_of(vc_infer_gemm, n, vc_matmul_precision() == VC_PREC_BF16); }

double vc_perf_forward_flops(const vc_model_config *c, int64_t tokens, int64_t seq_len) {
    double H = (double)c->hidden, hd = (double)c->head_dim, nh = (double)c->n_head, nkv = (double)c->n_kv_head;
    double per_token = 0, heads = 0; /* heads: the query heads of all layers (Laguna: each layer its own) */
    for (int64_t l = 0; l < c->n_layer; l++) {
        double attn, lnh = (double)vc_cfg_heads(c, (int)l);
        heads += lnh;
        if (c->mla) {
            double qk = (double)(c->qk_nope_dim + c->qk_rope_dim), r = (double)c->kv_lora_rank;
            attn = (c->q_lora_rank ? H * c->q_lora_rank + c->q_lora_rank * nh * qk : H * nh * qk) +
                   H * (r + c->qk_rope_dim) + r * nh * (c->qk_nope_dim + c->v_head_dim) + nh * c->v_head_dim * H;
        } else attn = H * lnh * hd + 2 * H * nkv * hd + lnh * hd * H;
        double mlp;
        if (c->is_moe[l])
            mlp = H * c->n_expert + c->top_k * 3.0 * H * c->moe_inter + 3.0 * H * c->shared_inter;
        else mlp = (c->mlp_kind == VC_MLP_GATED ? 3.0 : 2.0) * H * c->inter;
        per_token += 2 * (attn + mlp);
    }
    per_token += 2 * H * vc_cfg_out_vocab(c); /* LM head */
    /* attention scores and weighted values: causal, so half of seq_len keys on average */
    double qk_dim = c->mla ? (double)(c->qk_nope_dim + c->qk_rope_dim) : hd;
    double v_dim = c->mla ? (double)c->v_head_dim : hd;
    double keys = (double)seq_len / 2.0;
    if (c->dsa_topk && seq_len > c->dsa_topk) { /* DeepSeek Sparse Attention: at most index_topk keys a query */
        double k = (double)c->dsa_topk, n = (double)seq_len;
        keys = (k * (k + 1) / 2 + (n - k) * k) / n;
        /* its indexers: their projections and their scores against every visible key */
        for (int64_t l = 0; l < c->n_layer; l++)
            if (!c->dsa_shared[l])
                per_token += 2.0 * (double)(c->q_lora_rank * c->dsa_heads * c->dsa_dim + c->hidden * c->dsa_dim +
                                            c->hidden * c->dsa_heads) +
                             2.0 * (double)(c->dsa_heads * c->dsa_dim) * n / 2.0;
    }
    per_token += 2.0 * heads * keys * (qk_dim + v_dim);
    return per_token * (double)tokens;
}

static int bf16_dots(void) { return vc_matmul_precision() == VC_PREC_BF16 && vc_infer_gemm_isa() == VC_GEMM_AVX512BF16; }

double vc_perf_peak_theoretical_prec(void) { return vc_perf_peak_theoretical() * (bf16_dots() ? 2.0 : 1.0); }

const char *vc_perf_peak_theoretical_name(void) { return bf16_dots() ? "bf16 dot-product" : "fp32"; }

double vc_perf_promised_peak(void) {
    double dev = 0;
    if (vc_backend_cuda() && vc_be() == vc_backend_cuda() &&
        vc_cuda_peak_flops(vc_matmul_precision() == VC_PREC_BF16, &dev) == VC_OK && dev > 0)
        return dev;
    vc_clear_error();
    double g = vc_perf_peak_theoretical_prec();
    if (g <= 0) g = vc_perf_peak_sgemm(512);
    return g > 0 ? g * 1e9 : 1e10;
}

/* the keys one query of a row of s tokens scores in layer l, by verl's count (s: causal masking not halved) */
static double verl_keys(const vc_model_config *c, int l, double s) {
    double k = s;
    if (c->window[l] > 0 && c->window[l] < k) k = c->window[l];
    if (c->chunk[l] > 0 && c->chunk[l] < k) k = c->chunk[l];
    if (c->dsa_topk > 0 && (double)c->dsa_topk < k) k = (double)c->dsa_topk;
    return k;
}

double vc_perf_verl_flops(const vc_model *m, int64_t head_rows, const int64_t *cu, int rows) {
    const vc_model_config *c = vc_model_cfg(m);
    double tokens = (double)(cu[rows] - cu[0]);
    /* verl's 2 vocab x hidden: the embedding (a lookup, counted as a matrix) and the LM head; a critic's or reward
     * model's score or value head in place of the LM head (verl counts an LM head there too) */
    double head = head_rows > 0 ? (double)head_rows : c->n_labels > 0 ? (double)c->n_labels : (double)vc_cfg_out_vocab(c);
    double dense = (double)vc_model_active_weights(m) + ((double)c->vocab + head) * (double)c->hidden;
    double attn = 0;
    for (int l = 0; l < c->n_layer; l++) {
        if (c->block[l] == VC_BLOCK_MLP || (c->linear[l] && !c->parallel_ssm)) continue; /* no attention */
        double qk = c->mla ? (double)(c->qk_nope_dim + c->qk_rope_dim) : (double)vc_cfg_head_dim(c, l);
        double sq = 0;
        for (int r = 0; r < rows; r++) {
            double s = (double)(cu[r + 1] - cu[r]);
            sq += s * verl_keys(c, l, s);
        }
        attn += sq * qk * (double)vc_cfg_heads(c, l);
    }
    return 6.0 * dense * tokens + 12.0 * attn;
}

double vc_perf_mem_bandwidth(int mb) {
    size_t n = (size_t)mb * (1 << 20) / 4 / 3;
    float *a = malloc(n * 4), *b = malloc(n * 4), *c = malloc(n * 4);
    double best = 0;
    if (a && b && c) {
        for (size_t i = 0; i < n; i++) {
            b[i] = 1.0f;
            c[i] = 2.0f;
        }
        for (int r = 0; r < 4; r++) {
            double t0 = vc_now();
            for (size_t i = 0; i < n; i++) a[i] = b[i] + 3.0f * c[i];
            double dt = vc_now() - t0, g = 3.0 * n * 4 / dt * 1e-9;
            if (g > best) best = g;
        }
    }
    free(a);
    free(b);
    free(c);
    return best;
}
