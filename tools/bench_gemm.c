/* verlc bench gemm --config CONFIG.json [--rows 256,8192] [--iters N] [--device D] [--precision P]
 * The GEMMs of one decoder layer and the LM head of a model's shape, as the engine issues them (row-major y = x W^T
 * with x [M, K] in f32 and W [N, K]; in training also dx = dy W and dW += dy^T x), for each row count M: milliseconds
 * and TFLOP/s per shape, the layer's total against the device's own GEMM peak (4096^3; 1024^3 off the GPU), and, with
 * bf16 matmuls, the cost of rounding an operand once (`operand_hold`: what q/k/v's input and a linear's output gradient
 * pay) beside what it saves. With bf16 the weights are registered as bf16 copies first (on cuda and on the cpu), as a
 * trainer step or a generate call does. Last, gate and up as one GEMM (N = 2 I: vc_op_gated_mlp) against the two, and q_proj with a bias
 * (in the GEMM's epilogue, and copied in first), and on cuda with bf16 each forward shape through cuBLAS alone with
 * operands already in bf16, C in f32 and in bf16. For a MoE model (cuda, bf16) its grouped expert GEMMs too (bench_moe).
 * Random data; per call, the best of --iters runs of 10 calls in a
 * row, after one warm-up. */
#include "cli.h"
#include "device_args.h"
#include "backend/cpu/cpu.h"
#include "tensor/backend.h"
#include "verlc/core.h"
#include "verlc/cuda.h"
#include "verlc/json.h"
#include "verlc/model.h"
#include "verlc/rng.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROWS 8

typedef struct {
    const char *config, *device, *precision;
    int64_t rows[MAX_ROWS];
    int n_rows, iters, backward, moe_only;
} gemm_opts;

static void usage(FILE *f) {
    fprintf(f, "usage: verlc bench gemm --config CONFIG.json [--rows M[,M...] (256,8192)] [--iters N (5)] [--backward] [--moe] "
               VC_DEVICE_USAGE "\n");
}

static int parse(int argc, char **argv, gemm_opts *o) {
    *o = (gemm_opts){ .rows = { 256, 8192 }, .n_rows = 2, .iters = 5 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 1;
        }
        if (!strcmp(a, "--backward")) {
            o->backward = 1;
            continue;
        }
        if (!strcmp(a, "--moe")) { /* the grouped expert GEMMs alone */
            o->moe_only = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "verlc bench gemm: %s needs a value\n", a);
            return -1;
        }
        i++;
        if (!strcmp(a, "--config")) o->config = v;
        else if (!strcmp(a, "--device")) o->device = v;
        else if (!strcmp(a, "--precision")) o->precision = v;
        else if (!strcmp(a, "--iters") && atoi(v) > 0 && atoi(v) < 10000) o->iters = atoi(v);
        else if (!strcmp(a, "--rows")) {
            o->n_rows = 0;
            for (const char *p = v; *p && o->n_rows < MAX_ROWS;) {
                char *end;
                long long m = strtoll(p, &end, 10);
                if (end == p || m < 1 || m > (1LL << 24)) {
                    fprintf(stderr, "verlc bench gemm: --rows %s: expected row counts 1..16777216, comma-separated\n", v);
                    return -1;
                }
                o->rows[o->n_rows++] = m;
                p = *end == ',' ? end + 1 : end;
                if (*end && *end != ',') {
                    fprintf(stderr, "verlc bench gemm: --rows %s: expected row counts, comma-separated\n", v);
                    return -1;
                }
            }
        } else {
            fprintf(stderr, "verlc bench gemm: bad option %s %s\n", a, v);
            usage(stderr);
            return -1;
        }
    }
    if (!o->config) {
        usage(stderr);
        return -1;
    }
    return 0;
}

/* n random floats in [-1, 1) in backend memory (NULL: out of memory) */
static float *upload(size_t n, uint64_t salt) {
    float *h = malloc(sizeof(float) * (n ? n : 1)), *d = vc_be()->alloc(sizeof(float) * (n ? n : 1));
    if (!h || !d) {
        free(h);
        if (d) vc_be()->free(d);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) h[i] = 2.0f * vc_rng_uniform(11, salt, i, 0) - 1.0f;
    vc_be()->h2d(d, h, sizeof(float) * n);
    free(h);
    return d;
}

typedef struct {
    const char *name;
    int64_t N, K; /* W [N, K] */
} lin;

/* the best seconds per call of `iters` runs of CALLS back-to-back calls of fn (one wait each: a small GEMM's time is
 * then the device's, or the host's rate of issuing it, not a round trip), after a warm-up; negative on an error */
#define CALLS 10
typedef void (*run_fn)(void *ctx);
static double best_of(run_fn fn, void *ctx, int iters) {
    double best = INFINITY;
    for (int it = 0; it <= iters; it++) {
        if (vc_be()->sync()) return -1;
        double t0 = vc_now();
        for (int c = 0; c < CALLS; c++) fn(ctx);
        if (vc_be()->sync()) return -1;
        double t = (vc_now() - t0) / CALLS;
        if (it && t < best) best = t;
    }
    return best;
}

typedef struct {
    int kind; /* 0: y = x W^T, 1: dx = dy W, 2: dW += dy^T x, 3: hold and release x, 4: y = x W^T + b (b: dy) */
    int64_t M, N, K;
    const float *x, *W, *dy;
    float *y;
} job;

static void run_job(void *p) {
    const job *j = p;
    const vc_backend *B = vc_be();
    if (j->kind == 0) B->gemm(0, 1, j->M, j->N, j->K, 1.0f, j->x, j->K, j->W, j->K, 0.0f, j->y, j->N);
    else if (j->kind == 1) B->gemm(0, 0, j->M, j->K, j->N, 1.0f, j->dy, j->N, j->W, j->K, 0.0f, j->y, j->K);
    else if (j->kind == 2) B->gemm(1, 0, j->N, j->K, j->M, 1.0f, j->dy, j->N, j->x, j->K, 1.0f, j->y, j->K);
    else if (j->kind == 4 && B->linear_bias) B->linear_bias(j->M, j->N, j->K, j->x, j->W, j->dy, j->y);
    else if (j->kind == 4) { /* as vc_op_linear without the backend entry */
        B->rows_copy(j->y, j->N, j->dy, 0, j->M, j->N, 1, 0);
        B->gemm(0, 1, j->M, j->N, j->K, 1.0f, j->x, j->K, j->W, j->K, 1.0f, j->y, j->N);
    } else if (B->operand_hold) {
        B->operand_hold(j->x, j->M, j->K, 1);
        B->operand_hold(j->x, j->M, j->K, 0);
    }
}

/* one shape at M rows: prints its line, adds its seconds and flops */
static int bench_shape(const lin *l, int64_t M, const gemm_opts *o, float *x, float *dy, float *W, float *y,
                       double *sec, double *flops) {
    const char *what[3] = { "y = x W^T", "dx = dy W", "dW += dy^T x" };
    for (int kind = 0; kind < (o->backward ? 3 : 1); kind++) {
        job j = { kind, M, l->N, l->K, x, W, dy, y };
        double t = best_of(run_job, &j, o->iters);
        if (t < 0) return 1;
        double f = 2.0 * (double)M * l->N * l->K;
        printf("  %-9s %-13s M %-6lld N %-6lld K %-6lld %9.3f ms %8.2f TFLOP/s\n", l->name, what[kind], (long long)M,
               (long long)l->N, (long long)l->K, t * 1e3, f / t * 1e-12);
        *sec += t;
        *flops += f;
    }
    return 0;
}

/* q_proj with its bias (Qwen2's q, k and v have one): in the GEMM's epilogue (cuBLASLt) and copied into y first
 * (VERLC_CUDA_LT=0), beside the GEMM without a bias */
static int bench_bias(const lin *q, int64_t M, int iters, float *x, float *W, float *b, float *y) {
    job j = { 4, M, q->N, q->K, x, W, b, y }, j0 = { 0, M, q->N, q->K, x, W, NULL, y };
    double te = best_of(run_job, &j, iters);
    setenv("VERLC_CUDA_LT", "0", 1);
    double tc = best_of(run_job, &j, iters);
    unsetenv("VERLC_CUDA_LT");
    double t0 = best_of(run_job, &j0, iters);
    if (te < 0 || tc < 0 || t0 < 0) return 1;
    printf("  %s + bias: %.3f ms in the GEMM's epilogue, %.3f ms copied into y first (no bias: %.3f ms)\n", q->name,
           te * 1e3, tc * 1e3, t0 * 1e3);
    return 0;
}

/* rounding x [M, K] to bf16 once (operand_hold) against the bytes it moves */
static int bench_hold(int64_t M, int64_t K, float *x, int iters) {
    if (!vc_be()->operand_hold || vc_matmul_precision() != VC_PREC_BF16) return 0;
    job j = { 3, M, 0, K, x, NULL, NULL, NULL };
    double t = best_of(run_job, &j, iters);
    if (t < 0) return 1;
    double bytes = 6.0 * (double)M * K; /* f32 in, bf16 out */
    printf("  operand hold of [%lld, %lld] (round to bf16 once, then release): %.3f ms, %.0f GB/s\n", (long long)M,
           (long long)K, t * 1e3, bytes / t * 1e-9);
    return 0;
}

/* cuBLAS alone on operands already in bf16 (no rounding pass, no bf16 copy lookup), C in f32 as the engine writes it
 * and in bf16 (what an autocast linear writes): how far the engine's GEMMs are from the library's, and what an f32 C
 * costs. cuda with bf16 matmuls only. */
typedef struct {
    int64_t M, N, K;
    const uint16_t *a, *w;
    void *c;
    int c16;
} raw_job;

static void run_raw(void *p) {
    const raw_job *j = p;
    vc_cuda_gemm_bf16_out(0, 1, j->M, j->N, j->K, 1.0f, j->a, j->K, j->w, j->K, 0.0f, j->c, j->c16, j->N);
}

/* cuBLASLt's first 8 ranked algorithms for the shape (C f32), each timed: whether its heuristic's first choice (what
 * cuBLASLt runs) is the fastest, or how far from it */
static int lt_ranked(int64_t M, int64_t N, int64_t K, const uint16_t *a, const uint16_t *w, float *y, int iters,
                     double f) {
    double ms[8];
    int n = 0, best = -1;
    if (vc_cuda_gemm_algos(M, N, K, a, w, y, 8, iters, ms, &n)) return 1;
    if (n < 1) return 0;
    printf("      cuBLASLt's ranked algorithms (ms):");
    for (int i = 0; i < n; i++) {
        printf(ms[i] < 0 ? " refused" : " %.3f", ms[i]);
        if (ms[i] > 0 && (best < 0 || ms[i] < ms[best])) best = i;
    }
    if (best >= 0 && ms[0] > 0)
        printf("; the first %.2f TFLOP/s, the best (#%d) %.2f TFLOP/s, %.2fx\n", f / (ms[0] * 1e-3) * 1e-12, best,
               f / (ms[best] * 1e-3) * 1e-12, ms[0] / ms[best]);
    else printf("\n");
    return 0;
}

static int bench_raw(const lin *L, int nl, int64_t M, int iters, const float *x, float *const *Ws, float *y) {
    if (strcmp(vc_be()->name, "cuda") || vc_matmul_precision() != VC_PREC_BF16) return 0;
    int64_t maxK = 0, maxW = 0;
    for (int i = 0; i < nl; i++) {
        maxK = L[i].K > maxK ? L[i].K : maxK;
        maxW = L[i].N * L[i].K > maxW ? L[i].N * L[i].K : maxW;
    }
    uint16_t *a = vc_cuda_malloc(2 * (size_t)(M * maxK)), *w = vc_cuda_malloc(2 * (size_t)maxW);
    int rc = !a || !w;
    if (!rc) printf("  cuBLAS alone, operands already bf16 (ms and TFLOP/s with C in f32 | C in bf16):\n");
    for (int i = 0; !rc && i < nl; i++) {
        double t[2], f = 2.0 * (double)M * L[i].N * L[i].K;
        if (vc_cuda_f32_to_bf16(a, x, (size_t)(M * L[i].K)) || vc_cuda_f32_to_bf16(w, Ws[i], (size_t)(L[i].N * L[i].K))) {
            rc = 1;
            break;
        }
        for (int c16 = 0; c16 < 2 && !rc; c16++) {
            raw_job j = { M, L[i].N, L[i].K, a, w, y, c16 };
            rc = (t[c16] = best_of(run_raw, &j, iters)) < 0;
        }
        if (!rc)
            printf("    %-9s M %-6lld N %-6lld K %-6lld %9.3f ms %8.2f | %9.3f ms %8.2f\n", L[i].name, (long long)M,
                   (long long)L[i].N, (long long)L[i].K, t[0] * 1e3, f / t[0] * 1e-12, t[1] * 1e3, f / t[1] * 1e-12);
        if (!rc) rc = lt_ranked(M, L[i].N, L[i].K, a, w, y, iters, f);
    }
    if (a) vc_cuda_free(a);
    if (w) vc_cuda_free(w);
    return rc;
}

/* ---- a MoE model's grouped expert GEMMs (cuda with bf16 matmuls): M tokens x top_k choices spread evenly over the
 * experts (choice i to expert i mod E, as balanced routing gives), gate/up and down as the forward issues them (the
 * gathered inputs and gated activations in bf16, the weights through their bf16 copies), and with --backward the
 * inputs' gradients (f32 output gradients, [k][n] weights) and the weights' (wgrad), each on the mma.sync kernel
 * and on the WMMA one (VERLC_CUDA_MOE_MMA=0) ---- */
typedef struct {
    int wgrad, tb, a16;
    int64_t E, R, N, K;
    const int64_t *off;
    const void *A;
    const float *B;
    const uint16_t *B16; /* wgrad: its bf16 operand */
    float *C;
} moe_job;

static void run_moe(void *p) {
    const moe_job *j = p;
    if (j->wgrad) vc_be()->gemm_wgrad_grouped(j->E, j->off, j->N, j->K, 1.0f, j->A, j->N, j->B16, 1, j->K, 1.0f, j->C);
    else vc_be()->gemm_rows_grouped(j->tb, j->E, j->off, j->R, j->N, j->K, 1.0f, j->A, j->a16, j->K, j->B, 0.0f, j->C,
                                    j->N);
}

static int moe_line(const char *name, moe_job *j, int iters) {
    double t[2], f = 2.0 * (double)j->R * j->N * j->K;
    t[0] = best_of(run_moe, j, iters);
    setenv("VERLC_CUDA_MOE_MMA", "0", 1);
    t[1] = best_of(run_moe, j, iters);
    unsetenv("VERLC_CUDA_MOE_MMA");
    if (t[0] < 0 || t[1] < 0) return 1;
    printf("  %-26s rows %-7lld N %-6lld K %-6lld %9.3f ms %8.2f TFLOP/s | WMMA %9.3f ms %8.2f TFLOP/s (%.2fx)\n", name,
           (long long)j->R, (long long)j->N, (long long)j->K, t[0] * 1e3, f / t[0] * 1e-12, t[1] * 1e3,
           f / t[1] * 1e-12, t[1] / t[0]);
    return 0;
}

static int bench_moe(const vc_model_config *c, const gemm_opts *o) {
    const int64_t E = c->n_expert, H = c->hidden, I = c->moe_inter > 0 ? c->moe_inter : c->inter, K = c->top_k;
    if (E < 2 || K < 1 || I < 1 || strcmp(vc_be()->name, "cuda") || vc_matmul_precision() != VC_PREC_BF16) return 0;
    int64_t maxM = 0;
    for (int r = 0; r < o->n_rows; r++) maxM = o->rows[r] > maxM ? o->rows[r] : maxM;
    const int64_t maxR = maxM * K, W = E * I * H, wide = I > H ? I : H;
    float *Wu = upload((size_t)W, 31), *Wd = upload((size_t)W, 32), *a = upload((size_t)(maxR * wide), 33);
    float *C = vc_be()->alloc(sizeof(float) * (size_t)(maxR * wide > E * I * H ? maxR * wide : E * I * H));
    uint16_t *a16 = vc_cuda_malloc(2 * (size_t)(maxR * wide));
    int64_t *off = vc_be()->alloc(sizeof(int64_t) * (size_t)(E + 1)), *h = malloc(sizeof(int64_t) * (size_t)(E + 1));
    int rc = !Wu || !Wd || !a || !C || !a16 || !off || !h || vc_cuda_f32_to_bf16(a16, a, (size_t)(maxR * wide));
    const float *w[2] = { Wu, Wd };
    int64_t rows[2] = { E * I, E * H }, cols[2] = { H, I };
    int copies = !rc && vc_cuda_bf16_shadow_add(w, rows, cols, 2) == VC_OK;
    if (!rc)
        printf("grouped expert GEMMs: %lld experts, top %lld, hidden %lld, expert MLP %lld (mma.sync | WMMA)\n",
               (long long)E, (long long)K, (long long)H, (long long)I);
    for (int r = 0; !rc && r < o->n_rows; r++) {
        const int64_t R = o->rows[r] * K;
        for (int64_t e = 0; e <= E; e++) h[e] = e * (R / E) + (e < R % E ? e : R % E); /* i mod E: the first R % E get one more */
        vc_be()->h2d(off, h, sizeof(int64_t) * (size_t)(E + 1));
        printf("tokens %lld:\n", (long long)o->rows[r]);
        moe_job up = { 0, 1, 1, E, R, I, H, off, a16, Wu, NULL, C }, down = { 0, 1, 1, E, R, H, I, off, a16, Wd, NULL, C };
        rc = moe_line("gate (or up) x W^T", &up, o->iters) || moe_line("down a W^T", &down, o->iters);
        if (!rc && o->backward) {
            moe_job dx = { 0, 0, 0, E, R, H, I, off, a, Wu, NULL, C }, dw = { 1, 0, 0, E, R, I, H, off, a, NULL, a16, C };
            rc = moe_line("dx = dG W (f32 dG)", &dx, o->iters) || moe_line("dW += dG^T x (wgrad)", &dw, o->iters);
        }
    }
    if (copies == 1) vc_cuda_bf16_shadow_drop();
    if (copies == 2) vc_cpu_bf16_copies_drop();
    if (Wu) vc_be()->free(Wu);
    if (Wd) vc_be()->free(Wd);
    if (a) vc_be()->free(a);
    if (C) vc_be()->free(C);
    if (a16) vc_cuda_free(a16);
    if (off) vc_be()->free(off);
    free(h);
    return rc;
}

static double peak_tflops(int iters, int64_t n) {
    float *a = upload((size_t)(n * n), 21), *b = upload((size_t)(n * n), 22), *c = vc_be()->alloc(sizeof(float) * n * n);
    double t = -1;
    if (a && b && c) {
        job j = { 0, n, n, n, a, b, NULL, c };
        t = best_of(run_job, &j, iters < 3 ? iters : 3);
    }
    if (a) vc_be()->free(a);
    if (b) vc_be()->free(b);
    if (c) vc_be()->free(c);
    return t > 0 ? 2.0 * n * n * n / t * 1e-12 : 0;
}

int vc_bench_gemm(int argc, char **argv) {
    gemm_opts o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc > 0 ? 0 : 2;
    cJSON *root = NULL;
    vc_model_config c;
    if (vc_json_load_file(o.config, &root) || vc_config_parse_model(root, o.config, &c)) {
        fprintf(stderr, "verlc bench gemm: %s\n", vc_last_error());
        cJSON_Delete(root);
        return 1;
    }
    cJSON_Delete(root);
    if ((rc = vc_cli_device_apply("bench gemm", o.device, o.precision))) return rc;
    if (o.moe_only && (c.n_expert < 2 || c.top_k < 1)) {
        fprintf(stderr, "verlc bench gemm: --moe: %s has no routed experts\n", o.config);
        return 2;
    }
    if (o.moe_only && (strcmp(vc_be()->name, "cuda") || vc_matmul_precision() != VC_PREC_BF16)) {
        fprintf(stderr, "verlc bench gemm: --moe times the CUDA grouped GEMMs: it needs --device cuda --precision bf16\n");
        return 2;
    }
    int64_t H = c.hidden, hd = c.head_dim, I = c.moe_inter > 0 && c.inter <= 0 ? c.moe_inter : c.inter;
    lin L[] = { { "q_proj", c.n_head * hd, H }, { "k_proj", c.n_kv_head * hd, H }, { "v_proj", c.n_kv_head * hd, H },
                { "o_proj", H, c.n_head * hd }, { "gate_proj", I, H }, { "up_proj", I, H }, { "down_proj", H, I },
                { "lm_head", c.vocab, H }, { "gate_up", 2 * I, H } };
    int nl = (int)(sizeof L / sizeof L[0]), GU = nl - 1; /* the fused one last: not in the layer's sums */
    int64_t maxM = 0, maxNK = 0, maxW = 0;
    for (int r = 0; r < o.n_rows; r++) maxM = o.rows[r] > maxM ? o.rows[r] : maxM;
    for (int i = 0; i < nl; i++) {
        maxNK = L[i].N > maxNK ? L[i].N : maxNK;
        maxNK = L[i].K > maxNK ? L[i].K : maxNK;
        maxW = L[i].N * L[i].K > maxW ? L[i].N * L[i].K : maxW;
    }
    printf("bench gemm: %s (hidden %lld, %lld/%lld heads of %lld, MLP %lld, vocab %lld), device %s, %s matmuls\n",
           o.config, (long long)H, (long long)c.n_head, (long long)c.n_kv_head, (long long)hd, (long long)I,
           (long long)c.vocab, vc_device_name(), vc_cli_precision_name());
    const int64_t pn = strcmp(vc_be()->name, "cuda") ? 1024 : 4096; /* a CPU's peak: a smaller cube */
    double peak = peak_tflops(o.iters, pn);
    printf("  GEMM peak here (%lld^3, the same path): %.2f TFLOP/s\n", (long long)pn, peak);
    float *Ws[9] = { 0 }, *x = upload((size_t)(maxM * maxNK), 1), *dy = upload((size_t)(maxM * maxNK), 2);
    size_t ny = (size_t)(maxM * maxNK > maxW ? maxM * maxNK : maxW); /* y [M, N], dx [M, K] or dW [N, K] */
    float *y = vc_be()->alloc(sizeof(float) * ny);
    int ok = x && dy && y;
    for (int i = 0; ok && i < nl; i++) ok = (Ws[i] = upload((size_t)(L[i].N * L[i].K), 10 + (uint64_t)i)) != NULL;
    int copies = 0; /* 1: the GPU's, 2: the CPU's */
    if (ok && vc_matmul_precision() == VC_PREC_BF16 && (!strcmp(vc_be()->name, "cuda") || vc_be() == vc_backend_cpu())) {
        const float *w[9];
        int64_t rows[9], cols[9];
        for (int i = 0; i < nl; i++) w[i] = Ws[i], rows[i] = L[i].N, cols[i] = L[i].K;
        copies = vc_be() == vc_backend_cpu() ? (vc_cpu_bf16_copies_add(w, rows, cols, nl) == VC_OK) * 2
                                             : vc_cuda_bf16_shadow_add(w, rows, cols, nl) == VC_OK;
        if (!copies) vc_clear_error();
    }
    vc_status st = ok ? VC_OK : VC_ERR_NOMEM;
    for (int r = 0; !st && !o.moe_only && r < o.n_rows; r++) {
        int64_t M = o.rows[r];
        double sec = 0, fl = 0, lsec = 0, lfl = 0, g0 = 0, gsec = 0, gusec = 0, gufl = 0;
        printf("rows %lld%s:\n", (long long)M, copies ? " (weights read from their bf16 copies)" : "");
        for (int i = 0; !st && i < nl; i++) {
            if (i == GU - 1) lsec = sec, lfl = fl; /* the layer's, before the LM head */
            if (i == 4) g0 = sec;
            if (i == 6) gsec = sec - g0; /* gate_proj's and up_proj's */
            double *s_ = i == GU ? &gusec : &sec, *f_ = i == GU ? &gufl : &fl;
            if (bench_shape(&L[i], M, &o, x, dy, Ws[i], y, s_, f_) && !(st = vc_be()->sync())) st = VC_ERR_INTERNAL;
        }
        if (!st)
            printf("  gate and up: %.3f ms as one GEMM, %.3f ms as two (what vc_op_gated_mlp saves a layer)\n",
                   gusec * 1e3, gsec * 1e3);
        if (!st && bench_bias(&L[0], M, o.iters, x, Ws[0], dy, y) && !(st = vc_be()->sync())) st = VC_ERR_INTERNAL;
        if (!st && (bench_hold(M, H, x, o.iters) || bench_hold(M, I, dy, o.iters)) && !(st = vc_be()->sync()))
            st = VC_ERR_INTERNAL;
        if (!st && bench_raw(L, nl, M, o.iters, x, Ws, y) && !(st = vc_be()->sync())) st = VC_ERR_INTERNAL;
        if (!st)
            printf("  one layer: %.3f ms, %.1f TFLOP/s (%.0f%% of the peak above); with the LM head %.3f ms\n", lsec * 1e3,
                   lfl / lsec * 1e-12, peak > 0 ? 100.0 * lfl / lsec * 1e-12 / peak : 0.0, sec * 1e3);
    }
    if (copies == 1) vc_cuda_bf16_shadow_drop();
    if (copies == 2) vc_cpu_bf16_copies_drop();
    if (!st && bench_moe(&c, &o) && !(st = vc_be()->sync())) st = VC_ERR_INTERNAL;
    if (st) fprintf(stderr, "verlc bench gemm: %s\n", ok ? vc_last_error() : "out of memory for the operands");
    for (int i = 0; i < nl; i++)
        if (Ws[i]) vc_be()->free(Ws[i]);
    if (x) vc_be()->free(x);
    if (dy) vc_be()->free(dy);
    if (y) vc_be()->free(y);
    return st ? 1 : 0;
}
