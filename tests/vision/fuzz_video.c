/* libFuzzer harness for video decoding through FFmpeg (not a CTest program; scripts/fuzz.sh builds and runs it).
 * Input: a whole file, opened as a video; where it opens, its first, middle and last frames (and the first again) are
 * decoded. The container and codec parsing is FFmpeg's; what this exercises is verlc's use of it (metadata from the
 * packets, seeking, conversion, rotation). */
#include "verlc/video.h"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/vc_fuzz_video_%d.bin", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    vc_video *v = NULL;
    if (!vc_video_open(path, &v)) {
        const int64_t n = vc_video_info(v)->frames;
        int64_t idx[4] = { 0, n / 2, n - 1, 0 };
        vc_image img[4];
        if (n > 0 && !vc_video_frames(v, idx, 4, img))
            for (int i = 0; i < 4; i++) vc_image_free(&img[i]);
        vc_video_close(v);
    }
    unlink(path);
    return 0;
}
