/* verlc bench train / logprob: forward+backward+AdamW (or forward + fused log-probs) tokens/s on a
 * random-weight model, against the machine's measured sgemm peak and the theoretical FMA peak. */
#include "bench_util.h"
#include "cli.h"
#include "verlc/cuda.h"
#include "verlc/pool.h"
#include "verlc/train.h"
#include "verlc/perf.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct bench_args {
    const char *config;
    int64_t tokens;
    int seqs, iters, threads, qat;
    const char *device, *precision, *optimizer;
    bench_peer peer;
} bench_args;

static int parse(int argc, char **argv, bench_args *a, const char *name) {
    *a = (bench_args){ NULL, 2048, 1, 3, 0, 0, "auto", "fp32", "adamw", { 0, NULL } };
    for (int i = 1; i < argc; i++) {
        if (bench_peer_arg(argc, argv, &i, &a->peer)) continue;
        if (!strcmp(argv[i], "--config") && i + 1 < argc) a->config = argv[++i];
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) a->tokens = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--seqs") && i + 1 < argc) a->seqs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) a->iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) a->threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--device") && i + 1 < argc) a->device = argv[++i];
        else if (!strcmp(argv[i], "--precision") && i + 1 < argc) a->precision = argv[++i];
        else if (!strcmp(argv[i], "--optimizer") && i + 1 < argc) a->optimizer = argv[++i];
        else if (!strcmp(argv[i], "--qat")) a->qat = 1;
        else a->config = NULL, i = argc;
    }
    if (!a->config || a->tokens < 2 || a->seqs < 1 || a->seqs > a->tokens / 2 || a->iters < 1 ||
        (strcmp(a->optimizer, "adamw") && strcmp(a->optimizer, "muon"))) {
        fprintf(stderr, "usage: verlc bench %s --config CONFIG.json [--tokens 2048] [--seqs 1] [--iters 3] [--threads N]\n"
                        "       [--device auto|cpu|cuda|cuda:N] [--precision fp32|bf16] [--optimizer adamw|muon] [--qat] "
                        BENCH_PEER_USAGE "\n"
                        "Random weights; --seqs packs the tokens as that many equal sequences. --optimizer muon: "
                        "Megatron-core's Muon\n(its defaults: bf16 Newton-Schulz) on the matrices, its step timed "
                        "apart. --qat: verl's QAT (w4a16,\nits default ignore patterns), its quantize-and-restore pass "
                        "timed apart.\n", name);
        return 2;
    }
    vc_train_device d = { .device = a->device, .param_dtype = a->precision, .device_key = "--device",
                          .precision_key = "--precision" };
    if (vc_train_setup_device(&d, stdout)) {
        fprintf(stderr, "verlc bench %s: %s\n", name, vc_last_error());
        return 1;
    }
    if (a->threads > 0) vc_set_threads(a->threads);
    return 0;
}

static double model_flops(const vc_model *m, const int64_t *cu, int seqs, int backward) {
    double f = 0;
    for (int s = 0; s < seqs; s++) f += vc_perf_forward_flops(vc_model_cfg(m), cu[s + 1] - cu[s], cu[s + 1] - cu[s]);
    return (backward ? 3.0 : 1.0) * f;
}

static void report(const char *what, double flops, double secs, int64_t tokens, const bench_peer *peer) {
    double g = flops / secs / 1e9;
    printf("%s: %lld tokens in %.3f s: %.0f tokens/s, %.2f GFLOP/s\n", what, (long long)tokens, secs, tokens / secs, g);
    if (vc_be()->host_visible) { /* the CPU's peaks (they say nothing about a device) */
        double meas = vc_perf_peak_sgemm(2048), inv = vc_perf_peak_rowinv(2048), theo = vc_perf_peak_theoretical_prec();
        if (!strcmp(vc_perf_peak_theoretical_name(), "fp32"))
            printf("  measured peak (OpenBLAS sgemm 2048^3, the backward's products): %.1f GFLOP/s -> %.1f%%; the "
                   "row-invariant GEMM (the forward's) %.1f\n", meas, meas > 0 ? 100 * g / meas : 0, inv);
        else /* (bf16 dot products take the backward's products too) */
            printf("  measured peak (the row-invariant GEMM 2048^3, all the products): %.1f GFLOP/s -> %.1f%%; OpenBLAS "
                   "sgemm %.1f\n", inv, inv > 0 ? 100 * g / inv : 0, meas);
        if (theo > 0) printf("  theoretical %s peak: %.1f GFLOP/s -> %.1f%%\n", vc_perf_peak_theoretical_name(), theo, 100 * g / theo);
    }
    bench_mfu(flops / secs);
    bench_peer_ratio(peer, tokens / secs);
}

static int setup(const bench_args *a, vc_model **m, int64_t **cu, int32_t **ids) {
    if (vc_model_init_random(a->config, 1, m)) return 1;
    *cu = calloc((size_t)a->seqs + 1, sizeof **cu);
    *ids = calloc((size_t)a->tokens, sizeof **ids);
    if (!*cu || !*ids) return 1;
    int64_t V = vc_cfg_out_vocab(vc_model_cfg(*m)); /* inputs and targets */
    for (int s = 0; s <= a->seqs; s++) (*cu)[s] = a->tokens * s / a->seqs;
    for (int64_t k = 0; k < a->tokens; k++) (*ids)[k] = (int32_t)((k * 2654435761u) % (uint64_t)V);
    return 0;
}

int vc_bench_train(int argc, char **argv) {
    bench_args a;
    int prc = parse(argc, argv, &a, "train");
    if (prc) return prc;
    vc_model *m = NULL;
    int64_t *cu = NULL;
    int32_t *ids = NULL;
    vc_trainer t;
    memset(&t, 0, sizeof t);
    int rc = setup(&a, &m, &cu, &ids);
    vc_trainer_config tc;
    vc_trainer_config_default(&tc);
    tc.micro_bs = a.seqs;
    if (!strcmp(a.optimizer, "muon")) {
        vc_muon_config_default(&tc.adamw.muon);
        tc.adamw.muon.on = 1;
        tc.decay_matrices_only = 1; /* Megatron's: no decay on norms and biases */
    }
    static const char *const IGNORE[] = { "lm_head", "embed_tokens", "re:.*mlp.gate$" }; /* (verl's default) */
    vc_qat_spec qs = { 16, IGNORE, 3 };
    if (!rc && a.qat) rc = vc_model_qat(m, &qs) != VC_OK;
    if (!rc) rc = vc_trainer_init(&t, m, &tc) != VC_OK;
    vc_minibatch b = { a.seqs, cu, ids, NULL };
    vc_step_stats s;
    double best = INFINITY;
    for (int i = 0; !rc && i <= a.iters; i++) { /* iteration 0 warms up */
        double t0 = vc_now();
        rc = vc_trainer_step(&t, &b, NULL, NULL, &s) != VC_OK;
        if (i > 0 && vc_now() - t0 < best) best = vc_now() - t0;
        if (i == 0) vc_cuda_profile_reset(); /* VERLC_CUDA_PROFILE: the timed iterations only */
    }
    if (!rc) {
        printf("model: %lld parameters, %d threads, %d sequence(s), activations %.1f MiB\n",
               (long long)vc_model_param_count(m), vc_get_threads(), a.seqs, vc_graph_peak_bytes(t.g) / 1048576.0);
        double o0 = vc_now(); /* the optimiser's own step, once more */
        rc = vc_adamw_step(&t.opt, 1e-6) != VC_OK || vc_be()->sync() != VC_OK;
        double ot = vc_now() - o0;
        char what[64];
        snprintf(what, sizeof what, "forward+backward+%s", vc_adamw_name(&t.opt));
        report(what, model_flops(m, cu, a.seqs, 1), best, a.tokens, &a.peer);
        printf("  optimizer step (%s): %.3f s, %.1f%% of the training step\n", vc_adamw_name(&t.opt), ot,
               100.0 * ot / best);
        if (a.qat) { /* the pass a step's micro-batches are wrapped in, once more */
            double q0 = vc_now();
            vc_model_weight_copies(m, 1);
            vc_model_weight_copies(m, 0);
            rc = vc_be()->sync() != VC_OK;
            double qt = vc_now() - q0;
            printf("  QAT: %d modules fake-quantized and restored in %.3f s, %.1f%% of the training step\n",
                   vc_model_qat_modules(m), qt, 100.0 * qt / best);
        }
        double nf = vc_adamw_muon_flops(&t.opt);
        if (nf > 0)
            printf("  Newton-Schulz: %.3g TFLOP per step, %.1f GFLOP/s over the optimizer step\n", nf / 1e12,
                   nf / ot / 1e9);
        /* the count behind verl's perf/mfu/actor, for comparison with a verl run's log */
        double peak = vc_perf_promised_peak();
        printf("  verl's FlopsCounter (perf/mfu/actor): %.1f%% of the promised peak (%.1f TFLOP/s)\n",
               100.0 * vc_perf_verl_flops(m, 0, cu, a.seqs) / best / peak, peak / 1e12);
    } else {
        fprintf(stderr, "verlc bench train: %s\n", vc_last_error());
    }
    if (t.g) vc_trainer_free(&t);
    vc_model_free(m);
    free(cu);
    free(ids);
    return rc;
}

/* the log-prob forward is the forward benchmark (forward + fused log-probs) */
int vc_bench_logprob(int argc, char **argv) { return vc_bench_forward(argc, argv); }
