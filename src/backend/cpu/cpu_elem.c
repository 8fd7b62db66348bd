/* CPU elementwise and layout entries (fill, axpy, add, mul, scale, row copies and sums, soft-cap, row
 * normalisation, dot, embedding, row gathers, MoE combine/scatter). Large inputs are split into fixed
 * blocks on the pool; every element or row is computed by the same arithmetic whichever thread runs it,
 * and every sum runs in the order the op table documents, so results do not depend on the thread count. */
#include "cpu.h"
#include "verlc/dtype.h"
#include "verlc/pool.h"
#include <math.h>
#include <string.h>

#define EW 16384      /* elements per elementwise block */
#define ROWS_MIN 4096 /* elements per row block (at least one row) */

/* ---- elementwise ---- */
typedef struct {
    float *y;
    const float *a, *b;
    float s;
    int64_t n;
    float s2; /* (clip's upper bound) */
} ew_ctx;

#define EW_TASK(name, body)                                                                                       \
    static void name##_task(void *p, int64_t blk) {                                                            \
        ew_ctx *c = p;                                                                                          \
        int64_t i0 = blk * EW, i1 = i0 + EW < c->n ? i0 + EW : c->n;                                            \
        float *y = c->y;                                                                                        \
        const float *a = c->a, *b = c->b;                                                                       \
        float s = c->s, s2 = c->s2;                                                                             \
        (void)a;                                                                                                \
        (void)b;                                                                                                \
        (void)s;                                                                                                \
        (void)s2;                                                                                               \
        for (int64_t i = i0; i < i1; i++) body;                                                                 \
    }

EW_TASK(fill, y[i] = s)
EW_TASK(axpy, y[i] += s * a[i])
EW_TASK(add, y[i] = a[i] + b[i])
EW_TASK(mul, y[i] = a[i] * b[i])
EW_TASK(mul_acc, y[i] += a[i] * b[i])
EW_TASK(scale, y[i] = a[i] * s)
EW_TASK(softcap_fwd, y[i] = s * tanhf(a[i] / s))
EW_TASK(softcap_bwd, { float t = b[i] / s; y[i] += a[i] * (1.0f - t * t); })
EW_TASK(dot_bwd, y[i] += b[0] * a[i])
EW_TASK(clip_fwd, y[i] = a[i] < s ? s : a[i] > s2 ? s2 : a[i])
EW_TASK(clip_bwd, { if (b[i] >= s && b[i] <= s2) y[i] += a[i]; })
EW_TASK(round_bf16, y[i] = vc_bf16_to_f32(vc_f32_to_bf16(a[i])))

static void ew_run2(vc_task_fn fn, float *y, const float *a, const float *b, float s, float s2, int64_t n) {
    ew_ctx c = { y, a, b, s, n, s2 };
    if (n <= 0) return;
    if (n <= EW) fn(&c, 0);
    else vc_parallel((n + EW - 1) / EW, fn, &c);
}

static void ew_run(vc_task_fn fn, float *y, const float *a, const float *b, float s, int64_t n) {
    ew_ctx c = { y, a, b, s, n, 0 };
    if (n <= 0) return;
    if (n <= EW) fn(&c, 0);
    else vc_parallel((n + EW - 1) / EW, fn, &c);
}

void vc_cpu_fill(float *y, float v, int64_t n) { ew_run(fill_task, y, NULL, NULL, v, n); }
void vc_cpu_axpy(float *y, float a, const float *x, int64_t n) { ew_run(axpy_task, y, x, NULL, a, n); }
void vc_cpu_add(float *y, const float *a, const float *b, int64_t n) { ew_run(add_task, y, a, b, 0, n); }
void vc_cpu_mul(float *y, const float *a, const float *b, int64_t n) { ew_run(mul_task, y, a, b, 0, n); }
void vc_cpu_mul_acc(float *y, const float *a, const float *b, int64_t n) { ew_run(mul_acc_task, y, a, b, 0, n); }
void vc_cpu_scale(float *y, const float *x, float s, int64_t n) { ew_run(scale_task, y, x, NULL, s, n); }
void vc_cpu_round_bf16(float *y, const float *x, int64_t n) { ew_run(round_bf16_task, y, x, NULL, 0, n); }
void vc_cpu_clip_fwd(float *y, const float *x, float lo, float hi, int64_t n) {
    ew_run2(clip_fwd_task, y, x, NULL, lo, hi, n);
}
void vc_cpu_clip_bwd(float *dx, const float *dy, const float *x, float lo, float hi, int64_t n) {
    ew_run2(clip_bwd_task, dx, dy, x, lo, hi, n);
}
void vc_cpu_softcap_fwd(float *y, const float *x, float cap, int64_t n) { ew_run(softcap_fwd_task, y, x, NULL, cap, n); }
void vc_cpu_softcap_bwd(float *dx, const float *dy, const float *y, float cap, int64_t n) {
    ew_run(softcap_bwd_task, dx, dy, y, cap, n);
}
/* dx += dout[0] * w */
void vc_cpu_dot_bwd(float *dx, const float *dout, const float *w, int64_t n) { ew_run(dot_bwd_task, dx, w, dout, 0, n); }

/* out[0] = sum x w in double, ascending */
void vc_cpu_dot_fwd(float *out, const float *x, const float *w, int64_t n) {
    double acc = 0;
    for (int64_t i = 0; i < n; i++) acc += (double)x[i] * w[i];
    out[0] = (float)acc;
}

/* ---- row-parallel kernels: one context, a row function, blocks of rows ---- */
typedef struct rows_ctx rows_ctx;
typedef void (*row_fn)(const rows_ctx *c, int64_t r);
struct rows_ctx {
    row_fn fn;
    int64_t R, C, blk_rows;
    float *y, *y2;
    void *vy; /* bf16 destination */
    const float *x, *x2, *x3, *x4;
    const int32_t *ids;
    const int64_t *idx;
    int64_t dld, sld, rep, K;
    int acc;
};

static void rows_task(void *p, int64_t blk) {
    const rows_ctx *c = p;
    int64_t r1 = (blk + 1) * c->blk_rows < c->R ? (blk + 1) * c->blk_rows : c->R;
    for (int64_t r = blk * c->blk_rows; r < r1; r++) c->fn(c, r);
}

/* runs fn over rows [0, R), each row costing about `work` elements */
static void rows_run(rows_ctx *c, int64_t work) {
    if (c->R <= 0) return;
    c->blk_rows = work > 0 && work < ROWS_MIN ? ROWS_MIN / work : 1;
    int64_t nblk = (c->R + c->blk_rows - 1) / c->blk_rows;
    if (nblk == 1) rows_task(c, 0);
    else vc_parallel(nblk, rows_task, c);
}

/* mul_rows: y = x, s = x2; backward dx = y, ds = y2, dy = x, x = x2, s = x3 */
static void mul_rows_f(const rows_ctx *c, int64_t r) {
    const float *x = c->x + r * c->C;
    float *y = c->y + r * c->C, s = c->x2[r];
    for (int64_t i = 0; i < c->C; i++) y[i] = x[i] * s;
}
void vc_cpu_mul_rows_fwd(float *y, const float *x, const float *s, int64_t R, int64_t C) {
    rows_ctx c = { .fn = mul_rows_f, .R = R, .C = C, .y = y, .x = x, .x2 = s };
    rows_run(&c, C);
}

static void mul_rows_b(const rows_ctx *c, int64_t r) {
    const float *dy = c->x + r * c->C, *x = c->x2 + r * c->C;
    float s = c->x3[r], acc = 0;
    if (c->y) {
        float *dx = c->y + r * c->C;
        for (int64_t i = 0; i < c->C; i++) dx[i] += dy[i] * s;
    }
    if (c->y2) {
        for (int64_t i = 0; i < c->C; i++) acc += dy[i] * x[i];
        c->y2[r] += acc;
    }
}
void vc_cpu_mul_rows_bwd(float *dx, float *ds, const float *dy, const float *x, const float *s, int64_t R, int64_t C) {
    rows_ctx c = { .fn = mul_rows_b, .R = R, .C = C, .y = dx, .y2 = ds, .x = dy, .x2 = x, .x3 = s };
    rows_run(&c, C);
}

static void rows_copy_f(const rows_ctx *c, int64_t r) {
    float *d = c->y + r * c->dld;
    const float *s = c->x + (r / c->rep) * c->sld;
    if (!c->acc) memcpy(d, s, (size_t)c->C * sizeof(float));
    else
        for (int64_t i = 0; i < c->C; i++) d[i] += s[i];
}
void vc_cpu_rows_copy(float *dst, int64_t dld, const float *src, int64_t sld, int64_t R, int64_t C, int64_t rep,
                      int acc) {
    if (C <= 0) return;
    rows_ctx c = { .fn = rows_copy_f, .R = R, .C = C, .y = dst, .x = src, .dld = dld, .sld = sld,
                   .rep = rep > 0 ? rep : 1, .acc = acc };
    rows_run(&c, C);
}

/* dst row i += source rows i*rep .. i*rep + rep - 1, one at a time in ascending order */
static void rows_sum_f(const rows_ctx *c, int64_t i) {
    float *d = c->y + i * c->dld;
    for (int64_t j = 0; j < c->rep; j++) {
        const float *s = c->x + (i * c->rep + j) * c->sld;
        for (int64_t k = 0; k < c->C; k++) d[k] += s[k];
    }
}
void vc_cpu_rows_sum(float *dst, int64_t dld, const float *src, int64_t sld, int64_t R, int64_t C, int64_t rep) {
    if (C <= 0 || rep <= 0) return;
    rows_ctx c = { .fn = rows_sum_f, .R = R / rep, .C = C, .y = dst, .x = src, .dld = dld, .sld = sld, .rep = rep };
    rows_run(&c, C * rep);
}

/* col_sum over blocks of 256 columns: the "rows" here are column blocks, each summing r ascending */
#define COLS 256
static void col_sum_f(const rows_ctx *c, int64_t b) {
    int64_t c0 = b * COLS, c1 = c0 + COLS < c->C ? c0 + COLS : c->C;
    for (int64_t r = 0; r < c->K; r++)
        for (int64_t j = c0; j < c1; j++) c->y[j] += c->x[r * c->C + j];
}
void vc_cpu_col_sum(float *db, const float *dy, int64_t R, int64_t C) {
    rows_ctx c = { .fn = col_sum_f, .R = (C + COLS - 1) / COLS, .C = C, .K = R, .y = db, .x = dy };
    rows_run(&c, R * COLS);
}

static void rownorm_f(const rows_ctx *c, int64_t r) {
    const float *W = c->x + r * c->C;
    float *y = c->y + r * c->C, ss = 0;
    for (int64_t i = 0; i < c->C; i++) ss += W[i] * W[i];
    float nrm = sqrtf(ss), den = nrm > 1e-12f ? nrm : 1e-12f;
    c->y2[r] = nrm;
    for (int64_t i = 0; i < c->C; i++) y[i] = W[i] / den;
}
void vc_cpu_rownorm_fwd(float *y, float *nrm, const float *W, int64_t R, int64_t C) {
    rows_ctx c = { .fn = rownorm_f, .R = R, .C = C, .y = y, .y2 = nrm, .x = W };
    rows_run(&c, C);
}

/* dW += (dy - y (y . dy)) / nrm, or dy / 1e-12 where the norm was clamped */
static void rownorm_b(const rows_ctx *c, int64_t r) {
    const float *dy = c->x + r * c->C, *y = c->x2 + r * c->C;
    float *d = c->y + r * c->C, nrm = c->x3[r], dot = 0;
    for (int64_t i = 0; i < c->C; i++) dot += y[i] * dy[i];
    int clamped = nrm <= 1e-12f;
    for (int64_t i = 0; i < c->C; i++) d[i] += clamped ? dy[i] / 1e-12f : (dy[i] - y[i] * dot) / nrm;
}
void vc_cpu_rownorm_bwd(float *dW, const float *dy, const float *y, const float *nrm, int64_t R, int64_t C) {
    rows_ctx c = { .fn = rownorm_b, .R = R, .C = C, .y = dW, .x = dy, .x2 = y, .x3 = nrm };
    rows_run(&c, C);
}

/* ---- embedding and gathers ---- */
static void embed_f(const rows_ctx *c, int64_t t) {
    memcpy(c->y + t * c->C, c->x + (int64_t)c->ids[t] * c->C, (size_t)c->C * sizeof(float));
}
void vc_cpu_embed_fwd(float *y, const float *W, const int32_t *ids, int64_t T, int64_t H) {
    rows_ctx c = { .fn = embed_f, .R = T, .C = H, .y = y, .x = W, .ids = ids };
    rows_run(&c, H);
}

/* backward over blocks of columns: duplicate ids accumulate t ascending within each column */
static void embed_b(const rows_ctx *c, int64_t b) {
    int64_t c0 = b * COLS, c1 = c0 + COLS < c->C ? c0 + COLS : c->C;
    for (int64_t t = 0; t < c->K; t++) {
        float *d = c->y + (int64_t)c->ids[t] * c->C;
        const float *s = c->x + t * c->C;
        for (int64_t j = c0; j < c1; j++) d[j] += s[j];
    }
}
void vc_cpu_embed_bwd(float *dW, const float *dy, const int32_t *ids, int64_t T, int64_t H) {
    rows_ctx c = { .fn = embed_b, .R = (H + COLS - 1) / COLS, .C = H, .K = T, .y = dW, .x = dy, .ids = ids };
    rows_run(&c, T * COLS);
}

static void gather_f(const rows_ctx *c, int64_t r) {
    memcpy(c->y + r * c->C, c->x + c->idx[r] * c->C, (size_t)c->C * sizeof(float));
}
void vc_cpu_gather_rows(float *dst, const float *src, const int64_t *idx, int64_t R, int64_t H) {
    rows_ctx c = { .fn = gather_f, .R = R, .C = H, .y = dst, .x = src, .idx = idx };
    rows_run(&c, H);
}

static void gather_bf16_f(const rows_ctx *c, int64_t r) {
    uint16_t *d = (uint16_t *)c->vy + r * c->C;
    const float *x = c->x + c->idx[r] * c->C;
    for (int64_t i = 0; i < c->C; i++) d[i] = vc_f32_to_bf16(x[i]);
}
void vc_cpu_gather_rows_bf16(void *dst, const float *src, const int64_t *idx, int64_t R, int64_t H) {
    if (H <= 0) return;
    rows_ctx c = { .fn = gather_bf16_f, .R = R, .C = H, .vy = dst, .x = src, .idx = idx };
    rows_run(&c, H);
}

static void scatter_rows_f(const rows_ctx *c, int64_t r) {
    memcpy(c->y + c->idx[r], c->x + r * c->sld, (size_t)c->C * sizeof(float));
}
void vc_cpu_scatter_rows(float *dst, const int64_t *off, const float *src, int64_t sld, int64_t R, int64_t C) {
    if (C <= 0) return;
    rows_ctx c = { .fn = scatter_rows_f, .R = R, .C = C, .y = dst, .x = src, .idx = off, .sld = sld };
    rows_run(&c, C);
}

static void scatter_rows_bf16_f(const rows_ctx *c, int64_t r) {
    uint16_t *d = (uint16_t *)c->vy + c->idx[r];
    const float *x = c->x + r * c->sld;
    for (int64_t i = 0; i < c->C; i++) d[i] = vc_f32_to_bf16(x[i]);
}
void vc_cpu_scatter_rows_bf16(void *dst, const int64_t *off, const float *src, int64_t sld, int64_t R, int64_t C) {
    if (C <= 0) return;
    rows_ctx c = { .fn = scatter_rows_bf16_f, .R = R, .C = C, .vy = dst, .x = src, .idx = off, .sld = sld };
    rows_run(&c, C);
}

/* ---- MoE combine / scatter, one token per row; inv is a permutation of the grouped rows ---- */
static void combine_f(const rows_ctx *c, int64_t t) {
    float *y = c->y + t * c->C;
    for (int64_t i = 0; i < c->C; i++) y[i] = 0;
    for (int64_t k = 0; k < c->K; k++) {
        const float *Y = c->x + c->idx[t * c->K + k] * c->C;
        float w = c->x2[t * c->K + k];
        for (int64_t i = 0; i < c->C; i++) y[i] += w * Y[i];
    }
}
void vc_cpu_moe_combine_fwd(float *y, const float *Y, const float *w, const int64_t *inv, int64_t T, int64_t K,
                            int64_t H) {
    rows_ctx c = { .fn = combine_f, .R = T, .C = H, .K = K, .y = y, .x = Y, .x2 = w, .idx = inv };
    rows_run(&c, H * K);
}

/* y = dY, y2 = dw, x = dy, x2 = Y, x3 = w */
static void combine_b(const rows_ctx *c, int64_t t) {
    const float *dy = c->x + t * c->C;
    for (int64_t k = 0; k < c->K; k++) {
        int64_t r = c->idx[t * c->K + k];
        const float *Y = c->x2 + r * c->C;
        float *dY = c->y + r * c->C, w = c->x3[t * c->K + k], acc = 0;
        for (int64_t i = 0; i < c->C; i++) {
            dY[i] = w * dy[i];
            acc += dy[i] * Y[i];
        }
        c->y2[t * c->K + k] = acc;
    }
}
void vc_cpu_moe_combine_bwd(float *dY, float *dw, const float *dy, const float *Y, const float *w, const int64_t *inv,
                            int64_t T, int64_t K, int64_t H) {
    rows_ctx c = { .fn = combine_b, .R = T, .C = H, .K = K, .y = dY, .y2 = dw, .x = dy, .x2 = Y, .x3 = w, .idx = inv };
    rows_run(&c, H * K);
}

static void scatter_f(const rows_ctx *c, int64_t t) {
    float *dx = c->y + t * c->C;
    for (int64_t k = 0; k < c->K; k++) {
        const float *s = c->x + c->idx[t * c->K + k] * c->C;
        for (int64_t i = 0; i < c->C; i++) dx[i] += s[i];
    }
}
void vc_cpu_moe_scatter_add(float *dx, const float *dX, const int64_t *inv, int64_t T, int64_t K, int64_t H) {
    rows_ctx c = { .fn = scatter_f, .R = T, .C = H, .K = K, .y = dx, .x = dX, .idx = inv };
    rows_run(&c, H * K);
}
