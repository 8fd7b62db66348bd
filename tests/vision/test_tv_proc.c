/* The image processors on transformers' torchvision backend (VERLC_IMAGE_BACKEND=torchvision, or an
 * image_processor_type ending in Fast: the classes transformers 5 picks where torchvision is installed): Qwen2-VL,
 * GLM-4V, Gemma 3, InternVL's GOT-OCR2 tiles, Gemma 4 and Pixtral behind qwen_vl_utils' fetch_image against
 * transformers 5.25's (tools/fixtures/make_tv_proc_fixture.py), and the backend's selection. */
#include "vc_test.h"
#include "vision_helpers.h"
#include <math.h>
#include <stdlib.h>

/* family's images at its fixture folder's config on the torchvision backend: the worst difference; *n the images */
static double family(const cJSON *ref, const vc_checkpoint *ck, const char *fam, const char *folder, int *n) {
    char dir[256];
    snprintf(dir, sizeof dir, "%s/%s", VISION_DIR, folder);
    vc_vl_image_config c;
    CHECK_OK(vc_vl_image_config_load(dir, &c));
    c.tv = 1; /* (InternVL's and Mistral 3's configs name Fast classes: already 1) */
    double worst = 0;
    int i = 0;
    for (const cJSON *s = cJSON_GetObjectItem(ref, "images")->child; s; s = s->next, i++, (*n)++) {
        char name[64];
        snprintf(name, sizeof name, "%s.%d", fam, i);
        vc_vl_pixels px;
        const vc_st_tensor *p;
        verl_pixels_ref(&c, ck, s->valuestring, name, "none", &px, &p);
        int same = p && p->shape[0] == px.rows && p->shape[1] == px.cols;
        CHECK_MSG(same, "%s: %lld x %lld values, transformers %lld x %lld", name, (long long)px.rows, (long long)px.cols,
                  p ? (long long)p->shape[0] : -1LL, p ? (long long)p->shape[1] : -1LL);
        double d = pixels_diff(&px, p, same);
        CHECK_MSG(d == 0, "%s: the torchvision backend's pixels differ from transformers' by %g", name, d);
        worst = fmax(worst, d);
    }
    return worst;
}

static void backends(void) {
    cJSON *ref = NULL;
    vc_checkpoint *ck = NULL;
    CHECK_OK(vc_json_load_file(VISION_DIR "/tv_proc/reference.json", &ref));
    CHECK_OK(vc_ckpt_open(VISION_DIR "/tv_proc/reference.safetensors", &ck));
    int n = 0;
    double worst = 0;
    for (const cJSON *f = ref && ck ? cJSON_GetObjectItem(ref, "families")->child : NULL; f; f = f->next)
        worst = fmax(worst, family(ref, ck, f->string, f->valuestring, &n));
    printf("torchvision backend: %d images over 6 families, max pixel difference %g\n", n, worst);
    CHECK(n == 12 && worst == 0);
    vc_ckpt_close(ck);
    cJSON_Delete(ref);
}

/* VERLC_IMAGE_BACKEND picks the backend, a Fast class name the torchvision one; a bad value is refused by name;
 * Llama 4's processor is torchvision's whatever it says */
static void selection(void) {
    vc_vl_image_config c;
    setenv("VERLC_IMAGE_BACKEND", "torchvision", 1);
    CHECK_OK(vc_vl_image_config_load(VISION_DIR "/gemma3", &c));
    CHECK(c.tv);
    setenv("VERLC_IMAGE_BACKEND", "pil", 1);
    CHECK_OK(vc_vl_image_config_load(VISION_DIR "/llama4", &c));
    CHECK(c.tv && c.llama4);
    CHECK_OK(vc_vl_image_config_load(VISION_DIR "/gemma3", &c));
    CHECK(!c.tv);
    setenv("VERLC_IMAGE_BACKEND", "opencv", 1);
    CHECK(vc_vl_image_config_load(VISION_DIR "/gemma3", &c) && strstr(vc_last_error(), "VERLC_IMAGE_BACKEND=opencv"));
    unsetenv("VERLC_IMAGE_BACKEND");
    char path[128];
    snprintf(path, sizeof path, "/tmp/verlc_tvsel_%d.json", (int)getpid());
    const char *text = "{\"image_processor_type\": \"Qwen2VLImageProcessorFast\"}";
    CHECK_OK(vc_write_file_atomic(path, text, strlen(text)));
    CHECK_OK(vc_vl_image_config_load(path, &c));
    CHECK(c.tv);
    remove(path);
}

int main(void) {
    unsetenv("VERLC_IMAGE_BACKEND");
    backends();
    selection();
    return vc_test_done();
}
