/* GLM-4V's image processor (Glm4vImageProcessor: its smart_resize over two frames, its size bounds) behind
 * qwen_vl_utils' fetch_image, as verl runs it, against transformers 5.24 (tools/fixtures/make_glm4v_image_fixture.py):
 * smart_resize over a grid of sizes and bounds, preprocessor_config.json, and the pixel values of five images. */
#include "vc_test.h"
#include <stdlib.h>
#include "vision_helpers.h"
#include <math.h>

#define GLM_VIS VISION_DIR "/glm4v"

static void check_smart_resize(void) {
    cJSON *t = NULL;
    CHECK_OK(vc_json_load_file(GLM_VIS "/smart_resize.json", &t));
    int n = 0, bad = 0;
    for (const cJSON *r = t ? t->child : NULL; r; r = r->next, n++) {
        int64_t v[7];
        for (int i = 0; i < 7; i++) v[i] = (int64_t)cJSON_GetArrayItem(r, i)->valuedouble;
        int h = -1, w = -1;
        if (vc_glm4v_smart_resize(v[0], v[1], 2, (int)v[2], v[3], v[4], &h, &w) != VC_OK) h = w = -1;
        if (h != v[5] || w != v[6]) {
            if (bad++ < 5)
                fprintf(stderr, "glm4v smart_resize(%lld, %lld, %lld, %lld, %lld) = %d x %d, Python %lld x %lld\n",
                        (long long)v[0], (long long)v[1], (long long)v[2], (long long)v[3], (long long)v[4], h, w,
                        (long long)v[5], (long long)v[6]);
        }
    }
    CHECK_MSG(n > 1000 && bad == 0, "%d of %d GLM-4V smart_resize rows differ from Python", bad, n);
    printf("glm4v smart_resize: %d rows as Python\n", n);
    cJSON_Delete(t);
}

/* fetch_image, then the processor (the fixture's config, and with small bounds), pixel values and grids as
 * transformers' Glm4vImageProcessorPil */
static void check_pixels(void) {
    vc_vl_image_config cfg;
    CHECK_OK(vc_vl_image_config_load(GLM_VIS, &cfg));
    CHECK(cfg.glm && cfg.min_pixels == 12544 && cfg.max_pixels == 9633792 && cfg.temporal_patch_size == 2);
    cJSON *ref = NULL;
    vc_checkpoint *ck = NULL;
    CHECK_OK(vc_json_load_file(GLM_VIS "/reference.json", &ref));
    CHECK_OK(vc_ckpt_open(GLM_VIS "/reference.safetensors", &ck));
    if (!ref || !ck) return;
    const cJSON *small = cJSON_GetObjectItem(ref, "small_size");
    int n = 0;
    double worst = 0;
    for (int pass = 0; pass < 2; pass++) {
        vc_vl_image_config c = cfg;
        if (pass) {
            c.min_pixels = (int64_t)cJSON_GetObjectItem(small, "shortest_edge")->valuedouble;
            c.max_pixels = (int64_t)cJSON_GetObjectItem(small, "longest_edge")->valuedouble;
        }
        int i = 0;
        for (const cJSON *s = cJSON_GetObjectItem(ref, "images")->child; s; s = s->next, i++, n++) {
            vc_image img;
            vc_vl_pixels px;
            char key[64];
            CHECK_OK(vc_image_load(img_path(s->valuestring), VC_ALPHA_QWEN_VL_UTILS, &img));
            CHECK_OK(vc_vl_verl_image(&c, &img, NULL, s->valuestring, &px));
            snprintf(key, sizeof key, "%d%s.grid", i, pass ? ".small" : "");
            const vc_st_tensor *g = vc_ckpt_find(ck, key);
            snprintf(key, sizeof key, "%d%s.pixels", i, pass ? ".small" : "");
            const vc_st_tensor *p = vc_ckpt_find(ck, key);
            const int64_t *gv = g ? g->data : NULL;
            /* the reference keeps frame 0 of each row's (channel, frame, patch) values: an image is its own later
             * frames, so every frame is compared with it */
            int T = c.temporal_patch_size;
            int same = g && p && T > 0 && gv[0] == px.grid_t && gv[1] == px.grid_h && gv[2] == px.grid_w &&
                       p->shape[0] == px.rows && p->shape[1] * T == px.cols;
            CHECK_MSG(same, "%s: grid %d x %d x %d, transformers %lld x %lld x %lld", key, px.grid_t, px.grid_h,
                      px.grid_w, gv ? (long long)gv[0] : -1LL, gv ? (long long)gv[1] : -1LL,
                      gv ? (long long)gv[2] : -1LL);
            int64_t plane = same ? px.cols / (3 * T) : 0; /* values per (channel, frame) */
            for (int64_t k = 0; same && k < px.rows * px.cols; k++) {
                int64_t r = k / px.cols, j = k % px.cols, ch = j / (T * plane), q = j % plane;
                float want = ((const float *)p->data)[r * p->shape[1] + ch * plane + q];
                worst = fmax(worst, fabs((double)px.data[k] - (double)want));
            }
            vc_vl_pixels_free(&px);
            vc_image_free(&img);
        }
    }
    printf("glm4v processor: %d images through fetch_image and Glm4vImageProcessor, max pixel difference %g\n", n,
           worst);
    CHECK_MSG(n == 10 && worst <= 1e-6, "GLM-4V pixel values differ from transformers by %g", worst);
    vc_ckpt_close(ck);
    cJSON_Delete(ref);
}

int main(void) {
    setenv("VERLC_IMAGE_BACKEND", "pil", 1); /* (the references are the PIL backend's; tests/vision/test_tv_proc.c
                                              * checks the torchvision one, the default) */
    check_smart_resize();
    check_pixels();
    return vc_test_done();
}
