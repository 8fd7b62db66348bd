/* verlc CUDA emulator internals shared by the .cpp files in tools/cudaemu */
#ifndef VC_EMU_INTERNAL_H
#define VC_EMU_INTERNAL_H
#include "cuda_runtime.h"
#include <functional>

[[noreturn]] void vc_emu_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
long vc_emu_env_int(const char *name, long dflt);
int vc_emu_order(void); /* 0 forward, 1 reverse, 2 random (VC_EMU_ORDER) */

/* scheduler (emu_sched.cpp) */
void vc_emu_run_grid(const char *name, const vc_emu_cfg &c, vc_emu_task *t);
int vc_emu_in_kernel(void);
void vc_emu_where(char *buf, size_t len);

/* memory and the queue (emu_runtime.cpp) */
cudaError_t vc_emu_error(cudaError_t e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* 1 when [p, p + n) lies inside one live device allocation */
int vc_emu_dev_range(const void *p, size_t n);
int vc_emu_is_pinned(const void *p);
void vc_emu_enqueue(std::function<void()> op);
/* work on stream s: recorded instead when s is capturing (emu_graph.cpp) */
void vc_emu_enqueue_on(cudaStream_t s, std::function<void()> op);
/* capture state (emu_graph.cpp): 1 when s is capturing; a synchronising call on it breaks the capture */
int vc_emu_capturing(cudaStream_t s);
cudaError_t vc_emu_capture_sync(cudaStream_t s, const char *call); /* cudaSuccess when s is not capturing */
/* allocations on a capturing stream belong to the graph: 1 when taken (p is owned or freed by the graph) */
int vc_emu_capture_alloc(cudaStream_t s, void *p);
int vc_emu_capture_free(cudaStream_t s, void *p, cudaError_t *err);
/* device memory release for graph-owned allocations (emu_runtime.cpp) */
void vc_emu_dev_release(void *p);
/* an operation that completes outside the queue (an emulated NCCL collective): poll(block) returns 1
 * once done (block: wait for it); cudaStreamQuery / cudaStreamSynchronize of s poll it */
void vc_emu_stream_pending(cudaStream_t s, std::function<int(int)> poll);
/* host copies into and out of emulated device memory (the region opened for the copy) */
void vc_emu_dev_write(void *dst, const void *src, size_t n);
void vc_emu_dev_read(void *dst, const void *src, size_t n);
/* operation counts (emu_stats.cpp, VC_EMU_STATS=1) */
void vc_emu_count_launch(const char *name);
void vc_emu_count_copy(int kind, size_t bytes); /* cudaMemcpyKind */
enum { VC_EMU_MEMSET, VC_EMU_GEMM, VC_EMU_SYNC, VC_EMU_GRAPH };
void vc_emu_count(int what);
double vc_emu_clock(void);             /* a clock reading (0 without VC_EMU_STATS) */
void vc_emu_count_device(double t0);   /* device work ran from clock reading t0 until now */
#endif
