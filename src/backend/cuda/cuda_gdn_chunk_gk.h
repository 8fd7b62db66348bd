/* Kimi Delta Attention's decay per key channel in the chunked form on CUDA (d->gk; the algebra in
 * src/backend/cpu/cpu_gdn_chunk.c's header): G, a and b are vectors over the key channels, and the decayed products
 * P_ij = sum_l q_il k_jl e^(G_il - G_jl) and KK_ij (likewise, j < i) are taken in blocks of CK_SUB rows: against the
 * earlier rows through the block's first row i0 (q_i e^(G_i - G_i0) . k_j e^(G_i0 - G_j), every factor at most 1),
 * within the block likewise while no channel decays past e^-CK_GK_SPAN in it, else pair by pair. Sums over the rows of
 * a channel (the decays' gradients, the state's b) run a thread per channel in row order: the same bits run to run.
 * Included by cuda_gdn_chunk.h after the device code it uses (ck_args, ck_ws, bmm, ck_out_mats, ck_delta_mats, ck_bwd_beta_v). */
#define CK_GK_SPAN 60.0

/* G [n, dk] (double, each channel's cumulative sum in row order) and a = e^G; a barrier */
__device__ void ck_decays_gk(const ck_args &p, ck_pos x, int h, double *G, float *a) {
    const int dk = p.dk;
    for (int l = threadIdx.x; l < dk; l += blockDim.x) {
        double acc = 0;
        for (int i = 0; i < x.n; i++) {
            acc += p.g[((x.t0 + i) * p.nv + h) * dk + l];
            G[i * dk + l] = acc;
            a[i * dk + l] = expf((float)acc);
        }
    }
    __syncthreads();
}

/* whether no channel decays past e^-CK_GK_SPAN over rows i0 .. i0 + m - 1 (the block's pairs may be factored) */
__device__ int ck_block_safe(const ck_args &p, const double *G, int i0, int m) {
    __shared__ int all;
    if (threadIdx.x == 0) all = 1;
    __syncthreads();
    int ok = 1;
    for (int l = threadIdx.x; l < p.dk; l += blockDim.x) ok &= G[i0 * p.dk + l] - G[(i0 + m - 1) * p.dk + l] <= CK_GK_SPAN;
    if (!ok) all = 0; /* (every writer writes the same value) */
    __syncthreads();
    ok = all;
    __syncthreads(); /* (read before the next call's reset) */
    return ok;
}

/* block [i0, i0 + m): Qh_i = q_i e^(G_i - G_i0), Kh_i = k_i e^(G_i - G_i0); Kl_j = k_j e^(G_i0 - G_j) for j < i0;
 * and (safe) Kd_i = k_i e^(G_i0 - G_i) for the block's rows; a barrier */
__device__ void ck_block_rows(const ck_args &p, const ck_ws &w, ck_pos x, int h, int i0, int m, int safe) {
    CK_SETUP(p, x, h);
    const double *G = w.G, *Gr = w.G + (int64_t)i0 * dk;
    for (int e = threadIdx.x; e < m * dk; e += blockDim.x) {
        int i = e / dk, l = e % dk;
        double d = G[(i0 + i) * dk + l] - Gr[l];
        float f = expf((float)d), kv = K[(i0 + i) * qs + l];
        w.Qh[e] = Q[(i0 + i) * qs + l] * f;
        w.Kh[e] = kv * f;
        if (safe) w.Kd[e] = kv * expf((float)-d);
    }
    for (int e = threadIdx.x; e < i0 * dk; e += blockDim.x) {
        int j = e / dk, l = e % dk;
        w.Kl[e] = K[j * qs + l] * expf((float)(Gr[l] - G[j * dk + l]));
    }
    __syncthreads();
}

/* the decays, P and KK by blocks, M = scale P, A = beta KK (j < i), Qa = scale a Q, K~ and Bk = beta a K; a barrier */
__device__ void ck_prods_gk(const ck_args &p, const ck_ws &w, ck_pos x, int h) {
    CK_SETUP(p, x, h);
    const int nd = p.no_delta;
    ck_decays_gk(p, x, h, w.G, w.a);
    for (int i0 = 0; i0 < n; i0 += CK_SUB) {
        int m = n - i0 < CK_SUB ? n - i0 : CK_SUB, safe = ck_block_safe(p, w.G, i0, m);
        ck_block_rows(p, w, x, h, i0, m, safe);
        if (i0) { /* against the earlier rows: P_ij = Qh_i . Kl_j */
            bmm(w.P + i0 * C, C, w.Qh, dk, 1, w.Kl, 1, dk, m, dk, i0, 1.0f, 0, TRI_NONE);
            if (!nd) bmm(w.KK + i0 * C, C, w.Kh, dk, 1, w.Kl, 1, dk, m, dk, i0, 1.0f, 0, TRI_NONE);
        }
        if (safe) { /* within the block (its upper triangle dropped below) */
            bmm(w.P + i0 * C + i0, C, w.Qh, dk, 1, w.Kd, 1, dk, m, dk, m, 1.0f, 0, TRI_NONE);
            if (!nd) bmm(w.KK + i0 * C + i0, C, w.Kh, dk, 1, w.Kd, 1, dk, m, dk, m, 1.0f, 0, TRI_NONE);
            continue;
        }
        for (int e = threadIdx.x; e < m * m; e += blockDim.x) { /* ... or pair by pair */
            int i = i0 + e / m, j = i0 + e % m;
            if (j > i) continue;
            float sp = 0, sk = 0;
            for (int l = 0; l < dk; l++) {
                float f = expf((float)(w.G[i * dk + l] - w.G[j * dk + l])), kj = K[j * qs + l];
                sp = fmaf(Q[i * qs + l] * kj, f, sp);
                sk = fmaf(K[i * qs + l] * kj, f, sk);
            }
            w.P[i * C + j] = sp, w.KK[i * C + j] = sk;
        }
        __syncthreads();
    }
    for (int e = threadIdx.x; e < n * n; e += blockDim.x) {
        int i = e / n, j = e % n;
        float pv = j <= i ? w.P[i * C + j] : 0.0f, kk = j < i && !nd ? w.KK[i * C + j] : 0.0f;
        w.P[i * C + j] = pv, w.KK[i * C + j] = kk;
        w.M[i * C + j] = p.scale * pv;
        w.A[i * C + j] = p.beta[(x.t0 + i) * p.nv + h] * kk;
    }
    for (int e = threadIdx.x; e < n * dk; e += blockDim.x) {
        int i = e / dk, l = e % dk;
        float be = p.beta[(x.t0 + i) * p.nv + h], kv = K[i * qs + l], ai = w.a[e];
        w.Qa[e] = p.scale * ai * Q[i * qs + l];
        w.Kt[e] = expf((float)(w.G[(n - 1) * dk + l] - w.G[e])) * kv;
        w.Bk[e] = be * ai * kv;
    }
    __syncthreads();
}

/* the state passes' rows of chunk x: K~ (and with qa, Qa) and b per channel into shared memory, a thread per
 * channel (its cumulative decays in row order, as ck_decays_gk); a barrier */
__device__ void ck_rows_sh_gk(const ck_args &p, const ck_sh &sh, ck_pos x, int h, int qa) {
    CK_SETUP(p, x, h);
    for (int l = threadIdx.x; l < dk; l += blockDim.x) {
        double tot = 0, acc = 0;
        for (int i = 0; i < n; i++) tot += p.g[((x.t0 + i) * p.nv + h) * dk + l];
        for (int i = 0; i < n; i++) {
            acc += p.g[((x.t0 + i) * p.nv + h) * dk + l];
            sh.Kt[i * dk + l] = expf((float)(tot - acc)) * K[i * qs + l];
            if (qa) sh.Qa[i * dk + l] = p.scale * expf((float)acc) * Q[i * qs + l];
        }
        sh.bv[l] = expf((float)tot);
    }
    __syncthreads();
}

/* the outputs' part: R = dO D^T (then dP = scale R), Y = D dS^T, Z = dO S0^T; dQ, dK and the decays' gradients of Qa,
 * K~ and b, a thread per channel */
__device__ void ck_bwd_outputs_gk(const ck_args &p, const ck_ws &w, ck_pos x, int h, const float *S0, const float *dS,
                                  const float *dO) {
    CK_SETUP(p, x, h);
    ck_out_mats(p, w, x, h, S0, dS, dO);
    for (int e = threadIdx.x; e < n * n; e += blockDim.x) {
        int i = e / n, j = e % n;
        w.R[i * C + j] = j <= i ? p.scale * w.R[i * C + j] : 0.0f;
    }
    for (int l = threadIdx.x; l < dk; l += blockDim.x) {
        double *dGl = w.dGv + (n - 1) * dk + l, sd = 0;
        for (int j = 0; j < dv; j++) sd += (double)S0[l * dv + j] * dS[l * dv + j];
        for (int i = 0; i < n; i++) w.dGv[i * dk + l] = 0.0;
        *dGl += sd * w.a[(n - 1) * dk + l]; /* b = a_(n-1) */
        for (int i = 0; i < n; i++) {
            int e = i * dk + l;
            float kt = expf((float)(w.G[(n - 1) * dk + l] - w.G[e]));
            w.dQ[e] = p.scale * w.a[e] * w.Z[e];
            w.dK[e] = kt * w.Y[e];
            double t = (double)w.Kt[e] * w.Y[e];
            w.dGv[e] += (double)w.Qa[e] * w.Z[e] - t;
            *dGl += t;
        }
    }
    __syncthreads();
}

/* the delta rule's part: Bk = beta a K, A_ij = beta_i KK_ij (dA becomes dKK) */
__device__ void ck_bwd_delta_gk(const ck_args &p, const ck_ws &w, ck_pos x, int h, const float *S0, const float *dD) {
    CK_SETUP(p, x, h);
    ck_delta_mats(p, w, x, h, S0, dD);
    for (int e = threadIdx.x; e < n * dk; e += blockDim.x) {
        int i = e / dk, l = e % dk;
        float be = p.beta[(x.t0 + i) * p.nv + h];
        w.dK[e] += be * w.a[e] * w.dB2[e];
        w.dGv[e] += (double)be * w.a[e] * K[i * qs + l] * w.dB2[e];
    }
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float be = p.beta[(x.t0 + i) * p.nv + h], db = ck_dot(V + i * vs, w.dB1 + i * dv, dv);
        for (int l = 0; l < dk; l++) db = fmaf(w.a[i * dk + l] * K[i * qs + l], w.dB2[i * dk + l], db);
        for (int j = 0; j < n; j++) {
            float dA = j < i ? w.dA[i * C + j] : 0.0f;
            db = fmaf(dA, w.KK[i * C + j], db);
            w.dA[i * C + j] = be * dA;
        }
        if (p.gb) p.gb[(x.t0 + i) * p.nv + h] += db;
    }
    __syncthreads();
}

/* the decayed products' gradients (dP in R, dKK in dA): by blocks through the factors, their decays' gradients on
 * G_i, G_j and G_i0, a thread per channel; pair by pair where the block was */
__device__ void ck_pairs_bwd_gk(const ck_args &p, const ck_ws &w, ck_pos x, int h) {
    CK_SETUP(p, x, h);
    const int nd = p.no_delta;
    for (int i0 = 0; i0 < n; i0 += CK_SUB) {
        int m = n - i0 < CK_SUB ? n - i0 : CK_SUB, safe = ck_block_safe(p, w.G, i0, m);
        ck_block_rows(p, w, x, h, i0, m, safe);
        const float *dP = w.R + i0 * C, *dKK = w.dA + i0 * C;
        for (int r = 0; r < (nd ? 1 : 2); r++) { /* P's terms (Qh), then KK's (Kh) */
            const float *dX = r ? dKK : dP, *H = r ? w.Kh : w.Qh;
            float *dH = r ? w.dKh : w.dQh;
            if (i0) { /* dQh = dP Kl, dKh = dKK Kl, dKl = dP^T Qh + dKK^T Kh */
                bmm(dH, dk, dX, C, 1, w.Kl, dk, 1, m, i0, dk, 1.0f, 0, TRI_NONE);
                bmm(w.dKl, dk, dX, 1, C, H, dk, 1, i0, m, dk, 1.0f, r, TRI_NONE);
            }
            if (safe) { /* ... and within the block through Kd */
                bmm(dH, dk, dX + i0, C, 1, w.Kd, dk, 1, m, m, dk, 1.0f, i0 > 0, TRI_NONE);
                bmm(w.dKd, dk, dX + i0, 1, C, H, dk, 1, m, m, dk, 1.0f, r, TRI_NONE);
            }
        }
        for (int l = threadIdx.x; (i0 || safe) && l < dk; l += blockDim.x) {
            const double *Gr = w.G + i0 * dk + l;
            double *dGr = w.dGv + i0 * dk + l;
            for (int i = 0; i < m; i++) { /* Qh, Kh: e^(G_i - G_i0) */
                int e = (i0 + i) * dk + l, b = i * dk + l;
                float f = expf((float)(w.G[e] - *Gr)), gq = w.dQh[b], gk = nd ? 0.0f : w.dKh[b];
                w.dQ[e] += gq * f;
                w.dK[e] += gk * f;
                double t = (double)gq * w.Qh[b] + (double)gk * w.Kh[b];
                w.dGv[e] += t;
                *dGr -= t;
            }
            for (int j = 0; j < i0 + (safe ? m : 0); j++) { /* Kl, Kd: e^(G_i0 - G_j) */
                int e = j * dk + l, b = (j - i0) * dk + l;
                float g = j < i0 ? w.dKl[e] : w.dKd[b], kv = j < i0 ? w.Kl[e] : w.Kd[b];
                w.dK[e] += g * expf((float)(*Gr - w.G[e]));
                double t = (double)g * kv;
                *dGr += t;
                w.dGv[e] -= t;
            }
        }
        for (int l = threadIdx.x; !safe && l < dk; l += blockDim.x) /* the block's pairs one by one */
            for (int i = i0; i < i0 + m; i++)
                for (int j = i0; j <= i; j++) {
                    float rp = w.R[i * C + j], rk = !nd && j < i ? w.dA[i * C + j] : 0.0f;
                    int ei = i * dk + l, ej = j * dk + l;
                    float f = expf((float)(w.G[ei] - w.G[ej])), qi = Q[i * qs + l], ki = K[i * qs + l];
                    float kj = K[j * qs + l], wk = f * kj, u = rp * qi + rk * ki;
                    w.dQ[ei] += rp * wk;
                    w.dK[ei] += rk * wk;
                    w.dK[ej] += f * u;
                    if (j < i) {
                        double t = (double)wk * u;
                        w.dGv[ei] += t;
                        w.dGv[ej] -= t;
                    }
                }
        __syncthreads();
    }
}

/* every gradient of chunk x with a decay per key channel (D ready; dD the state pass's): the outputs' part, the delta
 * rule's (or D = beta V's), the decayed products', then dg as each channel's reverse cumulative sum */
__device__ void ck_bwd_gk(const ck_args &p, const ck_ws &w, ck_pos x, int h, const float *S0, const float *dS,
                          const float *dO, const float *dD) {
    CK_SETUP(p, x, h);
    ck_bwd_outputs_gk(p, w, x, h, S0, dS, dO);
    if (!p.no_delta) ck_bwd_delta_gk(p, w, x, h, S0, dD);
    else ck_bwd_beta_v(p, x, h, dD);
    ck_pairs_bwd_gk(p, w, x, h);
    for (int l = threadIdx.x; p.gg && l < dk; l += blockDim.x) { /* G_i = sum of g over rows 0..i */
        double acc = 0;
        for (int i = n - 1; i >= 0; i--) {
            acc += w.dGv[i * dk + l];
            p.gg[((x.t0 + i) * p.nv + h) * dk + l] += (float)acc;
        }
    }
    __syncthreads();
}
