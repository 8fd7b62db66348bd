/* SFT internals shared by sft_data.c and sft.c. */
#ifndef VC_SFT_INTERNAL_H
#define VC_SFT_INTERNAL_H
#include "verlc/chat_template.h"
#include "verlc/data.h"
#include "verlc/tokenizer.h"
#include "verlc/train.h"
#include "verlc/trainer.h"

/* Tokenised rows: row i is ids[cu[i] .. cu[i+1]) with token-aligned loss mask. */
typedef struct sft_data {
    size_t n;
    int64_t *cu;
    int32_t *ids;
    float *mask;
    size_t cap_rows, cap_tok;
    size_t n_truncated, n_no_target, n_bad_rows, n_bad_lines;
    int32_t max_id;
    int64_t longest;
    /* rows with images (image-text models): row i's images are img[img_cu[i] .. img_cu[i+1]) (sources owned), its
     * image tokens within its first span[i] tokens (after its last image run); NULL when no row has any */
    int64_t *img_cu, *span, *line; /* (line: the row's source line) */
    vc_rl_image *img;
    size_t n_img, cap_img;
} sft_data;

typedef struct sft_tok {
    const vc_tokenizer *tok;
    const vc_chat_template *tmpl; /* may be NULL: prompts are used as plain text */
    int32_t eos;
    const cJSON *kwargs; /* data.apply_chat_template_kwargs (NULL: none); a row's enable_thinking wins */
    /* image inputs (verl's MultiTurnSFTDataset with a Qwen2-VL processor): vl NULL when off (rows with images are
     * then refused with no_image_reason) */
    const char *image_key;              /* data.image_key ("images"); NULL: image lists are not looked at */
    const struct vc_vl_image_config *vl;
    const char *no_image_reason;
    const char *pad;                    /* the image pad token's text; pad_id its id */
    int32_t pad_id;
    /* video inputs (Qwen2-VL, Qwen2.5-VL): vv NULL when off (rows with videos are then refused with
     * no_video_reason) */
    const char *video_key;              /* data.video_key ("videos") */
    const struct vc_vl_videos *vv;
    const char *no_video_reason;
    const char *video_pad;              /* the video pad token's text; video_pad_id its id */
    int32_t video_pad_id;
    const char *boi, *eoi;              /* the markup's texts (vc_vl_markup_texts); NULL */
    int wrap;                           /* how they mark the pads up (vc_vl_pads_apply's mode) */
} sft_tok;
/* data.apply_chat_template_kwargs and its .KEY=VALUE items as one JSON object (*out NULL when empty) */
vc_status vc_sft_chat_kwargs(const vc_sft_config *c, cJSON **out);

vc_status sft_data_load(const vc_sft_config *c, const char *path, const sft_tok *tk, sft_data *out);

/* verl's MultiTurnSFTDataset turn by turn (sft_turns.c): its probes of the template (ok 0: they fail to render) */
typedef struct sft_turn_probe { int64_t sys_len, gen_len; int ok; } sft_turn_probe;
vc_status sft_turn_probe_init(const sft_tok *tk, sft_turn_probe *tp);
/* a row's tokens and their loss mask, grown as pieces are pushed (sft_data.c) */
typedef struct sft_rowbuf { int32_t *ids; float *mask; size_t n, cap; } sft_rowbuf;
vc_status sft_rowbuf_push(sft_rowbuf *r, const int32_t *ids, size_t n, float m);
/* a messages row's tokens and loss mask as verl builds them, pushed to r; *mismatch_at: the first token where they
 * differ from the whole conversation's (verl raises there unless data.ignore_input_ids_mismatch), -1 when they do not */
vc_status sft_verl_turns(const sft_tok *tk, const sft_turn_probe *tp, const cJSON *msgs, const cJSON *tools,
                         int thinking, sft_rowbuf *r, int64_t *mismatch_at);
void sft_data_free(sft_data *d);
char *vc_sft_config_json(const vc_sft_config *c);
/* use_legacy_worker_impl=enable's validation (sft_legacy.c): the n rows in verl b178a3cd's order (order[k]: a row
 * index; each run of `micro` one rank's batch, each run of world x micro one step's); returns the rows it keeps */
size_t sft_legacy_val_order(size_t n, int world, int micro, uint32_t *order);
/* use_legacy_worker_impl=enable's training rows on `world` ranks: verl's sampler deals a step's rows idx[0..n) to the
 * ranks every world-th (rank r: idx[r], idx[r + world], ...) and each rank splits its own into micro-batches; out gets
 * rank r's rows as the r-th block, so the trainer's micro-batches of `micro` rows given out to the ranks in blocks are
 * verl's. Returns 0 (out untouched) where they would not be: one rank, or blocks that micro-batches do not divide. */
int sft_legacy_deal(const uint32_t *idx, size_t n, int world, int micro, uint32_t *out);
/* its val/loss from the kept rows' NLL sums and target counts in that order (NAN without a batch) */
double sft_legacy_val_loss(const double *nll, const double *tok, size_t kept, int world, int micro, int balance);
/* trainer.nnodes x trainer.n_gpus_per_node (when given) against the communicator's world size. */
vc_status vc_sft_check_world(const vc_sft_config *c, const vc_comm *comm);
#endif
