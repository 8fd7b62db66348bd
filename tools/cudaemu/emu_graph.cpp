/* verlc CUDA emulator: stream capture and CUDA graphs. While a stream captures, the work queued on it
 * (kernels, async copies and memsets, GEMMs, event records) is recorded instead of run; memory allocated
 * on it belongs to the graph (kept until the graph is destroyed, as a graph's memory nodes keep theirs
 * while it may run), and freeing it there is deferred. A synchronising call on the capturing stream
 * invalidates the capture and fails (cudaErrorStreamCaptureUnsupported), as on a GPU, so code that
 * waits inside a capture is caught. cudaGraphLaunch queues the recorded work again, in order: replayed
 * kernels read their arguments as captured, so a replay that needed other arguments shows as wrong
 * results. One capture at a time (verlc captures one stream). */
#include "emu_internal.h"
#include <algorithm>
#include <mutex>
#include <stdio.h>
#include <vector>

struct vc_emu_graph {
    std::vector<std::function<void()>> ops;
    std::vector<void *> owned; /* allocations made on the stream while capturing */
};
struct vc_emu_graph_exec {
    std::vector<std::function<void()>> ops;
};

static std::recursive_mutex g_gmu;
typedef std::lock_guard<std::recursive_mutex> glock_t;
static cudaStream_t g_cap;  /* the capturing stream, or NULL */
static vc_emu_graph *g_rec; /* what it has recorded */
static int g_broken;        /* invalidated by a synchronising call */

int vc_emu_capturing(cudaStream_t s) {
    glock_t l(g_gmu);
    return s && s == g_cap;
}

void vc_emu_enqueue_on(cudaStream_t s, std::function<void()> op) {
    {
        glock_t l(g_gmu);
        if (s && s == g_cap) {
            g_rec->ops.push_back(std::move(op));
            return;
        }
    }
    vc_emu_enqueue(std::move(op));
}

cudaError_t vc_emu_capture_sync(cudaStream_t s, const char *call) {
    glock_t l(g_gmu);
    if (!s || s != g_cap) return cudaSuccess;
    g_broken = 1;
    fprintf(stderr, "cuda emulator: %s on a capturing stream: the capture is invalidated\n", call);
    return cudaErrorStreamCaptureUnsupported;
}

int vc_emu_capture_alloc(cudaStream_t s, void *p) {
    glock_t l(g_gmu);
    if (!s || s != g_cap) return 0;
    g_rec->owned.push_back(p);
    return 1;
}

int vc_emu_capture_free(cudaStream_t s, void *p, cudaError_t *err) {
    glock_t l(g_gmu);
    if (!s || s != g_cap) return 0;
    if (std::find(g_rec->owned.begin(), g_rec->owned.end(), p) == g_rec->owned.end()) {
        /* memory from outside the capture freed inside it: a graph may free it only once, a replay twice */
        fprintf(stderr, "cuda emulator: cudaFreeAsync(%p) of memory allocated outside the capture, inside it\n", p);
        g_broken = 1;
        *err = cudaErrorStreamCaptureUnsupported;
    }
    return 1; /* owned: freed with the graph */
}

extern "C" {
cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode) {
    glock_t l(g_gmu);
    if (!s) return vc_emu_error(cudaErrorStreamCaptureUnsupported, "cudaStreamBeginCapture on the legacy stream");
    if (g_cap) return vc_emu_error(cudaErrorInvalidValue, "cudaStreamBeginCapture: a capture is already active");
    g_cap = s;
    g_rec = new vc_emu_graph;
    g_broken = 0;
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g) {
    glock_t l(g_gmu);
    *g = NULL;
    if (!s || s != g_cap) return vc_emu_error(cudaErrorInvalidValue, "cudaStreamEndCapture: the stream is not capturing");
    vc_emu_graph *r = g_rec;
    g_cap = NULL;
    g_rec = NULL;
    if (g_broken) {
        cudaGraphDestroy(r);
        return cudaErrorStreamCaptureInvalidated;
    }
    *g = r;
    return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *status) {
    glock_t l(g_gmu);
    *status = s && s == g_cap ? (g_broken ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive)
                              : cudaStreamCaptureStatusNone;
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long) {
    if (!g) return vc_emu_error(cudaErrorInvalidValue, "cudaGraphInstantiate(NULL)");
    *e = new vc_emu_graph_exec{ g->ops };
    return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s) {
    if (!e) return vc_emu_error(cudaErrorInvalidValue, "cudaGraphLaunch(NULL)");
    vc_emu_count(VC_EMU_GRAPH);
    for (auto &op : e->ops) vc_emu_enqueue_on(s, op);
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e) {
    vc_emu_flush(); /* queued replays hold copies of the work, not the exec; flush for the graph's memory */
    delete e;
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t g) {
    if (!g) return cudaSuccess;
    vc_emu_flush();
    for (void *p : g->owned) vc_emu_dev_release(p);
    delete g;
    return cudaSuccess;
}
}
