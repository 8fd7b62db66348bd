#include "verlc/core.h"
#include "verlc/report.h"
#include "vc_test.h"
#include <sys/stat.h>
#include <unistd.h>

static size_t count(const char *hay, const char *needle) {
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

static void write_text(const char *dir, const char *name, const char *text) {
    char *p = vc_path_join(dir, name);
    FILE *f = fopen(p, "w");
    fputs(text, f);
    fclose(f);
    free(p);
}

static void remove_in(const char *dir, const char *name) {
    char *p = vc_path_join(dir, name);
    unlink(p);
    free(p);
}

static const char *METRICS =
    "{\"step\": 1, \"actor/pg_loss\": 0.5, \"critic/score/mean\": 0.1, \"timing_s/step\": 10.0, \"perf/throughput\": 900}\n"
    "{\"step\": 2, \"actor/pg_loss\": 0.4, \"critic/score/mean\": 0.2, \"timing_s/step\": 11.0, \"perf/throughput\": 950,"
    " \"val-core/openai/gsm8k/acc/mean@1\": 0.31}\n"
    "{\"step\": 3, \"actor/pg_loss\": , \"critic/score/mean\": 0.3}\n"
    "\n"
    "{\"step\": 4, \"actor/pg_loss\": NaN, \"critic/score/mean\": 0.45, \"timing_s/step\": 9.5, \"perf/throughput\": 1000,"
    " \"note\": \"text is not plotted\", \"weird<name>&\": 1}\n"
    "{\"step\": 5, \"actor/pg_loss\": 0.2, \"critic/score/mean\": 0.5, \"timing_s/step\": 9.0, \"perf/throughput\": 1010,"
    " \"val-core/openai/gsm8k/acc/mean@1\": 0.42, \"weird<name>&\": 2}\n";

static void test_metrics(const char *dir) {
    write_text(dir, "metrics.jsonl", METRICS);
    char *path = vc_path_join(dir, "metrics.jsonl");
    vc_metrics *m = NULL;
    CHECK_OK(vc_metrics_read(path, &m));
    free(path);
    if (!m) return;
    CHECK(m->n_rows == 4 && m->n_skipped == 1 && m->n_bad == 1);
    CHECK_MSG(m->n_bad && strstr(m->bad[0], "metrics.jsonl:3: expected value at column 30"), "%s",
              m->n_bad ? m->bad[0] : "");
    CHECK(m->n_series == 6);
    const vc_metric_series *s = vc_metrics_find(m, "actor/pg_loss");
    CHECK(s && s->n == 4 && s->x[3] == 5 && s->y[3] == 0.2 && isnan(s->y[2]));
    s = vc_metrics_find(m, "val-core/openai/gsm8k/acc/mean@1");
    CHECK(s && s->n == 2 && s->x[0] == 2 && s->x[1] == 5);
    CHECK(vc_metrics_find(m, "note") == NULL && vc_metrics_find(m, "step") == NULL);
    char g[64];
    vc_metric_group("val-core/openai/gsm8k/acc/mean@1", g, sizeof g);
    CHECK(!strcmp(g, "val-core"));
    vc_metric_group("loss", g, sizeof g);
    CHECK(!strcmp(g, "other"));
    vc_metrics_free(m);
}

static void test_page(const char *dir) {
    write_text(dir, "config.json", "{\"algorithm\": {\"adv_estimator\": \"grpo\"}, \"note\": \"<b>\"}");
    CHECK_OK(vc_report_write(dir, NULL));
    char *path = vc_path_join(dir, "report.html"), *html = NULL;
    size_t n;
    CHECK_OK(vc_read_file(path, &html, &n));
    free(path);
    if (!html) return;
    CHECK(!strncmp(html, "<!DOCTYPE html>", 15));
    CHECK_MSG(count(html, "<svg") == 6, "%zu svgs", count(html, "<svg"));
    CHECK(count(html, "<svg") == count(html, "</svg>"));
    CHECK(count(html, "<div") == count(html, "</div>"));
    CHECK(count(html, "<table") == count(html, "</table>"));
    CHECK(count(html, "<tr>") == count(html, "</tr>") && count(html, "<tr>") == 7); /* header + 6 metrics */
    CHECK(count(html, "<script") == 0 && count(html, "src=") == 0 && count(html, "href") == 0);
    CHECK(count(html, "http://") == 6); /* only the SVG namespace */
    CHECK(strstr(html, "metrics.jsonl:3: expected value at column 30") != NULL);
    CHECK(strstr(html, "weird&lt;name&gt;&amp;") != NULL && strstr(html, "weird<name>") == NULL);
    CHECK(strstr(html, "&quot;adv_estimator&quot;") != NULL && strstr(html, "&lt;b&gt;") != NULL);
    /* group order: val-core, critic, actor, timing_s, perf, other */
    const char *order[] = { "<h2>val-core/", "<h2>critic/", "<h2>actor/", "<h2>timing_s/", "<h2>perf/", "<h2>other/" };
    const char *prev = html;
    for (int i = 0; i < 6; i++) {
        const char *at = strstr(html, order[i]);
        CHECK_MSG(at && at > prev, "group %s out of order", order[i]);
        if (at) prev = at;
    }
    /* tick labels and a polyline per plotted series with finite values */
    CHECK(count(html, "<polyline") >= 6);
    CHECK(strstr(html, ">0.50</text>") != NULL || strstr(html, ">0.5</text>") != NULL);
    free(html);

    /* yaml config and a custom output path through the CLI */
    remove_in(dir, "config.json");
    write_text(dir, "config.yaml", "trainer:\n  total_epochs: 15\n");
    const char *bin = getenv("VERLC_BIN");
    if (bin) {
        char cmd[1024], *out = vc_path_join(dir, "r2.html");
        snprintf(cmd, sizeof cmd, "%s report %s --out %s > /dev/null 2>&1", bin, dir, out);
        CHECK(system(cmd) == 0);
        CHECK_OK(vc_read_file(out, &html, &n));
        CHECK(html && strstr(html, "total_epochs: 15") && strstr(html, "config (config.yaml)"));
        free(html);
        unlink(out);
        free(out);
        snprintf(cmd, sizeof cmd, "%s report /nonexistent/run > /dev/null 2>&1", bin);
        CHECK(system(cmd) != 0);
    }
    remove_in(dir, "config.yaml");
    remove_in(dir, "report.html");
}

static void test_edge_cases(const char *dir) {
    /* a constant series, a single point and an all-NaN series still render */
    write_text(dir, "metrics.jsonl", "{\"step\": 1, \"a/const\": 2, \"a/nan\": NaN, \"b/one\": 7}\n"
                                     "{\"step\": 2, \"a/const\": 2, \"a/nan\": null}\n");
    CHECK_OK(vc_report_write(dir, NULL));
    char *path = vc_path_join(dir, "report.html"), *html = NULL;
    size_t n;
    CHECK_OK(vc_read_file(path, &html, &n));
    CHECK(html && count(html, "<svg") == 3 && strstr(html, "no finite values") != NULL);
    free(html);
    unlink(path);
    free(path);
    /* empty file: a page with no plots */
    write_text(dir, "metrics.jsonl", "");
    CHECK_OK(vc_report_write(dir, NULL));
    remove_in(dir, "report.html");
    remove_in(dir, "metrics.jsonl");
    CHECK(vc_report_write(dir, NULL) == VC_ERR_IO);
    CHECK(strstr(vc_last_error(), "metrics.jsonl") != NULL);
}

int main(void) {
    char dir[] = "/tmp/vc_report_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    test_metrics(dir);
    test_page(dir);
    test_edge_cases(dir);
    rmdir(dir);
    return vc_test_done();
}
