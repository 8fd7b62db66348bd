/* Video decoding against torchcodec (tests/fixtures/vision/video, tools/fixtures/make_video_fixture.py): every
 * fixture's metadata (num_frames, average_fps as the same double, size, rotation) and its frames, all of them and
 * index lists in any order with repeats, on one handle after another and on fresh handles, equal to torchcodec's
 * bytes exactly (H.264 with B-frames and seeks, VP9 of odd size, MJPEG in full range, BT.709 full range, a rotated
 * track). Then bad inputs: a missing path, garbage, an image, an audio file, truncations, a garbled stream, random
 * byte flips and indices out of range; each gives one error line naming the file (or decodes), never a crash (run
 * under ASan + UBSan too). */
#include <unistd.h>
#include "vc_test.h"
#include "vision_helpers.h"
#include "verlc/video.h"

#define VIDEO_DIR VISION_DIR "/video"

static char *vid_path(const char *name) {
    static char buf[1024];
    snprintf(buf, sizeof buf, VIDEO_DIR "/%s", name);
    return buf;
}

/* frames out[0..n) against rows idx of the reference [N, H, W, 3]: the count of frames that differ */
static int cmp_frames(const vc_st_tensor *ref, const int64_t *idx, int n, const vc_image *out, int *maxd) {
    int bad = 0;
    *maxd = 0;
    size_t fb = (size_t)ref->shape[1] * ref->shape[2] * 3;
    for (int k = 0; k < n; k++) {
        if (!out[k].rgb || out[k].height != ref->shape[1] || out[k].width != ref->shape[2] ||
            out[k].mode != VC_IMG_RGB) {
            bad++;
            continue;
        }
        const uint8_t *a = (const uint8_t *)ref->data + (size_t)idx[k] * fb;
        int diff = 0;
        for (size_t i = 0; i < fb; i++) {
            int d = abs((int)a[i] - (int)out[k].rgb[i]);
            diff |= d != 0;
            if (d > *maxd) *maxd = d;
        }
        bad += diff;
    }
    return bad;
}

static void free_frames(vc_image *out, int n) {
    for (int k = 0; k < n; k++) vc_image_free(&out[k]);
}

/* idx through v against the reference; what names the case */
static void check_list(vc_video *v, const vc_st_tensor *ref, const int64_t *idx, int n, const char *what) {
    vc_image *out = calloc((size_t)n, sizeof *out);
    vc_status st = vc_video_frames(v, idx, n, out);
    CHECK_MSG(st == VC_OK, "%s: %s", what, vc_last_error());
    if (st == VC_OK) {
        int maxd, bad = cmp_frames(ref, idx, n, out, &maxd);
        CHECK_MSG(bad == 0, "%s: %d of %d frames differ from torchcodec's (largest difference %d)", what, bad, n,
                  maxd);
    }
    free_frames(out, n);
    free(out);
}

static int json_list(const cJSON *a, int64_t *idx, int cap) {
    int n = 0;
    for (const cJSON *e = a ? a->child : NULL; e && n < cap; e = e->next) idx[n++] = (int64_t)e->valuedouble;
    return n;
}

static void check_video(const cJSON *e, const vc_st_tensor *ref, int *total) {
    const char *name = e->string;
    vc_video *v = NULL;
    CHECK_OK(vc_video_open(vid_path(name), &v));
    if (!v) return;
    const vc_video_meta *m = vc_video_info(v);
    int64_t n = (int64_t)cJSON_GetObjectItem(e, "num_frames")->valuedouble;
    double fps = cJSON_GetObjectItem(e, "average_fps")->valuedouble;
    const cJSON *rot = cJSON_GetObjectItem(e, "rotation");
    CHECK_MSG(m->frames == n, "%s: %lld frames, torchcodec's %lld", name, (long long)m->frames, (long long)n);
    CHECK_MSG(m->fps == fps, "%s: %.17g fps, torchcodec's %.17g", name, m->fps, fps);
    CHECK(m->width == cJSON_GetObjectItem(e, "width")->valueint);
    CHECK(m->height == cJSON_GetObjectItem(e, "height")->valueint);
    CHECK_MSG(m->rotation == (cJSON_IsNumber(rot) ? (int)lround(rot->valuedouble) : 0), "%s: rotation %d", name,
              m->rotation);
    CHECK(ref && ref->ndim == 4 && ref->shape[0] == n && ref->shape[1] == m->height && ref->shape[2] == m->width);
    if (!ref || ref->shape[0] != n || n > 64) goto out;
    char what[256];
    int64_t idx[64], rev[64];
    for (int64_t i = 0; i < n; i++) idx[i] = i, rev[i] = n - 1 - i;
    snprintf(what, sizeof what, "%s all frames", name);
    check_list(v, ref, idx, (int)n, what);
    snprintf(what, sizeof what, "%s all frames again, reversed", name);
    check_list(v, ref, rev, (int)n, what);
    for (const cJSON *l = cJSON_GetObjectItem(e, "lists")->child; l; l = l->next) {
        int k = json_list(l, idx, 64);
        snprintf(what, sizeof what, "%s list %s on the open handle", name, l->string);
        check_list(v, ref, idx, k, what);
        vc_video *fresh = NULL;
        CHECK_OK(vc_video_open(vid_path(name), &fresh));
        snprintf(what, sizeof what, "%s list %s on a fresh handle", name, l->string);
        if (fresh) check_list(fresh, ref, idx, k, what);
        vc_video_close(fresh);
    }
    for (int64_t i = 0; i < n; i++) { /* one frame per call, backwards: a seek each time */
        vc_image one = { 0 };
        int64_t j = n - 1 - i;
        CHECK_OK(vc_video_frames(v, &j, 1, &one));
        int maxd;
        CHECK_MSG(one.rgb && cmp_frames(ref, &j, 1, &one, &maxd) == 0, "%s frame %lld alone", name, (long long)j);
        vc_image_free(&one);
    }
    *total += (int)n;
out:
    vc_video_close(v);
}

static void check_fixtures(void) {
    cJSON *ref = NULL;
    vc_checkpoint *ck = NULL;
    CHECK_OK(vc_json_load_file(vid_path("reference.json"), &ref));
    CHECK_OK(vc_ckpt_open(vid_path("reference.safetensors"), &ck));
    if (!ref || !ck) goto out;
    int videos = 0, frames = 0;
    for (const cJSON *e = cJSON_GetObjectItem(ref, "videos")->child; e; e = e->next, videos++) {
        char key[256];
        snprintf(key, sizeof key, "%s.frames", e->string);
        check_video(e, vc_ckpt_find(ck, key), &frames);
    }
    CHECK(videos == 5);
    printf("%d videos (%d frames; H.264, VP9, MJPEG; rotated, full range, BT.709, odd sizes): metadata and frames "
           "equal to torchcodec %s's\n", videos, frames, cJSON_GetObjectItem(ref, "torchcodec")->valuestring);
out:
    cJSON_Delete(ref);
    vc_ckpt_close(ck);
}

/* ---- bad inputs ---- */

/* a temp file holding bytes, named with suffix; the caller unlinks and frees it */
static char *temp_file(const void *b, size_t n, const char *suffix) {
    char *path = malloc(256);
    snprintf(path, 256, "/tmp/vc_test_video_XXXXXX%s", suffix);
    int fd = mkstemps(path, (int)strlen(suffix));
    if (fd < 0) { free(path); return NULL; }
    int ok = write(fd, b, n) == (ssize_t)n;
    close(fd);
    if (!ok) { unlink(path); free(path); return NULL; }
    return path;
}

/* opening path and decoding every frame: the status of the first failure (VC_OK when all decode) */
static vc_status open_and_decode(const char *path) {
    vc_video *v = NULL;
    vc_status st = vc_video_open(path, &v);
    if (st != VC_OK) return st;
    int64_t n = vc_video_info(v)->frames, idx[64];
    int k = n < 64 ? (int)n : 64;
    for (int i = 0; i < k; i++) idx[i] = i;
    vc_image out[64];
    st = vc_video_frames(v, idx, k, out);
    if (st == VC_OK) free_frames(out, k);
    else for (int i = 0; i < k; i++) CHECK(out[i].rgb == NULL);
    vc_video_close(v);
    return st;
}

/* bytes as a file must fail with one line naming the file (and holding needle) */
static void expect_fail(const void *b, size_t n, const char *suffix, const char *what, const char *needle) {
    char *path = temp_file(b, n, suffix);
    CHECK(path != NULL);
    if (!path) return;
    vc_status st = open_and_decode(path);
    const char *msg = vc_last_error();
    CHECK_MSG(st != VC_OK, "%s: decoded", what);
    CHECK_MSG(st == VC_OK || (strstr(msg, path) && !strchr(msg, '\n')), "%s: message '%s'", what, msg);
    CHECK_MSG(st == VC_OK || !needle || strstr(msg, needle), "%s: message '%s' lacks '%s'", what, msg, needle);
    unlink(path);
    free(path);
}

/* bytes as a file may decode or fail, but never crash or leak */
static int try_decode(const void *b, size_t n, const char *suffix) {
    char *path = temp_file(b, n, suffix);
    CHECK(path != NULL);
    if (!path) return -1;
    vc_status st = open_and_decode(path);
    const char *msg = vc_last_error();
    if (st != VC_OK) CHECK_MSG(strstr(msg, path) && !strchr(msg, '\n'), "message '%s'", msg);
    unlink(path);
    free(path);
    return st == VC_OK;
}

static uint32_t rnd(uint32_t *s) {
    *s ^= *s << 13, *s ^= *s >> 17, *s ^= *s << 5;
    return *s;
}

static size_t get32(const uint8_t *p) { return (size_t)p[0] << 24 | (size_t)p[1] << 16 | (size_t)p[2] << 8 | p[3]; }

/* offset and size of the payload of the top-level mp4 box `type` */
static int mp4_box(const uint8_t *b, size_t n, const char *type, size_t *at, size_t *len) {
    for (size_t o = 0; o + 8 <= n;) {
        size_t sz = get32(b + o);
        if (sz < 8 || o + sz > n) return 0;
        if (!memcmp(b + o + 4, type, 4)) { *at = o + 8, *len = sz - 8; return 1; }
        o += sz;
    }
    return 0;
}

static void check_missing_and_garbage(void) {
    vc_video *v = (vc_video *)1;
    const char *missing = VIDEO_DIR "/no_such_video.mp4";
    CHECK(vc_video_open(missing, &v) == VC_ERR_IO && v == NULL);
    CHECK_MSG(strstr(vc_last_error(), missing) != NULL, "message '%s'", vc_last_error());
    CHECK(vc_video_open(VIDEO_DIR, &v) == VC_ERR_FORMAT && v == NULL); /* a folder */
    uint8_t junk[4096];
    uint32_t s = 12345;
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)rnd(&s);
    expect_fail(junk, sizeof junk, ".mp4", "garbage", NULL);
    expect_fail(junk, 0, ".mp4", "empty file", NULL);
    size_t n = 0;
    char *png = read_all(img_path("rgb_37x53.png"), &n);
    CHECK(png != NULL);
    if (png) expect_fail(png, n, ".mp4", "a PNG named .mp4", "image");
    free(png);
    /* a WAV file: audio only */
    uint8_t wav[44 + 800] = "RIFF\0\0\0\0WAVEfmt ";
    uint32_t hdr[] = { 16, 1 | 1u << 16, 8000, 16000, 2 | 16u << 16 };
    memcpy(wav + 16, hdr, sizeof hdr);
    memcpy(wav + 36, "data", 4);
    uint32_t dlen = 800, rlen = sizeof wav - 8;
    memcpy(wav + 40, &dlen, 4);
    memcpy(wav + 4, &rlen, 4);
    expect_fail(wav, sizeof wav, ".wav", "a WAV file", "no video stream");
}

static void check_truncated(void) {
    static const char *names[] = { "h264_32x24.mp4", "vp9_33x25.webm", "mjpeg_40x30.avi" };
    for (int f = 0; f < 3; f++) {
        size_t n = 0;
        char *b = read_all(vid_path(names[f]), &n);
        CHECK(b != NULL);
        if (!b) continue;
        const char *suffix = strrchr(names[f], '.');
        /* the mp4's moov box comes last, its udta (the encoder's name) at its end: a cut before that never opens */
        size_t moov = 0, moov_len = 0, udta = n;
        if (f == 0 && mp4_box((const uint8_t *)b, n, "moov", &moov, &moov_len)) {
            for (size_t o = moov; o + 8 <= moov + moov_len; o += get32((const uint8_t *)b + o))
                if (!memcmp(b + o + 4, "udta", 4) || get32((const uint8_t *)b + o) < 8) { udta = o; break; }
        }
        CHECK(f != 0 || (moov > 0 && udta < n));
        int cuts = 0, decoded = 0;
        for (size_t k = 0; k < n; k += (LIGHT ? 211 : 53), cuts++) {
            if (k < udta && f == 0) {
                char what[64];
                snprintf(what, sizeof what, "%s[:%zu]", names[f], k);
                expect_fail(b, k, suffix, what, NULL);
            } else decoded += try_decode(b, k, suffix) == 1;
        }
        printf("%s: %d truncations, %d decoded (the frames left), the rest refused\n", names[f], cuts, decoded);
        free(b);
    }
}

/* the mp4's H.264 packets garbled while the container stays intact; then random byte flips anywhere */
static void check_corrupt(void) {
    size_t n = 0, at = 0, len = 0;
    uint8_t *b = (uint8_t *)read_all(vid_path("h264_32x24.mp4"), &n);
    CHECK(b != NULL);
    if (!b) return;
    CHECK(mp4_box(b, n, "mdat", &at, &len));
    uint8_t *g = malloc(n);
    memcpy(g, b, n);
    uint32_t s = 777;
    for (size_t i = 0; i < len; i++) g[at + i] = (uint8_t)rnd(&s);
    expect_fail(g, n, ".mp4", "garbled H.264 packets", NULL);
    int ok = 0, rounds = LIGHT ? 40 : 150;
    for (int r = 0; r < rounds; r++) {
        memcpy(g, b, n);
        int flips = 1 + (int)(rnd(&s) % 8);
        for (int i = 0; i < flips; i++) g[rnd(&s) % n] ^= (uint8_t)(1 + rnd(&s) % 255);
        ok += try_decode(g, n, ".mp4") == 1;
    }
    printf("%d random corruptions of h264_32x24.mp4: %d decoded, %d refused, none crashed\n", rounds, ok,
           rounds - ok);
    free(g);
    free(b);
}

static void check_indices(void) {
    vc_video *v = NULL;
    const char *path = vid_path("h264_32x24.mp4");
    CHECK_OK(vc_video_open(path, &v));
    if (!v) return;
    int64_t n = vc_video_info(v)->frames;
    int64_t bad[][2] = { { 0, -1 }, { n, 0 }, { 3, 1LL << 40 } };
    for (int c = 0; c < 3; c++) {
        vc_image out[2] = { { 0 } };
        vc_status st = vc_video_frames(v, bad[c], 2, out);
        char needle[64];
        snprintf(needle, sizeof needle, "index %lld", (long long)(c == 0 ? -1 : c == 1 ? n : 1LL << 40));
        CHECK(st == VC_ERR_ARG && out[0].rgb == NULL && out[1].rgb == NULL);
        CHECK_MSG(strstr(vc_last_error(), path) && strstr(vc_last_error(), needle), "message '%s'", vc_last_error());
    }
    CHECK_OK(vc_video_frames(v, NULL, 0, NULL));
    int64_t last = n - 1;
    vc_image one = { 0 };
    CHECK_OK(vc_video_frames(v, &last, 1, &one)); /* still usable after the refusals */
    vc_image_free(&one);
    vc_video_close(v);
    vc_video_close(NULL);
}

int main(void) {
    check_fixtures();
    check_missing_and_garbage();
    check_truncated();
    check_corrupt();
    check_indices();
    return vc_test_done();
}
