/* PNG / JPEG decoding against Pillow (tests/fixtures/vision, tools/fixtures/make_image_fixture.py): every fixture
 * image, converted to RGB as qwen_vl_utils.to_rgb and as transformers' convert_to_rgb do, must equal Pillow's bytes
 * exactly (JPEG too: Pillow's libjpeg-turbo 3.x and Debian's 2.x decode with the same islow IDCT and fancy
 * upsampling). Then corrupt inputs: truncations, garbage, zero bytes, other formats, huge declared sizes, random
 * byte flips; each must give one error line naming the image, never a crash (run under ASan + UBSan too). */
#include <zlib.h>
#include "vc_test.h"
#include "vision_helpers.h"

static void check_decodes(void) {
    cJSON *ref = NULL;
    vc_checkpoint *ck = NULL;
    CHECK_OK(vc_json_load_file(vis_path("reference.json"), &ref));
    CHECK_OK(vc_ckpt_open(vis_path("reference.safetensors"), &ck));
    if (!ref || !ck) goto out;
    int n = 0, jpegs = 0;
    for (const cJSON *e = cJSON_GetObjectItem(ref, "images")->child; e; e = e->next, n++) {
        const char *name = e->string;
        const char *mode = cJSON_GetObjectItem(e, "mode")->valuestring;
        for (int pol = 0; pol < 2; pol++) {
            vc_image img;
            vc_status st = vc_image_load(img_path(name), pol ? VC_ALPHA_TRANSFORMERS : VC_ALPHA_QWEN_VL_UTILS, &img);
            CHECK_MSG(st == VC_OK, "%s: %s", name, vc_last_error());
            if (st != VC_OK) continue;
            CHECK_MSG(!strcmp(vc_image_mode_name(img.mode), mode), "%s: mode %s, Pillow's %s", name,
                      vc_image_mode_name(img.mode), mode);
            CHECK(img.width == cJSON_GetObjectItem(e, "width")->valueint);
            CHECK(img.height == cJSON_GetObjectItem(e, "height")->valueint);
            char key[256];
            snprintf(key, sizeof key, "decode.%s.%s", name, pol ? "composite" : "paste");
            if (pol && !vc_ckpt_find(ck, key)) snprintf(key, sizeof key, "decode.%s.paste", name); /* same bytes */
            int maxd;
            long bad = cmp_u8_image(ck, key, &img, &maxd);
            CHECK_MSG(bad == 0, "%s: %ld bytes differ from Pillow's (largest difference %d)", key, bad, maxd);
            vc_image_free(&img);
        }
        jpegs += strstr(name, ".jpg") != NULL;
    }
    CHECK(n == 20 && jpegs == 6);
    printf("decoded %d images (%d JPEG) under both conversions: equal to Pillow's bytes\n", n, jpegs);
out:
    cJSON_Delete(ref);
    vc_ckpt_close(ck);
}

/* decoding must fail with one line that names `what` */
static void expect_fail(const uint8_t *b, size_t n, const char *what, const char *needle) {
    vc_image img;
    vc_status st = vc_image_decode(b, n, what, VC_ALPHA_QWEN_VL_UTILS, &img);
    const char *msg = vc_last_error();
    CHECK_MSG(st != VC_OK, "%s: decoded %zu bytes that should fail", what, n);
    CHECK_MSG(st == VC_OK || (strstr(msg, what) && !strchr(msg, '\n')), "%s: message '%s'", what, msg);
    CHECK_MSG(st == VC_OK || !needle || strstr(msg, needle), "%s: message '%s' lacks '%s'", what, msg, needle);
    CHECK(img.rgb == NULL);
    if (st == VC_OK) vc_image_free(&img);
}

static void put32(uint8_t *p, uint32_t v) { p[0] = v >> 24, p[1] = v >> 16, p[2] = v >> 8, p[3] = (uint8_t)v; }

static void check_corrupt(void) {
    size_t n = 0, nj = 0;
    uint8_t *png = (uint8_t *)read_all(img_path("rgb_37x53.png"), &n);
    uint8_t *jpg = (uint8_t *)read_all(img_path("rgb420_37x53.jpg"), &nj);
    CHECK(png && jpg);
    if (!png || !jpg) { free(png), free(jpg); return; }
    char what[64];
    /* every truncation inside the header and the pixel data; the last 12 bytes are IEND, which neither Pillow nor
     * verlc needs (the image is complete without it) */
    int truncs = 0;
    for (size_t k = 0; k + 16 <= n; k += (k < 64 ? 1 : 97), truncs++) {
        snprintf(what, sizeof what, "png[:%zu]", k);
        expect_fail(png, k, what, k == 0 ? "0 bytes" : NULL);
    }
    vc_image full, noend;
    CHECK_OK(vc_image_decode(png, n, "full", VC_ALPHA_QWEN_VL_UTILS, &full));
    CHECK_OK(vc_image_decode(png, n - 12, "without IEND", VC_ALPHA_QWEN_VL_UTILS, &noend));
    CHECK(full.rgb && noend.rgb && !memcmp(full.rgb, noend.rgb, (size_t)full.width * full.height * 3));
    vc_image_free(&full), vc_image_free(&noend);
    for (size_t k = 0; k + 2 <= nj; k += (k < 64 ? 1 : 53), truncs++) {
        snprintf(what, sizeof what, "jpg[:%zu]", k);
        expect_fail(jpg, k, what, k >= 3 ? "JPEG" : NULL);
    }
    printf("%d truncations refused\n", truncs);

    /* garbage, empty, other formats */
    uint8_t junk[300];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)(i * 131 + 7);
    expect_fail(junk, sizeof junk, "row 12 image 0", "not a PNG or JPEG");
    expect_fail(junk, 0, "empty.png", "0 bytes");
    expect_fail((const uint8_t *)"GIF89a\1\0\1\0", 10, "anim.gif", "GIF");
    expect_fail((const uint8_t *)"RIFF\0\0\0\0WEBPVP8 ", 16, "x.webp", "WebP");
    expect_fail((const uint8_t *)"BM\0\0\0\0", 6, "x.bmp", "BMP");
    uint8_t fake[sizeof junk];
    memcpy(fake, png, 8), memcpy(fake + 8, junk, sizeof junk - 8);
    expect_fail(fake, sizeof fake, "png magic then garbage", "corrupt PNG");
    memcpy(fake, jpg, 3), memcpy(fake + 3, junk, sizeof junk - 3);
    expect_fail(fake, sizeof fake, "jpeg magic then garbage", "corrupt JPEG");

    /* huge declared sizes: refused from the header, before any pixel memory (a 20000 x 20000 PNG whose IHDR is
     * valid (the rest of the file as it was), and the JPEG's SOF patched to 60000 x 60000) */
    uint8_t *big = malloc(n);
    memcpy(big, png, n);
    put32(big + 16, 20000), put32(big + 20, 20000);
    put32(big + 29, (uint32_t)crc32(0, big + 12, 17));
    expect_fail(big, n, "bomb.png", "over the limit");
    free(big);
    uint8_t *bj = malloc(nj);
    memcpy(bj, jpg, nj);
    int patched = 0;
    for (size_t i = 2; i + 9 < nj && !patched; i++)
        if (bj[i] == 0xff && (bj[i + 1] == 0xc0 || bj[i + 1] == 0xc2)) {
            bj[i + 5] = 0xea, bj[i + 6] = 0x60, bj[i + 7] = 0xea, bj[i + 8] = 0x60; /* height, width 60000 */
            patched = 1;
        }
    CHECK(patched);
    expect_fail(bj, nj, "bomb.jpg", "over the limit");
    free(bj);

    /* random byte flips: decoded or refused, never a crash or a leak (the sanitizer build checks the memory) */
    uint32_t s = 12345;
    int ok = 0, refused = 0;
    for (int round = 0; round < (LIGHT ? 150 : 600); round++) {
        int is_png = round & 1;
        size_t len = is_png ? n : nj;
        uint8_t *b = malloc(len);
        memcpy(b, is_png ? png : jpg, len);
        for (int f = 0; f < 1 + round % 4; f++) {
            s = s * 1664525u + 1013904223u;
            size_t at = 2 + (s >> 8) % (len - 2);
            s = s * 1664525u + 1013904223u;
            b[at] ^= (uint8_t)(1 + (s >> 24) % 255);
        }
        vc_image img;
        if (vc_image_decode(b, len, "flipped", VC_ALPHA_TRANSFORMERS, &img) == VC_OK) ok++, vc_image_free(&img);
        else {
            refused++;
            CHECK(strstr(vc_last_error(), "flipped") != NULL);
        }
        free(b);
    }
    printf("byte flips: %d decoded, %d refused\n", ok, refused);
    CHECK(refused > 0);

    /* a missing file names its path */
    vc_image img;
    CHECK(vc_image_load("tests/fixtures/vision/images/absent.png", VC_ALPHA_QWEN_VL_UTILS, &img) == VC_ERR_IO);
    CHECK(strstr(vc_last_error(), "absent.png") != NULL);
    free(png), free(jpg);
}

int main(void) {
    check_decodes();
    check_corrupt();
    return vc_test_done();
}
