/* The CUDA sample_rows entry against the CPU entry on the same logits and uniforms, for every knob
 * combination (temperature x top_k {off, -1, 1, 7, 50, V-1, V, V+3} x top_p {off, 0.9, 0.5, 0} x
 * min_p {0, 0.05, 1.5}, plus greedy) on four kinds of rows (random, quantised = many ties, all equal,
 * a third of the logits -inf) and vocabularies 1 .. 151936 (also not multiples of the block size):
 * greedy tokens equal; other tokens equal except a draw whose u * total lies within 1e-12 (relative) of
 * an edge of the CPU entry's CDF, or a nucleus whose top_p * total lies that close to a prefix sum
 * (summation order, src/backend/cuda/cuda_sample.cu); lp within 1e-5, lps within 1e-5 where the tokens
 * agree; two device runs bitwise identical. Without a GPU: "no CUDA device: skipped", exit 0. */
#include "cuda_test_util.h"

static const vc_backend *C, *G;

typedef struct {
    float temperature, top_p, min_p;
    int top_k, greedy;
} knobs;

static int make_modes(knobs *m, int64_t V, int big) {
    const float temps[] = { 0.7f, 1.3f }, tps[] = { 1.0f, 0.9f, 0.5f, 0.0f }, mps[] = { 0.0f, 0.05f, 1.5f };
    const int64_t ks[] = { 0, -1, 1, 7, 50, V - 1, V, V + 3 };
    int n = 0;
    m[n++] = (knobs){ 1.0f, 1.0f, 0.0f, 0, 1 };
    for (int a = big ? 1 : 0; a < 2; a++)
        for (int b = 0; b < 8; b++)
            for (int c = 0; c < 4; c++)
                for (int d = 0; d < 3; d++) m[n++] = (knobs){ temps[a], tps[c], mps[d], (int)ks[b], 0 };
    return n;
}

static const float *g_x;
static int by_x_desc(const void *a, const void *b) {
    int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    if (g_x[i] != g_x[j]) return g_x[i] > g_x[j] ? -1 : 1;
    return (i > j) - (i < j);
}

/* the CPU entry's kept tokens in visiting order with their running sums P (written from the
 * specification); *cut_gap: distance of top_p * total to the nearest prefix sum (INFINITY: no top-p) */
static int64_t ref_order(const float *z, int64_t V, const knobs *q, int32_t *idx, double *P, float *x, double *total,
                         double *cut_gap) {
    float T = q->temperature, xmax = -INFINITY;
    for (int64_t v = 0; v < V; v++) x[v] = z[v] / T, xmax = x[v] > xmax ? x[v] : xmax;
    int k_on = q->top_k > 0 && q->top_k < V, p_on = q->top_p > 0 && q->top_p < 1;
    int64_t n = 0;
    if (!k_on && p_on) {
        double all = 0, above = 0;
        for (int64_t v = 0; v < V; v++) {
            double w = exp((double)(x[v] - xmax));
            all += w;
            if (w >= 1e-7) above += w, idx[n++] = (int32_t)v;
        }
        if (above < (double)q->top_p * all) n = 0;
    }
    if (n == 0)
        for (int64_t v = 0; v < V; v++) idx[n++] = (int32_t)v;
    if (k_on || p_on) {
        g_x = x;
        qsort(idx, (size_t)n, sizeof *idx, by_x_desc);
        if (k_on) n = q->top_k;
    }
    double cum = 0;
    for (int64_t i = 0; i < n; i++) P[i] = cum += exp((double)(x[idx[i]] - xmax));
    *cut_gap = INFINITY;
    if (p_on) {
        double goal = (double)q->top_p * cum;
        int64_t keep = n;
        for (int64_t i = 0; i < n; i++) {
            *cut_gap = fmin(*cut_gap, fabs(P[i] - goal));
            if (P[i] >= goal && keep == n) keep = i + 1;
        }
        n = keep;
    }
    if (q->min_p > 0) { /* kept set and sums recomputed over the survivors */
        int64_t m = 0;
        cum = 0;
        for (int64_t i = 0; i < n; i++) {
            double w = exp((double)(x[idx[i]] - xmax));
            if (w >= (double)q->min_p) idx[m] = idx[i], P[m++] = cum += w;
        }
        n = m;
    }
    *total = n > 0 ? P[n - 1] : 0;
    return n;
}

static int near(float a, float b) { return a == b || fabsf(a - b) <= 1e-5f; }

static void fill_row(float *z, int64_t V, int kind) {
    for (int64_t v = 0; v < V; v++) {
        if (kind == 1) z[v] = roundf(z[v]);
        else if (kind == 2) z[v] = 1.5f;
        else if (kind == 3 && v % 3 == 1) z[v] = -INFINITY;
    }
}

static void run_case(int64_t V, int kinds, int big, int *n_tok, int *n_same, int *n_boundary) {
    knobs *modes = malloc(200 * sizeof *modes);
    int nm = make_modes(modes, V, big), R = nm * kinds, per = 3, D = R * per;
    vc_sample_row *rows = calloc((size_t)R, sizeof *rows);
    float *z = hrand((size_t)R * (size_t)V, 4.0f), *u = hbuf((size_t)D), *x = malloc((size_t)V * sizeof *x);
    int32_t *idx = malloc((size_t)V * sizeof *idx);
    double *P = malloc((size_t)V * sizeof *P);
    for (int r = 0; r < R; r++) {
        const knobs *q = &modes[r % nm];
        rows[r] = (vc_sample_row){ q->temperature, q->top_p, q->min_p, q->top_k, q->greedy, r * per, per };
        fill_row(z + (size_t)r * V, V, r / nm);
    }
    for (int d = 0; d < D; d++) u[d] = d % 11 == 0 ? 0.0f : d % 11 == 1 ? 0.99999994f : 0.5f * (urand() + 1.0f);
    int32_t *ct = calloc((size_t)D, 4), *gt = calloc((size_t)D, 4), *gt2 = calloc((size_t)D, 4);
    float *cl = hbuf((size_t)D), *cls = hbuf((size_t)D);
    C->sample_rows(ct, cl, cls, z, R, V, rows, u);
    float *dz = dup_f(z, (size_t)R * (size_t)V), *dl = (float *)dalloc((size_t)D * 4), *dls = (float *)dalloc((size_t)D * 4);
    int32_t *dt = (int32_t *)dalloc((size_t)D * 4);
    G->sample_rows(dt, dl, dls, dz, R, V, rows, u);
    check_sticky("sample_rows");
    vc_cuda_d2h(gt, dt, (size_t)D * 4);
    float *gl = fetch(dl, (size_t)D), *gls = fetch(dls, (size_t)D);
    float *gl_a = clone(gl, (size_t)D), *gls_a = clone(gls, (size_t)D);
    G->sample_rows(dt, dl, dls, dz, R, V, rows, u); /* determinism */
    vc_cuda_d2h(gt2, dt, (size_t)D * 4);
    float *gl2 = fetch(dl, (size_t)D), *gls2 = fetch(dls, (size_t)D);
    CHECK_MSG(!memcmp(gt, gt2, (size_t)D * 4) && !memcmp(gl_a, gl2, (size_t)D * 4) && !memcmp(gls_a, gls2, (size_t)D * 4),
              "V %lld: two device runs differ", (long long)V);
    for (int r = 0; r < R; r++) {
        const knobs *q = &modes[r % nm];
        int64_t n = -1;
        double total = 0, cut_gap = INFINITY;
        for (int d = rows[r].first; d < rows[r].first + rows[r].n; d++) {
            (*n_tok)++;
            if (gt[d] == ct[d]) {
                (*n_same)++;
                CHECK_MSG(near(gl[d], cl[d]), "V %lld row %d: lp %g vs %g", (long long)V, r, gl[d], cl[d]);
                CHECK_MSG(near(gls[d], cls[d]), "V %lld row %d: lps %g vs %g", (long long)V, r, gls[d], cls[d]);
                continue;
            }
            if (n < 0 && !q->greedy) n = ref_order(z + (size_t)r * V, V, q, idx, P, x, &total, &cut_gap);
            double goal = (double)u[d] * total, gap = INFINITY;
            for (int64_t i = 0; i < n; i++)
                if (idx[i] == ct[d]) gap = fmin(fabs(goal - (i ? P[i - 1] : 0.0)), fabs(goal - P[i]));
            int boundary = !q->greedy && (gap <= 1e-12 * total || cut_gap <= 1e-12 * total);
            *n_boundary += boundary;
            CHECK_MSG(boundary,
                      "V %lld row %d (T %g k %d p %g minp %g kind %d) draw %d: gpu token %d, cpu %d (u %.9g, gap %.3g of %.6g)",
                      (long long)V, r, q->temperature, q->top_k, q->top_p, q->min_p, r / nm, d, gt[d], ct[d], u[d],
                      gap, total);
        }
    }
    free(modes);
    free(rows);
    free(x);
    free(idx);
    free(P);
    free(ct);
    free(gt);
    free(gt2);
}

/* Out of device memory for the sort scratch: the rows come back unsampled (token -1, the table's
 * contract), the device stays usable, and the same call samples once memory is free again. */
static void oom_rows(void) {
    int64_t V = 151936, R = 4;
    float *z = hrand((size_t)(R * V), 4.0f), *u = hbuf((size_t)R);
    vc_sample_row *rows = calloc((size_t)R, sizeof *rows);
    for (int r = 0; r < R; r++) {
        rows[r] = (vc_sample_row){ 1.0f, 0.95f, 0.0f, 0, 0, r, 1 }; /* top-p: the sorted path */
        u[r] = 0.5f * (urand() + 1.0f);
    }
    float *dz = dup_f(z, (size_t)(R * V)), *dl = (float *)dalloc((size_t)R * 4), *dls = (float *)dalloc((size_t)R * 4);
    int32_t *dt = (int32_t *)dalloc((size_t)R * 4), got[4];
    /* the device's memory runs out for anything over 1 MiB: small uploads fit, 2.4 MB of sort scratch not (staged:
     * the pool keeps freed blocks, so filling the device does not reliably starve it) */
    vc_cuda_fault_scratch_over((size_t)1 << 20);
    G->sample_rows(dt, dl, dls, dz, R, V, rows, u);
    CHECK_MSG(vc_cuda_sync() == VC_OK, "out of scratch memory became a device error: %s", vc_last_error());
    vc_cuda_d2h(got, dt, sizeof got);
    int unsampled = 0;
    for (int r = 0; r < R; r++) unsampled += got[r] == -1;
    printf("sample_rows with the device memory full: %d of %d rows unsampled (token -1), device usable: %s\n",
           unsampled, (int)R, vc_cuda_error() == VC_OK ? "yes" : "no");
    CHECK(unsampled == R);
    vc_cuda_fault_scratch_over(0);
    G->sample_rows(dt, dl, dls, dz, R, V, rows, u);
    check_sticky("sample_rows after the memory came back");
    vc_cuda_d2h(got, dt, sizeof got);
    for (int r = 0; r < R; r++) CHECK(got[r] >= 0 && got[r] < V);
    free(rows);
}

int main(void) {
    if (gpu_skip()) return 0;
    C = vc_backend_cpu();
    G = vc_backend_cuda();
    CHECK(G && G->sample_rows);
    if (!G || !G->sample_rows) return vc_test_done();
    const int64_t Vs[] = { 1, 7, 513, 1000, 1021, 32000, 151936 };
    int n_tok = 0, n_same = 0, n_boundary = 0;
    for (size_t i = 0; i < sizeof Vs / sizeof *Vs; i++)
        run_case(Vs[i], Vs[i] > 100000 ? 2 : 4, Vs[i] > 100000, &n_tok, &n_same, &n_boundary);
    printf("cuda sample_rows vs cpu: %d/%d tokens equal, %d CDF-boundary differences\n", n_same, n_tok, n_boundary);
    /* a decode step at the target shape: 256 rows of a 152k vocabulary */
    if (!timing_skipped("sample_rows")) {
        int64_t V = 151936, R = 256;
        float *z = hrand((size_t)(R * V), 4.0f), *u = hbuf((size_t)R);
        vc_sample_row *rows = calloc((size_t)R, sizeof *rows);
        for (int r = 0; r < R; r++) {
            rows[r] = (vc_sample_row){ 1.0f, 1.0f, 0.0f, 0, 0, r, 1 };
            u[r] = 0.5f * (urand() + 1.0f);
        }
        float *dz = dup_f(z, (size_t)(R * V)), *dl = (float *)dalloc((size_t)R * 4), *dls = (float *)dalloc((size_t)R * 4);
        int32_t *dt = (int32_t *)dalloc((size_t)R * 4);
        G->sample_rows(dt, dl, dls, dz, R, V, rows, u);
        check_sticky("warm-up");
        double t0 = vc_now();
        for (int i = 0; i < 10; i++) G->sample_rows(dt, dl, dls, dz, R, V, rows, u);
        check_sticky("timing");
        printf("sample_rows 256 x 151936 (plain temperature): %.3f ms per step\n", (vc_now() - t0) * 100.0);
        for (int r = 0; r < R; r++) rows[r].top_k = 50, rows[r].top_p = 0.9f;
        t0 = vc_now();
        for (int i = 0; i < 10; i++) G->sample_rows(dt, dl, dls, dz, R, V, rows, u);
        check_sticky("timing top-k");
        printf("sample_rows 256 x 151936 (top_k 50, top_p 0.9): %.3f ms per step\n", (vc_now() - t0) * 100.0);
        for (int r = 0; r < R; r++) rows[r].top_k = 0, rows[r].top_p = 0.95f;
        t0 = vc_now();
        G->sample_rows(dt, dl, dls, dz, R, V, rows, u);
        check_sticky("timing top-p");
        printf("sample_rows 256 x 151936 (top_p 0.95 only): %.3f ms per step\n", (vc_now() - t0) * 1000.0);
        free(rows);
    }
    oom_rows();
    release_all();
    return vc_test_done();
}
