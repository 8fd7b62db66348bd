/* Element types and conversions (round-to-nearest-even for narrowing). */
#ifndef VERLC_DTYPE_H
#define VERLC_DTYPE_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum vc_dtype {
    VC_F32 = 0,
    VC_BF16,
    VC_F16,
    VC_I32,
    VC_I64,
    VC_F8E4M3,
    VC_U8,
    VC_BOOL,
    VC_F64,
    VC_I8,
    VC_I16,
    VC_DTYPE_COUNT
} vc_dtype;

size_t vc_dtype_size(vc_dtype t);
const char *vc_dtype_name(vc_dtype t);        /* safetensors spelling: "F32", "BF16", ... */
int vc_dtype_from_name(const char *s, vc_dtype *out); /* 0 on success; accepts safetensors and torch names */

static inline float vc_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t vc_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

float vc_f16_to_f32(uint16_t h);
uint16_t vc_f32_to_f16(float f);
float vc_f8e4m3_to_f32(uint8_t v);

/* Converts n elements of any float type to f32 (and back); integers are converted by value. */
void vc_convert_to_f32(float *dst, const void *src, vc_dtype t, size_t n);
void vc_convert_from_f32(void *dst, vc_dtype t, const float *src, size_t n);
#endif
