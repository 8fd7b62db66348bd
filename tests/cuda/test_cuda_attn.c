/* CUDA flash attention (forward, backward) and paged decode attention vs the CPU backend: packed
 * sequences of different lengths, GQA 14/2, MQA, MHA, head dims 64 / 128 / 192+128, sliding window,
 * soft-cap, ALiBi, chunked prefill (more keys than queries), keys and values inside a fused QKV-like row.
 * Backward must give the same bits run to run. Without a GPU: "no CUDA device: skipped", exit 0. */
#include "attn_test_util.h"

#define TOL 1e-4

static const vc_backend *C, *G;

typedef struct {
    const char *name;
    int nh, nkv, hd, dv, causal, window;
    float cap;
    int nseq;
    int64_t qlen[6], kvlen[6];
    int fused; /* k and v of a token share one row: [k heads | v heads] */
    int alibi; /* ALiBi biases (Baichuan-13B) */
    int sinks; /* attention sinks (gpt-oss) */
    int chunk; /* chunked attention (Llama 4) */
    int sel;   /* DeepSeek Sparse Attention: each query row sees a random half of its keys (its own among them) */
} acase;

static void attn_case(const acase *a) {
    printf("attention: %s (heads %d/%d, dims %d/%d, causal %d, window %d, softcap %g, %d sequences)\n", a->name, a->nh,
           a->nkv, a->hd, a->dv, a->causal, a->window, a->cap, a->nseq);
    attn_seqs p = { 0 }; /* the descriptors point into it */
    float *gdks[6], *gdks2[6], *kvbuf[6], *gkvbuf[6];
    float *dkv[6], *ddkv_init[6];
    size_t kvn[6];
    int64_t kst = (int64_t)a->nkv * a->hd, vst = (int64_t)a->nkv * a->dv;
    for (int s = 0; s < a->nseq; s++) p.qs[s + 1] = p.qs[s] + a->qlen[s];
    int64_t Tq = p.qs[a->nseq];
    int64_t row = a->fused ? kst + vst : 0;
    for (int s = 0; s < a->nseq; s++) {
        p.kvl[s] = a->kvlen[s];
        /* one storage block per sequence: fused rows, or K then V */
        kvn[s] = (size_t)(a->kvlen[s] * (kst + vst));
        kvbuf[s] = hrand(kvn[s], 1);
        gkvbuf[s] = dup_f(kvbuf[s], kvn[s]);
        ddkv_init[s] = hrand(kvn[s], 1);
        dkv[s] = clone(ddkv_init[s], kvn[s]);
        float *g1 = dup_f(ddkv_init[s], kvn[s]), *g2 = dup_f(ddkv_init[s], kvn[s]);
        attn_seq_bind(&p, s, kvbuf[s], gkvbuf[s], dkv[s], g1, g2, a->fused ? kst : a->kvlen[s] * kst);
        gdks[s] = g1;
        gdks2[s] = g2;
    }
    attn_descs(&p, a->nseq, a->fused ? row : kst, a->fused ? row : vst, a->nh, a->nkv, a->hd, a->dv, a->cap,
               a->window, a->causal);
    p.d.alibi = p.gd.alibi = p.gd2.alibi = a->alibi;
    float *sk = a->sinks ? hrand((size_t)a->nh, 3) : NULL, *gsk = sk ? dup_f(sk, a->nh) : NULL;
    p.d.sinks = sk;
    p.d.chunk = p.gd.chunk = p.gd2.chunk = a->chunk;
    p.gd.sinks = p.gd2.sinks = gsk;
    if (a->sel) attn_random_sel(&p, a->nseq);
    const vc_attn_desc *d = &p.d, *gd = &p.gd, *gd2 = &p.gd2;
    size_t nq = (size_t)(Tq * a->nh * a->hd), no = (size_t)(Tq * a->nh * a->dv), nl = (size_t)(Tq * a->nh);
    float *q = hrand(nq, 1), *o = hbuf(no), *lse = hbuf(nl);
    float *gq = dup_f(q, nq), *go = dup_f(o, no), *glse = dup_f(lse, nl);
    C->attn_fwd(o, lse, q, d);
    G->attn_fwd(go, glse, gq, gd);
    cmp("fwd output", go, o, no, TOL);
    cmp("fwd lse", glse, lse, nl, TOL);
    /* backward from the CPU forward's o / lse, gradients accumulated onto random values */
    float *dout = hrand(no, 1), *dq0 = hrand(nq, 1), *dq = clone(dq0, nq);
    float *gdout = dup_f(dout, no), *gdq = dup_f(dq0, nq), *gdq2 = dup_f(dq0, nq);
    float *go_c = dup_f(o, no), *glse_c = dup_f(lse, nl);
    C->attn_bwd(dq, dout, o, lse, q, d);
    G->attn_bwd(gdq, gdout, go_c, glse_c, gq, gd);
    G->attn_bwd(gdq2, gdout, go_c, glse_c, gq, gd2);
    cmp("bwd dq (accumulated)", gdq, dq, nq, TOL);
    if (sk) { /* the sinks' gradient, accumulated onto random values */
        float *ds = hrand((size_t)a->nh, 1), *gds = dup_f(ds, a->nh);
        C->attn_sink_bwd(ds, dout, o, lse, sk, Tq, a->nh, a->dv);
        G->attn_sink_bwd(gds, gdout, go_c, glse_c, gsk, Tq, a->nh, a->dv);
        cmp("bwd sinks (accumulated)", gds, ds, (size_t)a->nh, TOL);
    }
    size_t tot = 0;
    for (int s = 0; s < a->nseq; s++) tot += kvn[s];
    float *ref = hbuf(tot), *got = hbuf(tot);
    size_t at = 0;
    for (int s = 0; s < a->nseq; s++) {
        memcpy(ref + at, dkv[s], kvn[s] * 4);
        vc_cuda_d2h(got + at, gdks[s], kvn[s] * 4);
        at += kvn[s];
    }
    cmp_host("bwd dk and dv of all sequences (accumulated)", got, ref, tot, TOL);
    same_bits("bwd dq", gdq, gdq2, nq);
    int same = 1;
    for (int s = 0; s < a->nseq; s++) {
        float *x = fetch(gdks[s], kvn[s]), *y = fetch(gdks2[s], kvn[s]);
        same &= !memcmp(x, y, kvn[s] * 4);
    }
    attn_dkdv_same(a->name, same);
    check_sticky(a->name);
    release_all();
}

static void decode_case(const char *name, int nh, int nkv, int hd, int dv, int window, float cap) {
    enum { NS = 5, PS = 16 };
    static const int lens[NS] = { 1, 17, 64, 100, 33 };
    printf("paged decode: %s (heads %d/%d, dims %d/%d, window %d, softcap %g, page size %d)\n", name, nh, nkv, hd, dv,
           window, cap, PS);
    int max_pages = (100 + PS - 1) / PS, n_pages = 0;
    for (int s = 0; s < NS; s++) n_pages += (lens[s] + PS - 1) / PS;
    n_pages += 3; /* unused pages in the pool */
    int32_t *perm = (int32_t *)hbuf((size_t)n_pages), *pt = (int32_t *)hbuf((size_t)(NS * max_pages));
    for (int i = 0; i < n_pages; i++) perm[i] = i;
    for (int i = n_pages - 1; i > 0; i--) { /* shuffle */
        int j = (int)((urand() + 1.0f) * 0.5f * (float)(i + 1));
        if (j > i) j = i;
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    size_t kslot = (size_t)nkv * hd, vslot = (size_t)nkv * dv;
    float *kpool = hrand((size_t)n_pages * PS * kslot, 1), *vpool = hrand((size_t)n_pages * PS * vslot, 1);
    const float *ks[NS], *vs[NS];
    int64_t qs[NS + 1], kvl[NS];
    int next = 0;
    for (int s = 0; s < NS; s++) {
        float *K = hbuf((size_t)lens[s] * kslot), *V = hbuf((size_t)lens[s] * vslot);
        for (int i = 0; i < max_pages; i++) pt[s * max_pages + i] = i * PS < lens[s] ? perm[next++] : -1;
        for (int j = 0; j < lens[s]; j++) {
            int64_t slot = (int64_t)pt[s * max_pages + j / PS] * PS + j % PS;
            memcpy(K + j * kslot, kpool + slot * kslot, kslot * 4);
            memcpy(V + j * vslot, vpool + slot * vslot, vslot * 4);
        }
        ks[s] = K;
        vs[s] = V;
        qs[s] = s;
        kvl[s] = lens[s];
    }
    qs[NS] = NS;
    vc_attn_desc d = { .n_seq = NS, .q_start = qs, .kv_len = kvl, .k_seq = ks, .v_seq = vs, .k_stride = (int64_t)kslot,
                       .v_stride = (int64_t)vslot, .n_head = nh, .n_kv_head = nkv, .head_dim = hd, .v_head_dim = dv,
                       .scale = 1.0f / sqrtf((float)hd), .softcap = cap, .window = window, .causal = 1 };
    float *q = hrand((size_t)NS * nh * hd, 1), *o = hbuf((size_t)NS * nh * dv), *lse = hbuf((size_t)NS * nh);
    C->attn_fwd(o, lse, q, &d);
    int32_t lens32[NS];
    for (int s = 0; s < NS; s++) lens32[s] = lens[s];
    vc_paged_desc pd = { .n_seq = NS, .seq_len = dcopy(lens32, sizeof lens32),
                         .page_table = dcopy(pt, (size_t)(NS * max_pages) * 4), .max_pages = max_pages, .page_size = PS,
                         .k_pages = dup_f(kpool, (size_t)n_pages * PS * kslot),
                         .v_pages = dup_f(vpool, (size_t)n_pages * PS * vslot), .n_head = nh, .n_kv_head = nkv,
                         .head_dim = hd, .v_head_dim = dv, .scale = d.scale, .softcap = cap, .window = window };
    float *go = dalloc((size_t)NS * nh * dv * 4), *glse = dalloc((size_t)NS * nh * 4);
    CHECK_OK(vc_cuda_attn_decode_paged(go, glse, dup_f(q, (size_t)NS * nh * hd), &pd));
    cmp("decode output", go, o, (size_t)NS * nh * dv, TOL);
    cmp("decode lse", glse, lse, (size_t)NS * nh, TOL);
    check_sticky(name);
    release_all();
}

/* timing only (no reference): one 4096-token sequence, GQA 14/2, head dim 128 */
static void attn_timing(void) {
    int64_t T = 4096, qs[2] = { 0, T }, kvl[1] = { T };
    int nh = 14, nkv = 2, hd = 128;
    size_t nq = (size_t)(T * nh * hd), nk = (size_t)(T * nkv * hd);
    float *q = dup_f(hrand(nq, 1), nq), *k = dup_f(hrand(nk, 1), nk), *v = dup_f(hrand(nk, 1), nk);
    float *o = dalloc(nq * 4), *lse = dalloc((size_t)(T * nh) * 4), *dq = dalloc(nq * 4);
    float *dk = dalloc(nk * 4), *dv = dalloc(nk * 4), *dout = dup_f(hrand(nq, 1), nq);
    vc_cuda_memset0(dq, nq * 4);
    vc_cuda_memset0(dk, nk * 4);
    vc_cuda_memset0(dv, nk * 4);
    const float *ks[1] = { k }, *vs[1] = { v };
    float *dks[1] = { dk }, *dvs[1] = { dv };
    vc_attn_desc d = { .n_seq = 1, .q_start = qs, .kv_len = kvl, .k_seq = ks, .v_seq = vs, .dk_seq = dks, .dv_seq = dvs,
                       .k_stride = nkv * hd, .v_stride = nkv * hd, .n_head = nh, .n_kv_head = nkv, .head_dim = hd,
                       .v_head_dim = hd, .scale = 0.08838834764f, .causal = 1 };
    G->attn_fwd(o, lse, q, &d); /* warm-up */
    vc_cuda_sync();
    double t0 = vc_now();
    G->attn_fwd(o, lse, q, &d);
    vc_cuda_sync();
    double t1 = vc_now();
    G->attn_bwd(dq, dout, o, lse, q, &d);
    vc_cuda_sync();
    double t2 = vc_now(), fl = 2.0 * (double)T * T * hd * nh; /* causal: half of 4 T^2 hd per head */
    printf("timing: attention T=%lld GQA 14/2 hd 128 causal: fwd %.2f ms (%.1f TFLOP/s), bwd %.2f ms (%.1f TFLOP/s)\n",
           (long long)T, (t1 - t0) * 1e3, fl / (t1 - t0) / 1e12, (t2 - t1) * 1e3, 2.5 * fl / (t2 - t1) / 1e12);
    check_sticky("timing");
    release_all();
}

int main(void) {
    if (gpu_skip()) return 0;
    C = vc_backend_cpu();
    G = vc_backend_cuda();
    static const acase cases[] = {
        { "GQA 14/2 hd 64, packed prefill", 14, 2, 64, 64, 1, 0, 0, 4, { 37, 128, 5, 200 }, { 37, 128, 5, 200 }, 0 },
        { "GQA 14/2 hd 128, fused kv rows", 14, 2, 128, 128, 1, 0, 0, 3, { 100, 64, 65 }, { 100, 64, 65 }, 1 },
        { "MHA 8/8 hd 128, window 32, softcap 30", 8, 8, 128, 128, 1, 32, 30.0f, 3, { 100, 64, 300 },
          { 100, 64, 300 }, 0 },
        { "MQA 4/1 hd 128, chunked prefill", 4, 1, 128, 128, 1, 0, 0, 3, { 20, 1, 70 }, { 150, 33, 70 }, 0 },
        { "MLA-like dims 192/128, window 50", 4, 4, 192, 128, 1, 50, 0, 2, { 70, 133 }, { 70, 140 }, 0 },
        { "GQA 6/2 hd 80, softcap 50", 6, 2, 80, 80, 1, 0, 50.0f, 2, { 90, 31 }, { 90, 31 }, 1 },
        { "non-causal 2/1 hd 64, window 16", 2, 1, 64, 64, 0, 16, 0, 2, { 40, 77 }, { 40, 77 }, 0 },
        { "GQA 16/4 hd 256", 16, 4, 256, 256, 1, 0, 0, 2, { 90, 40 }, { 90, 40 }, 0 },
        { "GQA 8/1 hd 512 (Gemma 4's full layers)", 8, 1, 512, 512, 1, 0, 0, 2, { 45, 20 }, { 45, 20 }, 0 },
        { "MHA 2/2 hd 300, window 16, softcap 30, chunked prefill", 2, 2, 300, 300, 1, 16, 30.0f, 2, { 20, 33 },
          { 60, 33 }, 0 },
        { "ALiBi MHA 6/6 hd 64 (slopes of 4 heads and of 8)", 6, 6, 64, 64, 1, 0, 0, 2, { 50, 90 }, { 50, 90 }, 0, 1 },
        { "ALiBi GQA 12/4 hd 128, chunked prefill", 12, 4, 128, 128, 1, 0, 0, 2, { 20, 70 }, { 150, 70 }, 0, 1 },
        { "ALiBi as Falcon-RW's bf16 table, MHA 6/6 hd 64, chunked prefill", 6, 6, 64, 64, 1, 0, 0, 2, { 20, 70 },
          { 150, 70 }, 0, 2 },
        { "sinks GQA 8/2 hd 64, window 32", 8, 2, 64, 64, 1, 32, 0, 3, { 100, 5, 64 }, { 100, 5, 64 }, 0, 0, 1 },
        { "sinks MQA 4/1 hd 128, chunked prefill", 4, 1, 128, 128, 1, 0, 0, 2, { 20, 70 }, { 150, 70 }, 0, 0, 1 },
        { "chunks of 48 (Llama 4) GQA 8/2 hd 64", 8, 2, 64, 64, 1, 0, 0, 3, { 100, 5, 150 }, { 100, 5, 150 }, 0, 0, 0, 48 },
        { "chunks of 40, chunked prefill, MHA 4/4 hd 128", 4, 4, 128, 128, 1, 0, 0, 2, { 20, 70 }, { 150, 70 }, 0, 0, 0, 40 },
        { "selected keys (DSA), MLA dims 192/128, chunked prefill", 4, 4, 192, 128, 1, 0, 0, 2, { 70, 20 }, { 70, 150 }, 0,
          0, 0, 0, 1 },
        { "selected keys (DSA), GQA 8/2 hd 64, softcap 30", 8, 2, 64, 64, 1, 0, 30.0f, 3, { 100, 5, 64 }, { 100, 5, 64 },
          0, 0, 0, 0, 1 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) attn_case(&cases[i]);
    decode_case("GQA 14/2 hd 64", 14, 2, 64, 64, 0, 0);
    decode_case("GQA 8/2 hd 128, window 40, softcap 30", 8, 2, 128, 128, 40, 30.0f);
    decode_case("MHA 4/4 dims 192/128", 4, 4, 192, 128, 0, 0);
    if (!timing_skipped("attention")) attn_timing();
    return vc_test_done();
}
