/* Model compatibility check against Hugging Face reference outputs (reference.safetensors). */
#ifndef VERLC_CHECK_H
#define VERLC_CHECK_H
#include "verlc/core.h"
#include <stdint.h>

enum { VC_CHECK_LOGITS, VC_CHECK_LOGPROBS, VC_CHECK_ENTROPY, VC_CHECK_LOSS, VC_CHECK_GRADS, VC_CHECK_GREEDY,
       VC_CHECK_PACKED, VC_CHECK_COUNT };

typedef struct vc_check_item {
    int ran, ok;
    double max_abs_err, tol;
    char detail[160]; /* e.g. the worst gradient tensor */
} vc_check_item;

typedef struct vc_check_result {
    char arch[32], model_type[64], dtype[16];
    int64_t params;
    int has_reference;
    int ok;
    double seconds;
    char smoke[64]; /* without a reference: the greedy tokens generated */
    vc_check_item item[VC_CHECK_COUNT];
} vc_check_result;

const char *vc_check_name(int i);
/* One line stating the tolerances vc_check_model applies under the current matmul precision
 * (vc_set_matmul_precision: f32, or bf16 with wider, stated tolerances). */
const char *vc_check_tolerances(void);
/* Loads DIR on the active device (vc_device_select), runs forward/backward/greedy and compares with
 * DIR/reference.safetensors when present (greedy is teacher-forced on the reference tokens).
 * A non-OK status means the model could not be checked at all (load failure). */
vc_status vc_check_model(const char *dir, vc_check_result *r);
#endif
