/* verlc CUDA emulator: operation counts. With VC_EMU_STATS=1 the process prints, at exit, how many
 * kernels it launched (the busiest kernels by name), how many copies of each kind and their bytes,
 * memsets, GEMMs and synchronising calls: what a GPU run would pay per launch and per copy, counted
 * without a GPU. */
#include "emu_internal.h"
#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <stdio.h>
#include <string>
#include <vector>

static std::mutex g_smu;
static std::map<std::string, long> g_kernels;
static long g_launch, g_copy[5], g_memset, g_gemm, g_sync, g_graph;
static double g_copy_bytes[5];
static int g_on = -1;
static double g_dev_s, g_t0; /* device work's time (the queue run at flushes), the process clock at the first count */

static double now_s(void) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static void report(void) {
    std::lock_guard<std::mutex> l(g_smu);
    static const char *kind[] = { "host to host", "host to device", "device to host", "device to device", "default" };
    fprintf(stderr, "cudaemu stats: %ld kernel launches, %ld GEMMs, %ld memsets, %ld synchronising calls, %ld graph "
            "launches (their work counted once, when captured)\n", g_launch, g_gemm, g_memset, g_sync, g_graph);
    const double wall = now_s() - g_t0;
    fprintf(stderr, "cudaemu stats: %.3f s from the first CUDA call: %.3f s running device work, %.3f s on the host (the "
            "host's share is what a GPU idles through where the host waits for each result, as a decode loop does)\n",
            wall, g_dev_s, wall - g_dev_s);
    for (int k = 0; k < 5; k++)
        if (g_copy[k]) fprintf(stderr, "cudaemu stats: %ld copies %s, %.0f bytes\n", g_copy[k], kind[k], g_copy_bytes[k]);
    std::vector<std::pair<long, std::string>> v;
    for (auto &e : g_kernels) v.push_back({ e.second, e.first });
    std::sort(v.rbegin(), v.rend());
    for (size_t i = 0; i < v.size() && i < (size_t)vc_emu_env_int("VC_EMU_STATS_TOP", 12); i++) fprintf(stderr, "cudaemu stats: %10ld x %s\n", v[i].first, v[i].second.c_str());
}

static int on(void) {
    if (g_on < 0) {
        g_on = vc_emu_env_int("VC_EMU_STATS", 0) != 0;
        if (g_on) {
            g_t0 = now_s();
            atexit(report);
        }
    }
    return g_on;
}

void vc_emu_count_launch(const char *name) {
    if (!on()) return;
    std::lock_guard<std::mutex> l(g_smu);
    g_launch++;
    g_kernels[name]++;
}

void vc_emu_count_copy(int kind, size_t bytes) {
    if (!on() || kind < 0 || kind > 4) return;
    std::lock_guard<std::mutex> l(g_smu);
    g_copy[kind]++;
    g_copy_bytes[kind] += (double)bytes;
}

void vc_emu_count(int what) {
    if (!on()) return;
    std::lock_guard<std::mutex> l(g_smu);
    (what == VC_EMU_MEMSET ? g_memset : what == VC_EMU_GEMM ? g_gemm : what == VC_EMU_SYNC ? g_sync : g_graph)++;
}

/* the time of one run of queued work (emu_runtime.cpp's flush), from a clock reading taken before it */
double vc_emu_clock(void) { return on() ? now_s() : 0; }
void vc_emu_count_device(double t0) {
    if (!on()) return;
    const double t = now_s() - t0;
    std::lock_guard<std::mutex> l(g_smu);
    g_dev_s += t;
}
