/* verlc bench train / logprob: forward+backward+AdamW (or forward + fused log-probs) tokens/s on a
 * random-weight model, against the machine's measured sgemm peak and the theoretical FMA peak. */
#include "cli.h"
#include "verlc/pool.h"
#include "verlc/train.h"
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct bench_args {
    const char *config;
    int64_t tokens;
    int seqs, iters, threads;
} bench_args;

static int parse(int argc, char **argv, bench_args *a, const char *name) {
    *a = (bench_args){ NULL, 2048, 1, 3, 0 };
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc) a->config = argv[++i];
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) a->tokens = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--seqs") && i + 1 < argc) a->seqs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) a->iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) a->threads = atoi(argv[++i]);
        else a->config = NULL, i = argc;
    }
    if (!a->config || a->tokens < 2 || a->seqs < 1 || a->seqs > a->tokens / 2 || a->iters < 1) {
        fprintf(stderr, "usage: verlc bench %s --config CONFIG.json [--tokens 2048] [--seqs 1] [--iters 3] [--threads N]\n"
                        "Random weights; --seqs packs the tokens as that many equal sequences.\n", name);
        return 2;
    }
    if (a->threads > 0) vc_set_threads(a->threads);
    return 0;
}

/* measured: best of 3 sgemm 2048^3 */
static double sgemm_peak(void) {
    const int n = 2048;
    float *A = vc_aligned_alloc((size_t)n * n * 4), *B = vc_aligned_alloc((size_t)n * n * 4),
          *C = vc_aligned_alloc((size_t)n * n * 4);
    double best = 0;
    if (A && B && C) {
        for (size_t i = 0; i < (size_t)n * n; i++) A[i] = B[i] = (float)((i % 17) * 0.01);
        for (int r = 0; r < 3; r++) {
            double t0 = vc_now();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, A, n, B, n, 0.0f, C, n);
            double g = 2.0 * n * n * n / (vc_now() - t0) / 1e9;
            if (g > best) best = g;
        }
    }
    vc_aligned_free(A); vc_aligned_free(B); vc_aligned_free(C);
    return best;
}

/* cores x clock x FMA lanes x 2 flops x 2 FMA units, from /proc/cpuinfo (0 when unknown) */
static double theoretical_peak(int cores, char *desc, size_t cap) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    double mhz = 0;
    int lanes = 0;
    char line[8192];
    snprintf(desc, cap, "unknown");
    if (!f) return 0;
    while (fgets(line, sizeof line, f)) {
        if (!mhz && sscanf(line, "cpu MHz : %lf", &mhz) == 1) continue;
        if (!lanes && !strncmp(line, "flags", 5)) {
            if (strstr(line, " avx512f")) lanes = 16;
            else if (strstr(line, " avx2") && strstr(line, " fma")) lanes = 8;
            else if (strstr(line, " avx")) lanes = 8 / 2; /* mul + add, no FMA */
            else lanes = 4 / 2;
        }
    }
    fclose(f);
    if (!mhz || !lanes) return 0;
    snprintf(desc, cap, "%d cores x %.0f MHz x %d f32 lanes x 2 (FMA) x 2 units", cores, mhz, lanes);
    return cores * mhz * 1e6 * lanes * 4 / 1e9;
}

static double model_flops(const vc_model *m, const int64_t *cu, int seqs, int backward) {
    const vc_model_config *c = vc_model_cfg(m);
    double p = (double)vc_model_param_count(m) - (double)c->vocab * c->hidden;
    if (c->tied) p += (double)c->vocab * c->hidden; /* the LM head matmul still runs */
    double T = (double)cu[seqs], attn = 0;
    for (int s = 0; s < seqs; s++) {
        double L = (double)(cu[s + 1] - cu[s]);
        attn += 2.0 * c->n_head * c->head_dim * L * L * c->n_layer; /* causal QK^T + PV forward */
    }
    return (backward ? 3.0 : 1.0) * (2.0 * p * T + attn);
}

static void report(const char *what, double flops, double secs, int64_t tokens) {
    char desc[256];
    double meas = sgemm_peak(), theo = theoretical_peak(vc_get_threads(), desc, sizeof desc);
    double g = flops / secs / 1e9;
    printf("%s: %lld tokens in %.3f s: %.0f tokens/s, %.2f GFLOP/s\n", what, (long long)tokens, secs, tokens / secs, g);
    printf("  measured peak (sgemm 2048^3): %.1f GFLOP/s -> %.1f%%\n", meas, meas > 0 ? 100 * g / meas : 0);
    if (theo > 0) printf("  theoretical peak (%s): %.1f GFLOP/s -> %.1f%%\n", desc, theo, 100 * g / theo);
}

static int setup(const bench_args *a, vc_model **m, int64_t **cu, int32_t **ids) {
    if (vc_model_init_random(a->config, 1, m)) return 1;
    *cu = calloc((size_t)a->seqs + 1, sizeof **cu);
    *ids = calloc((size_t)a->tokens, sizeof **ids);
    if (!*cu || !*ids) return 1;
    int64_t V = vc_model_cfg(*m)->vocab;
    for (int s = 0; s <= a->seqs; s++) (*cu)[s] = a->tokens * s / a->seqs;
    for (int64_t k = 0; k < a->tokens; k++) (*ids)[k] = (int32_t)((k * 2654435761u) % (uint64_t)V);
    return 0;
}

int vc_bench_train(int argc, char **argv) {
    bench_args a;
    if (parse(argc, argv, &a, "train")) return 2;
    vc_model *m = NULL;
    int64_t *cu = NULL;
    int32_t *ids = NULL;
    vc_trainer t;
    memset(&t, 0, sizeof t);
    int rc = setup(&a, &m, &cu, &ids);
    vc_trainer_config tc;
    vc_trainer_config_default(&tc);
    tc.micro_bs = a.seqs;
    if (!rc) rc = vc_trainer_init(&t, m, &tc) != VC_OK;
    vc_minibatch b = { a.seqs, cu, ids, NULL };
    vc_step_stats s;
    double best = INFINITY;
    for (int i = 0; !rc && i <= a.iters; i++) { /* iteration 0 warms up */
        double t0 = vc_now();
        rc = vc_trainer_step(&t, &b, NULL, NULL, &s) != VC_OK;
        if (i > 0 && vc_now() - t0 < best) best = vc_now() - t0;
    }
    if (!rc) {
        printf("model: %lld parameters, %d threads, %d sequence(s), activations %.1f MiB\n",
               (long long)vc_model_param_count(m), vc_get_threads(), a.seqs, vc_graph_peak_bytes(t.g) / 1048576.0);
        report("forward+backward+AdamW", model_flops(m, cu, a.seqs, 1), best, a.tokens);
    } else {
        fprintf(stderr, "verlc bench train: %s\n", vc_last_error());
    }
    if (t.g) vc_trainer_free(&t);
    vc_model_free(m);
    free(cu);
    free(ids);
    return rc;
}

int vc_bench_logprob(int argc, char **argv) {
    bench_args a;
    if (parse(argc, argv, &a, "logprob")) return 2;
    vc_model *m = NULL;
    int64_t *cu = NULL;
    int32_t *ids = NULL, *tgt = NULL;
    int rc = setup(&a, &m, &cu, &ids);
    vc_graph *g = vc_graph_new();
    tgt = malloc(sizeof *tgt * (size_t)a.tokens);
    if (!g || !tgt) rc = 1;
    for (int s = 0; !rc && s < a.seqs; s++)
        for (int64_t k = cu[s]; k < cu[s + 1]; k++) tgt[k] = k + 1 < cu[s + 1] ? ids[k + 1] : -1;
    double best = INFINITY;
    for (int i = 0; !rc && i <= a.iters; i++) {
        double t0 = vc_now();
        vc_graph_reset(g);
        vc_graph_set_grad(g, 0);
        vc_batch b = { a.seqs, cu, ids };
        vc_tensor *h = vc_model_forward(m, g, &b, NULL), *lp = NULL, *en = NULL;
        rc = !h || vc_model_logprobs(m, g, h, tgt, &lp, &en) != VC_OK;
        if (i > 0 && vc_now() - t0 < best) best = vc_now() - t0;
    }
    if (!rc) {
        printf("model: %lld parameters, %d threads, %d sequence(s)\n", (long long)vc_model_param_count(m),
               vc_get_threads(), a.seqs);
        report("forward + fused log-probs", model_flops(m, cu, a.seqs, 0), best, a.tokens);
    } else {
        fprintf(stderr, "verlc bench logprob: %s\n", vc_last_error());
    }
    vc_graph_free(g);
    vc_model_free(m);
    free(cu);
    free(ids);
    free(tgt);
    return rc;
}
