/* Video inputs of Qwen-VL models against transformers (tools/fixtures/make_video_ref.py: transformers 5.24 on the
 * qwen2_vl_image, qwen2_5_vl_image and qwen3_vl_image fixtures): one row holding a video of 4 different frames (2
 * frame groups of 2 x 2 merged units), its logits within 5e-5 of transformers'. Qwen2-VL's video is one run of video
 * tokens whose temporal positions step by frame group; Qwen2.5-VL's step by tokens_per_second * second_per_grid_t
 * (t_scale); Qwen3-VL's frame groups are runs of their own with text between, one entry each. Also: the video token
 * run must match its entry (a run cut short is refused by name). */
#include "vc_test.h"
#include "verlc/safetensors.h"
#include "verlc/vision.h"

static void check_model(const char *name, int split) {
    char dir[256], ref[256];
    snprintf(dir, sizeof dir, "tests/fixtures/models/%s", name);
    snprintf(ref, sizeof ref, "tests/fixtures/vision/video_model/%s.safetensors", name);
    vc_checkpoint *ck = NULL;
    vc_model *m = NULL;
    CHECK_OK(vc_ckpt_open(ref, &ck));
    CHECK_OK(vc_model_load(dir, &m));
    if (!ck || !m) return;
    const vc_st_tensor *ids = vc_ckpt_find(ck, "ids"), *pix = vc_ckpt_find(ck, "pixels"), *grid = vc_ckpt_find(ck, "grid");
    const vc_st_tensor *lg = vc_ckpt_find(ck, "logits"), *sg = vc_ckpt_find(ck, "second_per_grid_ts");
    CHECK(ids && pix && grid && lg);
    if (!ids || !pix || !grid || !lg) return;
    int64_t T = ids->shape[0], V = lg->shape[1];
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)T), g[3 * 16];
    for (int64_t t = 0; t < T; t++) tok[t] = (int32_t)((const int64_t *)ids->data)[t];
    const int64_t *gv = grid->data;
    int n = 1;
    float ts = 1.0f;
    if (split) { /* one entry per frame group */
        n = (int)gv[0];
        for (int i = 0; i < n; i++) g[3 * i] = 1, g[3 * i + 1] = (int32_t)gv[1], g[3 * i + 2] = (int32_t)gv[2];
    } else {
        for (int i = 0; i < 3; i++) g[i] = (int32_t)gv[i];
    }
    int tps = 0, mode = vc_vision_video_mode(vc_model_vision(m), &tps);
    CHECK(mode == (split ? VC_VIDEO_SPLIT : sg ? VC_VIDEO_TIMED : VC_VIDEO_WHOLE));
    if (sg) ts = (float)tps * ((const float *)sg->data)[0]; /* tokens_per_second * second_per_grid_t in float32 */
    vc_images im = { n, g, pix->data, pix->shape[1], sg ? &ts : NULL };
    int64_t cu[2] = { 0, T };
    vc_batch b = { 1, cu, tok, .images = &im };
    vc_graph *gr = vc_graph_new();
    vc_graph_set_grad(gr, 0);
    vc_tensor *h = vc_model_forward(m, gr, &b, NULL), *z = h ? vc_model_logits(m, gr, h) : NULL;
    CHECK_MSG(z != NULL, "%s: forward with a video: %s", name, vc_last_error());
    float *out = malloc(sizeof(float) * (size_t)(T * V));
    double worst = INFINITY;
    if (z && !vc_tensor_read(z, out)) {
        worst = 0;
        for (int64_t i = 0; i < T * V; i++) worst = fmax(worst, fabs(out[i] - ((const float *)lg->data)[i]));
    }
    CHECK_MSG(worst < 5e-5, "%s: logits with a video %.3g from transformers'", name, worst);
    printf("%s: %d video entr%s, %lld tokens, logits within %.2g of transformers'\n", name, n, n == 1 ? "y" : "ies",
           (long long)T, worst);
    if (sg) { /* without the time step the positions are Qwen2-VL's: other logits */
        vc_images plain = im;
        plain.t_scale = NULL;
        vc_batch p = b;
        p.images = &plain;
        vc_graph_reset(gr);
        h = vc_model_forward(m, gr, &p, NULL), z = h ? vc_model_logits(m, gr, h) : NULL;
        double d = 0;
        if (z && !vc_tensor_read(z, out))
            for (int64_t i = 0; i < T * V; i++) d = fmax(d, fabs(out[i] - ((const float *)lg->data)[i]));
        CHECK_MSG(d > 1e-3, "%s: the time step changes nothing (%g)", name, d);
    }
    /* a run one token short of its entry is refused by name */
    int64_t first = 0;
    while (first < T && tok[first] != vc_model_cfg(m)->video_id) first++;
    tok[first] = 5;
    vc_graph_reset(gr);
    CHECK(vc_model_forward(m, gr, &b, NULL) == NULL && strstr(vc_last_error(), "image tokens"));
    vc_graph_free(gr);
    free(out), free(tok);
    vc_model_free(m);
    vc_ckpt_close(ck);
}

int main(void) {
    check_model("qwen2_vl_image", 0);
    check_model("qwen2_5_vl_image", 0);
    check_model("qwen3_vl_image", 1);
    return vc_test_done();
}
