/* verlc trainer: verl's PPO/GRPO loop (verl/trainer/ppo/ray_trainer.py RayPPOTrainer.fit) in one
 * process: rollout -> rewards -> old/ref log-probs -> values -> KL-in-reward -> advantages ->
 * critic and actor updates -> metrics, validation and checkpoints. Configured with verl's keys
 * (include/verlc/config.h). The actor and the rollout share one vc_model. */
#ifndef VERLC_TRAINER_H
#define VERLC_TRAINER_H
#include "verlc/config.h"
#include "verlc/core.h"
#include <stddef.h>
#include <stdint.h>

struct vc_tokenizer;
struct vc_chat_template;
struct vc_jsonl;
struct vc_comm;
struct vc_vl_image_config;

/* ---- prompt datasets (verl's RLHFDataset) -------------------------------------------------------- */
/* One image of a prompt, as its row gives it (the pixels are made on demand: vc_rl_prompt_images) */
typedef struct vc_rl_image {
    const char *src;           /* in the dataset's rows: a path (relative: to the current directory, as verl opens
                                * it), a "file://" path, an http(s) URL, or a base64 data URI (a {"bytes": ...} entry
                                * of a Parquet file, a "data:image/...;base64," string) */
    int64_t min_pixels, max_pixels; /* the row's per-image bounds for fetch_image; 0: its defaults */
    int resized_h, resized_w;  /* the row's resized_height / resized_width (both or neither); 0: none */
    int32_t grid[3];           /* image_grid_thw: t, h, w patches */
    int tiles_h, tiles_w;      /* Llama 4: the canvas's tile rows and columns (grid[0] counts them and, past one, the
                                * whole-image tile); 0 elsewhere */
    int64_t tokens;            /* its <|image_pad|> tokens in ids: t h w / merge_size^2 */
    int crops;                 /* Gemma 3's pan and scan: the image's crops (grid[0] - 1 of its frames); 0 elsewhere */
    int width, height;         /* the decoded source's pixels (0 where not known) */
    int pil;                   /* a PIL image in verl ({"bytes": ..., "pil": true}: a Parquet column that Hugging Face
                                * datasets decodes as its Image feature): _build_messages converts it to RGB (an
                                * alpha band dropped, not pasted on white) before fetch_image */
    /* a video (an entry of the row's data.video_key list; src its path, or NULL for a frame list): its frames
     * sampled, sized and processed together. Qwen3-VL / Qwen3.5 split it into one entry per frame group (group of
     * groups, each with its timestamp ts in seconds); Qwen2-VL / Qwen2.5-VL keep one entry (groups 0; t_scale:
     * Qwen2.5-VL's time step per frame group, 0 for Qwen2-VL) */
    const struct cJSON *video;
    int group, groups;
    double ts;
    float t_scale;
} vc_rl_image;

typedef struct vc_rl_prompt {
    int32_t *ids;              /* chat-template-rendered, tokenized prompt (each image's pad token expanded) */
    int64_t len;
    const char *data_source;   /* points into the dataset */
    const char *ground_truth;  /* text of reward_model.ground_truth, NULL when absent */
    char *extra_info;          /* JSON text of extra_info or NULL */
    int64_t line;              /* source line */
    const struct cJSON *messages; /* the prompt's messages (verl's raw_prompt), in the dataset's rows */
    const struct cJSON *row;      /* the whole data row */
    int n_images;                 /* the row's images and videos (a Qwen3-VL video: an entry per frame group), in the
                                   * order of their <image> / <video> markers */
    vc_rl_image *images;          /* [n_images] (owned by the dataset) */
    const struct cJSON *vl_messages; /* rows with images: the messages with content lists ({"type": "image"},
                                      * {"type": "text", "text": ...}) that the template rendered (verl's
                                      * raw_prompt); NULL for text rows */
} vc_rl_prompt;

typedef struct vc_rl_dataset {
    struct vc_jsonl *rows;
    size_t n;
    vc_rl_prompt *p;
    size_t n_filtered;         /* prompts dropped by filter_overlong_prompts */
    size_t n_truncated;
    struct vc_vl_image_config *vl; /* the image processor's settings (a copy), NULL when images are off */
    int image_patch_size;      /* fetch_image's patch size */
    struct vc_vl_videos *videos; /* the video processor's settings (a copy), NULL when videos are off */
} vc_rl_dataset;

typedef struct vc_rl_data_opts {
    const char *prompt_key;     /* "prompt" */
    int64_t max_prompt_length;  /* tokens */
    int filter_overlong;        /* drop longer prompts (counted) */
    const char *truncation;     /* "error", "left", "right", "middle" */
    int64_t max_samples;        /* <= 0: all; else that many rows: the first ones, or with pick_random the ones
                                 * np.random.default_rng(pick_seed).choice(rows, max_samples, replace=False) gives, in
                                 * its order (verl's RLHFDataset with data.shuffle and a data.seed) */
    int pick_random;
    uint64_t pick_seed;
    int need_ground_truth;      /* rows without reward_model.ground_truth are an error */
    const struct cJSON *chat_kwargs; /* data.apply_chat_template_kwargs (e.g. {"enable_thinking": false}) or NULL */
    const char *reward_fn_key;  /* data.reward_fn_key: the row field that selects the reward function and
                                 * groups validation metrics (NULL or "data_source": data_source) */
    /* image inputs (verl's RLHFDataset with a Qwen2-VL / Qwen2.5-VL processor): a row whose image_key list is not
     * empty has its messages' "<image>" markers turned into image items of content lists, rendered, each image's
     * pad token expanded to its grid's tokens; rows without images stay text rows */
    const char *image_key;      /* data.image_key ("images"); NULL: image lists are not looked at */
    const char *video_key;      /* data.video_key ("videos"): each row's videos, in the order of its "<video>" markers */
    const struct vc_vl_videos *videos; /* the model's video processor and how it takes videos; NULL: rows with
                                        * videos refused (no_video_reason says why) */
    const char *no_video_reason;
    const struct vc_vl_image_config *vl; /* the model's preprocessor_config.json; NULL: rows with images refused */
    const char *no_image_reason; /* with vl NULL: why, for the refusal ("model_type llama has no vision_config") */
    const char *image_token;    /* NULL: "<|image_pad|>" */
    const char *image_boi, *image_eoi; /* the markup's texts (vc_vl_markup_texts: Gemma 3's begin / end of image
                                        * tokens, vc_vl_pads_markup); NULL */
    int image_wrap;                    /* how they mark the pads up: 1 around them (InternVL, Gemma 4), 2 as rows (Mistral
                                        * 3; vc_vl_pads_apply) */
    const char *video_token;    /* NULL: "<|video_pad|>" */
    int image_patch_size;       /* data.image_patch_size for fetch_image; 0: vl's patch_size */
} vc_rl_data_opts;

/* Reads a JSONL file in verl's row schema; errors name file:line and the key. */
vc_status vc_rl_dataset_load(const char *path, const struct vc_tokenizer *tok, const struct vc_chat_template *tmpl,
                             const vc_rl_data_opts *opts, vc_rl_dataset **out);
void vc_rl_dataset_free(vc_rl_dataset *d);
/* Prompt i's images through verl's path (fetch_image, then the image processor): *pixels [rows, *row] (transformers'
 * pixel_values of all its images in order) and *grid [*n_images, 3] (image_grid_thw), both malloc'd (the caller
 * frees them); a prompt without images gives NULL, NULL, 0. Images are read again from their sources: a file that
 * changed since the load (another grid) is refused naming the row. */
vc_status vc_rl_prompt_images(const vc_rl_dataset *d, size_t i, float **pixels, int32_t **grid, int *n_images,
                              int64_t *row);
/* the same with videos (their entries among the images, in marker order); *t_scale (may be NULL) [*n_images]
 * malloc'd when an entry has a time step (Qwen2.5-VL's videos: vc_images.t_scale), else NULL */
vc_status vc_rl_prompt_visuals(const vc_rl_dataset *d, size_t i, float **pixels, int32_t **grid, int *n_images,
                               int64_t *row, float **t_scale);

/* ---- the trainer -------------------------------------------------------------------------------- */
typedef struct vc_rl_trainer vc_rl_trainer;

/* Loads model(s), tokenizer, datasets and the reward function from the config; resumes from the
 * latest checkpoint in trainer.default_local_dir when trainer.resume_mode is auto. */
vc_status vc_rl_trainer_new(const vc_config *cfg, vc_rl_trainer **out);
/* Runs validation (when configured), the training steps, checkpoints and the final export. */
vc_status vc_rl_trainer_fit(vc_rl_trainer *t);
/* One validation pass; its metrics are returned by vc_rl_trainer_metric afterwards. */
vc_status vc_rl_trainer_validate(vc_rl_trainer *t);
/* Latest value of a metric ("val-core/openai/gsm8k/acc/mean@1", "critic/score/mean", ...). */
int vc_rl_trainer_metric(const vc_rl_trainer *t, const char *name, double *value);
int64_t vc_rl_trainer_step(const vc_rl_trainer *t); /* global steps done */
/* Console output: 0 quiet, 1 one line per step (default). */
void vc_rl_trainer_set_verbose(vc_rl_trainer *t, int verbose);
void vc_rl_trainer_free(vc_rl_trainer *t);

/* new + fit + free */
vc_status vc_rl_train_run(const vc_config *cfg);

/* ---- data parallelism ----------------------------------------------------------------------------
 * With a communicator of N > 1 ranks (include/verlc/dist.h, host buffers; not owned) every rank runs
 * the same loop and the calls above become collectives (call them on every rank, in the same order):
 *   - trainer.nnodes x trainer.n_gpus_per_node must equal N (one process ignores them);
 *   - each step's prompts are split into N contiguous blocks (rank r: prompts [r*P/N, (r+1)*P/N)) with
 *     all rollout.n samples of a prompt on its rank, so GRPO/RLOO groups are local; sampling is keyed
 *     by the global prompt index, so the samples are those of one rank; rewards, reference/old
 *     log-probs, values and advantages are computed where the samples are;
 *   - actor and critic updates run the training core in local-batch mode (train.h): every global
 *     mini-batch (the one-rank composition, shuffled by the same seed) is the union of the ranks'
 *     rows of it; loss normalisers are summed over ranks; gradients are reduced in rank order;
 *   - validation prompts are split the same way and the accuracy sums reduced;
 *   - scalar metrics are reduced (sums in rank order, max, min); only rank 0 prints, writes
 *     metrics.jsonl, checkpoints (the weights and optimiser state are the same on every rank) and
 *     the export; the others learn whether rank 0 succeeded.
 * The KL-in-reward controller is updated with the global batch's KL. timing_s/ and perf/mfu figures are
 * rank 0's own. */
vc_status vc_rl_trainer_new_dp(const vc_config *cfg, struct vc_comm *comm, vc_rl_trainer **out);
vc_status vc_rl_train_run_dp(const vc_config *cfg, struct vc_comm *comm);
/* `verlc train --plan`: loads the models and data, allocates what a run holds, prints the memory plan (rank 0) and
 * stops, writing no file; VC_ERR_NOMEM, with the numbers, when the steps would not fit (VERLC_MEMORY_AVAILABLE: a
 * smaller device) */
vc_status vc_rl_train_plan_dp(const vc_config *cfg, struct vc_comm *comm);

/* ---- `verlc demo`: RL that runs anywhere in minutes -------------------------------------------- */
typedef struct vc_demo_opts {
    uint64_t seed;       /* everything (data, init, sampling) derives from it */
    int steps;           /* GRPO steps */
    const char *out_dir; /* run directory */
    int verbose;
    int n_overrides;     /* extra verl key=value overrides for the GRPO run (after the demo's own) */
    char **overrides;
    const char *device;    /* trainer.device for the warm-up and GRPO (NULL: "auto") */
    const char *precision; /* matmul precision: "fp32" (NULL) or "bf16" */
} vc_demo_opts;

typedef struct vc_demo_result {
    double sft_acc;      /* greedy validation accuracy after the warm-up */
    double acc_before;   /* val-core/verlc/addition/acc/mean@1 before GRPO (trainer's own validation) */
    double acc_after;    /* ... after the last GRPO step */
    int sft_steps;
    double sft_seconds, rl_seconds;
} vc_demo_result;

vc_status vc_demo_run(const vc_demo_opts *o, vc_demo_result *r);

#endif
