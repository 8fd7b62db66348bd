/* Prompt rows with videos (verl's RLHFDataset with Qwen2-VL, Qwen2.5-VL and Qwen3-VL processors) against
 * transformers: the fixture of tools/fixtures/make_video_dataset_fixture.py (tests/fixtures/vision/video_dataset:
 * mp4 / webm / avi files read as torchcodec reads them, frame lists, fps / nframes / pixel bounds / time ranges, a row
 * with an image first), input_ids compared exactly (Qwen3-VL's frame-group timestamps in the text),
 * pixel_values_videos and video_grid_thw bit for bit, Qwen2.5-VL's time steps as tokens_per_second x
 * second_per_grid_ts; bad video rows refused naming file:line. */
#include "rl/http_batch.h"
#include "vc_test.h"
#include <stdlib.h>
#include "../../src/data/vl_rows.h"
#include "verlc/chat_template.h"
#include "verlc/data.h"
#include "verlc/json.h"
#include "verlc/safetensors.h"
#include "verlc/tokenizer.h"
#include "verlc/trainer.h"
#include "verlc/vision.h"
#include <unistd.h>

#define DIR "tests/fixtures/vision/video_dataset/"
#define N_ROWS 4
#define TPS 2 /* a tokens_per_second for the Qwen2.5-VL time steps */

static vc_tokenizer *TOK;
static vc_chat_template *TMPL;
static vc_checkpoint *REF;
static cJSON *META;

static const vc_st_tensor *ref(const char *kind, const char *what, int r) {
    char k[96];
    snprintf(k, sizeof k, "%s.%s.%d", kind, what, r);
    return vc_ckpt_find(REF, k);
}

typedef struct {
    vc_vl_image_config vl;
    vc_vl_videos vv;
} kind_cfg;

static int load_kind(const char *kind, int mode, kind_cfg *k) {
    char dir[256];
    snprintf(dir, sizeof dir, DIR "%s", kind);
    memset(k, 0, sizeof *k);
    CHECK_OK(vc_vl_image_config_load(dir, &k->vl));
    CHECK_OK(vc_vl_video_config_load(dir, mode == VC_VIDEO_SPLIT, &k->vv.cfg));
    k->vv.mode = mode, k->vv.tps = TPS, k->vv.patch = k->vl.patch_size;
    return !vc_t_fail;
}

static vc_rl_data_opts opts(kind_cfg *k) {
    vc_rl_data_opts o = { .prompt_key = "prompt", .max_prompt_length = 4096, .max_samples = -1, .image_key = "images",
                          .video_key = "videos", .vl = &k->vl, .videos = &k->vv, .image_patch_size = k->vl.patch_size };
    return o;
}

/* row r's pixels: the image's rows and every vstep-th video row against transformers' */
static void cmp_row(const char *kind, const vc_rl_dataset *d, int r, int mode) {
    float *px = NULL, *ts = NULL;
    int32_t *grid = NULL;
    int n = 0;
    int64_t row = 0;
    CHECK_OK(vc_rl_prompt_visuals(d, (size_t)r, &px, &grid, &n, &row, &ts));
    const vc_st_tensor *vg = ref(kind, "vgrid", r), *vp = ref(kind, "vpix", r), *ig = ref(kind, "igrid", r);
    const vc_st_tensor *ip = ref(kind, "ipix", r), *sg = ref(kind, "sgt", r);
    int vstep = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(META, kind), r), "vstep")->valueint;
    if (!px || !vg || !vp) {
        CHECK_MSG(0, "%s row %d: pixels or reference missing", kind, r);
        return;
    }
    /* split the entries into the image's rows and the videos' rows (transformers keeps them apart) */
    int64_t at = 0, vrow = 0, bad = 0, vi = 0;
    int ok_grid = 1, k = 0;
    const int64_t *g = vg->data;
    while (k < n) {
        const vc_rl_image *e = &d->p[r].images[k];
        int64_t rows = (int64_t)grid[3 * k] * grid[3 * k + 1] * grid[3 * k + 2];
        if (!e->video) { /* the image: all its rows */
            ok_grid &= ig && grid[3 * k] == ((const int64_t *)ig->data)[0] && grid[3 * k + 1] == ((const int64_t *)ig->data)[1];
            for (int64_t i = 0; ip && i < rows * row && i < vc_st_tensor_numel(ip); i++)
                bad += px[at * row + i] != ((const float *)ip->data)[i];
            at += rows, k++;
            continue;
        }
        int span = e->groups ? e->groups : 1;
        int64_t t = e->groups ? e->groups : grid[3 * k];
        ok_grid &= vi < vg->shape[0] && g[3 * vi] == t && g[3 * vi + 1] == grid[3 * k + 1] && g[3 * vi + 2] == grid[3 * k + 2];
        for (int j = 0; j < span; j++) ok_grid &= grid[3 * (k + j)] == (mode == VC_VIDEO_SPLIT ? 1 : t);
        if (mode == VC_VIDEO_TIMED && sg)
            CHECK_MSG(ts && ts[k] == (float)TPS * ((const float *)sg->data)[vi], "%s row %d video %lld: time step %g, "
                      "transformers' %g x %g", kind, r, (long long)vi, ts ? ts[k] : -1.0, (double)TPS,
                      ((const float *)sg->data)[vi]);
        if (mode != VC_VIDEO_TIMED) CHECK_MSG(!ts, "%s row %d: time steps without Qwen2.5-VL", kind, r);
        int64_t vr = rows * span;
        for (int64_t i = 0; i < vr; i++, vrow++)
            if (vrow % vstep == 0 && vrow / vstep < vp->shape[0])
                for (int64_t c = 0; c < row; c++) bad += px[(at + i) * row + c] != ((const float *)vp->data)[(vrow / vstep) * row + c];
        at += vr, k += span, vi++;
    }
    CHECK_MSG(ok_grid && vi == vg->shape[0], "%s row %d: grids differ from transformers' (%lld videos, %lld there)", kind,
              r, (long long)vi, (long long)vg->shape[0]);
    CHECK_MSG(bad == 0 && vrow > 0, "%s row %d: %lld pixel values differ from transformers'", kind, r, (long long)bad);
    free(px), free(grid), free(ts);
}

static void golden(const char *kind, int mode) {
    kind_cfg k;
    if (!load_kind(kind, mode, &k)) return;
    vc_rl_data_opts o = opts(&k);
    vc_rl_dataset *d = NULL;
    CHECK_OK(vc_rl_dataset_load(DIR "rows.jsonl", TOK, TMPL, &o, &d));
    if (!d) return;
    CHECK(d->n == N_ROWS);
    int same = 0;
    for (int r = 0; r < (int)d->n && r < N_ROWS; r++) {
        const vc_st_tensor *ids = ref(kind, "ids", r);
        int eq = ids && ids->shape[0] == d->p[r].len &&
                 !memcmp(ids->data, d->p[r].ids, sizeof(int32_t) * (size_t)d->p[r].len);
        CHECK_MSG(eq, "%s row %d: %lld ids, transformers' %lld (or they differ)", kind, r, (long long)d->p[r].len,
                  ids ? (long long)ids->shape[0] : -1LL);
        same += eq;
        cmp_row(kind, d, r, mode);
    }
    printf("%s: %d of %d rows' ids as transformers' (videos from mp4 / webm / avi files and frame lists), pixels and "
           "grids bit for bit\n", kind, same, N_ROWS);
    vc_rl_dataset_free(d);
}

static char TMP[64];

static const char *write_row(const char *name, const char *content, const char *videos) {
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", TMP, name);
    FILE *f = fopen(path, "w");
    if (!f) return path;
    fprintf(f, "{\"data_source\": \"d\", \"prompt\": [{\"role\": \"user\", \"content\": \"1+1?\"}], "
               "\"reward_model\": {\"ground_truth\": \"2\"}}\n");
    fprintf(f, "{\"data_source\": \"d\", \"prompt\": [{\"role\": \"user\", \"content\": \"%s\"}], \"videos\": %s, "
               "\"reward_model\": {\"ground_truth\": \"2\"}}\n", content, videos);
    fclose(f);
    return path;
}

static void expect_bad(kind_cfg *k, const char *name, const char *content, const char *videos, vc_status want,
                       const char *w1) {
    vc_rl_data_opts o = opts(k);
    vc_rl_dataset *d = NULL;
    vc_status st = vc_rl_dataset_load(write_row(name, content, videos), TOK, TMPL, &o, &d);
    const char *msg = vc_last_error();
    CHECK_MSG(st == want && !d, "%s: status %s, wanted %s (%s)", name, vc_status_name(st), vc_status_name(want), msg);
    char where[96];
    snprintf(where, sizeof where, "%s:2:", name);
    CHECK_MSG(strstr(msg, where) && strstr(msg, w1), "%s: no '%s' (and file:line) in: %s", name, w1, msg);
    vc_rl_dataset_free(d);
}

static void bad_rows(void) {
    kind_cfg k;
    if (!load_kind("qwen3_vl", VC_VIDEO_SPLIT, &k)) return;
    const char *F = "tests/fixtures/vision/video_proc/frames";
    char v[512];
    expect_bad(&k, "missing.jsonl", "<video>x", "[\"tests/fixtures/vision/video/none.mp4\"]", VC_ERR_IO, "none.mp4");
    expect_bad(&k, "notvideo.jsonl", "<video>x", "[\"tests/fixtures/vision/images/rgb_37x53.png\"]", VC_ERR_FORMAT,
               "rgb_37x53.png");
    expect_bad(&k, "markers.jsonl", "<video><video>x", "[\"tests/fixtures/vision/video/h264_32x24.mp4\"]",
               VC_ERR_FORMAT, "more <video> markers");
    expect_bad(&k, "fewer.jsonl", "x", "[\"tests/fixtures/vision/video/h264_32x24.mp4\"]", VC_ERR_FORMAT,
               "0 <video> markers");
    expect_bad(&k, "both.jsonl", "<video>x", "[{\"video\": \"tests/fixtures/vision/video/h264_32x24.mp4\", \"fps\": 1, "
               "\"nframes\": 4}]", VC_ERR_FORMAT, "either `fps` or `nframes`");
    expect_bad(&k, "toomany.jsonl", "<video>x", "[{\"video\": \"tests/fixtures/vision/video/h264_32x24.mp4\", "
               "\"nframes\": 40}]", VC_ERR_ARG, "nframes should in interval");
    expect_bad(&k, "range.jsonl", "<video>x", "[{\"video\": \"tests/fixtures/vision/video/h264_32x24.mp4\", "
               "\"video_start\": 0.8, \"video_end\": 0.3}]", VC_ERR_ARG, "time range");
    snprintf(v, sizeof v, "[[\"%s/c_0.png\", \"%s/a_1.png\"]]", F, F);
    expect_bad(&k, "sizes.jsonl", "<video>x", v, VC_ERR_SHAPE, "frame 1 is");
    expect_bad(&k, "http.jsonl", "<video>x", "[\"http://127.0.0.1:9/v.mp4\"]",
               vc_http_available() ? VC_ERR_IO : VC_ERR_UNSUPPORTED, "http://127.0.0.1:9/v.mp4");
    expect_bad(&k, "kind.jsonl", "<video>x", "[5]", VC_ERR_FORMAT, "must be a path, a list of frames");
    expect_bad(&k, "nolist.jsonl", "<video>x", "\"v.mp4\"", VC_ERR_FORMAT, "must be a list of videos");
    expect_bad(&k, "badnum.jsonl", "<video>x", "[{\"video\": \"tests/fixtures/vision/video/h264_32x24.mp4\", "
               "\"max_pixels\": -3}]", VC_ERR_FORMAT, "max_pixels");
    /* a model without videos (GLM-4V): the reason by name */
    vc_rl_data_opts o = opts(&k);
    o.videos = NULL, o.no_video_reason = "video inputs of model_type glm4v are not built";
    vc_rl_dataset *d = NULL;
    CHECK(vc_rl_dataset_load(write_row("glm.jsonl", "<video>x", "[\"tests/fixtures/vision/video/h264_32x24.mp4\"]"),
                             TOK, TMPL, &o, &d) == VC_ERR_UNSUPPORTED && !d);
    CHECK(strstr(vc_last_error(), "glm.jsonl:2: videos[0]") && strstr(vc_last_error(), "glm4v are not built"));
}

int main(void) {
    setenv("VERLC_IMAGE_BACKEND", "pil", 1); /* (the references' images are the PIL backend's) */
    if (!vc_test_have_shared()) return vc_test_done();
    char tp[512], *text = NULL;
    size_t n = 0;
    snprintf(tp, sizeof tp, "%s/fixtures/tokenizers/qwen3", vc_test_shared());
    CHECK_OK(vc_tokenizer_load(tp, &TOK));
    CHECK_OK(vc_read_file("tests/fixtures/vision/dataset/chat_template.jinja", &text, &n));
    if (text) CHECK_OK(vc_chat_template_from_string(text, NULL, "<|im_end|>", &TMPL));
    free(text);
    CHECK_OK(vc_ckpt_open(DIR "reference.safetensors", &REF));
    CHECK_OK(vc_json_load_file(DIR "reference.json", &META));
    snprintf(TMP, sizeof TMP, "/tmp/verlc_dsvid_XXXXXX");
    CHECK(mkdtemp(TMP) != NULL);
    if (TOK && TMPL && REF && META) {
        golden("qwen2_vl", VC_VIDEO_WHOLE);
        golden("qwen2_5_vl", VC_VIDEO_TIMED);
        golden("qwen3_vl", VC_VIDEO_SPLIT);
        bad_rows();
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", TMP);
    if (system(cmd)) {
    }
    cJSON_Delete(META);
    vc_ckpt_close(REF);
    vc_chat_template_free(TMPL);
    vc_tokenizer_free(TOK);
    return vc_test_done();
}
