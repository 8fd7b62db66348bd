/* Reading metrics.jsonl into one series per metric name. */
#include "verlc/data.h"
#include "verlc/report.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static vc_metric_series *series_get(vc_metrics *m, const char *name, size_t *cap) {
    for (size_t i = 0; i < m->n_series; i++)
        if (!strcmp(m->series[i].name, name)) return &m->series[i];
    if (m->n_series == *cap) {
        size_t nc = *cap ? *cap * 2 : 32;
        vc_metric_series *p = realloc(m->series, nc * sizeof *p);
        if (!p) return NULL;
        m->series = p;
        *cap = nc;
    }
    vc_metric_series *s = &m->series[m->n_series];
    memset(s, 0, sizeof *s);
    s->name = strdup(name);
    if (!s->name) return NULL;
    m->n_series++;
    return s;
}

static int series_push(vc_metric_series *s, double x, double y) {
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 64;
        double *px = realloc(s->x, nc * sizeof *px);
        if (!px) return 0;
        s->x = px;
        double *py = realloc(s->y, nc * sizeof *py);
        if (!py) return 0;
        s->y = py;
        s->cap = nc;
    }
    s->x[s->n] = x;
    s->y[s->n] = y;
    s->n++;
    return 1;
}

static vc_status take_row(vc_metrics *m, const cJSON *row, size_t r, size_t *cap) {
    const cJSON *step = cJSON_GetObjectItemCaseSensitive(row, "step");
    double x = cJSON_IsNumber(step) ? step->valuedouble : (double)(r + 1);
    for (const cJSON *it = row->child; it; it = it->next) {
        if (!it->string || !strcmp(it->string, "step")) continue;
        double y;
        if (cJSON_IsNumber(it)) y = it->valuedouble;
        else if (cJSON_IsNull(it)) y = NAN;
        else if (cJSON_IsBool(it)) y = cJSON_IsTrue(it) ? 1.0 : 0.0;
        else continue; /* strings and nested objects are not plotted */
        vc_metric_series *s = series_get(m, it->string, cap);
        if (!s || !series_push(s, x, y)) return vc_fail(VC_ERR_NOMEM, "metrics: out of memory");
    }
    return VC_OK;
}

vc_status vc_metrics_read(const char *path, vc_metrics **out) {
    *out = NULL;
    vc_jsonl *d = NULL;
    vc_status st = vc_jsonl_read(path, VC_JSONL_SKIP_BAD | VC_JSONL_NONFINITE_AS_NULL, &d);
    if (st) return st;
    vc_metrics *m = vc_calloc(1, sizeof *m);
    size_t cap = 0;
    if (!m) {
        st = VC_ERR_NOMEM;
        goto out;
    }
    m->n_rows = d->n_rows;
    m->n_skipped = d->n_skipped;
    if (d->n_bad) {
        m->bad = vc_calloc(d->n_bad, sizeof *m->bad);
        if (!m->bad) {
            st = VC_ERR_NOMEM;
            goto out;
        }
        for (size_t i = 0; i < d->n_bad; i++) {
            m->bad[i] = d->bad[i].message; /* take ownership */
            d->bad[i].message = NULL;
            m->n_bad++;
        }
    }
    for (size_t r = 0; r < d->n_rows && !st; r++) st = take_row(m, d->rows[r], r, &cap);
out:
    vc_jsonl_free(d);
    if (st) vc_metrics_free(m);
    else *out = m;
    return st;
}

void vc_metrics_free(vc_metrics *m) {
    if (!m) return;
    for (size_t i = 0; i < m->n_series; i++) {
        free(m->series[i].name);
        free(m->series[i].x);
        free(m->series[i].y);
    }
    for (size_t i = 0; i < m->n_bad; i++) free(m->bad[i]);
    free(m->bad);
    free(m->series);
    free(m);
}

const vc_metric_series *vc_metrics_find(const vc_metrics *m, const char *name) {
    for (size_t i = 0; i < m->n_series; i++)
        if (!strcmp(m->series[i].name, name)) return &m->series[i];
    return NULL;
}

void vc_metric_group(const char *name, char *out, size_t cap) {
    const char *slash = strchr(name, '/');
    if (!slash) {
        snprintf(out, cap, "other");
        return;
    }
    size_t n = (size_t)(slash - name);
    if (n >= cap) n = cap - 1;
    memcpy(out, name, n);
    out[n] = 0;
}
