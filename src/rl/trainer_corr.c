/* algorithm.rollout_correction in decoupled mode (verl's compute_rollout_correction_and_add_to_batch):
 * over the global batch, after the KL penalty and before the advantages, the trainer's old log-probs
 * against the rollout's give the importance weights (b->is_w, applied by the policy loss), the
 * rejection mask (multiplied into b->mask, so advantages, the critic and the actor skip rejected
 * tokens) and the rollout_corr/ metrics. Sums are reduced over the ranks: the figures are those of
 * the whole batch, as verl's driver computes them. */
#include "trainer_internal.h"
#include <stdlib.h>

static vc_status reduce_raw(vc_rl_trainer *t, rl_rc_raw *r) {
    vc_status st = rl_dist_reduce(t, r->s, RL_RC_NS, VC_SUM);
    if (!st) st = rl_dist_reduce(t, r->mx, RL_RC_NM, VC_MAX);
    if (!st) st = rl_dist_reduce(t, r->mn, RL_RC_NM, VC_MIN);
    return st;
}

vc_status rl_rollout_correction(vc_rl_trainer *t, rl_batch *b, rl_metrics *met) {
    const rl_rc_cfg *c = &t->acfg.rc;
    unsigned parts = RL_RC_IS | RL_RC_RS | (c->offpolicy ? RL_RC_OFF : 0);
    size_t n = (size_t)b->B * b->T;
    float *keep = c->n_rs ? vc_malloc(sizeof(float) * (n ? n : 1)) : NULL;
    rl_rc_raw *r = vc_malloc(sizeof *r);
    rl_rc_out *o = vc_malloc(sizeof *o);
    vc_status st = r && o && (keep || !c->n_rs) ? VC_OK : VC_ERR_NOMEM;
    if (!st) {
        rl_rc_raw_init(r);
        rl_rc_accum(c, parts, b->old_logp, b->rollout_logp, b->mask, b->B, b->T, r, c->is_level ? b->is_w : NULL,
                    keep);
        st = reduce_raw(t, r);
    }
    if (!st) {
        rl_rc_finalize(c, parts, r, o);
        for (int i = 0; i < o->n; i++) rl_metrics_set(met, o->name[i], o->v[i]);
    }
    if (!st && c->is_level && c->is_norm) { /* mean 1 over the global batch's tokens (or rows) */
        double v[2];
        rl_rc_norm_sums(c, b->is_w, b->mask, b->B, b->T, v);
        if (!(st = rl_dist_reduce(t, v, 2, VC_SUM)))
            rl_metrics_set(met, "rollout_corr/rollout_is_batch_norm_factor",
                           rl_rc_normalise(b->is_w, n, v, c->is_level == RL_RIS_SEQUENCE));
    }
    for (size_t k = 0; !st && keep && k < n; k++) b->mask[k] *= keep[k];
    free(keep);
    free(r);
    free(o);
    return st;
}
