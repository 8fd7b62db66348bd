/* Gated DeltaNet's chunked form on CUDA (the CPU's is src/backend/cpu/cpu_gdn_chunk.c, whose header gives the
 * algebra): where no rollout state is carried (training's forward and backward, the log-prob passes), chunks of d->ckpt rows from each sequence's row 0, so a sequence's outputs are the same bits
 * in any batch. Three launches each way:
 *   forward   1. per (chunk, value head), in parallel: decays, Q K^T, K K^T, T = (I + A)^-1, U = T beta V and
 *                W = T beta a K (D = beta V without the delta rule)
 *             2. per (sequence, value head, group of state columns): the state through the chunks (a column of
 *                the state needs only its own columns of U and D): keeps S0, D = U - W S0, S = b S0 + K~^T D
 *             3. per (chunk, value head): O = scale diag(a) Q S0 + (E o scale Q K^T) D
 *   backward  1. per (chunk, value head): W and dD0 = M^T dO
 *             2. per (sequence, value head, column group), from the last chunk: keeps dS (the gradient of the
 *                state after the chunk), dD = dD0 + K~ dS, dS = b dS + Qa^T dO - W^T dD
 *             3. per (chunk, value head): everything else from S0, dS and dD: dq and dk of each value head (summed
 *                over a q/k head's value heads in order by the recurrence's kernel), dv, dg, dbeta
 * Products are block-wide loops (bmm) with each element's terms in a fixed order, so the same bits run to run; the
 * per-chunk arrays of the parallel launches live in a global workspace per resident block. A decay per key channel
 * (Kimi Delta Attention, d->gk) takes the same launches with the CPU's blocks of decayed products
 * (cuda_gdn_chunk_gk.h). */
#include "cuda_gdn_chunk.h"

namespace {

/* ---- forward ---- */
__global__ void __launch_bounds__(CK_THREADS, 2) k_ck_fwd_prep(ck_args p) {
    ck_begin(p);
    ck_ws w = ck_ws_of(p);
    for (int64_t task = blockIdx.x; task < p.nc * p.nv; task += gridDim.x) {
        int64_t gi = task / p.nv;
        int h = (int)(task % p.nv);
        ck_prep(p, w, ck_find(p, gi), h, 1, p.U + task * p.C * p.dv, p.W + task * p.C * p.dk);
    }
}


__global__ void __launch_bounds__(CK_THREADS, 2) k_ck_fwd_state(ck_args p) {
    ck_begin(p);
    extern __shared__ double ck_shm[];
    ck_sh sh = ck_sh_of(p, (char *)ck_shm);
    ck_cols c = ck_cols_of(p);
    const int dk = p.dk, dv = p.dv, cw = p.cw;
    const int64_t L = p.cu[c.s + 1] - p.cu[c.s], SS = (int64_t)dk * dv, base = ck_base(p, c.s), R = L / p.C * p.C;
    if (p.from && (p.from[c.s] >= 0) != p.pass) return; /* (another pass's sequence) */
    const float *init = p.from && p.from[c.s] >= 0 ? vc_cu_gdn_tap(p.tap_of, p.tap, p.from[c.s], p.nv, c.h, SS)
                                                   : NULL;
    float *tap = vc_cu_gdn_tap(p.tap_of, p.tap, c.s, p.nv, c.h, SS);
    for (int e = threadIdx.x; e < dk * cw; e += blockDim.x) sh.S[e] = 0.0f;
    __syncthreads();
    if (init) ck_cols_in(sh.S, init, dk, dv, cw, c.j0, c.cn, 0);
    __syncthreads();
    for (int64_t c0 = 0, gi = base; c0 < L; c0 += p.C, gi++) {
        ck_pos x = { c.s, (int)(L - c0 < p.C ? L - c0 : p.C), p.cu[c.s] + c0 };
        int64_t task = gi * p.nv + c.h;
        float *S0 = p.states + task * SS, *D = p.U + task * p.C * dv + c.j0;
        ck_cols_out(S0, sh.S, dk, dv, cw, c.j0, c.cn);
        if (tap && c0 == R) ck_cols_out(tap, sh.S, dk, dv, cw, c.j0, c.cn);
        if (!p.no_delta) /* D = U - W S0 */
            bmm_k<CK_TK_STATE>(D, dv, p.W + task * p.C * dk, dk, 1, sh.S, cw, 1, x.n, dk, c.cn, -1.0f, 1, TRI_NONE);
        if (c0 + p.C >= L && !(tap && R == L)) break;
        __syncthreads(); /* (D is complete) */
        ck_state_rows(p, sh, x, c.h, 0);
        ck_state_decay(p, sh, x.n);
        bmm_k<CK_TK_STATE>(sh.S, cw, sh.Kt, 1, dk, D, dv, 1, dk, x.n, c.cn, 1.0f, 1, TRI_NONE); /* S = b S0 + K~^T D */
        __syncthreads();
    }
    if (tap && R == L) ck_cols_out(tap, sh.S, dk, dv, cw, c.j0, c.cn); /* (its end: the state after the last chunk) */
}

__global__ void __launch_bounds__(CK_THREADS, 2) k_ck_fwd_out(ck_args p) {
    ck_begin(p);
    ck_ws w = ck_ws_of(p);
    for (int64_t task = blockIdx.x; task < p.nc * p.nv; task += gridDim.x) {
        int h = (int)(task % p.nv);
        ck_pos x = ck_find(p, task / p.nv);
        CK_SETUP(p, x, h);
        ck_prep(p, w, x, h, 0, NULL, NULL);
        float *o = p.o + x.t0 * vs + (int64_t)h * dv;
        const float *S0 = p.states + task * dk * dv, *D = p.U + task * C * dv;
        bmm(o, vs, w.Qa, dk, 1, S0, dv, 1, n, dk, dv, 1.0f, 0, TRI_NONE);            /* scale diag(a) Q S0 */
        bmm(o, vs, w.M, C, 1, D, dv, 1, n, n, dv, 1.0f, 1, TRI_LOWER);                /* + (scale E o Q K^T) D */
        __syncthreads();
    }
}

} // namespace

/* ---- host ---- */
static int ck_env_off(void) {
    const char *e = getenv("VERLC_GDN_RECURRENCE");
    return e && *e && strcmp(e, "0");
}

int vc_cu_gdn_chunk_ok(const vc_gdn_desc *d) {
    return vc_gdn_chunked(d) && d->ckpt <= CK_MAX && ck_smem(d, ck_cw(d)) <= CK_SMEM_MAX && !ck_env_off();
}

/* shared starts (d->from): from and each sequence's tap slot uploaded (*from, *tap_of: one block, freed with
 * vc_cu_scratch_free(*from)) and the taps' memory (*tap); returns the taps' count (0: no from), -1 on failure (sticky
 * error set) */
int vc_cu_share_setup(int n, const int32_t *fr, size_t SH, const int **from, const int **tap_of, float **tap,
                      const char *op) {
    *from = *tap_of = NULL;
    *tap = NULL;
    if (!fr) return 0;
    int nt = 0, *h = (int *)malloc(sizeof(int) * 2 * (size_t)(n ? n : 1));
    if (!h) {
        vc_cu_fail(VC_ERR_NOMEM, op, "cannot allocate the shared starts' table");
        return -1;
    }
    for (int s = 0; s < n; s++) h[s] = fr[s], h[n + s] = -1;
    for (int s = 0; s < n && nt >= 0; s++) {
        int f = fr[s];
        if (f >= 0 && (f >= s || fr[f] >= 0)) nt = -1;
        else if (f >= 0 && h[n + f] < 0) h[n + f] = nt++;
    }
    if (nt < 0) vc_cu_fail(VC_ERR_ARG, op, "a sequence starts from a later one, or from one that starts from another");
    int *dev = nt >= 0 ? (int *)vc_cu_upload(h, sizeof(int) * 2 * (size_t)n, op) : NULL;
    free(h);
    if (!dev) return -1;
    *from = dev, *tap_of = dev + n;
    if (nt && !(*tap = (float *)vc_cu_scratch(sizeof(float) * SH * (size_t)nt, op))) return -1;
    return nt;
}

/* tap[slot] = the sum over the sequences s starting from the sequence in that slot, in order, of dinit[s] (SH floats
 * each) */
__global__ void k_gdn_tap_sum(float *tap, const float *dinit, const int *from, const int *tap_of, int n_seq, int nt,
                              int64_t SH) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nt * SH;
         i += (int64_t)gridDim.x * blockDim.x) {
        int slot = (int)(i / SH);
        float acc = 0;
        for (int s = 0; s < n_seq; s++)
            if (from[s] >= 0 && tap_of[from[s]] == slot) acc += dinit[s * SH + i % SH];
        tap[i] = acc;
    }
}

void vc_cu_gdn_tap_sum(float *tap, const float *dinit, const int *from, const int *tap_of, int n_seq, int nt,
                       int64_t SH) {
    if (nt > 0)
        k_gdn_tap_sum<<<vc_cu_blocks(nt * SH, CK_THREADS), CK_THREADS, 0, vc_cu_stream()>>>(tap, dinit, from, tap_of,
                                                                                          n_seq, nt, SH);
}


void vc_cu_gdn_chunk_fwd(float *o, float *saved, const float *q, const float *k, const float *v, const float *g,
                         const float *beta, const vc_gdn_desc *d) {
    const char *op = "gated delta rule forward (chunked)";
    seq_tabs tab;
    void *tabs = NULL;
    if (!vc_cu_seq_tabs(d->dev_tabs, d->n_seq, d->cu, saved ? d->ckpt : 0, NULL, &tab, &tabs, op)) return;
    ck_args p;
    int64_t grid = ck_setup(&p, d, tab.cu, op);
    size_t SS = (size_t)d->dk * d->dv, sh = ck_smem(d, p.cw);
    p.q = q, p.k = k, p.v = v, p.g = g, p.beta = beta, p.o = o;
    p.states = saved ? saved : (float *)vc_cu_scratch(sizeof(float) * SS * (size_t)(p.nc * p.nv), op);
    p.U = (float *)vc_cu_scratch(sizeof(float) * (size_t)(p.nc * p.nv) * p.C * p.dv, op);
    p.W = (float *)vc_cu_scratch(sizeof(float) * (size_t)(p.nc * p.nv) * p.C * p.dk, op);
    int nt = grid > 0 ? ck_share_setup(&p, d, op) : -1;
    if (nt >= 0 && p.states && p.U && p.W) {
        cudaStream_t st = vc_cu_stream();
        unsigned sblocks = (unsigned)(d->n_seq * p.nv * p.ncg);
        cudaFuncSetAttribute(k_ck_fwd_state, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sh);
        k_ck_fwd_prep<<<(unsigned)grid, CK_THREADS, 0, st>>>(p);
        k_ck_fwd_state<<<sblocks, CK_THREADS, sh, st>>>(p);
        if (p.from) { /* then the sequences starting from the taps the first pass kept */
            p.pass = 1;
            k_ck_fwd_state<<<sblocks, CK_THREADS, sh, st>>>(p);
        }
        if (o) k_ck_fwd_out<<<(unsigned)grid, CK_THREADS, 0, st>>>(p);
        vc_cu_end(op);
    }
    ck_share_free(&p);
    if (!saved) vc_cu_scratch_free(p.states);
    vc_cu_scratch_free(p.U);
    vc_cu_scratch_free(p.W);
    vc_cu_scratch_free(p.ws);
    vc_cu_scratch_free(tabs);
}
