/* Rows with images (verl's RLHFDataset and MultiTurnSFTDataset with a Qwen2-VL / Qwen2.5-VL / Qwen3-VL / GLM-4V
 * processor), shared by the RL prompt dataset (src/rl/dataset_images.c) and SFT (src/train/sft_data.c): a row's image list
 * parsed into sources and grids, its messages' "<image>" markers turned into content lists, a rendered text's pad
 * tokens expanded to the images' tokens, and the pixels of a row's images made on demand. `where` names the row
 * ("file:line") in every refusal; `key` is data.image_key. */
#ifndef VC_DATA_VL_ROWS_H
#define VC_DATA_VL_ROWS_H
#include "verlc/image.h"
#include "verlc/model.h"
#include "verlc/trainer.h"
#include <cjson/cJSON.h>

#define VC_VL_IMAGE_TOKEN "<|image_pad|>"
#define VC_VL_VIDEO_TOKEN "<|video_pad|>"

/* How a model takes videos (src/data/vl_videos.c): its video processor, vc_vision_video_mode's mode and Qwen2.5-VL's
 * tokens_per_second, the image patch size fetch_video sizes frames with */
typedef struct vc_vl_videos {
    vc_vl_video_config cfg;
    int mode, tps, patch;
    /* 1: the processor gets the frames without their timing, as verl's MultiTurnSFTDataset hands them over
     * (transformers' VideoMetadata then says 24 frames per second: Qwen2.5-VL's time step) */
    int no_metadata;
} vc_vl_videos;

/* The pad tokens a rendering holds: the image pad, and (videos: NULL for none) the video pad; Gemma 3 (close not
 * NULL): the rendering's image marker `image` is its begin-of-image token, written as Gemma3Processor's
 * full_image_sequence: "\n\n", image, the image token `rep` once per feature, close, "\n\n" */
typedef struct vc_vl_pads {
    const char *image, *video, *rep, *close;
    const char *open; /* InternVL (close not NULL): the text before the pads, the marker being the pad itself */
    const char *brk;  /* Mistral 3 (close its end-of-image text): each row of pads followed by this, the last by close */
    int tiles;        /* Llama 4: open, the tiles' pads row by row between tile separators, image, the whole image's
                       * pads, close */
} vc_vl_pads;
/* p's image marker made Gemma 3's where the model's config names begin / end of image tokens (boi and eoi: their
 * texts; either NULL: p unchanged), its image token the pad repeated */
void vc_vl_pads_markup(vc_vl_pads *p, const char *boi, const char *eoi);
/* model config mc's markup texts (tok: its tokenizer): its image_open / image_close (InternVL's; Mistral 3's row break
 * and end), or the begin / end of image tokens' texts (NULL: none); its image_wrap: how they mark the pads up
 * (vc_vl_pads_apply) */
struct vc_tokenizer;
int vc_vl_markup_texts(const vc_model_config *mc, const struct vc_tokenizer *tok, const char **open, const char **close);
/* p marked up with texts a and b as mode says: 0 Gemma 3's (vc_vl_pads_markup), 1 around the pads (vc_vl_pads_wrap),
 * 2 rows of pads each followed by a, the last by b (Mistral 3's [IMG_BREAK] / [IMG_END]), 3 Llama 4's tiles between a
 * and b (<|image_start|>, <|image_end|>), the template's <|image|> the marker */
void vc_vl_pads_apply(vc_vl_pads *p, int mode, const char *a, const char *b);
/* p's markup as model config mc's (either function above) */
void vc_vl_pads_model(vc_vl_pads *p, const vc_model_config *mc, const struct vc_tokenizer *tok);
/* InternVLProcessor's markup where open and close are given (a model config's image_open / image_close; either NULL:
 * p unchanged): each image pad of the rendering becomes open, the pad once per feature, close */
void vc_vl_pads_wrap(vc_vl_pads *p, const char *open, const char *close);

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
/* verl's _build_messages: a copy of msgs whose string contents are content lists (text segments, an image item per
 * "<image>" marker and a video item per "<video>" marker, empty segments dropped; list contents kept); the markers
 * must number n_images and n_videos; "<audio>" refused. *order (may be NULL; malloc'd) spells the markers' kinds in
 * order, 'i' or 'v'. */
vc_status vc_vl_build_messages(const cJSON *msgs, int n_images, int n_videos, const char *where, const char *key,
                               const char *video_key, cJSON **out, char **order);
/* text with its k-th pad repeated im[k].tokens times into *out (malloc'd); *used (may be NULL) the pads found.
 * exact: they must number n (a whole rendering); else at most n (a rendering of the first messages) */
vc_status vc_vl_expand_pads(const char *text, const char *pad, const vc_rl_image *im, int n, int exact,
                            const char *where, char **out, int *used);
/* the same over images and videos in text order: an image pad takes the next entry (an image), a video pad the next
 * video's entries: Qwen2-VL's pad repeated for its grid; Qwen3-VL's pad replaced by each frame group's "<T seconds>"
 * (one decimal), vision start, pads and vision end, as transformers 5's processor writes them. *used counts the
 * entries taken. */
vc_status vc_vl_expand_visuals(const char *text, const vc_vl_pads *pads, const vc_rl_image *im, int n, int exact,
                               const char *where, char **out, int *used);
/* the row's images (imgs, n_img) and videos (vids, n_vid) parsed in marker order (order from
 * vc_vl_build_messages) into *out[*n_out] (calloc'd): each image as vc_vl_parse_images does, each video through
 * vc_vl_parse_video. vv NULL: videos refused (why) */
vc_status vc_vl_parse_visuals(const cJSON *imgs, const cJSON *vids, const char *order, const vc_vl_image_config *c,
                              int patch, const vc_vl_videos *vv, const char *why, const char *where,
                              const char *key, const char *video_key, vc_rl_image **out, int *n_out);
/* a video value (a path or file:// URI, a list of frames, or an object with "video" and fetch_video's keys) read
 * for its frame size and sampling: its entries appended to *ims (*n grows; *cap its capacity) */
vc_status vc_vl_parse_video(const cJSON *v, const vc_vl_videos *vv, const char *what, vc_rl_image **ims, int *n,
                            int *cap);
/* how model m takes videos: its video processor from dir (the model's folder), the mode and time step of its tower,
 * fetch_video's image patch size; *ok 0 (why says why) for a model without them (GLM-4V's are not built) */
vc_status vc_vl_videos_setup(const vc_model *m, const char *dir, int patch, vc_vl_videos *vv, char *why,
                             size_t cap, int *ok);
/* video entry e's pixels through verl's path (fetch_video, the video processor): all its frame groups' rows */
vc_status vc_vl_video_pixels(const vc_vl_videos *vv, const vc_rl_image *e, const char *what, vc_vl_pixels *out);
/* the pixels of im[n] through verl's path (fetch_image, the processor): *pixels [rows, *row] and *grid [n, 3]
 * (malloc'd); each image's grid must still be the one parsed (a file changed is refused by name) */
vc_status vc_vl_images_pixels(const vc_vl_image_config *c, int patch, const vc_rl_image *im, int n, const char *where,
                              float **pixels, int32_t **grid, int64_t *row);
/* as vc_vl_images_pixels over images and videos (vv: the videos' processor, NULL when there are none); *t_scale
 * (may be NULL) [n] malloc'd when an entry has a time step (Qwen2.5-VL's videos), else NULL */
vc_status vc_vl_visuals_pixels(const vc_vl_image_config *c, int patch, const vc_vl_videos *vv, const vc_rl_image *im,
                               int n, const char *where, float **pixels, int32_t **grid, int64_t *row,
                               float **t_scale);
#endif
