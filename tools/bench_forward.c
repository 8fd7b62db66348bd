/* verlc bench forward --config CONFIG.json [--tokens N] [--seq-len L] [--reps R] [--threads T]
 *   [--device D] [--precision f32|bf16] */
#include "bench_util.h"
#include "cli.h"
#include "device_args.h"
#include "verlc/cuda.h"
#include "verlc/model.h"
#include "verlc/ops.h"
#include "verlc/perf.h"
#include "verlc/pool.h"
#include <stdlib.h>
#include <string.h>

/* GFLOP/s of the active backend's GEMM on n x n x n (device memory; waits for the queue) */
static double backend_sgemm_gflops(int n) {
    const vc_backend *be = vc_be();
    size_t bytes = (size_t)n * (size_t)n * sizeof(float);
    float *a = be->alloc(bytes), *b = be->alloc(bytes), *c = be->alloc(bytes);
    double best = 0;
    if (a && b && c) {
        be->zero(a, bytes);
        be->zero(b, bytes);
        for (int r = 0; r < 4; r++) {
            double t0 = vc_now();
            be->gemm(0, 1, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
            if (be->sync()) break;
            double g = 2.0 * n * n * (double)n / (vc_now() - t0) * 1e-9;
            if (r > 0 && g > best) best = g; /* the first call warms up */
        }
    }
    be->free(a);
    be->free(b);
    be->free(c);
    return best;
}

#define FWD_USAGE "usage: verlc bench forward --config CONFIG.json [--tokens N] [--seq-len L] [--reps R] [--threads T] " \
                  VC_DEVICE_USAGE " " BENCH_PEER_USAGE "\n"

int vc_bench_forward(int argc, char **argv) {
    const char *config = NULL, *device = NULL, *precision = NULL;
    int64_t tokens = 2048, seq_len = 0;
    int reps = 2, threads = 0;
    bench_peer peer = { 0, NULL };
    for (int i = 1; i < argc; i++) {
        if (bench_peer_arg(argc, argv, &i, &peer)) continue;
        if (!strcmp(argv[i], "--config") && i + 1 < argc) config = argv[++i];
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) tokens = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--seq-len") && i + 1 < argc) seq_len = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--device") && i + 1 < argc) device = argv[++i];
        else if (!strcmp(argv[i], "--precision") && i + 1 < argc) precision = argv[++i];
        else {
            fprintf(stderr, FWD_USAGE);
            return 2;
        }
    }
    if (!config || tokens <= 0) {
        fprintf(stderr, FWD_USAGE);
        return 2;
    }
    if (threads > 0) vc_set_threads(threads);
    int rc = vc_cli_device_apply("bench forward", device, precision);
    if (rc) return rc;
    if (seq_len <= 0 || seq_len > tokens) seq_len = tokens;
    vc_model *m;
    if (vc_model_init_random(config, 1, &m)) {
        fprintf(stderr, "verlc: %s\n", vc_last_error());
        return 1;
    }
    const vc_model_config *c = vc_model_cfg(m);
    int n_seq = (int)((tokens + seq_len - 1) / seq_len);
    int64_t *cu = calloc((size_t)n_seq + 1, sizeof *cu);
    int32_t *ids = malloc((size_t)tokens * 4), *tgt = malloc((size_t)tokens * 4);
    for (int s = 0; s < n_seq; s++) cu[s + 1] = cu[s] + (tokens - cu[s] < seq_len ? tokens - cu[s] : seq_len);
    for (int64_t t = 0; t < tokens; t++) ids[t] = (int32_t)((t * 2654435761u) % (uint64_t)vc_cfg_out_vocab(c));
    for (int64_t t = 0; t < tokens; t++) tgt[t] = t + 1 < tokens ? ids[t + 1] : -1;
    vc_batch b = { n_seq, cu, ids };
    vc_graph *g = vc_graph_new();
    vc_graph_set_grad(g, 0);
    double best = 1e30;
    /* bf16 weight copies made once, as the trainer's log-prob passes make them once for all their micro-batches */
    vc_model_weight_copies(m, 1);
    for (int r = 0; r < reps + 1; r++) { /* first run warms up */
        vc_graph_reset(g);
        double t0 = vc_now();
        vc_tensor *h = vc_model_forward(m, g, &b, NULL), *lp = NULL;
        if (!h || vc_model_logprobs(m, g, h, tgt, &lp, NULL) || vc_be()->sync()) {
            fprintf(stderr, "verlc: %s\n", vc_last_error());
            return 1;
        }
        double dt = vc_now() - t0;
        if (r > 0 && dt < best) best = dt;
        if (r == 0) vc_cuda_profile_reset(); /* VERLC_CUDA_PROFILE: the timed runs only */
    }
    int64_t hits = vc_model_weight_copies(m, 0);
    double flops = vc_perf_forward_flops(c, tokens, seq_len);
    double gf = flops / best * 1e-9;
    printf("bench forward: %s, %lld params, %lld tokens (%d x %lld), device %s, %s matmul, %d threads\n",
           c->model_type, (long long)vc_model_param_count(m), (long long)tokens, n_seq, (long long)seq_len,
           vc_device_name(), vc_cli_precision_name(), vc_get_threads());
    printf("  time %.3f s  %.0f tokens/s  %.1f GFLOP/s (%.2f TFLOP per forward)", best, tokens / best, gf, flops * 1e-12);
    if (hits) printf("  (%lld GEMM operands from bf16 weight copies)", (long long)hits);
    printf("\n");
    if (vc_be()->host_visible) {
        double peak_t = vc_perf_peak_theoretical_prec(), peak_g = vc_perf_peak_sgemm(2048), peak_r = vc_perf_peak_rowinv(2048);
        printf("  peak: theoretical %.1f GFLOP/s; 2048^3 products: OpenBLAS sgemm %.1f GFLOP/s (%s kernels), the "
               "row-invariant GEMM (the forward's) %.1f\n", peak_t, peak_g, vc_blas_core(), peak_r);
        printf("  %.1f%% of the theoretical %s peak, %.1f%% of the measured sgemm, %.1f%% of the row-invariant GEMM\n",
               peak_t > 0 ? 100 * gf / peak_t : 0.0, vc_perf_peak_theoretical_name(), peak_g > 0 ? 100 * gf / peak_g : 0.0,
               peak_r > 0 ? 100 * gf / peak_r : 0.0);
    } else {
        /* the CPU peaks say nothing about a device: measure its own GEMM at this precision */
        double peak_d = backend_sgemm_gflops(4096);
        printf("  peak: %s GEMM 4096^3 (%s) %.1f GFLOP/s; %.1f%% of it\n", vc_device_name(), vc_cli_precision_name(),
               peak_d, peak_d > 0 ? 100 * gf / peak_d : 0.0);
        bench_mfu(flops / best);
    }
    bench_peer_ratio(&peer, tokens / best);
    printf("  step arena peak %.1f MB\n", vc_graph_peak_bytes(g) / 1e6);
    vc_graph_free(g);
    free(cu);
    free(ids);
    free(tgt);
    vc_model_free(m);
    return 0;
}
