/* The model on other devices: every fixture checked on the sim device (backend memory behind poisoned
 * pointers, so any host dereference of weights, gradients, activations or the KV cache crashes) with the
 * f32 tolerances, and its export round trip; every fixture under bf16 matmul emulation on the cpu
 * within the stated bf16 tolerances (and visibly less exact than f32, so the emulation is on); a model
 * loaded on one backend refuses to run on another; `verlc check --device cuda` without a GPU fails
 * with the one-line hint. */
#include "tensor/backend.h"
#include "verlc/check.h"
#include "verlc/cuda.h"
#include "verlc/device.h"
#include "verlc/model.h"
#include "model_test_util.h"
#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

static int list_fixtures(char names[][64], int cap) {
    char root[512];
    snprintf(root, sizeof root, "%s/fixtures/models", vc_test_shared());
    DIR *d = opendir(root);
    CHECK_MSG(d != NULL, "cannot open %s", root);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) && n < cap)
        if (e->d_name[0] != '.') snprintf(names[n++], 64, "%s", e->d_name);
    if (d) closedir(d);
    return n;
}

static void fixture_dir(char *dir, size_t len, const char *name) {
    snprintf(dir, len, "%s/fixtures/models/%s", vc_test_shared(), name);
}

/* every check of every fixture passes on the active device; returns the worst logits error */
static double check_all(char names[][64], int n, const char *what) {
    double worst = 0;
    int passed = 0;
    for (int i = 0; i < n; i++) {
        char dir[1024];
        fixture_dir(dir, sizeof dir, names[i]);
        vc_check_result r;
        vc_status st = vc_check_model(dir, &r);
        int ran = 0;
        for (int k = 0; k < VC_CHECK_COUNT; k++) {
            ran += r.item[k].ran;
            if (r.item[k].ran && !r.item[k].ok)
                fprintf(stderr, "  %s %s %s: err %.3g > tol %.3g %s\n", what, names[i], vc_check_name(k),
                        r.item[k].max_abs_err, r.item[k].tol, r.item[k].detail);
        }
        CHECK_MSG(st == VC_OK && r.ok && ran >= 5, "%s %s: %s", what, names[i], st ? vc_last_error() : "a check failed");
        passed += st == VC_OK && r.ok;
        if (r.item[VC_CHECK_LOGITS].max_abs_err > worst) worst = r.item[VC_CHECK_LOGITS].max_abs_err;
    }
    printf("%s: %d/%d fixtures pass every check (worst logits error %.3g)\n", what, passed, n, worst);
    return worst;
}

/* load on the sim device, export, compare bytes with the source checkpoint */
static void roundtrip(const char *name) {
    char dir[1024], out[256];
    fixture_dir(dir, sizeof dir, name);
    snprintf(out, sizeof out, "/tmp/verlc_dev_rt_%d_%s", (int)getpid(), name);
    vc_model *m = NULL;
    CHECK_OK(vc_model_load(dir, &m));
    if (!m) return;
    CHECK(vc_model_backend(m) == vc_backend_sim());
    CHECK_OK(vc_model_save_hf(m, out, vc_model_cfg(m)->dtype));
    int used = 0, n_out = 0, same = export_matches(dir, out, name, &used, &n_out);
    CHECK_MSG(same && used > 0, "%s: export from the sim device differs", name);
    vc_model_free(m);
    remove_tree(out);
}

/* a model whose weights live in one backend's memory cannot run on another */
static void test_mismatch(const char *name) {
    char dir[1024];
    fixture_dir(dir, sizeof dir, name);
    CHECK_OK(vc_device_select("cpu", "test"));
    vc_model *m = NULL;
    CHECK_OK(vc_model_load(dir, &m));
    if (!m) return;
    CHECK_OK(vc_device_select("sim", "test"));
    vc_graph *g = vc_graph_new();
    int64_t cu[2] = { 0, 2 };
    int32_t ids[2] = { 1, 2 };
    vc_batch b = { 1, cu, ids };
    vc_tensor *h = vc_model_forward(m, g, &b, NULL);
    CHECK(h == NULL);
    CHECK_MSG(strstr(vc_last_error(), "cpu memory") && strstr(vc_last_error(), "sim"), "%s", vc_last_error());
    printf("mismatch: %s\n", vc_last_error());
    vc_graph_free(g);
    CHECK_OK(vc_device_select("cpu", "test"));
    vc_model_free(m);
}

static void test_cuda_hint(const char *name) {
    const char *bin = getenv("VERLC_BIN");
    if (!bin) {
        printf("VERLC_BIN not set: skipping the CLI check\n");
        return;
    }
    char dir[1024], cmd[1400], line[512] = "";
    fixture_dir(dir, sizeof dir, name);
    snprintf(cmd, sizeof cmd, "%s check --device cuda %s 2>&1", bin, dir);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    if (!p) return;
    int lines = 0;
    char buf[512];
    while (fgets(buf, sizeof buf, p)) {
        if (!lines) snprintf(line, sizeof line, "%s", buf);
        lines++;
    }
    int rc = pclose(p);
    CHECK_MSG(rc != 0, "verlc check --device cuda succeeded without a GPU");
    CHECK_MSG(lines == 1 && strstr(line, "--device cpu"), "expected a one-line hint, got %d lines: %s", lines, line);
    printf("cuda without a GPU: %s", line);
}

int main(void) {
    static char names[64][64];
    int n = list_fixtures(names, 64);
    CHECK_MSG(n >= 29, "found %d fixture models", n);
    CHECK(vc_backend_sim() != NULL); /* a strong reference links the sim backend in */

    CHECK_OK(vc_device_select("sim", "test"));
    check_all(names, n, "sim f32");
    roundtrip("qwen2_moe");
    roundtrip("internlm2");
    roundtrip("qwen3_bf16");

    CHECK_OK(vc_device_select("cpu", "test"));
    vc_set_matmul_precision(VC_PREC_BF16);
    printf("%s\n", vc_check_tolerances());
    double worst = check_all(names, n, "cpu bf16");
    CHECK_MSG(worst > 1e-2, "bf16 emulation looks inactive: worst logits error %g", worst);
    vc_set_matmul_precision(VC_PREC_F32);

    test_mismatch("llama");
    if (vc_cuda_device_count() == 0) test_cuda_hint("llama"); /* a build with a usable device (or the emulator) has no hint */
    return vc_test_done();
}
