/* verlc CUDA emulator: bfloat16 (round to nearest even, as __float2bfloat16_rn on a GPU) */
#ifndef VC_EMU_CUDA_BF16_H
#define VC_EMU_CUDA_BF16_H
#include <stdint.h>
#include <string.h>
static inline unsigned short vc_emu_f2bf(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u); /* quiet NaN */
    return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static inline float vc_emu_bf2f(unsigned short h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
struct __nv_bfloat16 {
    unsigned short __x;
    __nv_bfloat16() = default;
    __nv_bfloat16(float f) : __x(vc_emu_f2bf(f)) {}
    operator float() const { return vc_emu_bf2f(__x); }
};
typedef __nv_bfloat16 nv_bfloat16;
struct __nv_bfloat162 {
    __nv_bfloat16 x, y;
};
typedef __nv_bfloat162 nv_bfloat162;
static inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
static inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
static inline float __bfloat162float(__nv_bfloat16 h) { return (float)h; }
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
static inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return __nv_bfloat162{ __nv_bfloat16(a), __nv_bfloat16(b) }; }
static inline __nv_bfloat162 __float22bfloat162_rn(float2 f) { return __floats2bfloat162_rn(f.x, f.y); }
static inline float2 __bfloat1622float2(__nv_bfloat162 h) { return float2{ (float)h.x, (float)h.y }; }
static inline float __low2float(__nv_bfloat162 h) { return (float)h.x; }
static inline float __high2float(__nv_bfloat162 h) { return (float)h.y; }
#endif
