/* DeepSeek Sparse Attention's backend entries on the CPU and sim backends: dsa_select against a double-precision
 * reference (each visible key's score sum_h w_h relu(scale q_h . k), the topk best, ties to the lower index) with keys
 * in rows, in f32 pages and in bf16 pages, for packed sequences with chunked prefill and with fewer keys than topk;
 * and attention with a selection against attention over each row's selected keys gathered into a sequence of their
 * own, contiguous and paged. */
#include "tensor/backend.h"
#include "verlc/dtype.h"
#include "vc_test.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float frand(void) { return vc_test_frand(&rng); } /* [-1, 1) */

static void *up(const void *h, size_t bytes) {
    void *d = vc_be()->alloc(bytes ? bytes : 4);
    if (bytes) vc_be()->h2d(d, h, bytes);
    return d;
}

#define NS 3
#define NH 4
#define HD 12
#define KS 20 /* key row stride: the keys sit inside wider rows */
#define PAGE 4

typedef struct {
    int64_t qs[NS + 1], kvl[NS];
    float *keys[NS];   /* host [kvl, KS] */
    float *q, *w;      /* host [rows, NH, HD], [rows, NH] */
    int64_t rows, words, topk;
} dsa_case;

static void case_init(dsa_case *c, const int64_t *qlen, const int64_t *kvl, int64_t topk) {
    c->qs[0] = 0;
    int64_t most = 0;
    for (int s = 0; s < NS; s++) {
        c->qs[s + 1] = c->qs[s] + qlen[s];
        c->kvl[s] = kvl[s];
        most = kvl[s] > most ? kvl[s] : most;
        c->keys[s] = malloc(sizeof(float) * (size_t)(kvl[s] * KS));
        for (int64_t i = 0; i < kvl[s] * KS; i++) c->keys[s][i] = frand();
    }
    c->rows = c->qs[NS];
    c->words = (most + 31) / 32 + 1; /* one word to spare: it must come back zero */
    c->topk = topk;
    c->q = malloc(sizeof(float) * (size_t)(c->rows * NH * HD));
    c->w = malloc(sizeof(float) * (size_t)(c->rows * NH));
    for (int64_t i = 0; i < c->rows * NH * HD; i++) c->q[i] = frand();
    for (int64_t i = 0; i < c->rows * NH; i++) c->w[i] = frand();
}

static void case_free(dsa_case *c) {
    for (int s = 0; s < NS; s++) free(c->keys[s]);
    free(c->q);
    free(c->w);
}

/* the reference selection, keys as bf16 values when bf16 */
static void reference(const dsa_case *c, uint32_t *sel, int bf16) {
    memset(sel, 0, sizeof(uint32_t) * (size_t)(c->rows * c->words));
    double *sc = malloc(sizeof(double) * 512);
    int64_t *ord = malloc(sizeof(int64_t) * 512);
    for (int s = 0; s < NS; s++)
        for (int64_t r = c->qs[s]; r < c->qs[s + 1]; r++) {
            int64_t nvis = c->kvl[s] - (c->qs[s + 1] - r) + 1;
            for (int64_t j = 0; j < nvis; j++) {
                double t = 0;
                for (int h = 0; h < NH; h++) {
                    double x = 0;
                    for (int i = 0; i < HD; i++) {
                        float k = c->keys[s][j * KS + i];
                        if (bf16) k = vc_bf16_to_f32(vc_f32_to_bf16(k));
                        x += (double)c->q[(r * NH + h) * HD + i] * k;
                    }
                    x /= sqrt((double)HD);
                    t += (double)c->w[r * NH + h] * (x > 0 ? x : 0);
                }
                sc[j] = t;
                ord[j] = j;
            }
            for (int64_t a = 1; a < nvis; a++) /* insertion sort: score descending, index ascending */
                for (int64_t b = a; b > 0 && (sc[ord[b]] > sc[ord[b - 1]] ||
                                              (sc[ord[b]] == sc[ord[b - 1]] && ord[b] < ord[b - 1])); b--) {
                    int64_t t = ord[b];
                    ord[b] = ord[b - 1];
                    ord[b - 1] = t;
                }
            for (int64_t i = 0; i < nvis && i < c->topk; i++) sel[r * c->words + ord[i] / 32] |= 1u << (ord[i] % 32);
        }
    free(sc);
    free(ord);
}

/* layout 0: keys in rows; 1: f32 pages; 2: bf16 pages (pages shuffled in one pool) */
static void run_select(const dsa_case *c, int layout, uint32_t *out) {
    const vc_backend *B = vc_be();
    vc_attn_desc d = { .n_seq = NS, .q_start = c->qs, .kv_len = c->kvl, .n_head = NH, .n_kv_head = 1, .head_dim = HD,
                       .v_head_dim = HD, .scale = 1.0f / sqrtf((float)HD), .causal = 1 };
    void *own[NS] = { 0 }, *pool = NULL;
    const float *kseq[NS];
    const float **pages[NS] = { 0 };
    if (layout == 0) {
        for (int s = 0; s < NS; s++) kseq[s] = own[s] = up(c->keys[s], sizeof(float) * (size_t)(c->kvl[s] * KS));
        d.k_seq = kseq;
        d.k_stride = KS;
    } else {
        int64_t npg = 0;
        for (int s = 0; s < NS; s++) npg += (c->kvl[s] + PAGE - 1) / PAGE;
        size_t es = layout == 2 ? 2 : 4, pb = (size_t)(PAGE * KS) * es;
        char *h = calloc((size_t)npg, pb);
        int64_t at = 0;
        for (int s = 0; s < NS; s++) {
            int64_t n = (c->kvl[s] + PAGE - 1) / PAGE;
            pages[s] = malloc(sizeof(float *) * (size_t)n);
            for (int64_t p = 0; p < n; p++, at++) {
                int64_t slot = (at * 7 + 3) % npg; /* 7 is prime to npg here: a permutation */
                for (int64_t t = 0; t < PAGE && p * PAGE + t < c->kvl[s]; t++)
                    for (int i = 0; i < KS; i++) {
                        float v = c->keys[s][(p * PAGE + t) * KS + i];
                        if (layout == 2) ((uint16_t *)(void *)(h + slot * pb))[t * KS + i] = vc_f32_to_bf16(v);
                        else ((float *)(void *)(h + slot * pb))[t * KS + i] = v;
                    }
                pages[s][p] = (const float *)(const void *)(h + slot * pb); /* host, translated below */
            }
        }
        pool = up(h, (size_t)npg * pb);
        for (int s = 0; s < NS; s++)
            for (int64_t p = 0; p < (c->kvl[s] + PAGE - 1) / PAGE; p++)
                pages[s][p] = (const float *)(const void *)((char *)pool + ((const char *)(const void *)pages[s][p] - h));
        free(h);
        d.k_pages = (const float *const *const *)pages;
        d.page_tokens = PAGE;
        d.kv_bf16 = layout == 2;
        d.k_stride = KS;
    }
    void *q = up(c->q, sizeof(float) * (size_t)(c->rows * NH * HD)), *w = up(c->w, sizeof(float) * (size_t)(c->rows * NH));
    size_t sb = sizeof(uint32_t) * (size_t)(c->rows * c->words);
    uint32_t *sel = B->alloc(sb);
    memset(out, 0xab, sb);
    B->h2d(sel, out, sb); /* garbage in: every word must be written */
    B->dsa_select(sel, c->words, q, w, c->topk, &d);
    B->d2h(out, sel, sb);
    CHECK_OK(B->sync());
    B->free(sel);
    B->free(q);
    B->free(w);
    B->free(pool);
    for (int s = 0; s < NS; s++) {
        B->free(own[s]);
        free(pages[s]);
    }
}

static void test_select(void) {
    static const int64_t qlen[NS] = { 3, 40, 5 }, kvl[NS] = { 3, 40, 70 }; /* short; prefill; chunked prefill */
    static const char *LAYOUT[] = { "keys in rows", "f32 pages", "bf16 pages" };
    for (int topk = 1; topk <= 33; topk += 16)
        for (int layout = 0; layout < 3; layout++) {
            dsa_case c;
            case_init(&c, qlen, kvl, topk);
            size_t n = (size_t)(c.rows * c.words);
            uint32_t *got = malloc(n * 4), *want = malloc(n * 4);
            reference(&c, want, layout == 2);
            run_select(&c, layout, got);
            int64_t bad = 0;
            for (size_t i = 0; i < n; i++) bad += got[i] != want[i];
            printf("%-4s dsa_select topk %2d, %-12s: %lld of %zu words differ from the reference\n", vc_be()->name, topk,
                   LAYOUT[layout], (long long)bad, n);
            CHECK_MSG(bad == 0, "dsa_select topk %d %s: %lld words differ", topk, LAYOUT[layout], (long long)bad);
            /* every query row selects min(topk, its visible keys) */
            for (int s = 0; s < NS; s++)
                for (int64_t r = c.qs[s]; r < c.qs[s + 1]; r++) {
                    int64_t nvis = c.kvl[s] - (c.qs[s + 1] - r) + 1, cnt = 0;
                    for (int64_t k = 0; k < c.words; k++) cnt += __builtin_popcount(got[r * c.words + k]);
                    CHECK(cnt == (nvis < topk ? nvis : topk));
                }
            /* all scores equal (q zero): ties to the lowest keys */
            memset(c.q, 0, sizeof(float) * (size_t)(c.rows * NH * HD));
            run_select(&c, layout, got);
            int ok = 1;
            for (int s = 0; s < NS; s++)
                for (int64_t r = c.qs[s]; r < c.qs[s + 1]; r++) {
                    int64_t nvis = c.kvl[s] - (c.qs[s + 1] - r) + 1, want_n = nvis < topk ? nvis : topk;
                    for (int64_t j = 0; j < c.words * 32; j++)
                        ok &= (int)((got[r * c.words + j / 32] >> (j % 32)) & 1u) == (j < want_n);
                }
            CHECK_MSG(ok, "dsa_select topk %d %s: ties do not go to the lowest keys", topk, LAYOUT[layout]);
            free(got);
            free(want);
            case_free(&c);
        }
}

/* attention with a random selection vs each row over its selected keys alone (non-causal, gathered) */
static void test_masked_attention(int paged) {
    const vc_backend *B = vc_be();
    enum { T = 30, H = 4, KV = 2, D = 8, DV = 6, W = 1 };
    int64_t qs[2] = { 0, T }, kvl[1] = { T }, row = KV * (D + DV);
    float *kv = malloc(sizeof(float) * T * row), *q = malloc(sizeof(float) * T * H * D);
    uint32_t sel[T * W];
    for (int i = 0; i < T * row; i++) kv[i] = frand();
    for (int i = 0; i < T * H * D; i++) q[i] = frand();
    for (int r = 0; r < T; r++) {
        sel[r] = 1u << r; /* its own key, and about half of the others before it */
        for (int j = 0; j < r; j++)
            if (frand() > 0) sel[r] |= 1u << j;
    }
    float *dkv = up(kv, sizeof(float) * T * row), *dq = up(q, sizeof(float) * T * H * D);
    float *o = B->alloc(sizeof(float) * T * H * DV), *lse = B->alloc(sizeof(float) * T * H);
    const float *ks[1] = { dkv }, *vs[1] = { dkv + KV * D };
    const float *kp[T / 2 + 1], *vp[T / 2 + 1];
    const float *const *kpp[1] = { kp }, *const *vpp[1] = { vp };
    for (int p = 0; p < (T + 1) / 2; p++) { /* pages of 2 tokens */
        kp[p] = dkv + p * 2 * row;
        vp[p] = dkv + p * 2 * row + KV * D;
    }
    vc_attn_desc d = { .n_seq = 1, .q_start = qs, .kv_len = kvl, .k_seq = ks, .v_seq = vs, .k_stride = row,
                       .v_stride = row, .n_head = H, .n_kv_head = KV, .head_dim = D, .v_head_dim = DV, .scale = 0.5f,
                       .causal = 1, .sel = up(sel, sizeof sel), .sel_words = W };
    if (paged) {
        d.k_pages = kpp;
        d.v_pages = vpp;
        d.page_tokens = 2;
    }
    B->attn_fwd(o, lse, dq, &d);
    float got[T * H * DV], one[H * DV], worst = 0;
    B->d2h(got, o, sizeof got);
    for (int r = 0; r < T; r++) {
        float g[T * KV * (D + DV)];
        int n = 0;
        for (int j = 0; j <= r; j++)
            if (sel[r] >> j & 1u) memcpy(g + (n++) * row, kv + j * row, sizeof(float) * (size_t)row);
        float *dg = up(g, sizeof(float) * (size_t)(n * row)), *o1 = B->alloc(sizeof one);
        int64_t qs1[2] = { 0, 1 }, kl1[1] = { n };
        const float *k1[1] = { dg }, *v1[1] = { dg + KV * D };
        vc_attn_desc e = d;
        e.q_start = qs1;
        e.kv_len = kl1;
        e.k_seq = k1;
        e.v_seq = v1;
        e.k_pages = e.v_pages = NULL;
        e.page_tokens = 0;
        e.causal = 0;
        e.sel = NULL;
        B->attn_fwd(o1, NULL, dq + r * H * D, &e);
        B->d2h(one, o1, sizeof one);
        for (int i = 0; i < H * DV; i++) worst = fmaxf(worst, fabsf(one[i] - got[r * H * DV + i]));
        B->free(dg);
        B->free(o1);
    }
    printf("%-4s attention with selected keys (%s) vs each row over its keys alone: max diff %.2e\n", B->name,
           paged ? "paged" : "contiguous", worst);
    CHECK_MSG(worst < 1e-5f, "masked attention (%s) differs by %g", paged ? "paged" : "contiguous", worst);
    CHECK_OK(B->sync());
    B->free((void *)d.sel);
    B->free(dkv);
    B->free(dq);
    B->free(o);
    B->free(lse);
    free(kv);
    free(q);
}

int main(void) {
    for (int b = 0; b < 2; b++) {
        vc_set_backend(b ? vc_backend_sim() : vc_backend_cpu());
        test_select();
        test_masked_attention(0);
        test_masked_attention(1);
    }
    vc_set_backend(NULL);
    return vc_test_done();
}
