/* Device and matmul precision of a training run (verl's trainer.device and fsdp_config.mixed_precision):
 * chosen once, before the first model loads, and printed in the startup lines. */
#include "tensor/backend.h"
#include "verlc/device.h"
#include "verlc/train.h"
#include <string.h>
#include <strings.h>

static int is_f32(const char *s) {
    return !strcasecmp(s, "f32") || !strcasecmp(s, "fp32") || !strcasecmp(s, "float32") || !strcasecmp(s, "float");
}

static int is_bf16(const char *s) { return !strcasecmp(s, "bf16") || !strcasecmp(s, "bfloat16"); }

vc_status vc_train_precision_parse(const char *s, const char *who, int *prec) {
    if (!who) who = "--precision";
    if (!s || !*s || is_f32(s)) {
        *prec = VC_PREC_F32;
        return VC_OK;
    }
    if (is_bf16(s)) {
        *prec = VC_PREC_BF16;
        return VC_OK;
    }
    if (!strcasecmp(s, "fp16") || !strcasecmp(s, "f16") || !strcasecmp(s, "float16"))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s=%s: fp16 compute is not supported (use bf16 or fp32)", who, s);
    return vc_fail(VC_ERR_ARG, "%s=%s: expected fp32 or bf16", who, s);
}

/* reduce_dtype / buffer_dtype: verlc reduces gradients and keeps buffers in f32; a narrower type (verl's Ascend
 * scripts ask for bf16 reductions) runs in f32 with a warning, the same update more precisely */
static vc_status check_f32(const char *s, const char *who) {
    if (!s || !*s || is_f32(s)) return VC_OK;
    if (is_bf16(s) || !strcasecmp(s, "fp16") || !strcasecmp(s, "float16")) {
        vc_warn("%s=%s: verlc keeps gradient reductions and buffers in fp32 (more precise than asked)", who, s);
        return VC_OK;
    }
    return vc_fail(VC_ERR_ARG, "%s=%s: expected fp32, bf16 or fp16", who, s);
}

const char *vc_train_precision_name(int prec) { return prec == VC_PREC_BF16 ? "bf16" : "f32"; }

vc_status vc_train_setup_device(const vc_train_device *d, FILE *log) {
    const char *dw = d->device_key ? d->device_key : "--device";
    const char *pw = d->precision_key ? d->precision_key : "--precision";
    int prec = VC_PREC_F32;
    char rw[160], bw[160];
    snprintf(rw, sizeof rw, "%s", d->reduce_key ? d->reduce_key : "reduce_dtype");
    snprintf(bw, sizeof bw, "%s", d->buffer_key ? d->buffer_key : "buffer_dtype");
    vc_status st = vc_train_precision_parse(d->param_dtype, pw, &prec);
    if (!st) st = check_f32(d->reduce_dtype, rw);
    if (!st) st = check_f32(d->buffer_dtype, bw);
    if (st) return st;
    const char *spec = d->device && *d->device ? d->device : "auto";
    if ((st = vc_device_select(spec, dw))) return st;
    vc_set_matmul_precision(prec);
    if (log)
        fprintf(log, "verlc: device %s (%s=%s), matmul precision %s%s\n", vc_device_name(), dw, spec,
                vc_train_precision_name(prec),
                prec == VC_PREC_BF16 ? " (bf16 GEMM inputs, f32 accumulation; master weights, gradients, optimiser "
                                       "state and reductions f32)"
                                     : "");
    return VC_OK;
}
