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

/* a warp's WM x WN tiles of 16 x 8 sums s over 8 terms from TF32 pairs (vc_tf32_split) on mma.sync m16n8k8:
 * s += A_lo B_hi, then A_hi B_lo, then A_hi B_hi (3xTF32; the lo lo' term left out). g = lane / 4, t = lane % 4:
 * a[mi][0] = A[g][t], a[mi][1] = A[g + 8][t], a[mi][2] = A[g][t + 4], a[mi][3] = A[g + 8][t + 4] (m-tile mi);
 * b[ni][0] = B[t][g], b[ni][1] = B[t + 4][g] (n-tile ni); s[mi][ni] as vc_mma_16816's d */
template <int WM, int WN>
__device__ __forceinline__ void vc_mma_tf32x3(float (&s)[WM][WN][4], const uint32_t (&ah)[WM][4],
                                              const uint32_t (&al)[WM][4], const uint32_t (&bh)[WN][2],
                                              const uint32_t (&bl)[WN][2]) {
#ifdef VC_EMU_MMA_H
    vc_emu_mma_tf32x3<WM, WN>(s, ah, al, bh, bl);
#else
    const auto mma = [](float(&d)[4], const uint32_t(&a)[4], const uint32_t(&b)[2]) {
        asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    };
#pragma unroll
    for (int mi = 0; mi < WM; mi++)
#pragma unroll
        for (int ni = 0; ni < WN; ni++) {
            mma(s[mi][ni], al[mi], bh[ni]);
            mma(s[mi][ni], ah[mi], bl[ni]);
            mma(s[mi][ni], ah[mi], bh[ni]);
        }
#endif
}

/* x rounded to TF32 (cvt.rna: to nearest, ties away from zero; the 13 low bits zero) */
__device__ __forceinline__ uint32_t vc_tf32(float x) {
#ifdef VC_EMU_MMA_H
    return vc_emu_tf32(x);
#else
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
    return r;
#endif
}

/* x as a TF32 pair, hi + lo within 2^-22 |x| (vc_mma_tf32x3's operands) */
__device__ __forceinline__ void vc_tf32_split(float x, uint32_t &hi, uint32_t &lo) {
    hi = vc_tf32(x);
    lo = vc_tf32(x - __uint_as_float(hi));
}

/* two floats rounded to bf16 (nearest even) in one register, lo in the low half */
__device__ __forceinline__ uint32_t vc_pack_bf16x2(float lo, float hi) {
    const uint32_t l = __bfloat16_as_ushort(__float2bfloat16_rn(lo)), h = __bfloat16_as_ushort(__float2bfloat16_rn(hi));
    return l | h << 16;
}

/* ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: four 8 x 8 bf16 matrices of shared memory. Lanes 8j .. 8j + 7 give
 * the addresses of matrix j's rows (8 bf16 each, 16-byte aligned); lane l (g = l / 4, t = l % 4) gets
 * - as they are (vc_ldsm_x4): r[j] = M_j[g][2t] | M_j[g][2t + 1] << 16, an mma A fragment's, or the B fragment of a
 *   tile whose rows are B's columns (K in Q K^T);
 * - transposed (vc_ldsm_x4_t): r[j] = M_j[2t][g] | M_j[2t + 1][g] << 16, an mma B fragment's k pair from a row-major
 *   k x n tile. */
template <bool TRANS>
__device__ __forceinline__ void vc_ldsm_x4_of(uint32_t (&r)[4], const __nv_bfloat16 *row) {
#ifdef VC_EMU_MMA_H
    unsigned u[4];
    if (TRANS) vc_emu_ldsm_x4_t(u, row);
    else vc_emu_ldsm_x4(u, row);
    r[0] = u[0], r[1] = u[1], r[2] = u[2], r[3] = u[3];
#else
    const unsigned a = (unsigned)__cvta_generic_to_shared(row);
    if (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(a));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(a));
#endif
}
__device__ __forceinline__ void vc_ldsm_x4(uint32_t (&r)[4], const __nv_bfloat16 *row) { vc_ldsm_x4_of<false>(r, row); }
__device__ __forceinline__ void vc_ldsm_x4_t(uint32_t (&r)[4], const __nv_bfloat16 *row) { vc_ldsm_x4_of<true>(r, row); }

/* 2^x on the special-function unit (ex2.approx.ftz: about 2 ulp, results under 2^-126 flushed to 0; 2^-inf = 0):
 * the flash kernels' exponentials, their scores taken times log2(e) as FlashAttention does. The emulator: exp2f. */
#define VC_LOG2E 1.44269504088896341f
__device__ __forceinline__ float vc_ex2(float x) {
#ifdef VC_EMU_MMA_H
    return exp2f(x);
#else
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
#endif
}

/* one online-softmax step of a row whose tile max mx lies over a quad of lanes (mma's 4 lanes a row): the quad's
 * max, the running max *m updated and *ml (in: the previous step's) its log2(e) multiple (0 while the row sees nothing: its exponentials
 * 2^(x log2 e - ml) are then 2^-inf = 0); returns the factor the row's earlier sums take */
__device__ __forceinline__ float vc_softmax_step(float mx, float *m, float *ml) {
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float mn = fmaxf(*m, mx), mo = *ml;
    *ml = mn == -INFINITY ? 0.0f : mn * VC_LOG2E;
    /* the earlier exponentials were 2^(x log2 e - mo): the factor is 2^(mo - ml), exactly 1 while the max stays (the
     * residual of an fma with the rounded product would scale the sums by up to 2^(half an ulp) every tile) */
    const float corr = *m == -INFINITY ? 0.0f : vc_ex2(mo - *ml);
    *m = mn;
    return corr;
}

/* cp.async.cg.shared.global: 16 bytes from global to shared memory (both 16-byte aligned) without registers; a
 * thread's copies since its last commit form a group, vc_cp_wait<n> waits until at most n of its groups are in
 * flight (the emulator lands a copy only at the wait that retires its group, its destination NaN bytes from the issue
 * on: a read before the wait, or by another thread before a barrier after it, sees them) */
__device__ __forceinline__ void vc_cp16(void *smem, const void *gmem) {
#ifdef VC_EMU_MMA_H
    vc_emu_cp(smem, gmem, 16, 16);
#else
    const unsigned a = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(a), "l"(gmem));
#endif
}
/* cp.async.ca of 4 bytes (both 4-byte aligned; gmem global memory), or 4 zero bytes where !valid (src-size 0: gmem
 * not read) */
__device__ __forceinline__ void vc_cp4z(void *smem, const void *gmem, bool valid) {
#ifdef VC_EMU_MMA_H
    vc_emu_cp(smem, gmem, 4, valid ? 4 : 0);
#else
    const unsigned a = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(a), "l"(gmem), "r"(valid ? 4 : 0));
#endif
}
__device__ __forceinline__ void vc_cp_commit(void) {
#ifdef VC_EMU_MMA_H
    vc_emu_cp_commit();
#else
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
__device__ __forceinline__ void vc_cp_wait(void) {
#ifdef VC_EMU_MMA_H
    vc_emu_cp_wait(N);
#else
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

/* the 32-bit word at p (two bf16; p 4-byte aligned) */
__device__ __forceinline__ uint32_t vc_ld32(const __nv_bfloat16 *p) { return *reinterpret_cast<const uint32_t *>(p); }
#endif
