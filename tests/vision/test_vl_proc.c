/* Pillow's BICUBIC resize, smart_resize, preprocessor_config.json and the Qwen2-VL image processor against
 * tests/fixtures/vision (tools/fixtures/make_image_fixture.py: Pillow 13, transformers 5.24 Qwen2VLImageProcessorPil,
 * qwen-vl-utils 0.0.14). Resizes must equal Pillow's bytes; pixel values must be within 1e-6 of transformers'
 * (the bound asked of them: |values| < 3, so 1e-6 is a few float32 ulps), and are in fact checked bit for bit too,
 * as verlc computes each one with transformers' own float64 rescale and float32 normalize in the same order. */
#include <sys/stat.h>
#include <unistd.h>
#include "vc_test.h"
#include <stdlib.h>
#include "vision_helpers.h"

static cJSON *REF;
static vc_checkpoint *CK;

static void check_resizes(void) {
    int n = 0;
    for (const cJSON *c = cJSON_GetObjectItem(REF, "resize")->child; c; c = c->next, n++) {
        const char *src = cJSON_GetObjectItem(c, "src")->valuestring;
        int w = cJSON_GetObjectItem(c, "width")->valueint, h = cJSON_GetObjectItem(c, "height")->valueint;
        vc_image in, out;
        CHECK_OK(vc_image_load(img_path(src), VC_ALPHA_QWEN_VL_UTILS, &in));
        CHECK_OK(vc_image_resize_bicubic(&in, w, h, &out));
        char key[64];
        snprintf(key, sizeof key, "resize.%d", n);
        int maxd = 0;
        long bad = out.rgb ? cmp_u8_image(CK, key, &out, &maxd) : -1;
        CHECK_MSG(bad == 0, "%s (%s %dx%d -> %dx%d): %ld bytes differ from Pillow's, by up to %d", key, src,
                  in.width, in.height, w, h, bad, maxd);
        vc_image_free(&in), vc_image_free(&out);
    }
    printf("%d BICUBIC resizes equal to Pillow's bytes\n", n);
    vc_image in = { 0 }, out;
    CHECK(vc_image_resize_bicubic(&in, 0, 5, &out) == VC_ERR_ARG);
}

/* torchvision's antialiased resize (vc_image_resize_tv) against torch's bytes (tools/fixtures/make_tv_resize_fixture.py):
 * both filters, up and down, an axis unchanged, a height shrinking far more than the width */
static void check_tv_resizes(void) {
    cJSON *ref = NULL;
    vc_checkpoint *ck = NULL;
    CHECK_OK(vc_json_load_file(vis_path("tv_resize/reference.json"), &ref));
    CHECK_OK(vc_ckpt_open(vis_path("tv_resize/reference.safetensors"), &ck));
    int n = 0;
    for (const cJSON *c = ref && ck ? cJSON_GetObjectItem(ref, "resizes")->child : NULL; c; c = c->next, n++) {
        const char *src = cJSON_GetObjectItem(c, "src")->valuestring;
        int w = cJSON_GetObjectItem(c, "width")->valueint, h = cJSON_GetObjectItem(c, "height")->valueint;
        int f = cJSON_GetObjectItem(c, "filter")->valueint, maxd = 0;
        vc_image in, out;
        CHECK_OK(vc_image_load(img_path(src), VC_ALPHA_QWEN_VL_UTILS, &in));
        CHECK_OK(vc_image_resize_tv(&in, w, h, f, &out));
        char key[64];
        snprintf(key, sizeof key, "tv.%d", n);
        long bad = out.rgb ? cmp_u8_image(ck, key, &out, &maxd) : -1;
        CHECK_MSG(bad == 0, "%s (%s %dx%d -> %dx%d, filter %d): %ld bytes differ from torchvision's, by up to %d", key,
                  src, in.width, in.height, w, h, f, bad, maxd);
        vc_image_free(&in), vc_image_free(&out);
    }
    printf("%d antialiased resizes equal to torchvision's bytes\n", n);
    CHECK(n == 8);
    cJSON_Delete(ref);
    vc_ckpt_close(ck);
}

static void check_smart_resize(void) {
    cJSON *t = NULL;
    CHECK_OK(vc_json_load_file(vis_path("smart_resize.json"), &t));
    int n = 0, bad = 0, differ = 0;
    for (const cJSON *r = t ? t->child : NULL; r; r = r->next, n++) {
        int64_t v[9];
        for (int i = 0; i < 9; i++) v[i] = (int64_t)cJSON_GetArrayItem(r, i)->valuedouble;
        for (int impl = 0; impl < 2; impl++) {
            int h = -1, w = -1;
            vc_status st = impl ? vc_qwen_vl_utils_smart_resize(v[0], v[1], (int)v[2], v[3], v[4], &h, &w)
                                : vc_vl_smart_resize(v[0], v[1], (int)v[2], v[3], v[4], &h, &w);
            if (st != VC_OK) h = w = -1;
            /* qwen_vl_utils' 0-sided results: Pillow refuses to resize to them; verlc refuses them here */
            int64_t eh = v[5 + 2 * impl], ew = v[6 + 2 * impl];
            if (eh == 0 || ew == 0) eh = ew = -1;
            if (h != eh || w != ew) {
                if (bad++ < 5)
                    fprintf(stderr, "%s smart_resize(%lld, %lld, %lld, %lld, %lld) = %d x %d, Python %lld x %lld\n",
                            impl ? "qwen_vl_utils" : "transformers", (long long)v[0], (long long)v[1],
                            (long long)v[2], (long long)v[3], (long long)v[4], h, w, (long long)eh, (long long)ew);
            }
        }
        differ += v[5] != v[7] || v[6] != v[8];
    }
    CHECK_MSG(n > 1000 && bad == 0, "%d of %d smart_resize rows differ from Python", bad, n);
    printf("smart_resize: %d rows, both implementations as Python (they disagree with each other on %d)\n", n, differ);
    cJSON_Delete(t);
    int h, w;
    CHECK(vc_vl_smart_resize(10, 2500, 28, 3136, 1003520, &h, &w) == VC_ERR_ARG);
    CHECK(strstr(vc_last_error(), "aspect ratio") != NULL);
    CHECK(vc_qwen_vl_utils_smart_resize(300, 5, 28, 3136, 7840, &h, &w) == VC_ERR_ARG);
}

/* preprocessor configs as transformers resolves them */
static void check_configs(void) {
    int n = 0;
    for (const cJSON *c = cJSON_GetObjectItem(REF, "configs")->child; c; c = c->next, n++) {
        char dir[512];
        snprintf(dir, sizeof dir, VISION_DIR "/configs/%s", c->string);
        vc_vl_image_config cfg;
        CHECK_OK(vc_vl_image_config_load(dir, &cfg));
#define GETI(k) ((int64_t)cJSON_GetObjectItem(c, k)->valuedouble)
        CHECK_MSG(cfg.min_pixels == GETI("min_pixels") && cfg.max_pixels == GETI("max_pixels"), "%s: %lld %lld",
                  c->string, (long long)cfg.min_pixels, (long long)cfg.max_pixels);
        CHECK(cfg.patch_size == GETI("patch_size") && cfg.temporal_patch_size == GETI("temporal_patch_size"));
        CHECK(cfg.merge_size == GETI("merge_size"));
        for (int i = 0; i < 3; i++) {
            CHECK(cfg.image_mean[i] == cJSON_GetArrayItem(cJSON_GetObjectItem(c, "image_mean"), i)->valuedouble);
            CHECK(cfg.image_std[i] == cJSON_GetArrayItem(cJSON_GetObjectItem(c, "image_std"), i)->valuedouble);
        }
        CHECK(cfg.rescale_factor == cJSON_GetObjectItem(c, "rescale_factor")->valuedouble);
        CHECK(cfg.do_resize == cJSON_IsTrue(cJSON_GetObjectItem(c, "do_resize")));
        CHECK(cfg.do_rescale == cJSON_IsTrue(cJSON_GetObjectItem(c, "do_rescale")));
        CHECK(cfg.do_normalize == cJSON_IsTrue(cJSON_GetObjectItem(c, "do_normalize")));
        CHECK(cfg.do_convert_rgb == cJSON_IsTrue(cJSON_GetObjectItem(c, "do_convert_rgb")));
#undef GETI
    }
    CHECK(n == 5);
    /* bad values: refused naming the key and the file */
    static const struct { const char *json, *key; } BAD[] = {
        { "{\"patch_size\": 0}", "patch_size" },
        { "{\"merge_size\": -2}", "merge_size" },
        { "{\"temporal_patch_size\": 1.5}", "temporal_patch_size" },
        { "{\"image_mean\": [0.5, 0.5]}", "image_mean" },
        { "{\"image_std\": [0.5, 0, 0.5]}", "image_std" },
        { "{\"min_pixels\": 0}", "min_pixels" },
        { "{\"size\": {\"shortest_edge\": 100, \"longest_edge\": -1}}", "longest_edge" },
        { "{\"size\": {\"shortest_edge\": 100}}", "longest_edge" },
        { "{\"size\": {\"height\": 224, \"width\": 224}}", "shortest_edge" },
        { "{\"resample\": 2}", "resample" },
        { "{\"do_resize\": \"yes\"}", "do_resize" },
        { "{\"rescale_factor\": -1}", "rescale_factor" },
        { "{\"image_processor_type\": \"SiglipImageProcessor\"}", "SiglipImageProcessor" },
        { "[1, 2]", "not a JSON object" },
    };
    char tmpl[] = "/tmp/verlc_vision_XXXXXX";
    char *d = mkdtemp(tmpl);
    CHECK(d != NULL);
    if (!d) return;
    char file[600];
    snprintf(file, sizeof file, "%s/preprocessor_config.json", d);
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        FILE *f = fopen(file, "w");
        fputs(BAD[i].json, f);
        fclose(f);
        vc_vl_image_config cfg;
        vc_status st = vc_vl_image_config_load(d, &cfg);
        CHECK_MSG(st != VC_OK && strstr(vc_last_error(), BAD[i].key) && strstr(vc_last_error(), file),
                  "%s: status %d, '%s'", BAD[i].json, st, vc_last_error());
    }
    unlink(file);
    rmdir(d);
}

/* Compares a processor output with KEY.levels / .table / .grid (the fixture's lossless form of transformers'
 * pixel_values: value[r][j] = table[j / (T * P * P)][levels[r][j]]) */
static void cmp_pixels(const char *key, const vc_vl_pixels *px, const vc_vl_image_config *cfg) {
    char k[128];
    snprintf(k, sizeof k, "%s.levels", key);
    const vc_st_tensor *lv = vc_ckpt_find(CK, k);
    snprintf(k, sizeof k, "%s.table", key);
    const vc_st_tensor *tb = vc_ckpt_find(CK, k);
    snprintf(k, sizeof k, "%s.grid", key);
    const vc_st_tensor *gr = vc_ckpt_find(CK, k);
    CHECK(lv && tb && gr);
    if (!lv || !tb || !gr) return;
    int64_t g[3];
    memcpy(g, gr->data, sizeof g);
    CHECK_MSG(g[0] == px->grid_t && g[1] == px->grid_h && g[2] == px->grid_w, "%s: grid %d %d %d, transformers' "
              "%lld %lld %lld", key, px->grid_t, px->grid_h, px->grid_w, (long long)g[0], (long long)g[1],
              (long long)g[2]);
    CHECK_MSG(lv->shape[0] == px->rows && lv->shape[1] == px->cols, "%s: %lld x %lld, transformers' %lld x %lld",
              key, (long long)px->rows, (long long)px->cols, (long long)lv->shape[0], (long long)lv->shape[1]);
    if (lv->shape[0] != px->rows || lv->shape[1] != px->cols) return;
    float table[3 * 256];
    memcpy(table, tb->data, sizeof table);
    const uint8_t *levels = lv->data;
    int64_t span = (int64_t)cfg->temporal_patch_size * cfg->patch_size * cfg->patch_size, inexact = 0;
    double worst = 0;
    for (int64_t r = 0; r < px->rows; r++)
        for (int64_t j = 0; j < px->cols; j++) {
            float want = table[(j / span) * 256 + levels[r * px->cols + j]], got = px->data[r * px->cols + j];
            double d = fabs((double)want - got);
            if (d > worst || isnan(got)) worst = isnan(got) ? INFINITY : d;
            inexact += memcmp(&want, &got, sizeof got) != 0;
        }
    CHECK_MSG(worst <= 1e-6, "%s: pixel values differ from transformers' by up to %g", key, worst);
    CHECK_MSG(inexact == 0, "%s: %lld of %lld pixel values not bit-identical to transformers'", key,
              (long long)inexact, (long long)(px->rows * px->cols));
}

/* a case's config: the defaults under the case's keys, through a preprocessor_config.json (the loader's path) */
static vc_status case_config(const cJSON *cfg, vc_vl_image_config *out) {
    char tmpl[] = "/tmp/verlc_vision_XXXXXX";
    char *d = mkdtemp(tmpl), file[600];
    if (!d) return vc_fail(VC_ERR_IO, "mkdtemp");
    snprintf(file, sizeof file, "%s/preprocessor_config.json", d);
    char *text = cJSON_Print(cfg);
    vc_status st = vc_write_file_atomic(file, text, strlen(text));
    if (st == VC_OK) st = vc_vl_image_config_load(d, out);
    free(text);
    unlink(file);
    rmdir(d);
    return st;
}

static void check_processor(void) {
    int n = 0;
    for (const cJSON *c = cJSON_GetObjectItem(REF, "proc")->child; c; c = c->next, n++) {
        const char *src = cJSON_GetObjectItem(c, "src")->valuestring;
        vc_vl_image_config cfg;
        CHECK_OK(case_config(cJSON_GetObjectItem(c, "config"), &cfg));
        vc_image img;
        CHECK_OK(vc_image_load(img_path(src), VC_ALPHA_TRANSFORMERS, &img));
        vc_vl_pixels px;
        CHECK_OK(vc_vl_image_process(&cfg, &img, src, &px));
        char key[32];
        snprintf(key, sizeof key, "proc.%d", n);
        if (px.data) cmp_pixels(key, &px, &cfg);
        CHECK(vc_vl_image_tokens(&px, cfg.merge_size) * cfg.merge_size * cfg.merge_size == px.rows);
        vc_vl_pixels_free(&px);
        vc_image_free(&img);
    }
    printf("%d processor cases: pixel values and grids as transformers'\n", n);
    /* tokens: Qwen2.5-VL's 28-pixel merged patches */
    vc_vl_pixels p = { .grid_t = 1, .grid_h = 6, .grid_w = 4 };
    CHECK(vc_vl_image_tokens(&p, 2) == 6);
    /* do_resize false needs sides that are multiples of patch * merge; do_convert_rgb false an RGB file */
    vc_vl_image_config cfg;
    vc_vl_image_config_default(&cfg);
    cfg.do_resize = 0;
    vc_image img;
    CHECK_OK(vc_image_load(img_path("rgb_37x53.png"), VC_ALPHA_TRANSFORMERS, &img));
    CHECK(vc_vl_image_process(&cfg, &img, "odd.png", &p) == VC_ERR_SHAPE && strstr(vc_last_error(), "odd.png"));
    vc_image_free(&img);
    vc_vl_image_config_default(&cfg);
    cfg.do_convert_rgb = 0;
    CHECK_OK(vc_image_load(img_path("la_30x20.png"), VC_ALPHA_TRANSFORMERS, &img));
    CHECK(vc_vl_image_process(&cfg, &img, "la.png", &p) == VC_ERR_UNSUPPORTED && strstr(vc_last_error(), "LA"));
    vc_image_free(&img);
}

/* qwen_vl_utils.fetch_image, then verl's whole path (fetch_image, then the processor) */
static void check_fetch(void) {
    int n = 0, verl = 0;
    for (const cJSON *c = cJSON_GetObjectItem(REF, "fetch")->child; c; c = c->next, n++) {
        const char *src = cJSON_GetObjectItem(c, "src")->valuestring;
        const cJSON *ele = cJSON_GetObjectItem(c, "ele");
        vc_vl_fetch_opts o = { .patch_size = cJSON_GetObjectItem(c, "patch_size")->valueint };
        const cJSON *v;
        if ((v = cJSON_GetObjectItem(ele, "min_pixels"))) o.min_pixels = (int64_t)v->valuedouble;
        if ((v = cJSON_GetObjectItem(ele, "max_pixels"))) o.max_pixels = (int64_t)v->valuedouble;
        if ((v = cJSON_GetObjectItem(ele, "resized_height"))) o.resized_h = v->valueint;
        if ((v = cJSON_GetObjectItem(ele, "resized_width"))) o.resized_w = v->valueint;
        vc_image img, out;
        CHECK_OK(vc_image_load(img_path(src), VC_ALPHA_QWEN_VL_UTILS, &img));
        vc_status st = vc_vl_fetch_image(&img, &o, src, &out);
        if (cJSON_IsTrue(cJSON_GetObjectItem(c, "error"))) {
            CHECK_MSG(st != VC_OK && strstr(vc_last_error(), src), "fetch.%d: %s", n, vc_last_error());
            vc_image_free(&img);
            continue;
        }
        CHECK_OK(st);
        char key[32];
        snprintf(key, sizeof key, "fetch.%d", n);
        int maxd = 0;
        long bad = out.rgb ? cmp_u8_image(CK, key, &out, &maxd) : -1;
        CHECK_MSG(bad == 0, "%s: %ld bytes differ from qwen_vl_utils', by up to %d", key, bad, maxd);
        /* verl's path */
        for (const cJSON *vr = cJSON_GetObjectItem(REF, "verl")->child; vr; vr = vr->next) {
            if (cJSON_GetObjectItem(vr, "fetch")->valueint != n) continue;
            vc_vl_image_config cfg;
            CHECK_OK(case_config(cJSON_GetObjectItem(vr, "config"), &cfg));
            vc_vl_pixels px;
            CHECK_OK(vc_vl_verl_image(&cfg, &img, &o, src, &px));
            snprintf(key, sizeof key, "verl.%d", n);
            if (px.data) cmp_pixels(key, &px, &cfg);
            vc_vl_pixels_free(&px);
            verl++;
        }
        vc_image_free(&out);
        vc_image_free(&img);
    }
    printf("%d fetch_image cases, %d through verl's whole path: as qwen_vl_utils and transformers\n", n, verl);
    CHECK(verl >= 5);
}

int main(void) {
    setenv("VERLC_IMAGE_BACKEND", "pil", 1); /* (the references are the PIL backend's; tests/vision/test_tv_proc.c
                                              * checks the torchvision one, the default) */
    CHECK_OK(vc_json_load_file(vis_path("reference.json"), &REF));
    CHECK_OK(vc_ckpt_open(vis_path("reference.safetensors"), &CK));
    if (REF && CK) {
        check_resizes();
        check_tv_resizes();
        check_smart_resize();
        check_configs();
        check_processor();
        check_fetch();
    }
    cJSON_Delete(REF);
    vc_ckpt_close(CK);
    return vc_test_done();
}
