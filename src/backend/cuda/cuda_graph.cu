/* CUDA graphs for repeated work: the rollout engine's decode steps (include/verlc/cuda.h).
 *
 * Capture: the stream is waited for, then captured (relaxed mode) while the host runs the step as
 * usual. Kernels and GEMMs are recorded, not run; host-to-device uploads are done at once with a
 * synchronous copy outside the capture (the stream is idle, and the captured kernels read the uploaded
 * bytes when the graph runs). The graph is instantiated and launched, so the step's work runs once.
 * Replay: the host runs the step again, but every op entry returns at vc_cu_begin (nothing is queued)
 * while uploads still go through: they refill, at the same addresses, the inputs the captured kernels
 * read. If the entries met match the capture (count and names, in order) and nothing was allocated or
 * reallocated meanwhile, the graph is launched; otherwise the caller runs the step eagerly.
 * Anything a capture cannot hold (an upload to fresh scratch, an allocation, a wait) breaks it: the
 * graph is dropped and the caller runs the step eagerly. */
#include "cuda_internal.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 32

struct graph_slot {
    int used, key;
    uint64_t sig;
    long ops;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    long age;
};

int vc_cu_graph_mode = 0; /* 0 eager, 1 capturing, 2 replaying */
static graph_slot g_slots[SLOTS];
static uint64_t g_sig;
static long g_ops, g_clock;
static int g_taint, g_off; /* g_off: a capture failed in CUDA itself: graphs off for the process */
static void *g_deferred[64];
static int g_ndeferred;

static int g_stale; /* a buffer every graph reads has moved: drop them all at the next begin / end */
void vc_cu_graphs_stale(void) { g_stale = 1; }

static void drop_stale(void) {
    if (!g_stale) return;
    g_stale = 0;
    vc_cuda_graph_drop();
}

void vc_cu_graph_defer_free(void *p) {
    if (g_ndeferred < 64) g_deferred[g_ndeferred++] = p; /* else leaked, never seen: frees in a step are rare */
}

int vc_cuda_graphs_enabled(void) {
    const char *e = getenv("VERLC_CUDA_GRAPHS");
    return !g_off && !(e && *e == '0');
}

/* FNV-1a over the op names met, in order */
int vc_cu_graph_note(const char *op) {
    for (const char *c = op; *c; c++) g_sig = (g_sig ^ (uint8_t)*c) * 0x100000001b3ull;
    g_sig = (g_sig ^ 0xff) * 0x100000001b3ull;
    g_ops++;
    return vc_cu_graph_mode == 1;
}

void vc_cu_graph_taint(void) {
    if (vc_cu_graph_mode) g_taint = 1;
}

static void slot_free(graph_slot *s) {
    if (s->exec) cudaGraphExecDestroy(s->exec);
    if (s->graph) cudaGraphDestroy(s->graph);
    memset(s, 0, sizeof *s);
}

static graph_slot *find(int key) {
    for (int i = 0; i < SLOTS; i++)
        if (g_slots[i].used && g_slots[i].key == key) return &g_slots[i];
    return NULL;
}

int vc_cuda_graph_ready(int key) { return find(key) != NULL; }

void vc_cuda_graph_drop(void) {
    for (int i = 0; i < SLOTS; i++)
        if (g_slots[i].used) slot_free(&g_slots[i]);
}


/* CUDA itself refused a graph call: graphs off for the process, one line saying why */
static void turn_off(const char *call, const char *why) {
    cudaGetLastError();
    if (!g_off) fprintf(stderr, "verlc: cuda graphs off for this run (%s: %s); decode steps run eagerly\n", call, why);
    g_off = 1;
}

static int launch(cudaGraphExec_t exec) {
    cudaError_t e = cudaGraphLaunch(exec, vc_cu_stream());
    if (e == cudaSuccess) return vc_cu_end("graph launch"); /* the profiler times the whole graph */
    turn_off("cudaGraphLaunch", cudaGetErrorString(e));
    return 0;
}

vc_status vc_cuda_graph_begin(int replay) {
    const char *op = replay ? "graph replay" : "graph capture";
    if (vc_cu_graph_mode) return vc_fail(VC_ERR_INTERNAL, "cuda: %s: a capture or replay is already open", op);
    if (!vc_cu_begin_io(op)) return vc_cuda_error(); /* (no profiler entry: the graph launch is the one timed) */
    drop_stale();
    if (!replay) {
        vc_status st = vc_cuda_sync(); /* uploads during the capture bypass the stream: it must be idle */
        if (st) return st;
        cudaError_t e = cudaStreamBeginCapture(vc_cu_stream(), cudaStreamCaptureModeRelaxed);
        if (e != cudaSuccess) {
            turn_off("cudaStreamBeginCapture", cudaGetErrorString(e));
            return vc_fail(VC_ERR_UNSUPPORTED, "cuda: cudaStreamBeginCapture: %s", cudaGetErrorString(e));
        }
    }
    vc_cu_graph_mode = replay ? 2 : 1;
    g_sig = 0xcbf29ce484222325ull;
    g_ops = 0;
    g_taint = 0;
    return VC_OK;
}

/* replay: launch the slot's graph when the step met the same entries; capture: instantiate and launch */
vc_status vc_cuda_graph_end(int key, int *done) {
    int mode = vc_cu_graph_mode;
    vc_cu_graph_mode = 0;
    *done = 0;
    if (g_stale) g_taint = 1; /* a buffer the graphs read moved */
    drop_stale();
    graph_slot *s = find(key);
    if (mode == 2) {
        if (!s) return VC_OK;
        if (g_taint || g_ops != s->ops || g_sig != s->sig) {
            slot_free(s);
            return VC_OK;
        }
        if (!vc_cu_begin("graph launch")) return vc_cuda_error();
        if (!launch(s->exec)) {
            vc_cuda_graph_drop();
            return VC_OK;
        }
        s->age = ++g_clock;
        *done = 1;
        return VC_OK;
    }
    if (mode != 1) return vc_fail(VC_ERR_INTERNAL, "cuda: graph end without a begin");
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamEndCapture(vc_cu_stream(), &graph);
    for (int i = 0; i < g_ndeferred; i++) vc_cuda_free(g_deferred[i]);
    g_ndeferred = 0;
    cudaGraphExec_t exec = NULL;
    if (e == cudaSuccess && !g_taint && vc_cuda_error() == VC_OK) e = cudaGraphInstantiate(&exec, graph, 0);
    if (e != cudaSuccess || g_taint || vc_cuda_error() != VC_OK) {
        /* nothing ran: the caller runs the step eagerly. A failure of CUDA itself (not a step the
         * capture cannot hold) turns graphs off for the process, with one line saying why. */
        if (!g_taint) {
            turn_off("capture", e != cudaSuccess ? cudaGetErrorString(e) : vc_last_error());
            vc_cuda_clear_error(); /* nothing ran while capturing: the error was the capture's */
        }
        if (exec) cudaGraphExecDestroy(exec);
        if (graph) cudaGraphDestroy(graph);
        return VC_OK;
    }
    if (s) slot_free(s);
    else {
        s = &g_slots[0];
        for (int i = 0; i < SLOTS; i++) {
            if (!g_slots[i].used) {
                s = &g_slots[i];
                break;
            }
            if (g_slots[i].age < s->age) s = &g_slots[i];
        }
        if (s->used) slot_free(s);
    }
    *s = graph_slot{ 1, key, g_sig, g_ops, graph, exec, ++g_clock };
    if (!vc_cu_begin("graph launch") || !launch(exec)) {
        vc_cuda_graph_drop();
        return VC_OK;
    }
    *done = 1;
    return VC_OK;
}
