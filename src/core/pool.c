/* A small thread pool. Tasks are claimed from an atomic counter. Nested vc_parallel calls from inside
 * a task run inline. */
#include "verlc/pool.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_THREADS 256

void vc_blas_threads(int n); /* core/blas_core.c */

static struct {
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    pthread_t th[MAX_THREADS];
    int n_threads, started;
    uint64_t generation;
    vc_task_fn fn;
    void *ctx;
    int64_t n_tasks;
    atomic_llong next;
    int active; /* workers still inside the current generation */
} P = { .mu = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER };

static pthread_mutex_t run_mu = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int in_task;

static void drain(void) {
    int64_t i;
    in_task = 1;
    while ((i = atomic_fetch_add(&P.next, 1)) < P.n_tasks) P.fn(P.ctx, i);
    in_task = 0;
}

static void *worker(void *arg) {
    (void)arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&P.mu);
    for (;;) {
        while (P.generation == seen) pthread_cond_wait(&P.wake, &P.mu);
        seen = P.generation;
        pthread_mutex_unlock(&P.mu);
        drain();
        pthread_mutex_lock(&P.mu);
        if (--P.active == 0) pthread_cond_signal(&P.done);
    }
    return NULL;
}

static int default_threads(void) {
    const char *s = getenv("VERLC_THREADS");
    int n = s ? atoi(s) : 0;
    if (n <= 0) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    return n > MAX_THREADS ? MAX_THREADS : n;
}

static void ensure_started(void) {
    if (P.n_threads) return;
    vc_set_threads(default_threads());
}

void vc_set_threads(int n) {
    if (n < 1) n = 1;
    if (n > MAX_THREADS) n = MAX_THREADS;
    pthread_mutex_lock(&run_mu);
    /* workers beyond n stay parked forever once started; only the first n-1 take part */
    while (P.started < n - 1) {
        if (pthread_create(&P.th[P.started], NULL, worker, NULL) != 0) break;
        pthread_detach(P.th[P.started]);
        P.started++;
    }
    P.n_threads = n;
    vc_blas_threads(1); /* GEMMs are split over this pool instead (backend/cpu) */
    pthread_mutex_unlock(&run_mu);
}

int vc_get_threads(void) {
    ensure_started();
    return P.n_threads;
}

void vc_parallel(int64_t n, vc_task_fn fn, void *ctx) {
    if (n <= 0) return;
    ensure_started();
    if (n == 1 || P.n_threads == 1 || in_task) {
        for (int64_t i = 0; i < n; i++) fn(ctx, i);
        return;
    }
    pthread_mutex_lock(&run_mu);
    int helpers = P.n_threads - 1;
    if (helpers > P.started) helpers = P.started;
    pthread_mutex_lock(&P.mu);
    P.fn = fn;
    P.ctx = ctx;
    P.n_tasks = n;
    atomic_store(&P.next, 0);
    P.active = P.started; /* every started worker wakes for a generation */
    P.generation++;
    pthread_cond_broadcast(&P.wake);
    pthread_mutex_unlock(&P.mu);
    (void)helpers;
    drain();
    pthread_mutex_lock(&P.mu);
    while (P.active > 0) pthread_cond_wait(&P.done, &P.mu);
    pthread_mutex_unlock(&P.mu);
    pthread_mutex_unlock(&run_mu);
}
