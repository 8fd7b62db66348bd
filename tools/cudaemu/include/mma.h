/* verlc CUDA emulator: warp matrix functions (nvcuda::wmma). Every lane holds the whole tile of a
 * fragment (a GPU spreads it over the lanes in an unspecified layout, so correct code never depends
 * on which lane holds which element). load_matrix_sync and mma_sync give every lane the whole result;
 * store_matrix_sync writes only the elements the calling lane owns (element e belongs to lane e % 32),
 * so a warp that reads the stored tile back without __syncwarp reads stale values here, as it may on
 * a GPU. Products accumulate in f32 in k order. */
#ifndef VC_EMU_MMA_H
#define VC_EMU_MMA_H
#include "cuda_bf16.h"
#include "cuda_runtime.h"
namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
template <class Use, int M, int N, int K, class T, class Layout = void> struct fragment {
    static constexpr int rows = std::is_same<Use, matrix_b>::value ? K : M;
    static constexpr int cols = std::is_same<Use, matrix_a>::value ? K : N;
    enum { num_elements = rows * cols };
    T x[num_elements];
};
template <class T, class L> static inline bool vc_emu_row(void) { return std::is_same<L, row_major>::value; }
template <class Use, int M, int N, int K, class T, class L>
static inline void load_matrix_sync(fragment<Use, M, N, K, T, L> &f, const T *p, unsigned ldm) {
    typedef fragment<Use, M, N, K, T, L> F;
    static_assert(!std::is_same<Use, accumulator>::value, "accumulator loads take a layout");
    for (int r = 0; r < F::rows; r++)
        for (int c = 0; c < F::cols; c++)
            f.x[r * F::cols + c] = std::is_same<L, row_major>::value ? p[(size_t)r * ldm + c] : p[r + (size_t)c * ldm];
}
template <int M, int N, int K, class T>
static inline void load_matrix_sync(fragment<accumulator, M, N, K, T> &f, const T *p, unsigned ldm, layout_t l) {
    for (int r = 0; r < M; r++)
        for (int c = 0; c < N; c++) f.x[r * N + c] = l == mem_row_major ? p[(size_t)r * ldm + c] : p[r + (size_t)c * ldm];
}
template <int M, int N, int K, class T>
static inline void store_matrix_sync(T *p, const fragment<accumulator, M, N, K, T> &f, unsigned ldm, layout_t l) {
    unsigned lane = vc_emu_lane();
    for (int e = (int)lane; e < M * N; e += 32) {
        int r = e / N, c = e % N;
        if (l == mem_row_major) p[(size_t)r * ldm + c] = f.x[e];
        else p[r + (size_t)c * ldm] = f.x[e];
    }
}
template <class Use, int M, int N, int K, class T, class L, class V>
static inline void fill_fragment(fragment<Use, M, N, K, T, L> &f, const V &v) {
    for (int i = 0; i < fragment<Use, M, N, K, T, L>::num_elements; i++) f.x[i] = (T)v;
}
template <int M, int N, int K, class Ta, class La, class Lb, class Tc>
static inline void mma_sync(fragment<accumulator, M, N, K, Tc> &d, const fragment<matrix_a, M, N, K, Ta, La> &a,
                            const fragment<matrix_b, M, N, K, Ta, Lb> &b, const fragment<accumulator, M, N, K, Tc> &c) {
    float fa[M * K], fb[K * N], acc[N];
    Tc out[M * N];
    for (int i = 0; i < M * K; i++) fa[i] = (float)a.x[i];
    for (int i = 0; i < K * N; i++) fb[i] = (float)b.x[i];
    for (int i = 0; i < M; i++) { /* each output sums its products in k order (vectorised over j) */
        for (int j = 0; j < N; j++) acc[j] = (float)c.x[i * N + j];
        for (int k = 0; k < K; k++)
            for (int j = 0; j < N; j++) acc[j] += fa[i * K + k] * fb[k * N + j];
        for (int j = 0; j < N; j++) out[i * N + j] = (Tc)acc[j];
    }
    memcpy(d.x, out, sizeof out);
}
} // namespace wmma
} // namespace nvcuda

/* PTX's mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (cuda_mma.h's vc_mma_16816 on a GPU), with the
 * fragments where the PTX ISA puts them (g = lane / 4, t = lane % 4; each 32-bit register two bf16, the lower
 * column in the low half): a[0] = A[g][2t..], a[1] = A[g + 8][2t..], a[2] = A[g][2t + 8..], a[3] = A[g + 8][2t + 8..];
 * b[0] = B[2t..][g], b[1] = B[2t + 8..][g] (k pairs); d[0..1] = D[g][2t..], d[2..3] = D[g + 8][2t..]. The warp's
 * registers meet through the scheduler's exchange, so a lane whose fragment is laid out wrongly gives wrong sums
 * here as on a GPU. Each output adds its 16 products to c in k order, in f32. */
static inline void vc_emu_mma_16816(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2],
                                    const float (&c)[4]) {
    uint64_t A01[32], A23[32], B[32];
    vc_emu_exchange((uint64_t)a[0] | (uint64_t)a[1] << 32, 0xffffffffu, A01);
    vc_emu_exchange((uint64_t)a[2] | (uint64_t)a[3] << 32, 0xffffffffu, A23);
    vc_emu_exchange((uint64_t)b[0] | (uint64_t)b[1] << 32, 0xffffffffu, B);
    const int lane = (int)vc_emu_lane(), g = lane / 4, t = lane % 4;
    auto half = [](uint64_t w, int hi32, int hi16) {
        unsigned u = hi32 ? (unsigned)(w >> 32) : (unsigned)w;
        return vc_emu_bf2f((unsigned short)(hi16 ? u >> 16 : u & 0xffffu));
    };
    float out[4];
    for (int e = 0; e < 4; e++) {
        const int row = g + (e >= 2 ? 8 : 0), col = 2 * t + (e & 1);
        float acc = c[e];
        for (int k = 0; k < 16; k++) {
            const int src_a = (row % 8) * 4 + (k % 8) / 2, src_b = col * 4 + (k % 8) / 2;
            const float x = half(k >= 8 ? A23[src_a] : A01[src_a], row >= 8, k & 1);
            const float y = half(B[src_b], k >= 8, k & 1);
            acc += x * y;
        }
        out[e] = acc;
    }
    for (int e = 0; e < 4; e++) d[e] = out[e];
}

/* PTX's ldmatrix.sync.aligned.m8n8.x4.shared.b16 (cuda_mma.h's vc_ldsm_x4): lanes 8j .. 8j + 7 give the addresses of
 * matrix j's 8 rows; lane l (g = l / 4, t = l % 4) gets r[j] = M_j[g][2t] in the low half, M_j[g][2t + 1] in the
 * high half */
static inline void vc_emu_ldsm_x4(unsigned (&r)[4], const void *row) {
    uint64_t at[32];
    vc_emu_exchange((uint64_t)(uintptr_t)row, 0xffffffffu, at);
    const int lane = (int)vc_emu_lane(), g = lane / 4, t = lane % 4;
    for (int j = 0; j < 4; j++) {
        const unsigned short *r0 = (const unsigned short *)(uintptr_t)at[8 * j + g];
        r[j] = (unsigned)r0[2 * t] | (unsigned)r0[2 * t + 1] << 16;
    }
}

/* PTX's ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 (cuda_mma.h's vc_ldsm_x4_t): lanes 8j .. 8j + 7 give the
 * addresses of matrix j's 8 rows (8 bf16 each); lane l (g = l / 4, t = l % 4) gets r[j] = M_j[2t][g] in the low
 * half, M_j[2t + 1][g] in the high half. The addresses meet through the scheduler's exchange, as the lanes' registers
 * of an mma do. */
static inline void vc_emu_ldsm_x4_t(unsigned (&r)[4], const void *row) {
    uint64_t at[32];
    vc_emu_exchange((uint64_t)(uintptr_t)row, 0xffffffffu, at);
    const int lane = (int)vc_emu_lane(), g = lane / 4, t = lane % 4;
    for (int j = 0; j < 4; j++) {
        const unsigned short *r0 = (const unsigned short *)(uintptr_t)at[8 * j + 2 * t];
        const unsigned short *r1 = (const unsigned short *)(uintptr_t)at[8 * j + 2 * t + 1];
        r[j] = (unsigned)r0[g] | (unsigned)r1[g] << 16;
    }
}
#endif
