/* Rollout engine: batched generation on the model's own weights (the trainer's buffers), paged KV
 * cache, n samples per prompt sharing the prompt's pages, reproducible sampling.
 * (Contract fixed by the lead; implemented in src/infer/.) */
#ifndef VERLC_ROLLOUT_H
#define VERLC_ROLLOUT_H
#include "verlc/model.h"

struct vc_tokenizer;

typedef struct vc_sampling {
    int greedy;             /* argmax; ignores the rest of the sampling knobs */
    float temperature;      /* > 0 */
    int top_k;              /* <= 0: off */
    float top_p;            /* 1: off */
    float min_p;            /* 0: off */
    int max_new_tokens;
    const int32_t *eos_ids; /* generation stops after emitting one of these */
    int n_eos;
    const char *const *stop; /* stop strings (need a tokenizer in the options) */
    int n_stop;
    uint64_t seed;
} vc_sampling;

#define VC_SPEC_MAX 8
typedef struct vc_rollout_opts {
    double kv_budget_bytes;    /* KV pool size in bytes; 0: use kv_fraction of free memory */
    double kv_fraction;        /* verl's gpu_memory_utilization analogue (default 0.3) */
    int page_tokens;           /* tokens per KV page (default 16) */
    int max_batch;             /* sequences decoded together (default 64) */
    int prefill_chunk;         /* max prompt tokens computed per step (default 512) */
    int no_prefix_cache;       /* 1: full KV pages are not reused between sequences (verl's
                                * rollout.enable_prefix_caching=false); the outputs are the same either way */
    /* K >= 1: speculative decoding with the model's first MTP layer, up to K drafts a step (verl's
     * model.mtp.enable_rollout with num_speculative_tokens K; vLLM's "mtp" method): the MTP layer drafts the token after
     * a sequence's pending one, then (K > 1) reads its own hidden state and that draft for the next, and so on; the
     * pending token and the drafts are computed together, and each draft is kept where the token sampled from the row
     * before it (by the same uniform as without drafting) equals it, the next row's sample then following. The tokens
     * and log-probs are those of generating without drafts (where the forward is row-invariant, as on the CPU: the
     * same bits). Needs the MTP layers loaded (vc_model_load_mtp). Linear-attention layers' states are copied aside
     * before a drafted step and taken back where a draft is not kept (the kept tokens then computed again next step;
     * the state slots take twice the memory). With the prefix cache, a reused chain's last position is computed
     * again (its MTP row read the next token of another sequence). A call with images does not draft.
     * At most VC_SPEC_MAX. */
    int speculative;
    const struct vc_tokenizer *tokenizer; /* for stop strings */
    void (*progress)(void *ctx, int done, int total, double tokens_per_s);
    void *progress_ctx;
} vc_rollout_opts;

typedef struct vc_rollout_request {
    const int32_t *prompt;
    int64_t prompt_len;
    int n_samples;          /* GRPO group size (verl's rollout.n) */
    uint64_t prompt_index;  /* keys the random stream: (seed, prompt_index, sample, position) */
    /* optional (NULL: none), image-text models with their vision tower loaded (include/verlc/vision.h): the images
     * of the prompt's runs of image tokens, in order. Such a prompt is computed in one step (whatever
     * prefill_chunk), never shares KV pages with other prompts, and decodes at M-RoPE's positions. */
    const struct vc_images *images;
} vc_rollout_request;

enum { VC_FINISH_EOS, VC_FINISH_LENGTH, VC_FINISH_STOP };

typedef struct vc_rollout_sample {
    int request, sample;    /* which request and which of its n samples */
    int32_t *tokens;        /* response tokens (prompt excluded) */
    int64_t n_tokens;
    float *logp;            /* log p of each token under the model before temperature (vLLM's raw_logprobs) */
    float *logp_sampled;    /* ... and under the distribution actually sampled from (processed_logprobs: after
                             * temperature, top-k, top-p, min-p; what verl's trainer recomputes, at its
                             * temperature, top-k/top-p aside) */
    int finish;             /* VC_FINISH_* */
    double seconds;
} vc_rollout_sample;

typedef struct vc_rollout_engine vc_rollout_engine;

/* What the last vc_rollout_generate did (for tests, logs and benchmarks). */
typedef struct vc_rollout_stats {
    int64_t pool_pages, page_tokens, page_bytes; /* KV pool as allocated for the call */
    int64_t peak_pages;      /* most pages in use at once */
    int64_t preemptions;     /* sequences whose pages were freed to make room (recomputed later) */
    int64_t steps;           /* forward passes */
    int64_t prefix_hit_tokens; /* tokens whose keys and values were reused from the prefix cache */
    int64_t prefill_tokens;  /* tokens computed that were not the single next token of a decode step */
    int64_t decode_tokens;   /* single-token decode rows computed */
    int64_t generated;       /* tokens sampled */
    int64_t decode_only_tokens; /* rows of steps that computed no prefill tokens ... */
    double decode_only_seconds; /* ... and the time those steps took (decode throughput) */
    double seconds;
    int64_t weight_copy_hits; /* bf16 GEMM operands read from the call's bf16 weight copies (bf16 matmuls) */
    int64_t graph_captures, graph_replays; /* decode steps captured / replayed as CUDA graphs (cuda) */
    int64_t graph_fallbacks; /* captures or replays that did not take (the step then ran eagerly) */
    int64_t draft_tokens, draft_accepted; /* speculative decoding: drafts computed with the target's rows, and kept */
} vc_rollout_stats;

vc_status vc_rollout_new(vc_model *m, const vc_rollout_opts *opts, vc_rollout_engine **out);
/* on: the KV pool (room for four times the first call's need, within the budget) and its prefix cache are
 * kept from one vc_rollout_generate to the next, so a request that starts with tokens an earlier call computed (a multi-turn conversation's next
 * turn) reuses their keys and values; off: frees them. The model's weights must not change while it is on. */
void vc_rollout_session(vc_rollout_engine *e, int on);
void vc_rollout_free(vc_rollout_engine *e);
/* Generates n_samples responses for each request; *out gets sum(n_samples) samples ordered by
 * (request, sample). Results do not depend on max_batch, thread count, request order, prefill chunking,
 * page size or preemption: on the CPU backend the call installs a row-invariant op table (vc_set_backend)
 * for its duration, so it must not overlap a training step in another thread; on other backends
 * (cuda, sim) it runs on the active backend, whose GEMMs decide row invariance. The KV pool is
 * backend memory; each step's logits rows are read back to the host for sampling. (Length-dependent ropes (dynamic NTK,
 * longrope) recompute their frequencies per sequence length as transformers does, so a preempted
 * sequence of such a model may differ after recomputation.) A request whose prompt + max_new_tokens
 * cannot fit in the KV pool alone is VC_ERR_ARG with the numbers. */
vc_status vc_rollout_generate(vc_rollout_engine *e, const vc_rollout_request *reqs, int n_req, const vc_sampling *s,
                              vc_rollout_sample **out, int *n_out);
void vc_rollout_samples_free(vc_rollout_sample *s, int n);
void vc_rollout_last_stats(const vc_rollout_engine *e, vc_rollout_stats *out);
/* Pages of the pool the options give for this model (before capping to what a call needs). */
int64_t vc_rollout_budget_pages(const vc_rollout_engine *e);
#endif
