/* libFuzzer harness for the safetensors reader (not a CTest program; scripts/fuzz.sh builds and runs it). Input: a
 * whole file, opened as a checkpoint; every tensor of up to 64 Ki elements is converted to f32 and looked up by name,
 * every metadata entry read. */
#include "verlc/safetensors.h"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/vc_fuzz_st_%d.safetensors", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    vc_checkpoint *ck = NULL;
    if (!vc_ckpt_open(path, &ck)) {
        for (int i = 0; i < vc_ckpt_count(ck); i++) {
            const vc_st_tensor *t = vc_ckpt_at(ck, i);
            const int64_t n = vc_st_tensor_numel(t);
            float *d = n >= 0 && n < (1 << 16) ? malloc((size_t)(n ? n : 1) * sizeof(float)) : NULL;
            if (d) vc_st_tensor_to_f32(t, d);
            free(d);
            vc_ckpt_find(ck, t->name);
        }
        for (int i = 0; i < vc_ckpt_metadata_count(ck); i++) {
            const char *k, *v;
            vc_ckpt_metadata_at(ck, i, &k, &v);
        }
        vc_ckpt_close(ck);
    }
    unlink(path);
    return 0;
}
