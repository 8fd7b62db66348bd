/* Learning-rate schedules as verl builds them (verl/utils/torch_functional.py). */
#include "verlc/optim.h"
#include <math.h>
#include <string.h>

void vc_lr_config_default(vc_lr_config *c) {
    memset(c, 0, sizeof *c);
    c->lr_scheduler_type = "constant";
    c->lr = 1e-6;
    c->total_training_steps = -1;
    c->lr_warmup_steps = -1;
    c->num_cycles = 0.5;
}

static vc_status parse_kind(const char *name, vc_lr_kind *k) {
    if (!name || !strcmp(name, "constant")) *k = VC_LR_CONSTANT;
    else if (!strcmp(name, "cosine")) *k = VC_LR_COSINE;
    else if (!strcmp(name, "linear")) *k = VC_LR_LINEAR;
    else if (!strcmp(name, "wsd")) *k = VC_LR_WSD;
    else return vc_fail(VC_ERR_ARG, "lr_scheduler_type: unknown schedule '%s' (constant, cosine, linear, wsd)", name);
    return VC_OK;
}

vc_status vc_lr_schedule_init(vc_lr_schedule *s, const vc_lr_config *c) {
    memset(s, 0, sizeof *s);
    const char *name = c->warmup_style ? c->warmup_style : c->lr_scheduler_type;
    vc_status st = parse_kind(name, &s->kind);
    if (st) return st;
    if (!(c->min_lr_ratio >= 0 && c->min_lr_ratio <= 1))
        return vc_fail(VC_ERR_ARG, "min_lr_ratio %g must lie in [0, 1]", c->min_lr_ratio);
    if (!(c->lr_warmup_steps_ratio >= 0 && c->lr_warmup_steps_ratio <= 1))
        return vc_fail(VC_ERR_ARG, "lr_warmup_steps_ratio %g must lie in [0, 1]", c->lr_warmup_steps_ratio);
    if (s->kind != VC_LR_CONSTANT && c->total_training_steps <= 0)
        return vc_fail(VC_ERR_ARG, "%s schedule needs total_training_steps > 0 (got %lld)", name,
                       (long long)c->total_training_steps);
    s->base_lr = c->lr;
    s->total_steps = c->total_training_steps;
    s->min_lr_ratio = c->min_lr_ratio;
    s->num_cycles = c->num_cycles;
    s->stable_ratio = 0.9;
    if (c->lr_warmup_steps > 0) s->warmup_steps = c->lr_warmup_steps;
    else if (c->total_training_steps > 0)
        s->warmup_steps = (int64_t)(c->lr_warmup_steps_ratio * (double)c->total_training_steps); /* int() truncates */
    return VC_OK;
}

static double warmup_factor(const vc_lr_schedule *s, int64_t step) {
    double w = (double)step / (double)(s->warmup_steps > 1 ? s->warmup_steps : 1);
    return s->init_lr_ratio + (1.0 - s->init_lr_ratio) * w;
}

static double lr_lambda(const vc_lr_schedule *s, int64_t step) {
    int64_t W = s->warmup_steps, T = s->total_steps;
    switch (s->kind) {
    case VC_LR_CONSTANT:
        return step < W ? (double)step / (double)(W > 1 ? W : 1) : 1.0;
    case VC_LR_COSINE: {
        if (step < W) return warmup_factor(s, step);
        double progress = (double)(step - W) / (double)(T - W > 1 ? T - W : 1);
        double x = cos(M_PI * s->num_cycles * 2.0 * progress);
        double coef = (1.0 - s->min_lr_ratio) * 0.5, intercept = (1.0 + s->min_lr_ratio) * 0.5;
        double v = x * coef + intercept;
        return v > s->min_lr_ratio ? v : s->min_lr_ratio;
    }
    case VC_LR_LINEAR: {
        if (step < W) return warmup_factor(s, step);
        if (step >= T) return s->min_lr_ratio;
        double ratio = (double)(step - W) / (double)(T - W > 1 ? T - W : 1);
        return s->min_lr_ratio + (1.0 - ratio) * (1.0 - s->min_lr_ratio);
    }
    case VC_LR_WSD: {
        int64_t remaining = T - W > 0 ? T - W : 0;
        int64_t stable = (int64_t)((double)remaining * s->stable_ratio);
        int64_t decay = remaining - stable;
        if (step < W) return (double)step / (double)(W > 1 ? W : 1);
        if (step < W + stable) return 1.0;
        if (step < T) {
            double progress = (double)(step - W - stable) / (double)(decay > 1 ? decay : 1);
            double v = 0.5 * (1.0 + cos(M_PI * s->num_cycles * 2.0 * progress));
            if (v < 0) v = 0;
            return (1.0 - s->min_lr_ratio) * v + s->min_lr_ratio;
        }
        return s->min_lr_ratio;
    }
    }
    return 1.0;
}

double vc_lr_at(const vc_lr_schedule *s, int64_t step) {
    if (step < 0) step = 0;
    return s->base_lr * lr_lambda(s, step);
}
