/* Video inputs in a build without FFmpeg's libraries (CMake found no libavformat/libavcodec/libavutil/libswscale:
 * scripts/deps.sh installs them): every video is refused with a line naming the file and the missing libraries.
 * CMake compiles this file instead of video.c. */
#include "verlc/video.h"

vc_status vc_video_open(const char *path, vc_video **out) {
    *out = NULL;
    return vc_fail(VC_ERR_UNSUPPORTED, "%s: video inputs need FFmpeg (libavformat, libavcodec, libswscale), which "
                   "this build of verlc was made without (scripts/deps.sh installs them; then rebuild)", path);
}

const vc_video_meta *vc_video_info(const vc_video *v) {
    (void)v;
    return NULL;
}

vc_status vc_video_frames(vc_video *v, const int64_t *idx, int n, vc_image *out) {
    (void)v, (void)idx, (void)n, (void)out;
    return vc_fail(VC_ERR_UNSUPPORTED, "video frames: this build of verlc has no FFmpeg");
}

void vc_video_close(vc_video *v) { (void)v; }
