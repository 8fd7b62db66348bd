/* Golden test of verl's ImageZoomInTool (verl/tools/image_zoom_in_tool.py, the DeepEyes recipe's tool) against its
 * own code run unchanged: tests/fixtures/rl/zoom_reference.json, made by tools/fixtures/make_zoom_ref.py. Random
 * boxes (integers and fractions, inside, across and outside the image, tiny ones grown to 28 pixels, thin ones past
 * the aspect bound, inverted ones) on four images after qwen_vl_utils' fetch_image, and odd arguments (wrong lengths,
 * strings, None, labels), each call's arguments parsed from a hermes tool call: every response text, tool reward and
 * crop (its size and bytes) must be verl's. Then the
 * faults: a row without an image, an image that cannot be read. */
#include "../../src/rl/agent_internal.h"
#include "../../src/rl/tool_parser.h"
#include "verlc/image.h"
#include "verlc/json.h"
#include "vc_test.h"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIXTURE "tests/fixtures/rl/zoom_reference.json"

static uint64_t fnv(const uint8_t *b, size_t n) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001B3ull;
    return h;
}

static cJSON *create_kwargs(const char *image) {
    cJSON *ck = cJSON_CreateObject();
    if (image) cJSON_AddStringToObject(ck, "image", image);
    return ck;
}

static void cases(const cJSON *ref) {
    const cJSON *images = cJSON_GetObjectItem(ref, "images");
    int n = 0, same = 0, crops = 0, grown = 0;
    for (const cJSON *c = cJSON_GetObjectItem(ref, "cases")->child; c; c = c->next, n++) {
        const char *img = cJSON_GetArrayItem(images, cJSON_GetObjectItem(c, "image")->valueint)->valuestring;
        const char *args_s = cJSON_GetObjectItem(c, "args")->valuestring, *want = cJSON_GetObjectItem(c, "text")->valuestring;
        const cJSON *crop = cJSON_GetObjectItem(c, "crop");
        double want_r = cJSON_GetObjectItem(c, "reward")->valuedouble, r = 1;
        /* the arguments as the agent has them: a hermes tool call parsed as verl parses it (json.loads keeps 3.0 a
         * float) */
        char call_text[2048];
        rl_tool_call call = { 0 };
        snprintf(call_text, sizeof call_text, "<tool_call>\n{\"name\": \"image_zoom_in_tool\", \"arguments\": %s}\n"
                 "</tool_call>", args_s);
        CHECK(rl_parse_tool_calls_as(RL_TF_HERMES, call_text, NULL, NULL, &call, 1, NULL) == 1);
        cJSON *args = call.args, *ck = create_kwargs(img);
        char *text = NULL;
        vc_image out;
        CHECK_OK(rl_zoom_tool(args, ck, "case", &text, &r, &out));
        int ok = text && !strcmp(text, want) && r == want_r && (out.width == 0) == cJSON_IsNull(crop);
        if (ok && out.width) {
            char h[24];
            snprintf(h, sizeof h, "%016llx",
                     (unsigned long long)fnv(out.rgb, (size_t)out.width * (size_t)out.height * 3));
            ok = out.width == cJSON_GetArrayItem(crop, 0)->valueint && out.height == cJSON_GetArrayItem(crop, 1)->valueint &&
                 !strcmp(h, cJSON_GetArrayItem(crop, 2)->valuestring);
            crops++;
            grown += strstr(args_s, "[") && out.width == 28; /* a small box grown to 28 */
        }
        same += ok;
        CHECK_MSG(ok, "%s on %s: \"%s\" %g %dx%d; verl \"%s\" %g %s", args_s, img, text ? text : "(null)", r, out.width,
                  out.height, want, want_r, cJSON_IsNull(crop) ? "no crop" : "a crop");
        free(text);
        vc_image_free(&out);
        cJSON_Delete(args);
        cJSON_Delete(ck);
    }
    fprintf(stderr, "ImageZoomInTool: %d of %d calls as verl (%d crops, %d grown to 28)\n", same, n, crops, grown);
    CHECK_MSG(n >= 1500 && crops >= 400 && grown >= 20, "%d cases ran, %d crops, %d grown", n, crops, grown);
}

/* _maybe_resize_bbox's arithmetic alone: a box grown about its centre and shifted inside, integers by floor / ceil */
static void resize(void) {
    double out[4], small[4] = { 10, 10, 14, 12 };
    CHECK(rl_zoom_resize_bbox(small, 100, 100, out) == 1);
    /* centre (12, 11), ratio 28 / 2 = 14: 56 x 28 about it: [-16, -3] shifted to 0 -> [0, 0, 56, 28] */
    CHECK_MSG(out[0] == 0 && out[1] == 0 && out[2] == 56 && out[3] == 28, "[%g, %g, %g, %g]", out[0], out[1], out[2],
              out[3]);
    double thin[4] = { 0, 0, 1, 150 }, inv[4] = { 5, 5, 4, 40 };
    CHECK(rl_zoom_resize_bbox(thin, 100, 200, out) == 0); /* aspect 150 > 100 */
    CHECK(rl_zoom_resize_bbox(inv, 100, 200, out) == 0);
}

/* the plan's bound on a crop's patches holds for every crop size the tool can cut from a source (its fetch_image
 * size, sides from 27 to the image's, aspect ratios to 100) through four processors, and is near the largest */
static void patch_bound(void) {
    vc_vl_image_config q2, big_min, q3, glm;
    vc_vl_image_config_default(&q2);
    big_min = q2, big_min.min_pixels = 256 * 28 * 28; /* crops raised to min_pixels */
    q3 = q2, q3.patch_size = 16, q3.min_pixels = 65536, q3.max_pixels = 16777216; /* Qwen3-VL: 32-pixel steps */
    glm = q2, glm.glm = 1, glm.min_pixels = 112 * 112, glm.max_pixels = 28 * 28 * 2 * 30000;
    const vc_vl_image_config *cfg[] = { &q2, &big_min, &q3, &glm };
    static const int src[][2] = { { 640, 480 }, { 1000, 300 }, { 300, 200 }, { 90, 60 }, { 2400, 1500 } };
    for (int c = 0; c < 4; c++)
        for (int s = 0; s < 5; s++) {
            int64_t bound = rl_zoom_patches_bound(cfg[c], src[s][0], src[s][1]), most = 0;
            int H, W, h, w;
            CHECK_OK(vc_qwen_vl_utils_smart_resize(src[s][1], src[s][0], 28, 3136, 16384 * 784, &H, &W));
            for (int ch = 27; ch <= H; ch++)
                for (int cw = 27; cw <= W; cw++) {
                    if (ch > 100 * cw || cw > 100 * ch) continue;
                    if (vc_vl_processor_resize(cfg[c], ch, cw, &h, &w)) {
                        vc_clear_error();
                        continue;
                    }
                    int64_t n = (int64_t)(h / cfg[c]->patch_size) * (w / cfg[c]->patch_size);
                    if (n > most) most = n;
                }
            CHECK_MSG(most > 0 && bound >= most && bound <= most + most / 4 + 64,
                      "processor %d, a %dx%d source: crops of up to %lld patches, bound %lld", c, src[s][0], src[s][1],
                      (long long)most, (long long)bound);
        }
    CHECK(rl_zoom_patches_bound(&q2, 10000, 20) == 0); /* fetch_image refuses the aspect ratio */
}

static void faults(void) {
    char *text = NULL;
    double r = 1;
    vc_image out;
    cJSON *args = cJSON_Parse("{\"bbox_2d\": [0, 0, 50, 50]}"), *ck = create_kwargs(NULL);
    CHECK_OK(rl_zoom_tool(args, ck, "row 1", &text, &r, &out)); /* create() raises: the agent loop's text */
    CHECK_MSG(text && strstr(text, "Missing required 'image'") && r == 0 && !out.width, "%s", text ? text : "");
    free(text);
    cJSON_Delete(ck);
    ck = create_kwargs("/nonexistent/zoom.png");
    CHECK(rl_zoom_tool(args, ck, "data.jsonl:7", &text, &r, &out) != VC_OK && !text && !out.width);
    CHECK_MSG(strstr(vc_last_error(), "data.jsonl:7") && strstr(vc_last_error(), "create_kwargs.image"), "%s",
              vc_last_error());
    cJSON_Delete(ck);
    ck = create_kwargs("data:image/png;base64,aGVsbG8=");
    CHECK(rl_zoom_tool(args, ck, "data.jsonl:8", &text, &r, &out) != VC_OK && !text);
    CHECK_MSG(strstr(vc_last_error(), "data.jsonl:8"), "%s", vc_last_error());
    cJSON_Delete(ck);
    cJSON_Delete(args);
}

int main(void) {
    cJSON *ref = NULL;
    vc_status st = vc_json_load_file(FIXTURE, &ref);
    CHECK_MSG(st == VC_OK, "%s", vc_last_error());
    if (ref) cases(ref);
    cJSON_Delete(ref);
    resize();
    patch_bound();
    faults();
    return vc_test_done();
}
