/* sim wrappers of the linear-attention entries: their per-sequence state pointers (a host array of backend
 * pointers) are translated into host scratch. */
#include "sim.h"
#include "backend/cpu/cpu.h"

/* the translated state array (NULL when d_state is NULL; *fail on bad pointers or no memory) */
static float **tr_states(float *const *st, int n, int *bad, const char *op) {
    if (!st) return NULL;
    float **t = vc_calloc((size_t)n + 1, sizeof *t);
    if (!t) {
        *bad = 1;
        return NULL;
    }
    for (int s = 0; s < n; s++) t[s] = st[s] ? vc_sim_tr(st[s], bad, op) : NULL;
    return t;
}

void vc_sim_gdn_fwd(float *o, float *saved, const float *q, const float *k, const float *v, const float *g,
                    const float *beta, const vc_gdn_desc *d) {
    SIM_BEGIN("gdn_fwd");
    float *O = D(o), *SV = saved ? D(saved) : NULL;
    const float *Q = D(q), *K = D(k), *V = D(v), *G = D(g), *B = D(beta);
    float **st = tr_states(d->state, d->n_seq, &sim_bad_, sim_op_);
    vc_gdn_desc t = *d;
    t.state = st;
    if (!sim_bad_) vc_cpu_gdn_fwd(O, SV, Q, K, V, G, B, &t);
    free(st);
}

void vc_sim_gdn_bwd(float *dq, float *dk, float *dv, float *dg, float *dbeta, const float *dout, const float *saved,
                    const float *q, const float *k, const float *v, const float *g, const float *beta,
                    const vc_gdn_desc *d) {
    SIM_BEGIN("gdn_bwd");
    float *DQ = dq ? D(dq) : NULL, *DK = dk ? D(dk) : NULL, *DV = dv ? D(dv) : NULL, *DG = dg ? D(dg) : NULL;
    float *DB = dbeta ? D(dbeta) : NULL;
    const float *DO = D(dout), *SV = D(saved), *Q = D(q), *K = D(k), *V = D(v), *G = D(g), *B = D(beta);
    SIM_END;
    vc_cpu_gdn_bwd(DQ, DK, DV, DG, DB, DO, SV, Q, K, V, G, B, d);
}

void vc_sim_gdn_gate_fwd(float *g, const float *a, const float *A_log, const float *dt_bias, int64_t T, int nh, int grp) {
    SIM_BEGIN("gdn_gate_fwd");
    float *G = D(g);
    const float *A = D(a), *AL = D(A_log), *DT = D(dt_bias);
    SIM_END;
    vc_cpu_gdn_gate_fwd(G, A, AL, DT, T, nh, grp);
}

void vc_sim_gdn_gate_bwd(float *da, float *dA_log, float *ddt_bias, const float *dg, const float *a, const float *A_log,
                         const float *dt_bias, int64_t T, int nh, int grp) {
    SIM_BEGIN("gdn_gate_bwd");
    float *DA = da ? D(da) : NULL, *DAL = dA_log ? D(dA_log) : NULL, *DDT = ddt_bias ? D(ddt_bias) : NULL;
    const float *DG = D(dg), *A = D(a), *AL = D(A_log), *DT = D(dt_bias);
    SIM_END;
    vc_cpu_gdn_gate_bwd(DA, DAL, DDT, DG, A, AL, DT, T, nh, grp);
}

void vc_sim_conv1d_fwd(float *y, const float *x, const float *w, const vc_conv_desc *d) {
    SIM_BEGIN("conv1d_fwd");
    float *Y = D(y);
    const float *X = D(x), *W = D(w);
    float **st = tr_states(d->state, d->n_seq, &sim_bad_, sim_op_);
    vc_conv_desc t = *d;
    t.state = st;
    if (!sim_bad_) vc_cpu_conv1d_fwd(Y, X, W, &t);
    free(st);
}

void vc_sim_conv1d_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w, const vc_conv_desc *d) {
    SIM_BEGIN("conv1d_bwd");
    float *DX = dx ? D(dx) : NULL, *DW = dw ? D(dw) : NULL;
    const float *DY = D(dy), *X = D(x), *W = D(w);
    SIM_END;
    vc_cpu_conv1d_bwd(DX, DW, DY, X, W, d);
}

void vc_sim_affine_cols_fwd(float *y, const float *x, const float *w, const float *b, int64_t R, int64_t C, int64_t grp) {
    SIM_BEGIN("affine_cols_fwd");
    float *Y = D(y);
    const float *X = D(x), *W = w ? D(w) : NULL, *B = b ? D(b) : NULL;
    SIM_END;
    vc_cpu_affine_cols_fwd(Y, X, W, B, R, C, grp);
}

void vc_sim_affine_cols_bwd(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w, int64_t R,
                            int64_t C, int64_t grp) {
    SIM_BEGIN("affine_cols_bwd");
    float *DX = dx ? D(dx) : NULL, *DW = dw ? D(dw) : NULL, *DB = db ? D(db) : NULL;
    const float *DY = D(dy), *X = D(x), *W = w ? D(w) : NULL;
    SIM_END;
    vc_cpu_affine_cols_bwd(DX, DW, DB, DY, X, W, R, C, grp);
}

void vc_sim_ssm_fwd(float *y, float *saved, const float *x, const float *dt, const float *A_log, const float *B,
                    const float *C, const vc_ssm_desc *d) {
    SIM_BEGIN("ssm_fwd");
    float *Y = D(y), *SV = saved ? D(saved) : NULL;
    const float *X = D(x), *DT = D(dt), *AL = D(A_log), *BB = D(B), *CC = D(C);
    float **st = tr_states(d->state, d->n_seq, &sim_bad_, sim_op_);
    vc_ssm_desc t = *d;
    t.state = st;
    if (!sim_bad_) vc_cpu_ssm_fwd(Y, SV, X, DT, AL, BB, CC, &t);
    free(st);
}

void vc_sim_ssm_bwd(float *dx, float *ddt, float *dA_log, float *dB, float *dC, const float *dy, const float *saved,
                    const float *x, const float *dt, const float *A_log, const float *B, const float *C,
                    const vc_ssm_desc *d) {
    SIM_BEGIN("ssm_bwd");
    float *DX = dx ? D(dx) : NULL, *DDT = ddt ? D(ddt) : NULL, *DA = dA_log ? D(dA_log) : NULL;
    float *DB = dB ? D(dB) : NULL, *DC = dC ? D(dC) : NULL;
    const float *DY = D(dy), *SV = D(saved), *X = D(x), *DT = D(dt), *AL = D(A_log), *BB = D(B), *CC = D(C);
    SIM_END;
    vc_cpu_ssm_bwd(DX, DDT, DA, DB, DC, DY, SV, X, DT, AL, BB, CC, d);
}
