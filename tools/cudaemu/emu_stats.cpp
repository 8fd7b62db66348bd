/* verlc CUDA emulator: operation counts. With VC_EMU_STATS=1 the process prints, at exit, how many
 * kernels it launched (the busiest kernels by name), how many copies of each kind and their bytes,
 * memsets, GEMMs and synchronising calls: what a GPU run would pay per launch and per copy, counted
 * without a GPU. */
#include "emu_internal.h"
#include <algorithm>
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

static void report(void) {
    std::lock_guard<std::mutex> l(g_smu);
    static const char *kind[] = { "host to host", "host to device", "device to host", "device to device", "default" };
    fprintf(stderr, "cudaemu stats: %ld kernel launches, %ld GEMMs, %ld memsets, %ld synchronising calls, %ld graph "
            "launches (their work counted once, when captured)\n", g_launch, g_gemm, g_memset, g_sync, g_graph);
    for (int k = 0; k < 5; k++)
        if (g_copy[k]) fprintf(stderr, "cudaemu stats: %ld copies %s, %.0f bytes\n", g_copy[k], kind[k], g_copy_bytes[k]);
    std::vector<std::pair<long, std::string>> v;
    for (auto &e : g_kernels) v.push_back({ e.second, e.first });
    std::sort(v.rbegin(), v.rend());
    for (size_t i = 0; i < v.size() && i < 12; i++) fprintf(stderr, "cudaemu stats: %10ld x %s\n", v[i].first, v[i].second.c_str());
}

static int on(void) {
    if (g_on < 0) {
        g_on = vc_emu_env_int("VC_EMU_STATS", 0) != 0;
        if (g_on) atexit(report);
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
