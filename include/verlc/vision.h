/* Image inputs of image-text models (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, GLM-4V): the vision tower that turns an image
 * processor's patch rows into the features that replace the image's placeholder tokens, and the multimodal rope's positions (M-RoPE:
 * a temporal, height and width position per token). */
#ifndef VERLC_VISION_H
#define VERLC_VISION_H
#include "verlc/model.h"

/* Images as the image processor gives them (transformers' pixel_values and image_grid_thw): image i has grid[3 i ..
 * 3 i + 3) = (t, h, w) patches, its t h w rows of `row` floats (channels x temporal patch x patch x patch) following
 * image i - 1's in pixels (host memory), in the processor's order (merge-size blocks of patches, frame by frame). In a
 * batch, image i is the i-th run of image tokens (each run t h w / merge^2 tokens long), counted over the sequences in
 * order. Videos are entries too, their runs of the video token: Qwen2-VL's and Qwen2.5-VL's one entry of t frame
 * groups, Qwen3-VL's and Qwen3.5's one entry of grid (1, h, w) per frame group (their runs apart, timestamps
 * between). t_scale (NULL: 1 for every entry) is each entry's M-RoPE time step per frame group: Qwen2.5-VL's
 * tokens_per_second * second_per_grid_t for a video, the temporal index being (int64)(frame * t_scale) in float32 as
 * transformers computes it. */
typedef struct vc_images {
    int n;
    const int32_t *grid;
    const float *pixels;
    int64_t row;
    const float *t_scale;
} vc_images;

typedef struct vc_vision vc_vision;

/* The vision tower of an image-text checkpoint (config.json's vision_config, the visual.* / model.visual.* tensors)
 * loads with the model (vc_model_load, vc_model_init_random), its tensors among the model's parameters (named as the
 * checkpoint names them: trained, checkpointed and reduced across ranks with the text weights). VC_OK when m has it;
 * else the reason, by name: VC_ERR_UNSUPPORTED for a model type verlc has no tower for, VC_ERR_MISSING for a
 * checkpoint without vision_config or without the tower's tensors. */
vc_status vc_model_load_vision(vc_model *m);
/* frozen 1: the tower's parameters get no gradients and stay out of optimisers created afterwards (verl's
 * actor.freeze_vision_tower), and so do its LoRA adapters (kept as drawn: verl freezes the tower after PEFT made them;
 * left out of vc_model_lora_params); 0: trained again (gradient buffers as vc_model_enable_grad gives the rest) */
vc_status vc_model_freeze_vision(vc_model *m, int frozen);
/* m's tower, or NULL when it has none */
vc_vision *vc_model_vision(const vc_model *m);
/* VC_OK when the tower takes im: rows of its width, grids of whole merge x merge blocks; else a named error */
vc_status vc_vision_check(const vc_vision *v, const vc_images *im);
/* features [tokens, text hidden] of the images, tokens = sum of t h w / merge^2 (with gradient when trainable) */
vc_tensor *vc_vision_forward(vc_vision *v, vc_graph *g, const vc_images *im);
/* Qwen3-VL's deepstack: the last vc_vision_forward's features from its deepstack mergers into out[] (each [tokens,
 * text hidden], added to the image tokens' hidden states after decoder layer j); returns how many (0: none) */
int vc_vision_deepstack(const vc_vision *v, vc_tensor **out);
/* image i's tokens in the text */
int64_t vc_vision_image_tokens(const vc_vision *v, const vc_images *im, int i);
/* the floats of one patch row the tower takes, and its spatial merge size */
int64_t vc_vision_row(const vc_vision *v);
int vc_vision_merge(const vc_vision *v);
/* how the model takes a video (see vc_images): one entry whose temporal positions step by frame group (Qwen2-VL),
 * one entry stepping by tokens_per_second * second_per_grid_t (Qwen2.5-VL: *tps its tokens_per_second), an entry per
 * frame group with timestamps between (Qwen3-VL, Qwen3.5), or none built (GLM-4V) */
enum { VC_VIDEO_NONE, VC_VIDEO_WHOLE, VC_VIDEO_TIMED, VC_VIDEO_SPLIT };
int vc_vision_video_mode(const vc_vision *v, int *tps);
/* the patch rows (pixels rows) of images [0, n) of im: the sum of their t h w */
int64_t vc_images_rows(const vc_images *im, int n);
/* the tower's tensors, for gradients and checks: n tensors, tensor i named name[i] as the checkpoint names it */
int vc_vision_count(const vc_vision *v);
vc_tensor *vc_vision_tensor(vc_vision *v, int i, const char **name);
/* the gradient of the tensor the checkpoint names hf_name (visual.* or model.visual.*) into a new host array */
vc_status vc_vision_hf_grad(const vc_vision *v, const char *hf_name, float **out, int64_t *n);
/* sequence s's images in b (the runs of image tokens in its rows: b->images from the first run in s on), as a view of
 * b->images; out->n 0 when it has none */
vc_status vc_images_of_seq(const vc_model *m, const vc_batch *b, int s, vc_images *out);

/* the images of n sequences (each[i] NULL or with n 0: none) as one vc_images in g's arena (host memory), in that
 * order (a packed batch's b->images); out->n 0 when none has any. Rows of different widths are refused. */
vc_status vc_images_gather(vc_graph *g, const vc_images *const *each, int n, vc_images *out);

/* a memory-plan trial row that leads with im's images: ids[0..) their runs of image tokens, each followed by one
 * plain token, the rest of ids[0..len) made plain where it held the image token; returns the tokens the images took
 * (their image span), or -1 when they do not fit len */
int64_t vc_images_trial_ids(const vc_model *m, const vc_images *im, int32_t *ids, int64_t len);

/* M-RoPE positions of a packed batch (transformers' get_rope_index): pos[3][T] (time, height, width), each sequence's
 * from 0 (plus start[s] when not NULL: tokens already cached; a sequence's images are computed with its first tokens,
 * so in a sequence with cached tokens the image token is a token like any other); an image's tokens take (start of the image + frame,
 * + row, + column) of its merged grid and the text after it continues at the image's start + max(rows, columns).
 * pos may be NULL (only delta wanted). delta[s] (NULL: not wanted) gets the offset of decoding positions after sequence s: its largest position + 1 less
 * its length. Image runs past im's images, or a run whose length is not its image's tokens, are refused by row. */
vc_status vc_mrope_positions(const vc_model *m, const vc_batch *b, const int64_t *start, int64_t *pos, int64_t *delta);
#endif
