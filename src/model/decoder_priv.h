/* The decoder's forward state, shared by its files (decoder.c, dsa.c). */
#ifndef VC_DECODER_PRIV_H
#define VC_DECODER_PRIV_H
#include "model_internal.h"
#include "tensor/backend.h"
#include "tensor/graph_priv.h"
#include "verlc/ops.h"

struct vc_kv_cache {
    int n_seq, n_layer;
    int64_t max_len, k_width, v_width, x_width; /* x_width: the indexer's keys behind the values (DSA) */
    int64_t *len;             /* host */
    const vc_backend *be;     /* owner of mem */
    float *mem;               /* backend memory: [layer][seq][max_len][k_width + v_width + x_width] */
    float *state;             /* linear-attention layers' states: [seq][vc_lin_state_floats] (NULL: none) */
};

/* KV appends and row moves in backend memory (never dereferenced here): rows of C floats,
 * dst[r * dld + c] = src[r * sld + c] for r < R */
static inline void copy_rows(float *dst, int64_t dld, const float *src, int64_t sld, int64_t R, int64_t C) {
    if (R > 0 && C > 0) vc_be()->rows_copy(dst, dld, src, sld, R, C, 1, 0);
}

typedef struct {
    vc_model *m;
    vc_graph *g;
    const vc_batch *b;
    vc_kv_cache *cache;
    const vc_kv_pages *paged;
    int64_t T;
    const float *cos, *sin; /* [T, rot/2], backend memory */
    const float *cos_l, *sin_l; /* sliding layers' own tables when cfg.local_rope, else cos / sin */
    vc_tensor *qscale;      /* [T] q's factor by position (cfg.q_pos_beta), else NULL */
    vc_tensor *qtemp;       /* [T] q's factor by position on NoPE layers (cfg.q_temp_scale), else NULL */
    int64_t *pos;           /* [T], host */
    const int64_t *kv_off;  /* paged: [T] float offset of each new token's layer-0 KV row in the pool, backend memory */
    int pages_sent;         /* paged: an earlier layer of this forward attended over the same pages */
    int f32_act;            /* VERLC_BF16_ACT=0: the gated MLP activation in f32 (same bits; comparisons) */
    int split_gu;           /* VERLC_FUSED_GATE_UP=0: gate and up projected apart even when adjacent (comparisons) */
    int kv_stored;          /* paged: the current layer's keys and values are in their bf16 pages already (qkv_rope
                             * wrote them): attend_paged appends nothing */
    int hold_o;             /* paged: the attention output's bf16 rounding held for the o projection (hold_out) */
    int mtp_only;           /* the MTP layer alone over a paged cache: the linear-attention states untouched */
    vc_tensor *into;        /* without a tape: the buffer the layer's last residual sum is written to (forward's
                             * ping-pong buffers), or NULL */
    vc_tensor *into_h;      /* ... and where it writes the next layer's attention norm of that sum (held), or NULL */
    vc_tensor *pre_h;       /* the held norm of this layer's input the layer before wrote (into_h), or NULL */
    /* shared prefixes (b->prefix): each layer's keys and values gathered into ext rows, every sequence's
     * prefix rows (if any) then its own; sequence s attends to rows [kv_start[s], +kv_len[s]) */
    const int32_t *ext;     /* [T_ext] backend memory */
    int64_t T_ext;
    int64_t *kv_start, *kv_len;
    /* ... and the linear mixers' (cfg.n_linear): each sequence's recurrence run over its ext rows (cu_ext [n_seq + 1],
     * host), its own rows' outputs taken back from them (own [T] backend memory) */
    int64_t *cu_ext;
    const int32_t *own;
    /* ... or, for short convolutions, Gated DeltaNet, KDA and Mamba 2 (lin_share_rows; lc_rows NULL: the ext rows),
     * rows of their own: the conv's (each sequence's prefix rows from the conv's start row on, then its own: lc_rows [T_lc]
     * their rows among the T, backend memory; cu_lc [n_seq + 1] host; own_lc [T] each row's position among them) and
     * the recurrence's (from each prefix's tap row vc_gdn_shared_tap on: ls_rows [T_ls] among the T rows, ls_of among
     * the conv's, cu_ls, own_ls [T]; lin_from [n_seq] host: the prefix a sequence starts from, -1: none) */
    const int32_t *lc_rows, *own_lc, *ls_rows, *ls_of, *own_ls;
    int64_t T_lc, T_ls, *cu_lc, *cu_ls;
    int32_t *lin_from;
    float **seq_state;      /* [n_seq] each sequence's linear-attention states (cache or paged), else NULL */
    vc_tensor *mup_vec;     /* Falcon-H1: the multipliers of in_proj's z, x, B, C and dt columns, else NULL */
    vc_tensor *ones;        /* MiniMax-Text-01: [T, n_head] ones (lightning attention's beta; its decays scale them) */
    float *slopes;          /* MiniMax-Text-01: [n_layer, n_head] each layer's decays -s_h, backend memory */
    /* KV sharing (Gemma 4): [2 n_layer] the keys and values of each layer later layers reuse (kv_need), kept without a
     * cache; kv_copy: they are copies in buffers made before the layers run (no tape: layers' temporaries die) */
    vc_tensor **kv_keep;
    uint8_t *kv_need;
    int kv_copy;
    vc_tensor **ple;         /* Gemma 4: [n_layer] each layer's per-layer input [T, P], else NULL */
    const int64_t *lin_tabs; /* per linear layer: its conv and recurrent states' tables (vc_seq_tabs_fill), backend
                              * memory uploaded before the layers run, else NULL */
    const uint32_t **dsa_sel; /* DeepSeek Sparse Attention: [n_layer] each layer's selection (backend memory; NULL:
                              * every key visible), kept for the layers' recomputation under checkpointing */
    const uint32_t *sel;      /* the selection attend() applies (the current layer's) */
    int64_t sel_words;        /* words per query row of a selection */
    int64_t *dsa_kvl;         /* [n_seq] each sequence's keys (cached and new) */
    uint32_t *sel_buf;        /* without a tape: the one selection buffer (layers' temporaries die), else NULL */
    /* Qwen3-VL's deepstack: [n_deep] image features added to the image tokens' rows (img_rows, backend memory, n_img
     * of them) after each of the first n_deep layers */
    vc_tensor *deep[16];
    int n_deep;
    const int32_t *img_rows;
    int64_t n_img;
    /* Gemma 3: attention bidirectional within each run of image tokens (n_blk of them; none: 0): the runs' rows in
     * img_rows order (blk_q [n_blk + 1]), each run's keys from its sequence's first row to its end (blk_kvs / blk_kvl:
     * rows of this step); the text rows after the image rows in txt_rows (n_txt) */
    int64_t n_blk, n_txt, *blk_q, *blk_kvs, *blk_kvl;
    const int32_t *txt_rows;
    int bidi;                     /* the runs' layers: 1 every layer (Gemma 3), 2 the sliding ones (Gemma 4) */
    const int32_t *img_rows_host; /* the image rows (host, n_img) */
} fwd_ctx;
/* the pool address `elems` values in: floats, or bf16 values (always at an even count: rows and head
 * widths are even, so the pointer stays float-aligned) */
static inline float *pool_at(const vc_kv_pages *kv, size_t elems) {
    return kv->bf16 ? (float *)(void *)((uint16_t *)(void *)kv->pool + elems) : kv->pool + elems;
}

/* paged cache: the layers a page holds, and where layer (row) l's keys and values lie within a page's (an MTP row,
 * past the globals' row n_layer, after the decoder's layers) */
static inline int64_t kv_page_layers(const fwd_ctx *f) {
    return f->paged->n_layers ? f->paged->n_layers : f->m->cfg.n_layer;
}
static inline size_t kv_layer_at(const fwd_ctx *f, int l, int64_t row) {
    int64_t slot = l > f->m->cfg.n_layer ? l - 1 : l;
    return (size_t)slot * (size_t)(f->paged->page_tokens * row);
}
/* the forward's per-call tables (positions and ropes, paged offsets, linear-attention states, ...) before its layers */
vc_status vc_dec_setup(fwd_ctx *f);

/* DeepSeek Sparse Attention (dsa.c): layer l's selection from its normed input h and q latent into f->dsa_sel[l] and
 * f->sel; with a cache, its indexer keys appended to the layer's rows */
/* the decoder's norm of x by (layer, w_slot, b_slot) and its layer l (a row: an MTP row past n_layer too) */
vc_tensor *vc_dec_norm(fwd_ctx *f, vc_tensor *x, int layer, int w_slot, int b_slot);
vc_tensor *vc_dec_layer_forward(fwd_ctx *f, int l, vc_tensor *x);
/* the trained MTP rows over the forward's final hidden states h into f->b->mtp_out (mtp.c); nonzero: failed */
vc_status vc_mtp_forward(fwd_ctx *f, vc_tensor *h);
vc_status vc_dsa_layer(fwd_ctx *f, int l, vc_tensor *h, vc_tensor *qlat);
/* before the layers run: the sequences' key counts, the selections' width and their table */
vc_status vc_dsa_setup(fwd_ctx *f, int no_tape);
/* the float offset of the indexer's keys in a KV row (behind the keys and values) */
int64_t vc_dsa_key_offset(const vc_model_config *c);

#endif
