/* Image inputs of vision-language models, as verl prepares them: PNG / JPEG decoding to 8-bit RGB as Pillow
 * opens and converts them, Pillow's BICUBIC resize bit for bit, and the Qwen2-VL / Qwen2.5-VL / Qwen3-VL image
 * processor (transformers' Qwen2VLImageProcessor: smart_resize, rescale, normalize, patchify) with qwen_vl_utils'
 * fetch_image in front of it (verl/utils/dataset/vision_utils.py process_image). */
#ifndef VERLC_IMAGE_H
#define VERLC_IMAGE_H
#include <stddef.h>
#include <stdint.h>
#include "verlc/core.h"

/* Pillow's DecompressionBombError limit (2 x Image.MAX_IMAGE_PIXELS): larger images are refused before any pixel
 * memory is allocated, so everything Pillow opens opens here too */
#define VC_IMAGE_MAX_PIXELS 178956970LL

/* The file's own layout, as Pillow names its modes */
typedef enum vc_image_mode {
    VC_IMG_L = 1,  /* grayscale (1/2/4/8-bit PNG, JPEG) */
    VC_IMG_I16,    /* 16-bit grayscale PNG ("I;16") */
    VC_IMG_LA,     /* grayscale + alpha */
    VC_IMG_RGB,
    VC_IMG_RGBA,
    VC_IMG_P,      /* palette PNG */
    VC_IMG_CMYK,   /* 4-component JPEG */
} vc_image_mode;

typedef struct vc_image {
    int width, height;
    uint8_t *rgb;       /* [height][width][3], row-major */
    vc_image_mode mode; /* what the file held before the conversion to RGB */
    int transparent;    /* the file had an alpha band or a tRNS chunk */
    /* A transparent colour that Pillow keeps in image.info through convert("RGB") and resize: an L or RGB file's
     * tRNS colour, or a palette's one fully transparent entry (a tRNS of 255s and one 0), decoded with
     * VC_ALPHA_QWEN_VL_UTILS. transformers' convert_to_rgb then turns the pixels of exactly that colour white
     * (alpha 0 over white) in the processor's input: vc_vl_image_process does the same. */
    int has_key;
    uint8_t key[3];
} vc_image;

/* How transparency becomes RGB: the two conversions verl's path meets */
typedef enum vc_image_alpha {
    /* qwen_vl_utils.to_rgb (fetch_image, verl's process_image): RGBA pasted onto white with its alpha as the mask;
     * every other mode through Image.convert("RGB"), which drops LA's alpha and tRNS transparency */
    VC_ALPHA_QWEN_VL_UTILS = 0,
    /* transformers' convert_to_rgb (the image processor's do_convert_rgb on a PIL image): an alpha band or a tRNS
     * colour / palette alpha composited onto white (Image.alpha_composite). For RGBA both give the same bytes. */
    VC_ALPHA_TRANSFORMERS,
    /* Image.convert("RGB") for every mode, RGBA's alpha dropped too: verl's _build_messages on a PIL image, which it
     * gets where Hugging Face datasets decodes an Image feature (a Parquet file written by `datasets`) */
    VC_ALPHA_CONVERT_RGB,
} vc_image_alpha;

/* Decodes PNG or JPEG bytes (told apart by their magic; GIF, WebP, BMP, TIFF, ... refused by name) into out->rgb
 * (malloc'd). what names the image in error messages ("row 12 image 0", a path). A truncated or corrupt file is
 * one VC_ERR_FORMAT line naming what; EXIF orientation is not applied (neither Pillow's open nor qwen_vl_utils
 * does). */
vc_status vc_image_decode(const uint8_t *bytes, size_t n, const char *what, vc_image_alpha alpha, vc_image *out);
vc_status vc_image_load(const char *path, vc_image_alpha alpha, vc_image *out);
void vc_image_free(vc_image *img);
const char *vc_image_mode_name(vc_image_mode m); /* Pillow's name: "L", "I;16", "LA", "RGB", "RGBA", "P", "CMYK" */

/* PIL.Image.resize((out_w, out_h), Image.BICUBIC) of an RGB image, bit for bit (Pillow's two-pass convolution,
 * horizontal then vertical, a pass skipped when its size is unchanged). out->rgb malloc'd. */
vc_status vc_image_resize_bicubic(const vc_image *in, int out_w, int out_h, vc_image *out);
/* the same with Pillow's filter `filter`: 2 (BILINEAR) or 3 (BICUBIC) */
vc_status vc_image_resize(const vc_image *in, int out_w, int out_h, int filter, vc_image *out);
/* torchvision's antialiased resize of a uint8 image as torch's AVX2 kernel computes it (the filter's weights in 16-bit
 * fixed point, horizontal pass first): what transformers 5's torchvision image processors give on x86-64 */
vc_status vc_image_resize_tv(const vc_image *in, int out_w, int out_h, int filter, vc_image *out);

/* ---- Qwen2-VL image processor ---- */

typedef struct vc_vl_image_config {
    int64_t min_pixels, max_pixels; /* size.shortest_edge / size.longest_edge (min_pixels / max_pixels win) */
    int patch_size, temporal_patch_size, merge_size;
    double image_mean[3], image_std[3];
    double rescale_factor;
    int do_resize, do_rescale, do_normalize, do_convert_rgb;
    int glm; /* GLM-4V's processor (Glm4vImageProcessor): its smart_resize (vc_glm4v_smart_resize) and size defaults */
    /* Kimi-VL's processor (KimiVLImageProcessor, remote code): scaled down to at most in_token_limit patches, padded
     * (pad_input) or cropped to whole patches, patches row by row (temporal_patch_size 1) */
    int kimi, pad_input;
    int64_t in_token_limit;
    /* Kimi K2.5's (kimi 2: media_proc_cfg): in_token_limit is its in_patch_limit, side_limit its
     * patch_limit_on_one_side; always padded */
    int64_t side_limit;
    /* Gemma 3's processor (Gemma3ImageProcessor): every image resized to fixed_h x fixed_w with Pillow's filter
     * `resample` (2 BILINEAR, 3 BICUBIC; the others' 3), patches row by row; its prompt markup (vc_vl_pads). With
     * do_pan_and_scan (pas) an image whose aspect ratio reaches pas_min_ratio is also cut into 2 to pas_max_crops
     * crops along its long side, each at least pas_min_crop pixels (vc_vl_gemma3_crops), each resized likewise: the
     * whole image and its crops the frames of its grid */
    int gemma3, fixed_h, fixed_w, resample;
    int pas, pas_min_crop, pas_max_crops;
    double pas_min_ratio;
    /* GOT-OCR2's processor as InternVL's processor runs it (GotOcr2ImageProcessor with crop_to_patches): each image
     * resized to the tiling of fixed_w x fixed_h tiles (min_tiles to max_tiles of them) whose aspect ratio is nearest
     * its own, cut into those tiles, plus the whole image at one tile's size where there are several; each tile a
     * frame of the grid (grid_t tiles of fixed_h / patch x fixed_w / patch patches, row by row) */
    int got, min_tiles, max_tiles;
    /* Gemma 4's processor (Gemma4ImageProcessor): each image resized (if its size changes) to the largest size of whole
     * k x k blocks of patches (merge_size k: pooling_kernel_size) within max_soft_tokens k^2 patches, its aspect ratio
     * kept; rescaled, not normalized by default; each patch's values (row, column, channel) */
    int gemma4, max_soft;
    /* Mistral 3's processor (PixtralImageProcessor): longest_edge in fixed_h; sides rounded up to whole patch x merge
     * steps; patches row by row */
    int pixtral;
    /* Llama 4's processor (Llama4ImageProcessor): fixed_h x fixed_w tiles (at most max_tiles of them) of the canvas
     * that best fits the image (resize_to_max_canvas: to_max_canvas), plus the whole image as one tile past one;
     * torchvision's resize, bfloat16 normalization */
    int llama4, to_max_canvas;
    /* transformers' torchvision backend (the class transformers 5, verl's, picks wherever torchvision is installed;
     * the default): its antialiased uint8 resize (vc_image_resize_tv) and its rescale and normalize fused in float32
     * ((x - mean / f) / (std / f), f the rescale factor); 0: the PIL backend's (Pillow's resize, x f in float64 then
     * (x - mean) / std in float32), by VERLC_IMAGE_BACKEND=pil. Kimi-VL's and Kimi K2.5's hub processors are their
     * remote code's (0); Llama 4's and transformers 5's Kimi K2.5 processor are torchvision's only */
    int tv;
} vc_vl_image_config;

/* transformers' Qwen2VLImageProcessor class defaults (min 56*56, max 28*28*1280, patch 14, temporal 2, merge 2,
 * the CLIP mean and std, rescale 1/255, every step on) */
void vc_vl_image_config_default(vc_vl_image_config *c);
/* MODEL_DIR/preprocessor_config.json (or that file's path) over the defaults; a bad value is refused naming the
 * key and the file; a processor type other than Qwen2-VL's or GLM-4V's is refused by name */
vc_status vc_vl_image_config_load(const char *path, vc_vl_image_config *c);

/* Kimi-VL's processor: the size an image of height x width leaves it at (scaled down to the token limit, padded or
 * cropped); VC_ERR_ARG naming the limit it passes (a side of 512 patches, no whole patch, no whole merge blocks) */
vc_status vc_vl_kimi_size(const vc_vl_image_config *c, int64_t height, int64_t width, int *out_h, int *out_w);

/* Llama 4's processor: the tiling of an image of height x width (*rows x *cols tiles; the returned count adds the
 * whole-image tile past one) and the size it is resized to within that canvas (*rh x *rw) */
int vc_vl_llama4_tiles(const vc_vl_image_config *c, int64_t height, int64_t width, int *rows, int *cols, int *rh,
                       int *rw);
/* the processor's resize: Pillow's filter, or torchvision's with c->tv */
vc_status vc_vl_resize(const vc_vl_image_config *c, const vc_image *in, int out_w, int out_h, int filter, vc_image *out);
/* Llama 4's levels: each 8-bit level rescaled and normalized as its processor does in bfloat16 */
void vc_vl_llama4_levels(const vc_vl_image_config *c, float table[3][256]);

/* Mistral 3's processor: the size an image of height x width is resized to (get_resize_output_image_size at patch x
 * merge); VC_ERR_ARG past 32768 pixels a side */
vc_status vc_vl_pixtral_size(const vc_vl_image_config *c, int64_t height, int64_t width, int *out_h, int *out_w);

/* Gemma 4's processor: the size an image of height x width is resized to (get_aspect_ratio_preserving_size);
 * VC_ERR_ARG when it comes out 0 x 0 or over the patch budget */
vc_status vc_vl_gemma4_size(const vc_vl_image_config *c, int64_t height, int64_t width, int *out_h, int *out_w);

/* Gemma 3's pan and scan of an image of height x width: the crops it is cut into (0: none: pan and scan off, or the
 * image not elongated enough, or its crops under the minimum), *ncw x *nch of them, each *cw x *chh pixels (the last
 * clipped to the image) */
int vc_vl_gemma3_crops(const vc_vl_image_config *c, int64_t height, int64_t width, int *ncw, int *nch, int *cw,
                       int *chh);

/* GOT-OCR2's tiling (get_optimal_tiled_canvas) of an image of height x width: *cols x *rows tiles; the tiles the
 * processor gives it (the thumbnail included) */
int vc_vl_got_tiles(const vc_vl_image_config *c, int64_t height, int64_t width, int *cols, int *rows);

/* transformers' smart_resize: both sides multiples of factor, the area within [min_pixels, max_pixels] (the
 * min bound met after rounding up, the max bound after rounding down, each at least factor), the aspect ratio
 * kept; VC_ERR_ARG when max / min side > 200 */
vc_status vc_vl_smart_resize(int64_t height, int64_t width, int factor, int64_t min_pixels, int64_t max_pixels,
                             int *out_h, int *out_w);
/* GLM-4V's smart_resize (transformers' glm4v image_processing smart_resize with num_frames = temporal_factor =
 * temporal): sides under factor first scaled up (truncated), then as vc_vl_smart_resize with the area counted over
 * `temporal` frames (the min-bound branch not clamped to factor) */
vc_status vc_glm4v_smart_resize(int64_t height, int64_t width, int temporal, int factor, int64_t min_pixels,
                                int64_t max_pixels, int *out_h, int *out_w);
/* the processor's resize of a height x width image: c's smart_resize (Qwen2-VL's or GLM-4V's) */
vc_status vc_vl_processor_resize(const vc_vl_image_config *c, int64_t height, int64_t width, int *out_h, int *out_w);
/* qwen_vl_utils' smart_resize: the same but each side first rounded to at least factor, and the max-bound branch
 * not clamped to factor (a side of 0 is refused here where Pillow would refuse the resize); max < min refused */
vc_status vc_qwen_vl_utils_smart_resize(int64_t height, int64_t width, int factor, double min_pixels, double max_pixels,
                                        int *out_h, int *out_w);

typedef struct vc_vl_pixels {
    float *data;          /* [rows, cols] malloc'd */
    int64_t rows, cols;   /* rows = grid_t * grid_h * grid_w, cols = 3 * temporal_patch_size * patch_size^2 */
    int grid_t, grid_h, grid_w;
} vc_vl_pixels;

/* One image through the processor: pixel_values rows in transformers' order (merge_size x merge_size blocks of
 * patches, each block's patches row by row) and columns (channel, temporal copy, patch row, patch column); the
 * still image repeated temporal_patch_size times; grid_t = 1. img->mode tells do_convert_rgb = false apart (only
 * an RGB file gets through it, as transformers' normalize refuses the others' channel counts). */
vc_status vc_vl_image_process(const vc_vl_image_config *c, const vc_image *img, const char *what, vc_vl_pixels *out);
void vc_vl_pixels_free(vc_vl_pixels *p);
/* the image's placeholder tokens in the prompt: grid_t * grid_h * grid_w / merge_size^2 */
int64_t vc_vl_image_tokens(const vc_vl_pixels *p, int merge_size);

/* qwen_vl_utils.fetch_image's resize (after to_rgb, i.e. an image decoded with VC_ALPHA_QWEN_VL_UTILS): factor
 * patch_size * 2; min / max pixels 0 = its defaults 4 and 16384 tokens (factor^2 pixels each); resized_h / _w both
 * > 0: the row's resized_height / resized_width, smart-resized with the default bounds instead of the image's
 * size. out->rgb malloc'd. */
typedef struct vc_vl_fetch_opts {
    int patch_size;
    int64_t min_pixels, max_pixels;
    int resized_h, resized_w;
} vc_vl_fetch_opts;
vc_status vc_vl_fetch_image(const vc_image *in, const vc_vl_fetch_opts *o, const char *what, vc_image *out);
/* verl's path for one image: fetch_image (patch size from the config unless o->patch_size is set), then the
 * processor */
vc_status vc_vl_verl_image(const vc_vl_image_config *c, const vc_image *in, const vc_vl_fetch_opts *o,
                           const char *what, vc_vl_pixels *out);

/* ---- videos: qwen_vl_utils' fetch_video and the Qwen2-VL / Qwen3-VL video processors ---- */

/* transformers' Qwen2VLVideoProcessor (Qwen2-VL, Qwen2.5-VL) or Qwen3VLVideoProcessor (Qwen3-VL, Qwen3.5): what
 * video_preprocessor_config.json (else preprocessor_config.json, as transformers falls back) sets over the class
 * defaults */
typedef struct vc_vl_video_config {
    int64_t min_pixels, max_pixels; /* size.shortest_edge / size.longest_edge (min_pixels / max_pixels win) */
    int patch_size, temporal_patch_size, merge_size;
    double image_mean[3], image_std[3];
    double rescale_factor;
    int do_resize, do_rescale, do_normalize;
    int qwen3;                 /* Qwen3VLVideoProcessor: smart_resize over all frames; timestamps in the text */
    int cap_pixels_per_frame;  /* the processor's per-frame cap (default off, as transformers 5.25) */
    int64_t max_video_tokens;  /* its budget (128000) */
    /* its own frame sampling (sample_frames), which runs on frames handed over without their timing (verl's SFT
     * path; its RL path turns it off): on by default for Qwen3VLVideoProcessor, off for Qwen2VLVideoProcessor */
    int do_sample_frames;
    double fps;                /* frames per second it keeps (2; 0: null) */
    int64_t num_frames;        /* > 0: this many frames instead (null by default) */
    int64_t min_frames, max_frames; /* 4, 768 */
} vc_vl_video_config;

void vc_vl_video_config_default(vc_vl_video_config *c, int qwen3);
/* MODEL_DIR's video_preprocessor_config.json, else its preprocessor_config.json, over the class defaults of the
 * processor qwen3 names; a video_processor_type of another family is refused by name */
vc_status vc_vl_video_config_load(const char *model_dir, int qwen3, vc_vl_video_config *c);
/* the processor's sample_frames over n frames handed over without their metadata (transformers then takes them for
 * 24 per second): *idx (malloc'd [*m]) the frames kept, all of them unless c->do_sample_frames; Qwen3VLVideoProcessor's
 * int(n / 24 * fps) frames within [min_frames, max_frames] and n (or num_frames), numpy's linspace(0, n - 1) rounded
 * half to even; Qwen2VLVideoProcessor's sampling without the video's fps is refused, as transformers refuses it */
vc_status vc_vl_video_processor_sample(const vc_vl_video_config *c, int64_t n, const char *what, int64_t **idx,
                                       int64_t *m);
/* the processor's resize of n frames of height x width (Qwen3-VL's smart_resize counts every frame) */
vc_status vc_vl_video_resize_hw(const vc_vl_video_config *c, int n, int height, int width, int *out_h, int *out_w);
/* n frames (8-bit RGB, one size) through the processor: resize (torchvision's antialiased bicubic on float frames,
 * skipped when the size stays), rescale and normalize fused as transformers fuses them, the last frame repeated to
 * a multiple of temporal_patch_size, patches in transformers' order: grid (n / temporal, h / patch, w / patch) */
vc_status vc_vl_video_process(const vc_vl_video_config *c, const vc_image *frames, int n, const char *what,
                              vc_vl_pixels *out);

/* a video entry's sampling and size keys, as qwen_vl_utils' fetch_video reads them (0 / has_*: absent) */
typedef struct vc_vl_video_opts {
    double fps;                 /* has_fps: frames sampled per second of video (default 2) */
    int has_fps;
    int64_t nframes;            /* >0: this many frames (rounded to 2) instead of fps sampling */
    int64_t min_frames, max_frames;
    int64_t min_pixels, max_pixels, total_pixels;
    int resized_h, resized_w;
    double video_start, video_end;
    int has_start, has_end;
    double sample_fps, raw_fps; /* frame lists: their fps (default 2) and the metadata's (default sample_fps) */
} vc_vl_video_opts;

/* qwen_vl_utils' smart_nframes: the frames sampled of total at video_fps */
vc_status vc_vl_smart_nframes(const vc_vl_video_opts *o, int64_t total, double video_fps, int64_t *n);
/* the frames fetch_video reads of a video of total frames at video_fps: calculate_video_frame_range, smart_nframes
 * on the range, torch.linspace(start, end, n).round(); *idx malloc'd [*n]; *count (may be NULL) the range's frames
 * (its metadata's total_num_frames) */
vc_status vc_vl_video_sample(const vc_vl_video_opts *o, int64_t total, double video_fps, int64_t **idx, int64_t *n,
                             int64_t *count);
/* fetch_video's resize of n sampled frames (torchvision's antialiased bicubic on 8-bit frames, as Pillow's), in place */
vc_status vc_vl_fetch_resize(vc_image *frames, int n, const vc_vl_video_opts *o, int patch, const char *what);
/* fetch_video on a frame list: each image through fetch_image (with the video's min / max_pixels and resized_*; in
 * steps of 4 patches, as qwen_vl_utils passes its image factor for fetch_image's patch size), the last frame
 * repeated to an even count, then vc_vl_fetch_resize; *out malloc'd [*n_out] (vc_image_free each) */
vc_status vc_vl_fetch_frame_list(const vc_image *in, int n, const vc_vl_video_opts *o, int patch, const char *what,
                                 vc_image **out, int *n_out);
/* fetch_video's frame size for n frames of height x width at image patch size patch */
vc_status vc_vl_fetch_video_hw(const vc_vl_video_opts *o, int patch, int64_t n, int height, int width, int *out_h,
                               int *out_w);
/* Qwen3-VL's timestamps: the frames' indices / fps, averaged in pairs (the last repeated to an even count);
 * ts[(n + 1) / 2] */
void vc_vl_video_timestamps(const int64_t *idx, int64_t n, double fps, double *ts);
#endif
