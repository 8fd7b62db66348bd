/* Shared prompt prefixes: the packing of vc_share_plan (include/verlc/model.h). GRPO's rollout.n responses
 * to one prompt repeat that prompt in every training and log-prob pass; with a plan each prompt's tokens
 * (all but its last, whose target is the first response token) run through the decoder once and the
 * responses attend to their keys (decoder.c gathers them in front of each response's own). */
#include "verlc/model.h"
#include "verlc/ops.h"
#include "verlc/tensor.h"
#include <string.h>

static int64_t common(const int32_t *a, const int32_t *b, int64_t n) {
    int64_t k = 0;
    while (k < n && a[k] == b[k]) k++;
    return k;
}

/* lead[s]: the first sequence of s's group (s itself for a leader, -1 outside groups); P[s] of a leader:
 * the shared length of its group (0: not shared) */
static void group_plan(const vc_batch *b, const int32_t *group, const int64_t *share_len, int64_t min_len,
                       int *lead, int64_t *P) {
    const int64_t *cu = b->cu_seqlens;
    for (int s = 0; s < b->n_seq; s++) {
        lead[s] = -1;
        P[s] = 0;
        if (group[s] < 0) continue;
        for (int r = 0; r < s && lead[s] < 0; r++)
            if (group[r] == group[s] && lead[r] == r) lead[s] = r;
        if (lead[s] < 0) lead[s] = s;
    }
    for (int s = 0; s < b->n_seq; s++) {
        int l = lead[s];
        if (l < 0) continue;
        int64_t Ls = cu[s + 1] - cu[s], cap = share_len[s] < Ls - 1 ? share_len[s] : Ls - 1;
        if (cap < 0) cap = 0;
        if (l == s) {
            P[s] = -(cap + 1); /* negative: a leader without a second member yet */
            continue;
        }
        int64_t cur = P[l] < 0 ? -P[l] - 1 : P[l];
        if (cap < cur) cur = cap;
        cur = common(b->ids + cu[l], b->ids + cu[s], cur);
        P[l] = cur;
    }
    for (int s = 0; s < b->n_seq; s++)
        if (lead[s] == s && P[s] < min_len) P[s] = 0; /* alone (negative) or too short */
}

vc_status vc_share_plan(vc_graph *g, const vc_batch *b, const int32_t *group, const int64_t *share_len,
                        int64_t min_len, vc_share *out) {
    memset(out, 0, sizeof *out);
    out->b = *b;
    int n = b->n_seq;
    const int64_t *cu = b->cu_seqlens;
    int64_t T0 = cu[n];
    out->T = T0;
    if (!group || !share_len || n < 2 || b->prefix || b->images) return VC_OK; /* (images: computed unshared) */
    int *lead = vc_graph_alloc(g, sizeof(int) * (size_t)n, 0);
    int64_t *P = vc_graph_alloc(g, sizeof(int64_t) * (size_t)n, 0);
    if (!lead || !P) return vc_graph_status(g);
    group_plan(b, group, share_len, min_len < 1 ? 1 : min_len, lead, P);
    int n2 = n;
    int64_t sav = 0; /* every member but the leader skips its group's P tokens */
    for (int s = 0; s < n; s++) {
        if (lead[s] < 0 || P[lead[s]] == 0) continue;
        if (lead[s] == s) n2++;
        else sav += P[lead[s]];
    }
    if (n2 == n) return VC_OK;
    int64_t T = T0 - sav;
    int64_t *cu2 = vc_graph_alloc(g, sizeof(int64_t) * (size_t)(n2 + 1), 0);
    int32_t *ids = vc_graph_alloc(g, sizeof(int32_t) * (size_t)(T ? T : 1), 0);
    int32_t *pre = vc_graph_alloc(g, sizeof(int32_t) * (size_t)n2, 0);
    int32_t *rep = vc_graph_alloc(g, sizeof(int32_t) * (size_t)(T ? T : 1), 0);
    int32_t *back = vc_graph_alloc(g, sizeof(int32_t) * (size_t)(T0 ? T0 : 1), 0);
    int *seg = vc_graph_alloc(g, sizeof(int) * (size_t)n, 0); /* a leader's prefix segment */
    if (!cu2 || !ids || !pre || !rep || !back || !seg) return vc_graph_status(g);
    int k = 0;
    int64_t t = 0;
    cu2[0] = 0;
    for (int s = 0; s < n; s++) {
        int l = lead[s];
        int64_t share = l >= 0 ? P[l] : 0, a = cu[s], L = cu[s + 1] - a;
        if (share > 0 && l == s) { /* the group's prefix, once */
            seg[s] = k;
            for (int64_t j = 0; j < share; j++, t++) ids[t] = b->ids[a + j], rep[t] = (int32_t)(a + j);
            pre[k++] = -1;
            cu2[k] = t;
        }
        if (share > 0)
            for (int64_t j = 0; j < share; j++) back[a + j] = (int32_t)(cu2[seg[l]] + j);
        for (int64_t j = share; j < L; j++, t++) {
            ids[t] = b->ids[a + j];
            rep[t] = (int32_t)(a + j);
            back[a + j] = (int32_t)t;
        }
        pre[k++] = share > 0 ? seg[l] : -1;
        cu2[k] = t;
    }
    int32_t *dback = vc_graph_upload(g, back, sizeof(int32_t) * (size_t)(T0 ? T0 : 1));
    if (!dback) return vc_graph_status(g);
    out->b = (vc_batch){ n2, cu2, ids, pre };
    out->T = T;
    out->rep = rep;
    out->back_host = back;
    out->back = dback;
    out->saved = sav;
    return VC_OK;
}

vc_status vc_model_logprobs_rows(vc_model *m, vc_graph *g, vc_tensor *hidden, const int32_t *target, float temperature,
                                 const uint8_t *need, vc_tensor **logp, vc_tensor **entropy, vc_tensor **sum_pi_sq) {
    int64_t H = vc_cfg_out_hidden(vc_model_cfg(m)), T = hidden ? hidden->n / H : 0, R = 0;
    for (int64_t t = 0; need && t < T; t++) R += need[t] != 0;
    if (!need || R == T || R == 0)
        return vc_model_logprobs_ex(m, g, hidden, target, temperature, logp, entropy, sum_pi_sq);
    int32_t *idx = vc_graph_alloc(g, sizeof(int32_t) * (size_t)R, 0), *tg = vc_graph_alloc(g, sizeof(int32_t) * (size_t)R, 0);
    if (!idx || !tg) return vc_graph_status(g);
    for (int64_t t = 0, r = 0; t < T; t++)
        if (need[t]) idx[r] = (int32_t)t, tg[r++] = target ? target[t] : -1;
    const int32_t *di = vc_graph_upload(g, idx, sizeof(int32_t) * (size_t)R);
    vc_tensor *h = di ? vc_op_gather_rows(g, hidden, T, di, R) : NULL;
    if (!h) return vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_NOMEM;
    vc_status st = vc_model_logprobs_ex(m, g, h, target ? tg : NULL, temperature, logp, entropy, sum_pi_sq);
    vc_tensor **out[3] = { logp, entropy, sum_pi_sq };
    for (int k = 0; !st && k < 3; k++)
        if (out[k] && *out[k] && !(*out[k] = vc_op_scatter_rows(g, *out[k], di, R, T)))
            st = vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_NOMEM;
    return st;
}
