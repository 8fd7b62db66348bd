/* SFT messages rows with videos (verl's MultiTurnSFTDataset: data.video_key, <video> markers, each video through
 * fetch_video and handed to the processor without its timing) on Qwen2-VL's and Qwen2.5-VL's processors: every row's
 * ids and loss mask are those verl's per-message tokenization gives with transformers' processors, the videos' grids
 * and pixels (sampled rows) are the processors', Qwen2.5-VL's time step is its second_per_grid_ts (2 / 24: without the
 * timing transformers takes 24 frames per second) times tokens_per_second
 * (tests/fixtures/vision/sft_video, tools/fixtures/make_sft_video_fixture.py); a video in a row of a model without
 * video inputs, or of Qwen3-VL (not built for SFT rows), is refused naming the row; `verlc sft` on those rows trains a
 * tiny Qwen2-VL's tower, within its memory plan. */
#include "rl/rl_cli_util.h"
#include "train/sft_internal.h"
#include "data/vl_rows.h"
#include "sft_test_util.h"
#include "vc_test.h"
#include "verlc/json.h"
#include "verlc/safetensors.h"
#include "verlc/vision.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FIX "tests/fixtures/vision/sft_video"

static const vc_st_tensor *ref(const vc_checkpoint *ck, const char *kind, const char *what, size_t row) {
    char name[128];
    snprintf(name, sizeof name, "%s.%s.%zu", kind, what, row);
    return vc_ckpt_find(ck, name);
}

/* row i of d against the reference's ids and loss mask, its video entries' grids and time steps */
static void check_row(const vc_checkpoint *ck, const char *kind, const sft_data *d, size_t i, int timed) {
    const vc_st_tensor *ids = ref(ck, kind, "ids", i), *mask = ref(ck, kind, "mask", i), *vg = ref(ck, kind, "vgrid", i);
    CHECK(ids && mask && vg);
    if (!ids || !mask || !vg) return;
    const int32_t *x = (const int32_t *)ids->data, *m = (const int32_t *)mask->data;
    int64_t n = d->cu[i + 1] - d->cu[i], bad = 0, badm = 0;
    CHECK_MSG(n == ids->shape[0], "%s row %zu: %lld ids, verl's dataset gives %lld", kind, i, (long long)n,
              (long long)ids->shape[0]);
    for (int64_t t = 0; t < n && t < ids->shape[0]; t++) {
        bad += d->ids[d->cu[i] + t] != x[t];
        badm += (d->mask[d->cu[i] + t] > 0) != (m[t] > 0);
    }
    CHECK_MSG(bad == 0 && badm == 0, "%s row %zu: %lld ids and %lld loss-mask entries differ from verl's", kind, i,
              (long long)bad, (long long)badm);
    const int64_t *g = (const int64_t *)vg->data;
    const vc_st_tensor *sgt = ref(ck, kind, "sgt", i);
    int v = 0;
    for (int64_t k = d->img_cu[i]; k < d->img_cu[i + 1]; k++) {
        const vc_rl_image *e = &d->img[k];
        if (!e->video) continue;
        CHECK_MSG(v < vg->shape[0] && e->grid[0] == g[3 * v] && e->grid[1] == g[3 * v + 1] && e->grid[2] == g[3 * v + 2],
                  "%s row %zu video %d: grid %dx%dx%d", kind, i, v, e->grid[0], e->grid[1], e->grid[2]);
        if (timed) { /* Qwen2.5-VL: tokens_per_second 2 times second_per_grid_ts, in float32 as the model takes it */
            float want = sgt && v < sgt->shape[0] ? 2.0f * ((const float *)sgt->data)[v] : -1;
            CHECK_MSG(e->t_scale == want, "%s row %zu video %d: time step %.9g, verl's %.9g", kind, i, v, e->t_scale,
                      want);
        } else CHECK(e->t_scale == 0);
        v++;
    }
    CHECK_MSG(v == vg->shape[0], "%s row %zu: %d videos, verl's %lld", kind, i, v, (long long)vg->shape[0]);
}

/* the row's pixels (vc_vl_visuals_pixels over its entries): the videos' rows are the processor's sampled ones */
static void check_pixels(const vc_checkpoint *ck, const char *kind, const vc_vl_image_config *vl,
                         const vc_vl_videos *vv, const sft_data *d, size_t i, int vstep) {
    float *px = NULL, *ts = NULL;
    int32_t *grid = NULL;
    int64_t cols = 0;
    int n = (int)(d->img_cu[i + 1] - d->img_cu[i]);
    CHECK_OK(vc_vl_visuals_pixels(vl, 0, vv, d->img + d->img_cu[i], n, "row", &px, &grid, &cols, &ts));
    const vc_st_tensor *vp = ref(ck, kind, "vpix", i);
    CHECK(vp && px);
    if (!vp || !px) return;
    /* the video rows follow the image rows in the row's order: find where each video's rows start */
    int64_t at = 0, vrow = 0;
    double err = 0;
    int64_t checked = 0;
    for (int k = 0; k < n; k++) {
        const vc_rl_image *e = &d->img[d->img_cu[i] + k];
        int64_t rows = (int64_t)e->grid[0] * e->grid[1] * e->grid[2];
        for (int64_t r = 0; e->video && r < rows; r++, vrow++)
            if (vrow % vstep == 0 && vrow / vstep < vp->shape[0]) {
                const float *want = (const float *)vp->data + (vrow / vstep) * cols;
                for (int64_t c = 0; c < cols; c++) err = fmax(err, fabs((double)px[(at + r) * cols + c] - want[c]));
                checked++;
            }
        at += rows;
    }
    printf("%s row %zu: %lld sampled video rows within %.3g of the processor's\n", kind, i, (long long)checked, err);
    CHECK_MSG(checked == vp->shape[0] && err <= 1e-6, "%s row %zu: %lld of %lld rows, max diff %g", kind, i,
              (long long)checked, (long long)vp->shape[0], err);
    free(px), free(grid), free(ts);
}

static void test_kind(const char *kind, int timed, const vc_tokenizer *tok, const vc_chat_template *tmpl,
                      const vc_checkpoint *ck, const cJSON *meta) {
    char dir[256];
    snprintf(dir, sizeof dir, "tests/fixtures/vision/video_dataset/%s", kind);
    char pre[300];
    snprintf(pre, sizeof pre, "%s/preprocessor_config.json", dir);
    vc_vl_image_config vl;
    vc_vl_videos vv = { .mode = timed ? VC_VIDEO_TIMED : VC_VIDEO_WHOLE, .tps = 2, .patch = 14, .no_metadata = 1 };
    CHECK_OK(vc_vl_image_config_load(pre, &vl));
    CHECK_OK(vc_vl_video_config_load(dir, 0, &vv.cfg));
    int32_t pad = vc_tokenizer_token_to_id(tok, VC_VL_IMAGE_TOKEN), vpad = vc_tokenizer_token_to_id(tok, VC_VL_VIDEO_TOKEN);
    sft_tok tk = { tok, tmpl, vc_tokenizer_eos_id(tok), NULL, "images", &vl, NULL, VC_VL_IMAGE_TOKEN, pad,
                   "videos", &vv, NULL, VC_VL_VIDEO_TOKEN, vpad };
    vc_sft_config c;
    vc_sft_config_default(&c);
    c.max_length = 4096;
    c.skip_bad_lines = 0;
    sft_data d;
    CHECK_OK(sft_data_load(&c, FIX "/rows.jsonl", &tk, &d));
    CHECK(d.n == 3);
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(meta, kind);
    for (size_t i = 0; i < d.n && i < 3; i++) {
        check_row(ck, kind, &d, i, timed);
        char *tr = trained(tok, &d, i);
        CHECK_MSG(!strstr(tr, "video_pad") && (i != 1 || (strstr(tr, "The colour.") && strstr(tr, "Nothing at all."))),
                  "%s row %zu trains on [%s]", kind, i, tr);
        free(tr);
        const cJSON *r = cJSON_GetArrayItem(rows, (int)i);
        const cJSON *st = r ? cJSON_GetObjectItemCaseSensitive(r, "vstep") : NULL;
        check_pixels(ck, kind, &vl, &vv, &d, i, cJSON_IsNumber(st) ? st->valueint : 1);
    }
    if (d.n) sft_data_free(&d);
    /* without video inputs (a model that takes none): the row is refused by name, not skipped */
    tk.vv = NULL;
    tk.no_video_reason = "videos in SFT rows of model_type qwen3_vl are not built";
    c.skip_bad_lines = 1;
    CHECK(sft_data_load(&c, FIX "/rows.jsonl", &tk, &d) == VC_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(vc_last_error(), "rows.jsonl:1") && strstr(vc_last_error(), "qwen3_vl are not built"), "%s",
              vc_last_error());
}

/* `verlc sft` on the rows: a tiny random Qwen2-VL with the video processor's config trains its tower on them */
static void test_cli(void) {
    char cfg[4096], init[600], out[600];
    CHECK(cli_sh("mkdir -p %s/model", dir) == 0);
    snprintf(cfg, sizeof cfg, RL_CLI_QWEN2_VL_CFG, rl_cli_vocab());
    rl_cli_init_model("model", cfg);
    CHECK(cli_sh("cp tests/fixtures/vision/dataset/chat_template.jinja tests/fixtures/vision/video_dataset/qwen2_vl/*.json "
                 "%s/model/", dir) == 0);
    CHECK_MSG(cli_sh("%s sft --model %s/model --train " FIX "/rows.jsonl --out %s/run max_length=2048 train_batch_size=2 "
                     "micro_batch_size=1 lr=1e-2 epochs=2 max_steps=2 threads=2 quiet=1 > %s/run.log 2>&1", bin, dir, dir,
                     dir) == 0, "verlc sft with videos failed: see %s/run.log", dir);
    snprintf(init, sizeof init, "%s/model/model.safetensors", dir);
    snprintf(out, sizeof out, "%s/run/step_2/model.safetensors", dir);
    CHECK_MSG(cli_same_tensor(init, out, "model.visual.patch_embed.proj.weight") == 0, "the tower was not trained");
    CHECK(cli_sh("test $(grep -c '\"train/loss\": [0-9]' %s/run/metrics.jsonl) = 2", dir) == 0);
    snprintf(out, sizeof out, "%s/run.log", dir);
    CHECK(cli_arena_within_plan(out) == 0);
}

int main(void) {
    cli_quiet = 1;
    rl_cli_start("sft_videos");
    char tdir[600];
    snprintf(tdir, sizeof tdir, "%s/fixtures/tokenizers/qwen3", vc_test_shared());
    vc_tokenizer *tok = NULL;
    vc_chat_template *tmpl = NULL;
    vc_checkpoint *ck = NULL;
    cJSON *meta = NULL;
    char *t = NULL;
    size_t tlen = 0;
    CHECK_OK(vc_read_file("tests/fixtures/vision/dataset/chat_template.jinja", &t, &tlen));
    CHECK_OK(vc_tokenizer_load(tdir, &tok));
    CHECK(t != NULL);
    if (tok && t) CHECK_OK(vc_chat_template_from_string(t, NULL, "<|im_end|>", &tmpl));
    CHECK_OK(vc_ckpt_open(FIX "/reference.safetensors", &ck));
    CHECK_OK(vc_json_load_file(FIX "/reference.json", &meta));
    if (tok && tmpl && ck && meta) {
        test_kind("qwen2_vl", 0, tok, tmpl, ck, meta);
        test_kind("qwen2_5_vl", 1, tok, tmpl, ck, meta);
    }
    if (!LIGHT) test_cli(); /* (the sanitizer build: the rows' data path above; the training run in the release build) */
    cJSON_Delete(meta);
    vc_ckpt_close(ck);
    vc_chat_template_free(tmpl);
    vc_tokenizer_free(tok);
    free(t);
    if (!vc_t_fail && !getenv("KEEP")) cli_sh("rm -rf %s", dir);
    return vc_test_done();
}
