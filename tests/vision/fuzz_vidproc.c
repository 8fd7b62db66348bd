/* libFuzzer harness for the video processors and qwen_vl_utils' frame sampling (not a CTest program;
 * scripts/fuzz.sh builds and runs it): a video_preprocessor_config.json loaded as a model directory's is
 * (Qwen2-VL's or Qwen3-VL's processor), the processor's own frame sampling, then a few frames through it; and
 * fetch_video's sampling of a video entry's keys. Input: bytes 0-1 the frames' width and height (1 to 64), byte 2
 * the processor (bit 0: Qwen3-VL's) and the pattern, byte 3 the frame count (1 to 8), bytes 4-11 a video entry's
 * keys (fps, nframes, min / max frames, video_start / video_end, the video's frames and rate), the rest the JSON
 * file. A config whose sizes would take the frames past about 16 M values is left at the load. */
#include "../fuzz_util.h"
#include "verlc/image.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64], path[96];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_scratch("vidproc", "video_preprocessor_config.json", dir, sizeof dir, path, sizeof path);
    return 0;
}

/* fetch_video's sampling of a video entry whose keys the bytes k give, over a video of total frames at fps */
static void entry_sampling(const uint8_t *k) {
    vc_vl_video_opts o = { 0 };
    o.has_fps = k[0] & 1, o.fps = k[0] / 16.0;
    o.nframes = k[1] & 1 ? k[1] >> 1 : 0;
    o.min_frames = k[2] & 15, o.max_frames = k[2] >> 4 ? (k[2] >> 4) * 8 : 0;
    o.has_start = k[3] & 1, o.video_start = (k[3] >> 1) / 8.0;
    o.has_end = k[4] & 1, o.video_end = (k[4] >> 1) / 4.0;
    int64_t total = k[5] * 4, *idx = NULL, n = 0, count = 0;
    double fps = k[6] / 4.0;
    if (!vc_vl_video_sample(&o, total, fps, &idx, &n, &count)) {
        double *ts = malloc(sizeof(double) * (size_t)(n / 2 + 1));
        if (ts) vc_vl_video_timestamps(idx, n, fps > 0 ? fps : 1, ts);
        free(ts);
        free(idx);
    }
    int oh, ow;
    o.min_pixels = k[7] & 1 ? (int64_t)k[7] * 784 : 0, o.max_pixels = k[7] & 2 ? (int64_t)k[6] * 3136 : 0;
    (void)vc_vl_fetch_video_hw(&o, 14, n > 0 ? n : 2, 1 + k[5], 1 + k[6], &oh, &ow);
}

static int affordable(const vc_vl_video_config *c, int n) {
    return (double)c->max_pixels * 3 * (double)(n + c->temporal_patch_size) <= 16e6 && c->min_pixels <= 1e6;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 13) return 0;
    entry_sampling(data + 4);
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data + 12, 1, size - 12, f);
    fclose(f);
    vc_vl_video_config c;
    int n = 1 + data[3] % 8;
    if (vc_vl_video_config_load(dir, data[2] & 1, &c) || !affordable(&c, n)) return 0;
    int64_t *idx = NULL, m = 0;
    if (!vc_vl_video_processor_sample(&c, 4 * data[3], "fuzz", &idx, &m)) free(idx);
    vc_image frames[8];
    int w = 1 + data[0] % 64, h = 1 + data[1] % 64, made = 0;
    for (; made < n; made++) {
        frames[made] = (vc_image){ .width = w, .height = h, .mode = VC_IMG_RGB };
        if (!(frames[made].rgb = malloc((size_t)w * (size_t)h * 3))) break;
        for (size_t k = 0; k < (size_t)w * (size_t)h * 3; k++) frames[made].rgb[k] = (uint8_t)(k * (data[2] | 1) + made);
    }
    vc_vl_pixels px;
    if (made == n && !vc_vl_video_process(&c, frames, n, "fuzz", &px)) vc_vl_pixels_free(&px);
    for (int i = 0; i < made; i++) free(frames[i].rgb);
    return 0;
}
