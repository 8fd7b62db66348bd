/* The CUDA sample_rows entry against the CPU entry on the same logits and uniforms: greedy tokens
 * equal; plain-temperature and min-p rows (sampled on the device) equal except a draw whose u * total
 * lies within 1e-12 (relative) of a CDF boundary, where the summation order may pick the neighbour
 * (src/backend/cuda/cuda_sample.cu); top-k / top-p rows (CPU fallback inside the entry) bitwise; lp
 * within 1e-5, lps within 1e-5 where the tokens agree; two device runs bitwise identical.
 * Without a GPU: "no CUDA device: skipped", exit 0. */
#include "cuda_test_util.h"

static const vc_backend *C, *G;

typedef struct {
    float temperature, top_p, min_p;
    int top_k, greedy;
} knobs;

static const knobs MODES[] = {
    { 1.0f, 1.0f, 0.0f, 0, 1 },   { 1.0f, 1.0f, 0.0f, 0, 0 },   { 0.6f, 1.0f, 0.0f, 0, 0 },
    { 1.4f, 1.0f, 0.05f, 0, 0 },  { 1.0f, 1.0f, 0.0f, 50, 0 },  { 0.8f, 0.9f, 0.0f, 0, 0 },
    { 0.9f, 0.95f, 0.02f, 40, 0 }, { 1.0f, 1.0f, 0.0f, -1, 0 },
};
#define NMODES ((int)(sizeof MODES / sizeof *MODES))

/* the CPU entry's CDF in id order at token k (plain / min-p rows): running sums before and after k */
static void cdf_at(const float *z, int64_t V, const knobs *q, int k, double *before, double *after, double *total) {
    float T = q->temperature, xmax = -INFINITY;
    for (int64_t v = 0; v < V; v++) xmax = z[v] / T > xmax ? z[v] / T : xmax;
    double cum = 0;
    *before = *after = 0;
    for (int64_t v = 0; v < V; v++) {
        double w = exp((double)(z[v] / T - xmax));
        if (q->min_p > 0 && w < (double)q->min_p) continue;
        if (v == k) *before = cum;
        cum += w;
        if (v == k) *after = cum;
    }
    *total = cum;
}

static void run_case(int64_t V, int R, int draws_per_row, int *n_tok, int *n_same, int *n_boundary) {
    vc_sample_row *rows = calloc((size_t)R, sizeof *rows);
    int D = R * draws_per_row;
    float *z = hrand((size_t)R * (size_t)V, 4.0f), *u = hbuf((size_t)D);
    for (int r = 0; r < R; r++) {
        const knobs *q = &MODES[r % NMODES];
        rows[r] = (vc_sample_row){ q->temperature, q->top_p, q->min_p, q->top_k, q->greedy, r * draws_per_row,
                                   draws_per_row };
        if (r % 5 == 4) /* ties: a quantised row */
            for (int64_t v = 0; v < V; v++) z[r * V + v] = roundf(z[r * V + v]);
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
        const knobs *q = &MODES[r % NMODES];
        int host = !q->greedy && ((q->top_k > 0 && q->top_k < V) || q->top_p < 1);
        for (int d = rows[r].first; d < rows[r].first + rows[r].n; d++) {
            (*n_tok)++;
            if (gt[d] == ct[d]) {
                (*n_same)++;
                CHECK_MSG(fabsf(gl[d] - cl[d]) <= 1e-5f, "V %lld row %d: lp %g vs %g", (long long)V, r, gl[d], cl[d]);
                CHECK_MSG(fabsf(gls[d] - cls[d]) <= 1e-5f, "V %lld row %d: lps %g vs %g", (long long)V, r, gls[d], cls[d]);
                if (host) CHECK_MSG(gl[d] == cl[d] && gls[d] == cls[d], "V %lld row %d: fallback row not bitwise", (long long)V, r);
                continue;
            }
            double before, after, total;
            cdf_at(z + r * V, V, q, ct[d], &before, &after, &total);
            double goal = (double)u[d] * total, gap = fmin(fabs(goal - before), fabs(goal - after));
            int boundary = !host && !q->greedy && gap <= 1e-12 * total;
            *n_boundary += boundary;
            CHECK_MSG(boundary, "V %lld row %d mode %d draw %d: gpu token %d, cpu %d (u %.9g, gap %.3g of %.6g)",
                      (long long)V, r, r % NMODES, d, gt[d], ct[d], u[d], gap, total);
        }
    }
    free(rows);
    free(ct);
    free(gt);
    free(gt2);
}

int main(void) {
    if (gpu_skip()) return 0;
    C = vc_backend_cpu();
    G = vc_backend_cuda();
    CHECK(G && G->sample_rows);
    if (!G || !G->sample_rows) return vc_test_done();
    const int64_t Vs[] = { 1, 7, 1000, 32000, 151936 };
    int n_tok = 0, n_same = 0, n_boundary = 0;
    for (size_t i = 0; i < sizeof Vs / sizeof *Vs; i++) run_case(Vs[i], Vs[i] > 100000 ? 24 : 40, 3, &n_tok, &n_same, &n_boundary);
    printf("cuda sample_rows vs cpu: %d/%d tokens equal, %d CDF-boundary differences\n", n_same, n_tok, n_boundary);
    /* a decode step at the target shape: 256 rows of a 152k vocabulary */
    {
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
        free(rows);
    }
    release_all();
    return vc_test_done();
}
