/* Prompt datasets (dataset.c) and their image rows (dataset_images.c). */
#ifndef VERLC_RL_DATASET_INTERNAL_H
#define VERLC_RL_DATASET_INTERNAL_H
#include "verlc/chat_template.h"
#include "verlc/data.h"
#include "verlc/tokenizer.h"
#include "verlc/trainer.h"

#define RL_IMAGE_TOKEN "<|image_pad|>"

/* row i's images (the opts->image_key list) and videos (opts->video_key), each NULL when it has none (absent, null
 * or empty); a value that is not a list is refused naming the row */
vc_status rl_row_images(const vc_jsonl *j, size_t i, const vc_rl_data_opts *o, const cJSON **images,
                        const cJSON **videos);
/* renders and tokenizes row i, whose messages msgs hold the images imgs and videos vids (verl's _build_messages, the
 * chat template, fetch_image / fetch_video + the processors' grids, the pad tokens expanded): p->ids, len, images,
 * n_images, vl_messages */
vc_status rl_render_image_row(const vc_jsonl *j, size_t i, const vc_tokenizer *tok, const vc_chat_template *tmpl,
                              const vc_rl_data_opts *o, const cJSON *msgs, const cJSON *imgs, const cJSON *vids,
                              vc_rl_prompt *p);
#endif
