/* libFuzzer harness for the image processors (not a CTest program; scripts/fuzz.sh builds and runs it): a
 * preprocessor_config.json loaded as a model directory's is (every family's processor: Qwen2-VL's, GLM-4V's,
 * Kimi-VL's and Kimi K2.5's, Gemma 3's and 4's, InternVL's, Mistral 3's, Llama 4's; either backend), then one
 * image through it and through verl's fetch_image path. Input: byte 0 and 1 the image's width and height (1 to
 * 256), byte 2 its pattern and the backend, the rest the JSON file. A config whose sizes would take an image
 * past about 16 M pixel values is left at the load (what a processor may legitimately ask for, not a finding). */
#include "../fuzz_util.h"
#include "verlc/image.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64], path[96];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_scratch("vlproc", "preprocessor_config.json", dir, sizeof dir, path, sizeof path);
    return 0;
}

/* 1 when the config's own sizes stay within about 16 M values an image (the loader bounds them by kind, not by
 * what this harness can afford under ASan) */
static int affordable(const vc_vl_image_config *c) {
    double px = (double)c->max_pixels, tile = (double)c->fixed_h * (double)c->fixed_w;
    double tiles = (double)(c->max_tiles > 0 ? c->max_tiles + 1 : 1), patch = (double)c->patch_size;
    if (c->llama4 || c->got) px = tile * tiles;
    if (c->gemma3) px = tile;
    if (c->pixtral) px = (double)c->fixed_h * (double)c->fixed_h;
    if (c->kimi) px = (double)c->in_token_limit * patch * patch;
    if (c->gemma4) px = (double)c->max_soft * (double)c->merge_size * (double)c->merge_size * patch * patch;
    return px * 3 * (c->temporal_patch_size > 0 ? c->temporal_patch_size : 1) <= 16e6 && c->min_pixels <= 4e6;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 4) return 0;
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data + 3, 1, size - 3, f);
    fclose(f);
    vc_vl_image_config c;
    if (vc_vl_image_config_load(dir, &c) || !affordable(&c)) return 0;
    c.tv = data[2] >> 7;
    vc_image img = { .width = 1 + data[0], .height = 1 + data[1], .mode = VC_IMG_RGB };
    img.rgb = malloc((size_t)img.width * (size_t)img.height * 3);
    if (!img.rgb) return 0;
    for (size_t k = 0; k < (size_t)img.width * (size_t)img.height * 3; k++) img.rgb[k] = (uint8_t)(k * (data[2] | 1));
    vc_vl_pixels px;
    if (!vc_vl_image_process(&c, &img, "fuzz", &px)) {
        (void)vc_vl_image_tokens(&px, c.merge_size);
        vc_vl_pixels_free(&px);
    }
    vc_vl_fetch_opts o = { 0 };
    if (!vc_vl_verl_image(&c, &img, &o, "fuzz", &px)) vc_vl_pixels_free(&px);
    free(img.rgb);
    return 0;
}
