/* Learning-rate schedules as verl builds them (verl/utils/torch_functional.py). */
#include "verlc/optim.h"
#include <math.h>
#include <string.h>
#include <strings.h>

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
    s->one_indexed = c->one_indexed;
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
        step += s->one_indexed; /* verl applies it to the cosine schedule only */
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
    case VC_LR_MEGATRON: /* megatron_lr */
    case VC_LR_MLITE: return 1.0; /* mlite_lr */
    case VC_LR_VEOMNI: return 1.0;   /* veomni_factor */
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

/* ---- Megatron-core's OptimizerParamScheduler.get_lr ---- */
enum { MG_CONSTANT, MG_LINEAR, MG_COSINE, MG_INV_SQRT, MG_WSD };
enum { WSD_LINEAR, WSD_COSINE, WSD_EXP, WSD_MINUS_SQRT };

static int pick(const char *s, const char *const *names, int n) {
    for (int i = 0; s && i < n; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

vc_status vc_lr_megatron_init(vc_lr_schedule *s, const vc_lr_megatron_config *c) {
    static const char *const STYLES[] = { "constant", "linear", "cosine", "inverse-square-root", "WSD" };
    static const char *const WSD[] = { "linear", "cosine", "exponential", "minus_sqrt" };
    memset(s, 0, sizeof *s);
    s->kind = VC_LR_MEGATRON;
    s->mg_style = pick(c->lr_decay_style ? c->lr_decay_style : "constant", STYLES, 5);
    if (s->mg_style < 0)
        return vc_fail(VC_ERR_ARG, "lr_decay_style: unknown style '%s' (constant, linear, cosine, inverse-square-root, WSD)",
                       c->lr_decay_style);
    s->wsd_style = pick(c->lr_wsd_decay_style ? c->lr_wsd_decay_style : "exponential", WSD, 4);
    if (s->wsd_style < 0)
        return vc_fail(VC_ERR_ARG, "lr_wsd_decay_style: unknown style '%s' (linear, cosine, exponential, minus_sqrt)",
                       c->lr_wsd_decay_style);
    s->base_lr = c->lr;
    s->init_lr = c->lr_warmup_init;
    s->min_lr = c->min_lr;
    s->decay_steps = c->lr_decay_steps > 0 ? c->lr_decay_steps : c->total_training_steps;
    s->total_steps = c->total_training_steps;
    s->warmup_steps = c->lr_warmup_steps > 0 ? c->lr_warmup_steps
                                             : (int64_t)(c->lr_warmup_steps_ratio * (double)s->decay_steps);
    s->wsd_steps = c->lr_wsd_decay_steps;
    /* Megatron-core's constructor checks */
    if (!(s->min_lr >= 0) || !(s->base_lr >= s->min_lr) || !(s->init_lr <= s->base_lr))
        return vc_fail(VC_ERR_ARG, "megatron lr schedule: needs 0 <= min_lr (%g) <= lr (%g) and lr_warmup_init (%g) <= lr",
                       s->min_lr, s->base_lr, s->init_lr);
    if (s->decay_steps <= 0)
        return vc_fail(VC_ERR_ARG, "megatron lr schedule: lr_decay_steps (or the total training steps) must be > 0");
    if (s->warmup_steps >= s->decay_steps)
        return vc_fail(VC_ERR_ARG, "megatron lr schedule: %lld warmup steps, not fewer than the %lld decay steps",
                       (long long)s->warmup_steps, (long long)s->decay_steps);
    if (s->mg_style == MG_WSD && s->wsd_steps <= 0)
        return vc_fail(VC_ERR_ARG, "megatron lr schedule: lr_decay_style=WSD needs lr_wsd_decay_steps > 0");
    return VC_OK;
}

static double megatron_lr(const vc_lr_schedule *s, int64_t step) {
    double max_lr = s->base_lr, min_lr = s->min_lr;
    if (s->warmup_steps > 0 && step <= s->warmup_steps)
        return s->init_lr + (max_lr - s->init_lr) * (double)step / (double)s->warmup_steps;
    if (s->mg_style == MG_CONSTANT) return max_lr;
    if (step > s->decay_steps) return min_lr;
    if (s->mg_style == MG_INV_SQRT) {
        double w = (double)(s->warmup_steps > 1 ? s->warmup_steps : 1), n = (double)(step > 1 ? step : 1);
        double lr = max_lr * sqrt(w) / sqrt(n);
        return lr > min_lr ? lr : min_lr;
    }
    double ratio = (double)(step - s->warmup_steps) / (double)(s->decay_steps - s->warmup_steps), coeff = 1.0;
    if (s->mg_style == MG_LINEAR) coeff = 1.0 - ratio;
    else if (s->mg_style == MG_COSINE) coeff = 0.5 * (cos(M_PI * ratio) + 1.0);
    else { /* WSD */
        int64_t anneal = s->decay_steps - s->wsd_steps;
        if (step > anneal) {
            double r = (double)(step - anneal) / (double)s->wsd_steps;
            if (s->wsd_style == WSD_LINEAR) coeff = 1.0 - r;
            else if (s->wsd_style == WSD_COSINE) coeff = 0.5 * (cos(M_PI * r) + 1.0);
            else if (s->wsd_style == WSD_EXP) coeff = 2.0 * pow(0.5, r) - 1.0;
            else coeff = 1.0 - sqrt(r);
        }
    }
    return min_lr + coeff * (max_lr - min_lr);
}

/* ---- Megatron-lite's _MegatronLiteLRScheduler ---- */
enum { ML_CONSTANT, ML_LINEAR, ML_COSINE, ML_INV_SQRT, ML_WSD, ML_EXP };

static int pick_nocase(const char *s, const char *const *names, int n) {
    for (int i = 0; s && i < n; i++)
        if (!strcasecmp(s, names[i])) return i;
    return -1;
}

vc_status vc_lr_mlite_init(vc_lr_schedule *s, const vc_lr_megatron_config *c) {
    static const char *const STYLES[] = { "constant", "linear", "cosine", "inverse-square-root", "wsd" };
    static const char *const DECAY[] = { "constant", "linear", "cosine", "", "", "exponential" };
    memset(s, 0, sizeof *s);
    s->kind = VC_LR_MLITE;
    s->mg_style = pick_nocase(c->lr_decay_style ? c->lr_decay_style : "constant", STYLES, 5);
    if (s->mg_style < 0)
        return vc_fail(VC_ERR_ARG, "lr_decay_style: unknown style '%s' (Megatron-lite's constant, linear, cosine, "
                       "inverse-square-root, wsd)", c->lr_decay_style);
    s->wsd_style = pick_nocase(c->lr_wsd_decay_style ? c->lr_wsd_decay_style : "exponential", DECAY, 6);
    if (s->wsd_style < 0 || s->wsd_style == ML_INV_SQRT || s->wsd_style == ML_WSD)
        return vc_fail(VC_ERR_ARG, "lr_wsd_decay_style: unknown style '%s' (Megatron-lite's linear, cosine, exponential, "
                       "constant)", c->lr_wsd_decay_style);
    if (!(c->lr >= 0) || !(c->min_lr >= 0) || !isfinite(c->lr_warmup_init))
        return vc_fail(VC_ERR_ARG, "mlite lr schedule: lr %g and min_lr %g must be >= 0", c->lr, c->min_lr);
    s->base_lr = c->lr;
    s->init_lr = c->lr_warmup_init;
    s->min_lr = c->min_lr;
    s->total_steps = c->total_training_steps;
    if (s->total_steps <= 0) { /* no scheduler: the optimizer's lr */
        s->mg_style = ML_CONSTANT;
        return VC_OK;
    }
    int64_t w = c->lr_warmup_steps;
    if (w <= 0 && c->lr_warmup_steps_ratio > 0) w = (int64_t)(c->lr_warmup_steps_ratio * (double)s->total_steps);
    s->warmup_steps = w > 0 ? w : 0;
    int64_t d = c->lr_decay_steps > 0 ? c->lr_decay_steps : s->total_steps;
    s->decay_steps = d > s->warmup_steps + 1 ? d : s->warmup_steps + 1;
    s->wsd_steps = c->lr_wsd_decay_steps > 0 ? c->lr_wsd_decay_steps : 0;
    return VC_OK;
}

static double mlite_decay(double start, double end, double ratio, int style) {
    if (style == ML_LINEAR) return start + (end - start) * ratio;
    if (style == ML_COSINE) return end + (start - end) * (0.5 * (cos(M_PI * ratio) + 1.0));
    if (style == ML_EXP) return start == 0.0 ? 0.0 : end == 0.0 ? start * (1.0 - ratio) : start * pow(end / start, ratio);
    return start;
}

static double mlite_lr(const vc_lr_schedule *s, int64_t step) {
    if (s->total_steps <= 0) return s->base_lr;
    double max_lr = s->base_lr, n = (double)step;
    if (s->warmup_steps > 0 && step <= s->warmup_steps)
        return s->init_lr + (max_lr - s->init_lr) * (n / (double)s->warmup_steps);
    if (s->mg_style == ML_CONSTANT) return max_lr;
    if (s->mg_style == ML_INV_SQRT) {
        double w = (double)(s->warmup_steps > 1 ? s->warmup_steps : 1), k = step > 1 ? n : 1.0;
        double lr = max_lr * sqrt(w) / sqrt(k);
        return lr > s->min_lr ? lr : s->min_lr;
    }
    if (s->mg_style == ML_WSD) {
        int64_t start = s->decay_steps - s->wsd_steps > s->warmup_steps ? s->decay_steps - s->wsd_steps : s->warmup_steps;
        if (s->wsd_steps <= 0 || step <= start) return max_lr;
        double r = (n - (double)start) / (double)s->wsd_steps;
        return mlite_decay(max_lr, s->min_lr, r < 1.0 ? r : 1.0, s->wsd_style);
    }
    double span = (double)(s->decay_steps - s->warmup_steps > 1 ? s->decay_steps - s->warmup_steps : 1);
    double r = (n - (double)s->warmup_steps) / span;
    r = r < 0 ? 0 : r > 1 ? 1 : r;
    return mlite_decay(max_lr, s->min_lr, r, s->mg_style);
}

/* ---- VeOmni's LambdaLR schedules (their factors computed as VeOmni computes them, times the base lr) ---- */
enum { VO_CONSTANT, VO_LINEAR, VO_COSINE };

vc_status vc_lr_veomni_init(vc_lr_schedule *s, const vc_lr_veomni_config *c) {
    static const char *const STYLES[] = { "constant", "linear", "cosine" };
    memset(s, 0, sizeof *s);
    s->kind = VC_LR_VEOMNI;
    s->mg_style = pick(c->lr_scheduler_type ? c->lr_scheduler_type : "constant", STYLES, 3);
    if (s->mg_style < 0)
        return vc_fail(VC_ERR_ARG, "lr_scheduler_type: unknown schedule '%s' (VeOmni's constant, linear, cosine)",
                       c->lr_scheduler_type);
    if (!(c->lr > 0)) return vc_fail(VC_ERR_ARG, "lr %g: VeOmni's schedules divide by it, it must be > 0", c->lr);
    if (!(c->lr_warmup_steps_ratio >= 0 && c->lr_warmup_steps_ratio <= 1))
        return vc_fail(VC_ERR_ARG, "lr_warmup_steps_ratio %g must lie in [0, 1]", c->lr_warmup_steps_ratio);
    if (!(c->lr_decay_ratio >= 0) || !(c->lr_min >= 0) || !isfinite(c->lr_start))
        return vc_fail(VC_ERR_ARG, "lr_decay_ratio %g and lr_min %g must be >= 0, lr_start %g finite", c->lr_decay_ratio,
                       c->lr_min, c->lr_start);
    if (c->total_training_steps <= 0)
        return vc_fail(VC_ERR_ARG, "VeOmni's schedules need total_training_steps > 0 (got %lld)",
                       (long long)c->total_training_steps);
    s->base_lr = c->lr;
    s->init_lr = c->lr_start;
    s->min_lr = s->mg_style == VO_LINEAR ? 1e-7 : c->lr_min;
    s->total_steps = c->total_training_steps;
    s->warmup_steps = (int64_t)((double)c->total_training_steps * c->lr_warmup_steps_ratio); /* int() truncates */
    s->decay_steps = (int64_t)((double)c->total_training_steps * c->lr_decay_ratio);
    if (s->mg_style == VO_COSINE && s->warmup_steps > s->decay_steps) /* VeOmni asserts 0 <= progress there */
        return vc_fail(VC_ERR_ARG, "cosine schedule: %lld warmup steps (lr_warmup_steps_ratio) past its %lld decay "
                       "steps (lr_decay_ratio)", (long long)s->warmup_steps, (long long)s->decay_steps);
    return VC_OK;
}

static double veomni_factor(const vc_lr_schedule *s, int64_t step) {
    double lr = s->base_lr, start = s->init_lr;
    int64_t W = s->warmup_steps, T = s->total_steps;
    if (step < W) return (start + (lr - start) * (double)step / (double)(W > 1 ? W : 1)) / lr;
    double min_ratio = s->min_lr / lr;
    if (s->mg_style == VO_CONSTANT) return 1.0;
    if (s->mg_style == VO_LINEAR) {
        double f = (double)(T - step) / (double)(T - W > 1 ? T - W : 1);
        return f > min_ratio ? f : min_ratio;
    }
    if (step > s->decay_steps) return min_ratio;
    double progress = (double)(step - W) / (double)(s->decay_steps - W > 1 ? s->decay_steps - W : 1);
    double f = 0.5 * (1.0 + cos(M_PI * 0.5 * 2.0 * progress));
    f = f * (1 - min_ratio) + min_ratio;
    return f > 0 ? f : 0;
}

double vc_lr_at(const vc_lr_schedule *s, int64_t step) {
    if (step < 0) step = 0;
    if (s->kind == VC_LR_MEGATRON) return megatron_lr(s, step);
    if (s->kind == VC_LR_VEOMNI) return s->base_lr * veomni_factor(s, step);
    if (s->kind == VC_LR_MLITE) return mlite_lr(s, step);
    return s->base_lr * lr_lambda(s, step);
}
