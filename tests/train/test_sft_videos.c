/* SFT messages rows with videos (verl's MultiTurnSFTDataset: data.video_key, <video> markers, each video through
 * fetch_video and handed to the processor without its timing) on Qwen2-VL's, Qwen2.5-VL's and Qwen3-VL's processors:
 * every row's ids and loss mask are those verl's per-message tokenization gives with transformers' processors, the
 * videos' grids and pixels (sampled rows) are the processors', Qwen2.5-VL's time step is its second_per_grid_ts
 * (2 / 24: without the timing transformers takes 24 frames per second) times tokens_per_second, Qwen3-VL's processor
 * samples the frames again as 24 per second (62 frames: 5 kept) and stamps the frame groups so
 * (tests/fixtures/vision/sft_video, tools/fixtures/make_sft_video_fixture.py); a video in a row of a model without
 * video inputs is refused naming the row, as is Qwen2-VL's processor asked to sample frames without their timing;
 * `verlc sft` on those rows trains a tiny Qwen2-VL's tower, within its memory plan. */
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

/* row i of d against the reference's ids and loss mask, its video entries' grids and time steps (Qwen3-VL's: an entry
 * per frame group, the video's grid their count) */
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
        if (!e->video || e->group > 0) continue;
        int gt = e->groups ? e->groups : e->grid[0];
        CHECK_MSG(v < vg->shape[0] && gt == g[3 * v] && e->grid[1] == g[3 * v + 1] && e->grid[2] == g[3 * v + 2],
                  "%s row %zu video %d: grid %dx%dx%d", kind, i, v, gt, e->grid[1], e->grid[2]);
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

/* kind's rows (mode: its processor's videos; Qwen3-VL's rows file has one more row) */
static void test_kind(const char *kind, int mode, const vc_tokenizer *tok, const vc_chat_template *tmpl,
                      const vc_checkpoint *ck, const cJSON *meta) {
    char dir[256];
    snprintf(dir, sizeof dir, "tests/fixtures/vision/video_dataset/%s", kind);
    char pre[300];
    snprintf(pre, sizeof pre, "%s/preprocessor_config.json", dir);
    vc_vl_image_config vl;
    int split = mode == VC_VIDEO_SPLIT, timed = mode == VC_VIDEO_TIMED;
    const char *rows_file = split ? FIX "/rows_qwen3.jsonl" : FIX "/rows.jsonl";
    vc_vl_videos vv = { .mode = mode, .tps = 2, .patch = split ? 16 : 14, .no_metadata = 1 };
    CHECK_OK(vc_vl_image_config_load(pre, &vl));
    CHECK_OK(vc_vl_video_config_load(dir, split, &vv.cfg));
    int32_t pad = vc_tokenizer_token_to_id(tok, VC_VL_IMAGE_TOKEN), vpad = vc_tokenizer_token_to_id(tok, VC_VL_VIDEO_TOKEN);
    sft_tok tk = { tok, tmpl, vc_tokenizer_eos_id(tok), NULL, "images", &vl, NULL, VC_VL_IMAGE_TOKEN, pad,
                   "videos", &vv, NULL, VC_VL_VIDEO_TOKEN, vpad };
    vc_sft_config c;
    vc_sft_config_default(&c);
    c.max_length = 4096;
    c.skip_bad_lines = 0;
    sft_data d;
    CHECK_OK(sft_data_load(&c, rows_file, &tk, &d));
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(meta, kind);
    size_t want = (size_t)cJSON_GetArraySize(rows);
    CHECK_MSG(d.n == want && want >= 3, "%s: %zu rows, the reference's %zu", kind, d.n, want);
    for (size_t i = 0; i < d.n && i < want; i++) {
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
    if (!split) { /* Qwen2-VL's processor cannot sample frames without their fps: refused as transformers refuses it */
        vv.cfg.do_sample_frames = 1;
        CHECK(sft_data_load(&c, rows_file, &tk, &d) == VC_ERR_UNSUPPORTED);
        CHECK_MSG(strstr(vc_last_error(), "rows.jsonl:1") && strstr(vc_last_error(), "do_sample_frames"), "%s",
                  vc_last_error());
    }
    /* without video inputs (a model that takes none): the row is refused by name, not skipped */
    tk.vv = NULL;
    tk.no_video_reason = "video inputs of model_type qwen3 are not built";
    c.skip_bad_lines = 1;
    CHECK(sft_data_load(&c, FIX "/rows.jsonl", &tk, &d) == VC_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(vc_last_error(), "rows.jsonl:1") && strstr(vc_last_error(), "qwen3 are not built"), "%s",
              vc_last_error());
}

/* `verlc sft` on kind's rows: a tiny random model (cfg) with the kind's processor configs trains its tower on them
 * (tensor: one of the tower's) */
static void test_cli(const char *sub, const char *cfg_fmt, const char *kind, const char *rows, const char *tensor) {
    char cfg[4096], init[600], out[600];
    CHECK(cli_sh("mkdir -p %s/%s", dir, sub) == 0);
    snprintf(cfg, sizeof cfg, cfg_fmt, rl_cli_vocab());
    rl_cli_init_model(sub, cfg);
    CHECK(cli_sh("cp tests/fixtures/vision/dataset/chat_template.jinja tests/fixtures/vision/video_dataset/%s/*.json "
                 "%s/%s/", kind, dir, sub) == 0);
    CHECK_MSG(cli_sh("%s sft --model %s/%s --train %s --out %s/run_%s max_length=2048 train_batch_size=2 "
                     "micro_batch_size=1 lr=1e-2 epochs=2 max_steps=2 threads=2 quiet=1 > %s/run_%s.log 2>&1", bin, dir, sub,
                     rows, dir, sub, dir, sub) == 0, "verlc sft with videos failed: see %s/run_%s.log", dir, sub);
    snprintf(init, sizeof init, "%s/%s/model.safetensors", dir, sub);
    snprintf(out, sizeof out, "%s/run_%s/step_2/model.safetensors", dir, sub);
    CHECK_MSG(cli_same_tensor(init, out, tensor) == 0, "%s: the tower was not trained", kind);
    CHECK(cli_sh("test $(grep -c '\"train/loss\": [0-9]' %s/run_%s/metrics.jsonl) = 2", dir, sub) == 0);
    snprintf(out, sizeof out, "%s/run_%s.log", dir, sub);
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
        test_kind("qwen2_vl", VC_VIDEO_WHOLE, tok, tmpl, ck, meta);
        test_kind("qwen2_5_vl", VC_VIDEO_TIMED, tok, tmpl, ck, meta);
        test_kind("qwen3_vl", VC_VIDEO_SPLIT, tok, tmpl, ck, meta);
    }
    if (!LIGHT) { /* (the sanitizer build: the rows' data path above; the training runs in the release build) */
        test_cli("model", RL_CLI_QWEN2_VL_CFG, "qwen2_vl", FIX "/rows.jsonl", "model.visual.patch_embed.proj.weight");
        test_cli("model3", RL_CLI_QWEN3_VL_CFG, "qwen3_vl", FIX "/rows_qwen3.jsonl",
                 "model.visual.deepstack_merger_list.0.linear_fc2.weight");
    }
    cJSON_Delete(meta);
    vc_ckpt_close(ck);
    vc_chat_template_free(tmpl);
    vc_tokenizer_free(tok);
    free(t);
    if (!vc_t_fail && !getenv("KEEP")) cli_sh("rm -rf %s", dir);
    return vc_test_done();
}
