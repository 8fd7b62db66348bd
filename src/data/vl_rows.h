/* Rows with images (verl's RLHFDataset and MultiTurnSFTDataset with a Qwen2-VL / Qwen2.5-VL / Qwen3-VL / GLM-4V
 * processor), shared by the RL prompt dataset (src/rl/dataset_images.c) and SFT (src/train/sft_data.c): a row's image list
 * parsed into sources and grids, its messages' "<image>" markers turned into content lists, a rendered text's pad
 * tokens expanded to the images' tokens, and the pixels of a row's images made on demand. `where` names the row
 * ("file:line") in every refusal; `key` is data.image_key. */
#ifndef VC_DATA_VL_ROWS_H
#define VC_DATA_VL_ROWS_H
#include "verlc/image.h"
#include "verlc/trainer.h"
#include <cjson/cJSON.h>

#define VC_VL_IMAGE_TOKEN "<|image_pad|>"

/* the image list imgs (n > 0 entries: paths, file:// or data URIs, {bytes, path, min_pixels, ...} objects) into
 * out[n] (calloc'd; each src points into imgs), each decoded once for its grid: fetch_image at patch (0: c's), then
 * the processor's resize */
vc_status vc_vl_parse_images(const cJSON *imgs, const vc_vl_image_config *c, int patch, const char *where,
                             const char *key, vc_rl_image **out);
/* one image value as an image list holds it (a path, file:// or data URI, an object with bytes / image / image_url /
 * path) decoded as fetch_image's to_rgb gives it; what names it in refusals */
vc_status vc_vl_decode_value(const cJSON *v, const char *what, vc_image *out);
/* the source string of such a value (pointing into it) without decoding it */
vc_status vc_vl_value_source(const cJSON *v, const char *what, const char **src);
/* verl's _build_messages: a copy of msgs whose string contents are content lists (text segments and an image item
 * per "<image>" marker, empty segments dropped; list contents kept); the markers must number n_images; "<video>" /
 * "<audio>" refused */
vc_status vc_vl_build_messages(const cJSON *msgs, int n_images, const char *where, const char *key, cJSON **out);
/* text with its k-th pad repeated im[k].tokens times into *out (malloc'd); *used (may be NULL) the pads found.
 * exact: they must number n (a whole rendering); else at most n (a rendering of the first messages) */
vc_status vc_vl_expand_pads(const char *text, const char *pad, const vc_rl_image *im, int n, int exact,
                            const char *where, char **out, int *used);
/* the pixels of im[n] through verl's path (fetch_image, the processor): *pixels [rows, *row] and *grid [n, 3]
 * (malloc'd); each image's grid must still be the one parsed (a file changed is refused by name) */
vc_status vc_vl_images_pixels(const vc_vl_image_config *c, int patch, const vc_rl_image *im, int n, const char *where,
                              float **pixels, int32_t **grid, int64_t *row);
#endif
