/* verlc check MODEL_DIR... [--json] [--device cpu|cuda[:N]|auto|sim] [--precision f32|bf16] */
#include "cli.h"
#include "verlc/json.h"
#include "device_args.h"
#include "verlc/check.h"
#include <cjson/cJSON.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>

static void print_json(const char *dir, const vc_check_result *r, const char *err) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", dir);
    cJSON_AddStringToObject(o, "arch", r->arch);
    cJSON_AddStringToObject(o, "model_type", r->model_type);
    cJSON_AddNumberToObject(o, "params", (double)r->params);
    cJSON_AddStringToObject(o, "dtype", r->dtype);
    cJSON_AddStringToObject(o, "device", vc_device_name());
    cJSON_AddStringToObject(o, "precision", vc_cli_precision_name());
    cJSON_AddBoolToObject(o, "ok", r->ok && !err);
    if (err) cJSON_AddStringToObject(o, "error", err);
    for (int i = 0; i < VC_CHECK_COUNT; i++) {
        if (!r->item[i].ran) continue;
        cJSON *c = cJSON_AddObjectToObject(o, vc_check_name(i));
        cJSON_AddBoolToObject(c, "ok", r->item[i].ok);
        cJSON_AddNumberToObject(c, "max_abs_err", r->item[i].max_abs_err);
        cJSON_AddNumberToObject(c, "tol", r->item[i].tol);
        if (r->item[i].detail[0]) cJSON_AddStringToObject(c, "detail", r->item[i].detail);
    }
    char *s = vc_json_print(o, 0);
    printf("%s\n", s);
    free(s);
    cJSON_Delete(o);
}

#define CHECK_USAGE "usage: verlc check MODEL_DIR... [--json] " VC_DEVICE_USAGE "\n"

int vc_cmd_check(int argc, char **argv) {
    int json = 0, n_dirs = 0, fails = 0;
    const char **dirs = calloc((size_t)argc, sizeof *dirs), *device = NULL, *precision = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--device") && i + 1 < argc) device = argv[++i];
        else if (!strcmp(argv[i], "--precision") && i + 1 < argc) precision = argv[++i];
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf(CHECK_USAGE);
            free(dirs);
            return 0;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "verlc check: unknown option %s\n", argv[i]);
            free(dirs);
            return 2;
        } else dirs[n_dirs++] = argv[i];
    }
    if (!n_dirs) {
        fprintf(stderr, CHECK_USAGE);
        free(dirs);
        return 2;
    }
    int rc = vc_cli_device_apply("check", device, precision);
    if (rc) {
        free(dirs);
        return rc;
    }
    if (!json) {
        printf("device %s, tolerances for %s\n", vc_device_name(), vc_check_tolerances());
        printf("%-20s %-12s %10s %-5s", "model", "arch", "params", "dtype");
        for (int i = 0; i < VC_CHECK_COUNT; i++) printf(" %-14s", vc_check_name(i));
        printf("\n");
    }
    for (int d = 0; d < n_dirs; d++) {
        vc_check_result r;
        vc_status st = vc_check_model(dirs[d], &r);
        const char *err = st ? vc_last_error() : NULL;
        if (st || !r.ok) fails++;
        if (json) {
            print_json(dirs[d], &r, err);
            continue;
        }
        char *copy = strdup(dirs[d]);
        printf("%-20s %-12s %10lld %-5s", basename(copy), r.arch, (long long)r.params, r.dtype);
        free(copy);
        if (err) {
            printf(" ❌ %s\n", err);
            continue;
        }
        for (int i = 0; i < VC_CHECK_COUNT; i++) {
            const vc_check_item *it = &r.item[i];
            if (!it->ran) printf(" %-14s", "-");
            else printf(" %s %-10.1e", it->ok ? "✅" : "❌", it->max_abs_err);
        }
        if (!r.has_reference) printf(" (no reference; greedy: %s)", r.smoke);
        for (int i = 0; i < VC_CHECK_COUNT; i++)
            if (r.item[i].ran && !r.item[i].ok && r.item[i].detail[0]) printf(" [%s: %s]", vc_check_name(i), r.item[i].detail);
        printf("\n");
    }
    free(dirs);
    if (!json) printf("%d of %d models passed\n", n_dirs - fails, n_dirs);
    return fails ? 1 : 0;
}
