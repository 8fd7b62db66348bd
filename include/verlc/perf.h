/* Machine peaks and model FLOP counts for benchmarks and MFU metrics. */
#ifndef VERLC_PERF_H
#define VERLC_PERF_H
#include "verlc/model.h"

/* fp32 peak from the CPU's vector FMA width x FMA units x cores x clock (GFLOP/s); 0 if unknown */
double vc_perf_peak_theoretical(void);
/* achieved fp32 GEMM GFLOP/s of an n x n x n sgemm on this machine (best of a few runs) */
double vc_perf_peak_sgemm(int n);
/* FLOPs of one forward over `tokens` tokens packed in sequences of length seq_len (matmuls, attention,
 * LM head); backward is twice the forward. */
double vc_perf_forward_flops(const vc_model_config *c, int64_t tokens, int64_t seq_len);
/* read/write streaming bandwidth in GB/s (a STREAM-like triad over `mb` MB) */
double vc_perf_mem_bandwidth(int mb);
#endif
