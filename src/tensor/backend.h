/* The backend op table: every kernel the op front-ends (src/tensor/ops_*.c) need, as plain pointer
 * functions. The CPU backend fills it in src/backend/cpu/; a CUDA backend fills the same table. */
#ifndef VC_BACKEND_H
#define VC_BACKEND_H
#include <stdint.h>

enum vc_act { VC_ACT_SILU, VC_ACT_GELU_TANH, VC_ACT_GELU_ERF, VC_ACT_RELU, VC_ACT_SIGMOID, VC_ACT_NONE };

/* Attention over packed sequences. Sequence s has q rows [q_start[s], q_start[s+1]) of the packed q
 * and kv_len[s] keys at k_seq[s] / v_seq[s] (row strides k_stride / v_stride floats between tokens,
 * head h of a row at +h*hd). Query i of sequence s sits at position kv_len[s] - q_len + i. */
typedef struct vc_attn_desc {
    int n_seq;
    const int64_t *q_start;   /* [n_seq + 1] */
    const int64_t *kv_len;    /* [n_seq] */
    const float *const *k_seq, *const *v_seq;
    float *const *dk_seq, *const *dv_seq; /* backward only */
    int64_t k_stride, v_stride;
    int n_head, n_kv_head, head_dim, v_head_dim;
    float scale;   /* multiplies q.k */
    float softcap; /* 0: none; else s = softcap * tanh(s / softcap) */
    int window;    /* 0: none; else key j visible from query position p when p - j < window */
    int causal;
    /* paged keys/values (page_tokens > 0; forward only): key j of sequence s is at
     * k_pages[s][j / page_tokens] + (j % page_tokens) * k_stride (values likewise); k_seq/v_seq unused.
     * Each query row is then computed on its own, so its output does not depend on the other rows. */
    const float *const *const *k_pages, *const *const *v_pages;
    int64_t page_tokens;
} vc_attn_desc;

typedef struct vc_route_desc {
    int n_expert, top_k;
    int sigmoid;          /* scores: sigmoid (DeepSeek-V3) instead of softmax */
    int norm_topk;        /* renormalise the selected weights to sum to one */
    float scaling;        /* routed_scaling_factor */
    int n_group, topk_group; /* group-limited routing (DeepSeek); n_group <= 1: off */
    int group_top2_sum;   /* group score: sum of top-2 (V3) instead of max (V2) */
    const float *bias;    /* e_score_correction_bias: affects selection only */
} vc_route_desc;

typedef struct vc_backend {
    const char *name;
    /* C[M,N] = alpha * op(A) op(B) + beta * C, row-major */
    void (*gemm)(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                 const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
    void (*rmsnorm_fwd)(float *y, float *rstd, const float *x, const float *w, int64_t rows, int64_t cols,
                        float eps, float w_offset);
    void (*rmsnorm_bwd)(float *dx, float *dw, const float *dy, const float *x, const float *w, const float *rstd,
                        int64_t rows, int64_t cols, float w_offset);
    void (*layernorm_fwd)(float *y, float *mean, float *rstd, const float *x, const float *w, const float *b,
                          int64_t rows, int64_t cols, float eps);
    void (*layernorm_bwd)(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                          const float *mean, const float *rstd, int64_t rows, int64_t cols);
    /* rotate pairs of x[T, nh, hd] in place (inverse: sign = -1) with cos/sin tables [T, rot/2] */
    void (*rope)(float *x, const float *cos, const float *sin, int64_t T, int nh, int hd, int rot, int interleaved,
                 int sign);
    void (*attn_fwd)(float *o, float *lse, const float *q, const vc_attn_desc *d);
    void (*attn_bwd)(float *dq, const float *dout, const float *o, const float *lse, const float *q,
                     const vc_attn_desc *d);
    void (*act_fwd)(float *y, const float *x, int64_t n, int kind);
    void (*act_bwd)(float *dx, const float *dy, const float *x, int64_t n, int kind); /* dx += */
    void (*act_mul_fwd)(float *y, const float *g, const float *u, int64_t n, int kind);
    void (*act_mul_bwd)(float *dg, float *du, const float *dy, const float *g, const float *u, int64_t n, int kind);
    /* fused LM head over token chunks: logp[t] = log softmax(z_t)[target[t]], ent[t] = entropy(z_t),
     * z_t = softcap(h_t W^T + b); lse saved for backward. target < 0: logp is 0. */
    void (*lm_head_fwd)(float *logp, float *ent, float *lse, const float *h, const float *W, const float *b,
                        const int32_t *target, int64_t T, int64_t H, int64_t V, float softcap);
    void (*lm_head_bwd)(float *dh, float *dW, float *db, const float *dlogp, const float *dent, const float *lse,
                        const float *ent, const float *h, const float *W, const float *b, const int32_t *target,
                        int64_t T, int64_t H, int64_t V, float softcap);
    /* top-k routing: weights[T,k] and expert ids[T,k] from router logits[T,E] */
    void (*route_fwd)(float *w, int32_t *idx, const float *logits, int64_t T, const vc_route_desc *d);
    void (*route_bwd)(float *dlogits, const float *dw, const float *logits, const int32_t *idx, int64_t T,
                      const vc_route_desc *d);
} vc_backend;

const vc_backend *vc_backend_cpu(void);
const vc_backend *vc_be(void); /* the active backend */
void vc_set_backend(const vc_backend *b); /* NULL: the CPU backend */
#endif
