/* Video decoding as torchcodec 0.17's VideoDecoder does it on the same FFmpeg (qwen_vl_utils' default backend):
 * - metadata in its default "exact" seek mode: a scan of every packet of the stream (packets flagged DISCARD
 *   skipped); num_frames is their count, average_fps = num_frames / (max(pts + duration) - min(pts)) in seconds
 *   (pts * num / den), else the header's r_frame_rate; frame i is the i-th packet in pts order
 *   (SingleStreamDecoder.cpp scan_file_and_update_metadata_and_index, Metadata.cpp get_average_fps);
 * - get_frames_at: indices sorted, each distinct one decoded once: frame i is the first decoded frame whose pts
 *   (else packet dts) reaches packet i's pts, or simply the next decoded frame when i follows the frame decoded last;
 *   a seek (to the last keyframe at or before the target, the decoder flushed) when the target lies behind, or in a
 *   later GOP beyond the decoder's reorder delay (can_we_avoid_seeking);
 * - colour conversion (CpuDeviceInterface.cpp, SwScale.cpp, FFMPEGCommon.cpp create_sws_context): swscale from the
 *   frame's format to RGB24 at the same size with flags 0 (FFmpeg 5.1 picks its default bicubic), the frame's
 *   colour matrix (sws_getCoefficients(colorspace)) for both tables and the frame's range when it states one. A
 *   width that is not a multiple of 32, or a rotation, sends torchcodec through a filter graph instead, whose
 *   auto-inserted scale filter builds the same conversion (flags 0, the frame's matrix and range, MPEG-2 chroma
 *   siting = swscale's default): one path here, checked against both (tests/vision/test_video.c);
 * - a display matrix on the stream rotates the frames by its angle rounded to 90 degrees (transpose=cclock /
 *   transpose=clock / hflip,vflip after the conversion). */
#include "verlc/video.h"
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/display.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct vc_video {
    char *path;
    AVFormatContext *fmt;
    AVCodecContext *dec;
    int stream;
    AVRational tb;
    vc_video_meta meta;
    int src_w, src_h;          /* the stream's (pre-rotation) frame size */
    int64_t *pts;              /* every frame's pts, ascending (meta.frames) */
    int64_t *key_pts, *key_at; /* keyframes: pts and position in pts[] */
    int64_t nkeys, packets;    /* packets: of every stream, at the scan (bounds the decoding loops) */
    /* decoding state, as torchcodec's SingleStreamDecoder keeps it */
    int64_t cursor, last_pts, last_index;
    int cursor_set, eof;
    AVFrame *frame, *rgb;
    AVPacket *pkt;
    struct SwsContext *sws;
    int sws_fmt, sws_cs, sws_range;
};

static double pts_seconds(int64_t pts, AVRational tb) { return (double)pts * tb.num / tb.den; }

static int64_t seconds_pts(double s, AVRational tb) {
    double x = round(s * tb.den / tb.num);
    if (!(x > -9.2e18)) return INT64_MIN;
    if (x > 9.2e18) return INT64_MAX;
    return (int64_t)x;
}

static int64_t packet_pts(const AVPacket *p) { return p->pts == AV_NOPTS_VALUE ? p->dts : p->pts; }
static int64_t frame_pts(const AVFrame *f) { return f->pts == AV_NOPTS_VALUE ? f->pkt_dts : f->pts; }

static int64_t sat_add(int64_t a, int64_t b) {
    if (b > 0 && a > INT64_MAX - b) return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b) return INT64_MIN;
    return a + b;
}

/* ---- opening ---- */

static vc_status open_input(vc_video *v) {
    AVDictionary *opts = NULL;
    av_dict_set(&opts, "protocol_whitelist", "file", 0);
    int r = avformat_open_input(&v->fmt, v->path, NULL, &opts);
    av_dict_free(&opts);
    if (r < 0) return vc_fail(VC_ERR_FORMAT, "%s: not a video FFmpeg reads (%s)", v->path, av_err2str(r));
    r = avformat_find_stream_info(v->fmt, NULL);
    if (r < 0) return vc_fail(VC_ERR_FORMAT, "%s: cannot read the streams (%s)", v->path, av_err2str(r));
    return VC_OK;
}

/* the stream's display matrix (torchcodec's get_display_matrix_from_stream) */
static const int32_t *display_matrix(const AVStream *st) {
#if LIBAVCODEC_VERSION_INT >= AV_VERSION_INT(60, 31, 100)
    const AVPacketSideData *sd = av_packet_side_data_get(st->codecpar->coded_side_data,
                                                         st->codecpar->nb_coded_side_data, AV_PKT_DATA_DISPLAYMATRIX);
    return sd && sd->size >= 9 * sizeof(int32_t) ? (const int32_t *)sd->data : NULL;
#else
    size_t n = 0;
    const uint8_t *sd = av_stream_get_side_data(st, AV_PKT_DATA_DISPLAYMATRIX, &n);
    return sd && n >= 9 * sizeof(int32_t) ? (const int32_t *)sd : NULL;
#endif
}

/* torchcodec's rotation_from_degrees: the angle rounded to a multiple of 90 */
static vc_status stream_rotation(vc_video *v, const AVStream *st) {
    const int32_t *m = display_matrix(st);
    double deg = m ? av_display_rotation_get(m) : NAN;
    v->meta.rotation = 0;
    if (isnan(deg)) return VC_OK;
    int r = (int)round(deg / 90.0) * 90;
    if (r != 0 && r != 90 && r != -90 && r != 180 && r != -180)
        return vc_fail(VC_ERR_FORMAT, "%s: display matrix rotation of %g degrees", v->path, deg);
    v->meta.rotation = r == -180 ? 180 : r;
    return VC_OK;
}

static vc_status pick_stream(vc_video *v, const AVCodec **codec) {
    const char *fmt = v->fmt->iformat->name;
    if (!strcmp(fmt, "image2") || strstr(fmt, "_pipe") || strstr(fmt, "image2pipe"))
        return vc_fail(VC_ERR_FORMAT, "%s: an image (%s), not a video", v->path, fmt);
    int s = av_find_best_stream(v->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, codec, 0);
    if (s == AVERROR_DECODER_NOT_FOUND)
        return vc_fail(VC_ERR_FORMAT, "%s: no decoder for its video stream", v->path);
    if (s < 0) return vc_fail(VC_ERR_FORMAT, "%s: no video stream", v->path);
    const AVStream *st = v->fmt->streams[s];
    v->stream = s;
    v->tb = st->time_base;
    if (v->tb.num <= 0 || v->tb.den <= 0)
        return vc_fail(VC_ERR_FORMAT, "%s: video stream with time base %d/%d", v->path, v->tb.num, v->tb.den);
    v->src_w = st->codecpar->width;
    v->src_h = st->codecpar->height;
    if (v->src_w <= 0 || v->src_h <= 0)
        return vc_fail(VC_ERR_FORMAT, "%s: video stream of %dx%d pixels", v->path, v->src_w, v->src_h);
    if ((int64_t)v->src_w * v->src_h > VC_IMAGE_MAX_PIXELS)
        return vc_fail(VC_ERR_FORMAT, "%s: %dx%d frames are over the limit of %lld pixels", v->path, v->src_w,
                       v->src_h, VC_IMAGE_MAX_PIXELS);
    vc_status stat = stream_rotation(v, st);
    if (stat != VC_OK) return stat;
    int swap = v->meta.rotation == 90 || v->meta.rotation == -90;
    v->meta.width = swap ? v->src_h : v->src_w;
    v->meta.height = swap ? v->src_w : v->src_h;
    return VC_OK;
}

typedef struct scan_frame { int64_t pts; int key; } scan_frame;

static int cmp_frame(const void *a, const void *b) {
    const scan_frame *x = a, *y = b;
    return x->pts < y->pts ? -1 : x->pts > y->pts;
}

static vc_status scan_push(vc_video *v, scan_frame **fr, int64_t *cap, const AVPacket *p) {
    if (v->meta.frames >= VC_VIDEO_MAX_FRAMES)
        return vc_fail(VC_ERR_FORMAT, "%s: more than %lld frames", v->path, VC_VIDEO_MAX_FRAMES);
    if (v->meta.frames == *cap) {
        int64_t nc = *cap ? 2 * *cap : 256;
        scan_frame *n = realloc(*fr, (size_t)nc * sizeof **fr);
        if (!n) return vc_fail(VC_ERR_NOMEM, "%s: index of %lld frames", v->path, (long long)nc);
        *fr = n, *cap = nc;
    }
    (*fr)[v->meta.frames++] = (scan_frame){ packet_pts(p), (p->flags & AV_PKT_FLAG_KEY) != 0 };
    return VC_OK;
}

/* the frame and keyframe tables, sorted by pts as torchcodec's sort_all_frames makes them */
static vc_status build_index(vc_video *v, scan_frame *fr) {
    int64_t n = v->meta.frames;
    qsort(fr, (size_t)n, sizeof *fr, cmp_frame);
    int64_t keys = 0;
    for (int64_t i = 0; i < n; i++) keys += fr[i].key;
    v->pts = malloc((size_t)n * sizeof *v->pts);
    v->key_pts = malloc((size_t)(keys ? keys : 1) * sizeof *v->key_pts);
    v->key_at = malloc((size_t)(keys ? keys : 1) * sizeof *v->key_at);
    if (!v->pts || !v->key_pts || !v->key_at) return vc_fail(VC_ERR_NOMEM, "%s: index of %lld frames", v->path,
                                                             (long long)n);
    for (int64_t i = 0; i < n; i++) {
        v->pts[i] = fr[i].pts;
        if (fr[i].key) v->key_pts[v->nkeys] = fr[i].pts, v->key_at[v->nkeys++] = i;
    }
    return VC_OK;
}

/* every packet once: frame count, pts span, keyframes (torchcodec's exact-mode scan) */
static vc_status scan(vc_video *v) {
    scan_frame *fr = NULL;
    int64_t cap = 0, lo = INT64_MAX, hi = INT64_MIN;
    vc_status st = VC_OK;
    int r;
    while ((r = av_read_frame(v->fmt, v->pkt)) >= 0) {
        v->packets++;
        if (v->pkt->stream_index == v->stream && !(v->pkt->flags & AV_PKT_FLAG_DISCARD)) {
            int64_t p = packet_pts(v->pkt), e = sat_add(p, v->pkt->duration);
            lo = p < lo ? p : lo;
            hi = e > hi ? e : hi;
            st = scan_push(v, &fr, &cap, v->pkt);
        }
        av_packet_unref(v->pkt);
        if (st != VC_OK) goto out;
    }
    if (r != AVERROR_EOF) {
        st = vc_fail(VC_ERR_FORMAT, "%s: unreadable after %lld packets (%s)", v->path, (long long)v->packets,
                     av_err2str(r));
        goto out;
    }
    if (v->meta.frames == 0) { st = vc_fail(VC_ERR_FORMAT, "%s: video stream without frames", v->path); goto out; }
    double span = pts_seconds(hi, v->tb) - pts_seconds(lo, v->tb);
    double header = av_q2d(v->fmt->streams[v->stream]->r_frame_rate);
    v->meta.fps = span != 0.0 ? (double)v->meta.frames / span : header > 0 ? header : 0.0;
    st = build_index(v, fr);
out:
    free(fr);
    return st;
}

static int decoder_threads(void) {
    const char *e = getenv("TORCHCODEC_NUM_THREADS");
    long t = e && *e ? strtol(e, NULL, 10) : 8;
    return t < 0 ? 1 : t > 64 ? 64 : (int)t;
}

static vc_status open_decoder(vc_video *v, const AVCodec *codec) {
    v->dec = avcodec_alloc_context3(codec);
    if (!v->dec) return vc_fail(VC_ERR_NOMEM, "%s: decoder context", v->path);
    int r = avcodec_parameters_to_context(v->dec, v->fmt->streams[v->stream]->codecpar);
    if (r >= 0) {
        v->dec->thread_count = decoder_threads();
        v->dec->pkt_timebase = v->tb;
        r = avcodec_open2(v->dec, codec, NULL);
    }
    if (r < 0) return vc_fail(VC_ERR_FORMAT, "%s: cannot open its %s decoder (%s)", v->path, codec->name,
                              av_err2str(r));
    return VC_OK;
}

/* after the scan and after a reopen: only the video stream's packets are wanted */
static void discard_others(vc_video *v) {
    for (unsigned i = 0; i < v->fmt->nb_streams; i++)
        if ((int)i != v->stream) v->fmt->streams[i]->discard = AVDISCARD_ALL;
}

static vc_status reopen_input(vc_video *v) {
    avformat_close_input(&v->fmt);
    vc_status st = open_input(v);
    if (st != VC_OK) return st;
    if ((int)v->fmt->nb_streams <= v->stream) return vc_fail(VC_ERR_FORMAT, "%s: changed while open", v->path);
    discard_others(v);
    return VC_OK;
}

vc_status vc_video_open(const char *path, vc_video **out) {
    *out = NULL;
    av_log_set_level(AV_LOG_QUIET);
    FILE *f = fopen(path, "rb");
    if (!f) return vc_fail(VC_ERR_IO, "%s: cannot open (%s)", path, strerror(errno));
    fclose(f);
    vc_video *v = calloc(1, sizeof *v);
    if (!v) return vc_fail(VC_ERR_NOMEM, "%s: video handle", path);
    v->path = strdup(path);
    v->frame = av_frame_alloc();
    v->rgb = av_frame_alloc();
    v->pkt = av_packet_alloc();
    v->cursor = v->last_pts = v->last_index = INT64_MIN;
    v->sws_fmt = -1;
    vc_status st = !v->path || !v->frame || !v->rgb || !v->pkt ? vc_fail(VC_ERR_NOMEM, "%s: video handle", path)
                                                                : open_input(v);
    const AVCodec *codec = NULL;
    if (st == VC_OK) st = pick_stream(v, &codec);
    if (st == VC_OK) st = scan(v);
    if (st == VC_OK) st = open_decoder(v, codec);
    /* back to the start as torchcodec does after its scan (stream 0, ts 0); reopened where that cannot seek */
    if (st == VC_OK && avformat_seek_file(v->fmt, 0, INT64_MIN, 0, 0, 0) < 0) st = reopen_input(v);
    if (st == VC_OK) discard_others(v);
    if (st != VC_OK) {
        vc_video_close(v);
        return st;
    }
    *out = v;
    return VC_OK;
}

const vc_video_meta *vc_video_info(const vc_video *v) { return &v->meta; }

void vc_video_close(vc_video *v) {
    if (!v) return;
    sws_freeContext(v->sws);
    av_frame_free(&v->frame);
    av_frame_free(&v->rgb);
    av_packet_free(&v->pkt);
    avcodec_free_context(&v->dec);
    avformat_close_input(&v->fmt);
    free(v->pts);
    free(v->key_pts);
    free(v->key_at);
    free(v->path);
    free(v);
}

/* ---- seeking (torchcodec's can_we_avoid_seeking / maybe_seek_to_before_desired_pts) ---- */

/* the last keyframe at or before pts, -1 when none */
static int64_t key_for(const vc_video *v, int64_t pts) {
    int64_t lo = 0, hi = v->nkeys; /* first keyframe with pts > target */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (v->key_pts[mid] <= pts) lo = mid + 1;
        else hi = mid;
    }
    return lo - 1;
}

/* seconds_to_index_lower_bound: the first frame whose successor's pts (the last one's: INT64_MAX) lies beyond s */
static int64_t index_at_seconds(const vc_video *v, double s) {
    int64_t lo = 0, hi = v->meta.frames;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int64_t next = mid + 1 < v->meta.frames ? v->pts[mid + 1] : INT64_MAX;
        if (pts_seconds(next, v->tb) <= s) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static int can_skip_seek(const vc_video *v) {
    if (v->cursor <= v->last_pts) return 0; /* behind, or the same frame again */
    int64_t lk = key_for(v, v->last_pts), tk = key_for(v, v->cursor);
    if (lk < 0 || tk < 0) return 0;
    if (lk == tk) return 1;
    int64_t x = index_at_seconds(v, pts_seconds(v->last_pts, v->tb));
    int64_t reorder = v->dec->has_b_frames > 0 ? v->dec->has_b_frames : 0;
    int64_t inflight = (v->dec->active_thread_type & FF_THREAD_FRAME) && v->dec->thread_count > 1
                           ? v->dec->thread_count - 1 : 0;
    return v->key_at[tk] - x <= reorder + inflight;
}

static void flush_decoder(vc_video *v) {
    avcodec_flush_buffers(v->dec);
    while (avcodec_receive_frame(v->dec, v->frame) == 0) av_frame_unref(v->frame);
    v->eof = 0;
}

static vc_status seek(vc_video *v) {
    int64_t target = v->cursor, k = key_for(v, target);
    if (k >= 0) target = v->key_pts[k];
    if (avformat_seek_file(v->fmt, v->stream, INT64_MIN, target, target, 0) < 0) {
        /* a demuxer that cannot seek there: decode again from the start, which gives the same frames */
        vc_status st = reopen_input(v);
        if (st != VC_OK) return st;
    }
    flush_decoder(v);
    return VC_OK;
}

/* ---- decoding ---- */

static vc_status read_packet(vc_video *v, int64_t *budget) {
    for (;;) {
        int r = av_read_frame(v->fmt, v->pkt);
        if (r < 0) return r == AVERROR_EOF ? VC_ERR_MISSING
                                           : vc_fail(VC_ERR_FORMAT, "%s: unreadable (%s)", v->path, av_err2str(r));
        if (v->pkt->stream_index == v->stream) return VC_OK;
        av_packet_unref(v->pkt);
        if (--*budget < 0) return vc_fail(VC_ERR_FORMAT, "%s: more packets than its scan found", v->path);
    }
}

/* the next decoded frame whose pts reaches the cursor (torchcodec's decode_av_frame) into v->frame */
static vc_status decode_next(vc_video *v, int64_t index) {
    if (v->cursor_set) {
        vc_status st = can_skip_seek(v) ? VC_OK : seek(v);
        if (st != VC_OK) return st;
        v->cursor_set = 0;
    }
    int64_t budget = v->packets + 64;
    for (;;) {
        int r = avcodec_receive_frame(v->dec, v->frame);
        if (r == 0) {
            if (frame_pts(v->frame) >= v->cursor) break;
            av_frame_unref(v->frame);
            continue;
        }
        if (r != AVERROR(EAGAIN) || v->eof)
            return vc_fail(VC_ERR_FORMAT, "%s: frame %lld does not decode (%s)", v->path, (long long)index,
                           r == AVERROR_EOF || r == AVERROR(EAGAIN) ? "the stream ends before it" : av_err2str(r));
        vc_status st = --budget < 0 ? vc_fail(VC_ERR_FORMAT, "%s: more packets than its scan found", v->path)
                                    : read_packet(v, &budget);
        if (st == VC_ERR_MISSING) {
            v->eof = 1;
            r = avcodec_send_packet(v->dec, NULL);
        } else if (st != VC_OK) {
            return st;
        } else {
            r = avcodec_send_packet(v->dec, v->pkt);
            av_packet_unref(v->pkt);
        }
        if (r < 0 && r != AVERROR_EOF)
            return vc_fail(VC_ERR_FORMAT, "%s: corrupt packet before frame %lld (%s)", v->path, (long long)index,
                           av_err2str(r));
    }
    v->last_pts = frame_pts(v->frame);
    return VC_OK;
}

/* get_frame_at_index_internal: the cursor moves unless this index follows the one decoded last */
static vc_status frame_at(vc_video *v, int64_t i) {
    if (i != v->last_index + 1 || v->last_index == INT64_MIN) {
        v->cursor = seconds_pts(pts_seconds(v->pts[i], v->tb), v->tb);
        v->cursor_set = 1;
    }
    av_frame_unref(v->frame);
    vc_status st = decode_next(v, i);
    v->last_index = i;
    if (st != VC_OK) v->last_index = v->last_pts = INT64_MIN; /* the next request seeks afresh */
    return st;
}

/* ---- conversion ---- */

/* torchcodec's create_sws_context: flags 0, the frame's colour matrix for both tables, its range when stated */
static vc_status make_sws(vc_video *v, const AVFrame *f) {
    if (v->sws && v->sws_fmt == f->format && v->sws_cs == (int)f->colorspace && v->sws_range == (int)f->color_range)
        return VC_OK;
    sws_freeContext(v->sws);
    v->sws = sws_getContext(f->width, f->height, f->format, f->width, f->height, AV_PIX_FMT_RGB24, 0, NULL, NULL,
                            NULL);
    v->sws_fmt = -1;
    const char *name = av_get_pix_fmt_name(f->format);
    if (!v->sws) return vc_fail(VC_ERR_FORMAT, "%s: frames in pixel format %s cannot become RGB", v->path,
                                name ? name : "?");
    int *inv, *tab, src_range, dst_range, bri, con, sat;
    if (sws_getColorspaceDetails(v->sws, &inv, &src_range, &tab, &dst_range, &bri, &con, &sat) < 0)
        return vc_fail(VC_ERR_FORMAT, "%s: frames in pixel format %s cannot become RGB", v->path, name);
    if (f->color_range != AVCOL_RANGE_UNSPECIFIED) src_range = f->color_range == AVCOL_RANGE_JPEG;
    const int *coefs = sws_getCoefficients(f->colorspace);
    if (sws_setColorspaceDetails(v->sws, coefs, src_range, coefs, dst_range, bri, con, sat) < 0)
        return vc_fail(VC_ERR_FORMAT, "%s: colour matrix %d of pixel format %s", v->path, (int)f->colorspace, name);
    v->sws_fmt = f->format, v->sws_cs = f->colorspace, v->sws_range = f->color_range;
    return VC_OK;
}

/* v->rgb: an RGB24 frame of the stream's size (FFmpeg's aligned, padded buffer: swscale's SIMD writes whole
 * blocks of pixels past a row's end) */
static vc_status rgb_buffer(vc_video *v) {
    if (v->rgb->data[0]) return VC_OK;
    v->rgb->format = AV_PIX_FMT_RGB24;
    v->rgb->width = v->src_w;
    v->rgb->height = v->src_h;
    if (av_frame_get_buffer(v->rgb, 0) < 0)
        return vc_fail(VC_ERR_NOMEM, "%s: RGB frame of %dx%d", v->path, v->src_w, v->src_h);
    return VC_OK;
}

/* rows of src (w x h RGB, stride ls) into dst as the rotation leaves them (transpose=cclock for 90,
 * transpose=clock for -90, hflip + vflip for 180) */
static void copy_rotated(const uint8_t *src, int ls, int w, int h, int rotation, uint8_t *dst) {
    int ow = rotation == 90 || rotation == -90 ? h : w, oh = ow == w ? h : w;
    for (int r = 0; r < oh; r++)
        for (int c = 0; c < ow; c++) {
            int sr = r, sc = c;
            if (rotation == 90) sr = c, sc = w - 1 - r;
            else if (rotation == -90) sr = h - 1 - c, sc = r;
            else if (rotation == 180) sr = h - 1 - r, sc = w - 1 - c;
            memcpy(dst + ((size_t)r * ow + c) * 3, src + (size_t)sr * ls + (size_t)sc * 3, 3);
        }
}

static vc_status convert(vc_video *v, int64_t index, vc_image *out) {
    const AVFrame *f = v->frame;
    if (f->width != v->src_w || f->height != v->src_h)
        return vc_fail(VC_ERR_FORMAT, "%s: frame %lld is %dx%d in a %dx%d stream", v->path, (long long)index,
                       f->width, f->height, v->src_w, v->src_h);
    vc_status st = make_sws(v, f);
    if (st == VC_OK) st = rgb_buffer(v);
    if (st != VC_OK) return st;
    if (sws_scale(v->sws, (const uint8_t *const *)f->data, f->linesize, 0, f->height, v->rgb->data,
                  v->rgb->linesize) != f->height)
        return vc_fail(VC_ERR_FORMAT, "%s: frame %lld did not convert to RGB", v->path, (long long)index);
    size_t bytes = (size_t)v->src_w * v->src_h * 3;
    out->rgb = malloc(bytes);
    if (!out->rgb) return vc_fail(VC_ERR_NOMEM, "%s: frame %lld (%zu bytes)", v->path, (long long)index, bytes);
    out->width = v->meta.width;
    out->height = v->meta.height;
    out->mode = VC_IMG_RGB;
    if (v->meta.rotation == 0)
        for (int r = 0; r < v->src_h; r++)
            memcpy(out->rgb + (size_t)r * v->src_w * 3, v->rgb->data[0] + (size_t)r * v->rgb->linesize[0],
                   (size_t)v->src_w * 3);
    else copy_rotated(v->rgb->data[0], v->rgb->linesize[0], v->src_w, v->src_h, v->meta.rotation, out->rgb);
    return VC_OK;
}

/* ---- get_frames_at ---- */

typedef struct idx_pos { int64_t idx; int pos; } idx_pos;

static int cmp_idx(const void *a, const void *b) {
    const idx_pos *x = a, *y = b;
    if (x->idx != y->idx) return x->idx < y->idx ? -1 : 1;
    return x->pos - y->pos;
}

static vc_status copy_image(const vc_image *src, vc_image *dst) {
    size_t bytes = (size_t)src->width * src->height * 3;
    *dst = *src;
    dst->rgb = malloc(bytes);
    if (!dst->rgb) return vc_fail(VC_ERR_NOMEM, "video frame copy (%zu bytes)", bytes);
    memcpy(dst->rgb, src->rgb, bytes);
    return VC_OK;
}

vc_status vc_video_frames(vc_video *v, const int64_t *idx, int n, vc_image *out) {
    if (n < 0) return vc_fail(VC_ERR_ARG, "%s: %d frames asked for", v->path, n);
    if (n == 0) return VC_OK;
    memset(out, 0, (size_t)n * sizeof *out);
    for (int k = 0; k < n; k++)
        if (idx[k] < 0 || idx[k] >= v->meta.frames)
            return vc_fail(VC_ERR_ARG, "%s: frame index %lld is outside [0, %lld)", v->path, (long long)idx[k],
                           (long long)v->meta.frames);
    idx_pos *order = malloc((size_t)n * sizeof *order);
    if (!order) return vc_fail(VC_ERR_NOMEM, "%s: %d frame indices", v->path, n);
    for (int k = 0; k < n; k++) order[k] = (idx_pos){ idx[k], k };
    qsort(order, (size_t)n, sizeof *order, cmp_idx);
    vc_status st = VC_OK;
    for (int s = 0; s < n && st == VC_OK; s++) {
        if (s > 0 && order[s].idx == order[s - 1].idx) st = copy_image(&out[order[s - 1].pos], &out[order[s].pos]);
        else {
            st = frame_at(v, order[s].idx);
            if (st == VC_OK) st = convert(v, order[s].idx, &out[order[s].pos]);
        }
    }
    free(order);
    if (st != VC_OK)
        for (int k = 0; k < n; k++) vc_image_free(&out[k]);
    return st;
}
