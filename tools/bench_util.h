/* Shared bench output: MFU against the GPU's promised dense peak (verl's figures) and the ratio to a named
 * peer measured elsewhere (--peer TOKENS_PER_S [--peer-name TEXT], e.g. PyTorch on the same GPU). */
#ifndef VC_BENCH_UTIL_H
#define VC_BENCH_UTIL_H
#include "tensor/backend.h"
#include "verlc/cuda.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct bench_peer {
    double tps;
    const char *name;
} bench_peer;

/* consumes --peer / --peer-name at argv[*i]; 1 when it did */
static inline int bench_peer_arg(int argc, char **argv, int *i, bench_peer *p) {
    if (*i + 1 >= argc) return 0;
    if (!strcmp(argv[*i], "--peer")) p->tps = atof(argv[++*i]);
    else if (!strcmp(argv[*i], "--peer-name")) p->name = argv[++*i];
    else return 0;
    return 1;
}

#define BENCH_PEER_USAGE "[--peer TOKENS_PER_S [--peer-name TEXT]]"

/* on a GPU: the FLOP rate as a share of the device's promised dense peak at the matmul precision */
static inline void bench_mfu(double flops_per_s) {
    double peak = 0;
    if (!vc_backend_cuda() || vc_be() != vc_backend_cuda()) return;
    int bf16 = vc_matmul_precision() == VC_PREC_BF16;
    if (vc_cuda_peak_flops(bf16, &peak) != VC_OK || peak <= 0) return;
    printf("  MFU %.1f%% of the device's dense %s peak (%.0f TFLOP/s)\n", 100.0 * flops_per_s / peak,
           bf16 ? "bf16" : "f32", peak / 1e12);
}

static inline void bench_peer_ratio(const bench_peer *p, double tps) {
    if (p->tps > 0)
        printf("  %.2fx %s (%.0f tokens/s)\n", tps / p->tps, p->name ? p->name : "the peer", p->tps);
}
#endif
