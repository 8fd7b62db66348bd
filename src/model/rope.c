/* RoPE inverse frequencies as transformers computes them (modeling_rope_utils.py). torch does this in
 * float32 with python-double scalars cast to float at each op; we mirror that order, computing only pow()
 * in double and rounding it (torch's float pow is within an ulp of that). */
#include "verlc/rope.h"
#include <math.h>
#include <string.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off") /* no fused multiply-add: torch rounds every op */
#endif

/* torch: float32 pow of float32 operands */
static float powf32(float base, float e) { return (float)pow((double)base, (double)e); }

/* exponent of pair i: arange(0, dim, 2).float() / dim, in float32 */
static float pair_exponent(int i, int dim) { return (float)(2 * i) / (float)dim; }

/* 1.0 / (base ** (arange(0, dim, 2) / dim)) */
static void default_freqs(float base, int dim, float *inv) {
    for (int i = 0; i < dim / 2; i++) inv[i] = 1.0f / powf32(base, pair_exponent(i, dim));
}

/* get_mscale of YaRN / DeepSeek */
static double yarn_mscale(double scale, double mscale) {
    return scale <= 1 ? 1.0 : 0.1 * mscale * log(scale) + 1.0;
}

static double correction_dim(double rotations, int dim, double base, double max_pos) {
    return (dim * log(max_pos / (rotations * 2 * M_PI))) / (2 * log(base));
}

static float yarn_freqs(const vc_rope *r, int dim, int max_pos, float *inv) {
    /* The explicit factor wins over max_pos / original (transformers PR #40320, in v5; 4.x used the ratio,
     * which equals the factor in well-formed configs); the original context bounds the correction range. */
    double factor = r->factor;
    double orig = r->original_max_pos > 0 ? (double)r->original_max_pos : (double)max_pos;
    double attn = r->attention_factor;
    if (!r->has_attention_factor) {
        if (r->mscale != 0 && r->mscale_all_dim != 0)
            attn = yarn_mscale(factor, r->mscale) / yarn_mscale(factor, r->mscale_all_dim);
        else attn = yarn_mscale(factor, 1.0);
    }
    double low = correction_dim(r->beta_fast, dim, r->theta, orig);
    double high = correction_dim(r->beta_slow, dim, r->theta, orig);
    if (r->truncate) { low = floor(low); high = ceil(high); }
    if (low < 0) low = 0;
    if (high > dim - 1) high = dim - 1;
    if (low == high) high += 0.001; /* transformers: prevent singularity */
    float flow = (float)low, span = (float)(high - low), ffac = (float)factor;
    for (int i = 0; i < dim / 2; i++) {
        float pos = powf32((float)r->theta, pair_exponent(i, dim));
        float extrap = 1.0f / pos, interp = 1.0f / (ffac * pos);
        float ramp = ((float)i - flow) / span;
        ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
        float ef = 1.0f - ramp; /* share of extrapolation */
        inv[i] = interp * (1.0f - ef) + extrap * ef;
    }
    return (float)attn;
}

static vc_status longrope_freqs(const vc_rope *r, int dim, int64_t seq_len, int max_pos, float *inv,
                                float *attn) {
    double factor = r->factor, orig = (double)max_pos;
    if (r->original_max_pos > 0) {
        orig = (double)r->original_max_pos;
        factor = (double)max_pos / orig;
    }
    double a = r->attention_factor;
    if (!r->has_attention_factor) a = factor <= 1.0 ? 1.0 : sqrt(1 + log(factor) / log(orig));
    int use_long = (double)seq_len > orig;
    const double *ext = use_long ? r->long_factor : r->short_factor;
    int n = use_long ? r->n_long : r->n_short;
    if (n != dim / 2)
        return vc_fail(VC_ERR_SHAPE, "rope: longrope %s_factor has %d entries, rotary dim %d needs %d",
                       use_long ? "long" : "short", n, dim, dim / 2);
    for (int i = 0; i < dim / 2; i++)
        inv[i] = 1.0f / ((float)ext[i] * powf32((float)r->theta, pair_exponent(i, dim)));
    *attn = (float)a;
    return VC_OK;
}

static void llama3_freqs(const vc_rope *r, int dim, float *inv) {
    default_freqs((float)r->theta, dim, inv);
    double ctx = (double)r->original_max_pos;
    float low_wl = (float)(ctx / r->low_freq_factor), high_wl = (float)(ctx / r->high_freq_factor);
    float fac = (float)r->factor, two_pi = (float)(2 * M_PI), fctx = (float)ctx;
    float lff = (float)r->low_freq_factor, span = (float)(r->high_freq_factor - r->low_freq_factor);
    for (int i = 0; i < dim / 2; i++) {
        float wavelen = (1.0f / inv[i]) * two_pi; /* python scalar / tensor = reciprocal * scalar */
        float f = wavelen > low_wl ? inv[i] / fac : inv[i];
        float smooth = ((1.0f / wavelen) * fctx - lff) / span;
        float smoothed = (1.0f - smooth) * f / fac + smooth * f;
        int medium = !(wavelen < high_wl) && !(wavelen > low_wl);
        inv[i] = medium ? smoothed : f;
    }
}

/* proportional: pair i < floor(partial * dim / 2) at base^(-2i / dim), the rest 0 (cos 1, sin 0), all over factor */
static void proportional_freqs(const vc_rope *r, int dim, float *inv) {
    int angles = (int)floor(r->partial_rotary_factor * (double)dim / 2.0);
    default_freqs((float)r->theta, dim, inv);
    for (int i = 0; i < dim / 2; i++) inv[i] = i < angles ? inv[i] / (float)r->factor : 0.0f;
}

/* Dynamic NTK: base * ((factor * seq_len / max_pos) - (factor - 1)) ** (dim / (dim - 2)), evaluated on
 * torch tensors (seq_len is a tensor in the forward-time update), hence in float32. */
static void dynamic_freqs(const vc_rope *r, int dim, int64_t seq_len, int max_pos, float *inv) {
    if (seq_len <= max_pos) { default_freqs((float)r->theta, dim, inv); return; }
    float t = (float)r->factor * (float)seq_len;
    t = t / (float)max_pos;
    t = t - (float)(r->factor - 1.0);
    float base = (float)r->theta * powf32(t, (float)((double)dim / (double)(dim - 2)));
    default_freqs(base, dim, inv);
}

vc_status vc_rope_inv_freq(const vc_rope *r, int rot_dim, int64_t seq_len, int max_position_embeddings,
                           float *inv_freq, float *attn_scale) {
    float attn = 1.0f;
    int max_pos = max_position_embeddings > 0 ? max_position_embeddings : (int)r->max_position_embeddings;
    if (rot_dim < 2 || rot_dim % 2) return vc_fail(VC_ERR_ARG, "rope: rotary dim %d must be even and >= 2", rot_dim);
    if (max_pos <= 0 && (r->type == VC_ROPE_DYNAMIC || r->type == VC_ROPE_YARN || r->type == VC_ROPE_LONGROPE))
        return vc_fail(VC_ERR_ARG, "rope: %s scaling needs max_position_embeddings", vc_rope_type_name(r->type));
    vc_status st = VC_OK;
    switch (r->type) {
    case VC_ROPE_DEFAULT: default_freqs((float)r->theta, rot_dim, inv_freq); break;
    case VC_ROPE_LINEAR:
        default_freqs((float)r->theta, rot_dim, inv_freq);
        for (int i = 0; i < rot_dim / 2; i++) inv_freq[i] = inv_freq[i] / (float)r->factor;
        break;
    case VC_ROPE_DYNAMIC:
        if (rot_dim < 4) return vc_fail(VC_ERR_ARG, "rope: dynamic scaling needs a rotary dim of 4 or more");
        dynamic_freqs(r, rot_dim, seq_len, max_pos, inv_freq);
        break;
    case VC_ROPE_YARN: attn = yarn_freqs(r, rot_dim, max_pos, inv_freq); break;
    case VC_ROPE_LONGROPE: st = longrope_freqs(r, rot_dim, seq_len, max_pos, inv_freq, &attn); break;
    case VC_ROPE_LLAMA3: llama3_freqs(r, rot_dim, inv_freq); break;
    case VC_ROPE_PROPORTIONAL: proportional_freqs(r, rot_dim, inv_freq); break;
    default: return vc_fail(VC_ERR_ARG, "rope: invalid type %d", r->type);
    }
    if (st == VC_OK && attn_scale) *attn_scale = attn;
    return st;
}

double vc_rope_softmax_mscale(const vc_rope *r) {
    if (r->type == VC_ROPE_DEFAULT || r->mscale_all_dim == 0) return 1.0;
    double m = yarn_mscale(r->factor, r->mscale_all_dim);
    return m * m;
}

int64_t vc_rope_dynamic_seq_len(int64_t *cached, int64_t seq_len, int max_position_embeddings) {
    if (*cached < max_position_embeddings) *cached = max_position_embeddings;
    if (seq_len > *cached) *cached = seq_len;
    if (seq_len < max_position_embeddings && *cached > max_position_embeddings) *cached = max_position_embeddings;
    return *cached;
}
