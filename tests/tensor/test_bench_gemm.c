/* `verlc bench gemm` on a small Qwen2-shaped config (cpu in f32 and bf16, the sim backend in bf16): it runs every GEMM of a
 * layer and the LM head, forward and backward, prints a line per shape and the layer's total; bad arguments and a
 * missing or broken config give one line and a non-zero exit. */
#include "../cli_util.h"
#include "vc_test.h"
#include <stdio.h>
#include <string.h>

static char dir[256], out[400];

/* the command's output (up to 64 KiB) into buf; its exit status */
static int bench(char *buf, size_t cap, const char *args) {
    int rc = cli_sh("'%s' bench gemm %s > %s 2>&1", cli_bin(), args, out);
    FILE *f = fopen(out, "r");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = 0;
    if (f) fclose(f);
    return rc;
}

static int count(const char *s, const char *what) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what)) n++;
    return n;
}

int main(void) {
    cli_tmpdir(dir, sizeof dir, "bench_gemm");
    CHECK(cli_sh("mkdir -p %s", dir) == 0);
    snprintf(out, sizeof out, "%s/out.txt", dir);
    char cfg[320], bad[320];
    FILE *f;
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    snprintf(bad, sizeof bad, "%s/bad.json", dir);
    f = fopen(cfg, "w");
    CHECK(f != NULL);
    if (!f) return vc_test_done();
    fprintf(f, "{\"architectures\": [\"Qwen2ForCausalLM\"], \"model_type\": \"qwen2\", \"hidden_size\": 64, "
               "\"intermediate_size\": 96, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
               "\"num_key_value_heads\": 2, \"vocab_size\": 300, \"rms_norm_eps\": 1e-6}\n");
    fclose(f);
    f = fopen(bad, "w");
    if (f) {
        fputs("{\"model_type\": \"qwen2\", \"hidden_size\": ", f);
        fclose(f);
    }
    static char buf[65536];
    char args[800];
    const char *dev[][2] = { { "cpu", "fp32" }, { "sim", "bf16" }, { "cpu", "bf16" } };
    for (int d = 0; d < 3; d++) {
        snprintf(args, sizeof args, "--config %s --rows 3,17 --iters 1 --backward --device %s --precision %s", cfg,
                 dev[d][0], dev[d][1]);
        int rc = bench(buf, sizeof buf, args);
        /* 8 shapes x 3 products x 2 row counts; the layer's total per row count */
        CHECK_MSG(rc == 0 && count(buf, "TFLOP/s\n") >= 48 && count(buf, "one layer:") == 2 &&
                      strstr(buf, "lm_head") && strstr(buf, "M 17") && strstr(buf, "dW += dy^T x"),
                  "bench gemm on %s (%s): exit %d:\n%s", dev[d][0], dev[d][1], rc, buf);
        if (d >= 1) /* bf16 matmuls (operand_hold is the CUDA backend's alone: no such lines here) */
            CHECK_MSG(strstr(buf, "bf16 matmuls") && !strstr(buf, "operand hold of"), "bf16 on sim:\n%s", buf);
        /* the weights from their bf16 copies on the cpu (as a generate call reads them), not on sim or in f32 */
        CHECK_MSG(!strstr(buf, "from their bf16 copies") == (d < 2), "bench gemm on %s (%s): bf16 copies %s", dev[d][0],
                  dev[d][1], d < 2 ? "used" : "not used");
    }
    cli_quiet = 1;
    snprintf(args, sizeof args, "--config %s --rows 3,x", cfg);
    CHECK(bench(buf, sizeof buf, args) == 2 && strstr(buf, "--rows"));
    snprintf(args, sizeof args, "--rows 3");
    CHECK(bench(buf, sizeof buf, args) == 2 && strstr(buf, "usage"));
    snprintf(args, sizeof args, "--config %s/missing.json", dir);
    CHECK(bench(buf, sizeof buf, args) == 1 && strstr(buf, "missing.json"));
    snprintf(args, sizeof args, "--config %s", bad);
    CHECK_MSG(bench(buf, sizeof buf, args) == 1 && strstr(buf, "bad.json"), "a broken config: %s", buf);
    cli_sh("rm -rf %s", dir);
    return vc_test_done();
}
