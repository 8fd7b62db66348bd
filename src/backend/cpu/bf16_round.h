/* bf16 rounding of f32 vectors (AVX-512, AVX2): vc_bf16_to_f32(vc_f32_to_bf16(x)) lane by lane, the same bits:
 * round to nearest even, NaNs quieted. For the CPU's bf16 matmuls, which round both operands of every product. */
#ifndef VC_BF16_ROUND_H
#define VC_BF16_ROUND_H
#include "core/sanitize.h"
#include <immintrin.h>

__attribute__((target("avx512f,avx2,fma"))) VC_NO_ASAN static inline __m512 round16_512(__m512 x) {
    __m512i u = _mm512_castps_si512(x), hi = _mm512_set1_epi32((int)0xffff0000u);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                            _mm512_set1_epi32(0x7f800000));
    __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_and_si512(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd)), hi);
    __m512i q = _mm512_or_si512(_mm512_and_si512(u, hi), _mm512_set1_epi32(0x00400000));
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(nan, r, q));
}

__attribute__((target("avx2,fma"))) VC_NO_ASAN static inline __m256 round16_avx(__m256 x) {
    __m256i u = _mm256_castps_si256(x), hi = _mm256_set1_epi32((int)0xffff0000u);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
    __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_and_si256(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd)), hi);
    __m256i q = _mm256_or_si256(_mm256_and_si256(u, hi), _mm256_set1_epi32(0x00400000));
    return _mm256_castsi256_ps(_mm256_blendv_epi8(r, q, nan));
}

#endif
