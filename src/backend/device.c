/* Device selection (include/verlc/device.h). */
#include "verlc/device.h"
#include "tensor/backend.h"
#include "verlc/cuda.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char current[32] = "cpu";
static int gpu;

static vc_status select_cuda(int index, const char *who) {
    int n = vc_cuda_device_count();
    if (!vc_backend_cuda())
        return vc_fail(VC_ERR_DEVICE, "%s cuda: this verlc was built without the CUDA backend (use --device cpu)", who);
    if (n <= 0) return vc_fail(VC_ERR_DEVICE, "%s cuda: no usable NVIDIA GPU or driver (use --device cpu)", who);
    if (index >= n)
        return vc_fail(VC_ERR_DEVICE, "%s cuda:%d: only %d GPU%s visible (use cuda:0..%d or --device cpu)", who, index,
                       n, n == 1 ? "" : "s", n - 1);
    vc_status st = vc_cuda_init(index);
    if (st) return st;
    vc_set_backend(vc_backend_cuda());
    snprintf(current, sizeof current, "cuda:%d", index);
    gpu = 1;
    return VC_OK;
}

vc_status vc_device_select(const char *spec, const char *who) {
    if (!who) who = "--device";
    if (!spec || !*spec || !strcmp(spec, "cpu")) {
        vc_set_backend(NULL);
        snprintf(current, sizeof current, "cpu");
        gpu = 0;
        return VC_OK;
    }
    if (!strcmp(spec, "sim")) {
        vc_set_backend(vc_backend_sim());
        snprintf(current, sizeof current, "sim");
        gpu = 0;
        return VC_OK;
    }
    if (!strcmp(spec, "auto")) {
        if (vc_backend_cuda() && vc_cuda_device_count() > 0) return select_cuda(0, who);
        return vc_device_select("cpu", who);
    }
    if (!strncmp(spec, "cuda", 4) && (spec[4] == 0 || spec[4] == ':')) {
        int index = 0;
        if (spec[4] == ':') {
            char *end;
            long v = strtol(spec + 5, &end, 10);
            if (end == spec + 5 || *end || v < 0 || v > 1024)
                return vc_fail(VC_ERR_ARG, "%s %s: expected cuda or cuda:N", who, spec);
            index = (int)v;
        }
        return select_cuda(index, who);
    }
    return vc_fail(VC_ERR_ARG, "%s %s: unknown device (cpu, cuda, cuda:N, auto, sim)", who, spec);
}

const char *vc_device_name(void) { return current; }
int vc_device_is_gpu(void) { return gpu; }
