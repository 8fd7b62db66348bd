/* verlc report: HTML report for a run directory. */
#include "cli.h"
#include "verlc/core.h"
#include "verlc/report.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int vc_cmd_report(int argc, char **argv) {
    const char *dir = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        if ((!strcmp(argv[i], "--out") || !strcmp(argv[i], "-o")) && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) dir = NULL, i = argc;
        else if (!dir && argv[i][0] != '-') dir = argv[i];
        else {
            fprintf(stderr, "verlc report: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!dir) {
        fprintf(stderr, "usage: verlc report RUN_DIR [--out FILE]\n"
                        "  reads RUN_DIR/metrics.jsonl (and config.json or config.yaml) and writes\n"
                        "  RUN_DIR/report.html: one self-contained page with a plot per metric\n");
        return 2;
    }
    vc_metrics *m = NULL;
    char *mp = vc_path_join(dir, "metrics.jsonl");
    if (mp && vc_metrics_read(mp, &m) == VC_OK) {
        for (size_t i = 0; i < m->n_bad; i++) fprintf(stderr, "verlc report: skipped %s\n", m->bad[i]);
        if (m->n_skipped > m->n_bad)
            fprintf(stderr, "verlc report: ... %zu malformed lines in all\n", m->n_skipped);
    }
    vc_metrics_free(m);
    free(mp);
    if (vc_report_write(dir, out) != VC_OK) {
        fprintf(stderr, "verlc report: %s\n", vc_last_error());
        return 1;
    }
    if (out) printf("%s\n", out);
    else printf("%s/report.html\n", dir);
    return 0;
}
