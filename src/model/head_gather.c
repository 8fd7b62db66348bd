/* The LM head's log-softmax at a few given tokens per row (on-policy distillation's forward_kl_topk: the
 * teacher's top-k tokens), chunk by chunk: a chunk's logits [C, vocab] exist only while its rows are computed,
 * in forward and again in backward, so a micro-batch of P response positions never holds [P, vocab] logits
 * (later verl's use_chunked_topk; verlc always works this way). Each chunk runs on a scratch graph through
 * vc_model_logits and vc_op_logsoftmax_gather; backward re-runs it there and back-propagates, which writes
 * the head's weight gradients, as a gradient-checkpointed layer does (src/model/decoder.c). */
#include "model_internal.h"
#include "verlc/ops.h"
#include "tensor/backend.h"
#include "tensor/graph_priv.h"
#include <string.h>

typedef struct {
    vc_model *m;
    const int32_t *ids; /* [P * K] host, graph arena */
    int64_t P, C;
    int K;
    float temperature;
} gather_saved;

/* rows [r0, r0 + n) of hidden on the scratch graph sub (their tensor into *xo): their [n * K] log-probs (top:
 * the rows' own top K, NULL: not wanted) */
static vc_tensor *chunk_forward(const gather_saved *s, vc_graph *sub, vc_tensor *hidden, int64_t r0, int64_t n,
                                int32_t *top, vc_tensor **xo) {
    int64_t H = hidden->shape[1], sh[2] = { n, H };
    vc_tensor *x = *xo = vc_tensor_wrap(sub, hidden->data + r0 * H, 2, sh);
    if (x && vc_graph_grad_enabled(sub)) x->requires_grad = hidden->requires_grad;
    vc_tensor *z = x ? vc_model_logits(s->m, sub, x) : NULL;
    if (z && s->temperature > 0 && s->temperature != 1) z = vc_op_scale(sub, z, 1.0f / s->temperature);
    return z ? vc_op_logsoftmax_gather(sub, z, s->ids + r0 * s->K, s->K, top ? top + r0 * s->K : NULL) : NULL;
}

/* one chunk's backward on sub: the incoming gradient gy [n * K] through the recomputed rows; their hidden
 * gradient added into gh (NULL: not wanted), the head's weight gradients accumulated by the ops */
static vc_status chunk_backward(const gather_saved *s, vc_graph *sub, vc_tensor *hidden, int64_t r0, int64_t n,
                                const float *gy, float *gh) {
    vc_tensor *x;
    vc_tensor *y = chunk_forward(s, sub, hidden, r0, n, NULL, &x);
    float *dy = y ? vc_tensor_grad(sub, y) : NULL;
    if (!dy) return vc_graph_status(sub) ? vc_graph_status(sub) : VC_ERR_NOMEM;
    vc_be()->d2d(dy, gy, sizeof(float) * (size_t)(n * s->K));
    vc_status st = vc_graph_backward_from(sub);
    if (!st && gh && x->grad) vc_be()->axpy(gh + r0 * hidden->shape[1], 1.0f, x->grad, x->n);
    return st;
}

static void gather_bw(vc_graph *g, vc_node *n) {
    const gather_saved *s = n->saved;
    vc_tensor *hidden = n->in[0];
    float *gh = hidden->requires_grad ? vc_tensor_grad(g, hidden) : NULL;
    vc_graph *sub = vc_graph_child(g);
    vc_status st = !sub || (hidden->requires_grad && !gh) ? VC_ERR_NOMEM : VC_OK;
    for (int64_t r0 = 0; !st && r0 < s->P; r0 += s->C) {
        vc_graph_reset(sub);
        int64_t c = s->P - r0 < s->C ? s->P - r0 : s->C;
        st = chunk_backward(s, sub, hidden, r0, c, n->out->grad + r0 * s->K, gh);
    }
    if (st) vc_graph_fail(g, st);
    vc_graph_child_release(sub);
}

int64_t vc_model_head_gather_rows(const vc_model *m, int64_t chunk_rows) {
    int64_t V = vc_cfg_out_vocab(&m->cfg), C = chunk_rows > 0 ? chunk_rows : ((int64_t)1 << 26) / (V > 0 ? V : 1);
    return C < 1 ? 1 : C; /* as asked, else 64 Mi logits (256 MiB) */
}

/* the head's weights (inputs of the node: its backward writes their gradients) */
static int head_params(const vc_model *m, vc_tensor **w) {
    int k = 0;
    w[k++] = m->cfg.tied ? vc_w(m, -1, VC_W_TOK_EMBD) : vc_w(m, -1, VC_W_LM_HEAD);
    if (vc_w(m, -1, VC_W_LM_HEAD_B)) w[k++] = vc_w(m, -1, VC_W_LM_HEAD_B);
    return k;
}

vc_tensor *vc_model_head_gather(vc_model *m, vc_graph *g, vc_tensor *hidden, const int32_t *ids, int K,
                                float temperature, int64_t chunk_rows, int32_t *top) {
    if (!hidden || vc_graph_status(g)) return NULL;
    int64_t H = vc_cfg_out_hidden(&m->cfg), P = hidden->n / (H > 0 ? H : 1), PK = P * K;
    if (hidden->ndim != 2 || hidden->shape[1] != H || K < 1) {
        vc_graph_fail(g, vc_fail(VC_ERR_SHAPE, "head gather: hidden states [rows, %lld] and K >= 1", (long long)H));
        return NULL;
    }
    gather_saved *s = vc_graph_alloc(g, sizeof *s, 1);
    int32_t *id = vc_graph_alloc(g, sizeof(int32_t) * (size_t)(PK ? PK : 1), 0);
    vc_tensor *y = vc_tensor_new(g, 1, &PK, 0);
    vc_graph *sub = vc_graph_child(g);
    if (!s || !id || !y || !sub) {
        vc_graph_child_release(sub);
        vc_graph_fail(g, VC_ERR_NOMEM);
        return NULL;
    }
    memcpy(id, ids, sizeof(int32_t) * (size_t)PK);
    *s = (gather_saved){ m, id, P, vc_model_head_gather_rows(m, chunk_rows), K, temperature };
    vc_graph_set_grad(sub, 0);
    vc_status st = VC_OK;
    for (int64_t r0 = 0; !st && r0 < P; r0 += s->C) {
        vc_graph_reset(sub);
        int64_t c = P - r0 < s->C ? P - r0 : s->C;
        vc_tensor *x, *yc = chunk_forward(s, sub, hidden, r0, c, top, &x);
        st = yc ? VC_OK : vc_graph_status(sub) ? vc_graph_status(sub) : VC_ERR_NOMEM;
        if (!st) vc_be()->d2d(y->data + r0 * K, yc->data, sizeof(float) * (size_t)(c * K));
    }
    vc_graph_child_release(sub);
    if (st) {
        vc_graph_fail(g, st);
        return NULL;
    }
    vc_tensor *in[3] = { hidden };
    vc_node *n = vc_tape_push(g, gather_bw, y, 1 + head_params(m, in + 1), in);
    if (n) n->saved = s;
    return y;
}
