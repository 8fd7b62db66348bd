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
    const uint64_t v[3] = { (uint64_t)a[0] | (uint64_t)a[1] << 32, (uint64_t)a[2] | (uint64_t)a[3] << 32,
                            (uint64_t)b[0] | (uint64_t)b[1] << 32 };
    const uint64_t *A01 = vc_emu_exchange_begin(v, 3, 0xffffffffu), *A23 = A01 + 32, *B = A01 + 64; /* (read in place) */
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
    vc_emu_exchange_end(0xffffffffu);
    for (int e = 0; e < 4; e++) d[e] = out[e];
}

/* PTX's cvt.rna.tf32.f32 (cuda_mma.h's vc_tf32): x rounded to TF32's 10 fraction bits, to nearest with ties away
 * from zero (the magnitude's bits plus half the dropped unit), the 13 low bits zero; infinities and NaNs as they are */
static inline unsigned vc_emu_tf32(float x) {
    unsigned u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0x7f800000u) return u;
    return (u + 0x1000u) & 0xffffe000u;
}

/* PTX's mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 three times a tile (cuda_mma.h's vc_mma_tf32x3 over a
 * warp's WM x WN tiles: s += A_lo B_hi, then A_hi B_lo, then A_hi B_hi), the fragments where the PTX ISA puts them
 * (g = lane / 4, t = lane % 4): a[0] = A[g][t], a[1] = A[g + 8][t], a[2] = A[g][t + 4], a[3] = A[g + 8][t + 4];
 * b[0] = B[t][g], b[1] = B[t + 4][g]; s as m16n8k16's d. An operand's 13 low bits are ignored (the tensor cores read
 * TF32); each mma adds its 8 products (exact in f32) to the sums in k order, in f32. Every fragment of the call meets
 * in one exchange (one pair of warp barriers, not three a product). */
template <int WM, int WN>
static inline void vc_emu_mma_tf32x3(float (&s)[WM][WN][4], const unsigned (&ah)[WM][4], const unsigned (&al)[WM][4],
                                     const unsigned (&bh)[WN][2], const unsigned (&bl)[WN][2]) {
    constexpr int NA = 2 * WM, NV = 2 * NA + 2 * WN; /* A's words in pairs: hi, then lo; B's hi, then lo */
    static_assert(NV <= VC_EMU_XMAX, "one exchange");
    uint64_t v[NV];
    for (int mi = 0; mi < WM; mi++)
        for (int h = 0; h < 2; h++) {
            v[2 * mi + h] = (uint64_t)ah[mi][2 * h] | (uint64_t)ah[mi][2 * h + 1] << 32;
            v[NA + 2 * mi + h] = (uint64_t)al[mi][2 * h] | (uint64_t)al[mi][2 * h + 1] << 32;
        }
    for (int ni = 0; ni < WN; ni++) {
        v[2 * NA + ni] = (uint64_t)bh[ni][0] | (uint64_t)bh[ni][1] << 32;
        v[2 * NA + WN + ni] = (uint64_t)bl[ni][0] | (uint64_t)bl[ni][1] << 32;
    }
    const uint64_t *x = vc_emu_exchange_begin(v, NV, 0xffffffffu);
    const int lane = (int)vc_emu_lane(), g = lane / 4, t = lane % 4;
    auto word = [](uint64_t w, int hi) {
        unsigned u = (hi ? (unsigned)(w >> 32) : (unsigned)w) & 0xffffe000u;
        float f;
        memcpy(&f, &u, 4);
        return f;
    };
    /* this lane's rows g, g + 8 of A and columns 2t, 2t + 1 of B, [hi / lo][tile][row or column][k] */
    float a[2][WM][2][8], b[2][WN][2][8];
    for (int p = 0; p < 2; p++) {
        for (int mi = 0; mi < WM; mi++)
            for (int r = 0; r < 2; r++)
                for (int k = 0; k < 8; k++)
                    a[p][mi][r][k] = word(x[(p * NA + 2 * mi + (k >= 4)) * 32 + g * 4 + k % 4], r);
        for (int ni = 0; ni < WN; ni++)
            for (int c = 0; c < 2; c++)
                for (int k = 0; k < 8; k++)
                    b[p][ni][c][k] = word(x[(2 * NA + p * WN + ni) * 32 + (2 * t + c) * 4 + k % 4], k >= 4);
    }
    vc_emu_exchange_end(0xffffffffu);
    for (int mi = 0; mi < WM; mi++)
        for (int ni = 0; ni < WN; ni++)
            for (int pass = 0; pass < 3; pass++) { /* lo hi', hi lo', hi hi' */
                const int pa = pass == 0, pb = pass == 1;
                for (int e = 0; e < 4; e++) {
                    const float *ar = a[pa][mi][e >> 1], *bc = b[pb][ni][e & 1];
                    float acc = s[mi][ni][e];
                    for (int k = 0; k < 8; k++) acc += ar[k] * bc[k];
                    s[mi][ni][e] = acc;
                }
            }
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
