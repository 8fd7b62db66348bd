/* Machine peaks and model FLOP counts for benchmarks and MFU metrics. */
#ifndef VERLC_PERF_H
#define VERLC_PERF_H
#include "verlc/model.h"

/* fp32 peak from the CPU's vector FMA width x FMA units x cores x clock (GFLOP/s); 0 if unknown */
double vc_perf_peak_theoretical(void);
/* the same for the products at the current matmul precision: under bf16 matmuls on a CPU with AVX-512 BF16 its dot
 * products (two products a lane an instruction: twice the fp32 figure), else the fp32 peak */
double vc_perf_peak_theoretical_prec(void);
/* the label of vc_perf_peak_theoretical_prec's figure: "bf16 dot-product" or "fp32" */
const char *vc_perf_peak_theoretical_name(void);
/* achieved fp32 GEMM GFLOP/s of an n x n x n product on this machine (best of a few runs): OpenBLAS's sgemm over the
 * thread pool (the CPU's backward products), and the row-invariant GEMM (its forward products; under bf16 matmuls
 * with B as a registered bf16 weight copy, as a model's products read theirs: measure before any are made, since it
 * drops them all after) */
double vc_perf_peak_sgemm(int n);
double vc_perf_peak_rowinv(int n);
/* FLOPs of one forward over `tokens` tokens packed in sequences of length seq_len (matmuls, attention,
 * LM head); backward is twice the forward. */
double vc_perf_forward_flops(const vc_model_config *c, int64_t tokens, int64_t seq_len);
/* the peak in FLOP/s that MFU figures divide by, as verl's against the device's promised peak: the GPU's (bf16
 * tensor cores with bf16 matmuls, else f32) when the current backend is CUDA, else the CPU's fp32 peak (vector width
 * x FMA pipes x cores x clock; a measured GEMM peak when the CPU cannot be identified) */
double vc_perf_promised_peak(void);
/* verl's FlopsCounter (its estimate_flops) for a forward and backward over `rows` sequences of lengths
 * cu[i + 1] - cu[i]: 6 x (vc_model_active_weights + 2 vocab x hidden) x tokens + 12 x, over the attention layers and
 * the rows, s x min(s, the layer's window, chunk or DSA top-k) x query head width x query heads. verl's
 * perf/mfu/actor, perf/mfu/critic and (a third of it, forward only) perf/mfu/actor_infer divide it by the time and
 * the device's promised peak. The output head counts head_rows x hidden (0: the model's own, its LM head's rows or
 * its score head's labels): a critic's value head 1, where verl counts an LM head it does not have. */
double vc_perf_verl_flops(const vc_model *m, int64_t head_rows, const int64_t *cu, int rows);
/* read/write streaming bandwidth in GB/s (a STREAM-like triad over `mb` MB) */
double vc_perf_mem_bandwidth(int mb);
#endif
