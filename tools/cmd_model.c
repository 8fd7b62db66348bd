/* verlc inspect MODEL_DIR ; verlc init --config CONFIG.json --out DIR [--seed N] [--dtype bf16] */
#include "cli.h"
#include "verlc/model.h"
#include <stdlib.h>
#include <string.h>

int vc_cmd_inspect(int argc, char **argv) {
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: verlc inspect MODEL_DIR\n");
        return 2;
    }
    vc_model *m;
    if (vc_model_load(argv[1], &m)) {
        fprintf(stderr, "verlc: %s\n", vc_last_error());
        return 1;
    }
    vc_model_describe(m, stdout);
    vc_model_free(m);
    return 0;
}

int vc_cmd_init(int argc, char **argv) {
    const char *config = NULL, *out = NULL, *dt = "f32";
    uint64_t seed = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc) config = argv[++i];
        else if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) dt = argv[++i];
        else {
            fprintf(stderr, "usage: verlc init --config CONFIG.json --out DIR [--seed N] [--dtype f32|bf16|f16]\n");
            return 2;
        }
    }
    vc_dtype dtype;
    if (!config || !out) {
        fprintf(stderr, "usage: verlc init --config CONFIG.json --out DIR [--seed N] [--dtype f32|bf16|f16]\n");
        return 2;
    }
    if (vc_dtype_from_name(dt, &dtype) || (dtype != VC_F32 && dtype != VC_BF16 && dtype != VC_F16)) {
        fprintf(stderr, "verlc: --dtype '%s' is not one of f32, bf16, f16\n", dt);
        return 2;
    }
    vc_model *m;
    if (vc_model_init_random(config, seed, &m) || vc_model_save_hf(m, out, dtype)) {
        fprintf(stderr, "verlc: %s\n", vc_last_error());
        return 1;
    }
    const vc_model_config *c = vc_model_cfg(m);
    printf("wrote %s: %s, %lld parameters, %s, seed %llu\n", out, c->model_type,
           (long long)vc_model_param_count(m), dt, (unsigned long long)seed);
    vc_model_free(m);
    return 0;
}
