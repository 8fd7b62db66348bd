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
/* gpt-oss's SwiGLU constants (its config's swiglu_alpha and swiglu_limit; other values are refused) */
#define VC_OAI_ALPHA 1.702f
#define VC_OAI_LIMIT 7.0f

VC_HD float vc_act_f(float x, int kind) {
    switch (kind) {
    case VC_ACT_SILU: return x / (1.0f + expf(-x));
    case VC_ACT_GELU_TANH: return 0.5f * x * (1.0f + tanhf(VC_SQRT_2_OVER_PI * (x + 0.044715f * x * x * x)));
    case VC_ACT_GELU_ERF: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case VC_ACT_RELU: return x > 0 ? x : 0;
    case VC_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case VC_ACT_RELU2: return x > 0 ? x * x : 0; /* relu(x)^2 (Arcee) */
    case VC_ACT_OAI_GLU: /* ungated: the gate's part unclamped */
    case VC_ACT_QUICK_GELU: return x / (1.0f + expf(-VC_OAI_ALPHA * x));
    case VC_ACT_SOFTPLUS: return x > 20.0f ? x : log1pf(expf(x));
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
    case VC_ACT_OAI_GLU:
    case VC_ACT_QUICK_GELU: {
        float s = 1.0f / (1.0f + expf(-VC_OAI_ALPHA * x));
        return s * (1.0f + VC_OAI_ALPHA * x * (1.0f - s));
    }
    case VC_ACT_SOFTPLUS: return x > 20.0f ? 1.0f : 1.0f / (1.0f + expf(-x));
    default: return 1.0f;
    }
}

/* Gated units act(g) * u, and their derivatives in g and u. gpt-oss's (VC_ACT_OAI_GLU) clamps the gate from
 * above and the up projection on both sides at VC_OAI_LIMIT, then (u + 1) g sigmoid(alpha g); a clamped
 * input passes no gradient (torch.clamp's: inside the closed interval it does). */
VC_HD float vc_oai_clamp_u(float u) { return u < -VC_OAI_LIMIT ? -VC_OAI_LIMIT : u > VC_OAI_LIMIT ? VC_OAI_LIMIT : u; }

VC_HD float vc_gate_f(float g, float u, int kind) {
    if (kind != VC_ACT_OAI_GLU) return vc_act_f(g, kind) * u;
    float gc = g > VC_OAI_LIMIT ? VC_OAI_LIMIT : g;
    return vc_act_f(gc, kind) * (vc_oai_clamp_u(u) + 1.0f);
}

/* the gradients dy * d/dg and dy * d/du, rounded as PyTorch's autograd takes them: (dy * u) * act'(g) */
VC_HD float vc_gate_dg(float dy, float g, float u, int kind) {
    if (kind != VC_ACT_OAI_GLU) return dy * u * vc_act_d(g, kind);
    return g > VC_OAI_LIMIT ? 0.0f : dy * (vc_oai_clamp_u(u) + 1.0f) * vc_act_d(g, kind);
}

VC_HD float vc_gate_du(float dy, float g, float u, int kind) {
    if (kind != VC_ACT_OAI_GLU) return dy * vc_act_f(g, kind);
    if (u < -VC_OAI_LIMIT || u > VC_OAI_LIMIT) return 0.0f;
    return dy * vc_act_f(g > VC_OAI_LIMIT ? VC_OAI_LIMIT : g, kind);
}
/* xIELU (Apertus): a_p = softplus(ap), a_n = beta + softplus(an) given */
VC_HD float vc_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* Gated DeltaNet's log decay -exp(A_log) softplus(a + dt_bias); its derivative in a (= in dt_bias), and in A_log
 * (the value itself) in *dA. softplus' is 1 past PyTorch's threshold 20, as its backward says. */
VC_HD float vc_gdn_gate_f(float a, float A_log, float dt_bias) { return -expf(A_log) * vc_softplus(a + dt_bias); }
VC_HD float vc_gdn_gate_d(float a, float A_log, float dt_bias, float *dA) {
    float x = a + dt_bias, e = expf(A_log);
    *dA = -e * vc_softplus(x);
    return x > 20.0f ? -e : -e / (1.0f + expf(-x));
}

VC_HD float vc_xielu_f(float x, float a_p, float a_n, float beta, float eps) {
    return x > 0 ? a_p * x * x + beta * x : (expm1f(x < eps ? x : eps) - x) * a_n + beta * x;
}

/* dy/dx, and the parts dy/da_p (x > 0) and dy/da_n (x <= 0) */
VC_HD float vc_xielu_d(float x, float a_p, float a_n, float beta, float eps, float *dp, float *dn) {
    if (x > 0) {
        *dp = x * x, *dn = 0;
        return 2.0f * a_p * x + beta;
    }
    float m = x < eps ? x : eps;
    *dp = 0, *dn = expm1f(m) - x;
    return ((x < eps ? expf(m) : 0.0f) - 1.0f) * a_n + beta;
}
#endif
