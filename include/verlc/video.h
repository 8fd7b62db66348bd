/* Video decoding for the video inputs of vision-language models, as verl reads videos: through qwen_vl_utils'
 * default backend, torchcodec (qwen_vl_utils 0.0.14 _read_video_torchcodec: VideoDecoder(path), its
 * metadata.num_frames and metadata.average_fps, get_frames_at(indices).data), on the system's FFmpeg libraries
 * (libavformat, libavcodec, libswscale). Frames come out as torchcodec 0.17 gives them on the same FFmpeg: the same
 * swscale conversion to RGB24 (its flags, the frame's colour matrix and range) and the stream's display-matrix
 * rotation, bit for bit (tests/vision/test_video.c, tools/fixtures/make_video_fixture.py). */
#ifndef VERLC_VIDEO_H
#define VERLC_VIDEO_H
#include <stdint.h>
#include "verlc/core.h"
#include "verlc/image.h"

/* packets of the video stream counted at open beyond this are refused (a 24-hour 120 fps video has 10.4M) */
#define VC_VIDEO_MAX_FRAMES (1LL << 24)

typedef struct vc_video vc_video;

typedef struct vc_video_meta {
    int64_t frames; /* torchcodec's metadata.num_frames in its default "exact" seek mode: the stream's packets */
    /* metadata.average_fps: frames / (max(pts + duration) - min(pts)) over the packets, in seconds; the header's
     * r_frame_rate when that span is 0; 0 when neither is known */
    double fps;
    int width, height; /* of the frames returned: the stream's size, swapped by a 90-degree rotation */
    int rotation;      /* the display matrix's rotation rounded to 90 degrees (counter-clockwise): 0, 90, -90, 180 */
} vc_video_meta;

/* Opens and probes path (FFmpeg's demuxers; only the file protocol), picks the best video stream as
 * av_find_best_stream does, scans its packets for the metadata, and opens its decoder. A missing file is
 * VC_ERR_IO; a file FFmpeg cannot read, one without a decodable video stream or without frames, a still image
 * (FFmpeg's image2 / *_pipe demuxers: torchcodec opens one as a 1-frame video, which qwen_vl_utils then refuses), a
 * frame size over VC_IMAGE_MAX_PIXELS or an unreadable packet stream is one VC_ERR_FORMAT line naming the path.
 * Frames are decoded as FFmpeg decodes them: a stream that its decoder conceals errors in gives the concealed
 * frames (as torchcodec does); one it cannot decode gives VC_ERR_FORMAT at vc_video_frames. FFmpeg's own logging
 * is silenced (av_log_set_level(AV_LOG_QUIET), process-wide). The decoder uses $TORCHCODEC_NUM_THREADS threads
 * (qwen_vl_utils' knob; 8 when unset), which changes no pixel. */
vc_status vc_video_open(const char *path, vc_video **out);
const vc_video_meta *vc_video_info(const vc_video *v);
/* out[k] = frame idx[k] (0-based in presentation order; any order, repeats allowed) as 8-bit RGB (rgb malloc'd,
 * mode VC_IMG_RGB), bit for bit torchcodec's get_frames_at(idx).data[k] (permuted to [h][w][3]). The indices are
 * decoded in sorted order, each distinct frame once, going forward through the stream and seeking back to a
 * keyframe only when a target lies behind or a keyframe lies well ahead (torchcodec's rule). An index outside
 * [0, frames) is VC_ERR_ARG naming the file and index; a frame that does not decode is VC_ERR_FORMAT. On an error
 * nothing is left allocated in out. */
vc_status vc_video_frames(vc_video *v, const int64_t *idx, int n, vc_image *out);
void vc_video_close(vc_video *v);
#endif
