/* The op set. Each op computes eagerly on the active backend and, when the graph records gradients
 * and an input requires them, pushes a tape node with its backward rule. NULL inputs propagate (an
 * earlier allocation failed; the graph's status says why). Shapes are in comments: [T, H] etc. */
#ifndef VERLC_OPS_H
#define VERLC_OPS_H
#include "verlc/tensor.h"

struct vc_attn_desc;
struct vc_qkv_desc;
struct vc_route_desc;

/* [T, H] rows of W [V, H] at ids (host array, uploaded; may be reused on return) */
vc_tensor *vc_op_embedding(vc_graph *g, vc_tensor *W, const int32_t *ids, int64_t T);
/* y [.., N] = x [.., K] W^T (W [N, K]) + b [N] */
/* x viewed as `rows` rows -> its rows ids[0..R) as [R, x->n / rows] ([R] for a 1-D x) (ids: int32 in BACKEND
 * memory, valid until backward has run); backward adds each row's gradient back, r ascending */
vc_tensor *vc_op_gather_rows(vc_graph *g, vc_tensor *x, int64_t rows, const int32_t *ids, int64_t R);
/* the inverse: x viewed as R rows placed at rows ids[0..R) (distinct; BACKEND memory, valid until backward)
 * of a zero [rows, x->n / R] ([rows] for a 1-D x); backward gathers them back */
vc_tensor *vc_op_scatter_rows(vc_graph *g, vc_tensor *x, const int32_t *ids, int64_t R, int64_t rows);
vc_tensor *vc_op_linear(vc_graph *g, vc_tensor *x, vc_tensor *W, vc_tensor *b);
vc_tensor *vc_op_add(vc_graph *g, vc_tensor *a, vc_tensor *b);
vc_tensor *vc_op_mul(vc_graph *g, vc_tensor *a, vc_tensor *b);
vc_tensor *vc_op_scale(vc_graph *g, vc_tensor *a, float s);
/* (act(gate) * up) W^T + b, as vc_op_linear(vc_op_act_mul(gate, up), W, b). With bf16 matmuls the
 * activation is kept in bf16 (the GEMM rounds it to bf16 anyway): half its memory, the same bits. */
vc_tensor *vc_op_act_mul_linear(vc_graph *g, vc_tensor *gate, vc_tensor *up, int kind, vc_tensor *W, vc_tensor *b);
/* the same with gate and up as one [2I, H] matrix (Wu's rows right after Wg's in memory: vc_gate_up_adjacent): one GEMM
 * for both projections and one each for their gradients (src/tensor/ops_mlp.c); the activation in bf16 when bf16_act
 * and matmuls are bf16. NULL (nothing done) when the weights are not adjacent or the shapes disagree. */
vc_tensor *vc_op_gated_mlp(vc_graph *g, vc_tensor *x, vc_tensor *Wg, vc_tensor *Wu, int kind, vc_tensor *W, vc_tensor *b,
                           int bf16_act);
int vc_gate_up_adjacent(const vc_tensor *Wg, const vc_tensor *Wu);
/* a's values rounded to bf16 (nearest even) IN PLACE, as a new tensor on the same memory; the gradient
 * passes through unchanged (a cast's). Only for a tensor whose producer's backward does not read its
 * output and that nothing else read before (the attention inputs in bf16 precision). */
vc_tensor *vc_op_round_bf16_inplace(vc_graph *g, vc_tensor *a);
/* x [R, C] * s [R] (one factor per row) */
vc_tensor *vc_op_mul_rows(vc_graph *g, vc_tensor *x, vc_tensor *s);
/* normalise each row of the last `cols` elements; w may be NULL; y = x * rstd * (w + w_offset) */
vc_tensor *vc_op_rmsnorm(vc_graph *g, vc_tensor *x, vc_tensor *w, int64_t cols, float eps, float w_offset);
/* RMSNorm over the last dimension whose output several GEMMs read: held as vc_op_hold(y, 1) would hold it, its bf16
 * rounding written by the norm's own kernel where the backend can (no separate pass); release with vc_op_hold(y, 0) */
vc_tensor *vc_op_rmsnorm_held(vc_graph *g, vc_tensor *x, vc_tensor *w, float eps, float w_offset);
/* *sum = x + a and its RMSNorm (returned, held as vc_op_rmsnorm_held's) in one pass where the backend can: the
 * residual sum and the norm after it; the same values and gradients as vc_op_add then vc_op_rmsnorm_held */
vc_tensor *vc_op_add_rmsnorm_held(vc_graph *g, vc_tensor *x, vc_tensor *a, vc_tensor *w, float eps, float w_offset,
                                  vc_tensor **sum);
vc_tensor *vc_op_layernorm(vc_graph *g, vc_tensor *x, vc_tensor *w, vc_tensor *b, float eps);
/* x will not change until the matching release (on 0): several ops that read it (q, k and v from one normed
 * input) may share what the backend derives from it (its bf16 rounding for GEMMs). Calls must pair. */
void vc_op_hold(vc_tensor *x, int on);
/* RoPE on x [T, nh, hd] (first `rot` dims), cos/sin tables [T, rot/2] in BACKEND memory (e.g. from
 * vc_graph_upload or a model's backend buffers); they must stay valid until backward has run */
vc_tensor *vc_op_rope(vc_graph *g, vc_tensor *x, const float *cos, const float *sin, int nh, int hd, int rot,
                      int interleaved);
/* The same, rotating x's own data when g records no tape (inference: no copy); x must be a temporary
 * that nothing reads afterwards. With a tape it is vc_op_rope. */
vc_tensor *vc_op_rope_temp(vc_graph *g, vc_tensor *x, const float *cos, const float *sin, int nh, int hd, int rot,
                           int interleaved);
/* vc_op_rope_temp of q [T, nhq, hd] and k [T, nhk, hd] with the same tables: without a tape, where the backend has
 * rope2, both in one pass (the same values); *q and *k replaced by the results (NULL on failure) */
void vc_op_rope2_temp(vc_graph *g, vc_tensor **q, int nhq, vc_tensor **k, int nhk, const float *cos, const float *sin,
                      int hd, int rot, int interleaved);
/* q = x Wq^T + bq, k = x Wk^T + bk, v = x Wv^T + bv (biases may be NULL), then q's and k's rope as d gives it, with one
 * GEMM and one pass (the backend's qkv_rope: bf16 matmuls, the weights' bf16 copies adjacent); with a tape, its
 * backward with one GEMM for x's gradient and one for the weights' (qkv_rope_bwd). 0 with nothing made where the
 * backend cannot (the caller projects and rotates as usual); else 1 with *q [T, n_head, head_dim], *k, *v made */
int vc_op_qkv_rope(vc_graph *g, vc_tensor *x, vc_tensor *Wq, vc_tensor *Wk, vc_tensor *Wv, vc_tensor *bq, vc_tensor *bk,
                   vc_tensor *bv, const struct vc_qkv_desc *d, vc_tensor **q, vc_tensor **k, vc_tensor **v);
/* attention; q [T, nh, hd], k [T, nkv, hd], v [T, nkv, hdv] packed like q (training / prefill). */
vc_tensor *vc_op_attention(vc_graph *g, vc_tensor *q, vc_tensor *k, vc_tensor *v, const struct vc_attn_desc *d);
/* the same with attention sinks (gpt-oss): sinks [n_head] logits, one more key per head with a zero value;
 * NULL: none (d->sinks is set from it) */
vc_tensor *vc_op_attention_sinks(vc_graph *g, vc_tensor *q, vc_tensor *k, vc_tensor *v, const struct vc_attn_desc *d,
                                 vc_tensor *sinks);
vc_tensor *vc_op_act(vc_graph *g, vc_tensor *x, int kind);
/* xIELU (Apertus) with its learnable scalars ap, an ([1]): a_p = softplus(ap), a_n = beta + softplus(an);
 * y = x > 0 ? a_p x^2 + beta x : (expm1(min(x, eps)) - x) a_n + beta x */
/* Linear-attention layers (src/tensor/ops_linear.c) over packed sequences cu[n_seq + 1] (host). states: NULL (each
 * sequence from zero: training) or host [n_seq] of backend pointers to each sequence's state, carried in place
 * (a NULL element: from zero, not kept), without gradient. tabs: NULL, or cu and the states already in backend
 * memory (vc_seq_tabs_fill's words, ckpt 0), uploaded before the layers run: a CUDA graph can then capture the call
 * (the op uploads its own otherwise).
 * Depthwise causal conv1d: x [T, C], w [C, K] (a state: [K - 1, C] rows, the last inputs). */
vc_tensor *vc_op_conv1d_causal(vc_graph *g, vc_tensor *x, vc_tensor *w, int K, int n_seq, const int64_t *cu,
                               float *const *states, const int64_t *tabs);
/* Gated DeltaNet's log decay: -exp(A_log) softplus(a + dt_bias), a [T, nh], A_log and dt_bias [nh]; or per channel
 * (Kimi Delta Attention): a [T, nh dk], dt_bias [nh dk], head h's A_log over its dk channels */
vc_tensor *vc_op_gdn_gate(vc_graph *g, vc_tensor *a, vc_tensor *A_log, vc_tensor *dt_bias);
/* The gated delta rule (src/tensor/backend.h vc_gdn_desc; no_delta: Mamba 2's plain decayed accumulation): q, k [T,
 * nk, dk], v [T, nv, dv], g and beta [T, nv] (g [T, nv, dk]: a decay per key channel, Kimi Delta Attention); o [T,
 * nv, dv]; a state: [nv, dk, dv] */
vc_tensor *vc_op_gdn(vc_graph *g, vc_tensor *q, vc_tensor *k, vc_tensor *v, vc_tensor *gt, vc_tensor *beta, int n_seq,
                     const int64_t *cu, int nk, int nv, int dk, int dv, float scale, int no_delta, float *const *states,
                     const int64_t *tabs);
/* the same without states, where sequence s starts from the state of sequence from[s] (host [n_seq]; -1: from zero;
 * else an earlier sequence with from -1) at that one's row vc_gdn_shared_tap(its length); gradients flow through
 * it. */
vc_tensor *vc_op_gdn_shared(vc_graph *g, vc_tensor *q, vc_tensor *k, vc_tensor *v, vc_tensor *gt, vc_tensor *beta,
                            int n_seq, const int64_t *cu, int nk, int nv, int dk, int dv, float scale, int no_delta,
                            const int32_t *from);
/* the row of a sequence of L rows that vc_op_gdn_shared's starts take its state at (its last multiple of the op's
 * chunk of 64 rows) */
int64_t vc_gdn_shared_tap(int64_t L);
/* Mamba 1's selective scan (src/tensor/backend.h vc_ssm_desc): x and dt [T, I], A_log [I, N], B and C [T, N]; y [T, I]
 * without the D skip; a state: [I, N] */
vc_tensor *vc_op_ssm_scan(vc_graph *g, vc_tensor *x, vc_tensor *dt, vc_tensor *A_log, vc_tensor *B, vc_tensor *C,
                          int n_seq, const int64_t *cu, float *const *states, const int64_t *tabs);
/* the same without states, where sequence s starts from the final state of sequence from[s] (host [n_seq]; -1: from
 * zero; else an earlier sequence with from -1); gradients flow through it */
vc_tensor *vc_op_ssm_scan_shared(vc_graph *g, vc_tensor *x, vc_tensor *dt, vc_tensor *A_log, vc_tensor *B,
                                 vc_tensor *C, int n_seq, const int64_t *cu, const int32_t *from);
/* y = x w + b per channel broadcast over rows: x [.., C], w and b [C / grp] (either NULL), channel k covering columns
 * [k grp, (k + 1) grp) */
vc_tensor *vc_op_affine_cols(vc_graph *g, vc_tensor *x, vc_tensor *w, vc_tensor *b, int64_t grp);
vc_tensor *vc_op_xielu(vc_graph *g, vc_tensor *x, vc_tensor *ap, vc_tensor *an, float beta, float eps);
vc_tensor *vc_op_act_mul(vc_graph *g, vc_tensor *gate, vc_tensor *up, int kind);
/* columns [c0, c1) of x viewed as [R, C] (C = last dim) -> [R, c1 - c0] */
vc_tensor *vc_op_slice_cols(vc_graph *g, vc_tensor *x, int64_t C, int64_t c0, int64_t c1);
/* per row concat of a [R, Ca] and b [R, Cb]; b may have R / rep rows, each reused rep times in a row
 * (broadcast over heads) */
vc_tensor *vc_op_concat_cols(vc_graph *g, vc_tensor *a, int64_t Ca, vc_tensor *b, int64_t Cb, int64_t rep);
vc_tensor *vc_op_softcap(vc_graph *g, vc_tensor *x, float cap);
/* y = min(max(x, -c), c) (clip_qkv); the gradient passes where |x| <= c */
vc_tensor *vc_op_clip(vc_graph *g, vc_tensor *x, float c);
/* y = min(max(x, lo), hi) (torch.clamp: Gemma 4's clipped linears); the gradient passes where lo <= x <= hi */
vc_tensor *vc_op_clamp(vc_graph *g, vc_tensor *x, float lo, float hi);
/* each row divided by max(||row||, 1e-12) (Baichuan NormHead) */
vc_tensor *vc_op_row_normalize(vc_graph *g, vc_tensor *W);
/* sum_i x_i * w_i with constant weights (host array, uploaded) -> scalar [1] */
vc_tensor *vc_op_dot_const(vc_graph *g, vc_tensor *x, const float *w);
/* [R * K] log-softmax of each row of x [R, V] at its K columns ids[r * K .. r * K + K) (host array), with
 * gradient; computed on the host (for a few columns of a large vocabulary, e.g. distillation's top-k). top
 * (NULL: not wanted) gets each row's own K largest columns [R * K], in descending order as torch.topk. */
vc_tensor *vc_op_logsoftmax_gather(vc_graph *g, vc_tensor *x, const int32_t *ids, int K, int32_t *top);
/* fused LM head: per token log p(target) and entropy (both [T]) of softcap(h W^T + b) / temperature
 * (temperature <= 0: 1); W [V, H], b [V] or NULL; target is a host array (uploaded; NULL: no targets,
 * logp 0). sum_pi_sq (NULL: not computed) gets sum_v p_v^2 per token, without gradient. */
vc_status vc_op_lm_head(vc_graph *g, vc_tensor *h, vc_tensor *W, vc_tensor *b, const int32_t *target, float softcap,
                        float temperature, vc_tensor **logp, vc_tensor **entropy, vc_tensor **sum_pi_sq);
/* MoE: route [T, E] logits to top-k experts and run them: y [T, H] = sum_k w_tk * expert_k(x_t).
 * gate/up [E, I, H], down [E, H, I] stacked expert weights. */
vc_tensor *vc_op_moe(vc_graph *g, vc_tensor *x, vc_tensor *router_logits, vc_tensor *gate, vc_tensor *up,
                     vc_tensor *down, int act, const struct vc_route_desc *rd);
/* LoRA adapters on the routed experts (PEFT's target_parameters on the fused expert tensors), applied per
 * routed row without forming W + s B A: gate_up (NULL: none): A [E, r, H] shared by gate and up, B
 * [2, E, I, r] (gate's, then up's); down (NULL: none): A [E, r, I], B [E, H, r]; scale alpha / r. */
typedef struct vc_moe_lora {
    vc_tensor *gu_a, *gu_b, *down_a, *down_b;
    float scale;
} vc_moe_lora;
vc_tensor *vc_op_moe_lora(vc_graph *g, vc_tensor *x, vc_tensor *router_logits, vc_tensor *gate, vc_tensor *up,
                          vc_tensor *down, int act, const struct vc_route_desc *rd, const vc_moe_lora *lora);
/* the experts' biases (gpt-oss): gate / up [E, I], down [E, H]; each may be NULL */
typedef struct vc_moe_bias {
    vc_tensor *gate, *up, *down;
    vc_tensor *scale; /* [E]: each expert's routing weight times its scale (Gemma 4's per_expert_scale), or NULL */
} vc_moe_bias;
vc_tensor *vc_op_moe_ex(vc_graph *g, vc_tensor *x, vc_tensor *router_logits, vc_tensor *gate, vc_tensor *up,
                        vc_tensor *down, int act, const struct vc_route_desc *rd, const vc_moe_lora *lora,
                        const vc_moe_bias *bias);
#endif
