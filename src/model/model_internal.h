/* The model struct, shared by the loader, the decoder and export. */
#ifndef VC_MODEL_INTERNAL_H
#define VC_MODEL_INTERNAL_H
#include "arch.h"
#include "tensor/backend.h"
#include <stdlib.h>

/* 1 when token t (a batch row) of sequence s stands for an image: an image token of a sequence computed from its
 * first token (start 0), within its image_span (vision.h, model.h's vc_batch) */
/* a vision token: an image's or a video's (Qwen-VL's <|video_pad|>: its frames went through the tower as an image's
 * do; a run of one of them is one entry of the batch's images) */
static inline int vc_image_row(const vc_model_config *c, const vc_batch *b, int s, int64_t t, int64_t start) {
    int32_t id = b->ids[t];
    return ((c->image_id >= 0 && id == c->image_id) || (c->video_id > 0 && id == c->video_id)) && !start &&
           (!b->image_span || t - b->cu_seqlens[s] < b->image_span[s]);
}

typedef struct vc_param {
    vc_tensor t;
    int layer, slot; /* layer -1 for global slots; slot VC_SLOT_VISION for the vision tower's tensors */
    char name[72];   /* internal name, e.g. "layers.3.q"; a vision tower tensor's is its checkpoint name */
    int decay;       /* weight decay applies (matrices, not norms or biases) */
    int frozen;      /* not trained (vc_model_freeze_vision): no gradient */
    int buffer;      /* a vision tower's buffer (vc_vision_buffer): frozen whatever vc_model_freeze_vision says */
} vc_param;

/* the slot of the vision tower's parameters (the text slots start at 1) */
#define VC_SLOT_VISION 0
/* The loader's side of the vision tower (vision.c): plan reads vision_config and lists the tensors (checkpoint ck, or
 * NULL for a random model) into m->vision, or leaves it NULL when the model type has no tower verlc builds or the
 * checkpoint has none; shape gives tensor i's (returning its dims); bind points its slot at the parameter allocated
 * for it; fill reads the checkpoint's values into them. */
struct vc_checkpoint;
struct vc_vision;
vc_status vc_vision_plan(vc_model *m, const struct vc_checkpoint *ck);
int vc_vision_shape(const struct vc_vision *v, int i, int64_t *shape);
void vc_vision_bind(struct vc_vision *v, int i, vc_tensor *t);
/* tensor i's shape in the checkpoint (the patch embedding: the Conv3d kernel [D, C, T, P, P]); returns its dims */
int vc_vision_hf_shape(const struct vc_vision *v, int i, int64_t *shape);
/* 1 when tensor i is a buffer (loaded and exported, never trained; Gemma 4's clip bounds and standardization), *init
 * the value a random model starts it at */
int vc_vision_buffer(const struct vc_vision *v, int i, float *init);
/* a regular expression of the tower's modules PEFT must not take for targets (Gemma 4's wrappers of its linears, named
 * as the text model's projections); NULL: none */
const char *vc_vision_peft_exclude(const struct vc_vision *v);
/* 1 when tensor i is kept transposed against its checkpoint's layout (Gemma 3's projection matrix): its shape as the
 * tower keeps it in rows x cols */
int vc_vision_transposed(const struct vc_vision *v, int i, int64_t *rows, int64_t *cols);
/* 1 when the text model attends bidirectionally within each image's run of tokens (Gemma 3: transformers'
 * token_type_ids mask) */
int vc_vision_bidirectional(const struct vc_vision *v);
/* 1 when checkpoint tensor `name` is one of the tower's */
int vc_vision_owns(const struct vc_vision *v, const char *name);
vc_status vc_vision_fill(struct vc_vision *v, const vc_model *m, const struct vc_checkpoint *ck);
void vc_vision_free(struct vc_vision *v);
/* 1 when verlc builds the vision tower of this model_type (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3-VL-MoE, GLM-4V) */
int vc_vision_model_type(const char *model_type);
/* LoRA on the tower: its slots (0 .. n_slots), and the weight of slot s when it is an nn.Linear's (the blocks' attn.qkv,
 * attn.proj and MLP linears, the mergers' two linears; not the Conv3d patch embedding or the position table), with the
 * module's path on transformers 5's model (model.visual.blocks.0.attn.qkv, whatever the checkpoint's names); else
 * NULL */
int vc_vision_n_slots(const struct vc_vision *v);
vc_tensor *vc_vision_linear(const struct vc_vision *v, int s, char *path, size_t cap);

/* One Hugging Face tensor of the source layout: which rule produced it, for export and gradients. */
typedef struct vc_source {
    char *name;
    const vc_tensor_rule *rule;
    int layer, expert;
    int ndim;
    int64_t shape[4];
    int mxfp4;   /* stored as name_blocks / name_scales (gpt-oss's MXFP4 experts), dequantized on load */
    int fp8;     /* float8_e4m3 with name_scale_inv per weight block (quantization_config fp8), dequantized */
    int ct;      /* compressed-tensors: 1 packed ints (name_packed, name_scale, name_shape), 2 float8 with name_scale,
                  * 3 2:4 sparse (MODULE.compressed, .bitmask, .shape) */
} vc_source;

/* compressed-tensors weights (loader_ct.c): name_packed (bits a value) unpacked to want [nd dims] and scaled into *out;
 * buf [R, C] less name_zero_point (asymmetric; packed at bits a value, 0: int8) times name_scale; group: the config's
 * group_size (0: none) for rows that do not split evenly */
/* compressed-tensors' 4-bit float weight of name (name_packed uint8 [R, C / 2]: E2M1 values, the low nibble first),
 * nvfp4-pack-quantized (name_scale fp8 [R, C / 16] over name_global_scale float [1]: e2m1 x (scale / global scale) in
 * float32) or mx (mxfp4-pack-quantized: name_scale uint8 E8M0 [R, C / 32], e2m1 x 2^(e - 127)), rounded to bf16 as
 * compressed-tensors' decompression gives it; *out [R, C] malloc'd */
vc_status vc_ct_unpack_fp4(const char *dir, struct vc_checkpoint *ck, const char *name, const int64_t *want, int nd, int mx,
                           float **out);
/* compressed-tensors' sparse-24-bitmask weight name (MODULE.weight): MODULE.compressed [R, C / 2] (float32, bf16 or
 * f16: each row's kept values in order), MODULE.bitmask uint8 [R, ceil(C / 8)] (bit c % 8 of byte c / 8, little-endian:
 * whether column c is kept), MODULE.shape [R, C]; the others 0; *out [R, C] malloc'd */
vc_status vc_ct_unsparse24(const char *dir, struct vc_checkpoint *ck, const char *name, const int64_t *want, int nd,
                           float **out);
vc_status vc_ct_unpack(const char *dir, struct vc_checkpoint *ck, const char *name, const int64_t *want, int nd, int bits,
                       int64_t group, float **out);
vc_status vc_ct_scale(const char *dir, struct vc_checkpoint *ck, const char *name, float *buf, int64_t R, int64_t C,
                      int bits, int64_t group);

/* LoRA adapters (lora.c) */
typedef struct vc_lora {
    int rank, on, n;          /* n adapters; on: applied in forward */
    double alpha;
    float scale;              /* alpha / rank */
    int *index;               /* [n_layer * VC_W_COUNT]: adapter of (layer, slot), or -1 */
    int *layer_of, *slot_of;  /* [n] */
    int *rank_of;             /* [n]: rank (the experts' gate_up: PEFT's rank_pattern, 2 rank by default) */
    int *shared_of;           /* [n]: 1: one adapter shared by a layer's experts (Megatron-Bridge's) */
    int64_t *off;             /* [n]: A's offset in data; B follows it */
    vc_tensor *t;             /* [2n]: A_0, B_0, A_1, B_1, ... */
    vc_tensor **ptr;          /* [2n]: pointers to t, the trainer's extra parameters */
    float *data, *grad;       /* backend memory */
    int64_t n_floats;
    int *vindex;              /* [n_vslots]: adapter of the vision tower's slot s, or -1 (NULL: no tower) */
    int n_vslots;
    char *exclude;            /* exclude_modules as given (a regular expression), NULL: none */
} vc_lora;
/* an adapter of the vision tower: slot_of VC_LORA_TOWER + the tower's slot, layer_of -1 */
#define VC_LORA_TOWER VC_W_COUNT
void vc_lora_free(vc_lora *a, const vc_backend *be);
/* the adapter number of (layer, slot) while adapters are on, else -1 */
int vc_lora_index(const vc_model *m, int layer, int slot);
/* the adapter number of the vision tower's slot s (vc_vision_linear) while adapters are on, else -1 */
int vc_lora_tower_index(const vc_model *m, int s);
/* y + (alpha / r) (x A^T) B^T of adapter i (y itself when i < 0) */
vc_tensor *vc_lora_apply(const vc_model *m, vc_graph *g, int i, vc_tensor *x, vc_tensor *y);
/* the tower's adapters trained (0) or not (1: verl's freeze_vision_tower, applied after PEFT: present, untrained) */
void vc_lora_freeze_tower(vc_model *m, int frozen);
/* PEFT's path of a module on transformers 5's model in place: an image-text Qwen-VL's text decoder under
 * model.language_model.* and its tower under model.visual.*, as the hub's model.* / visual.* checkpoints name them
 * otherwise; returns 1 when it changed */
/* the checkpoint's path of a layer's modules ("model.layers.3.", a nested text model's "language_model.model.layers.3.") */
void vc_lora_layer_prefix(const vc_model *m, int layer, char *buf, size_t cap);
int vc_lora_peft_path(const vc_model *m, char *buf, size_t cap);
/* the module path PEFT matches and names adapters by: the checkpoint's own, or for a part of a fused tensor
 * the Llama-style path of the part (lora.c; lora_io.c writes fused tensors' adapters under the fused name) */
void vc_lora_module_name(const vc_model *m, int layer, int slot, char *buf, size_t cap);
/* the slots of the dense projections LoRA's all-linear reaches (nn.Linear modules in transformers 5), each once, into
 * slots (at most cap); returns how many */
int vc_lora_linear_slots(int *slots, int cap);
struct vc_qat;
/* QAT (src/model/qat.c): on 1 the quantized weights in place of the full-precision ones (kept on the host), on 0 those
 * back; nested holds count. Nothing without vc_model_qat */
void vc_qat_hold(vc_model *m, int on);
void vc_qat_free(struct vc_qat *q);

struct vc_model {
    vc_model_config cfg;
    char *dir;
    vc_param *params;
    int n_params;
    vc_tensor **slots;   /* [(n_layer + 1) * VC_W_COUNT]; globals in row n_layer */
    const vc_backend *be; /* the backend whose memory holds storage and grad_storage (freed with it) */
    float *storage, *grad_storage; /* backend memory */
    int64_t n_floats;
    vc_source *src;
    int n_src;
    char **ignored;      /* checkpoint tensors deliberately not used, with the reason */
    int n_ignored;
    int checkpointing;
    /* ZeRO-3 (vc_model_set_layer_hook): runs before each layer's forward; compacted: the storage holds only
     * the tensors the trainer did not take (vc_model_compact) */
    vc_status (*layer_hook)(void *ctx, int layer);
    void *layer_hook_ctx;
    int compacted;
    char *config_text;   /* config.json as read, for export */
    vc_lora *lora;       /* NULL: none; else the base weights are frozen (no gradient storage) */
    struct vc_vision *vision; /* the image-text checkpoint's vision tower once loaded (vc_model_load_vision), else NULL */
    int head_detach;     /* the LM head's weights read without a gradient into them (vc_model_mtp_logprobs) */
    struct vc_qat *qat;  /* quantization-aware training (vc_model_qat; src/model/qat.c), else NULL */
};

/* xIELU's beta and eps (Apertus): the values transformers' kernel takes; a checkpoint's buffers must hold them */
#define VC_XIELU_BETA 0.5f
#define VC_XIELU_EPS (-1e-6f)

static inline vc_tensor *vc_w(const vc_model *m, int layer, int slot) {
    int row = layer < 0 ? (int)m->cfg.n_layer : layer;
    return m->slots[(size_t)row * VC_W_COUNT + slot];
}

/* rows of each destination slot of a fused rule (up to 3), for this layer */
int vc_rule_parts(const vc_model *m, const vc_tensor_rule *r, int layer, vc_tensor **parts);
/* copies between a source tensor in the checkpoint layout (f32 host buffer) and the slots' backend
 * memory; store 0: load weights (h2d), 1: store weights, 2: store gradients (d2h) */
vc_status vc_rule_transfer(const vc_model *m, const vc_source *s, float *buf, int store); /* NOMEM: a host copy */
/* floats [offset, offset + n) of source s's weights in the checkpoint layout into buf, where that layout is its
 * slots' memory in order (no transform, fused rows, one expert's block): VC_ERR_UNSUPPORTED otherwise (then
 * vc_rule_transfer it whole) */
vc_status vc_rule_read_range(const vc_model *m, const vc_source *s, size_t offset, size_t n, float *buf);
/* Fused tensors stored group by group (InternLM2's wqkv per KV group, q_proj with its gate per head, Qwen3-Next's
 * in_proj_qkvz / _ba per q/k head): within each of `groups` groups, n runs of rows[k] rows in checkpoint order, run
 * k's going to part[k] (the rule's slot, slot2, slot3) at row base[k] + g * rows[k]. 0: not such a transform. */
typedef struct {
    int64_t groups;
    int n, part[4];
    int64_t base[4], rows[4];
} vc_grouped_layout;
int vc_grouped_rows(const vc_model_config *c, int transform, vc_grouped_layout *gl);
vc_status vc_model_synthesize_sources(vc_model *m);
/* a rule of the architecture that names this tensor (one of a family's alternative names: transformers 5's fused
 * experts beside the hub's per-expert ones), with the model's slots for it: *tmp a source of it; 0 if none */
int vc_rule_for_name(const vc_model *m, const char *name, vc_source *tmp);
vc_status vc_model_alloc_from_config(vc_model *m, uint8_t *optional_present);
/* the config's n MTP layers as rows n_layer + 1 .. n_layer + n, each configured as its last decoder layer (mtp.c):
 * an error naming dir where verlc cannot train that family's */
vc_status vc_config_mtp_rows(vc_model_config *c, int n, const char *dir);
/* vc_model_load's body: mtp > 0 loads the MTP layers as trained rows (vc_model_load_mtp) */
vc_status vc_model_load_opt(const char *dir, int mtp, vc_model **out);
#endif
