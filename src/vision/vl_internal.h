/* Helpers shared by the image and video processors' config readers (vl_proc.c, video_proc.c) */
#ifndef VC_VISION_VL_INTERNAL_H
#define VC_VISION_VL_INTERNAL_H
#include <cjson/cJSON.h>
#include <stdint.h>
#include "verlc/core.h"

/* transformers' OPENAI_CLIP_MEAN / OPENAI_CLIP_STD */
extern const double VC_CLIP_MEAN[3], VC_CLIP_STD[3];
/* key: 3 numbers (one per RGB channel) or one number for all; absent: out kept; positive: each must be > 0 */
vc_status vc_vl_get_triple(const cJSON *j, const char *key, double out[3], int positive, const char *file);
/* the size dict's height and width, each an integer in [1, max]; absent: kept */
vc_status vc_vl_get_hw(const cJSON *j, int64_t max, int64_t *h, int64_t *w, const char *file);
/* key: an integer in [1, max]; absent: *v kept */
vc_status vc_vl_get_pos_int(const cJSON *j, const char *key, int64_t max, int64_t *v, const char *file);
/* n frames [n][h][w][3] of processed values into out's rows in transformers' order (frame groups of T, merge x merge
 * blocks of P x P patches; columns: channel, temporal copy, y, x), the last frame repeated to a whole group */
struct vc_vl_pixels;
vc_status vc_vl_patchify(const float *frames, int n, int h, int w, int P, int M, int T, const char *what,
                         struct vc_vl_pixels *out);
/* Llama 4's processor (llama4_proc.c): its keys (max_patches at most VL_LLAMA4_MAX_TILES, whose tilings number under
 * VL_LLAMA4_CANVASES); one image's tiles' pixel values */
#define VL_LLAMA4_MAX_TILES 256
#define VL_LLAMA4_CANVASES 2048
vc_status vc_vl_llama4_parse(const cJSON *j, struct vc_vl_image_config *c, const char *file);
vc_status vc_vl_llama4_process(const struct vc_vl_image_config *c, const struct vc_image *img, const char *what,
                               struct vc_vl_pixels *out);
/* Kimi-VL's processor (kimi_proc.c): its keys from preprocessor_config.json; one image's pixel values */
struct vc_vl_image_config;
struct vc_image;
vc_status vc_vl_kimi_parse(const cJSON *j, struct vc_vl_image_config *c, const char *file);
/* Kimi K2.5's: media_proc_cfg's keys */
vc_status vc_vl_kimi25_parse(const cJSON *j, struct vc_vl_image_config *c, const char *file);
/* transformers 5's Kimi_K25ImageProcessor (torchvision only): the same steps at its keys, on the torchvision backend */
vc_status vc_vl_kimi25_native_parse(const cJSON *j, struct vc_vl_image_config *c, const char *file);
vc_status vc_vl_kimi_process(const struct vc_vl_image_config *c, const struct vc_image *img, const char *what,
                             struct vc_vl_pixels *out);
/* GOT-OCR2's processor (got_proc.c): its keys; one image's tiles' pixel values (levels through table) */
vc_status vc_vl_got_parse(const cJSON *j, struct vc_vl_image_config *c, const char *file);
vc_status vc_vl_got_process(const struct vc_vl_image_config *c, const struct vc_image *img, const float table[3][256],
                            const char *what, struct vc_vl_pixels *out);
/* Gemma 3's processor with pan and scan (gemma3_proc.c): the whole image and its crops as frames */
vc_status vc_vl_gemma3_process(const struct vc_vl_image_config *c, const struct vc_image *img,
                               const float table[3][256], const char *what, struct vc_vl_pixels *out);
/* Mistral 3's processor (pixtral_proc.c): its keys */
vc_status vc_vl_pixtral_parse(const cJSON *j, struct vc_vl_image_config *c, const char *file);
/* Gemma 4's processor (gemma4_proc.c): its keys; one image's patches (levels through table) */
vc_status vc_vl_gemma4_parse(const cJSON *j, struct vc_vl_image_config *c, const char *file);
vc_status vc_vl_gemma4_process(const struct vc_vl_image_config *c, const struct vc_image *img, const float table[3][256],
                               const char *what, struct vc_vl_pixels *out);
/* rescale and normalize as transformers' numpy functions compute them: the value of each 8-bit level of each channel */
void vc_vl_level_table(const struct vc_vl_image_config *c, float table[3][256]);
/* Python's round() of a float: half to even */
double vc_py_round(double x);
#endif
