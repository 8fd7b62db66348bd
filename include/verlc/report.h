/* verlc report: training metrics (metrics.jsonl, one JSON object per step with verl's metric names)
 * rendered as one self-contained HTML page with an SVG plot per metric. */
#ifndef VERLC_REPORT_H
#define VERLC_REPORT_H
#include "verlc/core.h"
#include <stddef.h>

typedef struct vc_metric_series {
    char *name;  /* "actor/pg_loss" */
    size_t n, cap;
    double *x;   /* step ("step" key, else the row number) */
    double *y;   /* NaN for null / non-finite values */
} vc_metric_series;

typedef struct vc_metrics {
    size_t n_rows;     /* rows read */
    size_t n_series;
    vc_metric_series *series; /* in first-appearance order */
    size_t n_skipped;  /* malformed lines */
    size_t n_bad;      /* messages kept (capped) */
    char **bad;        /* "metrics.jsonl:3: expected value at column 9" */
} vc_metrics;

/* Reads metrics.jsonl; malformed lines are skipped and reported, bare NaN/Infinity are accepted. */
vc_status vc_metrics_read(const char *path, vc_metrics **out);
void vc_metrics_free(vc_metrics *m);
const vc_metric_series *vc_metrics_find(const vc_metrics *m, const char *name);

/* Group of a metric: the text before the first '/', or "other". Groups are ordered as verl's
 * console lists them (val-core, val-aux, critic, actor, ..., timing_s, perf), unknown ones last. */
void vc_metric_group(const char *name, char *out, size_t cap);

/* One SVG line plot (title, axes with tick labels) appended to a growing string. */
typedef struct vc_strbuf {
    char *p;
    size_t n, cap;
    int oom;
} vc_strbuf;
void vc_sb_puts(vc_strbuf *b, const char *s);
void vc_sb_putn(vc_strbuf *b, const char *s, size_t n); /* n bytes of s (the text stays NUL-terminated) */
void vc_sb_printf(vc_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void vc_sb_escaped(vc_strbuf *b, const char *s); /* HTML/XML text escaping */
void vc_svg_plot(vc_strbuf *b, const vc_metric_series *s, int width, int height);

/* HTML page for metrics plus optional config text (config_name says which file it came from). */
vc_status vc_report_html(const vc_metrics *m, const char *title, const char *config_name, const char *config_text,
                         char **html, size_t *len);
/* RUN_DIR/metrics.jsonl (+ config.json / config.yaml when present) -> out_path
 * (RUN_DIR/report.html when NULL). */
vc_status vc_report_write(const char *run_dir, const char *out_path);

#endif
