/* CUDA device context: device selection, the one verlc stream, cuBLAS handle, stream-ordered pool
 * memory, copies, sticky error reporting, the f32 / bf16 GEMMs and the op table. */
#include "cuda_internal.h"
#include <cuda_bf16.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_ready = 0, g_device = -1, g_sync_each = 0, g_sms = 1;

int vc_cu_sm_count(void) { return g_sms; }
static cudaStream_t g_stream;
static cublasHandle_t g_blas;
static cudaMemPool_t g_pool;
static void *g_blas_ws;
#define BLAS_WS ((size_t)32 << 20)
static vc_status g_err = VC_OK;
static char g_msg[512];
static const char *g_last_op = NULL; /* last kernel launched since the last successful wait */
static char *g_stage; /* pinned staging ring (below) */
static void stage_init(void);
static void stage_free(void);

cudaStream_t vc_cu_stream(void) { return g_stream; }
cublasHandle_t vc_cu_blas(void) { return g_blas; }
void *vc_cuda_stream(void) { return (void *)g_stream; }
int vc_cuda_ready(void) { return g_ready; }

static vc_status set_sticky(vc_status st, const char *op, const char *what) {
    pthread_mutex_lock(&g_lock);
    if (g_err == VC_OK) {
        g_err = st;
        snprintf(g_msg, sizeof g_msg, "cuda: %s: %s", op, what);
    }
    pthread_mutex_unlock(&g_lock);
    return vc_fail(st, "cuda: %s: %s", op, what);
}

vc_status vc_cu_fail(vc_status st, const char *op, const char *what) { return set_sticky(st, op, what); }

int vc_cu_ok(cudaError_t e, const char *op) {
    if (e == cudaSuccess) return 1;
    set_sticky(e == cudaErrorMemoryAllocation ? VC_ERR_NOMEM : VC_ERR_DEVICE, op, cudaGetErrorString(e));
    return 0;
}

int vc_cu_blas_ok(cublasStatus_t s, const char *op) {
    if (s == CUBLAS_STATUS_SUCCESS) return 1;
    char what[128];
    snprintf(what, sizeof what, "cuBLAS %s", cublasGetStatusString(s));
    set_sticky(s == CUBLAS_STATUS_ALLOC_FAILED ? VC_ERR_NOMEM : VC_ERR_DEVICE, op, what);
    return 0;
}

vc_status vc_cuda_error(void) {
    if (g_err != VC_OK) vc_fail(g_err, "%s", g_msg);
    return g_err;
}

void vc_cuda_clear_error(void) {
    pthread_mutex_lock(&g_lock);
    g_err = VC_OK;
    g_msg[0] = 0;
    pthread_mutex_unlock(&g_lock);
    cudaGetLastError();
}

int vc_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

static vc_status no_device(cudaError_t e) {
    cudaGetLastError();
    int rt = 0;
    cudaRuntimeGetVersion(&rt);
    char why[160];
    if (e == cudaErrorInsufficientDriver)
        snprintf(why, sizeof why, "no NVIDIA driver, or one older than CUDA %d.%d", rt / 1000, rt % 1000 / 10);
    else if (e == cudaSuccess || e == cudaErrorNoDevice) snprintf(why, sizeof why, "no CUDA-capable GPU found");
    else snprintf(why, sizeof why, "%s", cudaGetErrorString(e));
    return vc_fail(VC_ERR_DEVICE, "cuda: no usable CUDA device (%s); use --device cpu to run on the CPU", why);
}

static vc_status init_locked(int device) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) return no_device(e);
    if (device < 0) {
        const char *env = getenv("VERLC_CUDA_DEVICE");
        device = env && *env ? atoi(env) : 0;
    }
    if (device >= n)
        return vc_fail(VC_ERR_ARG, "cuda: device %d requested, %d present (VERLC_CUDA_DEVICE / --device cuda:N)",
                       device, n);
    if (g_ready) {
        if (device == g_device) return VC_OK;
        return vc_fail(VC_ERR_ARG, "cuda: already initialised on device %d, cannot switch to %d", g_device, device);
    }
    const char *op = "device init";
    if (!vc_cu_ok(cudaSetDevice(device), op)) return vc_cuda_error();
    if (!vc_cu_ok(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking), op)) return vc_cuda_error();
    if (!vc_cu_blas_ok(cublasCreate(&g_blas), op)) return vc_cuda_error();
    const char *tf32 = getenv("VERLC_CUDA_TF32");
    cublasSetMathMode(g_blas, tf32 && atoi(tf32) ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
    cublasSetStream(g_blas, g_stream);
    /* a workspace of its own, so cuBLAS allocates nothing while a graph is captured */
    if (cudaMalloc(&g_blas_ws, BLAS_WS) == cudaSuccess) cublasSetWorkspace(g_blas, g_blas_ws, BLAS_WS);
    else {
        cudaGetLastError();
        g_blas_ws = NULL;
    }
    if (!vc_cu_ok(cudaDeviceGetDefaultMemPool(&g_pool, device), op)) return vc_cuda_error();
    uint64_t keep = UINT64_MAX; /* freed blocks stay in the pool */
    cudaMemPoolSetAttribute(g_pool, cudaMemPoolAttrReleaseThreshold, &keep);
    const char *sy = getenv("VERLC_CUDA_SYNC");
    g_sync_each = sy && atoi(sy);
    stage_init();
    if (cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || g_sms < 1) {
        cudaGetLastError();
        g_sms = 1;
    }
    g_device = device;
    g_ready = 1;
    return VC_OK;
}

vc_status vc_cuda_init(int device) {
    pthread_mutex_lock(&g_lock);
    vc_status st = init_locked(device);
    pthread_mutex_unlock(&g_lock);
    return st;
}

void vc_cuda_shutdown(void) {
    pthread_mutex_lock(&g_lock);
    if (g_ready) {
        vc_cuda_bf16_shadow_drop();
        vc_cu_paged_release();
        cudaStreamSynchronize(g_stream);
        stage_free();
        vc_cuda_graph_drop();
        vc_cu_lt_release();
        cublasDestroy(g_blas);
        if (g_blas_ws) cudaFree(g_blas_ws);
        g_blas_ws = NULL;
        cudaStreamDestroy(g_stream);
        cudaMemPoolTrimTo(g_pool, 0);
        g_ready = 0;
        g_device = -1;
    }
    pthread_mutex_unlock(&g_lock);
}

vc_status vc_cuda_device_name(char *buf, size_t len) {
    if (!g_ready && vc_cuda_init(-1) != VC_OK) return VC_ERR_DEVICE;
    cudaDeviceProp p;
    int drv = 0;
    if (!vc_cu_ok(cudaGetDeviceProperties(&p, g_device), "device query")) return vc_cuda_error();
    cudaDriverGetVersion(&drv);
    snprintf(buf, len, "%s (sm_%d%d, %.1f GiB, %d SMs, driver %d.%d)", p.name, p.major, p.minor,
             (double)p.totalGlobalMem / (1024.0 * 1024 * 1024), p.multiProcessorCount, drv / 1000, drv % 1000 / 10);
    return VC_OK;
}

/* device ready and no sticky error (memory and copies: not subject to graph capture / replay) */
int vc_cu_begin_io(const char *op) {
    if (!g_ready) {
        if (vc_cuda_init(-1) != VC_OK) {
            pthread_mutex_lock(&g_lock);
            if (g_err == VC_OK) {
                g_err = VC_ERR_DEVICE;
                snprintf(g_msg, sizeof g_msg, "%s", vc_last_error());
            }
            pthread_mutex_unlock(&g_lock);
            return 0;
        }
    }
    if (g_err != VC_OK) {
        vc_fail(g_err, "%s (earlier error; %s skipped)", g_msg, op);
        return 0;
    }
    /* the current device is per host thread: select ours in threads other than the initialising one */
    static thread_local int t_device = -1;
    if (t_device != g_device) {
        if (!vc_cu_ok(cudaSetDevice(g_device), op)) return 0;
        t_device = g_device;
    }
    return 1;
}

/* The device's promised dense peak in FLOP/s (as verl's MFU): bf16 tensor cores, or f32 CUDA cores. By name
 * for the data-centre parts verl lists, else SMs x clock x FLOP per SM per clock for the architecture. */
vc_status vc_cuda_peak_flops(int bf16, double *flops) {
    static const struct { const char *name; double bf16, f32; } known[] = {
        { "H200", 989e12, 67e12 }, { "H100", 989e12, 67e12 }, { "H800", 989e12, 67e12 }, { "H20", 148e12, 44e12 },
        { "A100", 312e12, 19.5e12 }, { "A800", 312e12, 19.5e12 }, { "L40S", 362e12, 91.6e12 },
    };
    *flops = 0;
    if (!vc_cu_begin_io("peak query")) return vc_cuda_error();
    cudaDeviceProp p;
    int clk = 0, sms = 0, major = 0, minor = 0;
    if (!vc_cu_ok(cudaGetDeviceProperties(&p, g_device), "peak query")) return vc_cuda_error();
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strstr(p.name, known[i].name)) {
            *flops = bf16 ? known[i].bf16 : known[i].f32;
            return VC_OK;
        }
    cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, g_device);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, g_device);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, g_device);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, g_device);
    cudaGetLastError();
    double per = bf16 ? (major >= 9 ? 4096 : major == 8 && minor == 0 ? 2048 : 1024) : (major >= 9 ? 256 : 128);
    *flops = (double)sms * clk * 1e3 * per;
    return *flops > 0 ? VC_OK : vc_fail(VC_ERR_DEVICE, "cuda: %s: no clock or SM count", p.name);
}

/* > 0 while an op runs other op-table entries inside its own interval (the LM head's held operands): the profiler
 * counts them as part of that op instead of opening entries of their own */
static int g_prof_nest;
void vc_cu_prof_nest(int d) { g_prof_nest += d; }

int vc_cu_begin(const char *op) {
    if (!vc_cu_begin_io(op)) return 0;
    if (vc_cu_graph_mode) return vc_cu_graph_note(op); /* replaying: the op is in the graph, queue nothing */
    if (vc_cu_prof_on && !g_prof_nest && vc_cu_prof_enabled()) vc_cu_prof_begin(op);
    return 1;
}

int vc_cu_end(const char *op) {
    g_last_op = op;
    if (vc_cu_prof_on > 0 && !vc_cu_graph_mode) vc_cu_prof_end(op);
    if (!vc_cu_ok(cudaGetLastError(), op)) return 0;
    if (g_sync_each && !vc_cu_graph_mode && !vc_cu_ok(cudaStreamSynchronize(g_stream), op)) return 0;
    return 1;
}

/* waits for the stream; a fault is named after the last kernel launched (VERLC_CUDA_SYNC=1 pins it) */
static int wait_stream(const char *op) {
    if (!vc_cu_ok(cudaStreamSynchronize(g_stream), g_last_op ? g_last_op : op)) return 0;
    g_last_op = NULL;
    if (vc_cu_prof_on > 0) vc_cu_prof_collect();
    return 1;
}

vc_status vc_cuda_sync(void) {
    if (vc_cu_graph_mode) {
        vc_cu_graph_taint(); /* a wait */
        return vc_fail(VC_ERR_UNSUPPORTED, "cuda: a wait inside a graph capture or replay");
    }
    if (!g_ready) return vc_cuda_init(-1);
    if (g_err != VC_OK) return vc_cuda_error();
    if (!wait_stream("sync")) return vc_cuda_error();
    return VC_OK;
}

/* ---- memory ---- */
static size_t g_scratch_fault; /* vc_cuda_fault_scratch_over */

void vc_cuda_fault_scratch_over(size_t bytes) { g_scratch_fault = bytes; }

cudaError_t vc_cu_malloc_async(void **p, size_t bytes) {
    if (g_scratch_fault && bytes > g_scratch_fault) return cudaErrorMemoryAllocation;
    return cudaMallocAsync(p, bytes ? bytes : 256, g_stream);
}

void *vc_cu_scratch(size_t bytes, const char *op) {
    void *p = NULL;
    cudaError_t e = vc_cu_malloc_async(&p, bytes);
    if (e != cudaSuccess) {
        char what[160];
        snprintf(what, sizeof what, "out of device memory allocating %.1f MiB (%s)", bytes / 1048576.0,
                 cudaGetErrorString(e));
        cudaGetLastError();
        set_sticky(VC_ERR_NOMEM, op, what);
        return NULL;
    }
    return p;
}

void vc_cu_scratch_free(void *p) {
    if (p) cudaFreeAsync(p, g_stream);
}

static vc_status stage_h2d(char *dst, const char *src, size_t bytes, const char *op);
static vc_status copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, const char *op, int wait);

void *vc_cu_upload(const void *src, size_t bytes, const char *op) {
    if (vc_cu_graph_mode == 1) { /* fresh scratch belongs to the graph: the host cannot fill it now */
        vc_cu_graph_taint();
        return NULL;
    }
    void *p = vc_cu_scratch(bytes, op);
    if (!p) return NULL;
    /* through the pinned ring when there is one; else a pageable cudaMemcpyAsync (the driver stages the
     * source before returning, so the host buffer may go away) */
    vc_status st = !bytes ? VC_OK
                   : g_stage ? stage_h2d((char *)p, (const char *)src, bytes, op)
                             : copy(p, src, bytes, cudaMemcpyHostToDevice, op, 0);
    if (st != VC_OK) {
        vc_cu_scratch_free(p);
        return NULL;
    }
    return p;
}

/* An allocation failure is reported to the caller (NULL, VC_ERR_NOMEM naming the size) but is not a
 * sticky device error: the stream is fine, and the caller may free memory and try again. */
void *vc_cuda_malloc(size_t bytes) {
    if (!vc_cu_begin_io("malloc")) return NULL;
    if (vc_cu_graph_mode) { /* an allocation moves what a graph would read: no graph for this step */
        vc_cu_graph_taint(); /* an allocation */
        if (vc_cu_graph_mode == 1) {
            vc_fail(VC_ERR_NOMEM, "cuda: no allocation while capturing a graph");
            return NULL;
        }
    }
    void *p = NULL;
    cudaError_t e = cudaMallocAsync(&p, bytes ? bytes : 256, g_stream);
    if (e != cudaSuccess) {
        cudaGetLastError();
        size_t f = 0, t = 0;
        cudaMemGetInfo(&f, &t);
        vc_fail(VC_ERR_NOMEM, "cuda: out of device memory allocating %.1f MiB (%.1f MiB free of %.1f MiB: %s)",
                bytes / 1048576.0, f / 1048576.0, t / 1048576.0, cudaGetErrorString(e));
        return NULL;
    }
    return p;
}

void vc_cuda_free(void *p) {
    if (!p || !g_ready) return;
    if (vc_cu_graph_mode == 1) { /* freed outside the capture, once it ends */
        vc_cu_graph_taint(); /* a free */
        vc_cu_graph_defer_free(p);
        return;
    }
    cudaFreeAsync(p, g_stream);
}

vc_status vc_cuda_memset0(void *dst, size_t bytes) {
    if (!vc_cu_begin("memset")) return vc_cuda_error();
    if (!vc_cu_ok(cudaMemsetAsync(dst, 0, bytes, g_stream), "memset")) return vc_cuda_error();
    return vc_cu_end("memset") ? VC_OK : vc_cuda_error(); /* (the profiler's entry closes here) */
}

static vc_status copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, const char *op, int wait) {
    if (!vc_cu_begin(op)) return vc_cuda_error();
    if (bytes && !vc_cu_ok(cudaMemcpyAsync(dst, src, bytes, kind, g_stream), op)) return vc_cuda_error();
    if (!vc_cu_end(op)) return vc_cuda_error(); /* (the profiler's entry closes here) */
    if (bytes && wait && !wait_stream(op)) return vc_cuda_error();
    return VC_OK;
}

/* ---- pinned staging ring for host <-> device copies ----
 * STAGE_N chunks of STAGE_CHUNK bytes of page-locked memory, each with an event recorded after the
 * last copy that used it. h2d copies a piece of the pageable source into a free chunk (waiting only
 * for that chunk's previous copy, not for the stream) and queues the DMA, so it returns as soon as the
 * source has been read. d2h queues up to STAGE_N pieces ahead and copies each one out to the pageable
 * destination once its event has fired, so the host copy-out overlaps the DMA of the next pieces.
 * Without pinned memory (cudaHostAlloc failed) copies fall back to cudaMemcpyAsync plus a stream wait. */
#define STAGE_N 4
#define STAGE_CHUNK ((size_t)2 << 20)
static pthread_mutex_t g_stage_lock = PTHREAD_MUTEX_INITIALIZER;
static cudaEvent_t g_stage_ev[STAGE_N];
static int g_stage_next = 0;

/* called with g_lock held from init_locked; a failure only disables the ring */
static void stage_init(void) {
    void *p = NULL;
    if (cudaHostAlloc(&p, STAGE_N * STAGE_CHUNK, cudaHostAllocDefault) != cudaSuccess) {
        cudaGetLastError();
        return;
    }
    for (int i = 0; i < STAGE_N; i++) {
        if (cudaEventCreateWithFlags(&g_stage_ev[i], cudaEventDisableTiming) != cudaSuccess) {
            cudaGetLastError();
            for (int j = 0; j < i; j++) cudaEventDestroy(g_stage_ev[j]);
            cudaFreeHost(p);
            return;
        }
    }
    g_stage = (char *)p;
    g_stage_next = 0;
}

static void stage_free(void) {
    if (!g_stage) return;
    for (int i = 0; i < STAGE_N; i++) cudaEventDestroy(g_stage_ev[i]);
    cudaFreeHost(g_stage);
    g_stage = NULL;
}

/* waits until chunk i's previous copy is done; a fault is named after the last kernel launched */
static int stage_wait(int i, const char *op) {
    return vc_cu_ok(cudaEventSynchronize(g_stage_ev[i]), g_last_op ? g_last_op : op);
}

static vc_status stage_h2d(char *dst, const char *src, size_t bytes, const char *op) {
    vc_status st = VC_OK;
    pthread_mutex_lock(&g_stage_lock);
    for (size_t off = 0; off < bytes; off += STAGE_CHUNK) {
        size_t n = bytes - off < STAGE_CHUNK ? bytes - off : STAGE_CHUNK;
        int i = g_stage_next;
        g_stage_next = (i + 1) % STAGE_N;
        char *buf = g_stage + (size_t)i * STAGE_CHUNK;
        if (!stage_wait(i, op)) goto fail;
        memcpy(buf, src + off, n);
        if (!vc_cu_ok(cudaMemcpyAsync(dst + off, buf, n, cudaMemcpyHostToDevice, g_stream), op)) goto fail;
        if (!vc_cu_ok(cudaEventRecord(g_stage_ev[i], g_stream), op)) goto fail;
    }
    goto out;
fail:
    st = vc_cuda_error();
out:
    pthread_mutex_unlock(&g_stage_lock);
    if (st == VC_OK && g_sync_each && !wait_stream(op)) st = vc_cuda_error();
    return st;
}

static vc_status stage_d2h(char *dst, const char *src, size_t bytes, const char *op) {
    vc_status st = VC_OK;
    size_t pend_off[STAGE_N], pend_n[STAGE_N];
    int pend[STAGE_N] = { 0 };
    pthread_mutex_lock(&g_stage_lock);
    /* chunk i of this call is (first + k) % STAGE_N for the k-th piece: pieces drain in order */
    int first = g_stage_next, k = 0;
    for (size_t off = 0; off < bytes; off += STAGE_CHUNK, k++) {
        size_t n = bytes - off < STAGE_CHUNK ? bytes - off : STAGE_CHUNK;
        int i = (first + k) % STAGE_N;
        char *buf = g_stage + (size_t)i * STAGE_CHUNK;
        if (!stage_wait(i, op)) goto fail;
        if (pend[i]) { /* an earlier piece of this copy sits in the chunk: copy it out first */
            memcpy(dst + pend_off[i], buf, pend_n[i]);
            pend[i] = 0;
        }
        if (!vc_cu_ok(cudaMemcpyAsync(buf, src + off, n, cudaMemcpyDeviceToHost, g_stream), op)) goto fail;
        if (!vc_cu_ok(cudaEventRecord(g_stage_ev[i], g_stream), op)) goto fail;
        pend[i] = 1;
        pend_off[i] = off;
        pend_n[i] = n;
    }
    for (int j = 0; j < STAGE_N; j++) { /* the last pieces, oldest first */
        int i = (first + k + j) % STAGE_N;
        if (!pend[i]) continue;
        if (!stage_wait(i, op)) goto fail;
        memcpy(dst + pend_off[i], g_stage + (size_t)i * STAGE_CHUNK, pend_n[i]);
        pend[i] = 0;
    }
    g_stage_next = (first + k) % STAGE_N;
    g_last_op = NULL; /* the stream has run everything queued before the last piece */
    if (vc_cu_prof_on > 0) vc_cu_prof_collect();
    goto out;
fail:
    g_stage_next = (first + k + 1) % STAGE_N;
    st = vc_cuda_error();
out:
    pthread_mutex_unlock(&g_stage_lock);
    return st;
}

vc_status vc_cuda_h2d(void *dst, const void *src, size_t bytes) {
    const char *op = "host-to-device copy";
    if (vc_cu_graph_mode == 1) { /* capturing (the stream is idle): a copy outside the graph, done now */
        if (!vc_cu_begin_io(op)) return vc_cuda_error();
        return !bytes || vc_cu_ok(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), op) ? VC_OK : vc_cuda_error();
    }
    if (!g_stage) return copy(dst, src, bytes, cudaMemcpyHostToDevice, op, 1);
    if (!vc_cu_begin_io(op)) return vc_cuda_error();
    return bytes ? stage_h2d((char *)dst, (const char *)src, bytes, op) : VC_OK;
}
vc_status vc_cuda_d2h(void *dst, const void *src, size_t bytes) {
    const char *op = "device-to-host copy";
    if (vc_cu_graph_mode) { /* a wait inside a capture or replay: not a graph step */
        vc_cu_graph_taint();
        return vc_fail(VC_ERR_UNSUPPORTED, "cuda: %s inside a graph capture or replay", op);
    }
    if (!g_stage) return copy(dst, src, bytes, cudaMemcpyDeviceToHost, op, 1);
    if (!vc_cu_begin_io(op)) return vc_cuda_error();
    if (!bytes) return wait_stream(op) ? VC_OK : vc_cuda_error();
    return stage_d2h((char *)dst, (const char *)src, bytes, op);
}
vc_status vc_cuda_d2d(void *dst, const void *src, size_t bytes) {
    return copy(dst, src, bytes, cudaMemcpyDeviceToDevice, "device-to-device copy", 0);
}

/* free: the device's free memory and what the pool holds unused (its freed blocks, kept for reuse: verlc's next
 * allocations come from there first), so a plan or a KV pool made after other work has been freed sees it */
vc_status vc_cuda_mem_info(size_t *used, size_t *free_bytes, size_t *total) {
    if (!vc_cu_begin_io("memory query")) return vc_cuda_error();
    uint64_t u = 0, r = 0;
    size_t f = 0, t = 0;
    cudaMemPoolGetAttribute(g_pool, cudaMemPoolAttrUsedMemCurrent, &u);
    cudaMemPoolGetAttribute(g_pool, cudaMemPoolAttrReservedMemCurrent, &r);
    if (!vc_cu_ok(cudaMemGetInfo(&f, &t), "memory query")) return vc_cuda_error();
    if (used) *used = (size_t)u;
    if (free_bytes) *free_bytes = f + (r > u ? (size_t)(r - u) : 0);
    if (total) *total = t;
    return VC_OK;
}

vc_status vc_cuda_mem_peak(size_t *used_high, size_t *reserved_high) {
    if (!vc_cu_begin_io("memory query")) return vc_cuda_error();
    uint64_t u = 0, r = 0;
    if (!vc_cu_ok(cudaMemPoolGetAttribute(g_pool, cudaMemPoolAttrUsedMemHigh, &u), "memory query") ||
        !vc_cu_ok(cudaMemPoolGetAttribute(g_pool, cudaMemPoolAttrReservedMemHigh, &r), "memory query"))
        return vc_cuda_error();
    *used_high = (size_t)u;
    *reserved_high = (size_t)r;
    return VC_OK;
}

/* ---- GEMM ---- */
__global__ void k_scale_rows(float *C, int64_t M, int64_t N, int64_t ldc, float beta) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    for (; i < M * N; i += (int64_t)gridDim.x * blockDim.x) {
        float *c = C + (i / N) * ldc + i % N;
        *c = beta == 0.0f ? 0.0f : beta * *c;
    }
}

static int dims_ok(int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc, const char *op) {
    if (M > INT_MAX || N > INT_MAX || K > INT_MAX || lda > INT_MAX || ldb > INT_MAX || ldc > INT_MAX) {
        set_sticky(VC_ERR_UNSUPPORTED, op, "GEMM dimension over 2^31");
        return 0;
    }
    return 1;
}

/* dst[i] = bf16(src[i]) four at a time (a float4 in, two bf16 pairs out) */
__global__ void k_pack_bf16_flat4(__nv_bfloat16 *dst, const float *src, int64_t n4) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
        float4 v = reinterpret_cast<const float4 *>(src)[i];
        reinterpret_cast<__nv_bfloat162 *>(dst)[2 * i] = __floats2bfloat162_rn(v.x, v.y);
        reinterpret_cast<__nv_bfloat162 *>(dst)[2 * i + 1] = __floats2bfloat162_rn(v.z, v.w);
    }
}
/* dst[r * cols + c] = bf16(src[r * ld + c]): rows across blockIdx.y, columns across the threads (no divisions) */
__global__ void k_pack_bf16_rows(__nv_bfloat16 *dst, const float *src, int64_t rows, int64_t cols, int64_t ld) {
    VC_ROW_LOOP(r, rows) VC_COL_LOOP(c, cols) dst[r * cols + c] = __float2bfloat16_rn(src[r * ld + c]);
}
/* the used part of a strided operand, rounded to bf16 (nearest even) and packed */
static void pack_bf16(__nv_bfloat16 *dst, const float *src, int64_t rows, int64_t cols, int64_t ld) {
    int64_t n = rows * cols;
    if (n <= 0) return;
    if ((ld == cols || rows == 1) && n % 4 == 0 && ((uintptr_t)src & 15) == 0 && ((uintptr_t)dst & 7) == 0) {
        k_pack_bf16_flat4<<<vc_cu_blocks(n / 4, 256), 256, 0, g_stream>>>(dst, src, n / 4);
        return;
    }
    int64_t gx = (cols + 255) / 256;
    dim3 grid((unsigned)(gx < 64 ? gx : 64), (unsigned)(rows < 65535 ? rows : 65535));
    k_pack_bf16_rows<<<grid, 256, 0, g_stream>>>(dst, src, rows, cols, ld);
}

/* ---- bf16 weight copies (vc_cuda_bf16_shadow_add) ---- */
struct bf16_copy {
    const float *w;
    int64_t rows, cols;
    __nv_bfloat16 *h;
    int refs; /* a held operand: its holds not yet released (a norm's own, then its consumer's) */
};
static bf16_copy *g_sh;
static int g_nsh, g_sh_hits;
static __nv_bfloat16 *g_sh_mem;

void vc_cuda_bf16_shadow_drop(void) {
    if (g_sh_mem) vc_cu_scratch_free(g_sh_mem);
    free(g_sh);
    g_sh = NULL;
    g_sh_mem = NULL;
    g_nsh = 0;
}

int vc_cuda_bf16_shadow_hits(void) { return g_sh_hits; }

const void *vc_cuda_bf16_copy_at(const float *w, int64_t rows, int64_t cols) {
    for (int i = 0; i < g_nsh; i++)
        if (g_sh[i].w == w && g_sh[i].rows == rows && g_sh[i].cols == cols) return g_sh[i].h;
    return NULL;
}

/* every registered weight rounded in one launch (a model's few hundred tensors were as many launches, the small ones'
 * launch gaps longer than their bytes): a table of runs, each block rounds PACK_PER_BLOCK elements of one run (its run
 * found by a binary search over the first blocks), four at a time where the run's ends allow: the bits of pack_bf16 */
struct pack_run {
    const float *src;
    __nv_bfloat16 *dst;
    int64_t n, blk0;
};
#define PACK_PER_BLOCK 8192
__global__ void k_pack_bf16_mt(const pack_run *tab, int n_tab) {
    int lo = 0, hi = n_tab - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (tab[mid].blk0 <= (int64_t)blockIdx.x) lo = mid;
        else hi = mid - 1;
    }
    const pack_run e = tab[lo];
    const int64_t i0 = ((int64_t)blockIdx.x - e.blk0) * PACK_PER_BLOCK, i1 = i0 + PACK_PER_BLOCK < e.n ? i0 + PACK_PER_BLOCK : e.n;
    if (((uintptr_t)e.src & 15) == 0 && ((uintptr_t)e.dst & 7) == 0) { /* i0 is a multiple of 4: aligned runs of 4 */
        const int64_t i4 = i0 + (i1 - i0) / 4 * 4;
        for (int64_t i = i0 + 4 * (int64_t)threadIdx.x; i < i4; i += 4 * (int64_t)blockDim.x) {
            float4 v = *reinterpret_cast<const float4 *>(e.src + i);
            reinterpret_cast<__nv_bfloat162 *>(e.dst + i)[0] = __floats2bfloat162_rn(v.x, v.y);
            reinterpret_cast<__nv_bfloat162 *>(e.dst + i)[1] = __floats2bfloat162_rn(v.z, v.w);
        }
        for (int64_t i = i4 + threadIdx.x; i < i1; i += blockDim.x) e.dst[i] = __float2bfloat16_rn(e.src[i]);
    } else
        for (int64_t i = i0 + threadIdx.x; i < i1; i += blockDim.x) e.dst[i] = __float2bfloat16_rn(e.src[i]);
}

/* the n copies' weights (rows x cols floats each) rounded into their bf16 copies, in one launch */
static void pack_bf16_runs(const bf16_copy *sh, int n, const char *op) {
    pack_run *tab = (pack_run *)malloc((size_t)(n > 0 ? n : 1) * sizeof *tab);
    if (!tab) {
        set_sticky(VC_ERR_NOMEM, op, "no memory for the table of runs");
        return;
    }
    int nt = 0;
    int64_t blocks = 0;
    for (int i = 0; i < n; i++) {
        const int64_t len = sh[i].rows * sh[i].cols;
        if (len <= 0) continue;
        tab[nt++] = pack_run{ sh[i].w, sh[i].h, len, blocks };
        blocks += (len + PACK_PER_BLOCK - 1) / PACK_PER_BLOCK;
    }
    if (blocks > 0x7fffffff) set_sticky(VC_ERR_UNSUPPORTED, op, "over 2^31 blocks");
    else if (nt) {
        pack_run *dev = (pack_run *)vc_cu_upload(tab, (size_t)nt * sizeof *tab, op);
        if (dev) k_pack_bf16_mt<<<(unsigned)blocks, 256, 0, g_stream>>>(dev, nt);
        vc_cu_scratch_free(dev);
    }
    free(tab);
}

/* the bf16 elements a weight's copy takes: n rounded up to 8 (16 bytes), so that the next copy starts aligned */
static size_t shadow_span(int64_t n) { return n > 0 ? ((size_t)n + 7) & ~(size_t)7 : 0; }

vc_status vc_cuda_bf16_shadow_add(const float *const *w, const int64_t *rows, const int64_t *cols, int n) {
    const char *op = "bf16 weight copies";
    vc_cuda_bf16_shadow_drop();
    if (!vc_cu_begin(op)) return vc_cuda_error();
    /* each copy starts on a 16-byte boundary, as a scratch operand rounded on the fly does: cuBLAS picks its kernels by
     * the operands' alignment (after a tensor of an odd size every later copy lay 2 bytes off one: slower kernels, other
     * bits). Sizes that are multiples of 8 leave the copies side by side as before (q, k and v read as one operand) */
    size_t total = 0;
    for (int i = 0; i < n; i++) total += shadow_span(rows[i] * cols[i]);
    if (!total) return VC_OK;
    void *mem = NULL;
    bf16_copy *sh = (bf16_copy *)calloc((size_t)n, sizeof *sh);
    if (!sh || cudaMallocAsync(&mem, total * 2, g_stream) != cudaSuccess) { /* not sticky: GEMMs pack as before */
        cudaGetLastError();
        free(sh);
        return vc_fail(VC_ERR_NOMEM, "cuda: %s: no room for %.1f MiB", op, total * 2 / 1048576.0);
    }
    __nv_bfloat16 *at = (__nv_bfloat16 *)mem;
    for (int i = 0; i < n; i++) {
        sh[i] = bf16_copy{ w[i], rows[i], cols[i], at };
        at += shadow_span(rows[i] * cols[i]);
    }
    pack_bf16_runs(sh, n, op);
    g_sh = sh;
    g_nsh = n;
    g_sh_mem = (__nv_bfloat16 *)mem;
    g_sh_hits = 0;
    return vc_cu_end(op) ? VC_OK : vc_cuda_error();
}

/* ---- held operands (vc_backend.operand_hold): an activation a caller promises not to change while
 * several GEMMs read it (q, k and v from one normed input; a linear's output gradient in its two backward
 * GEMMs) is rounded to bf16 once ---- */
#define MAX_HELD 8
/* VERLC_CUDA_HOLD=0: every GEMM rounds its operands itself (A/B; read per call, so a test can switch it) */
static int holds_off(void) {
    const char *e = getenv("VERLC_CUDA_HOLD");
    return e && *e == '0';
}
static bf16_copy g_held[MAX_HELD];
static int g_nheld;
static int weight_copy_of(const float *p, int64_t rows, int64_t cols);

void vc_cu_operand_hold(const float *p, int64_t rows, int64_t cols, int hold) {
    const char *op = "operand hold";
    for (int i = 0; i < g_nheld; i++) {
        if (g_held[i].w != p) continue;
        if (hold && g_held[i].rows == rows && g_held[i].cols == cols) { /* held already (by its norm): one more */
            g_held[i].refs++;
            /* a capture notes the op as a replay (where the norm, queuing nothing, held nothing) meets it below */
            if (vc_cu_graph_mode) vc_cu_graph_note(op);
            return;
        }
        if (!hold && --g_held[i].refs > 0) return;
        if (!hold) {
            vc_cu_scratch_free(g_held[i].h);
            g_held[i] = g_held[--g_nheld];
            return;
        }
    }
    if (!hold) return;
    if (holds_off() || vc_matmul_precision() != VC_PREC_BF16 || g_nheld == MAX_HELD || rows * cols <= 0 ||
        weight_copy_of(p, rows, cols) /* rows of a weight with its bf16 copy: the GEMMs read that */ || !vc_cu_begin(op))
        return;
    __nv_bfloat16 *h = (__nv_bfloat16 *)vc_cu_scratch((size_t)(rows * cols) * 2, op);
    if (!h) return;
    pack_bf16(h, p, rows, cols, cols);
    if (!vc_cu_end(op)) {
        vc_cu_scratch_free(h);
        return;
    }
    g_held[g_nheld++] = bf16_copy{ p, rows, cols, h, 1 };
}

/* an empty held copy of p (rows x cols) for the caller to fill before any GEMM reads p (a kernel that produces p
 * can write its bf16 rounding straight there and skip the f32 rows: the LM head's dZ); NULL when operands are not
 * held (f32 matmuls, VERLC_CUDA_HOLD=0, no slot or no memory): then p itself must be written. Released as any hold. */
void *vc_cu_hold_slot(const float *p, int64_t rows, int64_t cols) {
    if (holds_off() || vc_matmul_precision() != VC_PREC_BF16 || g_nheld == MAX_HELD || rows * cols <= 0) return NULL;
    __nv_bfloat16 *h = NULL;
    if (vc_cu_malloc_async((void **)&h, (size_t)(rows * cols) * 2) != cudaSuccess) {
        cudaGetLastError(); /* not sticky: the caller writes p */
        return NULL;
    }
    g_held[g_nheld++] = bf16_copy{ p, rows, cols, h, 1 };
    return h;
}

static const __nv_bfloat16 *copy_of(const bf16_copy *s, const float *p, int64_t r, int64_t c, int64_t ld, int *found) {
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)s->w;
    if (a < b || a >= b + (uintptr_t)(s->rows * s->cols) * sizeof(float) || ld != s->cols) return NULL;
    *found = 1;
    int64_t off = p - s->w;
    /* runs of whole rows only: that is the packed operand's layout, so cuBLAS picks the kernel it picks for the
     * operand rounded on the fly (a column block's offset and leading dimension can select another: other bits) */
    if (off % s->cols != 0 || c != s->cols || off / s->cols + r > s->rows) return NULL;
    g_sh_hits++;
    return s->h + off;
}

/* whether p's rows x cols (packed) are a run of rows of a registered weight (the LM head's slices of W) */
static int weight_copy_of(const float *p, int64_t rows, int64_t cols) {
    int found = 0;
    for (int i = 0; i < g_nsh && !found; i++)
        if (copy_of(&g_sh[i], p, rows, cols, cols, &found)) {
            g_sh_hits--; /* not a GEMM's operand */
            return 1;
        }
    return 0;
}

/* the bf16 copy of the r x c operand at p (leading dimension ld): a run of rows of a registered weight or
 * of a held operand */
static const __nv_bfloat16 *shadow_of(const float *p, int64_t r, int64_t c, int64_t ld) {
    int found = 0;
    for (int i = 0; i < g_nheld && !found; i++) {
        const __nv_bfloat16 *h = copy_of(&g_held[i], p, r, c, ld, &found);
        if (h) return h;
    }
    for (int i = 0; i < g_nsh && !found; i++) {
        const __nv_bfloat16 *h = copy_of(&g_sh[i], p, r, c, ld, &found);
        if (h) return h;
    }
    return NULL;
}

const void *vc_cu_bf16_copy(const float *p, int64_t rows, int64_t cols, int64_t ld) {
    return shadow_of(p, rows, cols, ld);
}

/* VC_PREC_BF16: both operands rounded to bf16 (nearest even) into packed scratch (or read from a
 * registered bf16 copy of a weight), then a bf16 x bf16 GEMM with f32 accumulation and an f32 C (alpha
 * and beta applied in f32), as torch autocast does. */
/* A16 / B16: an operand already in bf16 (gemm_b16), used as it is. bias (beta 0): + bias[j] on every row's column j,
 * in cuBLASLt's epilogue where it has a plan (cuda_lt.cu), else copied into C first and added with beta 1 */
__global__ void k_bias_rows(float *C, int64_t M, int64_t N, int64_t ldc, const float *bias) {
    VC_ROW_LOOP(r, M) VC_COL_LOOP(c, N) C[r * ldc + c] = bias[c];
}
static int gemm_bf16_f32(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                         const float *B, int64_t ldb, float beta, float *C, int64_t ldc, const char *op,
                         const __nv_bfloat16 *A16 = NULL, const __nv_bfloat16 *B16 = NULL, const float *bias = NULL,
                         int c16 = 0) {
    int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    const __nv_bfloat16 *sa = A16 ? A16 : shadow_of(A, ar, ac, lda), *sb = B16 ? B16 : shadow_of(B, br, bc, ldb);
    __nv_bfloat16 *a16 = sa ? NULL : (__nv_bfloat16 *)vc_cu_scratch((size_t)(ar * ac) * 2, op);
    __nv_bfloat16 *b16 = sb || (!sa && !a16) ? NULL : (__nv_bfloat16 *)vc_cu_scratch((size_t)(br * bc) * 2, op);
    int ok = 0;
    if ((sa || a16) && (sb || b16)) {
        if (a16) pack_bf16(a16, A, ar, ac, lda);
        if (b16) pack_bf16(b16, B, br, bc, ldb);
        if (bias && !c16 && vc_cu_lt_gemm_bias(ta, tb, M, N, K, alpha, sa ? (const void *)sa : a16, sa ? lda : ac,
                                       sb ? (const void *)sb : b16, sb ? ldb : bc, bias, C, ldc, g_blas_ws,
                                       g_blas_ws ? BLAS_WS : 0)) {
            ok = vc_cu_end(op);
            vc_cu_scratch_free(a16);
            vc_cu_scratch_free(b16);
            return ok;
        }
        if (bias) {
            k_bias_rows<<<vc_cu_rows_grid(M, N, 256), 256, 0, g_stream>>>(C, M, N, ldc, bias);
            beta = 1.0f;
        }
        cublasStatus_t s = cublasGemmEx(g_blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                        (int)N, (int)M, (int)K, &alpha, sb ? sb : b16, CUDA_R_16BF, (int)(sb ? ldb : bc),
                                        sa ? sa : a16, CUDA_R_16BF, (int)(sa ? lda : ac), &beta, C,
                                        c16 ? CUDA_R_16BF : CUDA_R_32F, (int)ldc, CUBLAS_COMPUTE_32F,
                                        CUBLAS_GEMM_DEFAULT);
        ok = vc_cu_blas_ok(s, op) && vc_cu_end(op);
    }
    vc_cu_scratch_free(a16);
    vc_cu_scratch_free(b16);
    return ok;
}

/* Row-major C = A B is column-major C^T = B^T A^T: swap the operands and M/N. */
int vc_cu_gemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
               const float *B, int64_t ldb, float beta, float *C, int64_t ldc, const char *op) {
    if (M == 0 || N == 0) return 1;
    if (K == 0) {
        k_scale_rows<<<vc_cu_blocks(M * N, 256), 256, 0, g_stream>>>(C, M, N, ldc, beta);
        return vc_cu_end(op);
    }
    if (!dims_ok(M, N, K, lda, ldb, ldc, op)) return 0;
    if (vc_matmul_precision() == VC_PREC_BF16) return gemm_bf16_f32(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, op);
    cublasStatus_t s = cublasSgemm(g_blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)N,
                                   (int)M, (int)K, &alpha, B, (int)ldb, A, (int)lda, &beta, C, (int)ldc);
    return vc_cu_blas_ok(s, op) && vc_cu_end(op);
}

/* y = x W^T + b (x [M, K], W [N, K], b [N]): with bf16 matmuls the bias in the GEMM's epilogue (gemm_bf16_f32) */
void vc_cu_linear_bias(int64_t M, int64_t N, int64_t K, const float *x, const float *W, const float *b, float *y) {
    const char *op = "gemm";
    if (!vc_cu_begin(op) || M == 0 || N == 0) return;
    if (K == 0 || vc_matmul_precision() != VC_PREC_BF16) {
        k_bias_rows<<<vc_cu_rows_grid(M, N, 256), 256, 0, g_stream>>>(y, M, N, N, b);
        vc_cu_gemm(0, 1, M, N, K, 1.0f, x, K, W, K, 1.0f, y, N, op);
        return;
    }
    if (!dims_ok(M, N, K, K, K, N, op)) return;
    gemm_bf16_f32(0, 1, M, N, K, 1.0f, x, K, W, K, 0.0f, y, N, op, NULL, NULL, b);
}

/* y16 = bf16(x W^T): C in bf16 from cuBLAS (f32 accumulation rounded once in its epilogue) */
void vc_cu_gemm_c16(int64_t M, int64_t N, int64_t K, const float *x, const float *W, void *y16) {
    const char *op = "gemm";
    if (!vc_cu_begin(op) || M == 0 || N == 0) return;
    if (K == 0 || vc_matmul_precision() != VC_PREC_BF16) {
        vc_cu_fail(VC_ERR_UNSUPPORTED, op, "a bf16 C needs bf16 matmuls and K > 0");
        return;
    }
    if (!dims_ok(M, N, K, K, K, N, op)) return;
    gemm_bf16_f32(0, 1, M, N, K, 1.0f, x, K, W, K, 0.0f, (float *)y16, N, op, NULL, NULL, NULL, 1);
}

/* the bf16 copy of [Wq; Wk; Wv] ([Nq + Nk + Nv, K]) where the three weights' copies lie one after another, else NULL;
 * the lookups are not GEMM operands: `served` counts the one GEMM that will read it */
static const __nv_bfloat16 *qkv_copies(const float *Wq, const float *Wk, const float *Wv, int64_t Nq, int64_t Nk,
                                       int64_t Nv, int64_t K, int served) {
    const int hits = g_sh_hits;
    const __nv_bfloat16 *pq = shadow_of(Wq, Nq, K, K), *pk = shadow_of(Wk, Nk, K, K), *pv = shadow_of(Wv, Nv, K, K);
    const int together = pq && pk == pq + Nq * K && pv == pk + Nk * K;
    g_sh_hits = hits + (together && served);
    return together ? pq : NULL;
}

/* q, k and v with one GEMM over the three weights' adjacent bf16 copies into scratch rows, then one pass that splits,
 * adds the biases and rotates (vc_backend.qkv_rope); the host-side lookups decide alike in a capture and its replays */
int vc_cu_qkv_rope(int64_t M, int64_t K, const float *x, const float *Wq, const float *Wk, const float *Wv,
                   const float *bq, const float *bk, const float *bv, float *q, float *k, float *v, const vc_qkv_desc *d) {
    if (vc_matmul_precision() != VC_PREC_BF16 || M <= 0 || K <= 0 || d->rot % 2 || d->rot > d->head_dim) return 0;
    const int64_t Nq = (int64_t)d->n_head * d->head_dim, Nk = (int64_t)d->n_kv_head * d->head_dim;
    const int64_t Nv = (int64_t)d->n_kv_head * d->v_head_dim, Nt = Nq + Nk + Nv;
    if (!dims_ok(M, Nt, K, K, K, Nt, "qkv")) return 0;
    const __nv_bfloat16 *pq = qkv_copies(Wq, Wk, Wv, Nq, Nk, Nv, K, 1);
    if (!pq) return 0;
    const char *op = "q, k and v (one GEMM, split and rope)";
    if (!vc_cu_begin(op)) return 1; /* replaying (the graph holds it), or a sticky error */
    float *Y = (float *)vc_cu_scratch((size_t)(M * Nt) * sizeof(float), op);
    if (Y && gemm_bf16_f32(0, 1, M, Nt, K, 1.0f, x, K, NULL, K, 0.0f, Y, Nt, op, NULL, pq)) {
        vc_cu_qkv_split(q, k, v, Y, M, d, bq, bk, bv);
        vc_cu_end(op);
    }
    vc_cu_scratch_free(Y);
    return 1;
}

/* vc_cu_qkv_rope's backward (vc_backend.qkv_rope_bwd): the gradient of its GEMM's rows Y out of dq, dk, dv in one pass
 * (vc_cu_qkv_unsplit), the biases' sums over Y's columns, then dx += Y [Wq; Wk; Wv] with one GEMM over the adjacent
 * bf16 copies and the three weights' gradients out of one GEMM Y^T x (added into each) */
int vc_cu_qkv_rope_bwd(int64_t M, int64_t K, const float *x, const float *Wq, const float *Wk, const float *Wv,
                       const float *dq, const float *dk, const float *dv, float *dx, float *dWq, float *dWk, float *dWv,
                       float *dbq, float *dbk, float *dbv, const vc_qkv_desc *d) {
    if (vc_matmul_precision() != VC_PREC_BF16 || M <= 0 || K <= 0 || d->rot % 2 || d->rot > d->head_dim) return 0;
    const int64_t Nq = (int64_t)d->n_head * d->head_dim, Nk = (int64_t)d->n_kv_head * d->head_dim;
    const int64_t Nv = (int64_t)d->n_kv_head * d->v_head_dim, Nt = Nq + Nk + Nv;
    if (!dims_ok(M, Nt, K, K, K, Nt, "qkv")) return 0;
    const __nv_bfloat16 *pq = qkv_copies(Wq, Wk, Wv, Nq, Nk, Nv, K, dx != NULL);
    if (!pq) return 0;
    const char *op = "q, k and v backward (one GEMM for x, one for the weights)";
    if (!vc_cu_begin(op)) return 1;
    const int wgrad = dWq || dWk || dWv, bgrad = dbq || dbk || dbv;
    float *Y = (float *)vc_cu_scratch((size_t)(M * Nt) * sizeof(float), op);
    float *D = wgrad && Y ? (float *)vc_cu_scratch((size_t)(Nt * K) * sizeof(float), op) : NULL;
    float *db = bgrad && Y ? (float *)vc_cu_scratch((size_t)Nt * sizeof(float), op) : NULL;
    float *const dW[3] = { dWq, dWk, dWv }, *const dB[3] = { dbq, dbk, dbv };
    const int64_t N[3] = { Nq, Nk, Nv };
    if (Y && (!wgrad || D) && (!bgrad || db)) {
        vc_cu_prof_nest(1); /* the sums, adds and GEMMs inside are this op's time in the profile */
        vc_cu_qkv_unsplit(Y, dq, dk, dv, M, d);
        if (db && vc_cuda_memset0(db, (size_t)Nt * sizeof(float)) == VC_OK) {
            vc_cu_col_sum(db, Y, M, Nt);
            for (int i = 0, at = 0; i < 3; at += (int)N[i], i++)
                if (dB[i]) vc_cu_axpy(dB[i], 1.0f, db + at, N[i]);
        }
        vc_cu_operand_hold(Y, M, Nt, 1); /* both GEMMs read it: rounded once */
        int ok = !dx || gemm_bf16_f32(0, 0, M, K, Nt, 1.0f, Y, Nt, NULL, K, 1.0f, dx, K, op, NULL, pq);
        if (ok && D && gemm_bf16_f32(1, 0, Nt, K, M, 1.0f, Y, Nt, x, K, 0.0f, D, K, op))
            for (int i = 0, at = 0; i < 3; at += (int)N[i], i++)
                if (dW[i]) vc_cu_axpy(dW[i], 1.0f, D + at * K, N[i] * K);
        vc_cu_operand_hold(Y, M, Nt, 0);
        vc_cu_end(op);
        vc_cu_prof_nest(-1);
    }
    vc_cu_scratch_free(Y);
    vc_cu_scratch_free(D);
    vc_cu_scratch_free(db);
    return 1;
}

void vc_cu_gemm_entry(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                      const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (!vc_cu_begin("gemm")) return;
    vc_cu_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, "gemm");
}

/* bf16 operands as they are; an f32 one as gemm would take it (in f32 precision, converted first) */
void vc_cu_gemm_b16(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const void *A, int a16, int64_t lda,
                    const void *B, int b16, int64_t ldb, float beta, float *C, int64_t ldc) {
    const char *op = "gemm";
    if (!vc_cu_begin(op)) return;
    if (M == 0 || N == 0) return;
    if (K == 0) {
        k_scale_rows<<<vc_cu_blocks(M * N, 256), 256, 0, g_stream>>>(C, M, N, ldc, beta);
        vc_cu_end(op);
        return;
    }
    if (!dims_ok(M, N, K, lda, ldb, ldc, op)) return;
    if (!a16 && !b16) { /* nothing in bf16: the plain gemm */
        vc_cu_gemm(ta, tb, M, N, K, alpha, (const float *)A, lda, (const float *)B, ldb, beta, C, ldc, op);
        return;
    }
    if (vc_matmul_precision() == VC_PREC_BF16) {
        gemm_bf16_f32(ta, tb, M, N, K, alpha, (const float *)A, lda, (const float *)B, ldb, beta, C, ldc, op,
                      a16 ? (const __nv_bfloat16 *)A : NULL, b16 ? (const __nv_bfloat16 *)B : NULL);
        return;
    }
    vc_cu_fail(VC_ERR_UNSUPPORTED, op, "bf16 operands need bf16 matmul precision");
}

vc_status vc_cuda_gemm_bf16(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t *A,
                            int64_t lda, const uint16_t *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    return vc_cuda_gemm_bf16_out(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, 0, ldc);
}

vc_status vc_cuda_gemm_bf16_out(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t *A,
                                int64_t lda, const uint16_t *B, int64_t ldb, float beta, void *C, int c_bf16,
                                int64_t ldc) {
    const char *op = "gemm bf16";
    if (!vc_cu_begin(op)) return vc_cuda_error();
    if (M == 0 || N == 0) return VC_OK;
    if (K == 0 && c_bf16) return vc_fail(VC_ERR_UNSUPPORTED, "cuda: %s: K = 0 with a bf16 C", op);
    if (K == 0) {
        k_scale_rows<<<vc_cu_blocks(M * N, 256), 256, 0, g_stream>>>((float *)C, M, N, ldc, beta);
        return vc_cu_end(op) ? VC_OK : vc_cuda_error();
    }
    if (!dims_ok(M, N, K, lda, ldb, ldc, op)) return vc_cuda_error();
    cublasStatus_t s = cublasGemmEx(g_blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)N,
                                    (int)M, (int)K, &alpha, B, CUDA_R_16BF, (int)ldb, A, CUDA_R_16BF, (int)lda, &beta,
                                    C, c_bf16 ? CUDA_R_16BF : CUDA_R_32F, (int)ldc, CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT);
    return vc_cu_blas_ok(s, op) && vc_cu_end(op) ? VC_OK : vc_cuda_error();
}

vc_status vc_cuda_gemm_algos(int64_t M, int64_t N, int64_t K, const uint16_t *A, const uint16_t *B, float *C, int want,
                             int iters, double *ms, int *n) {
    const char *op = "gemm algorithms";
    *n = 0;
    if (!vc_cu_begin(op)) return vc_cuda_error();
    if (M <= 0 || N <= 0 || K <= 0 || !dims_ok(M, N, K, K, K, N, op)) return M > 0 && N > 0 && K > 0 ? vc_cuda_error() : VC_OK;
    const int got = vc_cu_lt_algo_times(M, N, K, A, B, C, g_blas_ws, g_blas_ws ? BLAS_WS : 0, want, iters, ms);
    if (got < 0) return vc_cuda_error();
    *n = got;
    return VC_OK;
}

__global__ void k_f32_to_bf16(uint16_t *dst, const float *src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        __nv_bfloat16 b = __float2bfloat16_rn(src[i]);
        dst[i] = *(uint16_t *)&b;
    }
}

vc_status vc_cuda_f32_to_bf16(uint16_t *dst, const float *src, size_t n) {
    const char *op = "f32 to bf16";
    if (!vc_cu_begin(op)) return vc_cuda_error();
    if (!n) return VC_OK;
    k_f32_to_bf16<<<vc_cu_blocks((int64_t)n, 256), 256, 0, g_stream>>>(dst, src, n);
    return vc_cu_end(op) ? VC_OK : vc_cuda_error();
}

/* ---- the op table ---- */
static void be_free(void *p) { vc_cuda_free(p); }
static void be_h2d(void *dst, const void *src, size_t bytes) { vc_cuda_h2d(dst, src, bytes); }
static void be_d2h(void *dst, const void *src, size_t bytes) { vc_cuda_d2h(dst, src, bytes); }
/* memmove semantics, as the CPU backend's copy: overlapping ranges go through scratch (cudaMemcpy
 * leaves overlap undefined) */
static void be_d2d(void *dst, const void *src, size_t bytes) {
    const char *d = (const char *)dst, *s = (const char *)src;
    if (!bytes || d == s) return;
    if (d + bytes <= s || s + bytes <= d) {
        vc_cuda_d2d(dst, src, bytes);
        return;
    }
    if (!vc_cu_begin("device-to-device copy")) return;
    void *tmp = vc_cu_scratch(bytes, "device-to-device copy");
    if (!tmp) return;
    if (vc_cuda_d2d(tmp, src, bytes) == VC_OK) vc_cuda_d2d(dst, tmp, bytes);
    vc_cu_scratch_free(tmp);
}
static void be_zero(void *dst, size_t bytes) {
    if (bytes) vc_cuda_memset0(dst, bytes);
}

extern "C" void vc_cu_sample_rows(int32_t *tok, float *lp, float *lps, const float *logits, int64_t R, int64_t V,
                                  const vc_sample_row *rows, const float *u); /* cuda_sample.cu */
extern "C" vc_status vc_cu_absmax_many(const float *const *x, const size_t *sizes, size_t n, int bf16, float *out);
extern "C" void vc_cu_fake_fp4(float *x, int64_t rows, int64_t cols, int group, float amax, int bf16); /* cuda_qat.cu */
static vc_backend make_cuda_backend(void) {
    vc_backend b = {};
    b.name = "cuda";
    b.host_visible = 0;
    b.dev_seq_tabs = 1;
    b.alloc = vc_cuda_malloc;
    b.free = be_free;
    b.h2d = be_h2d;
    b.d2h = be_d2h;
    b.d2d = be_d2d;
    b.zero = be_zero;
    b.sync = vc_cuda_sync;
    b.gemm = vc_cu_gemm_entry;
    b.linear_bias = vc_cu_linear_bias;
    b.rmsnorm_fwd = vc_cu_rmsnorm_fwd;
    b.rmsnorm_fwd_held = vc_cu_rmsnorm_fwd_held;
    b.add_rmsnorm_held = vc_cu_add_rmsnorm_held;
    b.rmsnorm_bwd = vc_cu_rmsnorm_bwd;
    b.layernorm_fwd = vc_cu_layernorm_fwd;
    b.layernorm_bwd = vc_cu_layernorm_bwd;
    b.rope = vc_cu_rope;
    b.rope2 = vc_cu_rope2;
    b.qkv_rope = vc_cu_qkv_rope;
    b.qkv_rope_bwd = vc_cu_qkv_rope_bwd;
    b.attn_fwd = vc_cu_attn_fwd;
    b.dsa_select = vc_cu_dsa_select;
    b.attn_bwd = vc_cu_attn_bwd;
    b.attn_sink_bwd = vc_cu_attn_sink_bwd;
    b.act_fwd = vc_cu_act_fwd;
    b.act_bwd = vc_cu_act_bwd;
    b.act_mul_fwd = vc_cu_act_mul_fwd;
    b.xielu_fwd = vc_cu_xielu_fwd;
    b.xielu_bwd = vc_cu_xielu_bwd;
    b.gdn_fwd = vc_cu_gdn_fwd;
    b.gdn_bwd = vc_cu_gdn_bwd;
    b.gdn_gate_fwd = vc_cu_gdn_gate_fwd;
    b.gdn_gate_bwd = vc_cu_gdn_gate_bwd;
    b.ssm_fwd = vc_cu_ssm_fwd;
    b.ssm_bwd = vc_cu_ssm_bwd;
    b.conv1d_fwd = vc_cu_conv1d_fwd;
    b.conv1d_bwd = vc_cu_conv1d_bwd;
    b.affine_cols_fwd = vc_cu_affine_cols_fwd;
    b.affine_cols_bwd = vc_cu_affine_cols_bwd;
    b.act_mul_bwd = vc_cu_act_mul_bwd;
    b.act_mul_fwd_bf16 = vc_cu_act_mul_fwd_bf16;
    b.gemm_c16 = vc_cu_gemm_c16;
    b.act_mul16_fwd = vc_cu_act_mul16_fwd;
    b.act_mul16_bwd = vc_cu_act_mul16_bwd;
    b.act_mul_bwd_held = vc_cu_act_mul_bwd_held;
    b.act_mul_bwd_held2 = vc_cu_act_mul_bwd_held2;
    b.gemm_b16 = vc_cu_gemm_b16;
    b.lm_head_fwd = vc_cu_lm_head_fwd;
    b.lm_head_bwd = vc_cu_lm_head_bwd;
    b.lm_head_keep = vc_cu_lm_head_keep;
    b.route_fwd = vc_cu_route_fwd;
    b.route_bwd = vc_cu_route_bwd;
    b.fill = vc_cu_fill;
    b.axpy = vc_cu_axpy;
    b.add = vc_cu_add;
    b.mul = vc_cu_mul;
    b.mul_acc = vc_cu_mul_acc;
    b.scale = vc_cu_scale;
    b.round_bf16 = vc_cu_round_bf16;
    b.mul_rows_fwd = vc_cu_mul_rows_fwd;
    b.mul_rows_bwd = vc_cu_mul_rows_bwd;
    b.rows_copy = vc_cu_rows_copy;
    b.rows_sum = vc_cu_rows_sum;
    b.col_sum = vc_cu_col_sum;
    b.softcap_fwd = vc_cu_softcap_fwd;
    b.clip_fwd = vc_cu_clip_fwd;
    b.clip_bwd = vc_cu_clip_bwd;
    b.softcap_bwd = vc_cu_softcap_bwd;
    b.rownorm_fwd = vc_cu_rownorm_fwd;
    b.rownorm_bwd = vc_cu_rownorm_bwd;
    b.dot_fwd = vc_cu_dot_fwd;
    b.dot_bwd = vc_cu_dot_bwd;
    b.embed_fwd = vc_cu_embed_fwd;
    b.embed_bwd = vc_cu_embed_bwd;
    b.gather_rows = vc_cu_gather_rows;
    b.gather_rows_bf16 = vc_cu_gather_rows_bf16;
    b.operand_hold = vc_cu_operand_hold;
    b.scatter_rows = vc_cu_scatter_rows;
    b.scatter_rows_bf16 = vc_cu_scatter_rows_bf16;
    b.scatter_kv_bf16 = vc_cu_scatter_kv_bf16;
    b.moe_combine_fwd = vc_cu_moe_combine_fwd;
    b.moe_combine_bwd = vc_cu_moe_combine_bwd;
    b.moe_combine_bwd_held = vc_cu_moe_combine_bwd_held;
    b.moe_scatter_add = vc_cu_moe_scatter_add;
    b.moe_bias_fwd = vc_cu_moe_bias_fwd;
    b.moe_bias_bwd = vc_cu_moe_bias_bwd;
    b.moe_group = vc_cu_moe_group;
    b.gemm_rows_grouped = vc_cu_gemm_rows_grouped;
    b.gemm_wgrad_grouped = vc_cu_gemm_wgrad_grouped;
    b.adamw = vc_cuda_adamw_step;
    b.sumsq = vc_cu_sumsq;
    b.scale_tensors = vc_cu_scale_tensors;
    b.attn_rounds_bf16 = vc_cu_attn_tc_eligible; /* the tensor-core kernels round each tile as they load it */
    b.paged_rounds_q = vc_cu_paged_rounds_q;
    b.sample_rows = vc_cu_sample_rows;
    b.absmax_many = vc_cu_absmax_many;
    b.fake_fp4 = vc_cu_fake_fp4;
    return b;
}
static const vc_backend CUDA_BACKEND = make_cuda_backend();

extern "C" const vc_backend *vc_backend_cuda(void) { return &CUDA_BACKEND; }
