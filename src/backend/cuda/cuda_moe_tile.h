/* The grouped expert GEMMs' rows mode (cuda_moe.cu's WMMA kernel, cuda_moe_mma.cu's mma.sync one): the grid covers
 * every tile the row groups can hold (ceil(R / BM) + min(E, R) row tiles) and each block finds its expert and tile from
 * the group offsets off[E + 1] (read on the device), warp 0 scanning 32 experts at a time; blocks past the last tile
 * get *mt = 0 and return. */
#ifndef VC_CUDA_MOE_TILE_H
#define VC_CUDA_MOE_TILE_H
#include <stdint.h>

static constexpr int VC_MOE_OFF_CAP = 513; /* group offsets staged in shared memory (up to 512 experts) */

/* this block's expert *e, first row *r0 and rows *mt (at most BM; 0: past the last tile); every thread calls */
template <int BM, int NTH>
__device__ void vc_moe_rows_tile(const int64_t *goff, int E, int64_t *r0, int *e_out, int *mt) {
    __shared__ int64_t s_r0, s_off[VC_MOE_OFF_CAP];
    __shared__ int s_e, s_mt;
    const bool staged = E < VC_MOE_OFF_CAP;
    if (staged)
        for (int e = threadIdx.x; e <= E; e += NTH) s_off[e] = goff[e];
    __syncthreads();
    const int64_t *off = staged ? s_off : goff;
    if (threadIdx.x < 32) {
        const int lane = threadIdx.x;
        const int64_t t = blockIdx.x;
        if (lane == 0) s_mt = 0;
        __syncwarp();
        int64_t base = 0; /* tiles of the experts before this chunk */
        for (int b = 0; b < E; b += 32) {
            int e = b + lane;
            int64_t lo = e < E ? off[e] : 0, m = e < E ? off[e + 1] - lo : 0, n = (m + BM - 1) / BM, x = n;
            for (int d = 1; d < 32; d <<= 1) {
                int64_t y = __shfl_up_sync(0xffffffffu, x, d);
                if (lane >= d) x += y;
            }
            bool mine = e < E && t >= base + x - n && t < base + x;
            unsigned hit = __ballot_sync(0xffffffffu, mine);
            if (mine) {
                s_r0 = lo + (t - (base + x - n)) * BM;
                s_mt = (int)(lo + m - s_r0 < BM ? lo + m - s_r0 : BM);
                s_e = e;
            }
            if (hit) break; /* uniform over the warp */
            base += __shfl_sync(0xffffffffu, x, 31);
        }
    }
    __syncthreads();
    *r0 = s_r0;
    *e_out = s_e;
    *mt = s_mt;
}
#endif
