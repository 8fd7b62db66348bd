#include "verlc/dtype.h"
#include "vc_test.h"

int main(void) {
    /* bf16 round-to-nearest-even: 1 + 2^-8 is a tie between 1 and 1+2^-7 -> even (1.0) */
    CHECK(vc_f32_to_bf16(1.0f + 1.0f / 256) == 0x3f80);
    CHECK(vc_f32_to_bf16(1.0f + 3.0f / 256) == 0x3f82); /* tie -> even mantissa 2 */
    CHECK(vc_f32_to_bf16(1.0f + 1.0f / 256 + 1.0f / 65536) == 0x3f81);
    CHECK(vc_bf16_to_f32(0x3f80) == 1.0f);
    CHECK(isnan(vc_bf16_to_f32(vc_f32_to_bf16(NAN))));
    CHECK(vc_f32_to_bf16(INFINITY) == 0x7f80);
    /* f16 */
    CHECK(vc_f32_to_f16(1.0f) == 0x3c00);
    CHECK(vc_f32_to_f16(65504.0f) == 0x7bff);
    CHECK(vc_f32_to_f16(1e6f) == 0x7c00);
    CHECK(vc_f32_to_f16(1.0f + 1.0f / 2048) == 0x3c00); /* tie -> even */
    CHECK(vc_f32_to_f16(1.0f + 3.0f / 2048) == 0x3c02);
    CHECK(vc_f16_to_f32(0x0001) == ldexpf(1, -24));
    CHECK(vc_f32_to_f16(ldexpf(1, -24)) == 0x0001);
    CHECK(vc_f32_to_f16(ldexpf(3, -25)) == 0x0002); /* 1.5 ulp of subnormal -> even 2 */
    for (uint32_t h = 0; h < 0x7c00; h++) CHECK(vc_f32_to_f16(vc_f16_to_f32((uint16_t)h)) == h);
    CHECK(vc_f8e4m3_to_f32(0x38) == 1.0f);
    CHECK(vc_f8e4m3_to_f32(0x7e) == 448.0f);
    vc_dtype t;
    CHECK(vc_dtype_from_name("BF16", &t) == 0 && t == VC_BF16);
    CHECK(vc_dtype_from_name("bfloat16", &t) == 0 && t == VC_BF16);
    CHECK(vc_dtype_from_name("Q4_K", &t) != 0);
    return vc_test_done();
}
