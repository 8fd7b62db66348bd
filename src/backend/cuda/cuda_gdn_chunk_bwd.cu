/* The chunked Gated DeltaNet's backward on CUDA: its three launches (cuda_gdn_chunk.cu's header gives the scheme;
 * the shared device code is cuda_gdn_chunk.h). */
#include "cuda_gdn_chunk.h"

namespace {

/* ---- backward ---- */
__global__ void __launch_bounds__(CK_THREADS, 2) k_ck_bwd_prep(ck_args p) {
    ck_begin(p);
    ck_ws w = ck_ws_of(p);
    for (int64_t task = blockIdx.x; task < p.nc * p.nv; task += gridDim.x) {
        int h = (int)(task % p.nv);
        ck_pos x = ck_find(p, task / p.nv);
        CK_SETUP(p, x, h);
        ck_prep(p, w, x, h, 1, NULL, p.W + task * C * dk);
        const float *dO = p.dout + x.t0 * vs + (int64_t)h * dv;
        bmm(p.U + task * C * dv, dv, w.M, 1, C, dO, vs, 1, n, n, dv, 1.0f, 0, TRI_UPPER); /* dD0 = M^T dO */
        __syncthreads();
    }
}

__global__ void __launch_bounds__(CK_THREADS, 2) k_ck_bwd_state(ck_args p) {
    ck_begin(p);
    extern __shared__ double ck_shm[];
    ck_sh sh = ck_sh_of(p, (char *)ck_shm);
    ck_cols c = ck_cols_of(p);
    const int dk = p.dk, dv = p.dv, cw = p.cw;
    const int64_t L = p.cu[c.s + 1] - p.cu[c.s], SS = (int64_t)dk * dv, base = ck_base(p, c.s), R = L / p.C * p.C;
    const int start = p.from && p.from[c.s] >= 0; /* its start's gradient wanted (dinit) */
    if (L <= 0 || (p.from && start != p.pass)) return;
    /* the gradient reaching its tap from the sequences starting there */
    const float *dtap = vc_cu_gdn_tap(p.tap_of, p.tap, c.s, p.nv, c.h, SS);
    for (int e = threadIdx.x; e < dk * cw; e += blockDim.x) sh.S[e] = 0.0f;
    __syncthreads();
    if (dtap && R == L) ck_cols_in(sh.S, dtap, dk, dv, cw, c.j0, c.cn, 0);
    __syncthreads();
    for (int64_t c0 = (L - 1) / p.C * p.C, gi = base + c0 / p.C; c0 >= 0; c0 -= p.C, gi--) {
        ck_pos x = { c.s, (int)(L - c0 < p.C ? L - c0 : p.C), p.cu[c.s] + c0 };
        int64_t task = gi * p.nv + c.h;
        float *dSk = p.dS + task * SS, *dD = p.U + task * p.C * dv + c.j0;
        const float *dO = p.dout + x.t0 * ((int64_t)p.nv * dv) + (int64_t)c.h * dv + c.j0;
        ck_cols_out(dSk, sh.S, dk, dv, cw, c.j0, c.cn);
        __syncthreads();
        ck_state_rows(p, sh, x, c.h, c0 > 0 || start);
        bmm_k<CK_TK_STATE>(dD, dv, sh.Kt, dk, 1, sh.S, cw, 1, x.n, dk, c.cn, 1.0f, 1, TRI_NONE); /* dD = dD0 + K~ dS */
        if (c0 == 0 && !start) break; /* (the state before the sequence has no gradient to pass) */
        __syncthreads();
        ck_state_decay(p, sh, x.n);
        /* + Qa^T dO */
        bmm_k<CK_TK_STATE>(sh.S, cw, sh.Qa, 1, dk, dO, (int64_t)p.nv * dv, 1, dk, x.n, c.cn, 1.0f, 1, TRI_NONE);
        if (!p.no_delta) /* - W^T dD (the same thread's elements: no barrier) */
            bmm_k<CK_TK_STATE>(sh.S, cw, p.W + task * p.C * dk, 1, dk, dD, dv, 1, dk, x.n, c.cn, -1.0f, 1, TRI_NONE);
        __syncthreads();
        if (dtap && c0 == R) {
            ck_cols_in(sh.S, dtap, dk, dv, cw, c.j0, c.cn, 1);
            __syncthreads();
        }
    }
    if (start) ck_cols_out(p.dinit + ((int64_t)c.s * p.nv + c.h) * SS, sh.S, dk, dv, cw, c.j0, c.cn);
}

__global__ void __launch_bounds__(CK_THREADS, 2) k_ck_bwd_main(ck_args p) {
    ck_begin(p);
    ck_ws w = ck_ws_of(p);
    for (int64_t task = blockIdx.x; task < p.nc * p.nv; task += gridDim.x) {
        int h = (int)(task % p.nv);
        ck_pos x = ck_find(p, task / p.nv);
        CK_SETUP(p, x, h);
        const float *S0 = p.states + task * dk * dv, *dS = p.dS + task * dk * dv, *dD = p.U + task * C * dv;
        const float *dO = p.dout + x.t0 * vs + (int64_t)h * dv;
        ck_prep(p, w, x, h, 1, w.U, w.W);
        for (int e = threadIdx.x; e < n * dv; e += blockDim.x) w.D[e] = w.U[e];
        __syncthreads();
        if (!p.no_delta) /* D = U - W S0 (no delta: U = D = beta V) */
            bmm(w.D, dv, w.W, dk, 1, S0, dv, 1, n, dk, dv, -1.0f, 1, TRI_NONE);
        __syncthreads();
        if (p.gk) {
            ck_bwd_gk(p, w, x, h, S0, dS, dO, dD);
            goto out;
        }
        ck_bwd_outputs(p, w, x, h, S0, dS, dO);
        if (!p.no_delta) ck_bwd_delta(p, w, x, h, S0, dD);
        else ck_bwd_beta_v(p, x, h, dD);
        for (int i = threadIdx.x; i < n; i += blockDim.x) { /* dG_i: its own terms, pairs (i, j < i) less (i' > i, i) */
            double s = w.dGv[i];
            for (int j = 0; j < i; j++) s += w.tp[i * C + j];
            for (int r = i + 1; r < n; r++) s -= w.tp[r * C + i];
            w.G[i] = s; /* (made suffix sums below) */
        }
        __syncthreads();
        if (threadIdx.x == 0 && p.gg) { /* G_i = sum of g over rows 0..i: the suffix sums in place, in row order */
            double acc = 0;
            for (int i = n - 1; i >= 0; i--) w.G[i] = acc += w.G[i];
        }
        __syncthreads();
        /* ... added by the block (thread 0 adding them into gg waited a memory latency a row: gg might be G) */
        for (int i = threadIdx.x; p.gg && i < n; i += blockDim.x) p.gg[(x.t0 + i) * p.nv + h] += (float)w.G[i];
    out:
        for (int e = threadIdx.x; e < n * dk; e += blockDim.x) {
            int64_t at = ((x.t0 + e / dk) * p.nv + h) * dk + e % dk;
            if (p.pq) p.pq[at] = w.dQ[e];
            if (p.pk) p.pk[at] = w.dK[e];
        }
        __syncthreads();
    }
}

} // namespace


void vc_cu_gdn_chunk_bwd(float *dq, float *dk, float *dv, float *dg, float *dbeta, const float *dout,
                         const float *saved, const float *q, const float *k, const float *v, const float *g, const float *beta,
                         const vc_gdn_desc *d) {
    const char *op = "gated delta rule backward (chunked)";
    seq_tabs tab;
    void *tabs = vc_cu_upload_tabs(d->n_seq, d->cu, d->ckpt, NULL, &tab, op);
    if (!tabs) return;
    ck_args p;
    int64_t grid = ck_setup(&p, d, tab.cu, op);
    size_t SS = (size_t)d->dk * d->dv, sh = ck_smem(d, p.cw), part = (size_t)d->cu[d->n_seq] * d->n_v_head * d->dk;
    p.q = q, p.k = k, p.v = v, p.g = g, p.beta = beta, p.dout = dout, p.states = (float *)saved;
    p.gv = dv, p.gg = dg, p.gb = dbeta;
    p.U = (float *)vc_cu_scratch(sizeof(float) * (size_t)(p.nc * p.nv) * p.C * p.dv, op);
    p.W = (float *)vc_cu_scratch(sizeof(float) * (size_t)(p.nc * p.nv) * p.C * p.dk, op);
    p.dS = (float *)vc_cu_scratch(sizeof(float) * SS * (size_t)(p.nc * p.nv), op);
    int nt = grid > 0 ? ck_share_setup(&p, d, op) : -1, ok = nt >= 0 && p.U && p.W && p.dS;
    if (ok && dq) ok = (p.pq = (float *)vc_cu_scratch(sizeof(float) * part, op)) != NULL;
    if (ok && dk) ok = (p.pk = (float *)vc_cu_scratch(sizeof(float) * part, op)) != NULL;
    if (ok && nt) ok = (p.dinit = (float *)vc_cu_scratch(sizeof(float) * SS * (size_t)d->n_seq * d->n_v_head, op)) &&
                       vc_cu_ok(cudaMemsetAsync(p.dinit, 0, sizeof(float) * SS * (size_t)d->n_seq * d->n_v_head,
                                                vc_cu_stream()), op);
    if (ok) {
        cudaStream_t st = vc_cu_stream();
        unsigned sblocks = (unsigned)(d->n_seq * p.nv * p.ncg);
        cudaFuncSetAttribute(k_ck_bwd_state, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sh);
        k_ck_bwd_prep<<<(unsigned)grid, CK_THREADS, 0, st>>>(p);
        if (p.from) { /* the sequences starting from taps first, their starts' gradients summed per tap */
            p.pass = 1;
            k_ck_bwd_state<<<sblocks, CK_THREADS, sh, st>>>(p);
            vc_cu_gdn_tap_sum(p.tap, p.dinit, p.from, p.tap_of, d->n_seq, nt, (int64_t)SS * p.nv);
            p.pass = 0;
        }
        k_ck_bwd_state<<<sblocks, CK_THREADS, sh, st>>>(p);
        k_ck_bwd_main<<<(unsigned)grid, CK_THREADS, 0, st>>>(p);
        int64_t r0 = d->cu[0], rows = d->cu[d->n_seq] - r0;
        if (dq) vc_cu_gdn_head_sum(dq, p.pq, r0, rows, d->n_k_head, d->n_v_head / d->n_k_head, d->dk);
        if (dk) vc_cu_gdn_head_sum(dk, p.pk, r0, rows, d->n_k_head, d->n_v_head / d->n_k_head, d->dk);
        vc_cu_end(op);
    }
    ck_share_free(&p);
    vc_cu_scratch_free(p.pq);
    vc_cu_scratch_free(p.pk);
    vc_cu_scratch_free(p.dS);
    vc_cu_scratch_free(p.U);
    vc_cu_scratch_free(p.W);
    vc_cu_scratch_free(p.ws);
    vc_cu_scratch_free(tabs);
}
