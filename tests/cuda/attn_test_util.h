/* Helpers of the CUDA attention tests (test_cuda_attn.c, test_cuda_attn_bf16.c): the per-sequence K / V
 * pointers of one CPU reference run and two GPU runs (the second for the run-to-run bits check), the
 * descriptors that point at them, and the dk / dv determinism line. Include after cuda_test_util.h. */
#ifndef VC_ATTN_TEST_UTIL_H
#define VC_ATTN_TEST_UTIL_H
#include "cuda_test_util.h"

#define ATTN_MAX_SEQ 6

typedef struct {
    int64_t qs[ATTN_MAX_SEQ + 1], kvl[ATTN_MAX_SEQ];
    const float *ks[ATTN_MAX_SEQ], *vs[ATTN_MAX_SEQ], *gks[ATTN_MAX_SEQ], *gvs[ATTN_MAX_SEQ];
    float *dks[ATTN_MAX_SEQ], *dvs[ATTN_MAX_SEQ], *gdks[ATTN_MAX_SEQ], *gdvs[ATTN_MAX_SEQ];
    float *gdks2[ATTN_MAX_SEQ], *gdvs2[ATTN_MAX_SEQ];
    vc_attn_desc d, gd, gd2; /* CPU run; GPU runs into gdks / gdvs and into gdks2 / gdvs2 */
} attn_seqs;

/* sequence s: K at kv and V at kv + voff; likewise for the device copy gkv and the gradient blocks
 * (host dkv, device g1 and g2) */
static inline void attn_seq_bind(attn_seqs *p, int s, const float *kv, const float *gkv, float *dkv, float *g1,
                                 float *g2, int64_t voff) {
    p->ks[s] = kv;
    p->vs[s] = kv + voff;
    p->gks[s] = gkv;
    p->gvs[s] = gkv + voff;
    p->dks[s] = dkv;
    p->dvs[s] = dkv + voff;
    p->gdks[s] = g1;
    p->gdvs[s] = g1 + voff;
    p->gdks2[s] = g2;
    p->gdvs2[s] = g2 + voff;
}

/* p->d for n sequences of p->qs / p->kvl (head shapes and masking from the arguments), and the GPU
 * descriptors p->gd and p->gd2: the same with the device pointers */
static inline void attn_descs(attn_seqs *p, int n, int64_t k_stride, int64_t v_stride, int nh, int nkv, int hd,
                              int dv, float cap, int window, int causal) {
    vc_attn_desc d = { .n_seq = n, .q_start = p->qs, .kv_len = p->kvl, .k_seq = p->ks, .v_seq = p->vs,
                       .dk_seq = p->dks, .dv_seq = p->dvs, .k_stride = k_stride, .v_stride = v_stride,
                       .n_head = nh, .n_kv_head = nkv, .head_dim = hd, .v_head_dim = dv,
                       .scale = 1.0f / sqrtf((float)hd), .softcap = cap, .window = window, .causal = causal };
    p->d = p->gd = p->gd2 = d;
    p->gd.k_seq = p->gd2.k_seq = p->gks;
    p->gd.v_seq = p->gd2.v_seq = p->gvs;
    p->gd.dk_seq = p->gdks;
    p->gd.dv_seq = p->gdvs;
    p->gd2.dk_seq = p->gdks2;
    p->gd2.dv_seq = p->gdvs2;
}

/* DeepSeek Sparse Attention: a random selection [Tq, words] of about half of each query row's keys, its own among
 * them, for the first nseq sequences of p, set on the CPU descriptor p->d (host copy) and the GPU ones (device copy) */
static inline void attn_random_sel(attn_seqs *p, int nseq) {
    int64_t most = 0;
    for (int s = 0; s < nseq; s++) most = p->kvl[s] > most ? p->kvl[s] : most;
    int64_t words = (most + 31) / 32;
    size_t n = (size_t)(p->qs[nseq] * words);
    uint32_t *h = (uint32_t *)hbuf(n);
    for (int s = 0; s < nseq; s++)
        for (int64_t r = p->qs[s]; r < p->qs[s + 1]; r++) {
            int64_t pos = p->kvl[s] - (p->qs[s + 1] - r);
            for (int64_t j = 0; j < p->kvl[s]; j++)
                if (j == pos || urand() > 0) h[r * words + j / 32] |= 1u << (j % 32);
        }
    p->d.sel = h;
    p->gd.sel = p->gd2.sel = (const uint32_t *)dcopy(h, n * 4);
    p->d.sel_words = p->gd.sel_words = p->gd2.sel_words = words;
}

/* the run-to-run bits line and check of the dk / dv of all sequences */
static inline void attn_dkdv_same(const char *name, int same) {
    printf("  %-44s %s\n", "bwd dk, dv", same ? "identical bits run to run" : "DIFFERENT bits  FAIL");
    CHECK_MSG(same, "%s: dk/dv not deterministic", name);
}
#endif
