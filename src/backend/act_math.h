/* Activation functions and their derivatives, shared by the CPU and CUDA backends so both compute
 * the same formulas. */
#ifndef VC_ACT_MATH_H
#define VC_ACT_MATH_H
#include "tensor/backend.h"
#include <math.h>

#ifdef __CUDACC__
#define VC_HD __host__ __device__ __forceinline__
#else
#define VC_HD static inline
#endif

#define VC_SQRT_2_OVER_PI 0.7978845608028654f

VC_HD float vc_act_f(float x, int kind) {
    switch (kind) {
    case VC_ACT_SILU: return x / (1.0f + expf(-x));
    case VC_ACT_GELU_TANH: return 0.5f * x * (1.0f + tanhf(VC_SQRT_2_OVER_PI * (x + 0.044715f * x * x * x)));
    case VC_ACT_GELU_ERF: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case VC_ACT_RELU: return x > 0 ? x : 0;
    case VC_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case VC_ACT_RELU2: return x > 0 ? x * x : 0; /* relu(x)^2 (Arcee) */
    default: return x;
    }
}

VC_HD float vc_act_d(float x, int kind) {
    switch (kind) {
    case VC_ACT_SILU: {
        float s = 1.0f / (1.0f + expf(-x));
        return s * (1.0f + x * (1.0f - s));
    }
    case VC_ACT_GELU_TANH: {
        float u = VC_SQRT_2_OVER_PI * (x + 0.044715f * x * x * x), t = tanhf(u);
        return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * VC_SQRT_2_OVER_PI * (1.0f + 3.0f * 0.044715f * x * x);
    }
    case VC_ACT_GELU_ERF:
        return 0.5f * (1.0f + erff(x * 0.70710678118654752f)) + x * 0.3989422804014327f * expf(-0.5f * x * x);
    case VC_ACT_RELU: return x > 0 ? 1.0f : 0.0f;
    case VC_ACT_SIGMOID: {
        float s = 1.0f / (1.0f + expf(-x));
        return s * (1.0f - s);
    }
    case VC_ACT_RELU2: return x > 0 ? 2.0f * x : 0.0f;
    default: return 1.0f;
    }
}
#endif
