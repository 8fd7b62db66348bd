/* Mamba 1's selective scan with shared starts on the CPU (vc_ssm_desc.from): a prompt computed once and its responses
 * starting from its final state give the same outputs, bit for bit, as each response run after the whole prompt, and
 * the same gradients to rounding (the prompt rows' summed over the responses), with prompts shorter and longer than
 * the scan's stretches between kept states (256 rows), on 1 and 2 threads; a chain of starts (`from` pointing at a
 * sequence that starts from another) computes nothing and fails the sync. */
#include "../../src/backend/cpu/cpu.h"
#include "tensor/backend.h"
#include "verlc/pool.h"
#include "vc_test.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { return vc_test_frand(&rng); } /* [-1, 1) */

enum { I = 70, N = 5, NR = 3 }; /* 70 channels: a block of 64 and a partial one */

/* the per-row arrays of a batch: widths I (x, dt, y, dy, dx, ddt), N (B, C, dB, dC) */
typedef struct {
    int64_t T;
    float *x, *dt, *dy, *y, *dx, *ddt, *B, *C, *dB, *dC, dA[I * N];
} rows;

static void rows_alloc(rows *r, int64_t T) {
    memset(r, 0, sizeof *r);
    r->T = T;
    float **a[] = { &r->x, &r->dt, &r->dy, &r->y, &r->dx, &r->ddt }, **b[] = { &r->B, &r->C, &r->dB, &r->dC };
    for (int i = 0; i < 6; i++) *a[i] = calloc((size_t)(T * I + 1), sizeof(float));
    for (int i = 0; i < 4; i++) *b[i] = calloc((size_t)(T * N + 1), sizeof(float));
}

static void rows_free(rows *r) {
    float *all[] = { r->x, r->dt, r->dy, r->y, r->dx, r->ddt, r->B, r->C, r->dB, r->dC };
    for (int i = 0; i < 10; i++) free(all[i]);
}

/* n rows of the inputs and the output gradient from src row s0 to dst row d0 */
static void rows_copy(rows *dst, int64_t d0, const rows *src, int64_t s0, int64_t n) {
    memcpy(dst->x + d0 * I, src->x + s0 * I, sizeof(float) * (size_t)(n * I));
    memcpy(dst->dt + d0 * I, src->dt + s0 * I, sizeof(float) * (size_t)(n * I));
    memcpy(dst->dy + d0 * I, src->dy + s0 * I, sizeof(float) * (size_t)(n * I));
    memcpy(dst->B + d0 * N, src->B + s0 * N, sizeof(float) * (size_t)(n * N));
    memcpy(dst->C + d0 * N, src->C + s0 * N, sizeof(float) * (size_t)(n * N));
}

static float A_log[I * N];

static void run(rows *r, int n_seq, const int64_t *cu, const int32_t *from) {
    vc_ssm_desc d = { .n_seq = n_seq, .cu = cu, .I = I, .N = N, .ckpt = 256, .from = from };
    float *saved = calloc((size_t)(vc_ssm_saved(&d) * I * N + 1), sizeof(float));
    vc_cpu_ssm_fwd(r->y, saved, r->x, r->dt, A_log, r->B, r->C, &d);
    vc_cpu_ssm_bwd(r->dx, r->ddt, r->dA, r->dB, r->dC, r->dy, saved, r->x, r->dt, A_log, r->B, r->C, &d);
    free(saved);
}

static double err(const float *a, const float *b, int64_t n, double *scale) {
    double e = 0;
    for (int64_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)a[i] - b[i]));
        *scale = fmax(*scale, fabs((double)b[i]));
    }
    return e;
}

/* a prompt of P rows answered NR times (responses of RL[i] rows): [prompt, response i] against [prompt] and
 * [response i] starting from the prompt's final state */
static void share_case(int64_t P, const int64_t *RL) {
    int64_t cuF[NR + 1] = { 0 }, cuS[NR + 2] = { 0, P };
    for (int i = 0; i < NR; i++) cuF[i + 1] = cuF[i] + P + RL[i], cuS[i + 2] = cuS[i + 1] + RL[i];
    rows F, S;
    rows_alloc(&F, cuF[NR]);
    rows_alloc(&S, cuS[NR + 1]);
    for (int64_t t = 0; t < F.T; t++) { /* random rows; the prompt's the same in every full sequence (below) */
        for (int j = 0; j < I; j++)
            F.x[t * I + j] = frand(), F.dt[t * I + j] = 0.05f + 0.04f * frand(), F.dy[t * I + j] = frand();
        for (int j = 0; j < N; j++) F.B[t * N + j] = frand(), F.C[t * N + j] = frand();
    }
    for (int i = 1; i < NR; i++) { /* (each full sequence's prompt rows keep their own output gradient) */
        float *keep = malloc(sizeof(float) * (size_t)(P * I));
        memcpy(keep, F.dy + cuF[i] * I, sizeof(float) * (size_t)(P * I));
        rows_copy(&F, cuF[i], &F, 0, P);
        memcpy(F.dy + cuF[i] * I, keep, sizeof(float) * (size_t)(P * I));
        free(keep);
    }
    rows_copy(&S, 0, &F, 0, P); /* the prompt: its output gradient the full sequences' summed */
    for (int64_t t = 0; t < P * I; t++) {
        float s = 0;
        for (int i = 0; i < NR; i++) s += F.dy[cuF[i] * I + t];
        S.dy[t] = s;
    }
    for (int i = 0; i < NR; i++) rows_copy(&S, cuS[i + 1], &F, cuF[i] + P, RL[i]);
    int32_t from[NR + 1] = { -1 };
    for (int i = 0; i < NR; i++) from[i + 1] = 0;
    run(&F, NR, cuF, NULL);
    run(&S, NR + 1, cuS, from);
    CHECK_OK(vc_cpu_sync());
    int same = memcmp(S.y, F.y, sizeof(float) * (size_t)(P * I)) == 0;
    for (int i = 0; i < NR; i++)
        same &= memcmp(S.y + cuS[i + 1] * I, F.y + (cuF[i] + P) * I, sizeof(float) * (size_t)(RL[i] * I)) == 0;
    CHECK_MSG(same, "prompt %lld: outputs differ from the full sequences'", (long long)P);
    double e = 0, sc = 1e-30;
    struct { const float *s, *f; int w; } g[] = { { S.dx, F.dx, I }, { S.ddt, F.ddt, I }, { S.dB, F.dB, N },
                                                   { S.dC, F.dC, N } };
    for (int a = 0; a < 4; a++) {
        int w = g[a].w;
        float *sum = calloc((size_t)(P * w + 1), sizeof(float));
        for (int i = 0; i < NR; i++)
            for (int64_t t = 0; t < P * w; t++) sum[t] += g[a].f[cuF[i] * w + t];
        e = fmax(e, err(g[a].s, sum, P * w, &sc));
        for (int i = 0; i < NR; i++)
            e = fmax(e, err(g[a].s + cuS[i + 1] * w, g[a].f + (cuF[i] + P) * w, RL[i] * w, &sc));
        free(sum);
    }
    e = fmax(e, err(S.dA, F.dA, I * N, &sc));
    printf("prompt %3lld rows, responses of %lld, %lld, %lld, %d thread(s): outputs the same bits, gradients within "
           "%.2e of the largest\n", (long long)P, (long long)RL[0], (long long)RL[1], (long long)RL[2],
           vc_get_threads(), e / sc);
    CHECK_MSG(e <= 2e-5 * sc, "prompt %lld: gradients differ by %.3g of the largest", (long long)P, e / sc);
    rows_free(&F);
    rows_free(&S);
}

/* from pointing at a sequence that starts from another: nothing computed, a fault at the sync (sticky: the last check
 * of the program) */
static void malformed(void) {
    int64_t cu[4] = { 0, 10, 15, 20 };
    int32_t chain[3] = { -1, 0, 1 };
    rows r;
    rows_alloc(&r, cu[3]);
    run(&r, 3, cu, chain);
    vc_status st = vc_cpu_sync();
    CHECK_MSG(st != VC_OK && strstr(vc_last_error(), "starts from another"), "a chain of starts: %s", vc_last_error());
    rows_free(&r);
}

int main(void) {
    for (int k = 0; k < I * N; k++) A_log[k] = logf(1.0f + (float)(k % N)) + 0.1f * frand();
    static const int64_t rl[][NR] = { { 9, 70, 1 }, { 300, 2, 40 } };
    for (int th = 1; th <= 2; th++) {
        vc_set_threads(th);
        share_case(9, rl[0]);
        share_case(300, rl[1]); /* a kept state inside the prompt, and inside a response */
        share_case(256, rl[0]); /* the prompt ending at a kept state's row */
    }
    malformed();
    return vc_test_done();
}
