/* The loss of trained multi-token-prediction layers (vc_trainer_config.mtp_scale; verl's MTP loss under Megatron):
 * depth k's hidden states at position t predict token t + k + 2 of the sequence, under that token's loss mask; each
 * depth's cross-entropy is averaged over its masked targets in the whole mini-batch (summed over the ranks in local
 * mode), scaled by mtp_scale / n_mtp and added to the loss; the LM head's weights get no gradient from it. */
#include "trainer_dp.h"
#include "verlc/ops.h"
#include <string.h>

vc_status vc_mtp_counts(vc_trainer *t, const vc_minibatch *b, int use_dp, double *n) {
    int K = vc_model_cfg(t->model)->n_mtp;
    memset(n, 0, sizeof(double) * VC_MTP_MAX);
    for (int s = 0; s < b->n_seq; s++)
        for (int64_t j = b->cu_seqlens[s]; j < b->cu_seqlens[s + 1]; j++)
            for (int k = 0; k < K && j - b->cu_seqlens[s] >= k + 2; k++) n[k] += b->mask ? b->mask[j] : 1.0;
    return use_dp && t->dp && t->cfg.local_batch ? vc_dp_sum(t, n, (size_t)K) : VC_OK;
}

/* depth k's targets (ids k + 2 on, -1 past the sequence) and weights -mask / n into tg / w; need: weighted rows */
static void depth_rows(const vc_micro_batch *mb, int k, double n, int32_t *tg, float *w, uint8_t *need) {
    for (int s = 0; s < mb->n_seq; s++)
        for (int64_t t = mb->cu_seqlens[s], end = mb->cu_seqlens[s + 1]; t < end; t++) {
            int in = t + k + 2 < end;
            float mask = in ? mb->mask[t + k + 1] : 0.0f; /* (mb->mask[p]: the mask of token p + 1) */
            tg[t] = in ? mb->ids[t + k + 2] : -1;
            w[t] = mask != 0.0f && n > 0 ? (float)(-mask / n) : 0.0f;
            need[t] = w[t] != 0.0f;
        }
}

vc_status vc_mtp_loss(vc_trainer *t, vc_graph *g, const vc_micro_batch *mb, vc_tensor *const *hid, const double *n,
                      vc_tensor **L, double *val) {
    int K = vc_model_cfg(t->model)->n_mtp;
    int64_t T = mb->n_tokens;
    for (int k = 0; k < K; k++) {
        int32_t *tg = vc_graph_alloc(g, sizeof(int32_t) * (size_t)(T ? T : 1), 0);
        float *w = vc_graph_alloc(g, sizeof(float) * (size_t)(T ? T : 1), 0);
        uint8_t *need = vc_graph_alloc(g, (size_t)(T ? T : 1), 0);
        if (!tg || !w || !need) return vc_graph_status(g);
        depth_rows(mb, k, n[k], tg, w, need);
        vc_tensor *lp = NULL;
        vc_status st = vc_model_mtp_logprobs(t->model, g, hid[k], tg, need, &lp);
        vc_tensor *lk = st ? NULL : vc_op_dot_const(g, lp, w);
        float v = 0;
        if (!st) st = lk ? vc_tensor_read(lk, &v) : vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_NOMEM;
        if (st) return st;
        val[k] = v;
        *L = vc_op_add(g, *L, vc_op_scale(g, lk, (float)(t->cfg.mtp_scale / K)));
        if (!*L) return vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_NOMEM;
    }
    return VC_OK;
}
