/* NVFP4 fake quantization's arithmetic (verl's _fp4_fake_quant_kernel), shared by the host (src/model/qat.c) and
 * the CUDA backend (src/backend/cuda/cuda_qat.cu) so that both give the same bits. */
#ifndef VERLC_MODEL_QAT_MATH_H
#define VERLC_MODEL_QAT_MATH_H
#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef __CUDACC__
#define VC_QAT_FN __host__ __device__ static inline
#else
#define VC_QAT_FN static inline
#endif

/* v >= 0 (at most 448) rounded to float8 e4m3fn: nearest, ties to even, subnormals in steps of 2^-9 */
VC_QAT_FN float vc_qat_e4m3_fn(float v) {
    if (!(v > 0)) return 0;
    int e;
    frexpf(v, &e);                    /* v = f 2^e, f in [0.5, 1): the binade's exponent e - 1 */
    int ex = e - 1 < -6 ? -6 : e - 1;
    float step = ldexpf(1.0f, ex - 3);
    return rintf(v / step) * step;
}

/* a >= 0 on FP4 E2M1's grid, ties to the even code, as verl's kernel compares (<= 0.25: 0, < 0.75: 0.5, <= 1.25: 1,
 * < 1.75: 1.5, <= 2.5: 2, < 3.5: 3, <= 5: 4, else 6), without branches */
VC_QAT_FN float vc_qat_fp4(float a) {
    return 0.5f * (float)((a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f)) + (float)((a > 2.5f) + (a >= 3.5f)) +
           2.0f * (float)(a > 5.0f);
}

/* x rounded to bf16 (nearest even) for finite x */
VC_QAT_FN float vc_qat_rd16(float x) {
    uint32_t u;
#ifdef __CUDA_ARCH__
    u = __float_as_uint(x);
#else
    memcpy(&u, &x, 4);
#endif
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    memcpy(&x, &u, 4);
    return x;
#endif
}

/* one group of `group` values: its scale from its largest |x|, then each value; gs = amax / 2688 and den =
 * 6 max(gs, 1e-12) as the kernel computes them; v: scratch of group floats (a constant group lets a compiler keep it
 * in registers) */
VC_QAT_FN void vc_qat_group_v(const float *xs, float *ys, int group, float gs, float den, int bf16, float *v) {
    float bm = 0;
    for (int k = 0; k < group; k++) v[k] = bf16 ? vc_qat_rd16(xs[k]) : xs[k];
    for (int k = 0; k < group; k++) bm = fabsf(v[k]) > bm ? fabsf(v[k]) : bm; /* (fmaxf: a libm call) */
    float s = vc_qat_e4m3_fn(fminf(bm / den, 448.0f)) * gs;
    if (!(s >= 1e-5f)) s = 1;
    for (int k = 0; k < group; k++) {
        float q = vc_qat_fp4(fabsf(v[k]) / s) * s;
        ys[k] = v[k] >= 0 ? q : -q;
    }
    if (bf16)
        for (int k = 0; k < group; k++) ys[k] = vc_qat_rd16(ys[k]);
}

/* vc_qat_group_v for groups of at most 256 */
VC_QAT_FN void vc_qat_group(const float *xs, float *ys, int group, float gs, float den, int bf16) {
    float v[256];
    vc_qat_group_v(xs, ys, group, gs, den, bf16, v);
}

/* gs and den of a module whose largest |x| is amax */
VC_QAT_FN void vc_qat_scales(float amax, float *gs, float *den) {
    *gs = amax / (6.0f * 448.0f);
    *den = 6.0f * (*gs > 0 ? *gs : 1e-12f);
}
#endif
