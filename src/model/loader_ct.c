/* compressed-tensors checkpoints (quantization_config quant_method "compressed-tensors", llm-compressor's format):
 * symmetric integer weights packed densely into int32s (pack-quantized: name_packed [rows, words], the original shape
 * in name_shape, element i of a row at bits i*b of the row's words, little-endian, stored as value + 2^(b-1)), int8
 * (int-quantized) and float8 weights (float-quantized: name itself), each with name_scale per tensor ([1] or []), row ([rows, 1]) or
 * group of columns ([rows, groups]; activation-ordered groups: name_g_idx), and with asymmetric schemes name_zero_point.
 * nvfp4- and mxfp4-pack-quantized: vc_ct_unpack_fp4; 2:4 sparse weights (sparse-24-bitmask): vc_ct_unsparse24. Dequantized as compressed-tensors
 * does it: (value - zero point) times scale, computed in the scale's dtype (a bf16 scale gives bf16 products). */
#include "model_internal.h"
#include "verlc/dtype.h"
#include "verlc/pool.h"
#include "verlc/safetensors.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t int_at(const vc_st_tensor *t, int64_t i) {
    if (t->dtype == VC_I64) {
        int64_t v;
        memcpy(&v, (const char *)t->data + 8 * i, 8);
        return v;
    }
    int32_t v;
    memcpy(&v, (const char *)t->data + 4 * i, 4);
    return v;
}

/* the scale tensor of name: its values as floats into *out ([R, *groups], or one when *groups is 0), *gs the columns
 * of a group (group: the config's group_size, for rows that do not split evenly) */
static vc_status read_scale(const char *dir, vc_checkpoint *ck, const char *name, int64_t R, int64_t C, int64_t group,
                            float **out, int64_t *groups, int64_t *gs, vc_dtype *dt) {
    char sn[340];
    snprintf(sn, sizeof sn, "%s_scale", name);
    const vc_st_tensor *s = vc_ckpt_find(ck, sn);
    int64_t n = 1;
    for (int d = 0; s && d < s->ndim; d++) n *= s->shape[d];
    int ok = s && (s->dtype == VC_F32 || s->dtype == VC_BF16 || s->dtype == VC_F16) && s->ndim <= 2;
    int64_t G = ok && s->ndim == 2 ? s->shape[1] : 1; /* the config's group_size where it fits, else an even split */
    int64_t size = group >= 1 && (C + group - 1) / group == G ? group : G >= 1 && C % G == 0 ? C / G : 0;
    if (ok && s->ndim == 2) ok = s->shape[0] == R && G >= 1 && size >= 1 && (C + size - 1) / size == G;
    if (ok && s->ndim < 2) ok = n == 1;
    if (!ok)
        return vc_fail(VC_ERR_SHAPE, "%s: '%s' is not a float scale of '%s' per tensor, row or group of its [%lld, %lld] "
                       "(compressed-tensors)", dir, sn, name, (long long)R, (long long)C);
    float *v = vc_malloc(sizeof(float) * (size_t)n);
    if (!v) return VC_ERR_NOMEM;
    vc_st_tensor_to_f32(s, v);
    *out = v, *groups = s->ndim == 2 ? G : 0, *gs = s->ndim == 2 ? size : C, *dt = s->dtype;
    return VC_OK;
}

/* the signed value at bit sh of word lo (continuing into word hi when it straddles them) of packed int32 data,
 * b bits stored + 2^(b-1) */
static int unpacked(const char *data, int64_t lo, int64_t hi, int sh, int bits) {
    uint32_t a, b = 0;
    memcpy(&a, data + 4 * lo, 4);
    uint32_t u = a >> sh;
    if (sh + bits > 32) {
        memcpy(&b, data + 4 * hi, 4);
        u |= b << (32 - sh);
    }
    return (int)(u & ((1u << bits) - 1)) - (1 << (bits - 1));
}

/* the zero points of name (asymmetric schemes), one per scale: int8 as the scales lie ([R, G], [R, 1] or one), or int32
 * words packed down the rows (pack-quantized: [ceil(R b / 32), G], row r at bits r*b of its column, stored + 2^(b-1));
 * *out NULL when there are none */
static vc_status read_zero_points(const char *dir, vc_checkpoint *ck, const char *name, int64_t R, int64_t G, int bits,
                                  float **out) {
    char zn[340];
    snprintf(zn, sizeof zn, "%s_zero_point", name);
    const vc_st_tensor *z = vc_ckpt_find(ck, zn);
    *out = NULL;
    if (!z) return VC_OK;
    int64_t rows = G ? R : 1, cols = G ? G : 1, n = rows * cols, words = (R * bits + 31) / 32;
    int packed = z->dtype == VC_I32 && bits >= 1 && G;
    int ok = packed ? z->ndim == 2 && z->shape[0] == words && z->shape[1] == G
                    : z->dtype == VC_I8 && vc_st_tensor_numel(z) == n;
    if (!ok)
        return vc_fail(VC_ERR_SHAPE, "%s: '%s' is not one zero point per scale (int8, or int32 words packed down the rows)",
                       dir, zn);
    float *v = vc_malloc(sizeof(float) * (size_t)n);
    if (!v) return VC_ERR_NOMEM;
    if (!packed) vc_st_tensor_to_f32(z, v);
    for (int64_t r = 0; packed && r < R; r++) /* down column g: row r at bits r*b */
        for (int64_t g = 0; g < G; g++) {
            int64_t w = r * bits / 32;
            v[r * G + g] = (float)unpacked(z->data, w * G + g, (w + 1) * G + g, (int)(r * bits % 32), bits);
        }
    *out = v;
    return VC_OK;
}

/* activation-ordered groups (GPTQ's actorder=group): name_g_idx [C], each column's group; *out NULL when absent or
 * holding -1 (column order, as compressed-tensors reads it). compressed-tensors sorts the columns by group and cuts
 * them into groups of gs: column c is in group g_idx[c] when every group holds gs columns (the last the rest), which is
 * checked. */
static vc_status read_group_index(const char *dir, vc_checkpoint *ck, const char *name, int64_t C, int64_t G, int64_t gs,
                                  int32_t **out) {
    char gn[340];
    snprintf(gn, sizeof gn, "%s_g_idx", name);
    const vc_st_tensor *t = vc_ckpt_find(ck, gn);
    *out = NULL;
    if (!t) return VC_OK;
    if (!((t->dtype == VC_I32 || t->dtype == VC_I64) && vc_st_tensor_numel(t) == C))
        return vc_fail(VC_ERR_SHAPE, "%s: '%s' is not one int32 group index per column of '%s' (%lld columns)", dir, gn,
                       name, (long long)C);
    for (int64_t c = 0; c < C; c++)
        if (int_at(t, c) == -1) return VC_OK; /* not initialised: column order */
    int32_t *g = vc_malloc(sizeof(int32_t) * (size_t)C);
    int64_t *count = vc_calloc((size_t)(G ? G : 1), sizeof(int64_t));
    vc_status st = g && count ? VC_OK : VC_ERR_NOMEM;
    for (int64_t c = 0; !st && c < C; c++) {
        int64_t v = int_at(t, c);
        if (!G || v < 0 || v >= G)
            st = vc_fail(VC_ERR_FORMAT, "%s: '%s'[%lld] = %lld is not a group of '%s' (%lld groups)", dir, gn, (long long)c,
                         (long long)v, name, (long long)G);
        else g[c] = (int32_t)v, count[v]++;
    }
    for (int64_t k = 0; !st && k < G; k++)
        if (count[k] != (k + 1 < G ? gs : C - gs * (G - 1)))
            st = vc_fail(VC_ERR_FORMAT, "%s: '%s' puts %lld columns in group %lld, not %lld", dir, gn, (long long)count[k],
                         (long long)k, (long long)(k + 1 < G ? gs : C - gs * (G - 1)));
    free(count);
    if (st) free(g);
    else *out = g;
    return st;
}

/* buf [R, C] (values) less their zero points (zp, may be NULL), times their scales (column c's group gidx[c], else
 * c / gs), in the scale's dtype as compressed-tensors' dequantize computes */
static void apply_scale(float *buf, int64_t R, int64_t C, const float *sc, const float *zp, int64_t G, int64_t gs,
                        const int32_t *gidx, vc_dtype dt) {
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++) {
            int64_t at = G ? r * G + (gidx ? gidx[c] : c / gs) : 0;
            float s = sc[at], x = (buf[r * C + c] - (zp ? zp[at] : 0.0f)) * s;
            if (dt == VC_BF16) x = vc_bf16_to_f32(vc_f32_to_bf16(x));
            else if (dt == VC_F16) x = vc_f16_to_f32(vc_f32_to_f16(x));
            buf[r * C + c] = x;
        }
}

vc_status vc_ct_scale(const char *dir, vc_checkpoint *ck, const char *name, float *buf, int64_t R, int64_t C, int bits,
                      int64_t group) {
    float *sc = NULL, *zp = NULL;
    int32_t *gidx = NULL;
    int64_t G = 0, gs = C;
    vc_dtype dt = VC_F32;
    vc_status st = read_scale(dir, ck, name, R, C, group, &sc, &G, &gs, &dt);
    if (!st) st = read_zero_points(dir, ck, name, R, G, bits, &zp);
    if (!st) st = read_group_index(dir, ck, name, C, G, gs, &gidx);
    if (!st) apply_scale(buf, R, C, sc, zp, G, gs, gidx, dt);
    free(sc);
    free(zp);
    free(gidx);
    return st;
}

vc_status vc_ct_unpack(const char *dir, vc_checkpoint *ck, const char *name, const int64_t *want, int nd, int bits,
                       int64_t group, float **out) {
    char pn[340], hn[340];
    snprintf(pn, sizeof pn, "%s_packed", name);
    snprintf(hn, sizeof hn, "%s_shape", name);
    const vc_st_tensor *p = vc_ckpt_find(ck, pn), *h = vc_ckpt_find(ck, hn);
    int64_t R = nd >= 2 ? want[nd - 2] : 1, C = want[nd - 1], lead = 1;
    for (int d = 0; d < nd - 2; d++) lead *= want[d];
    int ok = p && h && p->dtype == VC_I32 && p->ndim == nd && (h->dtype == VC_I32 || h->dtype == VC_I64) && h->ndim == 1 &&
             h->shape[0] == nd;
    for (int d = 0; ok && d < nd; d++) ok = int_at(h, d) == want[d] && (d == nd - 1 || p->shape[d] == want[d]);
    if (ok) ok = bits >= 1 && bits <= 8 && p->shape[nd - 1] == (C * bits + 31) / 32;
    if (!ok)
        return vc_fail(VC_ERR_SHAPE, "%s: '%s' / '%s' are not int32 words of a [%lld, %lld] weight packed %d bits a value "
                       "by compressed-tensors (config.json implies it)", dir, pn, hn, (long long)R, (long long)C, bits);
    if (lead != 1)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: '%s': stacked packed weights are not read (compressed-tensors)", dir, pn);
    float *buf = vc_malloc(sizeof(float) * (size_t)(R * C));
    if (!buf) return VC_ERR_NOMEM;
    int64_t W = p->shape[nd - 1];
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++) { /* value c of row r: bits c*b.. of the row's words */
            int64_t w = r * W + c * bits / 32;
            buf[r * C + c] = (float)unpacked(p->data, w, w + 1, (int)(c * bits % 32), bits);
        }
    vc_status st = vc_ct_scale(dir, ck, name, buf, R, C, bits, group);
    if (st) {
        free(buf);
        return st;
    }
    *out = buf;
    return VC_OK;
}

vc_status vc_ct_unpack_fp4(const char *dir, vc_checkpoint *ck, const char *name, const int64_t *want, int nd, int mx,
                           float **out) {
    static const float E2M1[8] = { 0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f };
    const int64_t GS = mx ? 32 : 16;
    const char *kind = mx ? "mxfp4" : "nvfp4";
    char pn[340], sn[340], gn[340];
    snprintf(pn, sizeof pn, "%s_packed", name);
    snprintf(sn, sizeof sn, "%s_scale", name);
    snprintf(gn, sizeof gn, "%s_global_scale", name);
    const vc_st_tensor *p = vc_ckpt_find(ck, pn), *s = vc_ckpt_find(ck, sn), *g = mx ? NULL : vc_ckpt_find(ck, gn);
    int64_t R = nd >= 2 ? want[nd - 2] : 1, C = want[nd - 1];
    int ok = nd == 2 && C % GS == 0 && p && p->dtype == VC_U8 && p->ndim == 2 && p->shape[0] == R && p->shape[1] == C / 2;
    if (!ok)
        return vc_fail(VC_ERR_SHAPE, "%s: '%s' is not uint8 pairs of 4-bit floats of a [%lld, %lld] weight (%s, "
                       "compressed-tensors; config.json implies the shape)", dir, pn, (long long)R, (long long)C, kind);
    int sdt = mx ? s && s->dtype == VC_U8 : s && (s->dtype == VC_F8E4M3 || s->dtype == VC_BF16 || s->dtype == VC_F32);
    if (!(sdt && s->ndim == 2 && s->shape[0] == R && s->shape[1] == C / GS))
        return vc_fail(VC_ERR_SHAPE, "%s: '%s' is not %s scale per %lld columns of '%s' [%lld, %lld]", dir, sn,
                       mx ? "a uint8 E8M0" : "an fp8", (long long)GS, pn, (long long)R, (long long)C);
    if (!mx && !(g && g->dtype == VC_F32 && vc_st_tensor_numel(g) == 1))
        return vc_fail(VC_ERR_SHAPE, "%s: '%s' is not one float32 global scale", dir, gn);
    float gs = 1.0f, *sc = vc_malloc(sizeof(float) * (size_t)(R * (C / GS))), *buf = vc_malloc(sizeof(float) * (size_t)(R * C));
    if (!sc || !buf) {
        free(sc), free(buf);
        return VC_ERR_NOMEM;
    }
    if (g) vc_st_tensor_to_f32(g, &gs);
    if (mx)
        for (int64_t i = 0; i < R * (C / GS); i++) sc[i] = ldexpf(1.0f, (int)((const uint8_t *)s->data)[i] - 127);
    else vc_st_tensor_to_f32(s, sc);
    const uint8_t *b = p->data;
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++) {
            uint8_t q = b[r * (C / 2) + c / 2];
            unsigned nib = c % 2 ? q >> 4 : q & 15u;
            float v = (nib & 8u ? -1.0f : 1.0f) * E2M1[nib & 7u];
            float f = mx ? sc[r * (C / GS) + c / GS] : sc[r * (C / GS) + c / GS] / gs; /* float32 */
            buf[r * C + c] = vc_bf16_to_f32(vc_f32_to_bf16(v * f));
        }
    free(sc);
    *out = buf;
    return VC_OK;
}

vc_status vc_ct_unsparse24(const char *dir, vc_checkpoint *ck, const char *name, const int64_t *want, int nd,
                           float **out) {
    char cn[340], bn[340], hn[340];
    size_t k = strlen(name);
    int mk = k > 7 ? (int)(k - 7) : (int)k; /* MODULE: name without ".weight" */
    snprintf(cn, sizeof cn, "%.*s.compressed", mk, name);
    snprintf(bn, sizeof bn, "%.*s.bitmask", mk, name);
    snprintf(hn, sizeof hn, "%.*s.shape", mk, name);
    const vc_st_tensor *c = vc_ckpt_find(ck, cn), *b = vc_ckpt_find(ck, bn), *h = vc_ckpt_find(ck, hn);
    int64_t R = nd == 2 ? want[0] : 0, C = nd == 2 ? want[1] : 0;
    int ok = nd == 2 && h && (h->dtype == VC_I32 || h->dtype == VC_I64) && vc_st_tensor_numel(h) == 2 &&
             int_at(h, 0) == R && int_at(h, 1) == C && b && b->dtype == VC_U8 && b->ndim == 2 && b->shape[0] == R &&
             b->shape[1] == (C + 7) / 8 && c && (c->dtype == VC_F32 || c->dtype == VC_BF16 || c->dtype == VC_F16) &&
             vc_st_tensor_numel(c) == R * (C / 2) && C % 4 == 0;
    if (!ok)
        return vc_fail(VC_ERR_SHAPE, "%s: '%s', '%s' and '%s' are not a 2:4 sparse [%lld, %lld] weight "
                       "(compressed-tensors' sparse-24-bitmask; config.json implies the shape)", dir, cn, bn, hn,
                       (long long)R, (long long)C);
    float *vals = vc_malloc(sizeof(float) * (size_t)(R * (C / 2))), *buf = vc_calloc((size_t)(R * C), sizeof(float));
    if (!vals || !buf) {
        free(vals), free(buf);
        return VC_ERR_NOMEM;
    }
    vc_st_tensor_to_f32(c, vals);
    const uint8_t *m = b->data;
    vc_status st = VC_OK;
    for (int64_t r = 0; r < R && !st; r++) {
        int64_t j = 0;
        for (int64_t col = 0; col < C; col++)
            if (m[r * ((C + 7) / 8) + col / 8] >> (col % 8) & 1) {
                if (j < C / 2) buf[r * C + col] = vals[r * (C / 2) + j];
                j++;
            }
        if (j != C / 2)
            st = vc_fail(VC_ERR_FORMAT, "%s: '%s' row %lld keeps %s values, not %lld (2 of every 4)", dir, bn, (long long)r,
                         j < C / 2 ? "fewer" : "more", (long long)(C / 2));
    }
    free(vals);
    if (st) free(buf);
    else *out = buf;
    return st;
}
