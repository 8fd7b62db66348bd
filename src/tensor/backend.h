/* The backend op table: every kernel the op front-ends (src/tensor/ops_*.c) need, as plain pointer
 * functions. The CPU backend fills it in src/backend/cpu/; a CUDA backend fills the same table. */
#ifndef VC_BACKEND_H
#define VC_BACKEND_H
#include "verlc/core.h"
#include <stddef.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* VC_ACT_OAI_GLU: gpt-oss's gated unit (backend/act_math.h vc_gate_f): clamped gate and up, g sigmoid(1.702 g) (u + 1) */
/* VC_ACT_SOFTPLUS: PyTorch's softplus (x past 20), Mamba 2's time step; VC_ACT_QUICK_GELU: x sigmoid(1.702 x) (CLIP's,
 * Qwen2-VL's vision MLP) */
#define VC_ACT_WRITE 0x100 /* act_mul_bwd: write the gradients instead of adding to them */
enum vc_act { VC_ACT_SILU, VC_ACT_GELU_TANH, VC_ACT_GELU_ERF, VC_ACT_RELU, VC_ACT_SIGMOID, VC_ACT_RELU2, VC_ACT_OAI_GLU,
              VC_ACT_SOFTPLUS, VC_ACT_QUICK_GELU, VC_ACT_NONE };

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
    int chunk;     /* 0: none; else key j visible from p only in p's chunk: j >= p - p % chunk (Llama 4) */
    int causal;
    int alibi;     /* 1: score += slope(h) (j - p) with ALiBi's slopes for n_head heads (vc_alibi_slope); 2: += bf16(bf16(
                    * slope(h)) j), the table transformers builds for Falcon-RW (a row's own term is a constant) */
    float alibi_scale; /* 0: 1; else the slopes times this (Falcon-RW adds ALiBi before the 1 / sqrt(d) scaling) */
    /* paged keys/values (page_tokens > 0; forward only): key j of sequence s is at
     * k_pages[s][j / page_tokens] + (j % page_tokens) * k_stride (values likewise); k_seq/v_seq unused.
     * Each query row is then computed on its own, so its output does not depend on the other rows. */
    const float *const *const *k_pages, *const *const *v_pages;
    int64_t page_tokens;
    /* paged, optional: backend pointers at or below every key (value) page pointer of every sequence, the
     * same from call to call (the rollout engine's pool base for the layer). The CUDA backend then
     * addresses pages from them, so its kernels' arguments stay the same from step to step. */
    const float *k_base, *v_base;
    /* paged, with k_base/v_base: 1 when the sequences, lengths and pages are those of the previous paged
     * call relative to its bases (the next layer of the same forward): what the backend derived from them
     * may be reused */
    int same_pages;
    /* paged: the pages hold bf16 values (uint16_t; page pointers, bases and strides count them), read as
     * f32 (the rollout engine's KV pool in bf16 precision, whose keys and values are bf16 already) */
    int kv_bf16;
    /* vc_op_attention only (backends read k_seq / kv_len): when not NULL, sequence s's keys and values are
     * rows [kv_start[s], kv_start[s] + kv_len[s]) of k and v, which may have more rows than q (shared
     * prompt prefixes gathered in front of each sequence's own rows); NULL: the rows of q */
    const int64_t *kv_start;
    /* attention sinks (gpt-oss; NULL: none): [n_head] logits in backend memory, each counted in every row's
     * softmax of its head as one more key with a zero value (o and lse as if it were there) */
    const float *sinks;
    /* DeepSeek Sparse Attention's selection (NULL: none; backend memory, from dsa_select): query row i of q (packed)
     * sees key j of its sequence only where bit j % 32 of word sel[i * sel_words + j / 32] is set, on top of the
     * causal mask, in every forward (paged too) and backward */
    const uint32_t *sel;
    int64_t sel_words;
    /* set by the CUDA backend's paged prefill only (0 elsewhere): a forward over the sequences with at least this
     * many query rows; the other sequences' output rows are left as they are */
    int min_q_rows;
    /* paged, bf16 matmuls: the output's bf16 rounding is written beside it and held for the GEMM that reads it (as
     * operand_hold(o, rows, n_head * v_head_dim, 1) would make it; the caller releases it with operand_hold(o, .., 0)
     * after that GEMM); backends without holds ignore it */
    int hold_out;
} vc_attn_desc;

/* ALiBi's slope of head h of n (Press et al. 2022, as BLOOM and Baichuan-13B compute it): 2^(-8 (h+1) / p)
 * for the largest power of two p <= n, then every other slope of 2p heads for the rest. */
static inline float vc_alibi_slope(int h, int n) {
    int p = 1;
    while (p * 2 <= n) p *= 2;
    return h < p ? exp2f(-8.0f * (float)(h + 1) / (float)p) : exp2f(-4.0f * (float)(2 * (h - p) + 1) / (float)p);
}

/* round to bf16 and back (nearest even), as vc_f32_to_bf16 */
static inline float vc_round_bf16_f(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) <= 0x7f800000u) u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&f, &u, 4);
    return f;
}

/* ALiBi's bias of key j for the query at position p in head h (d->alibi set) */
static inline float vc_alibi_bias(const vc_attn_desc *d, int h, int64_t p, int64_t j) {
    float slope = vc_alibi_slope(h, d->n_head), s = d->alibi_scale ? d->alibi_scale : 1.0f;
    if (d->alibi == 2) return vc_round_bf16_f(vc_round_bf16_f(slope) * (float)j) * s;
    return slope * s * (float)(j - p);
}

typedef struct vc_route_desc {
    int n_expert, top_k;
    int sigmoid;          /* scores: sigmoid (DeepSeek-V3) instead of softmax */
    int norm_topk;        /* renormalise the selected weights to sum to one */
    float norm_min;       /* > 0: the renormalising sum clamped from below at it (ERNIE 4.5's moe_norm_min) */
    float scaling;        /* routed_scaling_factor */
    int n_group, topk_group; /* group-limited routing (DeepSeek); n_group <= 1: off */
    int group_top2_sum;   /* group score: sum of top-2 (V3) instead of max (V2) */
    const float *bias;    /* e_score_correction_bias: affects selection only */
    int bias_logits;      /* the choice is logits + bias instead of scores + bias (Kolibri) */
    int sparsemixer;      /* PhiMoE's top-2 sparsemixer (backend/route_math.h) with jitter_eps; the fields above unused */
    float jitter_eps;
    int replay;           /* route_fwd: idx holds the experts already (router replay): the weights only */
    /* vc_op_moe only (host memory, [T, K]; NULL: none): the experts to route to (verl's router_replay), and
     * where to write the experts chosen */
    const int32_t *replay_idx;
    int32_t *record_idx;
    /* vc_op_moe only: the weights scale each expert's input instead of its output, y = sum_k expert_k(w_tk x_t)
     * (Llama 4) */
    int scale_input;
} vc_route_desc;

/* The fused LM head's shape: T tokens of H hidden values, V vocabulary rows; logits are
 * softcap(h W^T + b) * scale (softcap <= 0: none; scale is 1 / the sampling temperature, as verl divides the
 * actor's logits by rollout.temperature). */
typedef struct vc_head_desc {
    int64_t T, H, V;
    float softcap, scale;
    /* backend memory of lm_head_keep's bytes (NULL: none): the forward leaves its logits there, the backward reads
     * them instead of computing them again (the same values) and may overwrite them */
    void *keep;
} vc_head_desc;

/* q, k and v of one attention layer from one input (vc_backend.qkv_rope): q [M, n_head * head_dim], k [M, n_kv_head *
 * head_dim], v [M, n_kv_head * v_head_dim]; q's and k's rope over their first rot dims (0: none; interleaved pairs or
 * halves) with cos / sin [M, rot / 2] in backend memory. kv_dst (or NULL): a bf16 page pool's layer base where each
 * row's key and value go as scatter_kv_bf16 puts them (at kv_off[r], the value kw = n_kv_head * head_dim after) */
typedef struct vc_qkv_desc {
    int n_head, n_kv_head, head_dim, v_head_dim, rot, interleaved;
    const float *cos, *sin;
    void *kv_dst;
    const int64_t *kv_off;
} vc_qkv_desc;

/* One logits row to sample from (host memory). Knobs as in vc_sampling: temperature > 0 (ignored when
 * greedy); top_k <= 0 or >= V: off; top_p >= 1: off; min_p == 0: off. The row's draws are outputs
 * [first, first + n), each with its uniform u[first + i] in [0, 1) (n > 1: several samples of one row). */
typedef struct vc_sample_row {
    float temperature, top_p, min_p;
    int32_t top_k, greedy;
    int32_t first, n;
} vc_sample_row;

/* Gated DeltaNet's recurrence (Qwen3-Next, Qwen3.5) over packed sequences, per value head h (reading q/k head
 * h / (n_v_head / n_k_head)) with state S [dk, dv] from zero (or *state):
 *   S = exp(g_t) S;  S += k_t (beta_t (v_t - S^T k_t))^T;  o_t = S^T (scale q_t)
 * q, k [T, n_k_head, dk], v and o [T, n_v_head, dv], g (log decay) and beta [T, n_v_head] (g [T, n_v_head, dk] with
 * gk), all contiguous. */
typedef struct vc_gdn_desc {
    int n_seq;
    const int64_t *cu;      /* [n_seq + 1] (host): sequence s is rows [cu[s], cu[s+1]) */
    int n_k_head, n_v_head, dk, dv;
    float scale;
    /* 1: no delta rule, S = exp(g_t) S + k_t (beta_t v_t)^T (Mamba 2's SSD: k = B, v = x, q = C, beta = dt) */
    int no_delta;
    /* 1: the decay per key channel (Kimi Delta Attention): g is [T, n_v_head, dk] and S = diag(exp(g_t)) S */
    int gk;
    /* forward only (host [n_seq] of backend [n_v_head, dk, dv] pointers; NULL array or element: a zero state, not
     * kept): the state each sequence starts from, overwritten with its state after its last row */
    float *const *state;
    /* training: the state before rows cu[s] + i * ckpt (i >= 0) of every sequence is kept in `saved`, sequence
     * after sequence ([vc_gdn_saved(d)] states of n_v_head * dk * dv floats), for the backward's recomputation */
    int64_t ckpt;
    /* forward only, optional: cu, the kept-state bases and the state pointers already in backend memory
     * (vc_seq_tabs_fill's words), so a CUDA graph can capture the call; NULL: the backend copies them itself */
    const int64_t *dev_tabs;
    /* calls without states (ckpt > 0), optional (host [n_seq]): sequence s starts, instead of from zero, from the
     * state of the earlier sequence from[s] of the call (one with from -1) at its tap row vc_gdn_tap(); the backward
     * passes the gradient of that start back into it (a shared prompt's state, computed once for every response:
     * the same bits as each running the prompt's rows from its tap row, in either form of the recurrence) */
    const int32_t *from;
} vc_gdn_desc;

/* the row of a sequence of L rows whose state other sequences may start from: its last multiple of ckpt (the start
 * of its last partial chunk, or its end) */
static inline int64_t vc_gdn_tap(int64_t L, int64_t ckpt) { return L / ckpt * ckpt; }

/* the sequence tables of a linear-attention call as 3 n + 2 int64 words: cu[n + 1], base[n + 1] (each sequence's
 * first kept state when ckpt > 0, else zeros), then n state pointers (NULL where a sequence has none) */
static inline void vc_seq_tabs_fill(int64_t *w, int n, const int64_t *cu, int64_t ckpt, float *const *state) {
    int64_t *base = w + n + 1, *ptr = base + n + 1;
    for (int s = 0; s <= n; s++) w[s] = cu[s];
    base[0] = 0;
    for (int s = 0; s < n; s++) {
        base[s + 1] = base[s] + (ckpt > 0 ? (cu[s + 1] - cu[s] + ckpt - 1) / ckpt : 0);
        float *p = state ? state[s] : NULL;
        memcpy(&ptr[s], &p, sizeof p);
    }
}

/* the states gdn_fwd keeps for the backward */
static inline int64_t vc_gdn_saved(const vc_gdn_desc *d) {
    int64_t n = 0;
    for (int s = 0; s < d->n_seq; s++) n += (d->cu[s + 1] - d->cu[s] + d->ckpt - 1) / d->ckpt;
    return n;
}

/* The chunked form runs where no rollout state is carried (training's forward and backward, the log-prob passes), with
 * one decay per head or per key channel: a sequence's chunks start at its rows 0, ckpt, 2 ckpt, ..., whatever batch
 * it is in, so its outputs are the same bits in any batch. Rollout (a state per sequence) keeps the recurrence. */
static inline int vc_gdn_chunked(const vc_gdn_desc *d) { return !d->state && d->ckpt > 0; }

/* A depthwise causal conv1d over packed sequences (Gated DeltaNet, Mamba, LFM2): x and y [T, C], w [C, K],
 * y[t, c] = sum_j w[c, j] x[t - K + 1 + j, c] (j ascending) within the row's sequence, rows before its start
 * taken from its state; no activation. */
typedef struct vc_conv_desc {
    int n_seq;
    const int64_t *cu;   /* [n_seq + 1] (host) */
    int64_t C;
    int K;
    /* forward only, as vc_gdn_desc's: [K - 1, C] rows before the sequence (oldest first), overwritten with the
     * last K - 1 rows of (state, x) */
    float *const *state;
    const int64_t *dev_tabs; /* forward only, optional, as vc_gdn_desc's (ckpt 0) */
} vc_conv_desc;

/* Mamba 1's selective scan over packed sequences, per channel i of I with state h [N] from zero (or *state):
 *   h = exp(-exp(A_log[i]) dt[t, i]) h + dt[t, i] x[t, i] B[t];  y[t, i] = C[t] . h
 * x, dt and y [T, I], A_log [I, N], B and C [T, N] (shared by the channels), all contiguous. */
typedef struct vc_ssm_desc {
    int n_seq;
    const int64_t *cu; /* [n_seq + 1] (host) */
    int64_t I;
    int N;
    float *const *state; /* forward only, as vc_gdn_desc's: [I, N] per sequence */
    int64_t ckpt;        /* training: the state before rows cu[s] + j ckpt kept in `saved`, sequence after sequence */
    const int64_t *dev_tabs; /* forward only, optional, as vc_gdn_desc's */
    /* calls without states, optional (host [n_seq]): sequence s starts, instead of from zero, from the final state of
     * the earlier sequence from[s] of the call (one with from -1); the backward passes the gradient of that start back
     * into it (a shared prompt's state, computed once for every response: the same bits as each running the prompt) */
    const int32_t *from;
} vc_ssm_desc;

/* the states ssm_fwd keeps for the backward (each I N floats) */
static inline int64_t vc_ssm_saved(const vc_ssm_desc *d) {
    int64_t n = 0;
    for (int s = 0; s < d->n_seq; s++) n += (d->cu[s + 1] - d->cu[s] + d->ckpt - 1) / d->ckpt;
    return n;
}

struct vc_optim_param;
struct vc_adamw_config;

/* Memory model. Every float / int32 pointer an entry takes is BACKEND memory (from `alloc`), except
 * where a comment says "host": the descriptor structs (vc_attn_desc, vc_route_desc) and their arrays
 * q_start, kv_len, k_seq, v_seq, dk_seq, dv_seq, k_pages, v_pages are host memory whose pointer
 * elements point into backend memory. For the CPU backend backend memory is host memory
 * (host_visible = 1); for CUDA it is device memory; the "sim" backend (src/backend/sim) hands out host
 * memory behind pointers that crash when the host dereferences them, so CPU tests prove that nothing
 * outside the backend touches backend memory.
 * Errors inside void entries are sticky: `sync` returns the first one (naming the op) and clears
 * nothing; the CPU backend never fails after allocation. Accumulating entries say "+=". */
typedef struct vc_backend {
    const char *name;
    int host_visible;                      /* 1: backend memory may be read and written by the host */
    int dev_seq_tabs; /* 1: linear-attention forwards pass their sequence tables in backend memory (dev_tabs) */
    /* ---- memory ---- */
    void *(*alloc)(size_t bytes);          /* NULL (and vc_fail VC_ERR_NOMEM naming the size) on failure */
    void (*free)(void *p);                 /* NULL is fine */
    void (*h2d)(void *dst, const void *src, size_t bytes); /* host src may be reused on return */
    void (*d2h)(void *dst, const void *src, size_t bytes); /* waits: host dst holds the data on return */
    void (*d2d)(void *dst, const void *src, size_t bytes);
    void (*zero)(void *dst, size_t bytes);
    vc_status (*sync)(void);               /* waits for queued work; the first error since start, or VC_OK */
    /* C[M,N] = alpha * op(A) op(B) + beta * C, row-major */
    void (*gemm)(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                 const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
    /* gemm where A (a16) and/or B (b16) hold bf16 values (uint16_t; lda / ldb count them); with bf16
     * matmuls the same bits as gemm on the f32 values they stand for */
    void (*gemm_b16)(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const void *A, int a16,
                     int64_t lda, const void *B, int b16, int64_t ldb, float beta, float *C, int64_t ldc);
    void (*rmsnorm_fwd)(float *y, float *rstd, const float *x, const float *w, int64_t rows, int64_t cols,
                        float eps, float w_offset);
    /* rmsnorm_fwd, and y held for the GEMMs that read it as operand_hold(y, rows, cols, 1) would (its bf16 rounding
     * written by the norm itself); released by operand_hold(y, rows, cols, 0). NULL: rmsnorm_fwd, nothing held */
    void (*rmsnorm_fwd_held)(float *y, float *rstd, const float *x, const float *w, int64_t rows, int64_t cols,
                             float eps, float w_offset);
    /* s = x + a (as add) and y = RMSNorm(s) held (as rmsnorm_fwd_held) in one pass: a residual sum and the next norm.
     * NULL: add, then rmsnorm_fwd_held */
    void (*add_rmsnorm_held)(float *s, float *y, float *rstd, const float *x, const float *a, const float *w, int64_t rows,
                             int64_t cols, float eps, float w_offset);
    void (*rmsnorm_bwd)(float *dx, float *dw, const float *dy, const float *x, const float *w, const float *rstd,
                        int64_t rows, int64_t cols, float w_offset);
    void (*layernorm_fwd)(float *y, float *mean, float *rstd, const float *x, const float *w, const float *b,
                          int64_t rows, int64_t cols, float eps);
    void (*layernorm_bwd)(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                          const float *mean, const float *rstd, int64_t rows, int64_t cols);
    /* rotate pairs of x[T, nh, hd] in place (inverse: sign = -1) with cos/sin tables [T, rot/2] */
    void (*rope)(float *x, const float *cos, const float *sin, int64_t T, int nh, int hd, int rot, int interleaved,
                 int sign);
    /* q = x Wq^T + bq, k = x Wk^T + bk, v = x Wv^T + bv (x [M, K]; biases may be NULL), then q's and k's rope, with one
     * GEMM where the three weights' bf16 copies lie together and one pass that splits its columns, adds the biases and
     * rotates (bf16 matmuls). 0 with nothing done where it cannot (the caller projects and rotates as usual), else 1.
     * NULL: never */
    int (*qkv_rope)(int64_t M, int64_t K, const float *x, const float *Wq, const float *Wk, const float *Wv,
                    const float *bq, const float *bk, const float *bv, float *q, float *k, float *v,
                    const vc_qkv_desc *d);
    /* qkv_rope's backward, with dq, dk, dv the gradients of its outputs after the rope (each may be NULL: zeros): dx
     * ([M, K]) += , dWq, dWk, dWv += , dbq, dbk, dbv += (each may be NULL), d's rope as the forward's; one GEMM for dx
     * over the weights' adjacent bf16 copies and one for the weights. 0 (nothing done): not so (the copies apart, f32
     * matmuls). NULL: never */
    int (*qkv_rope_bwd)(int64_t M, int64_t K, const float *x, const float *Wq, const float *Wk, const float *Wv,
                        const float *dq, const float *dk, const float *dv, float *dx, float *dWq, float *dWk, float *dWv,
                        float *dbq, float *dbk, float *dbv, const vc_qkv_desc *d);
    /* rope (sign +1) of q [T, nhq, hd] and k [T, nhk, hd] in one pass, each pair as rope rotates it. NULL: two ropes */
    void (*rope2)(float *q, int nhq, float *k, int nhk, const float *cos, const float *sin, int64_t T, int hd, int rot,
                  int interleaved);
    void (*attn_fwd)(float *o, float *lse, const float *q, const vc_attn_desc *d);
    void (*attn_bwd)(float *dq, const float *dout, const float *o, const float *lse, const float *q,
                     const vc_attn_desc *d);
    /* the sinks' gradient (attn_fwd with d->sinks; T rows of nh heads): dsink[h] -= sum_t exp(sinks[h] -
     * lse[t, h]) (dout[t, h] . o[t, h]), t ascending */
    /* DeepSeek Sparse Attention's indexer (no gradient): with d's keys one head of head_dim (k_seq / k_stride, or
     * k_pages / page_tokens, kv_bf16; kv_len, q_start as for attention, causal), q [rows, n_head, head_dim] and w
     * [rows, n_head], key j's score for query row i is sum_h w[i, h] relu(scale q[i, h] . k_j) (h ascending). Sets
     * row i's words of sel [rows, words] to the bits of its topk best visible keys, ties to the lower j (every
     * visible key where there are no more than topk); words >= ceil(max kv_len / 32). */
    void (*dsa_select)(uint32_t *sel, int64_t words, const float *q, const float *w, int64_t topk,
                       const vc_attn_desc *d);
    void (*attn_sink_bwd)(float *dsink, const float *dout, const float *o, const float *lse, const float *sinks,
                          int64_t T, int nh, int dv);
    /* xIELU (Apertus) with its raw learnable scalars ap, an ([1] each, backend memory): with a_p = softplus(ap),
     * a_n = beta + softplus(an), y = x > 0 ? a_p x^2 + beta x : (expm1(min(x, eps)) - x) a_n + beta x;
     * backward dx += dy y'(x), dap / dan ([1]) += the sums of dy dy/dap, dy dy/dan in a fixed order */
    void (*xielu_fwd)(float *y, const float *x, int64_t n, const float *ap, const float *an, float beta, float eps);
    void (*xielu_bwd)(float *dx, float *dap, float *dan, const float *dy, const float *x, int64_t n, const float *ap,
                      const float *an, float beta, float eps);
    /* Gated DeltaNet (vc_gdn_desc above). fwd: o, and the states for backward in saved (NULL: not kept; then
     * d->ckpt is unused). bwd (no d->state): dq, dk, dv, dg, dbeta += the gradients from dout (a q/k head's from
     * its value heads in ascending order); every output may be NULL. */
    void (*gdn_fwd)(float *o, float *saved, const float *q, const float *k, const float *v, const float *g,
                    const float *beta, const vc_gdn_desc *d);
    void (*gdn_bwd)(float *dq, float *dk, float *dv, float *dg, float *dbeta, const float *dout, const float *saved,
                    const float *q, const float *k, const float *v, const float *g, const float *beta,
                    const vc_gdn_desc *d);
    /* Gated DeltaNet's log decay g[t, c] = -exp(A_log[c / grp]) softplus(a[t, c] + dt_bias[c]) over T rows of nh grp
     * channels (grp 1: per head; Kimi Delta Attention: dk per head); backward da += , ddt_bias ([nh grp]) += sums over
     * t ascending, dA_log ([nh]) += sums over the head's channels ascending of those (each may be NULL) */
    void (*gdn_gate_fwd)(float *g, const float *a, const float *A_log, const float *dt_bias, int64_t T, int nh, int grp);
    void (*gdn_gate_bwd)(float *da, float *dA_log, float *ddt_bias, const float *dg, const float *a, const float *A_log,
                         const float *dt_bias, int64_t T, int nh, int grp);
    /* y[r, c] = x[r, c] w[c / grp] + b[c / grp] over R rows of C (w or b NULL: 1 or 0; grp divides C); backward dx +=
     * dy w, dw / db ([C / grp]) += sums of dy x / dy over the rows (ascending) and the group's columns (each may be
     * NULL). Per-channel scales and biases broadcast over rows: Mamba 2's dt_bias, D skip, gated norm weight */
    void (*affine_cols_fwd)(float *y, const float *x, const float *w, const float *b, int64_t R, int64_t C, int64_t grp);
    void (*affine_cols_bwd)(float *dx, float *dw, float *db, const float *dy, const float *x, const float *w, int64_t R,
                            int64_t C, int64_t grp);
    /* depthwise causal conv1d (vc_conv_desc above); bwd (no d->state): dx, dw += (either may be NULL) */
    /* Mamba 1's selective scan (vc_ssm_desc above). fwd: y, and the states for backward in saved (NULL: not kept).
     * bwd: dx, ddt += ; dA_log += (sequences and rows ascending); dB, dC += sums over the channels in a fixed order;
     * each may be NULL */
    void (*ssm_fwd)(float *y, float *saved, const float *x, const float *dt, const float *A_log, const float *B,
                    const float *C, const vc_ssm_desc *d);
    void (*ssm_bwd)(float *dx, float *ddt, float *dA_log, float *dB, float *dC, const float *dy, const float *saved,
                    const float *x, const float *dt, const float *A_log, const float *B, const float *C,
                    const vc_ssm_desc *d);
    void (*conv1d_fwd)(float *y, const float *x, const float *w, const vc_conv_desc *d);
    void (*conv1d_bwd)(float *dx, float *dw, const float *dy, const float *x, const float *w, const vc_conv_desc *d);
    /* y = x W^T + b (x [M, K], W [N, K], b [N]) with the bias inside the GEMM (cuBLASLt's epilogue); NULL: rows_copy
     * of b into y, then gemm with beta 1 */
    void (*linear_bias)(int64_t M, int64_t N, int64_t K, const float *x, const float *W, const float *b, float *y);
    void (*act_fwd)(float *y, const float *x, int64_t n, int kind);
    void (*act_bwd)(float *dx, const float *dy, const float *x, int64_t n, int kind); /* dx += */
    /* y = act(g) * u over n = rows x cols elements: g and u (and act_mul_bwd's dg, du) rows of cols elements ld
     * apart (the two halves of a fused gate/up projection's rows: ld = 2 cols; ld == cols: one contiguous run),
     * y and dy packed rows x cols */
    void (*act_mul_fwd)(float *y, const float *g, const float *u, int64_t n, int64_t cols, int64_t ld, int kind);
    /* dg += , du += ; with VC_ACT_WRITE or'ed into kind, dg = , du = (0 + the term: the bits of adding to zeros) */
    void (*act_mul_bwd)(float *dg, float *du, const float *dy, const float *g, const float *u, int64_t n, int64_t cols,
                        int64_t ld, int kind);
    /* act_mul_fwd into bf16 storage: y (uint16_t[n]) = bf16(act(g) * u), nearest even (bf16 matmuls: the
     * activation only a GEMM reads, kept in bf16) */
    void (*act_mul_fwd_bf16)(void *y, const float *g, const float *u, int64_t n, int64_t cols, int64_t ld, int kind);
    /* y16 (uint16_t [M, N]) = bf16(x W^T) (x [M, K], W [N, K]; bf16 matmuls: f32 accumulation rounded once, what an
     * autocast linear writes); NULL: gemm into f32, then round_bf16 (the same values) */
    void (*gemm_c16)(int64_t M, int64_t N, int64_t K, const float *x, const float *W, void *y16);
    /* act_mul_fwd and act_mul_bwd with g and u in bf16 storage (uint16_t, rows ld apart; gemm_c16's output): y in
     * bf16 (y16) or f32. NULL: not on this backend (gate and up then stay f32, rounded in place) */
    void (*act_mul16_fwd)(void *y, int y16, const void *g, const void *u, int64_t n, int64_t cols, int64_t ld,
                          int kind);
    void (*act_mul16_bwd)(float *dg, float *du, const float *dy, const void *g, const void *u, int64_t n, int64_t cols,
                          int64_t ld, int kind);
    /* act_mul_bwd (g16 0) or act_mul16_bwd (g16 1) with VC_ACT_WRITE for dgu = [dg | du] (dg = dgu, du = dgu + cols,
     * u = g + cols, ld = 2 cols) whose only readers are GEMMs over its whole rows: 1 when the backend holds dgu
     * [n / cols, ld] as operand_hold(dgu, n / cols, ld, 1) would, the held copy written by this call and dgu itself
     * never (the same values: the bf16 rounding of what act_mul_bwd would write), released by operand_hold(dgu, ..,
     * 0); 0 (nothing done, no error): the caller writes dgu. NULL: never */
    int (*act_mul_bwd_held)(float *dgu, const float *dy, const void *g, const void *u, int g16, int64_t n, int64_t cols,
                            int64_t ld, int kind);
    /* the same for gradients apart (the MoE experts': dg, du, g, u each [n / cols, cols], f32 g and u): 1 when the
     * backend holds dg and du as operand_hold(dg / du, n / cols, cols, 1) would, both written into their held copies
     * (the bf16 rounding of 0 + the term, what act_mul_bwd with VC_ACT_WRITE writes) and dg, du never; each released
     * by operand_hold(.., 0); 0 (nothing done, nothing held): the caller writes them. NULL: never */
    int (*act_mul_bwd_held2)(float *dg, float *du, const float *dy, const float *g, const float *u, int64_t n,
                             int64_t cols, int kind);
    /* fused LM head over token chunks: logp[t] = log softmax(z_t)[target[t]], ent[t] = entropy(z_t),
     * sumsq[t] = sum_v softmax(z_t)_v^2 (NULL: not computed; no gradient), z_t = softcap(h_t W^T + b) * scale
     * (d: host memory); lse saved for backward. target < 0: logp is 0. */
    void (*lm_head_fwd)(float *logp, float *ent, float *sumsq, float *lse, const float *h, const float *W,
                        const float *b, const int32_t *target, const vc_head_desc *d);
    void (*lm_head_bwd)(float *dh, float *dW, float *db, const float *dlogp, const float *dent, const float *lse,
                        const float *ent, const float *h, const float *W, const float *b, const int32_t *target,
                        const vc_head_desc *d);
    /* the bytes of d->keep with which lm_head_fwd leaves its logits for lm_head_bwd (bias b or NULL); 0: the backward
     * forms them again. NULL: never kept */
    size_t (*lm_head_keep)(const vc_head_desc *d, const float *b);
    /* top-k routing: weights[T,k] and expert ids[T,k] from router logits[T,E] */
    void (*route_fwd)(float *w, int32_t *idx, const float *logits, int64_t T, const vc_route_desc *d);
    void (*route_bwd)(float *dlogits, const float *dw, const float *logits, const int32_t *idx, int64_t T,
                      const vc_route_desc *d);
    /* ---- elementwise and layout (n elements; y may alias x only where noted) ---- */
    void (*fill)(float *y, float v, int64_t n);
    void (*axpy)(float *y, float a, const float *x, int64_t n);                 /* y += a x (aliasing: no) */
    void (*add)(float *y, const float *a, const float *b, int64_t n);           /* y = a + b */
    void (*mul)(float *y, const float *a, const float *b, int64_t n);           /* y = a * b */
    void (*mul_acc)(float *y, const float *a, const float *b, int64_t n);       /* y += a * b */
    void (*scale)(float *y, const float *x, float s, int64_t n);                /* y = s x (y may be x) */
    void (*round_bf16)(float *y, const float *x, int64_t n); /* y = x rounded to bf16 (nearest even), y may be x */
    /* y[r, c] = x[r, c] * s[r];  backward: dx += dy * s[r] (dx may be NULL), ds[r] += sum_c dy x (ds may be NULL) */
    void (*mul_rows_fwd)(float *y, const float *x, const float *s, int64_t R, int64_t C);
    void (*mul_rows_bwd)(float *dx, float *ds, const float *dy, const float *x, const float *s, int64_t R, int64_t C);
    /* row copy: for r in [0, R): dst[r*dld + c] (= or += when acc) src[(r / rep)*sld + c], c in [0, C);
     * rep >= 1 repeats each source row rep times (sld = 0 broadcasts one row) */
    void (*rows_copy)(float *dst, int64_t dld, const float *src, int64_t sld, int64_t R, int64_t C, int64_t rep,
                      int acc);
    /* row sums: for i in [0, R / rep): dst[i*dld + c] += sum_{j < rep} src[(i*rep + j)*sld + c], j ascending */
    void (*rows_sum)(float *dst, int64_t dld, const float *src, int64_t sld, int64_t R, int64_t C, int64_t rep);
    /* db[c] += sum_r dy[r*C + c], r ascending (bias gradient) */
    void (*col_sum)(float *db, const float *dy, int64_t R, int64_t C);
    void (*softcap_fwd)(float *y, const float *x, float cap, int64_t n);        /* y = cap tanh(x / cap) */
    void (*clip_fwd)(float *y, const float *x, float lo, float hi, int64_t n); /* y = min(max(x, lo), hi) */
    void (*clip_bwd)(float *dx, const float *dy, const float *x, float lo, float hi, int64_t n); /* dx += lo <= x <= hi ? dy : 0 */
    void (*softcap_bwd)(float *dx, const float *dy, const float *y, float cap, int64_t n); /* dx += */
    /* y[r] = W[r] / max(||W[r]||, 1e-12), nrm[r] = ||W[r]||;  backward dW += */
    void (*rownorm_fwd)(float *y, float *nrm, const float *W, int64_t R, int64_t C);
    void (*rownorm_bwd)(float *dW, const float *dy, const float *y, const float *nrm, int64_t R, int64_t C);
    /* out[0] = sum_i x[i] w[i] (double accumulation, fixed order);  backward dx += dout[0] * w */
    void (*dot_fwd)(float *out, const float *x, const float *w, int64_t n);
    void (*dot_bwd)(float *dx, const float *dout, const float *w, int64_t n);
    /* embedding rows: y[t] = W[ids[t]];  backward dW[ids[t]] += dy[t], t ascending per row (ids backend memory) */
    void (*embed_fwd)(float *y, const float *W, const int32_t *ids, int64_t T, int64_t H);
    void (*embed_bwd)(float *dW, const float *dy, const int32_t *ids, int64_t T, int64_t H);
    /* row gather: dst[r] = src[idx[r]], r in [0, R), rows of H (idx backend memory, int64) */
    void (*gather_rows)(float *dst, const float *src, const int64_t *idx, int64_t R, int64_t H);
    /* the same into bf16 rows (dst uint16_t[R, H]), values rounded to nearest even (a GEMM operand that bf16
     * matmuls round anyway, kept at half the bytes) */
    void (*gather_rows_bf16)(void *dst, const float *src, const int64_t *idx, int64_t R, int64_t H);
    /* row scatter: dst[off[r] + c] = src[r*sld + c], r in [0, R), c in [0, C) (off backend memory, int64
     * offsets in floats; destination rows must not overlap). The KV append of a paged cache: one call per
     * layer for the whole batch, however many sequences and pages it spans. */
    void (*scatter_rows)(float *dst, const int64_t *off, const float *src, int64_t sld, int64_t R, int64_t C);
    /* the same into bf16 rows: dst and off count uint16_t elements, values rounded to nearest even */
    void (*scatter_rows_bf16)(void *dst, const int64_t *off, const float *src, int64_t sld, int64_t R, int64_t C);
    /* the keys and values of a layer's new rows into a bf16 page pool in one pass: dst[off[r] + c] = k[r kw + c] for
     * c < kw, v[r vw + c - kw] after (a pool row: its keys, then its values). NULL: two scatter_rows_bf16 calls */
    void (*scatter_kv_bf16)(void *dst, const int64_t *off, const float *k, int64_t kw, const float *v, int64_t vw,
                            int64_t R);
    /* MoE combine with inv[t*K + k] = grouped row of token t's k-th choice:
     * fwd y[t] = sum_k w[t*K+k] Y[inv[t*K+k]] (k ascending);  bwd dY[inv] = w dy[t], dw[t*K+k] = dy[t].Y[inv];
     * scatter dx[t] += sum_k dX[inv[t*K+k]] (k ascending) */
    void (*moe_combine_fwd)(float *y, const float *Y, const float *w, const int64_t *inv, int64_t T, int64_t K,
                            int64_t H);
    void (*moe_combine_bwd)(float *dY, float *dw, const float *dy, const float *Y, const float *w, const int64_t *inv,
                            int64_t T, int64_t K, int64_t H);
    /* moe_combine_bwd whose dY [T K, H] only GEMMs read: 1 when the backend holds dY as operand_hold(dY, T K, H, 1)
     * would, its bf16 copy written (the rounding of w dy) and dY never, dw as moe_combine_bwd; released by
     * operand_hold(dY, .., 0); 0 (nothing done, nothing held): the caller runs moe_combine_bwd. NULL: never */
    int (*moe_combine_bwd_held)(float *dY, float *dw, const float *dy, const float *Y, const float *w,
                                const int64_t *inv, int64_t T, int64_t K, int64_t H);
    void (*moe_scatter_add)(float *dx, const float *dX, const int64_t *inv, int64_t T, int64_t K, int64_t H);
    /* experts' biases over grouped rows (off[E+1] backend memory, as moe_group's): Y[r] += b[e] for r in
     * [off[e], off[e+1]), rows of C;  backward db[e] += the sum of those rows of dY, r ascending */
    void (*moe_bias_fwd)(float *Y, const float *b, const int64_t *off, int64_t E, int64_t C);
    void (*moe_bias_bwd)(float *db, const float *dY, const int64_t *off, int64_t E, int64_t C);
    /* MoE grouping of the routed choices ids[T*K] (backend int32, route_fwd's; ids outside [0, E) are
     * clamped): off[E+1], tok[T*K], inv[T*K] (backend int64) with the choices grouped by expert, experts
     * ascending and tokens ascending within one; group e is rows [off[e], off[e+1]), tok[r] is grouped row r's
     * token, inv[t*K+k] the grouped row of token t's k-th choice. Nothing comes back to the host. */
    void (*moe_group)(int64_t *off, int64_t *tok, int64_t *inv, const int32_t *ids, int64_t T, int64_t K, int64_t E);
    /* grouped GEMMs over the E row groups off[E+1] (backend memory, as moe_group's; row counts never reach the
     * host, so a step stays one CUDA graph). Each group's result is bitwise the gemm_b16 call on its rows.
     * rows (R: the rows of all groups, off[E]): C[g rows, N] = alpha A[g rows, K] op(B_e) + beta C[g rows] for every group g = e, B_e = B + e * N * K
     *   (a weight: op(B_e) = B_e^T of a row-major [N, K] when tb, else B_e row-major [K, N]); A (a16: bf16)
     *   and C rows at lda / ldc.
     * wgrad: C_e[M, N] = alpha A[g rows, M]^T B[g rows, N] + beta C_e, C_e = C + e * M * N (row-major), the
     *   group's rows of A (f32, lda) and B (b16: bf16, ldb) the summation; an empty group scales C_e by beta. */
    void (*gemm_rows_grouped)(int tb, int64_t E, const int64_t *off, int64_t R, int64_t N, int64_t K, float alpha,
                              const void *A, int a16, int64_t lda, const float *B, float beta, float *C, int64_t ldc);
    void (*gemm_wgrad_grouped)(int64_t E, const int64_t *off, int64_t M, int64_t N, float alpha, const float *A,
                               int64_t lda, const void *B, int b16, int64_t ldb, float beta, float *C);
    /* optional (NULL: nothing to do). hold 1: the caller promises that the rows x cols row-major block at p
     * does not change until it calls again with hold 0 (same p); meanwhile the backend may keep derived data
     * (CUDA with bf16 matmuls: the block rounded to bf16 once for every GEMM that reads it) */
    void (*operand_hold)(const float *p, int64_t rows, int64_t cols, int hold);
    /* ---- optimiser (vc_optim_param.w / .g, m[i], v[i] are backend memory; the arrays are host) ---- */
    /* one AdamW step, same float32 formula as vc_adamw_step; step counts this step (1 for the first) */
    vc_status (*adamw)(const struct vc_optim_param *params, float *const *m, float *const *v, size_t n_params,
                       const struct vc_adamw_config *cfg, int64_t step, double lr);
    /* sum of squares of every gradient in double, fixed order (host result) */
    vc_status (*sumsq)(const float *const *x, const size_t *sizes, size_t n_tensors, double *out);
    /* 1 when attn_fwd and attn_bwd, under VC_PREC_BF16, round q, k and v to bf16 (nearest even) as they read them for
     * this descriptor, so callers need not round them first (the same values); optional: NULL = never */
    int (*attn_rounds_bf16)(const vc_attn_desc *d);
    /* whether the paged attention rounds q to bf16 as it reads it (d: heads and dims; bf16 matmuls), whatever kernels a
     * call's decode and prefill rows take: q then need not be rounded in place first (the same values). NULL: no */
    int (*paged_rounds_q)(const vc_attn_desc *d);
    /* x[t] *= c for every tensor t in one pass (gradient clipping); optional: NULL = one scale per tensor */
    void (*scale_tensors)(float *const *x, const size_t *sizes, size_t n_tensors, float c);
    /* ---- sampling (rollout engine) ---- */
    /* Draws tokens from logits[R, V] (backend memory): for row r and draw d in [rows[r].first, +n):
     * tok[d], lp[d] = log softmax(z_r)[tok] under the RAW logits (float max, double sum of exp: the LM
     * head's reduction), lps[d] = log-prob under the distribution sampled from (0 for greedy). Greedy
     * takes the argmax (lowest id on ties); otherwise x = z / T, then top-k, top-p (nucleus of the
     * top-k renormalised distribution, at least one token) and min-p (relative to the most likely
     * token), then inverse CDF with u[d]: the first kept token whose running weight sum exceeds
     * u * total, visiting kept tokens by probability descending, id ascending when top-k or top-p is
     * on, by id otherwise; the last kept token when none does. Outputs tok / lp / lps are BACKEND
     * memory [sum n]; rows and u are HOST memory. A token < 0 marks a row the backend could not
     * sample (scratch allocation failed); `sync` reports other errors. */
    void (*sample_rows)(int32_t *tok, float *lp, float *lps, const float *logits, int64_t R, int64_t V,
                        const vc_sample_row *rows, const float *u);
    /* ---- quantization-aware training (src/model/qat.c); NULL: on the host through h2d / d2h ---- */
    /* the largest |x| of each of n tensors x[i] of sizes[i] floats (each value rounded to bf16 first where bf16) into
     * out[i], HOST memory */
    vc_status (*absmax_many)(const float *const *x, const size_t *sizes, size_t n, int bf16, float *out);
    /* x [rows, cols] fake-quantized to NVFP4 in place, the bits of vc_qat_fake_quant (src/model/qat.h) */
    void (*fake_fp4)(float *x, int64_t rows, int64_t cols, int group, float amax, int bf16);
} vc_backend;

/* Matmul precision of the gemm / lm_head / moe GEMMs (process-wide; set before the first step).
 * VC_PREC_F32: exact f32 products. VC_PREC_BF16: both inputs rounded to bf16 (nearest even), products
 * accumulated in f32, outputs kept in f32 (PyTorch autocast-bf16 matmul numerics up to the rounding of
 * the output); the CPU backend emulates it, CUDA runs bf16 tensor-core GEMMs. */
enum vc_precision { VC_PREC_F32, VC_PREC_BF16 };
void vc_set_matmul_precision(int prec);
int vc_matmul_precision(void);

const vc_backend *vc_backend_cpu(void);
/* The CPU backend behind poisoned pointers (tests): every backend pointer is host memory + an offset
 * that makes it non-canonical, so a host dereference faults at once; entries translate and call the
 * CPU kernels. */
const vc_backend *vc_backend_sim(void);
const vc_backend *vc_be(void); /* the active backend */
void vc_set_backend(const vc_backend *b); /* NULL: the CPU backend */
#endif
