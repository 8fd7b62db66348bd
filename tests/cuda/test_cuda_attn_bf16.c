/* bf16 tensor-core flash attention (VC_PREC_BF16, head dims 64 / 80 / 96 / 128 / 256 and 192 / 128) vs the CPU attention run on the
 * same inputs rounded to bf16 (q, k, v, and dO for the backward): packed sequences of unequal lengths,
 * GQA, MQA, MHA, sliding window, soft-cap, chunked prefill, keys and values inside fused rows.
 * Tolerances (max abs error / max |reference|): forward o 1e-2 and lse 2e-4 (P is rounded to bf16
 * before P V; scores are exact bf16 products summed in f32), backward dq / dk / dv 2e-2 (P and dS
 * rounded to bf16). Backward results must be the same bits run to run, and the register-tiled forward, dQ and
 * dK/dV the same bits with their cp.async pipelines as without (VERLC_CUDA_ATTN_PIPE=0) and with the tiles a warp
 * sees whole taken without masks as with (VERLC_CUDA_ATTN_WHOLE=0) and the blocks longest first as in order
 * (VERLC_CUDA_ATTN_ORDER=0), the forward with two m-tiles a warp as with one
 * (VERLC_CUDA_ATTN_M2=0) where no window or chunk moves a row's first key tile; dK / dV within 1e-5 of themselves
 * with a GQA group's heads in one block or in pairs (VERLC_CUDA_ATTN_SPLIT=1, 2). A head dim of 72 under bf16
 * must still take the f32 kernels (tolerance 1e-4). Without a GPU: "no CUDA device: skipped", exit 0. */
#include "attn_test_util.h"
#include "verlc/dtype.h"

static const vc_backend *C, *G;

typedef struct {
    const char *name;
    int nh, nkv, hd, causal, window;
    float cap;
    int nseq;
    int64_t qlen[6], kvlen[6];
    int fused;
    double tol_o, tol_lse, tol_bwd;
    int dv; /* value head dim; 0: hd */
    int alibi;
    int sinks; /* attention sinks (gpt-oss) */
    int chunk; /* chunked attention (Llama 4) */
    int sel;   /* DeepSeek Sparse Attention: a random half of each row's keys (attn_random_sel) */
} bcase;

static float *hround(size_t n, float scale) { /* random values that are exact bf16 numbers */
    float *p = hrand(n, scale);
    for (size_t i = 0; i < n; i++) p[i] = vc_bf16_to_f32(vc_f32_to_bf16(p[i]));
    return p;
}

static void bf16_case(const bcase *a) {
    const int dv = a->dv ? a->dv : a->hd;
    printf("bf16 attention: %s (heads %d/%d, dims %d/%d, causal %d, window %d, softcap %g, %d sequences)\n", a->name,
           a->nh, a->nkv, a->hd, dv, a->causal, a->window, a->cap, a->nseq);
    attn_seqs p = { 0 }; /* the descriptors point into it */
    float *gdks[6], *gdks2[6], *dkv[6], *inits[6];
    size_t kvn[6];
    int64_t kst = (int64_t)a->nkv * a->hd, vst = (int64_t)a->nkv * dv;
    for (int s = 0; s < a->nseq; s++) p.qs[s + 1] = p.qs[s] + a->qlen[s];
    int64_t Tq = p.qs[a->nseq];
    for (int s = 0; s < a->nseq; s++) {
        p.kvl[s] = a->kvlen[s];
        kvn[s] = (size_t)(a->kvlen[s] * (kst + vst));
        float *kv = hround(kvn[s], 1), *init = hrand(kvn[s], 1);
        float *gkv = dup_f(kv, kvn[s]), *g1 = dup_f(init, kvn[s]), *g2 = dup_f(init, kvn[s]);
        dkv[s] = clone(init, kvn[s]);
        inits[s] = init;
        attn_seq_bind(&p, s, kv, gkv, dkv[s], g1, g2, a->fused ? kst : a->kvlen[s] * kst);
        gdks[s] = g1;
        gdks2[s] = g2;
    }
    attn_descs(&p, a->nseq, a->fused ? kst + vst : kst, a->fused ? kst + vst : vst, a->nh, a->nkv, a->hd, dv, a->cap,
               a->window, a->causal);
    p.d.alibi = p.gd.alibi = p.gd2.alibi = a->alibi;
    float *sk = a->sinks ? hrand((size_t)a->nh, 3) : NULL;
    p.d.sinks = sk;
    p.gd.sinks = p.gd2.sinks = sk ? dup_f(sk, a->nh) : NULL;
    p.d.chunk = p.gd.chunk = p.gd2.chunk = a->chunk;
    if (a->sel) attn_random_sel(&p, a->nseq);
    const vc_attn_desc *d = &p.d, *gd = &p.gd, *gd2 = &p.gd2;
    size_t nq = (size_t)(Tq * a->nh * a->hd), no = (size_t)(Tq * a->nh * dv), nl = (size_t)(Tq * a->nh);
    float *q = hround(nq, 3), *o = hbuf(no), *lse = hbuf(nl);
    float *gq = dup_f(q, nq), *go = dup_f(o, no), *glse = dup_f(lse, nl), *go2 = dup_f(o, no);
    C->attn_fwd(o, lse, q, d);
    G->attn_fwd(go, glse, gq, gd);
    G->attn_fwd(go2, NULL, gq, gd);
    cmp("fwd output", go, o, no, a->tol_o);
    cmp("fwd lse", glse, lse, nl, a->tol_lse);
    same_bits("fwd output (lse NULL)", go, go2, no);
    { /* one 16-row m-tile a warp (64-query blocks; VERLC_CUDA_ATTN_M2=0) instead of two (128, heads of 64): the
       * same bits where a row's key tiles start at the same key either way (no window, no chunks: every row's first
       * tile at key 0); without the cp.async pipeline (VERLC_CUDA_ATTN_PIPE=0, one m-tile): the same bits as one
       * m-tile with it */
        float *go3 = dup_f(o, no), *glse3 = dup_f(lse, nl), *go1 = dup_f(o, no), *glse1 = dup_f(lse, nl);
        setenv("VERLC_CUDA_ATTN_M2", "0", 1);
        G->attn_fwd(go1, glse1, gq, gd);
        setenv("VERLC_CUDA_ATTN_PIPE", "0", 1);
        G->attn_fwd(go3, glse3, gq, gd);
        unsetenv("VERLC_CUDA_ATTN_PIPE");
        unsetenv("VERLC_CUDA_ATTN_M2");
        same_bits("fwd output: pipelined copies vs none", go1, go3, no);
        same_bits("fwd lse: pipelined copies vs none", glse1, glse3, nl);
        if (!a->window && !a->chunk) {
            same_bits("fwd output: two m-tiles a warp vs one", go, go1, no);
            same_bits("fwd lse: two m-tiles a warp vs one", glse, glse1, nl);
        } else {
            cmp("fwd output, one m-tile a warp", go1, o, no, a->tol_o);
            cmp("fwd lse, one m-tile a warp", glse1, lse, nl, a->tol_lse);
        }
        setenv("VERLC_CUDA_ATTN_WHOLE", "0", 1); /* every tile through the masks */
        setenv("VERLC_CUDA_ATTN_ORDER", "0", 1); /* the blocks in (sequence, row) order, not longest first */
        G->attn_fwd(go3, glse3, gq, gd);
        unsetenv("VERLC_CUDA_ATTN_WHOLE");
        unsetenv("VERLC_CUDA_ATTN_ORDER");
        same_bits("fwd output: whole tiles unmasked, longest first vs masked, in order", go, go3, no);
        same_bits("fwd lse: whole tiles unmasked, longest first vs masked, in order", glse, glse3, nl);
    }
    float *dout = hround(no, 1), *dq0 = hrand(nq, 1), *dq = clone(dq0, nq);
    float *gdout = dup_f(dout, no), *gdq = dup_f(dq0, nq), *gdq2 = dup_f(dq0, nq);
    float *go_c = dup_f(o, no), *glse_c = dup_f(lse, nl);
    C->attn_bwd(dq, dout, o, lse, q, d);
    G->attn_bwd(gdq, gdout, go_c, glse_c, gq, gd);
    /* the second run without the cp.async pipelines, with every tile masked and the blocks in (sequence, row) order:
     * the same bits */
    setenv("VERLC_CUDA_ATTN_PIPE", "0", 1);
    setenv("VERLC_CUDA_ATTN_WHOLE", "0", 1);
    setenv("VERLC_CUDA_ATTN_ORDER", "0", 1);
    G->attn_bwd(gdq2, gdout, go_c, glse_c, gq, gd2);
    unsetenv("VERLC_CUDA_ATTN_PIPE");
    unsetenv("VERLC_CUDA_ATTN_WHOLE");
    unsetenv("VERLC_CUDA_ATTN_ORDER");
    /* compare the increments (the accumulated-onto values are O(1) and would hide errors) */
    float *gq_h = fetch(gdq, nq);
    for (size_t i = 0; i < nq; i++) {
        gq_h[i] -= dq0[i];
        dq[i] -= dq0[i];
    }
    cmp_host("bwd dq increment", gq_h, dq, nq, a->tol_bwd);
    size_t tot = 0;
    for (int s = 0; s < a->nseq; s++) tot += kvn[s];
    float *ref = hbuf(tot), *got = hbuf(tot), *got2 = hbuf(tot);
    size_t at = 0;
    for (int s = 0; s < a->nseq; s++) {
        vc_cuda_d2h(got + at, gdks[s], kvn[s] * 4);
        vc_cuda_d2h(got2 + at, gdks2[s], kvn[s] * 4);
        for (size_t i = 0; i < kvn[s]; i++) { /* increments over the initial values */
            ref[at + i] = dkv[s][i] - inits[s][i];
            got[at + i] -= inits[s][i];
            got2[at + i] -= inits[s][i];
        }
        at += kvn[s];
    }
    same_bits("bwd dq (pipelined copies, whole tiles unmasked, longest first vs none)", gdq, gdq2, nq);
    int same = !memcmp(got, got2, tot * 4);
    attn_dkdv_same(a->name, same);
    cmp_host("bwd dk and dv increments", got, ref, tot, a->tol_bwd);
    /* a GQA group's heads split over several dK/dV blocks (the default with few blocks: every case here) or not
     * (VERLC_CUDA_ATTN_SPLIT=1), or in pairs (=2): the same P and dS, the f32 sums of the heads in another order */
    for (int split = 1; split <= 2 && a->nh > a->nkv; split++) {
        char v[8];
        snprintf(v, sizeof v, "%d", split);
        setenv("VERLC_CUDA_ATTN_SPLIT", v, 1);
        at = 0;
        for (int s = 0; s < a->nseq; s++) vc_cuda_h2d(gdks2[s], inits[s], kvn[s] * 4);
        G->attn_bwd(gdq2, gdout, go_c, glse_c, gq, gd2);
        unsetenv("VERLC_CUDA_ATTN_SPLIT");
        for (int s = 0; s < a->nseq; s++) {
            vc_cuda_d2h(got2 + at, gdks2[s], kvn[s] * 4);
            for (size_t i = 0; i < kvn[s]; i++) got2[at + i] -= inits[s][i];
            at += kvn[s];
        }
        char what[64];
        snprintf(what, sizeof what, "bwd dk, dv: heads split %s vs default", split == 1 ? "none" : "in pairs");
        cmp_host(what, got2, got, tot, 1e-5);
    }
    check_sticky(a->name);
    release_all();
}


/* timing only: 16 causal sequences of T tokens (Qwen2.5 shapes), bf16 tensor cores vs the f32 kernels */
static void timing(int nh, int nkv, int hd, int T) {
    enum { NS = 16 };
    int64_t qs[NS + 1], kvl[NS], Tq = (int64_t)NS * T;
    size_t nq = (size_t)(Tq * nh * hd), nk = (size_t)(Tq * nkv * hd);
    float *q = dup_f(hrand(nq, 1), nq), *k = dup_f(hrand(nk, 1), nk), *v = dup_f(hrand(nk, 1), nk);
    float *o = dalloc(nq * 4), *lse = dalloc((size_t)(Tq * nh) * 4), *dq = dalloc(nq * 4);
    float *dk = dalloc(nk * 4), *dv = dalloc(nk * 4), *dout = dup_f(hrand(nq, 1), nq);
    const float *ks[NS], *vs[NS];
    float *dks[NS], *dvs[NS];
    for (int s = 0; s <= NS; s++) qs[s] = (int64_t)s * T;
    for (int s = 0; s < NS; s++) {
        kvl[s] = T;
        ks[s] = k + (size_t)s * T * nkv * hd;
        vs[s] = v + (size_t)s * T * nkv * hd;
        dks[s] = dk + (size_t)s * T * nkv * hd;
        dvs[s] = dv + (size_t)s * T * nkv * hd;
    }
    vc_attn_desc d = { .n_seq = NS, .q_start = qs, .kv_len = kvl, .k_seq = ks, .v_seq = vs, .dk_seq = dks,
                       .dv_seq = dvs, .k_stride = nkv * hd, .v_stride = nkv * hd, .n_head = nh, .n_kv_head = nkv,
                       .head_dim = hd, .v_head_dim = hd, .scale = 1.0f / sqrtf((float)hd), .causal = 1 };
    double fl = 2.0 * (double)T * T * hd * nh * NS; /* causal: half of 4 T^2 hd per head */
    static const char *kname[] = { "bf16 mma.sync    ", "bf16 mma, no pipe", "bf16 WMMA        ", "f32 kernels      ",
                                   "bf16 mma, masked ", "bf16 mma, 1 mtile", "bf16 mma, 1 block a kv head (no split)",
                                   "bf16 mma, blocks in order" };
    for (int kind = 0; kind < 8; kind++) { /* the register-tiled kernels (with and without the cp.async pipelines),
                                            * the WMMA ones (A/B), the f32 ones, the register-tiled ones with every
                                            * tile masked (VERLC_CUDA_ATTN_WHOLE=0), the forward with one m-tile a
                                            * warp (VERLC_CUDA_ATTN_M2=0), dK/dV with a GQA group's heads in one
                                            * block (VERLC_CUDA_ATTN_SPLIT=1), the blocks in (sequence, row) order
                                            * (VERLC_CUDA_ATTN_ORDER=0) */
        setenv("VERLC_CUDA_ATTN_M2", kind == 5 ? "0" : "1", 1);
        setenv("VERLC_CUDA_ATTN_F32", kind == 3 ? "1" : "0", 1);
        setenv("VERLC_CUDA_ATTN_MMA", kind == 2 ? "0" : "1", 1);
        setenv("VERLC_CUDA_ATTN_PIPE", kind == 1 ? "0" : "1", 1);
        setenv("VERLC_CUDA_ATTN_WHOLE", kind == 4 ? "0" : "1", 1);
        if (kind == 6) setenv("VERLC_CUDA_ATTN_SPLIT", "1", 1);
        else unsetenv("VERLC_CUDA_ATTN_SPLIT");
        setenv("VERLC_CUDA_ATTN_ORDER", kind == 7 ? "0" : "1", 1);
        G->attn_fwd(o, lse, q, &d); /* warm-up */
        G->attn_bwd(dq, dout, o, lse, q, &d);
        vc_cuda_sync();
        double t0 = vc_now();
        G->attn_fwd(o, lse, q, &d);
        vc_cuda_sync();
        double t1 = vc_now();
        G->attn_bwd(dq, dout, o, lse, q, &d);
        vc_cuda_sync();
        double t2 = vc_now();
        printf("timing: %s 16 x %d causal, heads %d/%d hd %d: fwd %.2f ms (%.1f TFLOP/s), bwd %.2f ms "
               "(%.1f TFLOP/s)\n", kname[kind], T, nh, nkv, hd, (t1 - t0) * 1e3,
               fl / (t1 - t0) / 1e12, (t2 - t1) * 1e3, 2.5 * fl / (t2 - t1) / 1e12);
    }
    unsetenv("VERLC_CUDA_ATTN_F32");
    unsetenv("VERLC_CUDA_ATTN_MMA");
    unsetenv("VERLC_CUDA_ATTN_PIPE");
    unsetenv("VERLC_CUDA_ATTN_WHOLE");
    unsetenv("VERLC_CUDA_ATTN_M2");
    unsetenv("VERLC_CUDA_ATTN_SPLIT");
    unsetenv("VERLC_CUDA_ATTN_ORDER");
    check_sticky("timing");
    release_all();
}

int main(int argc, char **argv) {
    if (gpu_skip()) return 0;
    const int quick = argc > 1 && !strcmp(argv[1], "quick");
    C = vc_backend_cpu();
    G = vc_backend_cuda();
    vc_set_matmul_precision(VC_PREC_BF16);
    static const bcase cases[] = {
        { "GQA 14/2 hd 64, packed prefill", 14, 2, 64, 1, 0, 0, 4, { 37, 128, 5, 200 }, { 37, 128, 5, 200 }, 0,
          1e-2, 2e-4, 2e-2 },
        { "GQA 12/2 hd 128, fused kv rows", 12, 2, 128, 1, 0, 0, 3, { 100, 64, 65 }, { 100, 64, 65 }, 1, 1e-2, 2e-4,
          2e-2 },
        { "MHA 8/8 hd 128, window 32, softcap 30", 8, 8, 128, 1, 32, 30.0f, 3, { 100, 64, 300 }, { 100, 64, 300 }, 0,
          1e-2, 2e-4, 2e-2 },
        { "MQA 4/1 hd 64, chunked prefill", 4, 1, 64, 1, 0, 0, 3, { 20, 1, 70 }, { 150, 33, 70 }, 0, 1e-2, 2e-4,
          2e-2 },
        { "non-causal 2/1 hd 64, window 16, softcap 20", 2, 1, 64, 0, 16, 20.0f, 2, { 40, 77 }, { 40, 77 }, 1, 1e-2,
          2e-4, 2e-2 },
        { "GQA 16/2 hd 128, 512 tokens x 3", 16, 2, 128, 1, 0, 0, 3, { 512, 511, 130 }, { 512, 511, 130 }, 0, 1e-2,
          2e-4, 2e-2 },
        { "MHA 4/4 hd 80 (Phi-2), packed", 4, 4, 80, 1, 0, 0, 2, { 90, 31 }, { 90, 31 }, 0, 1e-2, 2e-4, 2e-2 },
        { "GQA 6/2 hd 96 (Phi-3), window 24", 6, 2, 96, 1, 24, 0, 2, { 70, 17 }, { 70, 17 }, 0, 1e-2, 2e-4, 2e-2 },
        { "GQA 4/2 hd 256 (Gemma 2), softcap 50", 4, 2, 256, 1, 0, 50.0f, 2, { 80, 33 }, { 80, 33 }, 0, 1e-2, 2e-4,
          2e-2 },
        { "MLA-like 4/4 dims 192/128 (DeepSeek-V2/V3)", 4, 4, 192, 1, 0, 0, 2, { 100, 20 }, { 100, 20 }, 0, 1e-2, 2e-4,
          2e-2, 128 },
        /* not eligible (hd 72): the f32 kernels, f32 tolerances */
        { "f32 fallback: GQA 6/2 hd 72", 6, 2, 72, 1, 0, 0, 2, { 90, 31 }, { 90, 31 }, 0, 1e-4, 1e-4, 1e-4 },
        { "ALiBi 6/2 hd 64, chunked prefill", 6, 2, 64, 1, 0, 0, 2, { 30, 70 }, { 130, 70 }, 0, 1e-2, 2e-4, 2e-2, 0,
          1 },
        { "sinks GQA 8/2 hd 64 (gpt-oss), window 32", 8, 2, 64, 1, 32, 0, 2, { 90, 40 }, { 90, 40 }, 0, 1e-2, 2e-4,
          2e-2, 0, 0, 1 },
        { "chunks of 48 (Llama 4) GQA 8/2 hd 128", 8, 2, 128, 1, 0, 0, 2, { 130, 40 }, { 130, 40 }, 0, 1e-2, 2e-4, 2e-2,
          0, 0, 0, 48 },
        { "selected keys (DSA), MLA dims 192/128, chunked prefill", 4, 4, 192, 1, 0, 0, 2, { 70, 20 }, { 70, 150 }, 0,
          1e-2, 2e-4, 2e-2, 128, 0, 0, 0, 1 },
        { "selected keys (DSA), GQA 8/2 hd 128, softcap 30", 8, 2, 128, 1, 0, 30.0f, 2, { 100, 64 }, { 100, 64 }, 0, 1e-2,
          2e-4, 2e-2, 0, 0, 0, 0, 1 },
        /* the second query tile sees the first key tile whole: the forward's, dQ's and dK/dV's unmasked tiles */
        { "MQA 2/1 hd 64, whole tiles", 2, 1, 64, 1, 0, 0, 1, { 128 }, { 128 }, 0, 1e-2, 2e-4, 2e-2 },
    };
    /* quick (the emulator's CI pass): the small cases, register-tiled kernels (heads 64 / 128: MQA, non-causal
     * window, sinks, chunks, whole tiles) and the WMMA ones they leave (chunked dK/dV, heads 192 / 256 in the full
     * run) */
    static const int small[] = { 3, 4, 12, 13, 16 };
    const size_t n = quick ? sizeof small / sizeof small[0] : sizeof cases / sizeof cases[0];
    for (size_t i = 0; i < n; i++) bf16_case(&cases[quick ? small[i] : (int)i]);
    /* the WMMA kernels where the register-tiled ones would run (VERLC_CUDA_ATTN_MMA=0, the A/B switch) */
    setenv("VERLC_CUDA_ATTN_MMA", "0", 1);
    printf("VERLC_CUDA_ATTN_MMA=0 (the WMMA kernels):\n");
    bf16_case(&cases[3]);
    if (!quick) bf16_case(&cases[1]);
    unsetenv("VERLC_CUDA_ATTN_MMA");
    if (!quick && !timing_skipped("bf16 attention")) {
        timing(12, 2, 128, 1024); /* Qwen2.5-1.5B */
        timing(14, 2, 64, 1024);  /* Qwen2.5-0.5B */
        timing(14, 2, 64, 512);   /* Qwen2.5-0.5B, bench train's 16 x 512 */
    }
    vc_set_matmul_precision(VC_PREC_F32);
    return vc_test_done();
}
