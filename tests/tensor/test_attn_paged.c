/* The CPU backend's paged attention (rollout decode and prefill rows): against a double-precision reference over
 * f32 and bf16 pages, for query-head groups of 1 to 14 per kv head (the value pass's register tiles of 1 to 6 heads
 * and its even split of a group), head dims with a tail past a multiple of 8 (72, 80) and values narrower than keys,
 * with a sliding window, a soft-cap, ALiBi and sinks; and each row's bits the same alone, beside other sequences and
 * on 1 or 2 threads (a row's heads then run in other groupings). */
#include "tensor/backend.h"
#include "backend/cpu/cpu.h"
#include "verlc/dtype.h"
#include "verlc/pool.h"
#include "vc_test.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { return vc_test_frand(&rng); } /* [-1, 1) */

#define NS 3
#define PAGE 16

typedef struct {
    int nh, nkv, hd, dv, window, alibi, bf16;
    float softcap;
    int sinks;
} cfg;

typedef struct {
    int64_t qs[NS + 1], kvl[NS], kstride, vstride;
    float *k[NS], *v[NS]; /* host rows [kvl, kstride] (bf16-rounded where the pages are bf16) */
    void **kp[NS], **vp[NS];
    float *q, *sink;
} inputs;

static void make(const cfg *c, inputs *in) {
    static const int64_t kvl[NS] = { 37, 130, 9 }, ql[NS] = { 1, 3, 2 };
    in->kstride = (int64_t)c->nkv * c->hd + 3, in->vstride = (int64_t)c->nkv * c->dv + 5; /* rows wider than the heads */
    in->qs[0] = 0;
    for (int s = 0; s < NS; s++) {
        in->kvl[s] = kvl[s];
        in->qs[s + 1] = in->qs[s] + ql[s];
        int64_t pages = (kvl[s] + PAGE - 1) / PAGE;
        in->k[s] = calloc((size_t)(pages * PAGE * in->kstride), sizeof(float));
        in->v[s] = calloc((size_t)(pages * PAGE * in->vstride), sizeof(float));
        for (int64_t i = 0; i < kvl[s] * in->kstride; i++) in->k[s][i] = frand();
        for (int64_t i = 0; i < kvl[s] * in->vstride; i++) in->v[s][i] = frand();
        in->kp[s] = calloc((size_t)pages, sizeof(void *));
        in->vp[s] = calloc((size_t)pages, sizeof(void *));
        for (int64_t p = 0; p < pages; p++) { /* pages in backend memory, in page order reversed (not adjacent) */
            size_t kb = (size_t)(PAGE * in->kstride), vb = (size_t)(PAGE * in->vstride);
            if (c->bf16) {
                uint16_t *hk = malloc(kb * 2), *hv = malloc(vb * 2);
                for (size_t i = 0; i < kb; i++) {
                    hk[i] = vc_f32_to_bf16(in->k[s][p * kb + i]);
                    in->k[s][p * kb + i] = vc_bf16_to_f32(hk[i]);
                }
                for (size_t i = 0; i < vb; i++) {
                    hv[i] = vc_f32_to_bf16(in->v[s][p * vb + i]);
                    in->v[s][p * vb + i] = vc_bf16_to_f32(hv[i]);
                }
                in->kp[s][pages - 1 - p] = hk, in->vp[s][pages - 1 - p] = hv;
            } else {
                float *hk = malloc(kb * 4), *hv = malloc(vb * 4);
                memcpy(hk, in->k[s] + p * kb, kb * 4);
                memcpy(hv, in->v[s] + p * vb, vb * 4);
                in->kp[s][pages - 1 - p] = hk, in->vp[s][pages - 1 - p] = hv;
            }
        }
        /* the page table in order */
        for (int64_t a = 0, b = pages - 1; a < b; a++, b--) {
            void *t = in->kp[s][a];
            in->kp[s][a] = in->kp[s][b], in->kp[s][b] = t;
            t = in->vp[s][a], in->vp[s][a] = in->vp[s][b], in->vp[s][b] = t;
        }
    }
    int64_t T = in->qs[NS];
    in->q = malloc(sizeof(float) * (size_t)(T * c->nh * c->hd));
    for (int64_t i = 0; i < T * c->nh * c->hd; i++) in->q[i] = frand();
    in->sink = malloc(sizeof(float) * (size_t)c->nh);
    for (int h = 0; h < c->nh; h++) in->sink[h] = 2 * frand();
}

static void release(inputs *in) {
    for (int s = 0; s < NS; s++) {
        for (int64_t p = 0; p < (in->kvl[s] + PAGE - 1) / PAGE; p++) free(in->kp[s][p]), free(in->vp[s][p]);
        free(in->kp[s]), free(in->vp[s]), free(in->k[s]), free(in->v[s]);
    }
    free(in->q), free(in->sink);
}

/* the backend's attention of sequences [s0, s0 + ns) into o [rows, nh dv] */
static void run(const cfg *c, const inputs *in, int s0, int ns, float *o, float *lse) {
    int64_t qs[NS + 1];
    for (int s = 0; s <= ns; s++) qs[s] = in->qs[s0 + s] - in->qs[s0];
    const float *const *kps[NS], *const *vps[NS];
    for (int s = 0; s < ns; s++) kps[s] = (const float *const *)in->kp[s0 + s], vps[s] = (const float *const *)in->vp[s0 + s];
    vc_attn_desc d = { .n_seq = ns, .q_start = qs, .kv_len = in->kvl + s0, .k_stride = in->kstride,
                       .v_stride = in->vstride, .n_head = c->nh, .n_kv_head = c->nkv, .head_dim = c->hd,
                       .v_head_dim = c->dv, .scale = 1.0f / sqrtf((float)c->hd), .softcap = c->softcap,
                       .window = c->window, .causal = 1, .alibi = c->alibi, .k_pages = kps, .v_pages = vps,
                       .page_tokens = PAGE, .kv_bf16 = c->bf16, .sinks = c->sinks ? in->sink : NULL };
    vc_cpu_attn_fwd(o, lse, in->q + in->qs[s0] * c->nh * c->hd, &d);
}

/* the largest error of o against attention in double precision */
static double ref_err(const cfg *c, const inputs *in, const float *o) {
    double worst = 0;
    int G = c->nh / c->nkv;
    vc_attn_desc ad = { .n_head = c->nh, .alibi = c->alibi };
    for (int s = 0; s < NS; s++)
        for (int64_t r = in->qs[s]; r < in->qs[s + 1]; r++) {
            int64_t pos = in->kvl[s] - (in->qs[s + 1] - in->qs[s]) + (r - in->qs[s]);
            for (int h = 0; h < c->nh; h++) {
                int kvh = h / G;
                double sc[256], m = c->sinks ? in->sink[h] : -INFINITY, sum = 0;
                for (int64_t j = 0; j <= pos; j++) {
                    double dot = 0;
                    for (int i = 0; i < c->hd; i++)
                        dot += (double)in->q[(r * c->nh + h) * c->hd + i] * in->k[s][j * in->kstride + kvh * c->hd + i];
                    dot /= sqrt((double)c->hd);
                    if (c->softcap > 0) dot = c->softcap * tanh(dot / c->softcap);
                    if (c->alibi) dot += vc_alibi_bias(&ad, h, pos, j);
                    sc[j] = c->window > 0 && pos - j >= c->window ? -INFINITY : dot;
                    m = sc[j] > m ? sc[j] : m;
                }
                for (int64_t j = 0; j <= pos; j++) sum += exp(sc[j] - m);
                if (c->sinks) sum += exp(in->sink[h] - m);
                for (int i = 0; i < c->dv; i++) {
                    double acc = 0;
                    for (int64_t j = 0; j <= pos; j++) acc += exp(sc[j] - m) / sum * in->v[s][j * in->vstride + kvh * c->dv + i];
                    double e = fabs(acc - o[(r * c->nh + h) * c->dv + i]);
                    worst = e > worst ? e : worst;
                }
            }
        }
    return worst;
}

static void check(const cfg *c) {
    inputs in;
    make(c, &in);
    int64_t T = in.qs[NS], W = (int64_t)c->nh * c->dv;
    float *o = malloc(sizeof(float) * (size_t)(T * W)), *o1 = malloc(sizeof(float) * (size_t)(T * W));
    float *lse = malloc(sizeof(float) * (size_t)(T * c->nh)), *lse1 = malloc(sizeof(float) * (size_t)(T * c->nh));
    vc_set_threads(2);
    run(c, &in, 0, NS, o, lse);
    double e = ref_err(c, &in, o);
    CHECK_MSG(e < 2e-6, "heads %d/%d, dims %d/%d, window %d, alibi %d, softcap %g, sinks %d, bf16 %d: error %.3g", c->nh,
              c->nkv, c->hd, c->dv, c->window, c->alibi, c->softcap, c->sinks, c->bf16, e);
    /* each sequence alone, on one thread: the same bits */
    vc_set_threads(1);
    for (int s = 0; s < NS; s++) {
        run(c, &in, s, 1, o1 + in.qs[s] * W, lse1 + in.qs[s] * c->nh);
    }
    CHECK_MSG(!memcmp(o, o1, sizeof(float) * (size_t)(T * W)) && !memcmp(lse, lse1, sizeof(float) * (size_t)(T * c->nh)),
              "heads %d/%d, dims %d/%d: a row's bits depend on the batch or the threads", c->nh, c->nkv, c->hd, c->dv);
    vc_set_threads(0);
    free(o), free(o1), free(lse), free(lse1);
    release(&in);
}

int main(void) {
    static const cfg CASES[] = {
        { 7, 1, 64, 64, 0, 0, 0, 0, 0 },   /* Qwen2.5-0.5B's group of 7: passes of 3 and 4 heads (AVX-512) */
        { 7, 1, 64, 64, 0, 0, 1, 0, 0 },   /* ... over bf16 pages */
        { 14, 2, 64, 64, 0, 0, 1, 0, 0 },  /* 7 a group, two kv heads */
        { 8, 8, 128, 128, 0, 0, 0, 0, 0 }, /* one head a group */
        { 12, 1, 80, 80, 0, 0, 0, 0, 0 },  /* Phi-2's 80: 32 + 32 + 8 + 8 columns */
        { 6, 2, 72, 40, 0, 0, 1, 0, 0 },   /* a key tail past 64, values of 40 (32 + 8) */
        { 5, 1, 64, 36, 24, 0, 0, 0, 0 },  /* a sliding window, values with a 4-column tail */
        { 4, 2, 64, 64, 0, 0, 0, 30.0f, 1 }, /* a soft-cap and sinks */
        { 6, 3, 64, 64, 0, 1, 1, 0, 0 },   /* ALiBi */
    };
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) check(&CASES[i]);
    return vc_test_done();
}
