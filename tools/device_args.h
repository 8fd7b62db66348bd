/* --device and --precision, shared by the commands that run a model (check, generate, bench forward,
 * bench generate). Header-only so each command stays one file. */
#ifndef VC_TOOLS_DEVICE_ARGS_H
#define VC_TOOLS_DEVICE_ARGS_H
#include "tensor/backend.h"
#include "verlc/device.h"
#include "verlc/train.h"
#include <stdio.h>
#include <string.h>

#define VC_DEVICE_USAGE "[--device cpu|cuda[:N]|auto|sim] [--precision fp32|bf16]"

/* Selects the device (default cpu) and the matmul precision (default f32) before any model loads.
 * Returns 0, or the exit status after printing one line: 2 for a bad value, 1 for an unusable device. */
static inline int vc_cli_device_apply(const char *cmd, const char *device, const char *precision) {
    int prec;
    if (vc_train_precision_parse(precision, "--precision", &prec)) {
        fprintf(stderr, "verlc %s: %s\n", cmd, vc_last_error());
        return 2;
    }
    vc_status st = vc_device_select(device ? device : "cpu", "--device");
    if (st) {
        fprintf(stderr, "verlc %s: %s\n", cmd, vc_last_error());
        return st == VC_ERR_ARG ? 2 : 1;
    }
    vc_set_matmul_precision(prec);
    return 0;
}

static inline const char *vc_cli_precision_name(void) {
    return vc_matmul_precision() == VC_PREC_BF16 ? "bf16" : "f32";
}
#endif
