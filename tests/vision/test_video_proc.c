/* Videos of Qwen-VL models against tests/fixtures/vision/video_proc (tools/fixtures/make_video_ref.py: qwen-vl-utils
 * 0.0.14, torchvision 0.29, transformers 5.24): qwen_vl_utils' frame sampling (smart_nframes, the time range,
 * torch.linspace's rounding), fetch_video on frame lists (fetch_image per frame, the pad to an even count, the
 * video's resize under its pixel budget: frames must equal torchvision's bytes), the Qwen2-VL and Qwen3-VL video
 * processors (pixel values bit for bit as transformers', its own float resize of the frames included) and Qwen3-VL's
 * timestamps; bad configs and frames refused by name. */
#include <sys/stat.h>
#include <unistd.h>
#include "vc_test.h"
#include "vision_helpers.h"

#define DIR VISION_DIR "/video_proc"

static cJSON *REF;
static vc_checkpoint *CK;

static double num(const cJSON *o, const char *k, double def) {
    const cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : def;
}

static vc_vl_video_opts opts_of(const cJSON *o) {
    vc_vl_video_opts v = { 0 };
    v.has_fps = cJSON_GetObjectItem(o, "fps") != NULL, v.fps = num(o, "fps", 0);
    v.nframes = (int64_t)num(o, "nframes", 0);
    v.min_frames = (int64_t)num(o, "min_frames", 0), v.max_frames = (int64_t)num(o, "max_frames", 0);
    v.min_pixels = (int64_t)num(o, "min_pixels", 0), v.max_pixels = (int64_t)num(o, "max_pixels", 0);
    v.total_pixels = (int64_t)num(o, "total_pixels", 0);
    v.resized_h = (int)num(o, "resized_height", 0), v.resized_w = (int)num(o, "resized_width", 0);
    v.has_start = cJSON_GetObjectItem(o, "video_start") != NULL, v.video_start = num(o, "video_start", 0);
    v.has_end = cJSON_GetObjectItem(o, "video_end") != NULL, v.video_end = num(o, "video_end", 0);
    return v;
}

static void check_sampling(void) {
    int n = 0;
    for (const cJSON *c = cJSON_GetObjectItem(REF, "nframes")->child; c; c = c->next, n++) {
        vc_vl_video_opts o = opts_of(cJSON_GetObjectItem(c, "opts"));
        int64_t total = (int64_t)num(c, "total", 0), *idx = NULL, k = 0;
        CHECK_OK(vc_vl_video_sample(&o, total, num(c, "fps", 0), &idx, &k, NULL));
        const cJSON *want = cJSON_GetObjectItem(c, "indices");
        int same = k == (int64_t)num(c, "nframes", -1) && k == cJSON_GetArraySize(want);
        for (int64_t i = 0; same && i < k; i++) same = idx[i] == (int64_t)cJSON_GetArrayItem(want, (int)i)->valuedouble;
        CHECK_MSG(same, "sampling case %d (%lld frames at %g fps): %lld frames, not qwen_vl_utils' %d", n,
                  (long long)total, num(c, "fps", 0), (long long)k, (int)num(c, "nframes", -1));
        free(idx);
    }
    printf("%d frame samplings as qwen_vl_utils'\n", n);
    vc_vl_video_opts o = { .nframes = 12 }, r = { .has_start = 1, .video_start = 3, .has_end = 1, .video_end = 2 };
    int64_t *idx = NULL, k = 0;
    CHECK(vc_vl_video_sample(&o, 10, 10, &idx, &k, NULL) == VC_ERR_ARG && strstr(vc_last_error(), "nframes should"));
    CHECK(vc_vl_video_sample(&r, 100, 10, &idx, &k, NULL) == VC_ERR_ARG && strstr(vc_last_error(), "time range"));
    CHECK(vc_vl_video_sample(&o, 0, 10, &idx, &k, NULL) == VC_ERR_FORMAT);
    CHECK(vc_vl_video_sample(&o, 100, 0, &idx, &k, NULL) == VC_ERR_FORMAT);
}

/* the case's processor: its config written where vc_vl_video_config_load reads it */
static void load_config(const cJSON *c, int qwen3, vc_vl_video_config *vc) {
    char dir[] = "/tmp/vc_video_cfgXXXXXX", path[300];
    CHECK(mkdtemp(dir) != NULL);
    cJSON *cfg = cJSON_Duplicate(cJSON_GetObjectItem(c, "config"), 1);
    cJSON_AddStringToObject(cfg, "video_processor_type", qwen3 ? "Qwen3VLVideoProcessor" : "Qwen2VLVideoProcessor");
    snprintf(path, sizeof path, "%s/video_preprocessor_config.json", dir);
    char *text = cJSON_Print(cfg);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    free(text);
    cJSON_Delete(cfg);
    CHECK_OK(vc_vl_video_config_load(dir, qwen3, vc));
    unlink(path), rmdir(dir);
}

static void check_frames(const char *name, const cJSON *c, const vc_image *fr, int n) {
    char key[128];
    snprintf(key, sizeof key, "%s.frames", name);
    const vc_st_tensor *t = vc_ckpt_find(CK, key);
    int step = (int)num(c, "frame_row_step", 1);
    const cJSON *shape = cJSON_GetObjectItem(c, "frames"); /* [n, 3, h, w] */
    CHECK_MSG(n == cJSON_GetArrayItem(shape, 0)->valueint && fr[0].height == cJSON_GetArrayItem(shape, 2)->valueint &&
              fr[0].width == cJSON_GetArrayItem(shape, 3)->valueint, "%s: %d frames of %dx%d, not fetch_video's", name,
              n, fr[0].width, fr[0].height);
    if (!t || t->ndim != 4 || t->shape[0] != n || t->shape[2] != fr[0].width) return;
    const uint8_t *a = t->data;
    long bad = 0;
    int maxd = 0;
    for (int k = 0; k < n; k++)
        for (int64_t y = 0; y < t->shape[1]; y++)
            for (int64_t x = 0; x < t->shape[2] * 3; x++) {
                int d = abs((int)a[((k * t->shape[1] + y) * t->shape[2]) * 3 + x] -
                            (int)fr[k].rgb[((size_t)(y * step) * fr[k].width) * 3 + x]);
                bad += d != 0, maxd = d > maxd ? d : maxd;
            }
    CHECK_MSG(bad == 0, "%s: %ld frame bytes differ from torchvision's, by up to %d", name, bad, maxd);
}

static void check_case(const cJSON *c) {
    const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
    int qwen3 = !strcmp(cJSON_GetObjectItem(c, "kind")->valuestring, "qwen3");
    const cJSON *entry = cJSON_GetObjectItem(c, "entry"), *paths = cJSON_GetObjectItem(entry, "video");
    int n = cJSON_GetArraySize(paths), m = 0;
    vc_image *in = calloc((size_t)n, sizeof *in), *fr = NULL;
    for (int i = 0; i < n; i++)
        CHECK_OK(vc_image_load(cJSON_GetArrayItem(paths, i)->valuestring, VC_ALPHA_QWEN_VL_UTILS, &in[i]));
    vc_vl_video_opts o = opts_of(entry);
    vc_vl_video_config vc;
    load_config(c, qwen3, &vc);
    CHECK_OK(vc_vl_fetch_frame_list(in, n, &o, vc.patch_size, name, &fr, &m));
    if (fr) check_frames(name, c, fr, m);
    vc_vl_pixels px = { 0 };
    if (fr) CHECK_OK(vc_vl_video_process(&vc, fr, m, name, &px));
    const cJSON *g = cJSON_GetObjectItem(c, "grid");
    CHECK_MSG(px.grid_t == cJSON_GetArrayItem(g, 0)->valueint && px.grid_h == cJSON_GetArrayItem(g, 1)->valueint &&
              px.grid_w == cJSON_GetArrayItem(g, 2)->valueint, "%s: grid %dx%dx%d", name, px.grid_t, px.grid_h,
              px.grid_w);
    char key[128];
    snprintf(key, sizeof key, "%s.pixels", name);
    const vc_st_tensor *t = vc_ckpt_find(CK, key);
    int step = (int)num(c, "pixel_row_step", 1), resized = fr && vc.do_resize;
    if (resized) {
        int h, w;
        CHECK_OK(vc_vl_video_resize_hw(&vc, m, fr[0].height, fr[0].width, &h, &w));
        resized = h != fr[0].height || w != fr[0].width;
    }
    double maxd = 0, tol = 0; /* bit for bit, the processor's float resize too */
    if (t && px.data && t->shape[1] == px.cols && (t->shape[0] - 1) * step < px.rows) {
        const float *a = t->data;
        for (int64_t r = 0; r < t->shape[0]; r++)
            for (int64_t k = 0; k < px.cols; k++) maxd = fmax(maxd, fabs(a[r * px.cols + k] - px.data[(r * step) * px.cols + k]));
    } else {
        maxd = INFINITY;
    }
    CHECK_MSG(maxd <= tol, "%s: pixel values %.3g from transformers' (bound %g)", name, maxd, tol);
    printf("%s: %d frames, grid %dx%dx%d, pixel values within %.2g of transformers'%s\n", name, m, px.grid_t,
           px.grid_h, px.grid_w, maxd, resized ? " (the processor resized)" : "");
    const cJSON *ts = cJSON_GetObjectItem(c, "timestamps");
    if (ts) {
        int64_t *idx = malloc(sizeof(int64_t) * (size_t)m);
        double got[64];
        for (int i = 0; i < m; i++) idx[i] = i; /* a frame list's indices; its fps the entry's raw_fps or 2 */
        double fps = num(entry, "raw_fps", num(entry, "sample_fps", 2.0));
        vc_vl_video_timestamps(idx, m, fps, got);
        for (int i = 0; i < cJSON_GetArraySize(ts) && i < 64; i++)
            CHECK_MSG(fabs(got[i] - cJSON_GetArrayItem(ts, i)->valuedouble) < 1e-12, "%s: timestamp %d %g", name, i,
                      got[i]);
        free(idx);
    }
    vc_vl_pixels_free(&px);
    for (int i = 0; i < n; i++) vc_image_free(&in[i]);
    for (int i = 0; i < m; i++) vc_image_free(&fr[i]);
    free(in), free(fr);
}

static void check_refusals(void) {
    vc_vl_video_config vc;
    vc_vl_video_config_default(&vc, 1);
    vc_image f[2] = { { .width = 64, .height = 64 }, { .width = 32, .height = 64 } };
    uint8_t px[64 * 64 * 3] = { 0 };
    f[0].rgb = f[1].rgb = px;
    vc_vl_pixels out;
    CHECK(vc_vl_video_process(&vc, f, 2, "v", &out) == VC_ERR_SHAPE && strstr(vc_last_error(), "frame 1 is 32x64"));
    CHECK(vc_vl_video_process(&vc, f, 1, "v", &out) == VC_ERR_ARG && strstr(vc_last_error(), "at least 2"));
    CHECK(vc_vl_video_process(&vc, f, 0, "v", &out) == VC_ERR_ARG);
    char dir[] = "/tmp/vc_video_badXXXXXX", path[300];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/video_preprocessor_config.json", dir);
    const char *bad[] = { "{\"video_processor_type\": \"LlavaOnevisionVideoProcessor\"}", "{\"patch_size\": 0}",
                          "{\"size\": 5}", "{\"image_std\": [1, 0, 1]}", "[1]" };
    const char *want[] = { "LlavaOnevisionVideoProcessor", "patch_size", "size", "image_std", "not a JSON object" };
    for (int i = 0; i < 5; i++) {
        FILE *fp = fopen(path, "w");
        fputs(bad[i], fp);
        fclose(fp);
        vc_status st = vc_vl_video_config_load(dir, 1, &vc);
        CHECK_MSG(st != VC_OK && strstr(vc_last_error(), want[i]) && strstr(vc_last_error(), "video_preprocessor"),
                  "config %s: %s", bad[i], st ? vc_last_error() : "accepted");
    }
    unlink(path), rmdir(dir);
}

/* one run of the processor's own sampling against numpy's indices (k of them) */
static void sample_case(const vc_vl_video_config *vc, int64_t n, const int64_t *want, int64_t k) {
    int64_t *idx = NULL, m = -1, bad = 0;
    CHECK_OK(vc_vl_video_processor_sample(vc, n, "v", &idx, &m));
    for (int64_t i = 0; idx && i < m && i < k; i++) bad += idx[i] != want[i];
    CHECK_MSG(m == k && bad == 0, "%lld frames (num_frames %lld, fps %g): %lld kept, %lld indices differ", (long long)n,
              (long long)vc->num_frames, vc->fps, (long long)m, (long long)bad);
    free(idx);
}

/* Qwen3VLVideoProcessor.sample_frames on frames without their metadata (verl's SFT path: taken for 24 per second):
 * int(n / 24 * 2) frames within [4, n], numpy's linspace rounded half to even (62: 30.5 -> 30); num_frames instead;
 * both refused; Qwen2VLVideoProcessor's refused; the config's keys read (null fps) and bad ones refused */
static void check_processor_sampling(void) {
    vc_vl_video_config vc;
    vc_vl_video_config_default(&vc, 1);
    sample_case(&vc, 62, (const int64_t[]){ 0, 15, 30, 46, 61 }, 5);
    sample_case(&vc, 100, (const int64_t[]){ 0, 14, 28, 42, 57, 71, 85, 99 }, 8);
    sample_case(&vc, 4, (const int64_t[]){ 0, 1, 2, 3 }, 4);
    sample_case(&vc, 2, (const int64_t[]){ 0, 1 }, 2);
    vc.fps = 0, vc.num_frames = 3;
    sample_case(&vc, 10, (const int64_t[]){ 0, 4, 9 }, 3);
    vc.num_frames = 0; /* neither: every frame, at least min_frames (repeating some) */
    sample_case(&vc, 3, (const int64_t[]){ 0, 1, 1, 2 }, 4);
    int64_t *idx = NULL, m = 0;
    vc.fps = 2, vc.num_frames = 3;
    CHECK(vc_vl_video_processor_sample(&vc, 10, "v", &idx, &m) == VC_ERR_ARG && strstr(vc_last_error(), "exclusive"));
    vc_vl_video_config_default(&vc, 0);
    sample_case(&vc, 7, (const int64_t[]){ 0, 1, 2, 3, 4, 5, 6 }, 7); /* (Qwen2-VL's: off by default) */
    vc.do_sample_frames = 1;
    CHECK(vc_vl_video_processor_sample(&vc, 10, "v", &idx, &m) == VC_ERR_UNSUPPORTED &&
          strstr(vc_last_error(), "do_sample_frames"));
    char dir[] = "/tmp/vc_video_sampXXXXXX", path[300];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/video_preprocessor_config.json", dir);
    const char *cfg[] = { "{\"fps\": null, \"num_frames\": 6, \"min_frames\": 2, \"max_frames\": 9}",
                          "{\"do_sample_frames\": false, \"fps\": 1.5}", "{\"fps\": -1}", "{\"max_frames\": 0}" };
    for (int i = 0; i < 4; i++) {
        FILE *fp = fopen(path, "w");
        fputs(cfg[i], fp);
        fclose(fp);
        vc_status st = vc_vl_video_config_load(dir, 1, &vc);
        if (i == 0) CHECK(!st && vc.fps == 0 && vc.num_frames == 6 && vc.min_frames == 2 && vc.max_frames == 9);
        if (i == 1) CHECK(!st && !vc.do_sample_frames && vc.fps == 1.5 && vc.num_frames == 0);
        if (i >= 2) CHECK_MSG(st && strstr(vc_last_error(), i == 2 ? "fps" : "max_frames"), "config %s: %s", cfg[i],
                              st ? vc_last_error() : "accepted");
    }
    unlink(path), rmdir(dir);
}

int main(void) {
    check_processor_sampling();
    CHECK_OK(vc_json_load_file(DIR "/reference.json", &REF));
    CHECK_OK(vc_ckpt_open(DIR "/reference.safetensors", &CK));
    if (!REF || !CK) return vc_test_done();
    check_sampling();
    for (const cJSON *c = cJSON_GetObjectItem(REF, "cases")->child; c; c = c->next) check_case(c);
    check_refusals();
    cJSON_Delete(REF);
    vc_ckpt_close(CK);
    return vc_test_done();
}
