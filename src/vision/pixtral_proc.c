/* Mistral 3's image processor (transformers' PixtralImageProcessorPil as PixtralProcessor calls it: its patch_size
 * times the processor's spatial_merge_size), behind qwen_vl_utils' fetch_image as verl runs every processor: an image
 * larger than `longest_edge` on a side scaled down (sides floored), then each side rounded up to whole steps of patch x
 * merge pixels and resized to that with Pillow's filter; rescaled and normalized (CLIP's mean and std by default); its
 * patches row by row, each (channel, row, column). The merge comes from processor_config.json beside the
 * preprocessor_config.json (PixtralProcessor's default 1 without it). */
#include "verlc/image.h"
#include "vl_internal.h"
#include "verlc/json.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* an int or a {height, width} pair of one value twice */
static vc_status square(const cJSON *j, const char *key, int64_t *v, const char *file) {
    const cJSON *o = vc_json_member(j, key);
    if (!cJSON_IsObject(o)) return o ? vc_vl_get_pos_int(j, key, 1 << 16, v, file) : VC_OK;
    int64_t h = *v, w = *v;
    char ctx[1100];
    snprintf(ctx, sizeof ctx, "%s: %s", file, key);
    vc_status st = vc_vl_get_pos_int(o, "height", 1 << 16, &h, ctx);
    if (!st) st = vc_vl_get_pos_int(o, "width", 1 << 16, &w, ctx);
    if (!st && !vc_json_member(o, "height")) st = vc_vl_get_pos_int(o, "longest_edge", 1 << 16, &h, ctx), w = h;
    if (!st && h != w) return vc_fail(VC_ERR_UNSUPPORTED, "%s: %s %lldx%lld is not square", file, key, (long long)w,
                                      (long long)h);
    if (!st) *v = h;
    return st;
}

vc_status vc_vl_pixtral_parse(const cJSON *j, vc_vl_image_config *c, const char *file) {
    int64_t p = 16, edge = 1024, r = 3, m = 1;
    vc_status st = square(j, "patch_size", &p, file);
    if (!st) st = square(j, "size", &edge, file);
    if (!st) st = vc_json_get_int(j, "resample", 3, &r, file);
    if (st) return st;
    if (r != 2 && r != 3)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: resample = %lld (2, BILINEAR, and 3, BICUBIC, are built)", file,
                       (long long)r);
    /* the processor's spatial_merge_size, beside this file */
    const char *slash = strrchr(file, '/');
    char *pc = vc_malloc(strlen(file) + 32);
    if (!pc) return VC_ERR_NOMEM;
    snprintf(pc, strlen(file) + 32, "%.*sprocessor_config.json", slash ? (int)(slash - file + 1) : 0, file);
    cJSON *pj = NULL;
    if (vc_file_exists(pc)) {
        st = vc_json_load_file(pc, &pj);
        if (!st) st = vc_vl_get_pos_int(pj, "spatial_merge_size", 16, &m, pc);
        cJSON_Delete(pj);
    }
    free(pc);
    if (st) return st;
    c->pixtral = 1, c->patch_size = (int)p, c->merge_size = (int)m, c->temporal_patch_size = 1, c->fixed_h = (int)edge;
    c->resample = (int)r;
    return VC_OK;
}

vc_status vc_vl_pixtral_size(const vc_vl_image_config *c, int64_t height, int64_t width, int *out_h, int *out_w) {
    int64_t step = (int64_t)c->patch_size * c->merge_size, L = c->fixed_h;
    if (height < 1 || width < 1) return vc_fail(VC_ERR_ARG, "image of %lldx%lld", (long long)width, (long long)height);
    double ratio = fmax((double)height / (double)L, (double)width / (double)L);
    if (ratio > 1) height = (int64_t)floor((double)height / ratio), width = (int64_t)floor((double)width / ratio);
    if (height < 1 || width < 1) /* (transformers' resize fails on it too) */
        return vc_fail(VC_ERR_ARG, "image: scaled to longest_edge %lld it has a side of 0 pixels (%lldx%lld)", (long long)L,
                       (long long)width, (long long)height);
    int64_t h = ((height - 1) / step + 1) * step, w = ((width - 1) / step + 1) * step;
    if (h > 1 << 15 || w > 1 << 15)
        return vc_fail(VC_ERR_ARG, "image of %lldx%lld: Mistral 3's processor makes it %lldx%lld", (long long)width,
                       (long long)height, (long long)w, (long long)h);
    *out_h = (int)h, *out_w = (int)w;
    return VC_OK;
}
