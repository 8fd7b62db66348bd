/* A row's videos (verl's data.video_key with a Qwen-VL processor): each value read as qwen_vl_utils' fetch_video
 * reads it (a path or file:// URI decoded by src/vision/video.c as torchcodec decodes it, or a list of frames each
 * through fetch_image; fps / nframes sampling, the time range, the pixel budget), then the model's video processor.
 * The rows keep the video's entries (grids, tokens, Qwen3-VL's frame-group timestamps, Qwen2.5-VL's time step); the
 * pixels are made on demand. */
#include "data/vl_rows.h"
#include "io/url_fetch.h"
#include "verlc/image.h"
#include "verlc/video.h"
#include "verlc/vision.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const cJSON *item(const cJSON *obj, const char *name) { return cJSON_GetObjectItemCaseSensitive(obj, name); }
static int present(const cJSON *x) { return x && !cJSON_IsNull(x); }

/* one of fetch_video's numeric keys: > 0 (whole when integer), absent or null: *has 0 */
static vc_status opt_num(const cJSON *v, const char *name, int integer, const char *what, double *out, int *has) {
    const cJSON *x = item(v, name);
    if (has) *has = 0;
    if (!present(x)) return VC_OK;
    if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || x->valuedouble < 0 || x->valuedouble > 1e15 ||
        (integer && (x->valuedouble != floor(x->valuedouble) || x->valuedouble < 1)))
        return vc_fail(VC_ERR_FORMAT, "%s.%s must be a %s number", what, name, integer ? "positive whole" : "non-negative");
    *out = x->valuedouble;
    if (has) *has = 1;
    return VC_OK;
}

/* the value's frames source (a string, or a list of frames) and fetch_video's keys */
static vc_status video_opts(const cJSON *v, const char *what, vc_vl_video_opts *o, const cJSON **src) {
    memset(o, 0, sizeof *o);
    *src = cJSON_IsObject(v) ? item(v, "video") : v;
    if (!present(*src) || !(cJSON_IsString(*src) || cJSON_IsArray(*src)))
        return vc_fail(VC_ERR_FORMAT, "%s must be a path, a list of frames or an object with \"video\" (verl's "
                       "VIDEO_FORMAT_HELP)", what);
    if (cJSON_IsString(*src) && !*(*src)->valuestring) return vc_fail(VC_ERR_FORMAT, "%s is an empty path", what);
    if (cJSON_IsArray(*src) && cJSON_GetArraySize(*src) < 1) return vc_fail(VC_ERR_FORMAT, "%s has no frames", what);
    if (!cJSON_IsObject(v)) return VC_OK;
    double x[8] = { 0 };
    int has_n = 0, has_rh = 0, has_rw = 0;
    vc_status st = opt_num(v, "fps", 0, what, &o->fps, &o->has_fps);
    if (!st) st = opt_num(v, "nframes", 1, what, &x[0], &has_n);
    if (!st) st = opt_num(v, "min_frames", 1, what, &x[1], NULL);
    if (!st) st = opt_num(v, "max_frames", 1, what, &x[2], NULL);
    if (!st) st = opt_num(v, "min_pixels", 1, what, &x[3], NULL);
    if (!st) st = opt_num(v, "max_pixels", 1, what, &x[4], NULL);
    if (!st) st = opt_num(v, "total_pixels", 1, what, &x[5], NULL);
    if (!st) st = opt_num(v, "resized_height", 1, what, &x[6], &has_rh);
    if (!st) st = opt_num(v, "resized_width", 1, what, &x[7], &has_rw);
    if (!st) st = opt_num(v, "video_start", 0, what, &o->video_start, &o->has_start);
    if (!st) st = opt_num(v, "video_end", 0, what, &o->video_end, &o->has_end);
    if (!st) st = opt_num(v, "sample_fps", 0, what, &o->sample_fps, NULL);
    if (!st) st = opt_num(v, "raw_fps", 0, what, &o->raw_fps, NULL);
    if (st) return st;
    if (o->has_fps && has_n) return vc_fail(VC_ERR_FORMAT, "%s: only accept either `fps` or `nframes`", what);
    if ((o->has_fps && !(o->fps > 0)) || (present(item(v, "sample_fps")) && !(o->sample_fps > 0)) ||
        (present(item(v, "raw_fps")) && !(o->raw_fps > 0)))
        return vc_fail(VC_ERR_FORMAT, "%s: fps, sample_fps and raw_fps must be positive", what);
    if (x[6] > 1e6 || x[7] > 1e6) return vc_fail(VC_ERR_FORMAT, "%s: resized_height / resized_width too large", what);
    o->nframes = (int64_t)x[0], o->min_frames = (int64_t)x[1], o->max_frames = (int64_t)x[2];
    o->min_pixels = (int64_t)x[3], o->max_pixels = (int64_t)x[4], o->total_pixels = (int64_t)x[5];
    if (has_rh && has_rw) o->resized_h = (int)x[6], o->resized_w = (int)x[7]; /* fetch_video needs both */
    return VC_OK;
}

/* a video's sampled frames: decoded (pixels) or only sized; idx / fps / total are the metadata verl passes the
 * processor (frames_indices, fps, total_num_frames) */
typedef struct {
    vc_image *fr; /* [n] when decoded */
    int n, h, w;  /* frames and their size after fetch_video */
    int64_t *idx;
    double fps, total;
} vframes;

static void vframes_free(vframes *f) {
    for (int i = 0; f->fr && i < f->n; i++) vc_image_free(&f->fr[i]);
    free(f->fr), free(f->idx);
    memset(f, 0, sizeof *f);
}

static vc_status file_frames(const char *src, const vc_vl_video_opts *o, int patch, const char *what, int decode,
                             vframes *f) {
    char *tmp = NULL; /* an http(s) URL: its body in a temporary file, decoded as a local file */
    vc_status st = vc_url_is_http(src) ? vc_url_fetch_file(src, what, &tmp) : VC_OK;
    if (st) return st;
    vc_video *v = NULL;
    st = vc_video_open(tmp ? tmp : !strncmp(src, "file://", 7) ? src + 7 : src, &v);
    if (st) {
        if (tmp) unlink(tmp), free(tmp);
        return tmp ? vc_fail_ctx(st, "%s: %.200s", what, src) : vc_fail_ctx(st, "%s", what);
    }
    const vc_video_meta *m = vc_video_info(v);
    int64_t n = 0, count = 0;
    st = vc_vl_video_sample(o, m->frames, m->fps, &f->idx, &n, &count);
    if (!st && n > 4096) st = vc_fail(VC_ERR_ARG, "%s: %lld frames sampled (4096 at most)", what, (long long)n);
    f->n = (int)n, f->fps = m->fps, f->total = (double)count;
    if (!st && decode && !(f->fr = calloc((size_t)n, sizeof *f->fr))) st = VC_ERR_NOMEM;
    if (!st && decode) st = vc_video_frames(v, f->idx, f->n, f->fr);
    if (!st && decode) st = vc_vl_fetch_resize(f->fr, f->n, o, patch, what);
    if (!st && decode) f->h = f->fr[0].height, f->w = f->fr[0].width;
    if (!st && !decode) st = vc_vl_fetch_video_hw(o, patch, n, m->height, m->width, &f->h, &f->w);
    vc_video_close(v);
    if (tmp) unlink(tmp), free(tmp);
    return st ? vc_fail_ctx(st, "%s", what) : VC_OK;
}

static vc_status list_frames(const cJSON *list, const vc_vl_video_opts *o, int patch, const char *what, vframes *f) {
    int n = cJSON_GetArraySize(list);
    if (n > 4096) return vc_fail(VC_ERR_ARG, "%s: %d frames (4096 at most)", what, n);
    vc_image *in = calloc((size_t)n, sizeof *in);
    vc_status st = in ? VC_OK : VC_ERR_NOMEM;
    char fw[600];
    for (int i = 0; !st && i < n; i++) {
        snprintf(fw, sizeof fw, "%s[%d]", what, i);
        st = vc_vl_decode_value(cJSON_GetArrayItem(list, i), fw, &in[i]);
    }
    if (!st) st = vc_vl_fetch_frame_list(in, n, o, patch, what, &f->fr, &f->n);
    for (int i = 0; in && i < n; i++) vc_image_free(&in[i]);
    free(in);
    if (st) return st;
    double sample = o->sample_fps > 0 ? o->sample_fps : 2.0, raw = o->raw_fps > 0 ? o->raw_fps : sample;
    f->fps = raw, f->total = ((double)f->n / sample) * raw; /* fetch_video's fake metadata */
    f->h = f->fr[0].height, f->w = f->fr[0].width;
    if (!(f->idx = malloc(sizeof(int64_t) * (size_t)f->n))) return VC_ERR_NOMEM;
    for (int i = 0; i < f->n; i++) f->idx[i] = i;
    return VC_OK;
}

/* frames handed over without their timing (verl's SFT path): the processor's own sampling of them, its metadata
 * then the frames' places in what it got at 24 per second */
static vc_status processor_frames(const vc_vl_videos *vv, const char *what, vframes *f) {
    int64_t *idx = NULL, m = 0;
    vc_status st = vc_vl_video_processor_sample(&vv->cfg, f->n, what, &idx, &m);
    vc_image *fr = !st && f->fr ? calloc((size_t)m, sizeof *fr) : NULL;
    if (!st && f->fr && !fr) st = VC_ERR_NOMEM;
    for (int64_t i = 0; !st && fr && i < m; i++) { /* (the kept frames copied: an index may repeat) */
        const vc_image *a = &f->fr[idx[i]];
        size_t bytes = (size_t)a->width * a->height * 3;
        fr[i] = *a;
        if (!(fr[i].rgb = malloc(bytes))) st = VC_ERR_NOMEM;
        else memcpy(fr[i].rgb, a->rgb, bytes);
    }
    if (st) {
        for (int64_t i = 0; fr && i < m; i++) vc_image_free(&fr[i]);
        return free(fr), free(idx), st;
    }
    int h = f->h, w = f->w;
    vframes_free(f);
    f->fr = fr, f->n = (int)m, f->h = h, f->w = w, f->idx = idx, f->fps = 24.0, f->total = (double)m;
    return VC_OK;
}

static vc_status read_frames(const cJSON *v, const vc_vl_videos *vv, const char *what, int decode, vframes *f) {
    vc_vl_video_opts o;
    const cJSON *src;
    memset(f, 0, sizeof *f);
    vc_status st = video_opts(v, what, &o, &src);
    if (!st) st = cJSON_IsString(src) ? file_frames(src->valuestring, &o, vv->patch, what, decode, f)
                                      : list_frames(src, &o, vv->patch, what, f);
    if (!st && vv->no_metadata) st = processor_frames(vv, what, f);
    if (st) vframes_free(f);
    return st;
}

vc_status vc_vl_parse_video(const cJSON *v, const vc_vl_videos *vv, const char *what, vc_rl_image **ims, int *n,
                            int *cap) {
    vframes f;
    vc_status st = read_frames(v, vv, what, 0, &f);
    const vc_vl_video_config *c = &vv->cfg;
    int h = 0, w = 0, P = c->patch_size, M = c->merge_size, T = c->temporal_patch_size;
    if (!st && c->do_resize) st = vc_vl_video_resize_hw(c, f.n, f.h, f.w, &h, &w);
    if (!st && !c->do_resize) h = f.h, w = f.w;
    if (!st && (h % (P * M) || w % (P * M)))
        st = vc_fail(VC_ERR_SHAPE, "%s: %dx%d frames are not a multiple of patch_size * merge_size = %d", what, w, h,
                     P * M);
    if (st) return vframes_free(&f), vc_fail_ctx(st, "%s", what);
    int gt = (f.n + T - 1) / T, split = vv->mode == VC_VIDEO_SPLIT, k = split ? gt : 1;
    if (*n + k > *cap) {
        int nc = 2 * (*n + k);
        vc_rl_image *g = realloc(*ims, sizeof *g * (size_t)nc);
        if (!g) return vframes_free(&f), VC_ERR_NOMEM;
        memset(g + *cap, 0, sizeof *g * (size_t)(nc - *cap));
        *ims = g, *cap = nc;
    }
    double *ts = split ? calloc((size_t)gt, sizeof *ts) : NULL;
    if (split && !ts) return vframes_free(&f), VC_ERR_NOMEM;
    if (split) vc_vl_video_timestamps(f.idx, f.n, f.fps, ts);
    const cJSON *src = cJSON_IsObject(v) ? item(v, "video") : v;
    double sampled = vv->no_metadata ? 24.0 : (double)f.n / f.total * f.fps; /* VideoMetadata.sampled_fps */
    for (int g = 0; g < k; g++) {
        vc_rl_image *e = &(*ims)[*n + g];
        memset(e, 0, sizeof *e);
        e->src = cJSON_IsString(src) ? src->valuestring : NULL;
        e->video = v, e->group = g, e->groups = split ? gt : 0;
        e->grid[0] = split ? 1 : gt, e->grid[1] = h / P, e->grid[2] = w / P;
        e->tokens = (int64_t)e->grid[0] * e->grid[1] * e->grid[2] / ((int64_t)M * M);
        e->width = f.w, e->height = f.h;
        if (split) e->ts = ts[g];
        if (vv->mode == VC_VIDEO_TIMED) e->t_scale = (float)vv->tps * (float)((double)T / sampled);
    }
    *n += k;
    free(ts);
    vframes_free(&f);
    return VC_OK;
}

vc_status vc_vl_video_pixels(const vc_vl_videos *vv, const vc_rl_image *e, const char *what, vc_vl_pixels *out) {
    vframes f;
    memset(out, 0, sizeof *out);
    vc_status st = read_frames(e->video, vv, what, 1, &f);
    if (!st) st = vc_vl_video_process(&vv->cfg, f.fr, f.n, what, out);
    vframes_free(&f);
    return st;
}

vc_status vc_vl_videos_setup(const vc_model *m, const char *dir, int patch, vc_vl_videos *vv, char *why, size_t cap,
                             int *ok) {
    const vc_vision *v = vc_model_vision(m);
    int mode = v ? vc_vision_video_mode(v, &vv->tps) : VC_VIDEO_NONE;
    *ok = 0;
    if (mode == VC_VIDEO_NONE) {
        snprintf(why, cap, "video inputs of model_type %s are not built (Qwen2-VL's, Qwen2.5-VL's, Qwen3-VL's and "
                 "Qwen3.5's are)", vc_model_cfg(m)->model_type);
        return VC_OK;
    }
    vc_status st = vc_vl_video_config_load(dir, mode == VC_VIDEO_SPLIT, &vv->cfg);
    if (st) return st;
    vv->mode = mode, vv->patch = patch, vv->no_metadata = 0;
    *ok = 1;
    return VC_OK;
}
