/* Rotary position embedding configuration and frequencies, computed as transformers'
 * modeling_rope_utils.py does (default, linear, dynamic NTK, llama3, YaRN incl. DeepSeek mscale, LongRoPE),
 * following its float32 operation order so inv_freq matches torch to the last bit wherever pow() does. */
#ifndef VERLC_ROPE_H
#define VERLC_ROPE_H
#include <cjson/cJSON.h>
#include <stdint.h>
#include "verlc/core.h"

typedef enum vc_rope_type {
    VC_ROPE_DEFAULT = 0,
    VC_ROPE_LINEAR,
    VC_ROPE_DYNAMIC,
    VC_ROPE_YARN,
    VC_ROPE_LONGROPE,
    VC_ROPE_LLAMA3,
    VC_ROPE_PROPORTIONAL, /* Gemma 4: the first partial_rotary_factor of each head's pairs rotate at the whole head's
                           * frequencies, the others not at all */
} vc_rope_type;

#define VC_ROPE_MAX_FACTORS 512 /* longrope factor lists: rotary dims up to 1024 */

typedef struct vc_rope {
    int type;                 /* vc_rope_type */
    double theta;             /* rope_theta (10000 when the config names none: see theta_given) */
    int theta_given;
    double factor;            /* scaling factor as written (1.0 when absent) */
    int has_factor;
    /* llama3 */
    double low_freq_factor, high_freq_factor;
    /* original_max_position_embeddings, 0 when absent: from the rope dict for llama3 and yarn, from the
     * config's top level for longrope (as transformers reads them) */
    int64_t original_max_pos;
    /* yarn */
    double attention_factor;  /* used when has_attention_factor (yarn, longrope) */
    int has_attention_factor;
    double beta_fast, beta_slow; /* 32 / 1 when absent or 0 */
    double mscale, mscale_all_dim; /* 0 when absent */
    int truncate;             /* round the correction range outwards (default 1) */
    /* longrope */
    int n_short, n_long;
    double short_factor[VC_ROPE_MAX_FACTORS], long_factor[VC_ROPE_MAX_FACTORS];
    /* from the config's top level (or rope_parameters in transformers-5 configs) */
    int64_t max_position_embeddings; /* 0 when absent */
    double partial_rotary_factor;    /* 1.0 when absent; the caller turns it into a rotary dim */
    /* multimodal rope (Qwen2-VL's mrope_section): pairs [0, s0) rotate by a token's temporal position, the next s1 by
     * its height, the next s2 by its width (all 0: a plain rope); interleaved (Qwen3-VL): pair i by height when i % 3
     * == 1 and i < 3 s1, by width when i % 3 == 2 and i < 3 s2, else by time */
    int mrope[3];
    int mrope_interleaved;
} vc_rope;

/* Reads the rope settings of a whole config.json object, in the classic style (rope_theta + rope_scaling
 * with "type" or "rope_type") or the transformers-5 style (rope_parameters with rope_type/rope_theta/...).
 * When rope_parameters holds one dict per layer type, the "full_attention" entry is used (or the only one).
 * Errors name config_path and the key: unknown type (VC_ERR_UNSUPPORTED), missing required key
 * (VC_ERR_MISSING), wrong JSON type (VC_ERR_FORMAT). */
vc_status vc_rope_parse(const cJSON *config, const char *config_path, vc_rope *out);
/* Same, for the layers of one layer type ("full_attention", "sliding_attention", ...): selects the per-type
 * dict of rope_parameters; flat settings apply to every type. In classic configs, "sliding_attention" with a
 * top-level rope_local_base_freq (Gemma 3) is default rope with that base. */
vc_status vc_rope_parse_layer(const cJSON *config, const char *config_path, const char *layer_type,
                              vc_rope *out);

/* Fills inv_freq[rot_dim/2] for a forward whose largest position id + 1 is seq_len; *attn_scale (may be
 * NULL) is the multiplier transformers applies to cos and sin (YaRN/LongRoPE attention factor; 1.0 else).
 * max_position_embeddings <= 0 takes the parsed value. Dynamic NTK recomputes the base only when
 * seq_len > max_position_embeddings; LongRoPE uses long factors when seq_len > original max positions. */
vc_status vc_rope_inv_freq(const vc_rope *r, int rot_dim, int64_t seq_len, int max_position_embeddings,
                           float *inv_freq, float *attn_scale);

/* DeepSeek-V2/V3 attention (transformers deepseek_v3): softmax scale = qk_head_dim^-0.5 times this value,
 * which is mscale^2 with mscale = 0.1 * mscale_all_dim * ln(factor) + 1 (factor as written, 1 when
 * factor <= 1) when the rope type is not default and mscale_all_dim is non-zero, else 1.0.
 * Only DeepSeek-style attention applies it; the cos/sin factor of such configs comes from vc_rope_inv_freq
 * (mscale / mscale_all_dim ratio, 1.0 when they are equal). */
double vc_rope_softmax_mscale(const vc_rope *r);

/* transformers keeps dynamic-NTK frequencies stateful: they grow with the longest sequence seen and reset
 * only when a shorter-than-max_position_embeddings input arrives. Given the cached length (start at 0),
 * returns the seq_len to pass to vc_rope_inv_freq and updates *cached, reproducing that behaviour. */
int64_t vc_rope_dynamic_seq_len(int64_t *cached, int64_t seq_len, int max_position_embeddings);

const char *vc_rope_type_name(int type);
#endif
