/* PNG (libpng) and JPEG (libjpeg-turbo) decoding into 8-bit RGB the way Pillow opens the file and then converts it:
 * qwen_vl_utils.to_rgb or transformers' convert_to_rgb (vc_image_alpha). The conversions are Pillow's integer
 * formulas (Convert.c, Paste.c, AlphaComposite.c), so the bytes match Pillow's. */
#include "verlc/image.h"
#include <jpeglib.h>
#include <jerror.h> /* after jpeglib.h: JWRN_JPEG_EOF */
#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

/* What the decoders hand to the conversion: the file's pixels in Pillow's mode before any RGB conversion */
typedef struct raw_image {
    int w, h;
    vc_image_mode mode;
    int ch;             /* bytes per pixel in px (I16: 2, host order uint16) */
    uint8_t *px;
    uint8_t pal[256][4]; /* P: RGBA entries (alpha from tRNS); unset entries a gray ramp, as Pillow's palette */
    int has_trns;       /* L / I;16 / RGB tRNS colour (Pillow keeps the 16-bit value and compares its low byte) */
    int trns[3];
    int pal_trns;       /* P with a tRNS chunk */
    int pal_key;        /* P: the one fully transparent entry of a tRNS of 255s and one 0 (Pillow's int
                         * transparency), else -1 */
} raw_image;

const char *vc_image_mode_name(vc_image_mode m) {
    switch (m) {
    case VC_IMG_L: return "L";
    case VC_IMG_I16: return "I;16";
    case VC_IMG_LA: return "LA";
    case VC_IMG_RGB: return "RGB";
    case VC_IMG_RGBA: return "RGBA";
    case VC_IMG_P: return "P";
    case VC_IMG_CMYK: return "CMYK";
    }
    return "?";
}

static vc_status check_size(const char *what, const char *fmt, uint64_t w, uint64_t h) {
    if (w == 0 || h == 0) return vc_fail(VC_ERR_FORMAT, "%s: %s image of %llux%llu pixels", what, fmt,
                                         (unsigned long long)w, (unsigned long long)h);
    if (w * h > (uint64_t)VC_IMAGE_MAX_PIXELS)
        return vc_fail(VC_ERR_FORMAT, "%s: %s image of %llux%llu = %llu pixels is over the limit of %lld "
                       "(Pillow's decompression-bomb limit)", what, fmt, (unsigned long long)w,
                       (unsigned long long)h, (unsigned long long)(w * h), VC_IMAGE_MAX_PIXELS);
    return VC_OK;
}

/* ---- PNG ---- */

typedef struct png_ctx {
    const uint8_t *p;
    size_t n, off;
    const char *what;
    char msg[200];
} png_ctx;

static void png_on_error(png_structp png, png_const_charp msg) {
    png_ctx *c = png_get_error_ptr(png);
    snprintf(c->msg, sizeof c->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg) { (void)png, (void)msg; }

static void png_on_read(png_structp png, png_bytep dst, png_size_t len) {
    png_ctx *c = png_get_io_ptr(png);
    if (len > c->n - c->off) png_error(png, "truncated file");
    memcpy(dst, c->p + c->off, len);
    c->off += len;
}

/* Reads with libpng's transforms set so that the pixels are Pillow's mode: 1/2/4-bit gray scaled to 8 bits (Pillow's
 * "1", "L;2", "L;4"), palette indices unpacked to bytes, 16-bit samples cut to their high byte (Pillow's "RGB;16B",
 * "RGBA;16B", "LA;16B") except 16-bit gray, which Pillow keeps whole as I;16. */
static vc_status png_decode(const uint8_t *bytes, size_t n, const char *what, raw_image *r) {
    png_ctx c = { .p = bytes, .n = n, .what = what };
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &c, png_on_error, png_on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    png_bytep *volatile rows = NULL; /* volatile: set after setjmp, freed after a longjmp */
    vc_status st = VC_OK;
    if (!png || !info) {
        png_destroy_read_struct(&png, &info, NULL);
        return vc_fail(VC_ERR_NOMEM, "%s: cannot start libpng", what);
    }
    if (setjmp(png_jmpbuf(png))) {
        st = vc_fail(VC_ERR_FORMAT, "%s: corrupt PNG: %s", what, c.msg[0] ? c.msg : "libpng error");
        goto out;
    }
    png_set_read_fn(png, &c, png_on_read);
    png_read_info(png, info);
    png_uint_32 w, h;
    int depth, ctype, interlace;
    png_get_IHDR(png, info, &w, &h, &depth, &ctype, &interlace, NULL, NULL);
    if ((st = check_size(what, "PNG", w, h)) != VC_OK) goto out;
    r->w = (int)w, r->h = (int)h;
    png_bytep trns_alpha = NULL;
    int n_trns = 0;
    png_color_16p trns_col = NULL;
    if (png_get_valid(png, info, PNG_INFO_tRNS)) png_get_tRNS(png, info, &trns_alpha, &n_trns, &trns_col);
    switch (ctype) {
    case PNG_COLOR_TYPE_GRAY:
        r->mode = depth == 16 ? VC_IMG_I16 : VC_IMG_L;
        r->ch = depth == 16 ? 2 : 1;
        if (depth < 8) png_set_expand_gray_1_2_4_to_8(png);
        if (depth == 16) png_set_swap(png); /* host order on little-endian hosts, read as uint16 below */
        if (trns_col) r->has_trns = 1, r->trns[0] = r->trns[1] = r->trns[2] = trns_col->gray;
        break;
    case PNG_COLOR_TYPE_GRAY_ALPHA: r->mode = VC_IMG_LA, r->ch = 2; break;
    case PNG_COLOR_TYPE_RGB:
        r->mode = VC_IMG_RGB, r->ch = 3;
        if (trns_col) r->has_trns = 1, r->trns[0] = trns_col->red, r->trns[1] = trns_col->green,
                      r->trns[2] = trns_col->blue;
        break;
    case PNG_COLOR_TYPE_RGB_ALPHA: r->mode = VC_IMG_RGBA, r->ch = 4; break;
    case PNG_COLOR_TYPE_PALETTE: {
        r->mode = VC_IMG_P, r->ch = 1;
        if (depth < 8) png_set_packing(png);
        for (int i = 0; i < 256; i++) r->pal[i][0] = r->pal[i][1] = r->pal[i][2] = (uint8_t)i, r->pal[i][3] = 255;
        png_colorp plte = NULL;
        int np = 0;
        if (png_get_PLTE(png, info, &plte, &np))
            for (int i = 0; i < np && i < 256; i++)
                r->pal[i][0] = plte[i].red, r->pal[i][1] = plte[i].green, r->pal[i][2] = plte[i].blue;
        if (trns_alpha && n_trns > 0) {
            int zeros = 0, others = 0;
            r->pal_trns = 1;
            for (int i = 0; i < n_trns && i < 256; i++) {
                r->pal[i][3] = trns_alpha[i];
                if (trns_alpha[i] == 0) zeros++, r->pal_key = i;
                else others += trns_alpha[i] != 255;
            }
            if (zeros != 1 || others) r->pal_key = -1;
        }
        break;
    }
    default: st = vc_fail(VC_ERR_FORMAT, "%s: PNG colour type %d", what, ctype); goto out;
    }
    if (depth == 16 && ctype != PNG_COLOR_TYPE_GRAY) png_set_strip_16(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    size_t stride = (size_t)r->w * (size_t)r->ch;
    if (png_get_rowbytes(png, info) != stride) {
        st = vc_fail(VC_ERR_INTERNAL, "%s: PNG rows of %zu bytes, %zu expected", what,
                     (size_t)png_get_rowbytes(png, info), stride);
        goto out;
    }
    r->px = malloc(stride * (size_t)r->h);
    rows = malloc(sizeof *rows * (size_t)r->h);
    if (!r->px || !rows) { st = vc_fail(VC_ERR_NOMEM, "%s: %dx%d PNG", what, r->w, r->h); goto out; }
    for (int y = 0; y < r->h; y++) rows[y] = r->px + stride * (size_t)y;
    png_read_image(png, rows);
    /* no png_read_end: what follows the pixel data (text chunks, IEND) is not needed, and Pillow opens a file cut
     * after it as well */
out:
    png_destroy_read_struct(&png, &info, NULL);
    free(rows);
    return st;
}

/* ---- JPEG ---- */

typedef struct jpeg_err {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
} jpeg_err;

static void jpeg_on_error(j_common_ptr ci) {
    jpeg_err *e = (jpeg_err *)ci->err;
    ci->err->format_message(ci, e->msg);
    longjmp(e->jb, 1);
}

/* libjpeg warns and invents an end of image when the data runs out; Pillow feeds its decoder until the file ends
 * and then refuses the image as truncated, so that warning is an error here. Other warnings (corrupt data that
 * libjpeg gets through) pass, as they do in Pillow. */
static void jpeg_on_message(j_common_ptr ci, int level) {
    if (level < 0 && ci->err->msg_code == JWRN_JPEG_EOF) {
        jpeg_err *e = (jpeg_err *)ci->err;
        snprintf(e->msg, sizeof e->msg, "truncated file");
        longjmp(e->jb, 1);
    }
}

/* Pillow's JPEG decoding: libjpeg's defaults (islow IDCT, fancy upsampling), its guess of the colour space; 1
 * component is "L", 3 are "RGB", 4 are CMYK read as Adobe's inverted CMYK ("CMYK;I"). */
static vc_status jpeg_decode(const uint8_t *bytes, size_t n, const char *what, raw_image *r) {
    struct jpeg_decompress_struct ci;
    jpeg_err e;
    memset(&e, 0, sizeof e);
    ci.err = jpeg_std_error(&e.pub);
    e.pub.error_exit = jpeg_on_error;
    e.pub.emit_message = jpeg_on_message;
    uint8_t *volatile px = NULL;
    if (setjmp(e.jb)) {
        jpeg_destroy_decompress(&ci);
        free(px);
        r->px = NULL;
        return vc_fail(VC_ERR_FORMAT, "%s: corrupt JPEG: %s", what, e.msg);
    }
    jpeg_create_decompress(&ci);
    jpeg_mem_src(&ci, bytes, (unsigned long)n);
    jpeg_read_header(&ci, TRUE);
    vc_status st = check_size(what, "JPEG", ci.image_width, ci.image_height);
    if (st != VC_OK) { jpeg_destroy_decompress(&ci); return st; }
    switch (ci.num_components) {
    case 1: ci.out_color_space = JCS_GRAYSCALE, r->mode = VC_IMG_L, r->ch = 1; break;
    case 3: ci.out_color_space = JCS_RGB, r->mode = VC_IMG_RGB, r->ch = 3; break;
    case 4: ci.out_color_space = JCS_CMYK, r->mode = VC_IMG_CMYK, r->ch = 4; break;
    default:
        jpeg_destroy_decompress(&ci);
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: JPEG with %d components", what, ci.num_components);
    }
    jpeg_start_decompress(&ci);
    r->w = (int)ci.output_width, r->h = (int)ci.output_height;
    size_t stride = (size_t)r->w * (size_t)r->ch;
    px = malloc(stride * (size_t)r->h);
    if (!px) { jpeg_destroy_decompress(&ci); return vc_fail(VC_ERR_NOMEM, "%s: %dx%d JPEG", what, r->w, r->h); }
    while (ci.output_scanline < ci.output_height) {
        JSAMPROW row = px + stride * ci.output_scanline;
        jpeg_read_scanlines(&ci, &row, 1);
    }
    jpeg_finish_decompress(&ci);
    jpeg_destroy_decompress(&ci);
    if (r->mode == VC_IMG_CMYK)
        for (size_t i = 0; i < stride * (size_t)r->h; i++) px[i] = (uint8_t)(255 - px[i]);
    r->px = px;
    return VC_OK;
}

/* ---- to RGB ---- */

/* Pillow's SHIFTFORDIV255 / DIV255: a / 255 rounded, in integers */
static inline uint32_t div255(uint32_t a) {
    a += 128;
    return ((a >> 8) + a) >> 8;
}

/* Image.alpha_composite of (r, g, b, a) over opaque white (AlphaComposite.c, 7 extra bits of precision). For an
 * opaque white background this equals Paste.c's BLEND of qwen_vl_utils' paste for every (value, alpha). */
static inline uint8_t over_white(uint32_t v, uint32_t a) {
    if (a == 0) return 255;
    uint32_t blend = 255 * (255 - a), outa255 = a * 255 + blend;
    uint32_t coef1 = a * 255 * 255 * (1u << 7) / outa255, coef2 = 255 * (1u << 7) - coef1;
    uint32_t t = v * coef1 + 255 * coef2 + (0x80u << 7);
    return (uint8_t)((((t >> 8) + t) >> 8) >> 7);
}

/* Paste.c's BLEND(mask, out = 255, in): qwen_vl_utils' white_background.paste(image, mask=alpha) */
static inline uint8_t paste_white(uint32_t v, uint32_t a) { return (uint8_t)div255(255 * (255 - a) + v * a); }

static void to_rgb(const raw_image *r, vc_image_alpha alpha, uint8_t *dst) {
    size_t np = (size_t)r->w * (size_t)r->h;
    int comp = alpha == VC_ALPHA_TRANSFORMERS;
    for (size_t i = 0; i < np; i++, dst += 3) {
        const uint8_t *s = r->px + i * (size_t)r->ch;
        uint8_t v[3], a = 255;
        switch (r->mode) {
        case VC_IMG_L: v[0] = v[1] = v[2] = s[0]; break;
        case VC_IMG_I16: { /* Convert.c I16_RGB: values past 255 clip */
            uint16_t x;
            memcpy(&x, s, 2);
            v[0] = v[1] = v[2] = x > 255 ? 255 : (uint8_t)x;
            break;
        }
        case VC_IMG_LA: v[0] = v[1] = v[2] = s[0], a = s[1]; break;
        case VC_IMG_RGB: v[0] = s[0], v[1] = s[1], v[2] = s[2]; break;
        case VC_IMG_RGBA: v[0] = s[0], v[1] = s[1], v[2] = s[2], a = s[3]; break;
        case VC_IMG_P: memcpy(v, r->pal[s[0]], 3), a = r->pal[s[0]][3]; break;
        case VC_IMG_CMYK: /* Convert.c cmyk2rgb */
            for (int k = 0; k < 3; k++) {
                int nk = 255 - s[3], t = (int)div255((uint32_t)(s[k] * nk)), o = nk - t;
                v[k] = (uint8_t)(o < 0 ? 0 : o > 255 ? 255 : o);
            }
            break;
        }
        /* a tRNS colour: Convert.c rgbT2a compares the converted pixel with the value's low byte */
        if (r->has_trns && v[0] == (r->trns[0] & 0xff) && v[1] == (r->trns[1] & 0xff) && v[2] == (r->trns[2] & 0xff))
            a = 0;
        if (comp) {
            for (int k = 0; k < 3; k++) dst[k] = over_white(v[k], a);
        } else if (r->mode == VC_IMG_RGBA && alpha == VC_ALPHA_QWEN_VL_UTILS) { /* (VC_ALPHA_CONVERT_RGB: dropped) */
            for (int k = 0; k < 3; k++) dst[k] = paste_white(v[k], a);
        } else {
            memcpy(dst, v, 3); /* Image.convert("RGB") drops alpha and transparency */
        }
    }
}

/* ---- entry points ---- */

static const char *sniff_other(const uint8_t *b, size_t n) {
    if (n >= 6 && (!memcmp(b, "GIF87a", 6) || !memcmp(b, "GIF89a", 6))) return "GIF";
    if (n >= 12 && !memcmp(b, "RIFF", 4) && !memcmp(b + 8, "WEBP", 4)) return "WebP";
    if (n >= 2 && !memcmp(b, "BM", 2)) return "BMP";
    if (n >= 4 && (!memcmp(b, "II*\0", 4) || !memcmp(b, "MM\0*", 4))) return "TIFF";
    if (n >= 4 && !memcmp(b, "\0\0\1\0", 4)) return "ICO";
    if (n >= 12 && !memcmp(b + 4, "ftyp", 4) && (!memcmp(b + 8, "avif", 4) || !memcmp(b + 8, "heic", 4)))
        return "AVIF/HEIF";
    if (n >= 2 && b[0] == 'P' && b[1] >= '1' && b[1] <= '7') return "PNM";
    return NULL;
}

vc_status vc_image_decode(const uint8_t *bytes, size_t n, const char *what, vc_image_alpha alpha, vc_image *out) {
    memset(out, 0, sizeof *out);
    if (!what) what = "image";
    raw_image r;
    memset(&r, 0, sizeof r);
    r.pal_key = -1;
    vc_status st;
    if (n >= 8 && !memcmp(bytes, "\x89PNG\r\n\x1a\n", 8)) st = png_decode(bytes, n, what, &r);
    else if (n >= 3 && bytes[0] == 0xff && bytes[1] == 0xd8 && bytes[2] == 0xff) st = jpeg_decode(bytes, n, what, &r);
    else if (n == 0) return vc_fail(VC_ERR_FORMAT, "%s: empty image (0 bytes)", what);
    else {
        const char *other = sniff_other(bytes, n);
        if (other) return vc_fail(VC_ERR_UNSUPPORTED, "%s: %s images are not supported (PNG and JPEG are)", what, other);
        return vc_fail(VC_ERR_FORMAT, "%s: not a PNG or JPEG image (first bytes %02x %02x %02x %02x)", what,
                       bytes[0], n > 1 ? bytes[1] : 0, n > 2 ? bytes[2] : 0, n > 3 ? bytes[3] : 0);
    }
    if (st != VC_OK) { free(r.px); return st; }
    out->rgb = malloc((size_t)r.w * (size_t)r.h * 3);
    if (!out->rgb) { free(r.px); return vc_fail(VC_ERR_NOMEM, "%s: %dx%d RGB image", what, r.w, r.h); }
    to_rgb(&r, alpha, out->rgb);
    out->width = r.w, out->height = r.h, out->mode = r.mode;
    out->transparent = r.mode == VC_IMG_LA || r.mode == VC_IMG_RGBA || r.has_trns || r.pal_trns;
    if (alpha != VC_ALPHA_TRANSFORMERS && r.has_trns && (r.mode == VC_IMG_L || r.mode == VC_IMG_RGB)) {
        out->has_key = 1;
        for (int k = 0; k < 3; k++) out->key[k] = (uint8_t)(r.trns[k] & 0xff);
    } else if (alpha != VC_ALPHA_TRANSFORMERS && r.mode == VC_IMG_P && r.pal_key >= 0) {
        out->has_key = 1;
        memcpy(out->key, r.pal[r.pal_key], 3);
    }
    free(r.px);
    return VC_OK;
}

vc_status vc_image_load(const char *path, vc_image_alpha alpha, vc_image *out) {
    char *buf = NULL;
    size_t len = 0;
    memset(out, 0, sizeof *out);
    vc_status st = vc_read_file(path, &buf, &len);
    if (st != VC_OK) return st;
    st = vc_image_decode((const uint8_t *)buf, len, path, alpha, out);
    free(buf);
    return st;
}

void vc_image_free(vc_image *img) {
    if (!img) return;
    free(img->rgb);
    img->rgb = NULL;
    img->width = img->height = 0;
}
