/* CUDA entries of quantization-aware training (src/model/qat.c): each module's largest |x| and its NVFP4 fake
 * quantization in place, with the host's arithmetic (src/model/qat_math.h): the same bits. */
#include "cuda_internal.h"
#include "model/qat_math.h"

#define QT 256 /* threads per block */

/* block b's largest |x| of x[0, n) (grid-stride) into part[b] */
__global__ void k_absmax(const float *x, int64_t n, int bf16, float *part) {
    __shared__ float sh[QT];
    float a = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float v = fabsf(bf16 ? vc_qat_rd16(x[i]) : x[i]);
        a = v > a ? v : a;
    }
    sh[threadIdx.x] = a;
    __syncthreads();
    for (int s = QT / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s && sh[threadIdx.x + s] > sh[threadIdx.x]) sh[threadIdx.x] = sh[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) part[blockIdx.x] = sh[0];
}

/* one thread a group; G > 0: groups of G (NVFP4's 16) in registers, else of `group` through local memory */
template <int G>
__global__ void k_fake_fp4(float *x, int64_t groups, int group, float gs, float den, int bf16) {
    for (int64_t g = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; g < groups; g += (int64_t)gridDim.x * blockDim.x) {
        if (G > 0) {
            float v[G > 0 ? G : 1];
            vc_qat_group_v(x + g * G, x + g * G, G, gs, den, bf16, v);
        } else {
            vc_qat_group(x + g * group, x + g * group, group, gs, den, bf16);
        }
    }
}

static unsigned absmax_blocks(size_t n) {
    size_t b = (n + (size_t)QT * 8 - 1) / ((size_t)QT * 8);
    return (unsigned)(b < 1 ? 1 : b > 512 ? 512 : b);
}

extern "C" vc_status vc_cu_absmax_many(const float *const *x, const size_t *sizes, size_t n, int bf16, float *out) {
    const char *op = "QAT absmax";
    if (!vc_cu_begin(op)) return vc_cuda_error();
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += absmax_blocks(sizes[i]);
    float *part = (float *)vc_cu_scratch((total + 1) * sizeof(float), op);
    float *host = (float *)malloc((total + 1) * sizeof(float));
    if (!part || !host) {
        vc_cu_scratch_free(part);
        free(host);
        return part ? vc_fail(VC_ERR_NOMEM, "%s: no host memory", op) : vc_cuda_error();
    }
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned nb = absmax_blocks(sizes[i]);
        k_absmax<<<nb, QT, 0, vc_cu_stream()>>>(x[i], (int64_t)sizes[i], bf16, part + at);
        at += nb;
    }
    vc_status st = vc_cu_end(op) ? VC_OK : vc_cuda_error();
    if (st == VC_OK && total) st = vc_cuda_d2h(host, part, total * sizeof(float));
    at = 0;
    for (size_t i = 0; st == VC_OK && i < n; i++) { /* (max is exact in any order) */
        unsigned nb = absmax_blocks(sizes[i]);
        float a = 0;
        for (unsigned b = 0; b < nb; b++) a = host[at + b] > a ? host[at + b] : a;
        out[i] = a;
        at += nb;
    }
    vc_cu_scratch_free(part);
    free(host);
    return st;
}

extern "C" void vc_cu_fake_fp4(float *x, int64_t rows, int64_t cols, int group, float amax, int bf16) {
    const char *op = "QAT fake quantization";
    if (!vc_cu_begin(op) || rows <= 0 || cols <= 0 || group <= 0) return;
    float gs, den;
    vc_qat_scales(amax, &gs, &den);
    int64_t groups = rows * (cols / group);
    if (group == 16) k_fake_fp4<16><<<vc_cu_blocks(groups, QT), QT, 0, vc_cu_stream()>>>(x, groups, group, gs, den, bf16);
    else k_fake_fp4<0><<<vc_cu_blocks(groups, QT), QT, 0, vc_cu_stream()>>>(x, groups, group, gs, den, bf16);
    vc_cu_end(op);
}
