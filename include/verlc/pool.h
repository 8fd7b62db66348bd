/* Thread pool: a fixed set of workers running indexed tasks. Which thread runs a task never changes
 * what the task computes, so results do not depend on the thread count. */
#ifndef VERLC_POOL_H
#define VERLC_POOL_H
#include <stdint.h>

typedef void (*vc_task_fn)(void *ctx, int64_t task);
/* Runs fn(ctx, i) for i in [0, n) on the pool (the caller takes part) and returns when all are done. */
void vc_parallel(int64_t n, vc_task_fn fn, void *ctx);
/* Sets the number of threads (1 = run inline); default: VERLC_THREADS or the number of cores.
 * Also sets OpenBLAS's thread count. */
void vc_set_threads(int n);
int vc_get_threads(void);
/* OpenBLAS's kernel set (its core name, e.g. "SkylakeX"; core/blas_core.c picks the CPU's own where OpenBLAS
 * falls back to a generic one) */
const char *vc_blas_core(void);
#endif
