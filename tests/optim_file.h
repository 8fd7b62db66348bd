/* Test helper: the AdamW moments in a checkpoint's optim.bin (src/train/optim.c's layout: "VCADAMW1", the tensor
 * count, the step, then per tensor its size n, n first moments and n second moments, f32). */
#ifndef VC_TEST_OPTIM_FILE_H
#define VC_TEST_OPTIM_FILE_H
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Counts, over the file's moments, the first (n_bf16[0]) and second (n_bf16[1]) moments that are not 0 and that a
 * bf16 holds exactly, and those that are not 0 at all (n_nonzero[0], [1]). 0, or -1 when the file is not such a
 * state. */
static inline int optim_file_moments(const char *path, long n_bf16[2], long n_nonzero[2]) {
    FILE *f = fopen(path, "rb");
    char magic[8];
    uint64_t np = 0, n = 0;
    int64_t step = 0;
    int rc = f && fread(magic, 1, 8, f) == 8 && !memcmp(magic, "VCADAMW1", 8) && fread(&np, 8, 1, f) == 1 &&
             fread(&step, 8, 1, f) == 1 ? 0 : -1;
    n_bf16[0] = n_bf16[1] = n_nonzero[0] = n_nonzero[1] = 0;
    for (uint64_t t = 0; !rc && t < np; t++) {
        if (fread(&n, 8, 1, f) != 1) rc = -1;
        for (int which = 0; !rc && which < 2; which++)
            for (uint64_t i = 0; !rc && i < n; i++) {
                uint32_t u;
                if (fread(&u, 4, 1, f) != 1) rc = -1;
                else if (u << 1) { /* not +-0 */
                    n_nonzero[which]++;
                    n_bf16[which] += (u & 0xffffu) == 0;
                }
            }
    }
    if (!rc && fgetc(f) != EOF) rc = -1;
    if (f) fclose(f);
    return rc;
}
#endif
