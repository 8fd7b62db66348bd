/* dtype names and conversions. */
#include "verlc/dtype.h"
#include <math.h>

static const struct { const char *name; size_t size; } DT[VC_DTYPE_COUNT] = {
    [VC_F32] = { "F32", 4 },  [VC_BF16] = { "BF16", 2 },   [VC_F16] = { "F16", 2 },
    [VC_I32] = { "I32", 4 },  [VC_I64] = { "I64", 8 },     [VC_F8E4M3] = { "F8_E4M3", 1 },
    [VC_U8] = { "U8", 1 },    [VC_BOOL] = { "BOOL", 1 },   [VC_F64] = { "F64", 8 },
    [VC_I8] = { "I8", 1 },    [VC_I16] = { "I16", 2 },
};

size_t vc_dtype_size(vc_dtype t) { return (unsigned)t < VC_DTYPE_COUNT ? DT[t].size : 0; }
const char *vc_dtype_name(vc_dtype t) { return (unsigned)t < VC_DTYPE_COUNT ? DT[t].name : "?"; }

int vc_dtype_from_name(const char *s, vc_dtype *out) {
    for (int i = 0; i < VC_DTYPE_COUNT; i++)
        if (!strcmp(s, DT[i].name)) { *out = (vc_dtype)i; return 0; }
    static const struct { const char *n; vc_dtype t; } torch[] = {
        { "float32", VC_F32 }, { "float", VC_F32 }, { "bfloat16", VC_BF16 }, { "float16", VC_F16 },
        { "half", VC_F16 },    { "int32", VC_I32 }, { "int64", VC_I64 },     { "float64", VC_F64 },
        { "f32", VC_F32 },     { "bf16", VC_BF16 }, { "f16", VC_F16 },       { "fp32", VC_F32 },
        { "fp16", VC_F16 },    { "float8_e4m3fn", VC_F8E4M3 }, { "bool", VC_BOOL }, { "uint8", VC_U8 },
        { "int8", VC_I8 },     { "int16", VC_I16 },
    };
    for (size_t i = 0; i < sizeof torch / sizeof torch[0]; i++)
        if (!strcmp(s, torch[i].n)) { *out = torch[i].t; return 0; }
    return -1;
}

float vc_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0) {
        if (man == 0) u = sign;
        else { /* subnormal */
            float f = ldexpf((float)man, -24);
            return sign ? -f : f;
        }
    } else if (exp == 31) u = sign | 0x7f800000u | (man << 13);
    else u = sign | ((exp + 112) << 23) | (man << 13);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t vc_f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00);
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to inf */
    if (a < 0x38800000u) { /* subnormal or zero in f16: round to nearest even multiple of 2^-24 */
        float af;
        memcpy(&af, &a, 4);
        float r = nearbyintf(af * 16777216.0f);
        return (uint16_t)(sign | (uint32_t)r);
    }
    uint32_t mant_odd = (a >> 13) & 1u;
    a += 0xc8000fffu + mant_odd; /* rebias exponent (-112 << 23) and round to nearest even */
    return (uint16_t)(sign | (a >> 13));
}

float vc_f8e4m3_to_f32(uint8_t v) {
    int sign = v >> 7, exp = (v >> 3) & 0xf, man = v & 7;
    float f;
    if (exp == 15 && man == 7) return NAN;
    if (exp == 0) f = ldexpf((float)man, -9);
    else f = ldexpf(1.0f + man / 8.0f, exp - 7);
    return sign ? -f : f;
}

void vc_convert_to_f32(float *dst, const void *src, vc_dtype t, size_t n) {
    switch (t) {
    case VC_F32: memmove(dst, src, n * 4); break;
    case VC_BF16: for (size_t i = 0; i < n; i++) dst[i] = vc_bf16_to_f32(((const uint16_t *)src)[i]); break;
    case VC_F16: for (size_t i = 0; i < n; i++) dst[i] = vc_f16_to_f32(((const uint16_t *)src)[i]); break;
    case VC_F8E4M3: for (size_t i = 0; i < n; i++) dst[i] = vc_f8e4m3_to_f32(((const uint8_t *)src)[i]); break;
    case VC_F64: for (size_t i = 0; i < n; i++) dst[i] = (float)((const double *)src)[i]; break;
    case VC_I32: for (size_t i = 0; i < n; i++) dst[i] = (float)((const int32_t *)src)[i]; break;
    case VC_I64: for (size_t i = 0; i < n; i++) dst[i] = (float)((const int64_t *)src)[i]; break;
    case VC_I16: for (size_t i = 0; i < n; i++) dst[i] = (float)((const int16_t *)src)[i]; break;
    case VC_I8: for (size_t i = 0; i < n; i++) dst[i] = (float)((const int8_t *)src)[i]; break;
    case VC_U8: case VC_BOOL: for (size_t i = 0; i < n; i++) dst[i] = (float)((const uint8_t *)src)[i]; break;
    default: break;
    }
}

void vc_convert_from_f32(void *dst, vc_dtype t, const float *src, size_t n) {
    switch (t) {
    case VC_F32: memmove(dst, src, n * 4); break;
    case VC_BF16: for (size_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = vc_f32_to_bf16(src[i]); break;
    case VC_F16: for (size_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = vc_f32_to_f16(src[i]); break;
    case VC_F64: for (size_t i = 0; i < n; i++) ((double *)dst)[i] = src[i]; break;
    case VC_I32: for (size_t i = 0; i < n; i++) ((int32_t *)dst)[i] = (int32_t)src[i]; break;
    case VC_I64: for (size_t i = 0; i < n; i++) ((int64_t *)dst)[i] = (int64_t)src[i]; break;
    default: break;
    }
}
