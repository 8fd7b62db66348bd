/* verlc export CKPT_OR_RUN_DIR --out DIR [--dtype bf16|f16|f32] */
#include "cli.h"
#include "verlc/train.h"
#include <string.h>

int vc_cmd_export(int argc, char **argv) {
    const char *src = NULL, *out = NULL, *dt = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) dt = argv[++i];
        else if (argv[i][0] != '-' && !src) src = argv[i];
        else src = out = NULL, i = argc;
    }
    if (!src || !out) {
        fprintf(stderr, "usage: verlc export CKPT_DIR|RUN_DIR --out DIR [--dtype bf16|f16|f32]\n"
                        "Writes a Hugging Face directory (base model layout and config, trained weights); a run\n"
                        "directory exports its latest checkpoint; the dtype defaults to the base checkpoint's.\n");
        return 2;
    }
    int dtype = -1;
    if (dt) {
        vc_dtype d;
        if (vc_dtype_from_name(dt, &d) || (d != VC_F32 && d != VC_BF16 && d != VC_F16)) {
            fprintf(stderr, "verlc export: --dtype '%s' is not one of f32, bf16, f16\n", dt);
            return 2;
        }
        dtype = (int)d;
    }
    if (vc_train_export(src, out, dtype)) {
        fprintf(stderr, "verlc export: %s\n", vc_last_error());
        return 1;
    }
    printf("exported %s -> %s\n", src, out);
    return 0;
}
