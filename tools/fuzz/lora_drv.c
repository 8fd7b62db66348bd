/* A random LoRA adapter on a checkpoint, for PEFT's merge to be compared with verlc's (tools/fixtures/
 * check_peft_vl_merge.py): adapters of rank R (alpha A) on TARGETS ("all-linear" or a comma list), B drawn from a
 * normal of 0.3 (A as verlc draws it), written by vc_model_save_hf_merged (OUT: the merged export, OUT/lora_adapter).
 * usage: lora_drv MODEL_DIR OUT R A [TARGETS] */
#include "verlc/model.h"
#include "verlc/rng.h"
#include "verlc/tensor.h"
#include "verlc/core.h"
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: lora_drv MODEL_DIR OUT R A [TARGETS]\n");
        return 2;
    }
    vc_model *m = NULL;
    vc_status st = vc_model_load(argv[1], &m);
    if (!st) st = vc_model_lora_init(m, atoi(argv[3]), atof(argv[4]), argc > 5 ? argv[5] : "all-linear", 1);
    vc_tensor *const *p = NULL;
    int n = st ? 0 : vc_model_lora_params(m, &p);
    for (int i = 1; !st && i < n; i += 2) { /* the B of each adapter */
        float *w = malloc((size_t)p[i]->n * sizeof(float));
        for (int64_t j = 0; w && j < p[i]->n; j++) w[j] = 0.3f * vc_rng_normal(5, (uint64_t)i, (uint64_t)j, 0);
        st = w ? vc_tensor_write(p[i], w) : VC_ERR_NOMEM;
        free(w);
    }
    if (!st) st = vc_model_save_hf_merged(m, argv[2], VC_F32);
    if (st) fprintf(stderr, "lora_drv: %s\n", vc_last_error());
    else printf("%s: %d adapter tensors\n", argv[2], n);
    vc_model_free(m);
    return st ? 1 : 0;
}
