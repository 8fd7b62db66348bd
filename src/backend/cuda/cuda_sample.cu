/* The CUDA sampling entry (semantics in src/tensor/backend.h, sample_rows): the rollout engine's
 * logits stay on the device; only tokens and log-probs go back.
 *
 * One block per row, fixed-order reductions (deterministic run to run):
 *  - argmax (lowest id on ties) and the raw log-sum-exp: float max, double sum of exp(z - max) by a
 *    block tree over strided partial sums;
 *  - greedy rows take the argmax (lps 0);
 *  - the plain temperature case, optionally with min-p (top_k off, top_p >= 1: verl's default) samples
 *    by inverse CDF over kept token ids in id order: each thread sums w = exp((double)(z/T - xmax))
 *    over a contiguous chunk of ids, thread 0 scans the chunk sums in double (fixed order), the thread
 *    whose chunk crosses u * total walks its chunk; none crossing: the last kept token.
 *  - rows with top-k or top-p (sorted visiting order) are sampled by the CPU entry on a host copy of
 *    those rows only (bit-identical to the CPU backend; costs V floats per such row).
 * Where the device result can differ from the CPU entry: the total and the running sums are formed in
 * a different order (chunk sums instead of one sequential sum) and the device's double exp may differ
 * from glibc's by an ulp, so a draw whose u * total lies within ~1e-15 (relative) of a CDF boundary may
 * pick the neighbouring kept token; lp differs only by the log-sum-exp's summation order (~1e-7 rel),
 * lps by ~1e-12 rel. Greedy tokens are identical (exact max). */
#include "cuda_internal.h"
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

extern "C" void vc_cu_sample_rows(int32_t *tok, float *lp, float *lps, const float *logits, int64_t R, int64_t V,
                                  const vc_sample_row *rows, const float *u);

#define NT 512

struct dev_row {
    float temperature, min_p;
    int32_t greedy, row, first, n;
};

/* block reduction of (value, id): larger value wins, lowest id on ties; result in v[0], id[0] */
__device__ static void block_argmax(float *v, int *id) {
    for (int s = NT / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) {
            float a = v[threadIdx.x], b = v[threadIdx.x + s];
            int ia = id[threadIdx.x], ib = id[threadIdx.x + s];
            if (b > a || (b == a && ib < ia) || (a != a && b == b)) {
                v[threadIdx.x] = b;
                id[threadIdx.x] = ib;
            }
        }
        __syncthreads();
    }
}

__device__ static void block_sum(double *d) {
    for (int s = NT / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) d[threadIdx.x] += d[threadIdx.x + s];
        __syncthreads();
    }
}

__device__ static bool kept(double w, float min_p) { return !(min_p > 0) || w >= (double)min_p; }

__global__ static void k_sample(int32_t *tok, float *lp, float *lps, const float *logits, int64_t V,
                                const dev_row *rows, const float *u) {
    __shared__ float sv[NT];
    __shared__ int si[NT];
    __shared__ double sd[NT], ex[NT], in[NT];
    __shared__ int s_tok, s_last;
    const dev_row q = rows[blockIdx.x];
    const float *z = logits + (int64_t)q.row * V;
    const int t = threadIdx.x;
    /* argmax and log-sum-exp of the raw logits */
    float m = -INFINITY;
    int best = INT_MAX;
    for (int64_t v = t; v < V; v += NT)
        if (z[v] > m) m = z[v], best = (int)v;
    sv[t] = m;
    si[t] = best;
    __syncthreads();
    block_argmax(sv, si);
    const float zmax = sv[0];
    const int amax = si[0] == INT_MAX ? 0 : si[0];
    double s = 0;
    for (int64_t v = t; v < V; v += NT) s += exp((double)(z[v] - zmax));
    sd[t] = s;
    __syncthreads();
    block_sum(sd);
    const float lse = zmax + (float)log(sd[0]);
    __syncthreads();
    if (q.greedy) {
        for (int d = t; d < q.n; d += NT) {
            tok[q.first + d] = amax;
            lp[q.first + d] = z[amax] - lse;
            lps[q.first + d] = 0.0f;
        }
        return;
    }
    /* x = z / T, its max, then chunk sums of the kept weights */
    const float T = q.temperature > 0 ? q.temperature : 1.0f;
    float xm = -INFINITY;
    for (int64_t v = t; v < V; v += NT) xm = fmaxf(xm, z[v] / T);
    sv[t] = xm;
    si[t] = 0;
    __syncthreads();
    block_argmax(sv, si);
    const float xmax = sv[0];
    const int64_t chunk = (V + NT - 1) / NT, c0 = t * chunk, c1 = c0 + chunk < V ? c0 + chunk : V;
    double cs = 0;
    int last = -1;
    for (int64_t v = c0; v < c1; v++) {
        double w = exp((double)(z[v] / T - xmax));
        if (kept(w, q.min_p)) cs += w, last = (int)v;
    }
    sd[t] = cs;
    si[t] = last;
    __syncthreads();
    if (t == 0) { /* fixed-order scan of the chunk sums; the last kept token */
        double run = 0;
        int l = -1;
        for (int i = 0; i < NT; i++) {
            ex[i] = run;
            run += sd[i];
            in[i] = run;
            l = si[i] >= 0 ? si[i] : l;
        }
        s_last = l;
    }
    __syncthreads();
    const double total = in[NT - 1];
    for (int d = 0; d < q.n; d++) {
        const double goal = (double)u[q.first + d] * total;
        if (t == 0) s_tok = s_last;
        __syncthreads();
        if (in[t] > goal && (t == 0 || !(in[t - 1] > goal)) && s_last >= 0) {
            double cum = ex[t];
            int pick = -1;
            for (int64_t v = c0; v < c1 && pick < 0; v++) {
                double w = exp((double)(z[v] / T - xmax));
                if (!kept(w, q.min_p)) continue;
                cum += w;
                if (cum > goal) pick = (int)v;
            }
            s_tok = pick >= 0 ? pick : si[t]; /* rounding at the chunk's end: its last kept token */
        }
        __syncthreads();
        if (t == 0) {
            int k = s_tok;
            if (k < 0) { /* nothing kept: the argmax, as the CPU entry */
                tok[q.first + d] = amax;
                lps[q.first + d] = 0.0f;
                k = amax;
            } else {
                double w = exp((double)(z[k] / T - xmax));
                tok[q.first + d] = k;
                lps[q.first + d] = (float)log(w / total);
            }
            lp[q.first + d] = z[k] - lse;
        }
        __syncthreads();
    }
}

static bool on_device(const vc_sample_row *r, int64_t V) {
    return r->greedy || (!(r->top_k > 0 && r->top_k < V) && !(r->top_p > 0 && r->top_p < 1));
}

/* rows with top-k / top-p: the CPU entry on a host copy of those rows, results copied into place */
static void host_rows(int32_t *tok, float *lp, float *lps, const float *logits, int64_t R, int64_t V,
                      const vc_sample_row *rows, const float *u, int64_t nh, const char *op) {
    cudaStream_t st = vc_cu_stream();
    int64_t nd = 0;
    for (int64_t r = 0; r < R; r++)
        if (!on_device(&rows[r], V)) nd += rows[r].n;
    float *z = (float *)malloc((size_t)(nh * V) * sizeof(float)), *hu = (float *)malloc((size_t)nd * sizeof(float));
    float *hl = (float *)malloc((size_t)nd * 2 * sizeof(float));
    int32_t *ht = (int32_t *)malloc((size_t)nd * sizeof(int32_t));
    vc_sample_row *hr = (vc_sample_row *)malloc((size_t)nh * sizeof *hr);
    if (!z || !hu || !hl || !ht || !hr) {
        vc_cu_fail(VC_ERR_NOMEM, op, "host scratch for top-k / top-p rows");
        goto out;
    }
    {
        int64_t k = 0, d = 0;
        for (int64_t r = 0; r < R; r++) {
            if (on_device(&rows[r], V)) continue;
            if (!vc_cu_ok(cudaMemcpyAsync(z + k * V, logits + r * V, (size_t)V * sizeof(float),
                                          cudaMemcpyDeviceToHost, st), op)) goto out;
            hr[k] = rows[r];
            hr[k].first = (int32_t)d;
            memcpy(hu + d, u + rows[r].first, (size_t)rows[r].n * sizeof(float));
            d += rows[r].n;
            k++;
        }
        if (!vc_cu_ok(cudaStreamSynchronize(st), op)) goto out;
        vc_backend_cpu()->sample_rows(ht, hl, hl + nd, z, nh, V, hr, hu);
        k = 0;
        for (int64_t r = 0; r < R; r++) {
            if (on_device(&rows[r], V)) continue;
            size_t b = (size_t)rows[r].n * 4;
            int64_t f = hr[k++].first;
            if (!vc_cu_ok(cudaMemcpyAsync(tok + rows[r].first, ht + f, b, cudaMemcpyHostToDevice, st), op) ||
                !vc_cu_ok(cudaMemcpyAsync(lp + rows[r].first, hl + f, b, cudaMemcpyHostToDevice, st), op) ||
                !vc_cu_ok(cudaMemcpyAsync(lps + rows[r].first, hl + nd + f, b, cudaMemcpyHostToDevice, st), op))
                goto out;
        }
        vc_cu_ok(cudaStreamSynchronize(st), op); /* the host buffers go away below */
    }
out:
    free(z);
    free(hu);
    free(hl);
    free(ht);
    free(hr);
}

extern "C" void vc_cu_sample_rows(int32_t *tok, float *lp, float *lps, const float *logits, int64_t R, int64_t V,
                                  const vc_sample_row *rows, const float *u) {
    const char *op = "sample_rows";
    if (!vc_cu_begin(op) || R <= 0) return;
    if (V <= 0 || V > INT_MAX) {
        vc_cu_fail(VC_ERR_ARG, op, "vocabulary size outside [1, 2^31)");
        return;
    }
    int64_t nd = 0, nh = 0, ndraw = 0;
    for (int64_t r = 0; r < R; r++) {
        ndraw = rows[r].first + rows[r].n > ndraw ? rows[r].first + rows[r].n : ndraw;
        if (on_device(&rows[r], V)) nd++;
        else nh++;
    }
    if (nd > 0) {
        dev_row *h = (dev_row *)malloc((size_t)nd * sizeof *h);
        if (!h) {
            vc_cu_fail(VC_ERR_NOMEM, op, "host row descriptors");
            return;
        }
        int64_t k = 0;
        for (int64_t r = 0; r < R; r++)
            if (on_device(&rows[r], V))
                h[k++] = dev_row{ rows[r].temperature, rows[r].min_p, rows[r].greedy, (int32_t)r, rows[r].first,
                                  rows[r].n };
        dev_row *dr = (dev_row *)vc_cu_upload(h, (size_t)nd * sizeof *h, op);
        float *du = dr ? (float *)vc_cu_upload(u, (size_t)(ndraw ? ndraw : 1) * sizeof(float), op) : NULL;
        free(h);
        if (dr && du) {
            k_sample<<<(unsigned)nd, NT, 0, vc_cu_stream()>>>(tok, lp, lps, logits, V, dr, du);
            vc_cu_end(op);
        }
        vc_cu_scratch_free(dr);
        vc_cu_scratch_free(du);
    }
    if (nh > 0) host_rows(tok, lp, lps, logits, R, V, rows, u, nh, op);
}
