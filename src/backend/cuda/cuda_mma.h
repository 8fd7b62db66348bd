/* Warp-level tensor-core products with the fragments in registers at the places the PTX ISA gives them (the
 * flash-attention kernels keep scores, probabilities and outputs in registers between products; WMMA's fragment
 * layout is unspecified, so it cannot). On the emulator (tools/cudaemu/include/mma.h) the same layout is emulated. */
#ifndef VC_CUDA_MMA_H
#define VC_CUDA_MMA_H
#include <cuda_bf16.h>
#include <mma.h>
#include <stdint.h>

/* d = A B + c for A 16 x 16 (row-major), B 16 x 8 (k-major pairs), bf16 in, f32 out; g = lane / 4, t = lane % 4:
 * a[0] = A[g][2t, 2t + 1], a[1] = A[g + 8][2t, ..], a[2] = A[g][2t + 8, ..], a[3] = A[g + 8][2t + 8, ..];
 * b[0] = B[2t, 2t + 1][g], b[1] = B[2t + 8, 2t + 9][g]; d[0], d[1] = D[g][2t, 2t + 1], d[2], d[3] = D[g + 8][..] */
__device__ __forceinline__ void vc_mma_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#ifdef VC_EMU_MMA_H
    const unsigned ua[4] = { a[0], a[1], a[2], a[3] }, ub[2] = { b[0], b[1] };
    const float c[4] = { d[0], d[1], d[2], d[3] };
    vc_emu_mma_16816(d, ua, ub, c);
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

/* two floats rounded to bf16 (nearest even) in one register, lo in the low half */
__device__ __forceinline__ uint32_t vc_pack_bf16x2(float lo, float hi) {
    const uint32_t l = __bfloat16_as_ushort(__float2bfloat16_rn(lo)), h = __bfloat16_as_ushort(__float2bfloat16_rn(hi));
    return l | h << 16;
}

/* the 32-bit word at p (two bf16; p 4-byte aligned) */
__device__ __forceinline__ uint32_t vc_ld32(const __nv_bfloat16 *p) { return *reinterpret_cast<const uint32_t *>(p); }
#endif
