/* Prompt rows with images (verl's RLHFDataset with a Qwen2-VL processor) against transformers: the fixture of
 * tools/fixtures/make_vl_dataset_fixture.py (tests/fixtures/vision/dataset) read from JSONL (paths, file:// and data
 * URIs) and from Parquet (image bytes), input_ids compared exactly (each <|image_pad|> expanded to its grid's
 * tokens), pixel_values and image_grid_thw of vc_rl_prompt_images bit for bit; bad rows refused naming file:line. */
#include "rl/http_batch.h"
#include "../../src/rl/demo_internal.h"
#include "rl_demo_util.h"
#include "vc_test.h"
#include <stdlib.h>
#include "verlc/chat_template.h"
#include "verlc/data.h"
#include "verlc/image.h"
#include "verlc/safetensors.h"
#include "verlc/tokenizer.h"
#include "verlc/trainer.h"
#include <cjson/cJSON.h>
#include <stdint.h>
#include <unistd.h>

#define DIR "tests/fixtures/vision/dataset/"
#define N_ROWS 6

static vc_tokenizer *TOK;
static vc_chat_template *TMPL;
static vc_vl_image_config VL;
static vc_checkpoint *REF;
static double WORST; /* largest pixel difference over every comparison */
static char TMPDIR_[64];

static vc_rl_data_opts opts(void) {
    vc_rl_data_opts o = { .prompt_key = "prompt", .max_prompt_length = 4096, .max_samples = -1, .image_key = "images",
                          .video_key = "videos", .vl = &VL, .image_patch_size = 14 };
    return o;
}

static void test_base64(void) {
    uint8_t b[16];
    for (int i = 0; i < 16; i++) b[i] = (uint8_t)(i * 37 + 200);
    for (size_t n = 0; n <= 16; n++) {
        char *s = vc_base64_encode("x:", b, n);
        uint8_t *back = NULL;
        size_t m = 0;
        CHECK(s && strlen(s) == 2 + (n + 2) / 3 * 4);
        CHECK_OK(vc_base64_decode(s + 2, strlen(s + 2), "t", &back, &m));
        CHECK(m == n && (n == 0 || !memcmp(back, b, n)));
        free(s), free(back);
    }
    uint8_t *o = NULL;
    size_t m = 0;
    CHECK_OK(vc_base64_decode("aGk\n=", 5, "t", &o, &m)); /* "hi", whitespace skipped */
    CHECK(m == 2 && o && !memcmp(o, "hi", 2));
    free(o);
    CHECK(vc_base64_decode("aGk*", 4, "t", &o, &m) == VC_ERR_FORMAT && !o);
    CHECK(vc_base64_decode("a", 1, "t", &o, &m) == VC_ERR_FORMAT);
    CHECK(vc_base64_decode("aG=k", 4, "t", &o, &m) == VC_ERR_FORMAT);
}

static const vc_st_tensor *ref(const char *fmt, int r) {
    char k[64];
    snprintf(k, sizeof k, fmt, r);
    const vc_st_tensor *t = vc_ckpt_find(REF, k);
    CHECK_MSG(t != NULL, "reference %s missing", k);
    return t;
}

/* prompt r's pixels against transformers' (pixels.R.levels / .table / .grid) */
static void cmp_pixels(const char *file, const vc_rl_dataset *d, int r) {
    float *px = NULL;
    int32_t *grid = NULL;
    int n = 0;
    int64_t row = 0;
    CHECK_OK(vc_rl_prompt_images(d, (size_t)r, &px, &grid, &n, &row));
    const vc_st_tensor *lv = ref("pixels.%d.levels", r), *tb = ref("pixels.%d.table", r), *gr = ref("pixels.%d.grid", r);
    if (!px || !lv || !tb || !gr) goto out;
    CHECK_MSG(n == d->p[r].n_images && gr->shape[0] == n, "%s row %d: %d images, transformers' %lld", file, r, n,
              (long long)gr->shape[0]);
    const int64_t *g = gr->data;
    int64_t rows = 0;
    for (int k = 0; k < n && k < gr->shape[0]; k++) {
        CHECK_MSG(grid[3 * k] == g[3 * k] && grid[3 * k + 1] == g[3 * k + 1] && grid[3 * k + 2] == g[3 * k + 2],
                  "%s row %d image %d: grid %d %d %d, transformers' %lld %lld %lld", file, r, k, grid[3 * k],
                  grid[3 * k + 1], grid[3 * k + 2], (long long)g[3 * k], (long long)g[3 * k + 1],
                  (long long)g[3 * k + 2]);
        CHECK(!memcmp(d->p[r].images[k].grid, grid + 3 * k, 3 * sizeof(int32_t)));
        rows += (int64_t)grid[3 * k] * grid[3 * k + 1] * grid[3 * k + 2];
    }
    CHECK_MSG(rows == lv->shape[0] && row == lv->shape[1], "%s row %d: pixels %lld x %lld, transformers' %lld x %lld",
              file, r, (long long)rows, (long long)row, (long long)lv->shape[0], (long long)lv->shape[1]);
    if (rows != lv->shape[0] || row != lv->shape[1]) goto out;
    const float *table = tb->data;
    const uint8_t *levels = lv->data;
    int64_t span = row / 3, inexact = 0, rows_differ = 0;
    double worst = 0;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < row; j++) {
            float want = table[(j / span) * 256 + levels[i * row + j]], got = px[i * row + j];
            double dd = isnan(got) ? INFINITY : fabs((double)want - got);
            if (dd > worst) worst = dd;
            inexact += memcmp(&want, &got, sizeof got) != 0;
        }
    for (int64_t i = 1; i < rows; i++) rows_differ += memcmp(levels + i * row, levels + (i - 1) * row, (size_t)row) != 0;
    CHECK_MSG(rows_differ > 0, "row %d: the reference's patch rows are all alike (ordering untested)", r);
    if (worst > WORST) WORST = worst;
    CHECK_MSG(worst <= 1e-5, "%s row %d: pixel values differ from transformers' by up to %g", file, r, worst);
    CHECK_MSG(inexact == 0, "%s row %d: %lld of %lld pixel values not bit-identical", file, r, (long long)inexact,
              (long long)(rows * row));
out:
    free(px), free(grid);
}

static void test_golden(const char *file) {
    vc_rl_data_opts o = opts();
    vc_rl_dataset *d = NULL;
    CHECK_OK(vc_rl_dataset_load(file, TOK, TMPL, &o, &d));
    if (!d) return;
    CHECK(d->n == N_ROWS && d->vl && d->image_patch_size == 14);
    int pad = vc_tokenizer_token_to_id(TOK, "<|image_pad|>");
    for (int r = 0; r < (int)d->n && r < N_ROWS; r++) {
        const vc_rl_prompt *p = &d->p[r];
        const vc_st_tensor *ids = ref("ids.%d", r);
        if (!ids) continue;
        int same = ids->shape[0] == p->len && !memcmp(ids->data, p->ids, sizeof(int32_t) * (size_t)p->len);
        CHECK_MSG(same, "%s row %d: %lld ids, transformers' %lld%s", file, r, (long long)p->len,
                  (long long)ids->shape[0], ids->shape[0] == p->len ? " (values differ)" : "");
        int64_t pads = 0, want = 0;
        for (int64_t t = 0; t < p->len; t++) pads += p->ids[t] == pad;
        for (int k = 0; k < p->n_images; k++) want += p->images[k].tokens;
        CHECK(pads == want && (p->n_images == 0 || pads > p->n_images)); /* the pads were expanded */
        CHECK((p->vl_messages != NULL) == (p->n_images > 0));
        if (p->n_images) cmp_pixels(file, d, r);
        else {
            float *px = (float *)1;
            int32_t *g = (int32_t *)1;
            int n = -1;
            int64_t row = -1;
            CHECK_OK(vc_rl_prompt_images(d, (size_t)r, &px, &g, &n, &row));
            CHECK(!px && !g && n == 0);
        }
    }
    /* row 2: "First <image> then <image>, and which is larger?" as verl's content list */
    const cJSON *c = d->n > 2 && d->p[2].vl_messages ? cJSON_GetObjectItem(d->p[2].vl_messages->child, "content") : NULL;
    CHECK(cJSON_GetArraySize(c) == 5);
    const char *types[] = { "text", "image", "text", "image", "text" };
    for (int k = 0; k < 5 && c; k++)
        CHECK(!strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(c, k), "type")->valuestring, types[k]));
    const cJSON *t0 = c ? cJSON_GetObjectItem(cJSON_GetArrayItem(c, 0), "text") : NULL;
    CHECK(cJSON_IsString(t0) && !strcmp(t0->valuestring, "First "));
    vc_rl_dataset_free(d);
}

/* GLM-4.1V's processor and a chat template with its image markup on the same rows
 * (tools/fixtures/make_glm4v_dataset_fixture.py): the Qwen3 tokenizer with its image tokens renamed to GLM's, each
 * <|image|> expanded to Glm4vImageProcessor's grid; ids and grids as transformers' Glm4vProcessor gives them */
static void test_glm4v(void) {
    char cmd[1400], tdir[600];
    const char *G = "tests/fixtures/vision/glm4v/";
    snprintf(tdir, sizeof tdir, "%s/glm_tok", TMPDIR_);
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cd %s/fixtures/tokenizers/qwen3 && for f in tokenizer.json "
             "tokenizer_config.json; do sed 's/<|image_pad|>/<|image|>/g; s/<|vision_start|>/<|begin_of_image|>/g; "
             "s/<|vision_end|>/<|end_of_image|>/g' $f > %s/$f; done", tdir, vc_test_shared(), tdir);
    CHECK(system(cmd) == 0);
    vc_tokenizer *tok = NULL;
    vc_chat_template *tmpl = NULL;
    vc_checkpoint *ref = NULL;
    vc_vl_image_config vl;
    char *text = NULL, path[700];
    size_t n = 0;
    CHECK_OK(vc_tokenizer_load(tdir, &tok));
    snprintf(path, sizeof path, "%schat_template.jinja", G);
    CHECK_OK(vc_read_file(path, &text, &n));
    if (text) CHECK_OK(vc_chat_template_from_string(text, NULL, NULL, &tmpl));
    free(text);
    CHECK_OK(vc_vl_image_config_load(G, &vl));
    snprintf(path, sizeof path, "%sdataset.safetensors", G);
    CHECK_OK(vc_ckpt_open(path, &ref));
    vc_rl_data_opts o = opts();
    o.vl = &vl, o.image_token = "<|image|>";
    vc_rl_dataset *d = NULL;
    if (tok && tmpl && ref) CHECK_OK(vc_rl_dataset_load(DIR "rows.jsonl", tok, tmpl, &o, &d));
    int rows = 0;
    for (int r = 0; d && r < (int)d->n; r++) {
        const vc_rl_prompt *p = &d->p[r];
        char k[32];
        snprintf(k, sizeof k, "ids.%d", r);
        const vc_st_tensor *ids = vc_ckpt_find(ref, k);
        snprintf(k, sizeof k, "grid.%d", r);
        const vc_st_tensor *gr = vc_ckpt_find(ref, k);
        int same = ids && ids->shape[0] == p->len && !memcmp(ids->data, p->ids, sizeof(int32_t) * (size_t)p->len);
        CHECK_MSG(same, "GLM-4.1V row %d: %lld ids, transformers' %lld", r, (long long)p->len,
                  ids ? (long long)ids->shape[0] : -1LL);
        CHECK((gr != NULL) == (p->n_images > 0) && (!gr || gr->shape[0] == p->n_images));
        for (int i = 0; gr && i < p->n_images; i++)
            for (int a = 0; a < 3; a++)
                CHECK_MSG(p->images[i].grid[a] == ((const int64_t *)gr->data)[3 * i + a],
                          "GLM-4.1V row %d image %d: grid", r, i);
        rows += same;
    }
    printf("GLM-4.1V: %d rows' ids as transformers' Glm4vProcessor\n", rows);
    CHECK(d && rows == (int)d->n && rows == N_ROWS);
    vc_rl_dataset_free(d);
    vc_ckpt_close(ref);
    vc_chat_template_free(tmpl);
    vc_tokenizer_free(tok);
}

/* parquet image bytes come through as data URIs */
static void test_parquet_bytes(void) {
    vc_jsonl *j = NULL;
    CHECK_OK(vc_jsonl_read(DIR "rows.parquet", VC_JSONL_STRICT, &j));
    const cJSON *b = NULL;
    if (j) CHECK_OK(vc_jsonl_field(j, 0, "images", &b));
    b = b ? cJSON_GetObjectItem(cJSON_GetArrayItem(b, 0), "bytes") : NULL;
    CHECK(cJSON_IsString(b) && !strncmp(b->valuestring, VC_DATA_URI_BINARY "iVBORw0KGgo", strlen(VC_DATA_URI_BINARY) + 11));
    vc_jsonl_free(j);
}

/* a Parquet file written by Hugging Face datasets (tools/fixtures/make_hf_parquet_fixture.py): its Image feature
 * decodes to PIL images, which verl's _build_messages converts with convert("RGB") (an RGBA image's alpha dropped,
 * not pasted on white as for the {bytes} dicts of a plain Parquet file) before fetch_image; the metadata of datasets 5
 * (List) and of older versions (Sequence) alike */
static void test_hf_parquet(void) {
    vc_checkpoint *keep = REF, *hf = NULL;
    CHECK_OK(vc_ckpt_open(DIR "reference_hf.safetensors", &hf));
    const char *files[] = { DIR "rows_hf.parquet", DIR "rows_hf_seq.parquet" };
    for (int f = 0; f < 2 && hf; f++) {
        vc_jsonl *j = NULL;
        const cJSON *im = NULL;
        CHECK_OK(vc_jsonl_read(files[f], VC_JSONL_STRICT | VC_JSONL_HF_IMAGES, &j));
        if (j) CHECK_OK(vc_jsonl_field(j, 1, "images", &im));
        CHECK_MSG(cJSON_GetArraySize(im) == 2 && cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetArrayItem(im, 1), "pil")),
                  "%s: the Image feature's objects are not marked pil", files[f]);
        vc_jsonl_free(j);
        j = NULL, im = NULL; /* as pandas reads it (verl's SFT datasets): {bytes, path} dicts */
        CHECK_OK(vc_jsonl_read(files[f], VC_JSONL_STRICT, &j));
        if (j) CHECK_OK(vc_jsonl_field(j, 1, "images", &im));
        CHECK(cJSON_GetArraySize(im) == 2 && !cJSON_GetObjectItem(cJSON_GetArrayItem(im, 1), "pil"));
        vc_jsonl_free(j);
        vc_rl_data_opts o = opts();
        vc_rl_dataset *d = NULL;
        CHECK_OK(vc_rl_dataset_load(files[f], TOK, TMPL, &o, &d));
        REF = hf;
        CHECK(d && d->n == 3);
        for (int r = 0; d && r < (int)d->n; r++) {
            const vc_st_tensor *ids = ref("ids.%d", r);
            const vc_rl_prompt *p = &d->p[r];
            CHECK_MSG(ids && ids->shape[0] == p->len && !memcmp(ids->data, p->ids, sizeof(int32_t) * (size_t)p->len),
                      "%s row %d: %lld ids, transformers' %lld", files[f], r, (long long)p->len,
                      ids ? (long long)ids->shape[0] : -1LL);
            CHECK(p->n_images > 0 && p->images[0].pil);
            cmp_pixels(files[f], d, r);
        }
        REF = keep;
        vc_rl_dataset_free(d);
    }
    vc_ckpt_close(hf);
}

/* ---- bad rows ---- */

static const char *write_rows(const char *name, const char *row2) {
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", TMPDIR_, name);
    FILE *f = fopen(path, "w");
    if (!f) return path;
    fprintf(f, "{\"data_source\": \"d\", \"prompt\": [{\"role\": \"user\", \"content\": \"1+1?\"}], \"images\": [], "
               "\"reward_model\": {\"ground_truth\": \"2\"}}\n%s\n", row2);
    fclose(f);
    return path;
}

#define GOOD_IMG "tests/fixtures/vision/images/rgb_37x53.png"

static void row_json(char *buf, size_t cap, const char *content, const char *images) {
    snprintf(buf, cap, "{\"data_source\": \"d\", \"prompt\": [{\"role\": \"user\", \"content\": \"%s\"}], \"images\": "
                       "%s, \"reward_model\": {\"ground_truth\": \"2\"}}", content, images);
}

/* loading a file whose line 2 is row (content, images) fails with st naming file:2 and each of the words */
static void expect_bad(const char *name, const char *content, const char *images, const vc_rl_data_opts *o,
                       vc_status want, const char *w1, const char *w2) {
    char row[2048], where[300];
    row_json(row, sizeof row, content, images);
    const char *path = write_rows(name, row);
    snprintf(where, sizeof where, "%s:2:", path);
    vc_rl_dataset *d = NULL;
    vc_status st = vc_rl_dataset_load(path, TOK, TMPL, o, &d);
    const char *msg = vc_last_error();
    CHECK_MSG(st == want && !d, "%s: status %s, wanted %s (%s)", name, vc_status_name(st), vc_status_name(want), msg);
    CHECK_MSG(strstr(msg, where) != NULL, "%s: the message does not name %s: %s", name, where, msg);
    CHECK_MSG(!w1 || strstr(msg, w1), "%s: no '%s' in: %s", name, w1, msg);
    CHECK_MSG(!w2 || strstr(msg, w2), "%s: no '%s' in: %s", name, w2, msg);
    vc_rl_dataset_free(d);
}

static void test_bad_rows(void) {
    vc_rl_data_opts o = opts();
    char corrupt[300], buf[600];
    snprintf(corrupt, sizeof corrupt, "%s/corrupt.png", TMPDIR_);
    FILE *f = fopen(corrupt, "wb");
    if (f) fwrite("\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0", 1, 17, f), fclose(f);
    expect_bad("missing.jsonl", "<image>what?", "[\"tests/fixtures/vision/images/no_such.png\"]", &o, VC_ERR_IO,
               "images[0]", "no_such.png");
    snprintf(buf, sizeof buf, "[{\"image\": \"%s\"}]", corrupt);
    expect_bad("corrupt.jsonl", "<image>what?", buf, &o, VC_ERR_FORMAT, "images[0]", NULL);
    /* an http(s) URL that cannot be fetched (nothing listens on port 9): one line naming it */
    expect_bad("http.jsonl", "<image>what?", "[\"http://127.0.0.1:9/a.png\"]", &o,
               vc_http_available() ? VC_ERR_IO : VC_ERR_UNSUPPORTED, "http://127.0.0.1:9/a.png", "images[0]");
    expect_bad("more.jsonl", "<image><image>what?", "[\"" GOOD_IMG "\"]", &o, VC_ERR_FORMAT, "more <image> markers",
               NULL);
    expect_bad("fewer.jsonl", "<image>what?", "[\"" GOOD_IMG "\", \"" GOOD_IMG "\"]", &o, VC_ERR_FORMAT,
               "1 <image> markers", "2 images");
    expect_bad("video.jsonl", "<image><video>what?", "[\"" GOOD_IMG "\"]", &o, VC_ERR_FORMAT,
               "more <video> markers in the messages than the 0 videos", NULL);
    expect_bad("b64.jsonl", "<image>what?", "[{\"bytes\": \"data:application/octet-stream;base64,iVB*\"}]", &o,
               VC_ERR_FORMAT, "not base64", NULL);
    /* a PIL image's marks (parquet_hf.c writes them): a pil that is not a boolean, a datasets mode not built */
    expect_bad("pil.jsonl", "<image>what?", "[{\"image\": \"" GOOD_IMG "\", \"pil\": 1}]", &o, VC_ERR_FORMAT,
               "images[0].pil must be true or false", NULL);
    expect_bad("pil_mode.jsonl", "<image>what?", "[{\"image\": \"" GOOD_IMG "\", \"pil\": true, \"pil_mode\": \"L\"}]",
               &o, VC_ERR_UNSUPPORTED, "images[0]", "mode L");
    expect_bad("notlist.jsonl", "<image>what?", "\"" GOOD_IMG "\"", &o, VC_ERR_FORMAT, "must be a list", NULL);
    expect_bad("nosrc.jsonl", "<image>what?", "[{\"max_pixels\": 100}]", &o, VC_ERR_FORMAT, "none of bytes", NULL);
    /* a row with videos */
    char row[1024];
    snprintf(row, sizeof row, "{\"data_source\": \"d\", \"prompt\": [{\"role\": \"user\", \"content\": \"<video>x\"}],"
                              " \"videos\": [\"v.mp4\"], \"reward_model\": {\"ground_truth\": \"2\"}}");
    const char *path = write_rows("videos.jsonl", row);
    vc_rl_dataset *d = NULL;
    CHECK(vc_rl_dataset_load(path, TOK, TMPL, &o, &d) == VC_ERR_UNSUPPORTED && !d);
    CHECK(strstr(vc_last_error(), "videos.jsonl:2: videos[0]") && strstr(vc_last_error(), "takes no video inputs"));
    /* a model without image inputs: rows with images refused, rows without them read */
    vc_rl_data_opts t = opts();
    t.vl = NULL;
    t.no_image_reason = "model_type qwen2 has no vision_config";
    expect_bad("textmodel.jsonl", "<image>what?", "[\"" GOOD_IMG "\"]", &t, VC_ERR_UNSUPPORTED, "images: the row has 1 "
               "image", "model_type qwen2 has no vision_config");
    path = write_rows("textonly.jsonl", "");
    CHECK_OK(vc_rl_dataset_load(path, TOK, TMPL, &t, &d));
    CHECK(d && d->n == 1 && d->p[0].n_images == 0 && !d->vl);
    vc_rl_dataset_free(d);
    d = NULL;
    /* too long: truncation through the image's tokens refused; filtered by the expanded length. The image row is
     * 34 tokens with its 6 pads, the pads among the last 8; the text row is longer than 20 too */
    vc_rl_data_opts l = opts();
    l.max_prompt_length = 20;
    l.truncation = "right";
    expect_bad("cut.jsonl", "What is shown in the picture?<image>", "[\"" GOOD_IMG "\"]", &l, VC_ERR_ARG,
               "would cut through an image", NULL);
    l.truncation = "left"; /* keeps the last 20: the image's pads lie within them */
    path = write_rows("left.jsonl", "{\"data_source\": \"d\", \"prompt\": [{\"role\": \"user\", \"content\": "
                                    "\"What is shown in the picture?<image>\"}], \"images\": [\"" GOOD_IMG "\"], "
                                    "\"reward_model\": {\"ground_truth\": \"2\"}}");
    l.max_prompt_length = 4096;
    CHECK_OK(vc_rl_dataset_load(path, TOK, TMPL, &l, &d));
    int64_t full = d && d->n == 2 ? d->p[1].len : 0;
    CHECK_MSG(full == 34, "the image row is %lld tokens", (long long)full);
    vc_rl_dataset_free(d);
    d = NULL;
    l.max_prompt_length = 20;
    CHECK_OK(vc_rl_dataset_load(path, TOK, TMPL, &l, &d));
    CHECK_MSG(d && d->n == 2 && d->p[1].len == 20 && d->n_truncated == 2, "n %zu len %lld truncated %zu", d ? d->n : 0,
              d && d->n > 1 ? (long long)d->p[1].len : -1LL, d ? d->n_truncated : 0);
    vc_rl_dataset_free(d);
    d = NULL;
    l.filter_overlong = 1;
    l.max_prompt_length = full - 1;
    CHECK_OK(vc_rl_dataset_load(path, TOK, TMPL, &l, &d));
    CHECK(d && d->n == 1 && d->n_filtered == 1);
    vc_rl_dataset_free(d);
    d = NULL;
    l.max_prompt_length = full;
    CHECK_OK(vc_rl_dataset_load(path, TOK, TMPL, &l, &d));
    CHECK(d && d->n == 2 && d->n_filtered == 0 && d->p[1].len == full && d->p[1].n_images == 1);
    vc_rl_dataset_free(d);
    unlink(corrupt);
}

/* ---- the trainer's wiring: data.image_key with the model's vision_config and preprocessor_config.json ---- */

static vc_status trainer_load(const char *model, const char *tokenizer, const char *train) {
    char buf[2048], *argv[32];
    snprintf(buf, sizeof buf, "actor_rollout_ref.model.path=%s|data.tokenizer=%s|data.train_files=%s|data.val_files=null|"
             "data.train_batch_size=2|data.max_prompt_length=200|data.max_response_length=3|actor_rollout_ref.rollout.n=2|"
             "algorithm.adv_estimator=grpo|actor_rollout_ref.actor.ppo_mini_batch_size=2|trainer.total_training_steps=1|"
             "trainer.default_local_dir=%s/run|trainer.resume_mode=disable", model, tokenizer, train, TMPDIR_);
    int n = 0;
    for (char *s = strtok(buf, "|"); s && n < 32; s = strtok(NULL, "|")) argv[n++] = s;
    vc_config *cfg = NULL;
    vc_status st = vc_config_load_ex(NULL, 0, n, argv, &cfg);
    vc_rl_trainer *t = NULL;
    if (!st) vc_config_set_quiet(cfg, 1), st = vc_rl_trainer_new(cfg, &t);
    vc_rl_trainer_free(t);
    vc_config_free(cfg);
    return st;
}

static void test_trainer(void) {
    char dir[128], model[160], vlm[160], cmd[600];
    snprintf(dir, sizeof dir, "%s/trainer", TMPDIR_);
    demo_model_setup(dir, 3);
    snprintf(model, sizeof model, "%s/model", dir);
    char row[1024];
    row_json(row, sizeof row, "<image>what?", "[\"" GOOD_IMG "\"]");
    char tp[300], train[300];
    snprintf(train, sizeof train, "%s", write_rows("train_images.jsonl", row)); /* write_rows' buffer is reused */
    snprintf(tp, sizeof tp, "%s", train);
    /* a text model: rows with images refused by row and key */
    vc_status st = trainer_load(model, model, tp);
    CHECK_MSG(st == VC_ERR_UNSUPPORTED && strstr(vc_last_error(), "train_images.jsonl:2: images: the row has 1 image") &&
              strstr(vc_last_error(), "has no vision_config"), "text model: %s: %s", vc_status_name(st), vc_last_error());
    /* text rows with empty image lists load */
    snprintf(tp, sizeof tp, "%s", write_rows("train_plain.jsonl", ""));
    CHECK_OK(trainer_load(model, model, tp));
    /* a Qwen2-VL checkpoint without, then with, preprocessor_config.json */
    snprintf(vlm, sizeof vlm, "%s/vl", dir);
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp tests/fixtures/models/qwen2_vl_image/config.json "
             "tests/fixtures/models/qwen2_vl_image/model.safetensors %s/", vlm, vlm);
    CHECK(system(cmd) == 0);
    snprintf(tp, sizeof tp, "%s", train);
    st = trainer_load(vlm, model, tp);
    CHECK_MSG(st == VC_ERR_UNSUPPORTED && strstr(vc_last_error(), "preprocessor_config.json is not there"),
              "no preprocessor config: %s: %s", vc_status_name(st), vc_last_error());
    snprintf(cmd, sizeof cmd, "cp " DIR "preprocessor_config.json %s/", vlm);
    CHECK(system(cmd) == 0);
    st = trainer_load(vlm, model, tp); /* images on: the demo tokenizer's template renders no image pad */
    CHECK_MSG(st == VC_ERR_FORMAT && strstr(vc_last_error(), "train_images.jsonl:2:") &&
              strstr(vc_last_error(), "holds 0 <|image_pad|> tokens for 1 images"), "images on: %s: %s",
              vc_status_name(st), vc_last_error());
}

int main(void) {
    setenv("VERLC_IMAGE_BACKEND", "pil", 1); /* (the references are the PIL backend's; tests/vision/test_tv_proc.c
                                              * checks the torchvision one, the default) */
    if (!vc_test_have_shared()) return vc_test_done();
    char tp[512], *text = NULL;
    size_t n = 0;
    snprintf(tp, sizeof tp, "%s/fixtures/tokenizers/qwen3", vc_test_shared());
    CHECK_OK(vc_tokenizer_load(tp, &TOK));
    CHECK_OK(vc_read_file(DIR "chat_template.jinja", &text, &n));
    if (text) CHECK_OK(vc_chat_template_from_string(text, NULL, "<|im_end|>", &TMPL));
    free(text);
    CHECK_OK(vc_vl_image_config_load(DIR, &VL));
    CHECK_OK(vc_ckpt_open(DIR "reference.safetensors", &REF));
    snprintf(TMPDIR_, sizeof TMPDIR_, "/tmp/verlc_dsimg_XXXXXX");
    CHECK(mkdtemp(TMPDIR_) != NULL);
    if (TOK && TMPL && REF) {
        test_base64();
        test_golden(DIR "rows.jsonl");
        test_golden(DIR "rows.parquet");
        test_parquet_bytes();
        test_hf_parquet();
        test_bad_rows();
        test_trainer();
        test_glm4v();
    }
    printf("largest pixel difference from transformers: %g\n", WORST);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", TMPDIR_);
    if (system(cmd)) {
    }
    vc_ckpt_close(REF);
    vc_chat_template_free(TMPL);
    vc_tokenizer_free(TOK);
    return vc_test_done();
}
