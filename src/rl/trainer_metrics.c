/* Step metrics with verl's names: an ordered (name, value) list, one JSON line per step in
 * metrics.jsonl, and one compact console line. */
#include "trainer_internal.h"
#include "verlc/tracking.h"
#include "verlc/json.h"
#include <math.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void rl_metrics_set(rl_metrics *m, const char *name, double v) {
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->name[i], name)) {
            m->value[i] = v;
            return;
        }
    if (m->n == m->cap) {
        int cap = m->cap ? m->cap * 2 : 64;
        char **nn = realloc(m->name, sizeof(char *) * (size_t)cap);
        if (!nn) return;
        m->name = nn;
        double *nv = realloc(m->value, sizeof(double) * (size_t)cap);
        if (!nv) return;
        m->value = nv;
        m->cap = cap;
    }
    if (!(m->name[m->n] = vc_strdup(name))) return;
    m->value[m->n++] = v;
}

void rl_metrics_setf(rl_metrics *m, double v, const char *fmt, ...) {
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    rl_metrics_set(m, name, v);
}

int rl_metrics_get(const rl_metrics *m, const char *name, double *v) {
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->name[i], name)) {
            if (v) *v = m->value[i];
            return 1;
        }
    return 0;
}

void rl_metrics_clear(rl_metrics *m) {
    for (int i = 0; i < m->n; i++) free(m->name[i]);
    m->n = 0;
}

void rl_metrics_free(rl_metrics *m) {
    rl_metrics_clear(m);
    free(m->name);
    free(m->value);
    memset(m, 0, sizeof *m);
}

vc_status rl_metrics_append_jsonl(const rl_metrics *m, int64_t step, const char *path) {
    FILE *f = fopen(path, "a");
    if (!f) return vc_fail(VC_ERR_IO, "%s: cannot open for appending", path);
    fprintf(f, "{\"step\": %lld", (long long)step);
    for (int i = 0; i < m->n; i++) {
        fputs(", ", f);
        vc_json_fput_str(f, m->name[i]);
        if (isfinite(m->value[i])) fprintf(f, ": %.9g", m->value[i]);
        else fputs(": null", f);
    }
    fputs("}\n", f);
    int bad = ferror(f);
    if (fclose(f) || bad) return vc_fail(VC_ERR_IO, "%s: write failed", path);
    return VC_OK;
}

void rl_metrics_console(const rl_metrics *m, int64_t step, int64_t total, FILE *f) {
    static const struct { const char *name, *label, *fmt; } COLS[] = {
        { "critic/score/mean", "score", "%.3f" },
        { "critic/rewards/mean", "reward", "%.3f" },
        { "actor/pg_loss", "pg_loss", "%+.4f" },
        { "actor/kl_loss", "kl", "%.4f" },
        { "actor/reward_kl_penalty", "kl_rew", "%.4f" },
        { "actor/entropy", "entropy", "%.3f" },
        { "critic/vf_loss", "vf_loss", "%.4f" },
        { "response_length/mean", "resp_len", "%.1f" },
        { "timing_s/step", "step_s", "%.2f" },
    };
    fprintf(f, "step %lld/%lld", (long long)step, (long long)total);
    for (size_t i = 0; i < sizeof COLS / sizeof COLS[0]; i++) {
        double v;
        if (!rl_metrics_get(m, COLS[i].name, &v)) continue;
        fprintf(f, " %s ", COLS[i].label);
        fprintf(f, COLS[i].fmt, v);
    }
    for (int i = 0; i < m->n; i++)
        if (!strncmp(m->name[i], "val-core/", 9)) fprintf(f, " %s %.3f", m->name[i], m->value[i]);
    fputc('\n', f);
    fflush(f);
}

vc_status rl_open_tracker(vc_rl_trainer *t, const vc_config *c) {
    return vc_tracker_open_config(c, "verl_examples", "gsm8k", &t->tracker);
}

/* trainer.log_val_generations: what verl's generations logger writes with the tensorboard logger (the others
 * it serves, wandb and the like, are not built in); every rank reads it, the validation gathers for it */
vc_status rl_read_val_generations(vc_rl_trainer *t, const vc_config *c) {
    int64_t n = 0;
    size_t nl = 0;
    vc_status st = vc_config_get_int_or(c, "trainer.log_val_generations", 0, &n);
    if (!st && n < 0) st = vc_fail(VC_ERR_ARG, "trainer.log_val_generations must be >= 0, got %lld", (long long)n);
    if (!st && vc_config_has(c, "trainer.logger")) st = vc_config_list_len(c, "trainer.logger", &nl);
    int tb = 0;
    for (size_t i = 0; !st && i < nl; i++) {
        const char *s = NULL;
        if (!(st = vc_config_list_str(c, "trainer.logger", i, &s))) tb |= !strcmp(s, "tensorboard");
    }
    t->log_val_gen = tb && n > 0 && n < INT32_MAX ? (int)n : 0;
    return st;
}
