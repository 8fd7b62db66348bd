/* verlc CUDA emulator: device memory, the operation queue and the runtime API.
 *
 * Device memory is one reserved region of VC_EMU_MEM_MB (default 8192) MiB, allocated first-fit in
 * 256-byte units; new and freed allocations are filled with 0xff bytes (NaN as floats), and the
 * region is inaccessible (PROT_NONE) except while the emulator itself runs a queued operation, so host
 * code that dereferences a device pointer faults at once and is named (VC_EMU_PROTECT=0 turns this
 * off). Kernels, copies and memsets are queued and run at the next synchronising call, as a GPU runs
 * them behind the host's back (VC_EMU_ASYNC=0 runs each at once): a host read of a pinned buffer
 * before the stream is waited for sees the old bytes. Copies and kernel pointer arguments are checked
 * against the live allocations. */
#include "emu_internal.h"
#include <execinfo.h>
#include <map>
#include <memory>
#include <mutex>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <vector>

static std::recursive_mutex g_mu;
typedef std::lock_guard<std::recursive_mutex> lock_t;

/* ---- configuration and errors ---- */
long vc_emu_env_int(const char *name, long dflt) {
    const char *s = getenv(name);
    return s && *s ? strtol(s, NULL, 10) : dflt;
}

int vc_emu_order(void) {
    const char *s = getenv("VC_EMU_ORDER");
    if (!s || !*s || !strcmp(s, "forward")) return 0;
    if (!strcmp(s, "reverse")) return 1;
    if (!strcmp(s, "random")) return 2;
    vc_emu_die("VC_EMU_ORDER=%s: expected forward, reverse or random", s);
}

void vc_emu_die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("cuda emulator: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

static cudaError_t g_last = cudaSuccess;
static cudaError_t g_sticky = cudaSuccess; /* a kernel faulted: every later call fails, as on a GPU */

cudaError_t vc_emu_error(cudaError_t e, const char *fmt, ...) {
    if (e == cudaSuccess) return e;
    if (!vc_emu_env_int("VC_EMU_QUIET", 0)) {
        va_list ap;
        va_start(ap, fmt);
        fputs("cuda emulator: ", stderr);
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, " (%s)\n", cudaGetErrorName(e));
        va_end(ap);
    }
    g_last = e;
    return e;
}

/* ---- device memory ---- */
/* Built with AddressSanitizer (a sanitizer build of the emulator), each allocation is followed by a poisoned redzone
 * and a freed one is poisoned whole, so a kernel (instrumented C++ here) that reads or writes past its buffer, or a
 * freed one, is reported where it does it */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define VC_EMU_RZ ((size_t)4096)
#define VC_EMU_ASAN_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define VC_EMU_ASAN_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define VC_EMU_RZ ((size_t)0)
#define VC_EMU_ASAN_POISON(p, n) ((void)0)
#define VC_EMU_ASAN_UNPOISON(p, n) ((void)0)
#endif
static char *g_base;
static size_t g_cap, g_hw, g_used, g_used_high;
static std::map<size_t, size_t> g_free, g_live; /* offset -> bytes */
static std::map<uintptr_t, size_t> g_pinned;
static int g_open, g_protect = 1;
static void fault_handlers(void);

static void region_init(void) {
    if (g_base) return;
    g_cap = (size_t)vc_emu_env_int("VC_EMU_MEM_MB", 8192) << 20;
    g_protect = (int)vc_emu_env_int("VC_EMU_PROTECT", 1);
    void *p = mmap(NULL, g_cap, g_protect ? PROT_NONE : PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) vc_emu_die("cannot reserve %zu MiB of emulated device memory", g_cap >> 20);
    /* 2 MiB pages where the kernel allows: the protection switches then cost 512x fewer page-table updates */
    size_t huge = (size_t)2 << 20;
    char *al = (char *)(((uintptr_t)p + huge - 1) & ~(uintptr_t)(huge - 1));
    g_cap -= (size_t)(al - (char *)p);
    g_cap &= ~(huge - 1);
    p = al;
    madvise(p, g_cap, MADV_HUGEPAGE);
    g_base = (char *)p;
    g_free[0] = g_cap;
    fault_handlers();
}

static void dev_open(void) {
    if (g_open++ == 0 && g_protect && g_hw) mprotect(g_base, g_hw, PROT_READ | PROT_WRITE);
}
static void dev_close(void) {
    if (--g_open == 0 && g_protect && g_hw) mprotect(g_base, g_hw, PROT_NONE);
}

/* NaN bytes over the first 64 MiB of an allocation (VC_EMU_POISON_MB): beyond that, pages are left
 * untouched, so a test may hold most of the emulated memory without the host paying for it */
static void poison(size_t off, size_t n) {
    static size_t cap = (size_t)vc_emu_env_int("VC_EMU_POISON_MB", 64) << 20;
    dev_open();
    memset(g_base + off, 0xff, n < cap ? n : cap);
    dev_close();
}

static void *dev_alloc(size_t bytes) {
    lock_t l(g_mu);
    region_init();
    size_t n = (((bytes ? bytes : 1) + 255) & ~(size_t)255) + VC_EMU_RZ;
    auto best = g_free.end();
    for (auto it = g_free.begin(); it != g_free.end(); ++it)
        if (it->second >= n && (best == g_free.end() || it->second < best->second)) best = it;
    if (best == g_free.end()) return NULL;
    size_t off = best->first, len = best->second;
    g_free.erase(best);
    if (len > n) g_free[off + n] = len - n;
    g_live[off] = n;
    g_used += n;
    if (g_used > g_used_high) g_used_high = g_used;
    size_t end = (off + n + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1); /* whole huge pages */
    if (end > g_hw) {
        if (g_open && g_protect) mprotect(g_base + g_hw, end - g_hw, PROT_READ | PROT_WRITE);
        g_hw = end;
    }
    VC_EMU_ASAN_UNPOISON(g_base + off, n);
    poison(off, n);
    VC_EMU_ASAN_POISON(g_base + off + (bytes ? bytes : 1), n - (bytes ? bytes : 1));
    return g_base + off;
}

static int dev_find(const void *p, size_t *off, size_t *len) { /* the live allocation holding p */
    if (!g_base || (const char *)p < g_base || (const char *)p >= g_base + g_cap) return 0;
    size_t o = (size_t)((const char *)p - g_base);
    auto it = g_live.upper_bound(o);
    if (it == g_live.begin()) return 0;
    --it;
    if (o >= it->first + it->second) return 0;
    *off = it->first;
    *len = it->second;
    return 1;
}

int vc_emu_dev_range(const void *p, size_t n) {
    lock_t l(g_mu);
    size_t off, len;
    if (!dev_find(p, &off, &len)) return 0;
    return (size_t)((const char *)p - g_base) + n <= off + len;
}

int vc_emu_is_device_ptr(const void *p) {
    lock_t l(g_mu);
    return g_base && (const char *)p >= g_base && (const char *)p < g_base + g_cap;
}

int vc_emu_is_pinned(const void *p) {
    lock_t l(g_mu);
    auto it = g_pinned.upper_bound((uintptr_t)p);
    if (it == g_pinned.begin()) return 0;
    --it;
    return (uintptr_t)p < it->first + it->second;
}

static cudaError_t dev_free(void *p) {
    lock_t l(g_mu);
    size_t o = (size_t)((char *)p - g_base);
    auto it = g_base && (char *)p >= g_base ? g_live.find(o) : g_live.end();
    if (it == g_live.end()) return vc_emu_error(cudaErrorInvalidValue, "cudaFree(%p): not the start of a live allocation", p);
    size_t n = it->second;
    g_live.erase(it);
    g_used -= n;
    VC_EMU_ASAN_UNPOISON(g_base + o, n);
    poison(o, n);
    VC_EMU_ASAN_POISON(g_base + o, n);
    auto nx = g_free.lower_bound(o);
    if (nx != g_free.end() && nx->first == o + n) {
        n += nx->second;
        g_free.erase(nx);
    }
    auto pv = g_free.lower_bound(o);
    if (pv != g_free.begin()) {
        --pv;
        if (pv->first + pv->second == o) {
            pv->second += n;
            return cudaSuccess;
        }
    }
    g_free[o] = n;
    return cudaSuccess;
}

void vc_emu_dev_release(void *p) {
    lock_t l(g_mu);
    dev_free(p);
}

/* ---- the queue ---- */
static std::vector<std::function<void()>> g_q;

void vc_emu_enqueue(std::function<void()> op) {
    lock_t l(g_mu);
    static int async = -1;
    if (async < 0) async = (int)vc_emu_env_int("VC_EMU_ASYNC", 1);
    if (!async) {
        const double t0 = vc_emu_clock();
        dev_open();
        op();
        dev_close();
        vc_emu_count_device(t0);
        return;
    }
    g_q.push_back(std::move(op));
}

extern "C" void vc_emu_flush(void) {
    lock_t l(g_mu);
    if (g_q.empty()) return;
    const double t0 = vc_emu_clock();
    dev_open();
    for (size_t i = 0; i < g_q.size() && g_sticky == cudaSuccess; i++) g_q[i](); /* an op may not enqueue */
    g_q.clear();
    dev_close();
    vc_emu_count_device(t0);
}

static cudaError_t flushed(void) { /* the status of a synchronising call */
    vc_emu_count(VC_EMU_SYNC);
    vc_emu_flush();
    return g_sticky;
}

/* ---- launches ---- */
static std::map<const void *, int> g_smem_attr;

cudaError_t vc_emu_func_attr(const void *fn, int attr, int value) {
    lock_t l(g_mu);
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return vc_emu_error(cudaErrorInvalidValue, "cudaFuncSetAttribute: attribute %d", attr);
    if (value < 0 || value > 232448)
        return vc_emu_error(cudaErrorInvalidValue, "cudaFuncSetAttribute: %d bytes of dynamic shared memory (sm_90 allows 232448)", value);
    g_smem_attr[fn] = value;
    return cudaSuccess;
}

int vc_emu_check_arg(const char *kernel, int index, const void *p) {
    if (!p) return 0;
    size_t off, len;
    lock_t l(g_mu);
    if (dev_find(p, &off, &len) || vc_emu_is_pinned(p)) return 0;
    fprintf(stderr, "cuda emulator: kernel %s: argument %d (%p) is neither device nor pinned memory%s\n", kernel, index, p,
            vc_emu_is_device_ptr(p) ? " (freed device memory)" : " (a host pointer)");
    return 1;
}

void vc_emu_submit(const char *name, const void *fn, vc_emu_cfg c, vc_emu_task *task, int bad_args) {
    std::shared_ptr<vc_emu_task> t(task);
    const dim3 &g = c.grid, &b = c.block;
    uint64_t nt = (uint64_t)b.x * b.y * b.z;
    if (!g.x || !g.y || !g.z || !nt || g.y > 65535 || g.z > 65535 || g.x > 2147483647u) {
        vc_emu_error(cudaErrorInvalidConfiguration, "kernel %s: grid (%u,%u,%u)", name, g.x, g.y, g.z);
        return;
    }
    if (nt > 1024 || b.z > 64) {
        vc_emu_error(cudaErrorInvalidConfiguration, "kernel %s: block (%u,%u,%u)", name, b.x, b.y, b.z);
        return;
    }
    lock_t l(g_mu);
    auto at = g_smem_attr.find(fn);
    size_t allowed = at == g_smem_attr.end() ? 49152 : (size_t)(at->second > 49152 ? at->second : 49152);
    if (c.smem > allowed) {
        vc_emu_error(cudaErrorInvalidValue, "kernel %s: %zu bytes of dynamic shared memory, %zu allowed (cudaFuncSetAttribute)",
                     name, c.smem, allowed);
        return;
    }
    region_init();
    vc_emu_count_launch(name);
    if (bad_args)
        vc_emu_enqueue([name]() {
            fprintf(stderr, "cuda emulator: kernel %s faults (illegal address): the context is lost\n", name);
            g_sticky = cudaErrorIllegalAddress;
        });
    else vc_emu_enqueue_on(c.stream, [name, c, t]() { vc_emu_run_grid(name, c, t.get()); });
}

/* ---- faults: name the kernel and thread, or the host code that touched device memory ---- */
static void on_fault(int sig, siginfo_t *si, void *ctx) {
    char where[256];
    vc_emu_where(where, sizeof where);
    const char *a = (const char *)si->si_addr;
    fprintf(stderr, "cuda emulator: %s in %s at address %p", sig == SIGSEGV ? "segmentation fault" : "bus error", where, a);
    if (g_base && a >= g_base && a < g_base + g_cap) {
        size_t off, len;
        if (dev_find(a, &off, &len))
            fprintf(stderr, ": device memory, byte %zu of a %zu-byte allocation%s\n", (size_t)(a - g_base) - off, len,
                    vc_emu_in_kernel() ? "" : " (host code may not touch device memory)");
        else fprintf(stderr, ": device memory outside every live allocation\n");
    } else fprintf(stderr, "%s\n", vc_emu_in_kernel() ? ": outside device memory" : "");
    void *bt[32];
    int n = backtrace(bt, 32);
    backtrace_symbols_fd(bt, n, 2);
    signal(SIGABRT, SIG_DFL);
    abort();
}

static void fault_handlers(void) {
    static char altstack[1 << 16];
    stack_t ss = {};
    ss.ss_sp = altstack;
    ss.ss_size = sizeof altstack;
    sigaltstack(&ss, NULL);
    struct sigaction sa = {};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
}

/* ---- runtime API ---- */
struct vc_emu_stream {
    unsigned flags;
    std::vector<std::function<int(int)>> pending;
};

void vc_emu_stream_pending(cudaStream_t s, std::function<int(int)> poll) {
    lock_t l(g_mu);
    if (s) s->pending.push_back(std::move(poll));
    else poll(1);
}

void vc_emu_dev_write(void *dst, const void *src, size_t n) {
    lock_t l(g_mu);
    dev_open();
    memcpy(dst, src, n);
    dev_close();
}

void vc_emu_dev_read(void *dst, const void *src, size_t n) {
    lock_t l(g_mu);
    dev_open();
    memcpy(dst, src, n);
    dev_close();
}

/* polls (block: waits for) the stream's pending operations in order; 1 when none is left */
static int poll_pending(cudaStream_t s, int block) { /* without the lock: a blocking poll waits on other ranks */
    if (!s) return 1;
    std::vector<std::function<int(int)>> p;
    {
        lock_t l(g_mu);
        p.swap(s->pending);
    }
    size_t done = 0;
    while (done < p.size() && p[done](block)) done++;
    lock_t l(g_mu);
    s->pending.insert(s->pending.begin(), p.begin() + (long)done, p.end());
    return s->pending.empty();
}
struct vc_emu_event {
    unsigned flags;
    double t; /* host clock when the queue reached the record (emulated elapsed times: CPU time) */
};
struct vc_emu_pool {
    int device;
};
static int g_device = 0;
static vc_emu_pool g_pool;

static int n_devices(void) { return (int)vc_emu_env_int("VC_EMU_DEVICES", 1); }

extern "C" {
cudaError_t cudaGetDeviceCount(int *n) {
    *n = n_devices();
    return *n > 0 ? cudaSuccess : vc_emu_error(cudaErrorNoDevice, "VC_EMU_DEVICES=0");
}
cudaError_t cudaSetDevice(int d) {
    if (d < 0 || d >= n_devices()) return vc_emu_error(cudaErrorInvalidDevice, "cudaSetDevice(%d)", d);
    g_device = d;
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int *d) {
    *d = g_device;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d) {
    if (d < 0 || d >= n_devices()) return vc_emu_error(cudaErrorInvalidDevice, "cudaGetDeviceProperties(%d)", d);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "verlc CUDA emulator on the CPU");
    p->totalGlobalMem = (size_t)vc_emu_env_int("VC_EMU_MEM_MB", 8192) << 20;
    p->sharedMemPerBlock = 49152;
    p->sharedMemPerBlockOptin = 232448;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 132;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647;
    p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr attr, int d) {
    if (d < 0 || d >= n_devices()) return vc_emu_error(cudaErrorInvalidDevice, "cudaDeviceGetAttribute: device %d", d);
    switch (attr) {
    case cudaDevAttrClockRate: *v = 1980000; return cudaSuccess; /* kHz, an H100/H200's boost clock */
    case cudaDevAttrMultiProcessorCount: *v = 132; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *v = 9; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *v = 0; return cudaSuccess;
    }
    return vc_emu_error(cudaErrorInvalidValue, "cudaDeviceGetAttribute: attribute %d", (int)attr);
}
/* device d's PCI bus id, as "0000:XX:00.0": distinct per emulated device, the same for every process on the host */
cudaError_t cudaDeviceGetPCIBusId(char *buf, int len, int d) {
    if (d < 0 || d >= n_devices()) return vc_emu_error(cudaErrorInvalidDevice, "cudaDeviceGetPCIBusId: device %d", d);
    if (len > 0) snprintf(buf, (size_t)len, "0000:%02x:00.0", d + 1);
    return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int *v) {
    *v = CUDART_VERSION;
    return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int *v) {
    *v = CUDART_VERSION;
    return cudaSuccess;
}
cudaError_t cudaGetLastError(void) {
    if (g_sticky != cudaSuccess) return g_sticky;
    cudaError_t e = g_last;
    g_last = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError(void) { return g_sticky != cudaSuccess ? g_sticky : g_last; }
const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    default: return "cudaErrorUnknown";
    }
}
const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    default: return "unknown error";
    }
}
cudaError_t cudaDeviceSynchronize(void) { return flushed(); }
cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, 0); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
    *s = new vc_emu_stream{ flags };
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    vc_emu_flush();
    poll_pending(s, 1);
    delete s;
    return cudaSuccess;
}
/* one queue for every stream: work runs in the order it was queued (a GPU may overlap streams) */
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    if (vc_emu_capturing(s)) return vc_emu_capture_sync(s, "cudaStreamSynchronize");
    cudaError_t e = flushed();
    poll_pending(s, 1);
    return e;
}
cudaError_t cudaStreamQuery(cudaStream_t s) {
    if (vc_emu_capturing(s)) return vc_emu_capture_sync(s, "cudaStreamQuery");
    cudaError_t e = flushed();
    if (e == cudaSuccess && !poll_pending(s, 0)) return cudaErrorNotReady;
    return e;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned) { return cudaSuccess; }
cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags) {
    *e = new vc_emu_event{ flags, 0.0 };
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    vc_emu_flush(); /* a queued record may still point at it */
    delete e;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    if (!e) return vc_emu_error(cudaErrorInvalidResourceHandle, "cudaEventRecord(NULL)");
    vc_emu_enqueue_on(s, [e]() {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        e->t = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    });
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t) { return flushed(); }
cudaError_t cudaEventQuery(cudaEvent_t) { return flushed(); }
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    if (!a || !b) return vc_emu_error(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime(NULL)");
    vc_emu_flush();
    *ms = (float)((b->t - a->t) * 1e3);
    return cudaSuccess;
}
cudaError_t cudaMalloc(void **p, size_t bytes) {
    if (g_sticky != cudaSuccess) return g_sticky;
    *p = dev_alloc(bytes);
    if (*p) return cudaSuccess;
    return vc_emu_error(cudaErrorMemoryAllocation, "out of emulated device memory allocating %zu bytes (%zu of %zu in use; VC_EMU_MEM_MB)",
                        bytes, g_used, g_cap);
}
cudaError_t cudaFree(void *p) {
    if (!p) return cudaSuccess;
    vc_emu_flush();
    return dev_free(p);
}
cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t s) {
    cudaError_t e = cudaMalloc(p, bytes);
    if (e == cudaSuccess) vc_emu_capture_alloc(s, *p);
    return e;
}
cudaError_t cudaFreeAsync(void *p, cudaStream_t s) {
    if (!p) return cudaSuccess;
    cudaError_t ce = cudaSuccess;
    if (vc_emu_capture_free(s, p, &ce)) return ce;
    size_t off, len;
    {
        lock_t l(g_mu);
        if (!dev_find(p, &off, &len) || g_base + off != (char *)p)
            return vc_emu_error(cudaErrorInvalidValue, "cudaFreeAsync(%p): not the start of a live allocation", p);
    }
    vc_emu_enqueue_on(s, [p]() { dev_free(p); });
    return cudaSuccess;
}
cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned) {
    size_t n = ((bytes ? bytes : 1) + 4095) & ~(size_t)4095;
    *p = aligned_alloc(4096, n);
    if (!*p) return vc_emu_error(cudaErrorMemoryAllocation, "cudaHostAlloc(%zu)", bytes);
    lock_t l(g_mu);
    region_init();
    g_pinned[(uintptr_t)*p] = n;
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t bytes) { return cudaHostAlloc(p, bytes, 0); }
cudaError_t cudaFreeHost(void *p) {
    vc_emu_flush();
    lock_t l(g_mu);
    if (!g_pinned.erase((uintptr_t)p)) return vc_emu_error(cudaErrorInvalidValue, "cudaFreeHost(%p): not pinned memory", p);
    free(p);
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total) {
    lock_t l(g_mu);
    region_init();
    *total = g_cap;
    *free_bytes = g_cap - g_hw; /* as on a GPU: memory the pool holds (freed or not) is not free to the device */
    return cudaSuccess;
}

static const char *kind_name(cudaMemcpyKind k) {
    static const char *n[] = { "host to host", "host to device", "device to host", "device to device", "default" };
    return (unsigned)k <= 4 ? n[k] : "?";
}

/* s: the stream of an async copy (NULL: cudaMemcpy, the legacy stream, never captured) */
static cudaError_t copy(void *dst, const void *src, size_t n, cudaMemcpyKind kind, int sync, cudaStream_t s) {
    if (g_sticky != cudaSuccess) return g_sticky;
    if (!n) return cudaSuccess;
    int cap = s && vc_emu_capturing(s);
    lock_t l(g_mu);
    region_init();
    int dd = vc_emu_is_device_ptr(dst), sd = vc_emu_is_device_ptr(src);
    if (kind == cudaMemcpyDefault) kind = (cudaMemcpyKind)((sd ? 2 : 0) + (dd ? 1 : 0));
    int want_d = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    int want_s = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (dd != want_d || sd != want_s)
        return vc_emu_error(cudaErrorInvalidValue, "cudaMemcpy %s of %zu bytes from %s %p to %s %p", kind_name(kind), n,
                            sd ? "device" : "host", src, dd ? "device" : "host", dst);
    if ((dd && !vc_emu_dev_range(dst, n)) || (sd && !vc_emu_dev_range(src, n)))
        return vc_emu_error(cudaErrorInvalidValue, "cudaMemcpy %s of %zu bytes: the %s range leaves its allocation", kind_name(kind),
                            n, dd && !vc_emu_dev_range(dst, n) ? "destination" : "source");
    vc_emu_count_copy((int)kind, n);
    if (cap && ((kind == cudaMemcpyHostToDevice && !vc_emu_is_pinned(src)) ||
                (kind == cudaMemcpyDeviceToHost && !vc_emu_is_pinned(dst))))
        return vc_emu_capture_sync(s, "cudaMemcpyAsync with pageable host memory");
    if (kind == cudaMemcpyHostToDevice && !vc_emu_is_pinned(src)) { /* pageable: read the source now */
        std::shared_ptr<std::vector<char>> tmp(new std::vector<char>((const char *)src, (const char *)src + n));
        vc_emu_enqueue([dst, tmp]() { memcpy(dst, tmp->data(), tmp->size()); });
    } else if (kind == cudaMemcpyDeviceToHost && !vc_emu_is_pinned(dst)) { /* pageable: completes before return */
        vc_emu_flush();
        dev_open();
        memcpy(dst, src, n);
        dev_close();
    } else vc_emu_enqueue_on(s, [dst, src, n]() { memmove(dst, src, n); });
    if (sync) return flushed();
    return g_sticky;
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    return copy(dst, src, bytes, kind, 1, NULL);
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s) {
    return copy(dst, src, bytes, kind, 0, s);
}
cudaError_t cudaMemsetAsync(void *dst, int v, size_t bytes, cudaStream_t s) {
    if (!bytes) return cudaSuccess;
    if (!vc_emu_dev_range(dst, bytes)) return vc_emu_error(cudaErrorInvalidValue, "cudaMemset of %zu bytes at %p: not inside one allocation", bytes, dst);
    vc_emu_count(VC_EMU_MEMSET);
    vc_emu_enqueue_on(s, [dst, v, bytes]() { memset(dst, v, bytes); });
    return cudaSuccess;
}
cudaError_t cudaMemset(void *dst, int v, size_t bytes) {
    cudaError_t e = cudaMemsetAsync(dst, v, bytes, 0);
    vc_emu_flush();
    return e;
}
cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p) {
    memset(a, 0, sizeof *a);
    if (vc_emu_is_device_ptr(p)) {
        a->type = cudaMemoryTypeDevice;
        a->device = g_device;
        a->devicePointer = (void *)p;
    } else if (vc_emu_is_pinned(p)) {
        a->type = cudaMemoryTypeHost;
        a->hostPointer = a->devicePointer = (void *)p;
    }
    return cudaSuccess;
}
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device) {
    g_pool.device = device;
    *pool = &g_pool;
    return cudaSuccess;
}
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t, enum cudaMemPoolAttr, void *) { return cudaSuccess; }
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t, enum cudaMemPoolAttr attr, void *value) {
    lock_t l(g_mu);
    *(uint64_t *)value = attr == cudaMemPoolAttrUsedMemCurrent ? g_used : attr == cudaMemPoolAttrUsedMemHigh ? g_used_high : g_hw;
    return cudaSuccess;
}
cudaError_t cudaMemPoolTrimTo(cudaMemPool_t, size_t) { return cudaSuccess; }
}
