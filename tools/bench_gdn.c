/* verlc bench gdn [--tokens N] [--seqs S] [--qk-heads H] [--v-heads H] [--dk D] [--dv D] [--iters N] [--no-delta]
 *   [--kda] [--device D]
 * Gated DeltaNet's recurrence op as training runs it (the forward keeping a state every 64 rows, then the backward)
 * on the active backend, random inputs of Qwen3.5's shape by default (16 q/k and 16 value heads of 128 x 128): the
 * best time of each over --iters calls, rows per second and nominal GFLOP/s (the recurrence's 8 dk dv flops per row
 * and value head forward, three times that backward, whatever form computes it: chunks of 64 rows, or the
 * token-by-token recurrence with VERLC_GDN_RECURRENCE=1); --kda: Kimi Delta Attention's decay per key channel. */
#include "cli.h"
#include "device_args.h"
#include "tensor/backend.h"
#include "verlc/core.h"
#include "verlc/pool.h"
#include "verlc/rng.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t tokens;
    int seqs, nk, nv, dk, dv, iters, no_delta, kda;
    const char *device;
} gdn_opts;

static void usage(FILE *f) {
    fprintf(f, "usage: verlc bench gdn [--tokens N (4096)] [--seqs S (1)] [--qk-heads H (16)] [--v-heads H (16)] "
               "[--dk D (128)] [--dv D (128)] [--iters N (3)] [--no-delta] [--kda] [--device cpu|cuda[:N]|sim]\n");
}

static int parse(int argc, char **argv, gdn_opts *o) {
    *o = (gdn_opts){ 4096, 1, 16, 16, 128, 128, 3, 0, 0, NULL };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 1;
        }
        if (!strcmp(a, "--no-delta") || !strcmp(a, "--kda")) {
            *(a[2] == 'n' ? &o->no_delta : &o->kda) = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "verlc bench gdn: %s needs a value\n", a);
            return -1;
        }
        i++;
        long long x = strtoll(v, NULL, 10);
        if (!strcmp(a, "--device")) o->device = v;
        else if (!strcmp(a, "--tokens") && x > 0) o->tokens = x;
        else if (!strcmp(a, "--seqs") && x > 0 && x < 100000) o->seqs = (int)x;
        else if (!strcmp(a, "--qk-heads") && x > 0 && x < 4096) o->nk = (int)x;
        else if (!strcmp(a, "--v-heads") && x > 0 && x < 4096) o->nv = (int)x;
        else if (!strcmp(a, "--dk") && x > 0 && x <= 1024) o->dk = (int)x;
        else if (!strcmp(a, "--dv") && x > 0 && x <= 1024) o->dv = (int)x;
        else if (!strcmp(a, "--iters") && x > 0 && x < 1000) o->iters = (int)x;
        else {
            fprintf(stderr, "verlc bench gdn: bad option %s %s\n", a, v);
            usage(stderr);
            return -1;
        }
    }
    if (o->nv % o->nk || o->tokens < o->seqs) {
        fprintf(stderr, "verlc bench gdn: --v-heads must be a multiple of --qk-heads and --tokens at least --seqs\n");
        return -1;
    }
    return 0;
}

/* n random floats of a kind (0: values, 1: keys, 2: log decays, 3: beta) from stream salt in backend memory (NULL: out
 * of memory) */
static float *upload(size_t n, int kind, int dk, uint64_t salt) {
#define frand() (2.0f * vc_rng_uniform(7, salt, i, 0) - 1.0f) /* [-1, 1), a stream per array */
    float *h = malloc(sizeof(float) * (n ? n : 1)), *d = vc_be()->alloc(sizeof(float) * (n ? n : 1));
    if (!h || !d) {
        free(h);
        if (d) vc_be()->free(d);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        h[i] = kind == 0 ? frand() : kind == 1 ? frand() / sqrtf((float)dk) /* keys, about l2-normed / sqrt(dk) */
             : kind == 2 ? -0.1f + 0.05f * frand()                          /* log decays */
                         : 0.7f + 0.25f * frand();                          /* beta */
#undef frand
    vc_be()->h2d(d, h, sizeof(float) * n);
    free(h);
    return d;
}

int vc_bench_gdn(int argc, char **argv) {
    gdn_opts o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc > 0 ? 0 : 2;
    if ((rc = vc_cli_device_apply("bench gdn", o.device, NULL))) return rc;
    int64_t T = o.tokens, *cu = malloc(sizeof(int64_t) * ((size_t)o.seqs + 1));
    if (!cu) return 1;
    for (int s = 0; s <= o.seqs; s++) cu[s] = T * s / o.seqs;
    vc_gdn_desc d = { .n_seq = o.seqs, .cu = cu, .n_k_head = o.nk, .n_v_head = o.nv, .dk = o.dk, .dv = o.dv,
                      .scale = 1.0f / sqrtf((float)o.dk), .no_delta = o.no_delta, .ckpt = 64, .gk = o.kda };
    size_t nq = (size_t)T * o.nk * o.dk, nvv = (size_t)T * o.nv * o.dv, ng = (size_t)T * o.nv;
    size_t ngk = ng * (o.kda ? (size_t)o.dk : 1); /* (the log decays: per key channel with --kda) */
    size_t ns = (size_t)vc_gdn_saved(&d) * o.nv * o.dk * o.dv;
    float *q = upload(nq, 0, o.dk, 1), *k = upload(nq, 1, o.dk, 2), *v = upload(nvv, 0, o.dk, 3);
    float *dout = upload(nvv, 0, o.dk, 4), *g = upload(ngk, 2, o.dk, 5), *beta = upload(ng, 3, o.dk, 6);
    float *out = vc_be()->alloc(sizeof(float) * nvv), *saved = vc_be()->alloc(sizeof(float) * (ns ? ns : 1));
    float *dq = vc_be()->alloc(sizeof(float) * nq), *dk = vc_be()->alloc(sizeof(float) * nq);
    float *dv = vc_be()->alloc(sizeof(float) * nvv), *dg = vc_be()->alloc(sizeof(float) * ngk);
    float *db = vc_be()->alloc(sizeof(float) * ng);
    double best_f = INFINITY, best_b = INFINITY;
    vc_status st = q && k && v && dout && g && beta && out && saved && dq && dk && dv && dg && db ? VC_OK : VC_ERR_NOMEM;
    for (int it = 0; !st && it <= o.iters; it++) { /* (the first call warms up, not counted) */
        float *zero[] = { dq, dk, dv, dg, db };
        size_t zn[] = { nq, nq, nvv, ngk, ng };
        for (int z = 0; z < 5; z++) vc_be()->zero(zero[z], sizeof(float) * zn[z]);
        if ((st = vc_be()->sync())) break;
        double t0 = vc_now();
        vc_be()->gdn_fwd(out, saved, q, k, v, g, beta, &d);
        if ((st = vc_be()->sync())) break;
        double t1 = vc_now();
        vc_be()->gdn_bwd(dq, dk, dv, dg, db, dout, saved, q, k, v, g, beta, &d);
        if ((st = vc_be()->sync())) break;
        double t2 = vc_now();
        if (it && t1 - t0 < best_f) best_f = t1 - t0;
        if (it && t2 - t1 < best_b) best_b = t2 - t1;
    }
    if (!st) {
        const char *e = getenv("VERLC_GDN_RECURRENCE");
        double fl = 8.0 * (double)o.dk * o.dv * (double)o.nv * (double)T; /* nominal forward flops */
        printf("bench gdn: %lld rows in %d sequence(s), %d q/k and %d value heads of %d x %d%s, device %s, %d threads, "
               "%s\n", (long long)T, o.seqs, o.nk, o.nv, o.dk, o.dv,
               o.no_delta ? ", no delta rule" : o.kda ? ", a decay per key channel (KDA)" : "",
               vc_device_name(), vc_get_threads(),
               !(e && *e && strcmp(e, "0")) ? "chunks of 64 rows" : "token-by-token recurrence");
        printf("  forward (states kept): %.2f ms, %.0f rows/s, %.1f GFLOP/s nominal\n", best_f * 1e3, T / best_f,
               fl / best_f * 1e-9);
        printf("  backward: %.2f ms, %.0f rows/s, %.1f GFLOP/s nominal\n", best_b * 1e3, T / best_b,
               3.0 * fl / best_b * 1e-9);
    } else
        fprintf(stderr, "verlc bench gdn: %s\n", vc_last_error());
    float *all[] = { q, k, v, dout, g, beta, out, saved, dq, dk, dv, dg, db };
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (all[i]) vc_be()->free(all[i]);
    free(cu);
    return st ? 1 : 0;
}
