/* Gated DeltaNet's chunked form on the CPU (src/backend/cpu/cpu_gdn_chunk.c) against its token-by-token recurrence:
 * the forward's outputs and kept states and every gradient of the backward (q, k, v, the log decay, beta) for packed
 * sequences of 1 to 200 rows (inside one chunk, at its edge, over several), with and without the delta rule, with a
 * decay per head and per key channel (Kimi Delta Attention), with
 * several value heads per q/k head, head sizes that are and are not multiples of the products' blocks, mild and strong
 * decays; the chunked form's bits on one thread and two, and of a sequence alone or in a batch; and `verlc bench gdn`
 * runs (no figure is checked: speed is the bench's to print). */
#include "../../src/backend/cpu/cpu.h"
#include "tensor/backend.h"
#include "verlc/pool.h"
#include "vc_test.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { return vc_test_frand(&rng); } /* [-1, 1) */

typedef struct {
    int n_seq, nk, nv, dk, dv, no_delta, gk; /* gk: a decay per key channel (g and dg [T, nv, dk]) */
    int64_t cu[8], T;
    float *q, *k, *v, *g, *beta, *dout;
} gcase;

typedef struct {
    float *o, *saved, *dq, *dk, *dv, *dg, *dbeta;
} gout;

static void case_make(gcase *c, int n_seq, const int64_t *len, int nk, int nv, int dk, int dv, int no_delta,
                      float decay, int gk) {
    *c = (gcase){ .n_seq = n_seq, .nk = nk, .nv = nv, .dk = dk, .dv = dv, .no_delta = no_delta, .gk = gk };
    for (int s = 0; s < n_seq; s++) c->cu[s + 1] = c->cu[s] + len[s];
    int64_t T = c->T = c->cu[n_seq];
    c->q = malloc(sizeof(float) * (size_t)(T * nk * dk + 1));
    c->k = malloc(sizeof(float) * (size_t)(T * nk * dk + 1));
    c->v = malloc(sizeof(float) * (size_t)(T * nv * dv + 1));
    c->dout = malloc(sizeof(float) * (size_t)(T * nv * dv + 1));
    c->g = malloc(sizeof(float) * (size_t)(T * nv * (gk ? dk : 1) + 1));
    c->beta = malloc(sizeof(float) * (size_t)(T * nv + 1));
    for (int64_t i = 0; i < T * nk * dk; i++) c->q[i] = frand();
    for (int64_t t = 0; t < T * nk; t++) { /* l2-normed keys times 1/sqrt(dk), as Qwen3.5 feeds them */
        float *k = c->k + t * dk, ss = 0;
        for (int a = 0; a < dk; a++) {
            k[a] = frand();
            ss += k[a] * k[a];
        }
        for (int a = 0; a < dk; a++) k[a] /= sqrtf(ss) + 1e-6f;
    }
    for (int64_t i = 0; i < T * nv * dv; i++) c->v[i] = frand(), c->dout[i] = frand();
    for (int64_t i = 0; i < T * nv * (gk ? dk : 1); i++) /* in [decay, 0]; per channel: some channels near 0 */
        c->g[i] = decay * (0.5f + 0.5f * frand()) * (gk && i % 3 == 0 ? 0.01f : 1.0f);
    for (int64_t i = 0; i < T * nv; i++) c->beta[i] = no_delta ? 0.05f + 0.05f * frand() : 0.5f + 0.45f * frand();
}

static void case_free(gcase *c) {
    free(c->q), free(c->k), free(c->v), free(c->dout), free(c->g), free(c->beta);
}

static int CKPT = 64; /* rows of a chunk */

static vc_gdn_desc desc_of(const gcase *c) {
    return (vc_gdn_desc){ .n_seq = c->n_seq, .cu = c->cu, .n_k_head = c->nk, .n_v_head = c->nv, .dk = c->dk,
                          .dv = c->dv, .scale = 1.0f / sqrtf((float)c->dk), .no_delta = c->no_delta, .ckpt = CKPT,
                          .gk = c->gk };
}

/* forward keeping states, then backward, on the CPU backend */
static void run(const gcase *c, int recurrence, gout *r) {
    vc_gdn_desc d = desc_of(c);
    int64_t T = c->T, ns = vc_gdn_saved(&d) * c->nv * c->dk * c->dv;
    r->o = calloc((size_t)(T * c->nv * c->dv + 1), sizeof(float));
    r->saved = calloc((size_t)(ns + 1), sizeof(float));
    r->dq = calloc((size_t)(T * c->nk * c->dk + 1), sizeof(float));
    r->dk = calloc((size_t)(T * c->nk * c->dk + 1), sizeof(float));
    r->dv = calloc((size_t)(T * c->nv * c->dv + 1), sizeof(float));
    r->dg = calloc((size_t)(T * c->nv * (c->gk ? c->dk : 1) + 1), sizeof(float));
    r->dbeta = calloc((size_t)(T * c->nv + 1), sizeof(float));
    vc_cpu_gdn_recurrence_only = recurrence;
    vc_cpu_gdn_fwd(r->o, r->saved, c->q, c->k, c->v, c->g, c->beta, &d);
    vc_cpu_gdn_bwd(r->dq, r->dk, r->dv, r->dg, r->dbeta, c->dout, r->saved, c->q, c->k, c->v, c->g, c->beta, &d);
    vc_cpu_gdn_recurrence_only = 0;
    CHECK_OK(vc_cpu_sync());
}

static void out_free(gout *r) {
    free(r->o), free(r->saved), free(r->dq), free(r->dk), free(r->dv), free(r->dg), free(r->dbeta);
}

/* max |a - b| over max(|b|) of the array (a scale-free error) */
static double rel_err(const float *a, const float *b, int64_t n) {
    double e = 0, m = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        double x = fabs((double)a[i] - b[i]);
        if (x > e || isnan(x)) e = isnan(x) ? INFINITY : x;
        if (fabs(b[i]) > m) m = fabs(b[i]);
    }
    return e / m;
}

static double worst;

static void compare(const char *what, const gcase *c, double tol) {
    gout a, b;
    run(c, 0, &a);
    run(c, 1, &b);
    vc_gdn_desc d = desc_of(c);
    int64_t T = c->T, ns = vc_gdn_saved(&d) * c->nv * c->dk * c->dv;
    struct { const char *name; const float *x, *y; int64_t n; } arr[] = {
        { "o", a.o, b.o, T * c->nv * c->dv },       { "kept states", a.saved, b.saved, ns },
        { "dq", a.dq, b.dq, T * c->nk * c->dk },    { "dk", a.dk, b.dk, T * c->nk * c->dk },
        { "dv", a.dv, b.dv, T * c->nv * c->dv },    { "dg", a.dg, b.dg, T * c->nv * (c->gk ? c->dk : 1) },
        { "dbeta", a.dbeta, b.dbeta, T * c->nv },
    };
    double most = 0;
    for (size_t i = 0; i < sizeof arr / sizeof *arr; i++) {
        double e = rel_err(arr[i].x, arr[i].y, arr[i].n);
        CHECK_MSG(e <= tol, "%s: %s differs from the recurrence by %.3g of its largest value", what, arr[i].name, e);
        if (e > most) most = e;
    }
    if (most > worst) worst = most;
    printf("%-58s chunked vs recurrence: worst relative error %.2e\n", what, most);
    out_free(&a);
    out_free(&b);
}

/* the chunked form's bits: on 1 and 2 threads, and sequence 1 of the batch run alone (gk: a decay per key channel) */
static void invariance(int gk) {
    gcase c, one;
    int64_t len[3] = { 70, 130, 9 }, l1[1] = { 130 };
    case_make(&c, 3, len, 2, 4, 32, 48, 0, -0.6f, gk);
    case_make(&one, 1, l1, 2, 4, 32, 48, 0, -0.6f, gk);
    int gw = gk ? 32 : 1; /* (decays a head) */
    int64_t r0 = c.cu[1]; /* copy sequence 1's rows into the lone case */
    memcpy(one.q, c.q + r0 * 2 * 32, sizeof(float) * 130 * 2 * 32);
    memcpy(one.k, c.k + r0 * 2 * 32, sizeof(float) * 130 * 2 * 32);
    memcpy(one.v, c.v + r0 * 4 * 48, sizeof(float) * 130 * 4 * 48);
    memcpy(one.dout, c.dout + r0 * 4 * 48, sizeof(float) * 130 * 4 * 48);
    memcpy(one.g, c.g + r0 * 4 * gw, sizeof(float) * 130 * 4 * gw);
    memcpy(one.beta, c.beta + r0 * 4, sizeof(float) * 130 * 4);
    int th = vc_get_threads();
    gout a, b, s;
    vc_set_threads(1);
    run(&c, 0, &a);
    vc_set_threads(2);
    run(&c, 0, &b);
    run(&one, 0, &s);
    vc_set_threads(th);
    int64_t no = c.T * 4 * 48, nq = c.T * 2 * 32;
    CHECK(!memcmp(a.o, b.o, sizeof(float) * (size_t)no) && !memcmp(a.dk, b.dk, sizeof(float) * (size_t)nq) &&
          !memcmp(a.dg, b.dg, sizeof(float) * (size_t)(c.T * 4 * gw)));
    CHECK(!memcmp(a.o + r0 * 4 * 48, s.o, sizeof(float) * 130 * 4 * 48) &&
          !memcmp(a.dq + r0 * 2 * 32, s.dq, sizeof(float) * 130 * 2 * 32) &&
          !memcmp(a.dv + r0 * 4 * 48, s.dv, sizeof(float) * 130 * 4 * 48) &&
          !memcmp(a.dbeta + r0 * 4, s.dbeta, sizeof(float) * 130 * 4) &&
          !memcmp(a.dg + r0 * 4 * gw, s.dg, sizeof(float) * 130 * 4 * gw));
    printf("chunked form%s: the same bits on 1 and 2 threads, and for a sequence alone or in a batch\n",
           gk ? " (decay per key channel)" : "");
    out_free(&a), out_free(&b), out_free(&s);
    case_free(&c), case_free(&one);
}

int main(void) {
    static const struct {
        const char *what;
        int n_seq;
        int64_t len[4];
        int nk, nv, dk, dv, no_delta;
        float decay;
        int gk;
    } C[] = {
        { "delta rule, 1 / 5 / 64 / 65 rows, 2 value heads per q/k head", 4, { 1, 5, 64, 65 }, 1, 2, 16, 8, 0, -0.5f },
        { "delta rule, 200 + 130 rows, heads of 32 x 48", 2, { 200, 130 }, 2, 4, 32, 48, 0, -0.3f },
        { "delta rule, 128 rows, heads of 128 (Qwen3.5's)", 1, { 128 }, 1, 1, 128, 128, 0, -0.1f },
        { "delta rule, strong decay (g down to -30 per row)", 2, { 100, 70 }, 1, 2, 16, 32, 0, -30.0f },
        { "no delta rule (SSD), 1 / 64 / 150 rows, 4 heads per group", 3, { 1, 64, 150 }, 1, 4, 16, 24, 1, -0.4f },
        { "no delta rule, strong decay", 1, { 140 }, 2, 2, 8, 16, 1, -20.0f },
        { "decay per key channel (KDA), 1 / 5 / 64 / 65 rows", 4, { 1, 5, 64, 65 }, 1, 2, 16, 8, 0, -0.5f, 1 },
        { "decay per key channel, 200 + 130 rows, heads of 32 x 48", 2, { 200, 130 }, 2, 4, 32, 48, 0, -0.3f, 1 },
        { "decay per key channel, heads of 128 (Kimi-Linear's)", 1, { 128 }, 1, 1, 128, 128, 0, -0.1f, 1 },
        { "decay per key channel, strong (down to -30 per row)", 2, { 100, 70 }, 1, 2, 16, 32, 0, -30.0f, 1 },
        { "decay per key channel, no delta rule", 2, { 1, 150 }, 1, 2, 16, 24, 1, -0.4f, 1 },
        /* decays near the blocks' limit (a channel past e^-60 in 16 rows): some blocks factored, some pair by pair */
        { "decay per key channel, blocks factored and pair by pair", 2, { 200, 130 }, 1, 2, 16, 24, 0, -8.0f, 1 },
    };
    for (size_t i = 0; i < sizeof C / sizeof *C; i++) {
        gcase c;
        case_make(&c, C[i].n_seq, C[i].len, C[i].nk, C[i].nv, C[i].dk, C[i].dv, C[i].no_delta, C[i].decay, C[i].gk);
        compare(C[i].what, &c, 5e-6);
        case_free(&c);
    }
    for (CKPT = 4; CKPT <= 24; CKPT += 20) { /* chunks shorter and not a multiple of gk's blocks of 16 rows */
        static const int64_t len[3] = { 7, 50, 24 };
        for (int gk = 0; gk < 2; gk++) {
            gcase c;
            char what[96];
            snprintf(what, sizeof what, "chunks of %d rows, %s", CKPT, gk ? "decay per key channel" : "delta rule");
            case_make(&c, 3, len, 1, 2, 16, 24, 0, -0.5f, gk);
            compare(what, &c, 5e-6);
            case_free(&c);
        }
    }
    CKPT = 64;
    printf("worst relative error over all cases: %.2e (tolerance 5e-6)\n", worst);
    invariance(0);
    invariance(1);
    const char *bin = getenv("VERLC_BIN");
    if (bin && *bin) { /* the bench on a small shape: runs, and prints both passes */
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "'%s' bench gdn --tokens 130 --seqs 2 --qk-heads 1 --v-heads 2 --dk 16 --dv 24 "
                 "--iters 1 > /tmp/vc_bench_gdn_%d.txt 2>&1", bin, (int)getpid());
        int rc = system(cmd);
        snprintf(cmd, sizeof cmd, "/tmp/vc_bench_gdn_%d.txt", (int)getpid());
        FILE *f = fopen(cmd, "r");
        char buf[2048] = "";
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        buf[n] = 0;
        if (f) fclose(f);
        remove(cmd);
        CHECK_MSG(rc == 0 && strstr(buf, "forward (states kept)") && strstr(buf, "backward:") &&
                  strstr(buf, "chunks of 64 rows"), "verlc bench gdn: exit %d: %s", rc, buf);
        snprintf(cmd, sizeof cmd, "'%s' bench gdn --kda --tokens 70 --qk-heads 1 --v-heads 1 --dk 16 --dv 8 --iters 1 "
                 "--device sim > /dev/null 2>&1", bin);
        CHECK(system(cmd) == 0); /* a decay per key channel, on the sim backend */
        snprintf(cmd, sizeof cmd, "'%s' bench gdn --v-heads 3 --qk-heads 2 > /dev/null 2>&1", bin);
        CHECK(system(cmd) != 0); /* value heads not a multiple of the q/k heads: refused */
    }
    printf("%d passed, %d failed\n", vc_t_pass, vc_t_fail);
    return vc_t_fail != 0;
}
