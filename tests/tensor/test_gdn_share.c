/* Gated DeltaNet's shared starts on the CPU (vc_gdn_desc.from): a prompt computed once and its responses starting from
 * its state at its tap row (its last multiple of 64 rows) give the same outputs, bit for bit, as each response run
 * after the whole prompt, and the same gradients to rounding (the prompt rows' summed over the responses); prompts
 * ending inside a chunk and at its edge, with and without the delta rule, in the chunked form and the token-by-token
 * recurrence, and with a decay per key channel (Kimi Delta Attention, both forms too); a malformed `from` computes
 * nothing and fails the sync. */
#include "../../src/backend/cpu/cpu.h"
#include "tensor/backend.h"
#include "vc_test.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float frand(void) { return vc_test_frand(&rng); } /* [-1, 1) */

enum { NK = 1, NV = 2, DK = 24, DV = 32, NR = 2, QK = NK * DK, VW = NV * DV };
static int GK, GW = NV; /* a decay per key channel (g and dg NV DK wide) */

/* the per-row arrays of a batch: widths QK (q, k, dq, dk), VW (v, dout, o, dv), NV (beta, dbeta), GW (g, dg) */
typedef struct {
    int64_t T;
    float *q, *k, *v, *g, *beta, *dout, *o, *dq, *dk, *dv, *dg, *dbeta;
} rows;

static void rows_alloc(rows *r, int64_t T) {
    r->T = T;
    float **a[] = { &r->q, &r->k, &r->dq, &r->dk }, **b[] = { &r->v, &r->dout, &r->o, &r->dv },
          **c[] = { &r->g, &r->beta, &r->dg, &r->dbeta };
    for (int i = 0; i < 4; i++) {
        *a[i] = calloc((size_t)(T * QK + 1), sizeof(float));
        *b[i] = calloc((size_t)(T * VW + 1), sizeof(float));
        *c[i] = calloc((size_t)(T * (i % 2 ? NV : GW) + 1), sizeof(float)); /* g, beta, dg, dbeta */
    }
}

static void rows_free(rows *r) {
    float *all[] = { r->q, r->k, r->v, r->g, r->beta, r->dout, r->o, r->dq, r->dk, r->dv, r->dg, r->dbeta };
    for (int i = 0; i < 12; i++) free(all[i]);
}

/* n rows of the inputs and the output gradient from src row s0 to dst row d0 */
static void rows_copy(rows *dst, int64_t d0, const rows *src, int64_t s0, int64_t n) {
    memcpy(dst->q + d0 * QK, src->q + s0 * QK, sizeof(float) * (size_t)(n * QK));
    memcpy(dst->k + d0 * QK, src->k + s0 * QK, sizeof(float) * (size_t)(n * QK));
    memcpy(dst->v + d0 * VW, src->v + s0 * VW, sizeof(float) * (size_t)(n * VW));
    memcpy(dst->dout + d0 * VW, src->dout + s0 * VW, sizeof(float) * (size_t)(n * VW));
    memcpy(dst->g + d0 * GW, src->g + s0 * GW, sizeof(float) * (size_t)(n * GW));
    memcpy(dst->beta + d0 * NV, src->beta + s0 * NV, sizeof(float) * (size_t)(n * NV));
}

static void run(rows *r, int n_seq, const int64_t *cu, const int32_t *from, int no_delta) {
    vc_gdn_desc d = { .n_seq = n_seq, .cu = cu, .n_k_head = NK, .n_v_head = NV, .dk = DK, .dv = DV,
                      .scale = 1.0f / sqrtf((float)DK), .no_delta = no_delta, .gk = GK, .ckpt = 64, .from = from };
    float *saved = calloc((size_t)(vc_gdn_saved(&d) * NV * DK * DV + 1), sizeof(float));
    vc_cpu_gdn_fwd(r->o, saved, r->q, r->k, r->v, r->g, r->beta, &d);
    vc_cpu_gdn_bwd(r->dq, r->dk, r->dv, r->dg, r->dbeta, r->dout, saved, r->q, r->k, r->v, r->g, r->beta, &d);
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

/* a prompt of P rows answered NR times (responses of RL[i] rows): the full sequences [prompt, response i] against
 * [prompt] and [prompt rows R.., response i] starting from the prompt's state at R */
static void share_case(int64_t P, const int64_t *RL, int no_delta) {
    int64_t R = vc_gdn_tap(P, 64), cuF[NR + 1] = { 0 }, cuS[NR + 2] = { 0, P };
    for (int i = 0; i < NR; i++) cuF[i + 1] = cuF[i] + P + RL[i], cuS[i + 2] = cuS[i + 1] + (P - R) + RL[i];
    rows F, S;
    rows_alloc(&F, cuF[NR]);
    rows_alloc(&S, cuS[NR + 1]);
    for (int64_t t = 0; t < F.T; t++) { /* random rows, the prompt's the same in every full sequence */
        for (int j = 0; j < QK; j++) F.q[t * QK + j] = frand(), F.k[t * QK + j] = 0.3f * frand();
        for (int j = 0; j < VW; j++) F.v[t * VW + j] = frand(), F.dout[t * VW + j] = frand();
        for (int j = 0; j < GW; j++) F.g[t * GW + j] = -0.4f * (1 + frand());
        for (int j = 0; j < NV; j++) F.beta[t * NV + j] = 0.5f + 0.4f * frand();
    }
    for (int i = 1; i < NR; i++) {
        float *o = F.dout + cuF[i] * VW; /* (its own loss: dout copied back below) */
        float keep[VW * 256];
        memcpy(keep, o, sizeof(float) * (size_t)(P * VW));
        rows_copy(&F, cuF[i], &F, 0, P);
        memcpy(o, keep, sizeof(float) * (size_t)(P * VW));
    }
    /* the shared batch: the prompt (its output gradient that of the full sequences' rows before R, summed), then each
     * response behind the prompt's rows from R (their output gradients the full sequences') */
    rows_copy(&S, 0, &F, 0, P);
    for (int64_t t = 0; t < P * VW; t++) {
        float s = 0;
        for (int i = 0; i < NR; i++) s += t < R * VW ? F.dout[cuF[i] * VW + t] : 0.0f;
        S.dout[t] = s;
    }
    for (int i = 0; i < NR; i++) rows_copy(&S, cuS[i + 1], &F, cuF[i] + R, P - R + RL[i]);
    int32_t from[NR + 1] = { -1 };
    for (int i = 0; i < NR; i++) from[i + 1] = R > 0 ? 0 : -1;
    run(&F, NR, cuF, NULL, no_delta);
    run(&S, NR + 1, cuS, from, no_delta);
    CHECK_OK(vc_cpu_sync());
    /* outputs: bit for bit */
    int same = memcmp(S.o, F.o, sizeof(float) * (size_t)(P * VW)) == 0;
    for (int i = 0; i < NR; i++)
        same &= memcmp(S.o + cuS[i + 1] * VW, F.o + (cuF[i] + R) * VW,
                       sizeof(float) * (size_t)((P - R + RL[i]) * VW)) == 0;
    CHECK_MSG(same, "prompt %lld (tap %lld): outputs differ from the full sequences'", (long long)P, (long long)R);
    /* gradients: the prompt rows before R summed over the full sequences; the rest row for row */
    double e = 0, sc = 1e-30;
    struct { const float *s, *f; int w; } g[] = { { S.dq, F.dq, QK }, { S.dk, F.dk, QK }, { S.dv, F.dv, VW },
                                                   { S.dg, F.dg, GW }, { S.dbeta, F.dbeta, NV } };
    for (int a = 0; a < 5; a++) {
        int w = g[a].w;
        float *sum = calloc((size_t)(R * w + 1), sizeof(float));
        for (int i = 0; i < NR; i++)
            for (int64_t t = 0; t < R * w; t++) sum[t] += g[a].f[cuF[i] * w + t];
        e = fmax(e, err(g[a].s, sum, R * w, &sc));
        for (int i = 0; i < NR; i++)
            e = fmax(e, err(g[a].s + cuS[i + 1] * w, g[a].f + (cuF[i] + R) * w, (P - R + RL[i]) * w, &sc));
        free(sum);
    }
    printf("prompt %3lld rows (tap %3lld), %s, %s: outputs the same bits, gradients within %.2e of the largest\n",
           (long long)P, (long long)R, GK ? "decay per key channel" : no_delta ? "no delta rule" : "delta rule",
           vc_cpu_gdn_recurrence_only ? "recurrence" : "chunks", e / sc);
    CHECK_MSG(e <= 2e-5 * sc, "prompt %lld: gradients differ by %.3g of the largest", (long long)P, e / sc);
    rows_free(&F);
    rows_free(&S);
}

/* from pointing at a later sequence: nothing computed, a fault at the sync (sticky: the last check of the program) */
static void malformed(void) {
    int64_t cu[4] = { 0, 70, 75, 80 };
    int32_t bad[3] = { 1, -1, -1 };
    rows r;
    rows_alloc(&r, 80);
    run(&r, 3, cu, bad, 0);
    vc_status st = vc_cpu_sync();
    CHECK_MSG(st != VC_OK && strstr(vc_last_error(), "starts from"), "malformed from: %s", vc_last_error());
    rows_free(&r);
}

int main(void) {
    static const int64_t rl[][NR] = { { 9, 70 }, { 1, 130 } };
    for (int rec = 0; rec < 2; rec++) /* the chunked form, then the token-by-token recurrence */
        for (int nd = 0; nd < 2; nd++) {
            vc_cpu_gdn_recurrence_only = rec;
            share_case(150, rl[0], nd); /* tap 128: the responses start inside the prompt's last chunk */
            share_case(128, rl[1], nd); /* tap at the prompt's end */
            share_case(40, rl[0], nd);  /* shorter than a chunk: no tap, the responses run the prompt themselves */
        }
    GK = 1, GW = NV * DK; /* Kimi Delta Attention, in both forms */
    for (int rec = 0; rec < 2; rec++) {
        vc_cpu_gdn_recurrence_only = rec;
        share_case(150, rl[0], 0);
        share_case(128, rl[1], 0);
    }
    vc_cpu_gdn_recurrence_only = 0;
    GK = 0, GW = NV;
    malformed();
    return vc_test_done();
}
