/* Rollout scheduler state shared by sched.c (pages, preemption, step planning) and engine.c (the loop,
 * sampling, results). */
#ifndef VC_INFER_SCHED_H
#define VC_INFER_SCHED_H
#include "infer/infer.h"
#include "verlc/model.h"
#include "verlc/vision.h"

enum { S_WAIT, S_RUN };

typedef struct vc_seq {
    int req, sample;        /* sample -1: the prompt's shared prefill, forked into n samples */
    int32_t *tok;           /* prompt + generated */
    int64_t n_tok, cap, n_prompt;
    int64_t n_cached;       /* tokens whose keys/values are in the pages */
    int32_t slot;           /* linear-attention models: the state slot of a running sequence (-1: none) */
    int32_t *pages;
    int64_t n_pg;
    int64_t n_reg;          /* leading full pages registered in the prefix cache (or found there) */
    int32_t last_reg;       /* the registered page of the last of them (-1: none) */
    float *logp, *logp_s;   /* per generated token */
    int64_t n_mtp;          /* speculative decoding: positions whose keys and values the MTP layer has in the pages */
    int32_t draft[VC_SPEC_MAX]; /* ... the MTP layer's drafts of tokens n_tok .. (n_draft of them, then n_mtp ==
                                 * n_cached == n_tok - 1) */
    int n_draft;
    int64_t order;          /* priority: lower is older; the newest are preempted first */
    int state, planned;
    int64_t plan_n;         /* tokens computed this step */
    double t0;
} vc_seq;

struct vc_rollout_engine {
    vc_model *m;
    vc_rollout_opts o;
    int64_t row;            /* KV floats per token per layer */
    vc_rollout_stats stats;
    int session;            /* vc_rollout_session: the pool and its prefix cache outlive each call */
    vc_kv_pool kept;        /* that pool between calls (mem NULL: none) */
    int32_t kept_pad;       /* its padding page (-1: none) */
};

/* speculative decoding: the MTP layer's rows of a step, one entry per sequence (spec.c) */
typedef struct vc_spec_entry {
    vc_seq *s;
    int64_t pos, n;         /* positions [pos, pos + n) of the MTP layer, reading token pos + 1 ... */
    int64_t hrow;           /* ... and the step's hidden-state rows [hrow, hrow + n) */
    int draft;              /* the last row drafts s's next token */
} vc_spec_entry;

typedef struct vc_spec_buf {
    vc_spec_entry *e;
    int n, cap;
    vc_seq **kids;          /* a forking prompt's samples still running or waiting */
    int n_kids, cap_kids;
} vc_spec_buf;

typedef struct vc_run {
    vc_rollout_engine *e;
    const vc_rollout_request *reqs;
    int n_req;
    const vc_sampling *sp;
    vc_kv_pool pool;
    vc_seq **run, **wait;   /* running (any order) and waiting (sorted by order) */
    int n_run, n_wait, max_seqs;
    int next_req;
    vc_seq **plan;
    int n_plan;
    vc_rollout_sample *out;
    int64_t *base;          /* first output index of each request */
    int *left;              /* samples still running per request */
    int prompts_done;
    double t_start;
    int last_decode;        /* graph key of the previous step when it was a pure decode or drafted step, else negative */
    int32_t pad_page;       /* a page the padding rows of a graph step write into (-1: none, no padding) */
    /* linear-attention models (state_floats > 0): a state slot per running sequence, the last one the padding
     * rows'; a waiting sequence holds none (it is recomputed from its first token, as after preemption) */
    int64_t state_floats;
    float *state;           /* backend memory [n_slots][state_floats] */
    float *snap;            /* ... with drafting, each drafted sequence's states from before the step (NULL: none) */
    int32_t *slot_free;
    int n_slots, n_slot_free;
    /* calls with images: each request's M-RoPE delta (what its positions add to the cached tokens' count after
     * the prompt, vc_mrope_positions); NULL when no request has images */
    int64_t *delta;
    int spec;               /* speculative decoding this call: drafts a step (the engine's option; 0 with images) */
    vc_spec_buf sb;
} vc_run;

/* s belongs to a request with images: computed whole from its first token, never in the prefix cache */
static inline int vc_seq_images(const vc_run *R, const vc_seq *s) {
    const vc_rollout_request *q = &R->reqs[s->req];
    return q->images && q->images->n > 0;
}

vc_seq *vc_seq_new(vc_run *R, int req);
vc_seq *vc_seq_fork(vc_run *R, const vc_seq *parent, int sample);
void vc_seq_free(vc_run *R, vc_seq *s);
void vc_seq_drop_cache(vc_run *R, vc_seq *s);
/* linear-attention models: a slot for s on joining the running set (every waiting sequence has dropped its cache,
 * so it starts from zero); with `from`, the state of that sequence copied into it (a sample forked from its
 * prompt) */
void vc_seq_take_slot(vc_run *R, vc_seq *s, const vc_seq *from);
/* a sequence without pages takes the longest run of cached full pages matching its tokens (leaving at
 * least one token to compute) */
void vc_seq_prefix(vc_run *R, vc_seq *s);
/* registers the full pages s has computed since the last call in the prefix cache */
void vc_seq_register(vc_run *R, vc_seq *s);
void vc_run_remove(vc_run *R, vc_seq *s);       /* from the running set */
void vc_wait_insert(vc_run *R, vc_seq *s);
/* Chooses this step's sequences and token counts (R->plan), preempting the newest sequences when the
 * pool runs out; returns the number planned. */
vc_status vc_sched_plan(vc_run *R);

/* ---- speculative decoding (spec.c) ---- */
/* the MTP rows of sequence s this step: positions [pos, pos + n) reading hidden-state rows [hrow, ..); draft: its last
 * row drafts s's next token */
vc_status vc_spec_add(vc_run *R, vc_seq *s, int64_t pos, int64_t n, int64_t hrow, int draft);
/* a prompt whose pending tokens this step were positions [c0, n_prompt) (hidden-state rows from hrow) forked into the
 * samples R->sb.kids: each gets its own copy of the page holding the prompt's last position (the MTP layer's keys and
 * values there read its own first token) where the pool has one, and the MTP rows up to it */
vc_status vc_spec_fork(vc_run *R, int64_t c0, int64_t hrow);
/* the step's MTP rows over the hidden states h (the step's forward's, [T, H]) and each entry's draft */
vc_status vc_spec_draft(vc_run *R, vc_graph *g, vc_tensor *h);
void vc_spec_buf_free(vc_spec_buf *b);
#endif
