/* verlc bench generate --config CONFIG.json [--batch 1,16,64] [--prompt 128] [--new 128] [--threads N]:
 * decode tokens/s of the rollout engine (random weights) at several batch sizes against the memory
 * bandwidth roofline of this machine: a decode step must read every weight once (plus the KV cache; of a
 * mixture of experts, the experts its rows choose), so roofline tokens/s = bandwidth / bytes_per_step * batch. The bandwidth is measured here with a
 * STREAM-like copy and triad over the thread pool. A larger batch is bound by compute instead: tokens/s <= peak /
 * a token's forward FLOPs, the peak the row-invariant GEMM's measured 2048^3 rate on the CPU, the device's promised
 * one on a GPU; the roofline printed is the lower of the two, marked "mem" or "flop". */
#include "bench_util.h"
#include "device_args.h"
#include "verlc/perf.h"
#include "verlc/pool.h"
#include "verlc/rng.h"
#include "verlc/rollout.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    float *a, *b, *c;
    int64_t n, chunk;
    int kind; /* 0 copy, 1 triad, 2 read (sum) */
    float part[4096];
} stream_ctx;

static void stream_task(void *p, int64_t t) {
    stream_ctx *s = p;
    int64_t i0 = t * s->chunk, i1 = i0 + s->chunk < s->n ? i0 + s->chunk : s->n;
    if (s->kind == 1)
        for (int64_t i = i0; i < i1; i++) s->a[i] = s->b[i] + 3.0f * s->c[i];
    else if (s->kind == 0)
        for (int64_t i = i0; i < i1; i++) s->a[i] = s->b[i];
    else { /* four independent 8-wide sums (GNU vector extension) so the loop is load-bound */
        typedef float v8 __attribute__((vector_size(32)));
        v8 acc[4] = { { 0 } };
        int64_t i = i0;
        for (; i + 32 <= i1; i += 32)
            for (int l = 0; l < 4; l++) {
                v8 x;
                memcpy(&x, s->b + i + 8 * l, sizeof x);
                acc[l] += x;
            }
        v8 tot = (acc[0] + acc[1]) + (acc[2] + acc[3]);
        float sum = 0;
        for (int l = 0; l < 8; l++) sum += tot[l];
        for (; i < i1; i++) sum += s->b[i];
        s->part[t % 4096] = sum; /* keeps the loads alive */
    }
}

/* weight bytes a decode step of B rows reads: all of them but, in each MoE layer, the routed experts no row
 * chooses; with B rows each choosing top_k of n_expert uniformly, E (1 - (1 - k / E)^B) distinct experts are
 * read (shared experts and routers always) */
static double step_weight_bytes(const vc_model_config *c, double all, double wb, int B) {
    if (c->n_expert <= 0 || c->top_k <= 0) return all;
    double E = (double)c->n_expert, active = E * (1.0 - pow(1.0 - (double)c->top_k / E, (double)B));
    double per_expert = wb * 3.0 * (double)c->moe_inter * (double)c->hidden, skipped = 0;
    for (int l = 0; l < c->n_layer; l++)
        if (c->is_moe[l]) skipped += (E - active) * per_expert;
    return all - skipped;
}

/* best of a few passes; bytes counted as STREAM does (2 arrays for copy, 3 for triad, 1 for read) */
static void measure_bandwidth(double bw[3]) {
    int64_t n = 32 << 20; /* 128 MB per array */
    stream_ctx s = { malloc(n * 4), malloc(n * 4), malloc(n * 4), n, 1 << 16, 0, { 0 } };
    bw[0] = bw[1] = bw[2] = 0;
    if (!s.a || !s.b || !s.c) goto out;
    for (int64_t i = 0; i < n; i++) s.a[i] = s.b[i] = s.c[i] = (float)(i & 7);
    for (int k = 0; k < 3; k++) {
        s.kind = k;
        for (int rep = 0; rep < 4; rep++) {
            double t0 = vc_now();
            vc_parallel((n + s.chunk - 1) / s.chunk, stream_task, &s);
            double v = (k == 1 ? 3.0 : k == 0 ? 2.0 : 1.0) * 4.0 * (double)n / (vc_now() - t0);
            if (v > bw[k]) bw[k] = v;
        }
    }
out:
    free(s.a);
    free(s.b);
    free(s.c);
}

/* device memory bandwidth: a d2d copy of a large buffer counts 2 bytes moved per byte (as STREAM copy) */
static void measure_device_bandwidth(double bw[3]) {
    const vc_backend *be = vc_be();
    size_t bytes = (size_t)1 << 30;
    void *a = be->alloc(bytes), *b = be->alloc(bytes);
    bw[0] = bw[1] = bw[2] = 0;
    if (a && b) {
        be->zero(b, bytes);
        for (int rep = 0; rep < 5; rep++) {
            double t0 = vc_now();
            be->d2d(a, b, bytes);
            if (be->sync()) break;
            double v = 2.0 * (double)bytes / (vc_now() - t0);
            if (rep > 0 && v > bw[0]) bw[0] = v;
        }
    }
    be->free(a);
    be->free(b);
}

static int usage(void) {
    fprintf(stderr, "usage: verlc bench generate --config CONFIG.json [--batch 1,16,64] [--prompt 128] [--new 128] "
                    "[--threads N] [--speculative [--num-speculative-tokens K]] " VC_DEVICE_USAGE " " BENCH_PEER_USAGE "\n"
                    "  --speculative: draft with the config's MTP layer (random: few drafts kept, so the figures are\n"
                    "  what drafting costs; the rows a decode step computes count both rows of a drafted sequence)\n");
    return 2;
}

int vc_bench_generate(int argc, char **argv) {
    const char *config = NULL, *batches = "1,16,64", *device = NULL, *precision = NULL;
    int prompt = 128, n_new = 128, spec = 0;
    bench_peer peer = { 0, NULL };
    for (int i = 1; i < argc; i++) {
        if (bench_peer_arg(argc, argv, &i, &peer)) continue;
        if (!strcmp(argv[i], "--speculative")) {
            spec = spec ? spec : 1;
            continue;
        }
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return usage();
        i++;
        if (!strcmp(k, "--config")) config = v;
        else if (!strcmp(k, "--batch")) batches = v;
        else if (!strcmp(k, "--prompt")) prompt = atoi(v);
        else if (!strcmp(k, "--new")) n_new = atoi(v);
        else if (!strcmp(k, "--threads")) vc_set_threads(atoi(v));
        else if (!strcmp(k, "--num-speculative-tokens")) spec = atoi(v) > 0 ? atoi(v) : -1; /* (-1: refused below) */
        else if (!strcmp(k, "--device")) device = v;
        else if (!strcmp(k, "--precision")) precision = v;
        else return usage();
    }
    if (!config || prompt < 1 || n_new < 2 || spec < 0 || spec > VC_SPEC_MAX) return usage();
    int rc = vc_cli_device_apply("bench generate", device, precision);
    if (rc) return rc;
    double bw[3];
    if (vc_device_is_gpu()) measure_device_bandwidth(bw);
    else measure_bandwidth(bw);
    double peak = bw[0] > bw[1] ? bw[0] : bw[1];
    peak = bw[2] > peak ? bw[2] : peak;
    if (vc_device_is_gpu())
        printf("device %s, %s matmul: memory bandwidth (device copy) %.1f GB/s; roofline uses it\n", vc_device_name(),
               vc_cli_precision_name(), peak / 1e9);
    else
        printf("device %s, %s matmul: memory bandwidth (%d threads): copy %.1f GB/s, triad %.1f GB/s, read %.1f GB/s; "
               "roofline uses the best, %.1f GB/s\n", vc_device_name(), vc_cli_precision_name(), vc_get_threads(),
               bw[0] / 1e9, bw[1] / 1e9, bw[2] / 1e9, peak / 1e9);
    vc_model *m = NULL;
    double t0 = vc_now();
    if (vc_model_init_random_ex(config, 1, spec ? 1 : -1, &m)) {
        fprintf(stderr, "verlc: %s\n", vc_last_error());
        return 1;
    }
    const vc_model_config *c = vc_model_cfg(m);
    double fpeak = 0, ftok = vc_perf_forward_flops(c, 1, 1); /* FLOP/s; a decode token's GEMMs */
    if (vc_device_is_gpu()) {
        if (vc_cuda_peak_flops(vc_matmul_precision() == VC_PREC_BF16, &fpeak) != VC_OK) vc_clear_error();
    } else
        fpeak = vc_perf_peak_rowinv(2048) * 1e9;
    /* a step reads every weight except the untied input embedding (only the looked-up rows): as f32, or as bf16
     * with bf16 matmuls (the rollout engine's bf16 weight copies, on a GPU and on the CPU), and the KV pages alike
     * (bf16 pages with bf16 matmuls where a row has an even number of floats) */
    int b16 = vc_matmul_precision() == VC_PREC_BF16;
    double wb = b16 ? 2.0 : 4.0;
    double wbytes = wb * (double)vc_model_param_count(m) - (c->tied ? 0.0 : wb * (double)(vc_cfg_out_vocab(c) * vc_cfg_out_hidden(c)));
    double kv_tok = (b16 && vc_kv_row_floats(m) % 2 == 0 ? 2.0 : 4.0) * (double)vc_kv_row_floats(m) *
                    (double)(c->n_layer + (spec > 0)); /* (drafting: the MTP layer's keys and values too) */
    printf("model %s: %.1f M parameters, %.2f GB of weights read per decode step, %.1f KB of KV per token "
           "(random init %.1f s)\n", config, vc_model_param_count(m) / 1e6, wbytes / 1e9, kv_tok / 1e3, vc_now() - t0);
    if (c->n_expert > 0)
        printf("mixture of experts: a step reads the experts its tokens' routers choose (the expected number of "
               "distinct ones, uniform routing): %.2f GB at batch 1\n", step_weight_bytes(c, wbytes, wb, 1) / 1e9);
    if (fpeak > 0)
        printf("compute: %.2f GFLOP a token, %s %.1f GFLOP/s\n", ftok / 1e9,
               vc_device_is_gpu() ? "the device's promised peak" : "the row-invariant GEMM's 2048^3 rate", fpeak / 1e9);
    printf("%6s %12s %19s %14s %8s\n", "batch", "decode tok/s", "roofline tok/s", "bytes/step", "ratio");
    char *list = strdup(batches);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        int B = atoi(tok);
        if (B < 1) continue;
        int32_t *ids = malloc((size_t)B * prompt * sizeof *ids);
        vc_rollout_request *rq = malloc((size_t)B * sizeof *rq);
        for (int b = 0; b < B; b++) {
            for (int t = 0; t < prompt; t++) ids[b * prompt + t] = (int32_t)vc_rng_below((uint64_t)c->vocab, 7, (uint64_t)b, 0, (uint64_t)t);
            rq[b] = (vc_rollout_request){ ids + (int64_t)b * prompt, prompt, 1, (uint64_t)b };
        }
        /* linear-attention states: a slot per running sequence (and two more) within half of the budget */
        double states = 2.0 * (double)(B + 2) * (double)vc_lin_state_floats(c) * sizeof(float);
        vc_rollout_opts o = { .kv_budget_bytes = kv_tok * (double)B * (prompt + n_new + 16) * 1.5 + 1e6 + states,
                              .max_batch = B, .prefill_chunk = B * prompt, .speculative = spec };
        vc_sampling sp = { .temperature = 1.0f, .top_p = 1.0f, .max_new_tokens = n_new, .seed = 1 };
        vc_rollout_engine *e = NULL;
        vc_rollout_sample *out = NULL;
        int n_out = 0;
        vc_rollout_stats s;
        if (vc_rollout_new(m, &o, &e) || vc_rollout_generate(e, rq, B, &sp, &out, &n_out)) {
            fprintf(stderr, "verlc: %s\n", vc_last_error());
            rc = 1;
        } else {
            vc_rollout_last_stats(e, &s);
            double tps = s.decode_only_seconds > 0 ? s.decode_only_tokens / s.decode_only_seconds : 0;
            double bytes = step_weight_bytes(c, wbytes, wb, B) + kv_tok * B * (prompt + n_new / 2.0);
            double roof = peak / bytes * B, froof = fpeak > 0 && ftok > 0 ? fpeak / ftok : 0;
            int flop = froof > 0 && froof < roof;
            if (flop) roof = froof;
            printf("%6d %12.2f %14.2f %4s %12.2f GB %7.0f%%", B, tps, roof, flop ? "flop" : "mem", bytes / 1e9,
                   100.0 * tps / roof);
            if (s.weight_copy_hits) printf("  (%lld GEMM operands from bf16 weight copies)", (long long)s.weight_copy_hits);
            if (s.graph_captures || s.graph_replays)
                printf("  (CUDA graphs: %lld decode steps captured, %lld replayed)", (long long)s.graph_captures,
                       (long long)s.graph_replays);
            printf("\n");
            if (spec)
                printf("  drafting: %lld drafts, %lld kept; %lld steps for %lld tokens; whole call %.1f tokens/s\n",
                       (long long)s.draft_tokens, (long long)s.draft_accepted, (long long)s.steps, (long long)s.generated,
                       s.seconds > 0 ? (double)s.generated / s.seconds : 0.0);
            /* the peer's figure is for its own whole generate call: prompt processing included */
            double all = s.seconds > 0 ? (double)s.generated / s.seconds : 0;
            if (peer.tps > 0) printf("  whole call %.0f tokens/s (prefill included):", all);
            bench_peer_ratio(&peer, all);
            fflush(stdout);
        }
        vc_rollout_samples_free(out, n_out);
        vc_rollout_free(e);
        free(ids);
        free(rq);
        if (rc) break;
    }
    free(list);
    vc_model_free(m);
    return rc;
}
