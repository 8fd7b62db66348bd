/* The run report page: plots grouped by metric prefix, summary table, configuration. */
#include "verlc/report.h"
#include "verlc/json.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *GROUP_ORDER[] = { "val-core", "val-aux", "critic", "actor", "response_length", "prompt_length",
                                     "response", "training", "timing_s", "timing_per_token_ms", "perf", NULL };

static int group_rank(const char *g) {
    for (int i = 0; GROUP_ORDER[i]; i++)
        if (!strcmp(g, GROUP_ORDER[i])) return i;
    return 100 + (strcmp(g, "other") == 0);
}

static const char *CSS =
    "body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;color:#1d2330;"
    "background:#f6f7f9}h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 10px;"
    "border-bottom:1px solid #d5d9e0;padding-bottom:4px}.meta{color:#5a6270;font-size:13px}"
    ".grid{display:flex;flex-wrap:wrap;gap:12px}.card{background:#fff;border:1px solid #dde1e7;border-radius:6px;"
    "padding:4px}svg text{font-size:11px;fill:#3b4250}svg .tt{font-size:12.5px;font-weight:600;fill:#1d2330}"
    "svg .ax rect{stroke:#9aa2ae}svg .ax line{stroke:#9aa2ae}svg line.grid{stroke:#eceef2}"
    "svg .ln{fill:none;stroke:#2f6fd6;stroke-width:1.6}svg .pt{fill:#2f6fd6}svg .xl{fill:#6b7280}"
    "table{border-collapse:collapse;font-size:12.5px;background:#fff}td,th{border:1px solid #dde1e7;"
    "padding:3px 8px;text-align:right}th{background:#eef1f5}td:first-child,th:first-child{text-align:left}"
    "pre{background:#fff;border:1px solid #dde1e7;padding:10px;font-size:12px;overflow:auto;max-height:600px}"
    ".warn{background:#fff4e5;border:1px solid #f0c36d;padding:8px 12px;border-radius:6px;font-size:13px}";

typedef struct stats {
    double first, last, min, max;
    size_t n_finite, n_nonfinite;
} stats;

static stats series_stats(const vc_metric_series *s) {
    stats st = { NAN, NAN, INFINITY, -INFINITY, 0, 0 };
    for (size_t i = 0; i < s->n; i++) {
        double y = s->y[i];
        if (!isfinite(y)) {
            st.n_nonfinite++;
            continue;
        }
        if (!st.n_finite) st.first = y;
        st.last = y;
        if (y < st.min) st.min = y;
        if (y > st.max) st.max = y;
        st.n_finite++;
    }
    return st;
}

static void put_num(vc_strbuf *b, double v) {
    if (isfinite(v)) vc_sb_printf(b, "<td>%.6g</td>", v);
    else vc_sb_puts(b, "<td>&ndash;</td>");
}

/* Series indices ordered by (group rank, first appearance of the group, appearance). */
static size_t *plot_order(const vc_metrics *m) {
    size_t *ord = vc_calloc(m->n_series ? m->n_series : 1, sizeof *ord);
    int *rank = vc_calloc(m->n_series ? m->n_series : 1, sizeof *rank);
    if (!ord || !rank) {
        free(ord);
        free(rank);
        return NULL;
    }
    for (size_t i = 0; i < m->n_series; i++) {
        char g[128];
        vc_metric_group(m->series[i].name, g, sizeof g);
        int r = group_rank(g);
        if (r >= 100) { /* unknown groups in order of first appearance, "other" last */
            size_t first = i;
            for (size_t j = 0; j < i; j++) {
                char h[128];
                vc_metric_group(m->series[j].name, h, sizeof h);
                if (!strcmp(g, h)) {
                    first = j;
                    break;
                }
            }
            r = (r == 101 ? 1000000 : 1000) + (int)first;
        }
        rank[i] = r;
        ord[i] = i;
    }
    for (size_t i = 1; i < m->n_series; i++) { /* stable insertion sort by rank */
        size_t t = ord[i], j = i;
        while (j > 0 && rank[ord[j - 1]] > rank[t]) {
            ord[j] = ord[j - 1];
            j--;
        }
        ord[j] = t;
    }
    free(rank);
    return ord;
}

static void put_plots(vc_strbuf *b, const vc_metrics *m, const size_t *ord) {
    char cur[128] = "";
    for (size_t k = 0; k < m->n_series; k++) {
        const vc_metric_series *s = &m->series[ord[k]];
        char g[128];
        vc_metric_group(s->name, g, sizeof g);
        if (k == 0 || strcmp(g, cur)) {
            if (k) vc_sb_puts(b, "</div>\n");
            vc_sb_puts(b, "<h2>");
            vc_sb_escaped(b, g);
            vc_sb_puts(b, "/</h2>\n<div class=\"grid\">\n");
            snprintf(cur, sizeof cur, "%s", g);
        }
        vc_sb_puts(b, "<div class=\"card\">");
        vc_svg_plot(b, s, 400, 230);
        vc_sb_puts(b, "</div>\n");
    }
    if (m->n_series) vc_sb_puts(b, "</div>\n");
}

static void put_summary(vc_strbuf *b, const vc_metrics *m, const size_t *ord) {
    vc_sb_puts(b, "<h2>summary</h2>\n<div><table><tr><th>metric</th><th>points</th><th>first</th><th>last</th>"
                  "<th>min</th><th>max</th><th>non-finite</th></tr>\n");
    for (size_t k = 0; k < m->n_series; k++) {
        const vc_metric_series *s = &m->series[ord[k]];
        stats st = series_stats(s);
        vc_sb_puts(b, "<tr><td>");
        vc_sb_escaped(b, s->name);
        vc_sb_printf(b, "</td><td>%zu</td>", s->n);
        put_num(b, st.first);
        put_num(b, st.last);
        put_num(b, st.n_finite ? st.min : NAN);
        put_num(b, st.n_finite ? st.max : NAN);
        vc_sb_printf(b, "<td>%zu</td></tr>\n", st.n_nonfinite);
    }
    vc_sb_puts(b, "</table></div>\n");
}

static void put_warnings(vc_strbuf *b, const vc_metrics *m) {
    if (!m->n_skipped) return;
    vc_sb_printf(b, "<div class=\"warn\"><b>%zu malformed line%s skipped</b><ul>\n", m->n_skipped,
                 m->n_skipped == 1 ? "" : "s");
    for (size_t i = 0; i < m->n_bad; i++) {
        vc_sb_puts(b, "<li>");
        vc_sb_escaped(b, m->bad[i]);
        vc_sb_puts(b, "</li>\n");
    }
    if (m->n_bad < m->n_skipped) vc_sb_printf(b, "<li>&hellip; and %zu more</li>\n", m->n_skipped - m->n_bad);
    vc_sb_puts(b, "</ul></div>\n");
}

vc_status vc_report_html(const vc_metrics *m, const char *title, const char *config_name, const char *config_text,
                         char **html, size_t *len) {
    *html = NULL;
    vc_strbuf b = { 0 };
    size_t *ord = plot_order(m);
    if (!ord) return VC_ERR_NOMEM;
    vc_sb_puts(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>");
    vc_sb_escaped(&b, title);
    vc_sb_printf(&b, "</title><style>%s</style></head>\n<body>\n<h1>", CSS);
    vc_sb_escaped(&b, title);
    vc_sb_printf(&b, "</h1>\n<div class=\"meta\">%zu rows, %zu metrics &middot; written by verlc report</div>\n",
                 m->n_rows, m->n_series);
    put_warnings(&b, m);
    put_plots(&b, m, ord);
    put_summary(&b, m, ord);
    if (config_text) {
        vc_sb_puts(&b, "<h2>config (");
        vc_sb_escaped(&b, config_name ? config_name : "config");
        vc_sb_puts(&b, ")</h2>\n<pre>");
        vc_sb_escaped(&b, config_text);
        vc_sb_puts(&b, "</pre>\n");
    }
    vc_sb_puts(&b, "</body></html>\n");
    free(ord);
    if (b.oom) {
        free(b.p);
        return vc_fail(VC_ERR_NOMEM, "report: out of memory building the page");
    }
    *html = b.p;
    if (len) *len = b.n;
    return VC_OK;
}

/* Config text: config.json pretty-printed, else config.yaml as is; NULL when neither exists. */
static vc_status read_config(const char *run_dir, char **text, const char **name) {
    *text = NULL;
    *name = NULL;
    const char *names[2] = { "config.json", "config.yaml" };
    for (int i = 0; i < 2; i++) {
        char *path = vc_path_join(run_dir, names[i]);
        if (!path) return VC_ERR_NOMEM;
        if (!vc_file_exists(path)) {
            free(path);
            continue;
        }
        size_t n;
        vc_status st = vc_read_file(path, text, &n);
        free(path);
        if (st) return st;
        *name = names[i];
        if (i == 0) {
            cJSON *j = cJSON_Parse(*text);
            char *pretty = j ? vc_json_print(j, 1) : NULL;
            cJSON_Delete(j);
            if (pretty) {
                free(*text);
                *text = pretty;
            }
        }
        return VC_OK;
    }
    return VC_OK;
}

vc_status vc_report_write(const char *run_dir, const char *out_path) {
    char *metrics_path = vc_path_join(run_dir, "metrics.jsonl");
    char *default_out = out_path ? NULL : vc_path_join(run_dir, "report.html");
    char *config = NULL, *html = NULL;
    const char *config_name = NULL;
    vc_metrics *m = NULL;
    size_t len = 0;
    vc_status st = metrics_path && (out_path || default_out) ? VC_OK : VC_ERR_NOMEM;
    if (!st) st = vc_metrics_read(metrics_path, &m);
    if (!st) st = read_config(run_dir, &config, &config_name);
    if (!st) {
        char title[1024];
        snprintf(title, sizeof title, "verlc run: %s", run_dir);
        st = vc_report_html(m, title, config_name, config, &html, &len);
    }
    if (!st) st = vc_write_file_atomic(out_path ? out_path : default_out, html, len);
    free(html);
    free(config);
    vc_metrics_free(m);
    free(metrics_path);
    free(default_out);
    return st;
}
