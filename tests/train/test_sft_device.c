/* verlc sft on the sim device (poisoned backend pointers) against the cpu device: the same per-step
 * losses, gradient norms and validation loss (bitwise: metrics.jsonl numbers compared exactly, timing
 * aside), the same checkpoint weights and the same `verlc export` output; --precision bf16's first-step
 * loss is within 2e-3 of f32's; the startup lines name the device and precision. */
#include "sft_util.h"

int main(void) {
    sft_start("test_sft_device");
    CHECK(sh("head -4 %3$s/data/gsm8k/train.jsonl > %2$s/train.jsonl && sed -n 11p %3$s/data/gsm8k/train.jsonl > "
             "%2$s/val.jsonl%4$s", NULL) == 0);
    const char *common = "%1$s sft --model %2$s/model --tokenizer %3$s/fixtures/tokenizers/qwen3 --train %2$s/train.jsonl "
                         "--val %2$s/val.jsonl --prompt-key question --response-key answer max_length=64 "
                         "truncation=left train_batch_size=2 micro_batch_size=1 lr=1e-2 epochs=1 seed=5 "
                         "warmup_steps=0 threads=1 quiet=0 save_freq=2 %4$s";
    const char *runs[3][2] = { { "cpu", "fp32" }, { "sim", "fp32" }, { "cpu", "bf16" } };
    for (int i = 0; i < 3; i++) {
        char extra[512];
        snprintf(extra, sizeof extra, "--device %s --precision %s --out %s/%s_%s > %s/%s_%s.log 2>&1", runs[i][0],
                 runs[i][1], TMP, runs[i][0], runs[i][1], TMP, runs[i][0], runs[i][1]);
        CHECK(sh(common, extra) == 0);
    }
    CHECK(sh("grep -q 'verlc: device sim (trainer.device=sim), matmul precision f32' %2$s/sim_fp32.log%4$s", NULL) == 0);
    CHECK(sh("grep -q 'matmul precision bf16' %2$s/cpu_bf16.log%4$s", NULL) == 0);
    CHECK(sh("grep -q 'memory plan (device sim)' %2$s/sim_fp32.log%4$s", NULL) == 0);
    /* numbers of every metrics line, timing, throughput and MFU removed, must match exactly */
    CHECK(sh("for d in cpu_fp32 sim_fp32; do sed -E 's/, \"(perf\\/[a-z_]+|train\\/mfu)\": [^,}]+//g' %2$s/$d/metrics.jsonl > "
             "%2$s/$d.m; done; cmp %2$s/cpu_fp32.m %2$s/sim_fp32.m%4$s", NULL) == 0);
    CHECK(sh("test $(grep -c train/loss %2$s/cpu_fp32.m) -eq 2 && grep -q val/loss %2$s/cpu_fp32.m%4$s", NULL) == 0);
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/cpu_fp32/step_2/model.safetensors", TMP);
    snprintf(b, sizeof b, "%s/sim_fp32/step_2/model.safetensors", TMP);
    CHECK_MSG(cli_file_eq(a, b), "sim checkpoint weights differ from cpu");
    CHECK(sh("%1$s export %2$s/cpu_fp32 --out %2$s/hf_cpu > /dev/null && %1$s export %2$s/sim_fp32 --out %2$s/hf_sim "
             "> /dev/null && cmp %2$s/hf_cpu/model.safetensors %2$s/hf_sim/model.safetensors%4$s", NULL) == 0);
    /* bf16: the first-step loss within 2e-3 (relative) of f32 (that bf16 trains: test_device) */
    CHECK(sh("l0=$(grep -o '\"train/loss\": [0-9.e+-]*' %2$s/cpu_bf16/metrics.jsonl | head -1 | cut -d' ' -f2); "
             "f0=$(grep -o '\"train/loss\": [0-9.e+-]*' %2$s/cpu_fp32/metrics.jsonl | head -1 | cut -d' ' -f2); "
             "awk -v a=$l0 -v f=$f0 'BEGIN { d = a - f; if (d < 0) d = -d; exit !(a != f && d < 2e-3 * f) }'%4$s",
             NULL) == 0);
    if (!vc_t_fail) sh("rm -rf %2$s%4$s", NULL);
    return vc_test_done();
}
