/* verlc bench <forward|train|logprob|generate|tokenize|allreduce|gdn|gemm> ... */
#include "cli.h"
#include <stdio.h>
#include <string.h>

int vc_cmd_bench(int argc, char **argv) {
    const struct { const char *name; int (*fn)(int, char **); const char *help; } B[] = {
        { "forward", vc_bench_forward, "model forward: tokens/s, GFLOP/s, % of fp32 peak" },
        { "train", vc_bench_train, "forward + backward + AdamW: tokens/s, % of peak" },
        { "logprob", vc_bench_logprob, "log-prob forward over packed sequences" },
        { "generate", vc_bench_generate, "decode tokens/s at several batch sizes vs the bandwidth roofline" },
        { "tokenize", vc_bench_tokenize, "tokenizer MB/s, single thread and all threads" },
        { "allreduce", vc_bench_allreduce, "collective bus bandwidth (run under mpirun)" },
        { "gdn", vc_bench_gdn, "Gated DeltaNet's recurrence op, forward and backward: rows/s" },
        { "gemm", vc_bench_gemm, "a model shape's GEMMs per row count: ms, TFLOP/s, bf16 rounding's cost" },
    };
    int n = (int)(sizeof B / sizeof B[0]);
    if (argc >= 2)
        for (int i = 0; i < n; i++)
            if (!strcmp(argv[1], B[i].name)) {
                if (!B[i].fn) {
                    fprintf(stderr, "verlc: bench '%s' is not available in this build\n", argv[1]);
                    return 2;
                }
                return B[i].fn(argc - 1, argv + 1);
            }
    fprintf(stderr, "usage: verlc bench <name> [options]\n");
    for (int i = 0; i < n; i++)
        if (B[i].fn) fprintf(stderr, "  %-10s %s\n", B[i].name, B[i].help);
    return 2;
}
