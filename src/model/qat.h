/* Quantization-aware training's fake quantization (src/model/qat.c): NVFP4 as verl's QAT computes it. */
#ifndef VERLC_MODEL_QAT_H
#define VERLC_MODEL_QAT_H
#include <stdint.h>

/* |v| rounded to float8 e4m3fn (round to nearest even, subnormals kept; v at most 448) */
float vc_qat_e4m3(float v);
/* y = x fake-quantized to NVFP4 by groups of `group` along each row of x [rows, cols] (cols a multiple of group):
 * each group's scale its largest |x| / (6 gs) rounded to e4m3 (at most 448), times gs = amax / (6 x 448); each value
 * |x| / scale rounded to the nearest of 0, 0.5, 1, 1.5, 2, 3, 4, 6 (ties to the even code), times scale, signed.
 * A scale under 1e-5 is 1. bf16: x read rounded to bf16 and y rounded to bf16 (a bf16 parameter's forward). amax:
 * the largest |x| over the module or its fused siblings (of the values as read). x and y may be the same. */
void vc_qat_fake_quant(const float *x, float *y, int64_t rows, int64_t cols, int group, float amax, int bf16);
#endif
