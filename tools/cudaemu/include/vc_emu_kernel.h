/* verlc CUDA emulator, kernel side (C++): qualifiers, built-in variables, barriers, warp primitives,
 * intrinsics and the launch template that the generated .cpp files call in place of <<< >>>.
 * Threads of a block are fibers run one at a time on the calling CPU thread; they switch only at
 * barriers (__syncthreads, __syncwarp, shuffles, votes), so shared memory needs no locks. */
#ifndef VC_EMU_KERNEL_H
#define VC_EMU_KERNEL_H
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <tuple>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __constant__
#define __shared__ static
#define __forceinline__ inline __attribute__((always_inline))

#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
static const int warpSize = 32;

struct uint3 {
    unsigned x, y, z;
};
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct float2 {
    float x, y;
};
struct float4 {
    float x, y, z, w;
};
struct int2 {
    int x, y;
};
struct __align__(8) uint2 {
    unsigned x, y;
};
struct __align__(16) uint4 {
    unsigned x, y, z, w;
};
static inline int2 make_int2(int a, int b) { return int2{ a, b }; }
static inline float2 make_float2(float a, float b) { return float2{ a, b }; }
static inline float4 make_float4(float a, float b, float c, float d) { return float4{ a, b, c, d }; }
static inline uint2 make_uint2(unsigned a, unsigned b) { return uint2{ a, b }; }
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return uint4{ a, b, c, d }; }

/* the running thread's coordinates (set by the scheduler before each switch into a fiber) */
extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;

void __syncthreads(void);
void __syncwarp(unsigned mask = 0xffffffffu);
/* every lane of the warp in `mask` publishes v; out[l] = lane l's value (0 for absent lanes) */
void vc_emu_exchange(uint64_t v, unsigned mask, uint64_t out[32]);
/* n values at once (up to VC_EMU_XMAX), one pair of warp barriers for all: the warp's values x[j * 32 + l] (lane
 * l's v[j]), read in place until vc_emu_exchange_end (both called by every lane in mask) */
#define VC_EMU_XMAX 16
const uint64_t *vc_emu_exchange_begin(const uint64_t *v, int n, unsigned mask);
void vc_emu_exchange_end(unsigned mask);
unsigned vc_emu_lane(void);
/* cp.async (cuda_mma.h's vc_cp16 / vc_cp_commit / vc_cp_wait): a copy's source is read when it is issued and its
 * destination filled with NaN bytes then; the bytes land only when the issuing thread waits for its group (emu_sched.cpp) */
/* cp.async of size bytes (4, 8, 16), the first src_size from src and zeros after (src-size 0: nothing read) */
void vc_emu_cp(void *dst, const void *src, int size, int src_size);
unsigned __isGlobal(const void *p);
void vc_emu_cp_commit(void);
void vc_emu_cp_wait(int n);
unsigned __activemask(void);
void *vc_emu_dyn_smem(void);

template <class T> static inline uint64_t vc_emu_bits(T v) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffle of a type over 8 bytes");
    uint64_t u = 0;
    memcpy(&u, &v, sizeof v);
    return u;
}
template <class T> static inline T vc_emu_from(uint64_t u) {
    T v;
    memcpy(&v, &u, sizeof v);
    return v;
}
/* source lane l of a shuffle within segments of `width` lanes; lanes outside the segment keep their own */
template <class T> static inline T vc_emu_shfl(unsigned mask, T v, int src, int width) {
    uint64_t all[32];
    vc_emu_exchange(vc_emu_bits(v), mask, all);
    unsigned lane = vc_emu_lane(), base = lane & ~(unsigned)(width - 1);
    if (src < 0 || (unsigned)src < base || (unsigned)src >= base + (unsigned)width) src = (int)lane;
    return vc_emu_from<T>(all[src]);
}
template <class T> static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
    unsigned base = vc_emu_lane() & ~(unsigned)(width - 1);
    return vc_emu_shfl(mask, v, (int)(base + ((unsigned)src & (unsigned)(width - 1))), width);
}
template <class T> static inline T __shfl_xor_sync(unsigned mask, T v, int lm, int width = 32) {
    return vc_emu_shfl(mask, v, (int)(vc_emu_lane() ^ (unsigned)lm), width);
}
template <class T> static inline T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = 32) {
    return vc_emu_shfl(mask, v, (int)(vc_emu_lane() + d), width);
}
template <class T> static inline T __shfl_up_sync(unsigned mask, T v, unsigned d, int width = 32) {
    return vc_emu_shfl(mask, v, (int)vc_emu_lane() - (int)d, width);
}
static inline unsigned __ballot_sync(unsigned mask, int pred) {
    uint64_t all[32];
    vc_emu_exchange(pred != 0, mask, all);
    unsigned r = 0;
    for (int l = 0; l < 32; l++)
        if ((mask >> l & 1) && all[l]) r |= 1u << l;
    return r;
}
static inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
static inline int __all_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) == (mask & __activemask()); }
template <class T> static inline unsigned __match_any_sync(unsigned mask, T v) {
    uint64_t all[32], me = vc_emu_bits(v);
    vc_emu_exchange(me, mask, all);
    unsigned r = 0, act = __activemask();
    for (int l = 0; l < 32; l++)
        if ((mask & act) >> l & 1 && all[l] == me) r |= 1u << l;
    return r;
}

/* intrinsics: the host's IEEE operations (compiled with -ffp-contract=off, so _rn forms do not fuse) */
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
static inline float __frcp_rn(float a) { return 1.0f / a; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline float __fdividef(float a, float b) { return a / b; }
/* glibc declares __expf and friends itself: these are macros */
#define __expf(a) expf(a)
#define __logf(a) logf(a)
#define __sinf(a) sinf(a)
#define __cosf(a) cosf(a)
#define __tanhf(a) tanhf(a)
static inline float __saturatef(float a) { return a < 0.0f ? 0.0f : a > 1.0f ? 1.0f : a; }
static inline float rsqrtf(float a) { return 1.0f / sqrtf(a); }
static inline unsigned __float_as_uint(float f) { return vc_emu_from<unsigned>(vc_emu_bits(f)); }
static inline int __float_as_int(float f) { return vc_emu_from<int>(vc_emu_bits(f)); }
static inline float __uint_as_float(unsigned u) { return vc_emu_from<float>(vc_emu_bits(u)); }
static inline float __int_as_float(int u) { return vc_emu_from<float>(vc_emu_bits(u)); }
static inline long long __double_as_longlong(double d) { return vc_emu_from<long long>(vc_emu_bits(d)); }
static inline double __longlong_as_double(long long v) { return vc_emu_from<double>(vc_emu_bits(v)); }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(unsigned x) { return x ? __builtin_clz(x) : 32; }
static inline int __clzll(unsigned long long x) { return x ? __builtin_clzll(x) : 64; }
static inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }
static inline unsigned __brev(unsigned x) {
    unsigned r = 0;
    for (int i = 0; i < 32; i++) r |= (x >> i & 1u) << (31 - i);
    return r;
}
template <class T> static inline T __ldg(const T *p) { return *p; }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline long min(long a, long b) { return a < b ? a : b; }
static inline long max(long a, long b) { return a > b ? a : b; }
static inline unsigned long min(unsigned long a, unsigned long b) { return a < b ? a : b; }
static inline unsigned long max(unsigned long a, unsigned long b) { return a > b ? a : b; }
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }

/* atomics: the threads of one launch never run at the same time */
template <class T> static inline T atomicAdd(T *p, T v) {
    T o = *p;
    *p = o + v;
    return o;
}
template <class T> static inline T atomicMax(T *p, T v) {
    T o = *p;
    if (v > o) *p = v;
    return o;
}
template <class T> static inline T atomicMin(T *p, T v) {
    T o = *p;
    if (v < o) *p = v;
    return o;
}
template <class T> static inline T atomicExch(T *p, T v) {
    T o = *p;
    *p = v;
    return o;
}
template <class T> static inline T atomicCAS(T *p, T cmp, T v) {
    T o = *p;
    if (o == cmp) *p = v;
    return o;
}
static inline void __threadfence(void) {}
static inline void __threadfence_block(void) {}

/* ---- launches ---- */
struct vc_emu_cfg {
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
};
static inline vc_emu_cfg vc_emu_make_cfg(dim3 g, dim3 b, size_t smem = 0, cudaStream_t s = 0) { return vc_emu_cfg{ g, b, smem, s }; }
struct vc_emu_task {
    virtual ~vc_emu_task() {}
    virtual void run_thread() = 0; /* one thread of the kernel (the scheduler sets the coordinates) */
};
/* validates the launch (the error is cudaGetLastError's, as on a GPU) and queues it; takes the task.
 * bad_args: the launch passes a pointer outside device and pinned memory: when the queue reaches it,
 * the "kernel faults" (cudaErrorIllegalAddress, sticky, as on a GPU) instead of running. */
void vc_emu_submit(const char *name, const void *fn, vc_emu_cfg cfg, vc_emu_task *task, int bad_args);
/* 1 (and a message) when a pointer argument is neither device nor pinned memory (NULL is fine) */
int vc_emu_check_arg(const char *kernel, int index, const void *p);
template <class T> static inline int vc_emu_arg(const char *k, int i, const T &v) {
    if constexpr (std::is_pointer<T>::value) return vc_emu_check_arg(k, i, (const void *)v);
    return 0;
}

template <class... P> struct vc_emu_kernel_task : vc_emu_task {
    void (*fn)(P...);
    std::tuple<std::decay_t<P>...> args;
    template <class... A> vc_emu_kernel_task(void (*f)(P...), A &&...a) : fn(f), args(std::forward<A>(a)...) {}
    void run_thread() override { std::apply(fn, args); }
    template <size_t... I> int check(const char *k, std::index_sequence<I...>) {
        return (0 + ... + vc_emu_arg(k, (int)I, std::get<I>(args)));
    }
};
template <class... P, class... A> static inline void vc_emu_launch(vc_emu_cfg c, const char *name, void (*fn)(P...), A &&...a) {
    static_assert(sizeof...(P) == sizeof...(A), "kernel launched with the wrong number of arguments");
    auto *t = new vc_emu_kernel_task<P...>(fn, std::forward<A>(a)...);
    int bad = t->check(name, std::index_sequence_for<P...>{});
    vc_emu_submit(name, (const void *)fn, c, t, bad);
}
cudaError_t vc_emu_func_attr(const void *fn, int attr, int value);
template <class... P> static inline cudaError_t cudaFuncSetAttribute(void (*fn)(P...), cudaFuncAttribute attr, int value) {
    return vc_emu_func_attr((const void *)fn, (int)attr, value);
}
#endif
