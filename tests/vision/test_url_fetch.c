/* Images and videos from http(s) URLs (qwen_vl_utils fetches them with requests.get; torchcodec opens a video URL
 * through FFmpeg), against a small HTTP server in this process serving the fixtures: an image URL decodes to the
 * file's pixels and grid, a video URL to the file's sampled frames, entries and processor pixels; redirects are
 * followed; a second read of an image comes from the cache (one transfer); a 404, a refused connection and a body
 * that is not an image each give one error line naming the URL, and no temporary file is left behind. */
#include "data/vl_rows.h"
#include "io/url_fetch.h"
#include "rl/http_batch.h"
#include "vc_test.h"
#include "verlc/image.h"
#include "verlc/json.h"
#include "verlc/vision.h"
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- the server: GET /f/<path> serves the file at path, /r/<path> redirects there, anything else is a 404 ---- */
static int srv_fd = -1, srv_port;
static volatile int srv_stop;

static void reply(int c, const char *status, const char *extra, const char *body, size_t n) {
    char head[1024];
    int k = snprintf(head, sizeof head, "HTTP/1.1 %s\r\nContent-Length: %zu\r\nConnection: close\r\n%s\r\n", status,
                     n, extra ? extra : "");
    if (write(c, head, (size_t)k) < 0) return;
    for (size_t at = 0; at < n;) {
        ssize_t w = write(c, body + at, n - at);
        if (w <= 0) return;
        at += (size_t)w;
    }
}

static void serve(int c) {
    char req[2048], path[1024];
    ssize_t n = read(c, req, sizeof req - 1);
    if (n <= 0) return;
    req[n] = 0;
    if (sscanf(req, "GET %1023s", path) != 1) return reply(c, "400 Bad Request", NULL, "", 0);
    char *body = NULL;
    size_t len = 0;
    if (!strncmp(path, "/r/", 3)) {
        char loc[1100];
        snprintf(loc, sizeof loc, "Location: /f/%s\r\n", path + 3);
        reply(c, "302 Found", loc, "", 0);
    } else if (!strncmp(path, "/f/", 3) && vc_read_file(path + 3, &body, &len) == VC_OK) {
        reply(c, "200 OK", NULL, body, len);
    } else
        reply(c, "404 Not Found", NULL, "no such file", 12);
    free(body);
}

static void *server(void *arg) {
    (void)arg;
    while (!srv_stop) {
        int c = accept(srv_fd, NULL, NULL);
        if (c < 0) continue;
        serve(c);
        close(c);
    }
    return NULL;
}

static int server_start(pthread_t *th) {
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof a;
    srv_fd = socket(AF_INET, SOCK_STREAM, 0);
    if (srv_fd < 0 || bind(srv_fd, (struct sockaddr *)&a, sizeof a) || listen(srv_fd, 16) ||
        getsockname(srv_fd, (struct sockaddr *)&a, &al))
        return -1;
    srv_port = ntohs(a.sin_port);
    return pthread_create(th, NULL, server, NULL);
}

static void server_stop(pthread_t th) {
    srv_stop = 1;
    shutdown(srv_fd, SHUT_RDWR); /* (wakes accept) */
    close(srv_fd);
    pthread_join(th, NULL);
}

static char *url(const char *kind, const char *path) {
    static char u[4][512];
    static int k;
    char *s = u[k++ % 4];
    snprintf(s, 512, "http://127.0.0.1:%d/%s/%s", srv_port, kind, path);
    return s;
}

/* ---- the checks ---- */
#define IMG "tests/fixtures/vision/images/rgb_37x53.png"
#define VID "tests/fixtures/vision/video/h264_32x24.mp4"

static int same_image(const vc_image *a, const vc_image *b) {
    return a->width == b->width && a->height == b->height &&
           !memcmp(a->rgb, b->rgb, (size_t)a->width * a->height * 3);
}

static void check_images(void) {
    vc_image want, got;
    CHECK_OK(vc_image_load(IMG, VC_ALPHA_QWEN_VL_UTILS, &want));
    vc_url_fetches(1);
    int64_t t0 = vc_url_fetches(0);
    cJSON *v = cJSON_CreateString(url("f", IMG));
    CHECK_OK(vc_vl_decode_value(v, "images[0]", &got));
    CHECK_MSG(same_image(&want, &got), "the image from its URL differs from the file's");
    vc_image_free(&got);
    CHECK_OK(vc_vl_decode_value(v, "images[0]", &got)); /* the cache's copy */
    CHECK(same_image(&want, &got) && vc_url_fetches(0) == t0 + 1);
    vc_image_free(&got);
    cJSON_Delete(v);
    /* a redirect followed; an object's image key */
    v = cJSON_CreateObject();
    cJSON_AddStringToObject(v, "image", url("r", IMG));
    CHECK_OK(vc_vl_decode_value(v, "images[1]", &got));
    CHECK(same_image(&want, &got));
    vc_image_free(&got);
    cJSON_Delete(v);
    /* the grid of a row's image list with a URL equals the path's */
    vc_vl_image_config c;
    vc_vl_image_config_default(&c);
    cJSON *a = cJSON_CreateArray(), *b = cJSON_CreateArray();
    cJSON_AddItemToArray(a, cJSON_CreateString(IMG));
    cJSON_AddItemToArray(b, cJSON_CreateString(url("f", IMG)));
    vc_rl_image *ia = NULL, *ib = NULL;
    CHECK_OK(vc_vl_parse_images(a, &c, 0, "row 1", "images", &ia));
    CHECK_OK(vc_vl_parse_images(b, &c, 0, "row 1", "images", &ib));
    CHECK(ia && ib && !memcmp(ia->grid, ib->grid, sizeof ia->grid) && ia->tokens == ib->tokens);
    free(ia), free(ib);
    cJSON_Delete(a), cJSON_Delete(b);
    vc_image_free(&want);
}

/* an http(s) URL that fails: one line naming it (and status), code st */
static void expect_fail(const char *u, vc_status st, const char *also) {
    cJSON *v = cJSON_CreateString(u);
    vc_image got;
    vc_status r = vc_vl_decode_value(v, "images[0]", &got);
    const char *e = vc_last_error();
    CHECK_MSG(r == st && strstr(e, u) && strstr(e, "images[0]") && (!also || strstr(e, also)) && !strchr(e, '\n'),
              "%s: %d %s", u, r, e);
    printf("%s\n", e);
    cJSON_Delete(v);
}

static int temp_files(void) {
    const char *d = getenv("TMPDIR");
    DIR *dir = opendir(d && *d ? d : "/tmp");
    int n = 0;
    for (struct dirent *e; dir && (e = readdir(dir));) n += !strncmp(e->d_name, "verlc_url_", 10);
    if (dir) closedir(dir);
    return n;
}

static void check_videos(void) {
    vc_vl_videos vv = { .mode = VC_VIDEO_WHOLE, .patch = 14 };
    vc_vl_video_config_default(&vv.cfg, 0);
    cJSON *a = cJSON_Parse("{\"video\": \"" VID "\", \"nframes\": 4}"), *b = cJSON_Duplicate(a, 1);
    cJSON_ReplaceItemInObject(b, "video", cJSON_CreateString(url("r", VID)));
    vc_rl_image *ea = NULL, *eb = NULL;
    int na = 0, ca = 0, nb = 0, cb = 0, before = temp_files();
    CHECK_OK(vc_vl_parse_video(a, &vv, "videos[0]", &ea, &na, &ca));
    CHECK_OK(vc_vl_parse_video(b, &vv, "videos[0]", &eb, &nb, &cb));
    CHECK(na == 1 && nb == 1 && !memcmp(ea->grid, eb->grid, sizeof ea->grid) && ea->tokens == eb->tokens);
    vc_vl_pixels pa, pb;
    memset(&pa, 0, sizeof pa), memset(&pb, 0, sizeof pb);
    CHECK_OK(vc_vl_video_pixels(&vv, ea, "videos[0]", &pa));
    CHECK_OK(vc_vl_video_pixels(&vv, eb, "videos[0]", &pb));
    CHECK_MSG(pa.rows == pb.rows && pa.cols == pb.cols && pa.data && pb.data &&
              !memcmp(pa.data, pb.data, sizeof(float) * (size_t)(pa.rows * pa.cols)),
              "the video's pixels from its URL differ from the file's");
    printf("video from its URL: grid %dx%dx%d, %lld x %lld pixel values equal to the file's\n", eb->grid[0], eb->grid[1],
           eb->grid[2], (long long)pb.rows, (long long)pb.cols);
    vc_vl_pixels_free(&pa), vc_vl_pixels_free(&pb);
    free(ea), free(eb);
    /* a missing video: the URL and its status; no temporary file left */
    cJSON_ReplaceItemInObject(b, "video", cJSON_CreateString(url("f", "no_such.mp4")));
    eb = NULL, nb = cb = 0;
    CHECK(vc_vl_parse_video(b, &vv, "videos[0]", &eb, &nb, &cb) == VC_ERR_IO && strstr(vc_last_error(), "404"));
    free(eb);
    CHECK_MSG(temp_files() == before, "temporary files left: %d before, %d after", before, temp_files());
    cJSON_Delete(a), cJSON_Delete(b);
}

int main(void) {
    if (!vc_http_available()) {
        printf("built without libcurl: http(s) URLs are refused\n");
        expect_fail("http://127.0.0.1:9/a.png", VC_ERR_UNSUPPORTED, "libcurl");
        return vc_test_done();
    }
    pthread_t th;
    CHECK(server_start(&th) == 0);
    if (vc_t_fail) return vc_test_done();
    check_images();
    check_videos();
    expect_fail(url("f", "tests/fixtures/vision/images/no_such.png"), VC_ERR_IO, "HTTP status 404");
    expect_fail(url("f", "tests/fixtures/vision/dataset/chat_template.jinja"), VC_ERR_FORMAT, NULL);
    server_stop(th);
    expect_fail("http://127.0.0.1:9/a.png", VC_ERR_IO, NULL); /* (nothing listens there) */
    return vc_test_done();
}
