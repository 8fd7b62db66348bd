/* Finite-difference gradient checks for every op: loss = sum(y * r) with fixed random r; each input
 * element is nudged by +-eps and the central difference compared with the tape's gradient. The whole
 * set runs on the CPU backend and on the sim backend (backend memory behind poisoned pointers), so
 * values are only ever moved with h2d / d2h / vc_tensor_read. */
#include "tensor/backend.h"
#include "backend/act_math.h"
#include "verlc/ops.h"
#include "verlc/pool.h"
#include "vc_test.h"
#include "backend/cpu/cpu.h"

#define MAXIN 9
typedef vc_tensor *(*build_fn)(vc_graph *g, vc_tensor **in);

static uint64_t rng = 88172645463325252ull;
static float frand(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static vc_tensor params[MAXIN];
static float *pdata[MAXIN];          /* host copies of the parameters */
static float *ddata[MAXIN], *dgrad[MAXIN]; /* backend memory */

static float *dev_upload(const float *h, int64_t n) {
    float *d = vc_be()->alloc((size_t)n * 4);
    vc_be()->h2d(d, h, (size_t)n * 4);
    return d;
}

static void make(int i, int ndim, int64_t a, int64_t b, int64_t c, float scale) {
    int64_t s[3] = { a, b, c };
    int64_t n = a * (ndim > 1 ? b : 1) * (ndim > 2 ? c : 1);
    pdata[i] = calloc((size_t)n, 4);
    for (int64_t k = 0; k < n; k++) pdata[i][k] = frand() * scale;
    ddata[i] = dev_upload(pdata[i], n);
    dgrad[i] = vc_be()->alloc((size_t)n * 4);
    vc_param_init(&params[i], ddata[i], dgrad[i], ndim, s);
}

/* inputs whose data (or gradient) lies inside the previous input's buffer (make_pair): not freed apart */
static int alias_data[MAXIN], alias_grad[MAXIN];

/* inputs i and i + 1, rows x cols each, i + 1's values right after i's in one buffer (a fused gate/up pair), their
 * gradients likewise or (apart_grads) in two buffers, as ZeRO-2's working area may place them */
static void make_pair(int i, int64_t rows, int64_t cols, float scale, int apart_grads) {
    int64_t n = rows * cols, s[3] = { rows, cols, 0 };
    float *d = vc_be()->alloc((size_t)(2 * n) * 4), *gr = vc_be()->alloc((size_t)((apart_grads ? 1 : 2) * n) * 4);
    for (int k = 0; k < 2; k++) {
        pdata[i + k] = calloc((size_t)n, 4);
        for (int64_t j = 0; j < n; j++) pdata[i + k][j] = frand() * scale;
        ddata[i + k] = d + k * n;
        vc_be()->h2d(ddata[i + k], pdata[i + k], (size_t)n * 4);
    }
    dgrad[i] = gr;
    dgrad[i + 1] = apart_grads ? vc_be()->alloc((size_t)n * 4) : gr + n;
    alias_data[i + 1] = 1;
    alias_grad[i + 1] = !apart_grads;
    for (int k = 0; k < 2; k++) vc_param_init(&params[i + k], ddata[i + k], dgrad[i + k], 2, s);
}

static void free_inputs(int nin) {
    for (int i = 0; i < nin; i++) {
        free(pdata[i]);
        if (!alias_data[i]) vc_be()->free(ddata[i]);
        if (!alias_grad[i]) vc_be()->free(dgrad[i]);
        alias_data[i] = alias_grad[i] = 0;
    }
}

static void set_elem(int i, int64_t k, float v) { vc_be()->h2d(ddata[i] + k, &v, 4); }

static double eval(vc_graph *g, build_fn f, int nin, const float *r) {
    vc_graph_reset(g);
    vc_graph_set_grad(g, 0);
    vc_tensor *in[MAXIN];
    for (int i = 0; i < nin; i++) in[i] = &params[i];
    vc_tensor *y = f(g, in);
    float *h = malloc((size_t)y->n * 4);
    CHECK_OK(vc_tensor_read(y, h));
    double acc = 0;
    for (int64_t k = 0; k < y->n; k++) acc += (double)h[k] * r[k];
    free(h);
    return acc;
}

static void check_op(const char *name, build_fn f, int nin, float eps, float tol) {
    vc_graph *g = vc_graph_new();
    vc_tensor *in[MAXIN];
    for (int i = 0; i < nin; i++) {
        in[i] = &params[i];
        vc_be()->zero(dgrad[i], (size_t)params[i].n * 4);
    }
    vc_graph_set_grad(g, 1);
    vc_tensor *y = f(g, in);
    float *r = malloc((size_t)y->n * 4);
    for (int64_t k = 0; k < y->n; k++) r[k] = frand();
    vc_tensor *loss = vc_op_dot_const(g, y, r);
    CHECK_OK(vc_graph_backward(g, loss, 1.0f));
    double worst = 0;
    for (int i = 0; i < nin; i++) {
        if (!params[i].requires_grad) continue;
        float *grad = malloc((size_t)params[i].n * 4);
        CHECK_OK(vc_tensor_read_grad(&params[i], grad));
        /* every element; under sanitizers (LIGHT: the same forward and backward, several times slower) about 40 of
         * them, the last included (every element's probe is the release build's) */
        int64_t n = params[i].n, stride = LIGHT && n > 40 ? n / 40 : 1;
        for (int64_t k = 0; k < n; k = k + stride < n || k == n - 1 ? k + stride : n - 1) {
            float keep = pdata[i][k];
            set_elem(i, k, keep + eps);
            double up = eval(g, f, nin, r);
            set_elem(i, k, keep - eps);
            double dn = eval(g, f, nin, r);
            set_elem(i, k, keep);
            double fd = (up - dn) / (2 * eps), an = grad[k];
            double err = fabs(fd - an) / (fabs(fd) + fabs(an) + 1e-2);
            if (err > worst) worst = err;
        }
        free(grad);
    }
    CHECK_MSG(worst < tol, "%s: worst relative gradient error %.3g", name, worst);
    printf("%-4s %-18s worst rel err %.2e\n", vc_be()->name, name, worst);
    free(r);
    vc_graph_free(g);
    free_inputs(nin);
}

/* ---- builders ---- */
static vc_tensor *b_linear(vc_graph *g, vc_tensor **in) { return vc_op_linear(g, in[0], in[1], in[2]); }
static vc_tensor *b_mul(vc_graph *g, vc_tensor **in) { return vc_op_mul(g, vc_op_add(g, in[0], in[1]), in[1]); }
static vc_tensor *b_mulrows(vc_graph *g, vc_tensor **in) { return vc_op_mul_rows(g, in[0], in[1]); }
static vc_tensor *b_rms(vc_graph *g, vc_tensor **in) { return vc_op_rmsnorm(g, in[0], in[1], 8, 1e-6f, 0.0f); }
static vc_tensor *b_rms1p(vc_graph *g, vc_tensor **in) { return vc_op_rmsnorm(g, in[0], in[1], 8, 1e-6f, 1.0f); }
static vc_tensor *b_ln(vc_graph *g, vc_tensor **in) { return vc_op_layernorm(g, in[0], in[1], in[2], 1e-5f); }
static int act_kind;
static vc_tensor *b_act(vc_graph *g, vc_tensor **in) { return vc_op_act(g, in[0], act_kind); }
static vc_tensor *b_actmul(vc_graph *g, vc_tensor **in) { return vc_op_act_mul(g, in[0], in[1], act_kind); }
static vc_tensor *b_slicecat(vc_graph *g, vc_tensor **in) {
    vc_tensor *a = vc_op_slice_cols(g, in[0], 6, 1, 4);      /* [8, 3] */
    return vc_op_concat_cols(g, a, 3, in[1], 2, 2);         /* b [4, 2] broadcast over pairs of rows */
}
static vc_tensor *b_softcap(vc_graph *g, vc_tensor **in) { return vc_op_softcap(g, in[0], 2.0f); }
static vc_tensor *b_clip(vc_graph *g, vc_tensor **in) { return vc_op_clip(g, in[0], 0.45f); }
static float clamp_lo, clamp_hi; /* (between two of the input's values: none within the step of a bound) */
static vc_tensor *b_clamp(vc_graph *g, vc_tensor **in) { return vc_op_clamp(g, in[0], clamp_lo, clamp_hi); }
/* the midpoint of the two values of x[n] nearest `near` on either side of it */
static float gap_near(const float *x, int64_t n, float near) {
    float below = -INFINITY, above = INFINITY;
    for (int64_t k = 0; k < n; k++) {
        if (x[k] <= near && x[k] > below) below = x[k];
        if (x[k] > near && x[k] < above) above = x[k];
    }
    return isfinite(below) && isfinite(above) ? 0.5f * (below + above) : near;
}
static vc_tensor *b_rownorm(vc_graph *g, vc_tensor **in) { return vc_op_row_normalize(g, in[0]); }
static int32_t ids[7] = { 3, 1, 3, 0, 4, 1, 1 };
static vc_tensor *b_embed(vc_graph *g, vc_tensor **in) { return vc_op_embedding(g, in[0], ids, 7); }

static float rc[7 * 4], rs[7 * 4], *drc, *drs; /* host tables and their backend copies */
static int rope_inter;
static vc_tensor *b_rope(vc_graph *g, vc_tensor **in) { return vc_op_rope(g, in[0], drc, drs, 3, 10, 8, rope_inter); }

static vc_attn_desc ad;
static int64_t qstart[3] = { 0, 5, 12 };
static vc_tensor *b_attn(vc_graph *g, vc_tensor **in) { return vc_op_attention(g, in[0], in[1], in[2], &ad); }

static int32_t targets[6] = { 2, 9, 0, 4, -1, 7 };
static float head_cap, head_temp = 1.0f;
static vc_tensor *b_head(vc_graph *g, vc_tensor **in) {
    vc_tensor *lp, *en;
    vc_op_lm_head(g, in[0], in[1], in[2], targets, head_cap, head_temp, &lp, &en, NULL);
    /* mix both outputs so each gradient path is exercised */
    return vc_op_add(g, lp, vc_op_scale(g, en, 0.7f));
}

static vc_route_desc rdesc;
static vc_tensor *b_moe(vc_graph *g, vc_tensor **in) {
    return vc_op_moe(g, in[0], in[1], in[2], in[3], in[4], VC_ACT_SILU, &rdesc);
}

/* LoRA on the experts: gate_up of rank 2 (A [E, 2, H], B [2 E, I, 2]), down of rank 3 */
static vc_tensor *b_attn_sinks(vc_graph *g, vc_tensor **in) {
    return vc_op_attention_sinks(g, in[0], in[1], in[2], &ad, in[3]);
}
/* gpt-oss's experts: biases on gate, up and down, its clamped gated unit */
static vc_tensor *b_moe_bias(vc_graph *g, vc_tensor **in) {
    vc_moe_bias bi = { in[5], in[6], in[7] };
    return vc_op_moe_ex(g, in[0], in[1], in[2], in[3], in[4], VC_ACT_OAI_GLU, &rdesc, NULL, &bi);
}
/* Llama 4's routing: the weights scale the experts' inputs */
static vc_tensor *b_moe_scaled(vc_graph *g, vc_tensor **in) {
    vc_route_desc rd = rdesc;
    rd.scale_input = 1;
    return vc_op_moe(g, in[0], in[1], in[2], in[3], in[4], VC_ACT_SILU, &rd);
}
static vc_tensor *b_xielu(vc_graph *g, vc_tensor **in) { return vc_op_xielu(g, in[0], in[1], in[2], 0.5f, -1e-6f); }
/* linear attention: 3 packed sequences of 2, 5 and 1 rows (shorter than the conv's 4 taps), and 2 of 5 and 70 rows
 * (past one kept state of the recurrence's backward); the decay from the gate op keeps the state bounded */
static int64_t cu3[4] = { 0, 2, 7, 8 }, cu2[3] = { 0, 5, 75 };
static vc_tensor *b_conv(vc_graph *g, vc_tensor **in) { return vc_op_conv1d_causal(g, in[0], in[1], 4, 3, cu3, NULL, NULL); }
static vc_tensor *b_gdn_gate(vc_graph *g, vc_tensor **in) { return vc_op_gdn_gate(g, in[0], in[1], in[2]); }
static vc_tensor *b_gdn(vc_graph *g, vc_tensor **in) {
    vc_tensor *gt = vc_op_gdn_gate(g, in[3], in[5], in[6]), *beta = vc_op_act(g, in[4], VC_ACT_SIGMOID);
    return vc_op_gdn(g, in[0], in[1], in[2], gt, beta, 2, cu2, 1, 2, 3, 2, 0.6f, 0, NULL, NULL);
}
/* Mamba 2's scan: no delta rule, beta = dt = softplus(a + dt_bias) through the per-channel affine op */
static vc_tensor *b_ssd(vc_graph *g, vc_tensor **in) {
    vc_tensor *gt = vc_op_gdn_gate(g, in[3], in[5], in[6]);
    vc_tensor *dt = vc_op_act(g, vc_op_affine_cols(g, in[3], NULL, in[6], 1), VC_ACT_SOFTPLUS);
    return vc_op_gdn(g, in[0], in[1], in[2], gt, dt, 2, cu2, 1, 2, 3, 2, 1.0f, 1, NULL, NULL);
}
/* shared starts: the second sequence starts from the first's state at its row 64 (inside its last chunk, or at its
 * end), the gradient through that state checked too */
static int64_t cu_sh[2][3] = { { 0, 70, 75 }, { 0, 64, 75 } };
static int sh_case, sh_nd;
static vc_tensor *b_gdn_shared(vc_graph *g, vc_tensor **in) {
    static const int32_t from[2] = { -1, 0 };
    vc_tensor *gt = vc_op_gdn_gate(g, in[3], in[5], in[6]), *beta = vc_op_act(g, in[4], VC_ACT_SIGMOID);
    return vc_op_gdn_shared(g, in[0], in[1], in[2], gt, beta, 2, cu_sh[sh_case], 1, 2, 3, 2, sh_nd ? 1.0f : 0.6f, sh_nd,
                            from);
}
/* Kimi Delta Attention: the decay per key channel (a and dt_bias per channel, A_log per head), 2 q/k and value heads */
static vc_tensor *b_kda(vc_graph *g, vc_tensor **in) {
    vc_tensor *gt = vc_op_gdn_gate(g, in[3], in[5], in[6]), *beta = vc_op_act(g, in[4], VC_ACT_SIGMOID);
    return vc_op_gdn(g, in[0], in[1], in[2], gt, beta, 2, cu2, 2, 2, 3, 2, 0.6f, 0, NULL, NULL);
}
/* ... with the second sequence starting from the first's state at its row 64 (the recurrence's shared starts) */
static vc_tensor *b_kda_shared(vc_graph *g, vc_tensor **in) {
    static const int32_t from[2] = { -1, 0 };
    vc_tensor *gt = vc_op_gdn_gate(g, in[3], in[5], in[6]), *beta = vc_op_act(g, in[4], VC_ACT_SIGMOID);
    return vc_op_gdn_shared(g, in[0], in[1], in[2], gt, beta, 2, cu_sh[0], 2, 2, 3, 2, 0.6f, 0, from);
}
/* Mamba 1's selective scan: dt = softplus(a) > 0, 5 channels, state 3, over 2 sequences (5 and 300 rows: past one
 * kept state, every 256 rows) */
static int64_t cu_ssm[3] = { 0, 5, 305 };
static vc_tensor *b_ssm(vc_graph *g, vc_tensor **in) {
    vc_tensor *dt = vc_op_act(g, in[1], VC_ACT_SOFTPLUS);
    return vc_op_ssm_scan(g, in[0], dt, in[2], in[3], in[4], 2, cu_ssm, NULL, NULL);
}
/* ... with the second sequence (5 rows) starting from the first's final state (20 rows), the gradient through it */
static int64_t cu_ssm_sh[3] = { 0, 20, 25 };
static vc_tensor *b_ssm_shared(vc_graph *g, vc_tensor **in) {
    static const int32_t from[2] = { -1, 0 };
    vc_tensor *dt = vc_op_act(g, in[1], VC_ACT_SOFTPLUS);
    return vc_op_ssm_scan_shared(g, in[0], dt, in[2], in[3], in[4], 2, cu_ssm_sh, from);
}
/* experts without a gate (Nemotron-H): act(x Wu^T) Wd^T, sigmoid routing over 2 groups */
static vc_tensor *b_moe_plain(vc_graph *g, vc_tensor **in) {
    return vc_op_moe_ex(g, in[0], in[1], NULL, in[2], in[3], VC_ACT_GELU_TANH, &rdesc, NULL, NULL);
}
static vc_tensor *b_affine(vc_graph *g, vc_tensor **in) { return vc_op_affine_cols(g, in[0], in[1], in[2], 3); }
static vc_tensor *b_moe_lora(vc_graph *g, vc_tensor **in) {
    vc_moe_lora lo = { in[5], in[6], in[7], in[8], 1.7f };
    return vc_op_moe_lora(g, in[0], in[1], in[2], in[3], in[4], VC_ACT_SILU, &rdesc, &lo);
}

/* log-softmax over 7 columns gathered at 3 per row (a repeated column included) */
static const int32_t LSG_IDS[12] = { 0, 6, 2, 5, 5, 1, 3, 0, 4, 6, 6, 2 };
static vc_tensor *b_lsg(vc_graph *g, vc_tensor **in) { return vc_op_logsoftmax_gather(g, in[0], LSG_IDS, 3, NULL); }

static void run_all(void) {
    make(0, 2, 5, 6, 0, 1); make(1, 2, 4, 6, 0, 1); make(2, 1, 4, 0, 0, 1);
    check_op("linear+bias", b_linear, 3, 1e-2f, 2e-3f);
    make(0, 2, 4, 7, 0, 2);
    check_op("logsoftmax_gather", b_lsg, 1, 1e-3f, 5e-3f);
    make(0, 2, 3, 4, 0, 1); make(1, 2, 3, 4, 0, 1);
    check_op("add/mul", b_mul, 2, 1e-2f, 2e-3f);
    make(0, 2, 5, 3, 0, 1); make(1, 1, 5, 0, 0, 1);
    check_op("mul_rows", b_mulrows, 2, 1e-2f, 2e-3f);
    make(0, 2, 6, 8, 0, 1); make(1, 1, 8, 0, 0, 1);
    check_op("rmsnorm", b_rms, 2, 1e-3f, 5e-3f);
    make(0, 2, 6, 8, 0, 1); make(1, 1, 8, 0, 0, 0.2f);
    check_op("rmsnorm(1+w)", b_rms1p, 2, 1e-3f, 5e-3f);
    make(0, 2, 5, 7, 0, 1); make(1, 1, 7, 0, 0, 1); make(2, 1, 7, 0, 0, 1);
    check_op("layernorm", b_ln, 3, 4e-3f, 5e-3f);
    const char *acts[] = { "silu", "gelu_tanh", "gelu_erf", "relu", "sigmoid", "relu2", "oai_glu", "softplus" };
    for (act_kind = 0; act_kind < 7; act_kind++) { /* softplus at the end (the random draws of later cases stay) */
        char nm[64];
        make(0, 2, 4, 5, 0, 2);
        snprintf(nm, sizeof nm, "act %s", acts[act_kind]);
        check_op(nm, b_act, 1, 1e-3f, 5e-3f);
        make(0, 2, 4, 5, 0, 2); make(1, 2, 4, 5, 0, 2);
        snprintf(nm, sizeof nm, "act_mul %s", acts[act_kind]);
        check_op(nm, b_actmul, 2, 1e-3f, 5e-3f);
    }
    make(0, 2, 4, 5, 0, 2); make(1, 1, 1, 0, 0, 1); make(2, 1, 1, 0, 0, 1);
    check_op("xielu (and its two scalars)", b_xielu, 3, 1e-3f, 5e-3f);
    act_kind = VC_ACT_OAI_GLU; /* inputs beyond gpt-oss's clamp at 7 on both sides: no gradient there */
    make(0, 2, 4, 5, 0, 12); make(1, 2, 4, 5, 0, 12);
    check_op("act_mul oai_glu clamped", b_actmul, 2, 1e-3f, 5e-3f);
    make(0, 2, 8, 6, 0, 1); make(1, 2, 4, 2, 0, 1);
    check_op("slice/concat", b_slicecat, 2, 1e-2f, 2e-3f);
    make(0, 2, 4, 5, 0, 4);
    check_op("softcap", b_softcap, 1, 1e-3f, 5e-3f);
    make(0, 2, 4, 5, 0, 1); /* about half the values beyond +-0.45 (none within the step of it): no gradient there */
    check_op("clip (clip_qkv)", b_clip, 1, 1e-3f, 5e-3f);
    make(0, 2, 4, 5, 0, 1); /* asymmetric bounds between the values near -0.3 and near 0.5 */
    clamp_lo = gap_near(pdata[0], 20, -0.3f), clamp_hi = gap_near(pdata[0], 20, 0.5f);
    check_op("clamp (Gemma 4's clipped linears)", b_clamp, 1, 1e-3f, 5e-3f);
    make(0, 2, 4, 5, 0, 1);
    check_op("row_normalize", b_rownorm, 1, 1e-3f, 5e-3f);
    make(0, 2, 5, 4, 0, 1);
    check_op("embedding", b_embed, 1, 1e-2f, 2e-3f);
    for (int i = 0; i < 28; i++) {
        float ang = 0.3f * (i / 4) * (1.0f + i % 4);
        rc[i] = 1.1f * cosf(ang);
        rs[i] = 1.1f * sinf(ang);
    }
    drc = dev_upload(rc, 28);
    drs = dev_upload(rs, 28);
    for (rope_inter = 0; rope_inter < 2; rope_inter++) {
        make(0, 3, 7, 3, 10, 1);
        check_op(rope_inter ? "rope interleaved" : "rope neox", b_rope, 1, 1e-2f, 2e-3f);
    }
    vc_be()->free(drc);
    vc_be()->free(drs);
    /* attention: 2 packed sequences (5 and 7 tokens), 4 query heads over 2 kv heads */
    struct { int window; float cap; const char *name; int chunk; } cases[] = {
        { 0, 0, "attn causal gqa", 0 }, { 3, 0, "attn window 3", 0 }, { 0, 1.5f, "attn softcap", 0 },
        { 0, 0, "attn chunks of 3", 3 } };
    for (int c = 0; c < 4; c++) {
        memset(&ad, 0, sizeof ad);
        ad.n_seq = 2; ad.q_start = qstart; ad.n_head = 4; ad.n_kv_head = 2; ad.head_dim = 6; ad.v_head_dim = 5;
        ad.scale = 0.4f; ad.causal = 1; ad.window = cases[c].window; ad.softcap = cases[c].cap; ad.chunk = cases[c].chunk;
        make(0, 3, 12, 4, 6, 1); make(1, 3, 12, 2, 6, 1); make(2, 3, 12, 2, 5, 1);
        check_op(cases[c].name, b_attn, 3, 1e-2f, 5e-3f);
        const char *sn[] = { "attn causal gqa sinks", "attn window 3 sinks", "attn softcap sinks", "attn chunks of 3 sinks" };
        make(0, 3, 12, 4, 6, 1); make(1, 3, 12, 2, 6, 1); make(2, 3, 12, 2, 5, 1); make(3, 1, 4, 0, 0, 1.5f);
        check_op(sn[c], b_attn_sinks, 4, 1e-2f, 5e-3f);
    }
    /* DeepSeek Sparse Attention: each query row sees only its selected keys (its own and those with (7 i + 3 j) % 5 < 2);
     * the unselected keys get no gradient through that row */
    uint32_t selh[12];
    for (int i = 0; i < 12; i++) {
        int p = i < 5 ? i : i - 5;
        selh[i] = 0;
        for (int j = 0; j <= p; j++)
            if (j == p || (7 * i + 3 * j) % 5 < 2) selh[i] |= 1u << j;
    }
    uint32_t *dsel = vc_be()->alloc(sizeof selh);
    vc_be()->h2d(dsel, selh, sizeof selh);
    for (int c = 0; c < 2; c++) {
        memset(&ad, 0, sizeof ad);
        ad.n_seq = 2; ad.q_start = qstart; ad.n_head = 4; ad.n_kv_head = 2; ad.head_dim = 6; ad.v_head_dim = 5;
        ad.scale = 0.4f; ad.causal = 1; ad.softcap = c ? 1.5f : 0.0f; ad.sel = dsel; ad.sel_words = 1;
        make(0, 3, 12, 4, 6, 1); make(1, 3, 12, 2, 6, 1); make(2, 3, 12, 2, 5, 1);
        check_op(c ? "attn selected keys (DSA), softcap" : "attn selected keys (DSA)", b_attn, 3, 1e-2f, 5e-3f);
    }
    vc_be()->free(dsel);
    memset(&ad, 0, sizeof ad);
    for (int c = 0; c < 3; c++) {
        head_cap = c ? 3.0f : 0.0f;
        head_temp = c == 2 ? 0.6f : 1.0f; /* verl's logits / rollout.temperature */
        make(0, 2, 6, 8, 0, 1); make(1, 2, 11, 8, 0, 1); make(2, 1, 11, 0, 0, 1);
        const char *nm[] = { "lm_head", "lm_head softcap", "lm_head softcap temperature 0.6" };
        check_op(nm[c], b_head, 3, 1e-2f, 5e-3f);
    }
    head_temp = 1.0f;
    /* MoE: softmax top-2 renormalised; sigmoid grouped (DeepSeek-V3 style) */
    for (int c = 0; c < 3; c++) {
        memset(&rdesc, 0, sizeof rdesc);
        rdesc.n_expert = 4; rdesc.top_k = 2; rdesc.scaling = 1.0f;
        if (c == 0) rdesc.norm_topk = 1;
        if (c == 2) { rdesc.sigmoid = 1; rdesc.norm_topk = 1; rdesc.scaling = 2.5f; rdesc.n_group = 2; rdesc.topk_group = 1; rdesc.group_top2_sum = 1; }
        make(0, 2, 6, 5, 0, 1); make(1, 2, 6, 4, 0, 2);
        make(2, 3, 4, 3, 5, 1); make(3, 3, 4, 3, 5, 1); make(4, 3, 4, 5, 3, 1);
        const char *nm[] = { "moe softmax norm", "moe softmax", "moe sigmoid group" };
        check_op(nm[c], b_moe, 5, 1e-3f, 2e-2f);
        if (c == 1) { /* sigmoid scores of the top-2, not renormalised, scaling the inputs */
            rdesc.sigmoid = 1;
            make(0, 2, 6, 5, 0, 1); make(1, 2, 6, 4, 0, 2);
            make(2, 3, 4, 3, 5, 1); make(3, 3, 4, 3, 5, 1); make(4, 3, 4, 5, 3, 1);
            check_op("moe scaled inputs (Llama 4)", b_moe_scaled, 5, 1e-3f, 2e-2f);
        }
        if (c == 2) { /* Kolibri: chosen by logits + bias, weighted by the renormalised sigmoid of their logits */
            memset(&rdesc, 0, sizeof rdesc);
            rdesc.n_expert = 4; rdesc.top_k = 2; rdesc.scaling = 1.0f; rdesc.sigmoid = 1; rdesc.norm_topk = 1;
            rdesc.bias_logits = 1;
            float lb[4] = { 1.5f, -1.5f, 0.5f, 0.0f };
            float *dlb = dev_upload(lb, 4);
            rdesc.bias = dlb;
            make(0, 2, 6, 5, 0, 1); make(1, 2, 6, 4, 0, 2);
            make(2, 3, 4, 3, 5, 1); make(3, 3, 4, 3, 5, 1); make(4, 3, 4, 5, 3, 1);
            check_op("moe sigmoid, bias on the logits (Kolibri)", b_moe, 5, 1e-3f, 2e-2f);
            vc_be()->free(dlb);
            /* PhiMoE's sparsemixer: a jitter of 0.5 keeps logits within (m - z) / max(|z|, m) <= 1 in each softmax */
            memset(&rdesc, 0, sizeof rdesc);
            rdesc.n_expert = 5; rdesc.top_k = 2; rdesc.scaling = 1.0f; rdesc.sparsemixer = 1; rdesc.jitter_eps = 0.5f;
            make(0, 2, 6, 5, 0, 1); make(1, 2, 6, 5, 0, 2);
            make(2, 3, 4, 3, 5, 1); make(3, 3, 4, 3, 5, 1); make(4, 3, 4, 5, 3, 1);
            check_op("moe sparsemixer (PhiMoE)", b_moe, 5, 1e-3f, 2e-2f);
            /* ERNIE 4.5: the top-2 softmax weights over max(their sum, moe_norm_min); 0.7 clamps some tokens' sums */
            memset(&rdesc, 0, sizeof rdesc);
            rdesc.n_expert = 4; rdesc.top_k = 2; rdesc.scaling = 1.0f; rdesc.norm_topk = 1; rdesc.norm_min = 0.7f;
            make(0, 2, 6, 5, 0, 1); make(1, 2, 6, 4, 0, 2);
            make(2, 3, 4, 3, 5, 1); make(3, 3, 4, 3, 5, 1); make(4, 3, 4, 5, 3, 1);
            check_op("moe renormalised with a floor (ERNIE 4.5 moe_norm_min)", b_moe, 5, 1e-3f, 2e-2f);
        }
        if (c != 0) continue;
        make(0, 2, 6, 5, 0, 1); make(1, 2, 6, 4, 0, 2);
        make(2, 3, 4, 3, 5, 1.5f); make(3, 3, 4, 3, 5, 1.5f); make(4, 3, 4, 5, 3, 1);
        make(5, 2, 4, 3, 0, 1); make(6, 2, 4, 3, 0, 1); make(7, 2, 4, 5, 0, 1);
        check_op("moe expert biases, gpt-oss unit", b_moe_bias, 8, 1e-3f, 2e-2f);
        make(0, 2, 6, 5, 0, 1); make(1, 2, 6, 4, 0, 2);
        make(2, 3, 4, 3, 5, 1); make(3, 3, 4, 3, 5, 1); make(4, 3, 4, 5, 3, 1);
        make(5, 3, 4, 2, 5, 0.5f); make(6, 3, 8, 3, 2, 0.5f); make(7, 3, 4, 3, 3, 0.5f); make(8, 3, 4, 5, 3, 0.5f);
        check_op("moe lora on the experts", b_moe_lora, 9, 1e-3f, 2e-2f);
        /* one adapter shared by the experts (Megatron-Bridge's): gate_up's, down's per-expert count 1 */
        make(0, 2, 6, 5, 0, 1); make(1, 2, 6, 4, 0, 2);
        make(2, 3, 4, 3, 5, 1); make(3, 3, 4, 3, 5, 1); make(4, 3, 4, 5, 3, 1);
        make(5, 3, 1, 2, 5, 0.5f); make(6, 3, 2, 3, 2, 0.5f); make(7, 3, 1, 3, 3, 0.5f); make(8, 3, 1, 5, 3, 0.5f);
        check_op("moe lora shared by the experts", b_moe_lora, 9, 1e-3f, 2e-2f);
    }
    make(0, 2, 8, 5, 0, 1); make(1, 2, 5, 4, 0, 1);
    check_op("conv1d causal packed", b_conv, 2, 1e-2f, 2e-3f);
    make(0, 2, 6, 3, 0, 2); make(1, 1, 3, 0, 0, 1); make(2, 1, 3, 0, 0, 1);
    check_op("gated delta decay", b_gdn_gate, 3, 1e-3f, 5e-3f);
    make(0, 3, 75, 1, 3, 0.7f); make(1, 3, 75, 1, 3, 0.7f); make(2, 3, 75, 2, 2, 1); make(3, 2, 75, 2, 0, 1);
    make(4, 2, 75, 2, 0, 2); make(5, 1, 2, 0, 0, 1); make(6, 1, 2, 0, 0, 1);
    check_op("gated delta rule", b_gdn, 7, 1e-2f, 5e-3f);
    make(0, 3, 75, 1, 3, 0.7f); make(1, 3, 75, 1, 3, 0.7f); make(2, 3, 75, 2, 2, 1); make(3, 2, 75, 2, 0, 1);
    make(4, 2, 75, 2, 0, 2); make(5, 1, 2, 0, 0, 1); make(6, 1, 2, 0, 0, 1);
    check_op("mamba2 scan (no delta)", b_ssd, 7, 1e-2f, 5e-3f);
    for (sh_nd = 0; sh_nd < 2; sh_nd++)
        for (sh_case = 0; sh_case < 2; sh_case++) {
            make(0, 3, 75, 1, 3, 0.7f); make(1, 3, 75, 1, 3, 0.7f); make(2, 3, 75, 2, 2, 1); make(3, 2, 75, 2, 0, 1);
            make(4, 2, 75, 2, 0, 2); make(5, 1, 2, 0, 0, 1); make(6, 1, 2, 0, 0, 1);
            char nm[96];
            snprintf(nm, sizeof nm, "%s, shared start %s", sh_nd ? "mamba2 scan" : "gated delta rule",
                     sh_case ? "at the end of the first" : "inside the first's last chunk");
            check_op(nm, b_gdn_shared, 7, 1e-2f, 5e-3f);
        }
    make(0, 2, 5, 6, 0, 1); make(1, 1, 2, 0, 0, 1); make(2, 1, 2, 0, 0, 1);
    check_op("affine cols (groups of 3)", b_affine, 3, 1e-2f, 2e-3f);
    act_kind = VC_ACT_SOFTPLUS;
    make(0, 2, 4, 5, 0, 2);
    check_op("act softplus", b_act, 1, 1e-3f, 5e-3f);
    memset(&rdesc, 0, sizeof rdesc);
    rdesc.n_expert = 4; rdesc.top_k = 2; rdesc.scaling = 2.5f; rdesc.sigmoid = 1; rdesc.norm_topk = 1;
    rdesc.n_group = 2; rdesc.topk_group = 1; rdesc.group_top2_sum = 1;
    make(0, 2, 6, 5, 0, 1); make(1, 2, 6, 4, 0, 2); make(2, 3, 4, 3, 5, 1); make(3, 3, 4, 5, 3, 1);
    check_op("moe experts without a gate", b_moe_plain, 4, 1e-3f, 2e-2f);
    make(0, 2, 6, 6, 0, 2); make(1, 1, 2, 0, 0, 1); make(2, 1, 6, 0, 0, 1);
    check_op("gated delta decay per channel", b_gdn_gate, 3, 1e-3f, 5e-3f);
    make(0, 3, 75, 2, 3, 0.7f); make(1, 3, 75, 2, 3, 0.7f); make(2, 3, 75, 2, 2, 1); make(3, 2, 75, 6, 0, 1);
    make(4, 2, 75, 2, 0, 2); make(5, 1, 2, 0, 0, 1); make(6, 1, 6, 0, 0, 1);
    check_op("delta rule, decay per key channel", b_kda, 7, 1e-2f, 5e-3f);
    make(0, 3, 75, 2, 3, 0.7f); make(1, 3, 75, 2, 3, 0.7f); make(2, 3, 75, 2, 2, 1); make(3, 2, 75, 6, 0, 1);
    make(4, 2, 75, 2, 0, 2); make(5, 1, 2, 0, 0, 1); make(6, 1, 6, 0, 0, 1);
    check_op("delta rule, decay per key channel, shared start", b_kda_shared, 7, 1e-2f, 5e-3f);
    make(0, 2, 305, 5, 0, 1); make(1, 2, 305, 5, 0, 1); make(2, 2, 5, 3, 0, 0.5f); make(3, 2, 305, 3, 0, 0.7f);
    make(4, 2, 305, 3, 0, 0.7f);
    check_op("selective scan (mamba 1)", b_ssm, 5, 1e-2f, 5e-3f);
    make(0, 2, 25, 5, 0, 1); make(1, 2, 25, 5, 0, 1); make(2, 2, 5, 3, 0, 0.5f); make(3, 2, 25, 3, 0, 0.7f);
    make(4, 2, 25, 3, 0, 0.7f);
    check_op("selective scan (mamba 1), shared start", b_ssm_shared, 5, 1e-2f, 5e-3f);
}

/* forward + backward of f on params 0..nin-1 (the loss: a dot of the output with random weights drawn from
 * seed): the output (*ny values) and every parameter's gradient, host copies */
static float *run_build(build_fn f, int nin, uint64_t seed, int64_t *ny, float **grads) {
    vc_graph *g = vc_graph_new();
    vc_tensor *in[MAXIN];
    for (int i = 0; i < nin; i++) {
        in[i] = &params[i];
        vc_be()->zero(dgrad[i], (size_t)params[i].n * 4);
    }
    vc_tensor *y = f(g, in);
    *ny = y ? y->n : 0;
    float *out = malloc((size_t)*ny * 4 + 4), *r = malloc((size_t)*ny * 4 + 4);
    uint64_t keep = rng;
    rng = seed;
    for (int64_t k = 0; k < *ny; k++) r[k] = frand();
    rng = keep;
    CHECK_OK(vc_tensor_read(y, out));
    CHECK_OK(vc_graph_backward(g, vc_op_dot_const(g, y, r), 1.0f));
    for (int i = 0; i < nin; i++) {
        grads[i] = malloc((size_t)params[i].n * 4);
        CHECK_OK(vc_tensor_read_grad(&params[i], grads[i]));
    }
    free(r);
    vc_graph_free(g);
    return out;
}

/* bf16 matmuls: builds a and b (b with VERLC_BF16_ACT=0 when f32_env) give bitwise the same output and
 * gradients; frees params 0..nin-1 */
static void same_bits(const char *what, build_fn a, build_fn b, int f32_env, int nin) {
    vc_set_matmul_precision(VC_PREC_BF16);
    float *ga[MAXIN], *gb[MAXIN];
    int64_t na = 0, nb = 0;
    uint64_t seed = rng;
    float *ya = run_build(a, nin, seed, &na, ga);
    if (f32_env) setenv("VERLC_BF16_ACT", "0", 1);
    float *yb = run_build(b, nin, seed, &nb, gb);
    unsetenv("VERLC_BF16_ACT");
    int same = na == nb && na > 0 && !memcmp(ya, yb, (size_t)na * 4);
    for (int i = 0; i < nin; i++) same &= !memcmp(ga[i], gb[i], (size_t)params[i].n * 4);
    CHECK_MSG(same, "%s: %s differs from the f32-activation path", vc_be()->name, what);
    printf("%-4s %s: output and gradients bitwise equal to the f32-activation path\n", vc_be()->name, what);
    for (int i = 0; i < nin; i++) {
        free(ga[i]);
        free(gb[i]);
    }
    free_inputs(nin);
    free(ya);
    free(yb);
    vc_set_matmul_precision(VC_PREC_F32);
}

/* the gated activation kept in bf16 into its linear (vc_op_act_mul_linear) against act_mul then linear
 * (whose GEMM rounds the activation to bf16 anyway) */
static vc_tensor *b_mlp_bf16(vc_graph *g, vc_tensor **in) {
    return vc_op_act_mul_linear(g, in[0], in[1], act_kind, in[2], in[3]);
}
static vc_tensor *b_mlp_f32(vc_graph *g, vc_tensor **in) {
    return vc_op_linear(g, vc_op_act_mul(g, in[0], in[1], act_kind), in[2], in[3]);
}

/* the gated MLP with gate and up as one matrix (vc_op_gated_mlp): x, Wg, Wu (adjacent), W, b */
static vc_tensor *b_gmlp(vc_graph *g, vc_tensor **in) {
    return vc_op_gated_mlp(g, in[0], in[1], in[2], act_kind, in[3], in[4], 1);
}
static vc_tensor *b_gmlp_f32act(vc_graph *g, vc_tensor **in) {
    return vc_op_gated_mlp(g, in[0], in[1], in[2], act_kind, in[3], in[4], 0);
}
static vc_tensor *b_gmlp_split(vc_graph *g, vc_tensor **in) {
    vc_tensor *gt = vc_op_linear(g, in[0], in[1], NULL), *u = vc_op_linear(g, in[0], in[2], NULL);
    return vc_op_act_mul_linear(g, gt, u, act_kind, in[3], in[4]);
}

/* gate and up rounded to bf16 before the activation (the reference for VERLC_GATE_UP_BF16): the rounding's gradient
 * passes through, the activation's backward reads the rounded values */
static vc_tensor *b_gmlp_split_r16(vc_graph *g, vc_tensor **in) {
    vc_tensor *gt = vc_op_linear(g, in[0], in[1], NULL), *u = vc_op_linear(g, in[0], in[2], NULL);
    gt = vc_op_round_bf16_inplace(g, gt);
    u = vc_op_round_bf16_inplace(g, u);
    return vc_op_act_mul_linear(g, gt, u, act_kind, in[3], in[4]);
}

/* the worst relative difference between the n inputs' gradients ga[i] and gb[i] (params' sizes); frees them */
static double worst_grads(float **ga, float **gb, int n) {
    double worst = 0;
    for (int i = 0; i < n; i++) {
        for (int64_t j = 0; j < params[i].n; j++) {
            double e = fabs(ga[i][j] - gb[i][j]) / (fabs(gb[i][j]) + 1e-3);
            worst = e > worst ? e : worst;
        }
        free(ga[i]);
        free(gb[i]);
    }
    return worst;
}

static void make_gmlp(int apart_grads) {
    make(0, 2, 6, 8, 0, 1);
    make_pair(1, 5, 8, 1, apart_grads);
    make(3, 2, 7, 5, 0, 1);
    make(4, 1, 7, 0, 0, 1);
}

/* the gated MLP's forward without a tape (a log-prob pass) into y (n floats) */
static float *gmlp_notape(int64_t *n) {
    vc_graph *g = vc_graph_new();
    vc_graph_set_grad(g, 0);
    vc_tensor *in[5] = { &params[0], &params[1], &params[2], &params[3], &params[4] };
    vc_tensor *y = b_gmlp(g, in);
    *n = y ? y->n : 0;
    float *out = malloc((size_t)*n * 4 + 4);
    if (y) CHECK_OK(vc_tensor_read(y, out));
    vc_graph_free(g);
    return out;
}

/* VERLC_MLP_ROWS: without a tape the MLP in blocks of 4 rows (11 rows: 4, 4, 3) gives all rows' output at once, in f32
 * and bf16 matmuls: the CPU's bits (its forward GEMM is row-invariant), elsewhere within rounding */
static void check_gated_mlp_rows(void) {
    for (int p = 0; p < 2; p++) {
        vc_set_matmul_precision(p ? VC_PREC_BF16 : VC_PREC_F32);
        act_kind = VC_ACT_SILU;
        make(0, 2, 11, 8, 0, 1);
        make_pair(1, 5, 8, 1, 0);
        make(3, 2, 7, 5, 0, 1);
        make(4, 1, 7, 0, 0, 1);
        int64_t na = 0, nb = 0;
        float *ya = gmlp_notape(&na);
        setenv("VERLC_MLP_ROWS", "4", 1);
        float *yb = gmlp_notape(&nb);
        unsetenv("VERLC_MLP_ROWS");
        double worst = na == nb && na == 11 * 7 ? 0 : 1;
        for (int64_t j = 0; na == nb && j < na; j++) {
            double e = fabs(ya[j] - yb[j]) / (fabs(ya[j]) + 1e-3);
            worst = e > worst ? e : worst;
        }
        int same = na == nb && na > 0 && !memcmp(ya, yb, (size_t)na * 4);
        if (vc_be() == vc_backend_cpu() || vc_be() == vc_backend_sim())
            CHECK_MSG(same, "%s: the gated MLP in blocks of rows differs from all rows' bits", vc_be()->name);
        CHECK_MSG(worst < 1e-5, "%s: the gated MLP in blocks of rows off all rows' by %.2e", vc_be()->name, worst);
        printf("%-4s gated mlp without a tape in blocks of 4 rows (VERLC_MLP_ROWS), %s matmuls: bits %s (%.1e)\n",
               vc_be()->name, p ? "bf16" : "f32", same ? "equal" : "differ", worst);
        free(ya);
        free(yb);
        free_inputs(5);
    }
    vc_set_matmul_precision(VC_PREC_F32);
}

/* finite differences through every input; not-adjacent weights refused; the forward's bits those of the two
 * projections (bf16 matmuls: the CPU's forward GEMM computes each element alike whatever the matrix's width), the
 * gradients theirs to rounding; the bf16 activation the f32 one's bits */
static void check_gated_mlp(void) {
    const char *nm[2] = { "gated mlp silu", "gated mlp gelu_tanh" };
    for (int k = 0; k < 2; k++) {
        act_kind = k ? VC_ACT_GELU_TANH : VC_ACT_SILU;
        make_gmlp(0);
        check_op(nm[k], b_gmlp, 5, 1e-2f, 5e-3f);
        make_gmlp(1);
        check_op("gated mlp, grads apart", b_gmlp, 5, 1e-2f, 5e-3f);
    }
    make(0, 2, 6, 8, 0, 1); make(1, 2, 5, 8, 0, 1); make(2, 2, 5, 8, 0, 1); make(3, 2, 7, 5, 0, 1);
    vc_graph *g = vc_graph_new();
    vc_tensor *in[5] = { &params[0], &params[1], &params[2], &params[3], NULL };
    CHECK_MSG(!b_gmlp(g, in), "vc_op_gated_mlp took gate and up weights that are not adjacent");
    vc_graph_free(g);
    free_inputs(4);
    act_kind = VC_ACT_SILU;
    make_gmlp(0);
    same_bits("gated mlp bf16 activation", b_gmlp, b_gmlp_f32act, 0, 5);
    vc_set_matmul_precision(VC_PREC_BF16);
    make_gmlp(0);
    float *ga[MAXIN], *gb[MAXIN];
    int64_t na = 0, nb = 0;
    uint64_t seed = rng;
    float *ya = run_build(b_gmlp, 5, seed, &na, ga), *yb = run_build(b_gmlp_split, 5, seed, &nb, gb);
    double worst = worst_grads(ga, gb, 5);
    int same = na == nb && na > 0 && !memcmp(ya, yb, (size_t)na * 4);
    if (vc_be() == vc_backend_cpu() || vc_be() == vc_backend_sim())
        CHECK_MSG(same, "%s: the fused gate/up forward differs from the two projections' bits", vc_be()->name);
    CHECK_MSG(worst < 1e-4, "%s: fused gate/up gradients differ from the two projections' by %.2e", vc_be()->name, worst);
    printf("%-4s gated mlp, gate and up fused: forward bits %s, gradients within %.1e of the two projections'\n",
           vc_be()->name, same ? "equal" : "differ", worst);
    free(ya);
    free(yb);
    free_inputs(5);
    /* VERLC_GATE_UP_BF16=1: gate and up rounded to bf16 (stored so on cuda, rounded in place elsewhere) against the two
     * projections rounded by vc_op_round_bf16_inplace: the CPU's forward bits, gradients to rounding; an f32 gate
     * and up would be off by about 2^-9 of the activations */
    setenv("VERLC_GATE_UP_BF16", "1", 1);
    make_gmlp(0);
    seed = rng;
    ya = run_build(b_gmlp, 5, seed, &na, ga);
    unsetenv("VERLC_GATE_UP_BF16");
    yb = run_build(b_gmlp_split_r16, 5, seed, &nb, gb);
    worst = worst_grads(ga, gb, 5);
    double fw = 0;
    for (int64_t j = 0; na == nb && j < na; j++) {
        double e = fabs(ya[j] - yb[j]) / (fabs(yb[j]) + 1e-3);
        fw = e > fw ? e : fw;
    }
    same = na == nb && na > 0 && !memcmp(ya, yb, (size_t)na * 4);
    if (vc_be() == vc_backend_cpu() || vc_be() == vc_backend_sim())
        CHECK_MSG(same, "%s: gate and up in bf16: the forward differs from the rounded projections' bits", vc_be()->name);
    CHECK_MSG(na == nb && fw < 1e-4, "%s: gate and up in bf16: forward off the rounded projections' by %.2e",
              vc_be()->name, fw);
    CHECK_MSG(worst < 1e-4, "%s: gate and up in bf16: gradients off the rounded projections' by %.2e", vc_be()->name,
              worst);
    printf("%-4s gated mlp, gate and up in bf16 (VERLC_GATE_UP_BF16): forward bits %s (%.1e), gradients within %.1e of "
           "the rounded projections'\n", vc_be()->name, same ? "equal" : "differ", fw, worst);
    free(ya);
    free(yb);
    free_inputs(5);
    vc_set_matmul_precision(VC_PREC_F32);
}

static void check_bf16_acts(void) {
    for (act_kind = 0; act_kind < 3; act_kind++) {
        make(0, 2, 7, 12, 0, 2); make(1, 2, 7, 12, 0, 2); make(2, 2, 5, 12, 0, 1); make(3, 1, 5, 0, 0, 1);
        char nm[64];
        snprintf(nm, sizeof nm, "bf16 act_mul+linear (act %d)", act_kind);
        same_bits(nm, b_mlp_bf16, b_mlp_f32, 0, 4);
    }
    /* MoE experts' gated activations and gathered inputs in bf16 (default with bf16 matmuls) or f32 (VERLC_BF16_ACT=0) */
    memset(&rdesc, 0, sizeof rdesc);
    rdesc.n_expert = 4; rdesc.top_k = 2; rdesc.scaling = 1.0f; rdesc.norm_topk = 1;
    make(0, 2, 9, 5, 0, 1); make(1, 2, 9, 4, 0, 2);
    make(2, 3, 4, 6, 5, 1); make(3, 3, 4, 6, 5, 1); make(4, 3, 4, 5, 6, 1);
    same_bits("bf16 MoE expert activations", b_moe, b_moe, 1, 5);
}
/* Backward hands a node's output gradient back once the node ran and reuses it for later gradients: a
 * chain of 12 ops on n floats peaks near the 13 activations plus two live gradients, not 25 buffers; the
 * leaf's gradient is still the product of the scales */
static void check_grad_reuse(void) {
    const int64_t n = 1 << 14;
    make(0, 1, n, 0, 0, 1);
    vc_graph *g = vc_graph_new();
    vc_tensor *x = &params[0], *y = x;
    vc_be()->zero(dgrad[0], (size_t)n * 4);
    for (int i = 0; i < 12; i++) y = vc_op_scale(g, y, 1.0f + 0.125f * (float)i);
    float *r = malloc((size_t)n * 4), *gx = malloc((size_t)n * 4);
    for (int64_t k = 0; k < n; k++) r[k] = 1.0f;
    CHECK_OK(vc_graph_backward(g, vc_op_dot_const(g, y, r), 1.0f));
    CHECK_OK(vc_tensor_read_grad(x, gx));
    double prod = 1;
    for (int i = 0; i < 12; i++) prod *= 1.0 + 0.125 * i;
    size_t peak = vc_graph_peak_bytes(g), buf = (size_t)n * 4;
    CHECK_MSG(fabs(gx[0] - prod) <= 1e-5 * prod && gx[n - 1] == gx[0], "chain gradient %g, want %g", gx[0], prod);
    CHECK_MSG(peak < 16 * buf, "%s: backward of a 12-op chain peaked at %.1f buffers (activations: 12)", vc_be()->name,
              (double)peak / (double)buf);
    printf("%-4s 12-op chain: graph peak %.1f buffers of n floats (12 activations; without reuse it would be 24+)\n",
           vc_be()->name, (double)peak / (double)buf);
    free(r);
    free(gx);
    vc_graph_free(g);
    free(pdata[0]);
    vc_be()->free(ddata[0]);
    vc_be()->free(dgrad[0]);
}

/* A child graph (a checkpointed layer's recompute): its use counts in the parent's peak, the kept child's memory
 * is reused from one use to the next, and a child taken while the kept one is in use is a fresh graph */
static void check_child_graph(void) {
    vc_graph *g = vc_graph_new();
    int64_t n = 1 << 12, n2 = 2 * n;
    size_t buf = (size_t)n * 4;
    vc_tensor *a = vc_tensor_new(g, 1, &n, 1);
    vc_graph *c = vc_graph_child(g);
    vc_tensor *b = c ? vc_tensor_new(c, 1, &n2, 1) : NULL;
    CHECK(a && c && b);
    if (!a || !c || !b) return;
    CHECK_MSG(vc_graph_peak_bytes(g) >= 3 * buf, "parent peak %zu with a child holding 2 buffers over its 1",
              vc_graph_peak_bytes(g));
    float *first = b->data;
    vc_tensor *a2 = vc_tensor_new(g, 1, &n, 1); /* the parent allocating while the child holds its memory */
    CHECK_MSG(a2 && vc_graph_peak_bytes(g) >= 4 * buf, "parent peak %zu with its own 2 buffers and the child's 2",
              vc_graph_peak_bytes(g));
    vc_graph *d = vc_graph_child(g); /* the kept one is in use: a fresh one */
    CHECK(d && d != c);
    vc_graph_child_release(d);
    vc_graph_child_release(c);
    size_t peak = vc_graph_peak_bytes(g);
    vc_graph *c2 = vc_graph_child(g);
    vc_tensor *b2 = c2 ? vc_tensor_new(c2, 1, &n2, 1) : NULL;
    CHECK_MSG(c2 == c && b2 && b2->data == first, "the kept child and its memory are reused");
    CHECK(vc_graph_peak_bytes(g) == peak); /* the same use again: no higher peak */
    CHECK(vc_graph_used_bytes(c2) > 0);
    vc_graph_child_release(c2);
    CHECK(vc_graph_used_bytes(c2) == 0);
    vc_graph_free(g); /* frees the kept child (the sanitizer build checks for leaks) */
}

/* an op whose scratch memory cannot be allocated (the RMSNorm backward's per-block weight-gradient partials) records
 * the fault: sync fails from then on, naming it, instead of a step using a gradient left unwritten */
static void check_scratch_fault(void) {
    enum { R = 4, C = 8 };
    float h[R * C], hw[C];
    for (int i = 0; i < R * C; i++) h[i] = 0.1f * (float)(i % 7) - 0.2f;
    for (int i = 0; i < C; i++) hw[i] = 1.0f + 0.01f * (float)i;
    const vc_backend *be = vc_be();
    float *x = be->alloc(sizeof h), *dy = be->alloc(sizeof h), *dx = be->alloc(sizeof h), *y = be->alloc(sizeof h);
    float *w = be->alloc(sizeof hw), *dw = be->alloc(sizeof hw), *rstd = be->alloc(R * sizeof(float));
    be->h2d(x, h, sizeof h);
    be->h2d(dy, h, sizeof h);
    be->h2d(w, hw, sizeof hw);
    be->zero(dx, sizeof h);
    be->zero(dw, sizeof hw);
    be->rmsnorm_fwd(y, rstd, x, w, R, C, 1e-6f, 0.0f);
    CHECK_OK(be->sync());
    vc_cpu_scratch_test(1);
    be->rmsnorm_bwd(dx, dw, dy, x, w, rstd, R, C, 0.0f);
    vc_status st = be->sync();
    CHECK_MSG(st == VC_ERR_NOMEM && strstr(vc_last_error(), "scratch memory"), "%s: sync after a failed scratch: %d %s",
              be->name, st, vc_last_error());
    CHECK(be->sync() == VC_ERR_NOMEM); /* sticky */
    vc_cpu_scratch_test(0);
    CHECK_OK(be->sync());
    be->rmsnorm_bwd(dx, dw, dy, x, w, rstd, R, C, 0.0f);
    CHECK_OK(be->sync());
    float *ptr[7] = { x, dy, dx, y, w, dw, rstd };
    for (int i = 0; i < 7; i++) be->free(ptr[i]);
}

/* The head's forward values against a host computation from explicit logits: log p(target), entropy and
 * sum_v p_v^2 of softcap(h W^T + b) / temperature, with enough tokens that the vocabulary is walked in
 * several slices (the CPU backend slices at 32 MiB of logits), so the statistics' merge is exercised. */
static void check_head_values(void) {
    const int64_t T = 2048, H = 8, V = 9001;
    const float cap = 4.0f, temp = 0.7f;
    make(0, 2, T, H, 0, 1); make(1, 2, V, H, 0, 1); make(2, 1, V, 0, 0, 1);
    int32_t *tg = malloc(sizeof(int32_t) * T);
    for (int64_t t = 0; t < T; t++) tg[t] = t % 5 == 2 ? -1 : (int32_t)((t * 7919) % V);
    vc_graph *g = vc_graph_new();
    vc_graph_set_grad(g, 0);
    vc_tensor *lp = NULL, *en = NULL, *sq = NULL;
    CHECK_OK(vc_op_lm_head(g, &params[0], &params[1], &params[2], tg, cap, temp, &lp, &en, &sq));
    float *hl = malloc(4 * T), *he = malloc(4 * T), *hs = malloc(4 * T);
    double *z = malloc(sizeof(double) * V), worst[3] = { 0, 0, 0 };
    CHECK_OK(vc_tensor_read(lp, hl));
    CHECK_OK(vc_tensor_read(en, he));
    CHECK_OK(vc_tensor_read(sq, hs));
    for (int64_t t = 0; t < T; t++) {
        double mx = -1e300, s = 0, a = 0, q = 0;
        for (int64_t v = 0; v < V; v++) {
            double x = pdata[2][v];
            for (int64_t k = 0; k < H; k++) x += (double)pdata[0][t * H + k] * pdata[1][v * H + k];
            z[v] = cap * tanh(x / cap) / temp;
            mx = z[v] > mx ? z[v] : mx;
        }
        for (int64_t v = 0; v < V; v++) s += exp(z[v] - mx);
        double lse = mx + log(s);
        for (int64_t v = 0; v < V; v++) {
            double p = exp(z[v] - lse);
            a += p * z[v];
            q += p * p;
        }
        double want[3] = { tg[t] >= 0 ? z[tg[t]] - lse : 0, lse - a, q }, got[3] = { hl[t], he[t], hs[t] };
        for (int k = 0; k < 3; k++) {
            double e = fabs(got[k] - want[k]) / (k == 2 ? want[k] : 1);
            worst[k] = e > worst[k] ? e : worst[k];
        }
    }
    CHECK_MSG(worst[0] < 2e-5 && worst[1] < 2e-5 && worst[2] < 2e-5,
              "%s lm_head at temperature %.1f: max error log-prob %.2e, entropy %.2e, sum p^2 (relative) %.2e",
              vc_be()->name, temp, worst[0], worst[1], worst[2]);
    printf("%-4s lm_head values at temperature %.1f, softcap %.0f, %lld tokens x %lld vocabulary: max error "
           "log-prob %.2e, entropy %.2e, sum p^2 %.2e (relative)\n", vc_be()->name, temp, cap, (long long)T,
           (long long)V, worst[0], worst[1], worst[2]);
    vc_graph_free(g);
    for (int i = 0; i < 3; i++) {
        free(pdata[i]);
        vc_be()->free(ddata[i]);
        vc_be()->free(dgrad[i]);
    }
    free(tg); free(hl); free(he); free(hs); free(z);
}

/* the gated units' backward rounds as PyTorch's autograd does, (dy * u) * act'(g): bit for bit (a change of this
 * order once moved the demo's whole training trajectory) */
static void check_act_mul_rounding(void) {
    enum { N = 4096 };
    static float g[N], u[N], dy[N], dg[N], du[N];
    for (int i = 0; i < N; i++) g[i] = 4 * frand(), u[i] = 3 * frand(), dy[i] = frand(), dg[i] = du[i] = 0;
    const int kinds[2] = { VC_ACT_SILU, VC_ACT_GELU_TANH };
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < N; i++) dg[i] = du[i] = 0;
        vc_backend_cpu()->act_mul_bwd(dg, du, dy, g, u, N, N, N, kinds[k]);
        int same = 1;
        for (int i = 0; i < N && same; i++) {
            float want = dy[i] * u[i] * vc_act_d(g[i], kinds[k]);
            same = memcmp(&want, &dg[i], 4) == 0;
        }
        CHECK_MSG(same, "act_mul backward (kind %d) is not (dy * u) * act'(g) bit for bit", kinds[k]);
    }
}

int main(void) {
    vc_set_threads(2);
    check_act_mul_rounding();
    const vc_backend *bes[2] = { vc_backend_cpu(), vc_backend_sim() };
    for (int b = 0; b < 2; b++) {
        rng = 88172645463325252ull; /* the same data on both backends */
        vc_set_backend(bes[b]);
        run_all();
        check_head_values();
        check_bf16_acts();
        check_gated_mlp();
        check_gated_mlp_rows();
        check_grad_reuse();
        check_child_graph();
        check_scratch_fault();
        CHECK_OK(vc_be()->sync());
    }
    vc_set_backend(NULL);
    return vc_test_done();
}
