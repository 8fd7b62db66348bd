/* Muon's side of vc_adamw (src/train/optim.c): its matrix groups and their step. Internal to src/train. */
#ifndef VC_TRAIN_MUON_H
#define VC_TRAIN_MUON_H
#include "verlc/optim.h"

size_t vc_muon_ws_floats(int64_t R, int64_t C);
struct vc_backend;
vc_status vc_muon_ns(const struct vc_backend *B, const vc_muon_config *c, float *g, int64_t R, int64_t C, float *ws);
/* the groups of opt->params with mats > 0 (checked: fused members agree on mats and cols) and every tensor's owner
 * among `world` ranks (vc_adamw_init_dp); then, once opt->m / v of the held tensors are allocated (v NULL for
 * Muon's), vc_muon_plan_bind: the held AdamW subset's arrays and the workspace */
vc_status vc_muon_plan_init(vc_adamw *opt, int rank, int world);
vc_status vc_muon_plan_bind(vc_adamw *opt);
void vc_muon_plan_free(vc_adamw *opt);
/* one step with learning rate lr: AdamW on the other params (AdamW step count `step`), Muon on the groups */
vc_status vc_muon_step(vc_adamw *opt, int64_t step, double lr);
/* whether param i is one of Muon's (no second moment) */
static inline int vc_muon_param(const vc_adamw *opt, size_t i) {
    return opt->cfg.muon.on && opt->params[i].mats > 0;
}
#endif
