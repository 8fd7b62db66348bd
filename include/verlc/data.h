/* verlc data: JSONL datasets in verl's row schema, dataset conversion, epoch iteration, micro-batching. */
#ifndef VERLC_DATA_H
#define VERLC_DATA_H
#include "verlc/core.h"
#include <stddef.h>
#include <stdint.h>

struct cJSON;

/* ---- JSONL ---------------------------------------------------------------------------------- */
enum {
    VC_JSONL_STRICT = 0,            /* the first malformed line fails the read with VC_ERR_FORMAT */
    VC_JSONL_SKIP_BAD = 1,          /* malformed lines are skipped, counted and their messages kept */
    VC_JSONL_NONFINITE_AS_NULL = 2, /* accept Python's bare NaN / Infinity / -Infinity as null */
    /* a Parquet file's Hugging Face datasets Image features read as datasets.load_dataset reads them (verl's
     * RLHFDataset: PIL images), their image objects marked "pil": true; without it as pandas reads them (verl's SFT
     * datasets: {bytes, path} dicts) */
    VC_JSONL_HF_IMAGES = 4,
};
#define VC_JSONL_MAX_BAD 64 /* messages kept for skipped lines (the count has no limit) */

typedef struct vc_jsonl_bad {
    int64_t line;  /* 1-based */
    char *message; /* "path:line: what at column N" */
} vc_jsonl_bad;

typedef struct vc_jsonl {
    char *path;            /* as given (used in messages) */
    size_t n_rows;
    struct cJSON **rows;   /* every row is a JSON object */
    int64_t *lines;        /* 1-based source line of each row */
    size_t n_skipped;      /* malformed lines skipped under VC_JSONL_SKIP_BAD */
    size_t n_bad;          /* messages kept in bad[] (at most VC_JSONL_MAX_BAD) */
    vc_jsonl_bad *bad;
    size_t cap;
} vc_jsonl;

/* Reads every non-empty line of a JSONL file as a JSON object (a UTF-8 BOM and CRLF endings are
 * accepted). A malformed line is reported as "train.jsonl:17: expected ',' or '}' at column 33". */
vc_status vc_jsonl_read(const char *path, int policy, vc_jsonl **out);
/* Same over text in memory; `name` stands for the path in messages. */
vc_status vc_jsonl_parse(const char *name, const char *text, size_t len, int policy, vc_jsonl **out);
void vc_jsonl_free(vc_jsonl *d);

/* Writes rows (JSON objects) as a Parquet file, atomically, as pandas' / pyarrow's to_parquet writes the same
 * Python rows: the types pyarrow infers (null, bool, int64, double, UTF-8 string, lists, structs of every key seen in
 * the order first seen, all optional), snappy pages. A key whose values cannot share one type (a string in one row, a
 * number in another) or an object that never has a field fails naming the row and key. Strings only: binary read
 * from a Parquet file comes back as the data: URI verlc reads it as. */
vc_status vc_parquet_write(const char *path, struct cJSON *const *rows, size_t n_rows);
/* vc_parquet_write with Hugging Face datasets' `huggingface` metadata, as datasets' to_parquet writes it: each
 * column's feature as datasets infers it from the Arrow type, the top-level columns named in images ({bytes, path}
 * structs, or lists of them) as its Image feature, so that datasets.load_dataset hands them on as PIL images */
vc_status vc_parquet_write_hf(const char *path, struct cJSON *const *rows, size_t n_rows, const char *const *images,
                              int n_images);

/* Strict JSON syntax check of one value (RFC 8259). Returns 1 when valid; otherwise 0 and writes
 * "expected ... at column N" (column in characters, 1-based) into msg. `allow_nonfinite` accepts
 * NaN, Infinity and -Infinity as numbers. */
int vc_json_diagnose(const char *s, size_t len, int allow_nonfinite, char *msg, size_t cap);

/* Field of row `i` by dotted path ("reward_model.ground_truth"). VC_ERR_MISSING names file:line and
 * the path when absent; VC_ERR_FORMAT when present with the wrong type (string accessor). */
vc_status vc_jsonl_field(const vc_jsonl *d, size_t i, const char *path, const struct cJSON **out);
vc_status vc_jsonl_string(const vc_jsonl *d, size_t i, const char *path, const char **out);

/* ---- verl row schema ---------------------------------------------------------------------------
 * {"data_source": str, "prompt": [{"role": str, "content": str}, ...], "ability": str,
 *  "reward_model": {"style": str, "ground_truth": ...}, "extra_info": {...}} */
typedef struct vc_chat_message {
    const char *role;
    const char *content;
} vc_chat_message;

typedef struct vc_verl_row {
    const char *data_source;
    vc_chat_message *prompt; /* owned array; strings point into the dataset */
    size_t n_prompt;
    const char *ability;      /* NULL when absent */
    const char *reward_style; /* NULL when absent */
    const char *ground_truth; /* text of reward_model.ground_truth (numbers and lists printed); NULL when absent */
    const struct cJSON *ground_truth_json;
    const struct cJSON *extra_info; /* NULL when absent */
    int64_t line;
    char *owned; /* printed ground truth when it is not a string */
} vc_verl_row;

/* Fills `row` from row i; data_source and a non-empty prompt of {role, content} strings are required. */
vc_status vc_verl_row_get(const vc_jsonl *d, size_t i, vc_verl_row *row);
void vc_verl_row_clear(vc_verl_row *row);
/* Checks every row; with need_ground_truth, reward_model.ground_truth must be present too. */
vc_status vc_verl_check(const vc_jsonl *d, int need_ground_truth);

/* ---- binary values as text -----------------------------------------------------------------------
 * A Parquet BYTE_ARRAY value that is not UTF-8 text (image bytes) becomes this data URI in the JSON rows. */
#define VC_DATA_URI_BINARY "data:application/octet-stream;base64,"
/* standard base64 (RFC 4648, padded) of p[0, n) as a new NUL-terminated string behind prefix (may be NULL) */
char *vc_base64_encode(const char *prefix, const uint8_t *p, size_t n);
/* decodes s[0, n) (padding optional, ASCII whitespace skipped) into a new buffer (*out malloc'd, *len bytes);
 * VC_ERR_FORMAT naming what and the offset of the first character that is not base64 */
vc_status vc_base64_decode(const char *s, size_t n, const char *what, uint8_t **out, size_t *len);

/* ---- GSM8K conversion (verl examples/data_preprocess/gsm8k.py) -------------------------------- */
#define VC_GSM8K_INSTRUCTION "Let's think step by step and output the final answer after \"####\"."
/* The answer after "#### " as verl's extract_solution gives it (regex "#### (\-?[0-9\.\,]+)",
 * commas removed). Returns 0 when the text has no such answer. */
int vc_gsm8k_extract_solution(const char *answer, char *out, size_t cap);
/* One raw {"question","answer"} object to a verl row (a new cJSON object). */
vc_status vc_gsm8k_make_row(const struct cJSON *raw, const char *split, int64_t index, struct cJSON **out);
/* Converts in_path (raw GSM8K rows, JSONL or Parquet) to out_path (verl-schema JSONL, or Parquet where the name ends
 * in .parquet); *n_rows gets the row count. */
vc_status vc_gsm8k_convert(const char *in_path, const char *out_path, const char *split, size_t *n_rows);
/* verl's other GSM8K preprocessors: gsm8k_multiturn_w_tool.py (a system prompt asking for the calc_gsm8k_reward
 * tool, the tool's create_kwargs in extra_info), gsm8k_tool_agent_loop.py (the same with agent_name tool_agent) and
 * gsm8k_multiturn_sft.py (messages: the question and the worked answer) */
/* (and gsm8k_multiturn_w_interaction.py: a system prompt for a multi-turn interaction, extra_info's interaction_kwargs
 * {name gsm8k, query, ground_truth}) */
typedef enum { VC_GSM8K_RL, VC_GSM8K_W_TOOL, VC_GSM8K_AGENT_LOOP, VC_GSM8K_SFT, VC_GSM8K_INTERACTION } vc_gsm8k_form;
#define VC_GSM8K_TOOL_INSTRUCTION "Let's think step by step and output the final answer after `####`."
vc_status vc_gsm8k_make_row_form(const struct cJSON *raw, const char *split, int64_t index, vc_gsm8k_form form,
                                 struct cJSON **out);
vc_status vc_gsm8k_convert_form(const char *in_path, const char *out_path, const char *split, vc_gsm8k_form form,
                                size_t *n_rows);

/* ---- MATH conversion (verl examples/data_preprocess/math_dataset.py, MATH-lighteval) ------------- */
#define VC_MATH_INSTRUCTION "Let's think step by step and output the final answer within \\boxed{}."
/* One raw {"problem", "solution", ...} object to a verl row: its other keys kept first, the ground truth the last
 * \boxed{} of the solution (remove_boxed(last_boxed_only_string)); VC_ERR_FORMAT where the solution has none. */
vc_status vc_math_make_row(const struct cJSON *raw, const char *split, int64_t index, struct cJSON **out);
vc_status vc_math_convert(const char *in_path, const char *out_path, const char *split, size_t *n_rows);

/* ---- Geometry3K conversion (verl examples/data_preprocess/geo3k.py, hiyouga/geometry3k) --------------------- */
#define VC_GEO3K_INSTRUCTION                                                                                          \
    "You FIRST think about the reasoning process as an internal monologue and then provide the final answer. The "    \
    "reasoning process MUST BE enclosed within <think> </think> tags. The final answer MUST BE put in \\boxed{}."
/* One raw {"images", "problem", "answer"} object to a verl row: the images (and any other column) kept where they
 * stand, the answer as the ground truth */
vc_status vc_geo3k_make_row(const struct cJSON *raw, const char *split, int64_t index, struct cJSON **out);
/* tool 1: geo3k_multiturn_w_tool.py's row (a system prompt asking for the calc_geo3k_reward tool, its create_kwargs) */
vc_status vc_geo3k_make_row_tool(const struct cJSON *raw, const char *split, int64_t index, int tool, struct cJSON **out);
/* written as Parquet: the images column as Hugging Face datasets' Image feature, as geo3k.py's to_parquet writes it */
vc_status vc_geo3k_convert(const char *in_path, const char *out_path, const char *split, int tool, size_t *n_rows);

/* any of the above: in_path's rows (JSONL or Parquet) to verl's rows in out_path (JSONL, or Parquet by its name);
 * variant: GSM8K's vc_gsm8k_form, Geometry3K's tool (1), 0 for MATH and HellaSwag (vc_hellaswag_convert) */
/* VC_DS_RETOOL: verl's dapo_multiturn_w_tool.py / aime2024_multiturn_w_tool.py (ReTool): rows already in verl's schema
 * (BytedTsinghua-SIA/DAPO-Math-17k, AIME-2024) kept, their extra_info given need_tools_kwargs and the code
 * interpreter's create_kwargs with the reward's ground truth */
/* VC_DS_SEARCH_R1: verl's preprocess_search_r1_dataset.py (vc_search_r1_make_row) */
typedef enum { VC_DS_GSM8K, VC_DS_MATH, VC_DS_GEO3K, VC_DS_HELLASWAG, VC_DS_RETOOL, VC_DS_SEARCH_R1 } vc_dataset;
vc_status vc_dataset_convert(vc_dataset ds, int variant, const char *in_path, const char *out_path, const char *split,
                             size_t *n_rows);

/* rows to out_path: Parquet where its name ends in .parquet (hf: with datasets' `huggingface` metadata, the columns
 * named in images as its Image feature, as datasets' to_parquet writes them; else as pandas' to_parquet), else JSONL */
vc_status vc_rows_write(const char *out_path, struct cJSON *const *rows, size_t n, int hf, const char *const *images,
                        int n_images);

/* ---- Dahoas/full-hh-rlhf (verl examples/data_preprocess/full_hh_rlhf.py) -------------------------------------
 * From its train rows ({prompt, response, chosen, rejected}), as the script's --split makes them:
 * VC_HH_SFT: train, two {prompt, response} rows a pair (the chosen answer, then the rejected one);
 * VC_HH_RM: train and test, {prompt, chosen, rejected}, datasets' slices train[:75%] and train[-25%:] of the rows (their
 *   boundaries rounded to the nearest, ties to even, as datasets rounds them: the two overlap or leave rows out on
 *   small sets as there);
 * VC_HH_RL: train, each row's columns but `response` (the prompt as one user message) and then data_source, ability
 *   "alignment", a model reward with the response as its ground truth, extra_info {split, index}.
 * out_dir gets sft/train, rm/train and rm/test, or rl/train, each .EXT (jsonl or parquet); n_rows[0..1] the rows of
 * train and test (0 where none is written) */
typedef enum { VC_HH_SFT, VC_HH_RM, VC_HH_RL } vc_hh_split;
vc_status vc_hh_rlhf_convert(const char *in_path, const char *out_dir, vc_hh_split split, const char *ext,
                             size_t n_rows[2]);
/* datasets' rows of train[:75%] (*train_end: rows [0, end)) and train[-25%:] (*test_start: rows [start, n)) of n */
void vc_hh_rm_slices(size_t n, size_t *train_end, size_t *test_start);

/* ---- Search-R1 (verl examples/data_preprocess/preprocess_search_r1_dataset.py, PeterJinGo/nq_hotpotqa_train) ----
 * One raw row to verl's: data_source "searchR1_" + the row's, the system and user messages (the script's prefix and
 * the question), ability, reward_model and metadata as they are (null where absent), extra_info {index,
 * need_tools_kwargs, question, split, tools_kwargs.search.create_kwargs {ground_truth (the reward model's, else the
 * golden answers, else []), question, data_source}}; a question or data_source that is not a string refused (verl
 * would write pandas' spelling of a missing one, nan or None by its version) */
vc_status vc_search_r1_make_row(const struct cJSON *raw, const char *split, int64_t index, struct cJSON **out);

/* ---- lmms-lab/multimodal-open-r1-8k-verified (verl examples/data_preprocess/openr1mm.py) ------------------------
 * The rows of in_paths (the train split's shards in order; {image, problem, solution, ...}) split as datasets'
 * train_test_split(test_size=0.1, seed=42) splits them (vc_hf_split_sizes, numpy's default_rng(42).permutation: the
 * test rows its first ceil(0.1 n)), each to {data_source, prompt (<image>, the problem, the script's instruction),
 * images [the row's image record as it is], ability "math", a rule reward with the solution, extra_info {split,
 * index, question, answer}}, written as out_dir/train.EXT and test.EXT (Parquet with datasets' metadata); n_rows: the
 * rows of train and test */
vc_status vc_openr1mm_convert(const char *const *in_paths, int n_in, const char *out_dir, const char *ext, size_t n_rows[2]);
/* datasets' train_test_split sizes of n rows for a float test_size: ceil(test_size * n) test rows, the rest train */
void vc_hf_split_sizes(size_t n, double test_size, size_t *n_train, size_t *n_test);

/* ---- Rowan/hellaswag (verl examples/data_preprocess/hellaswag.py) ------------------------------------------------
 * in_path's rows (JSONL or Parquet) with a label to out_path (JSONL, or Parquet by its name, with datasets' metadata):
 * each row's columns, then data_source, prompt (one user message: activity_label + ": " + ctx_a + " " +
 * ctx_b.capitalize(), through the script's preprocess()), ability "nlp", a model reward {eval multiple_choice,
 * ground_truth int(label), choices: the endings preprocessed}, extra_info {split, index among the kept rows};
 * rows whose label is "" left out (all of the test split's) */
vc_status vc_hellaswag_convert(const char *in_path, const char *out_path, const char *split, size_t *n_rows);

/* ---- epoch iteration ---------------------------------------------------------------------------- */
typedef struct vc_epoch_iter {
    size_t n_rows, batch_size;
    int shuffle, drop_last;
    uint64_t seed;
    int64_t epoch;   /* current epoch */
    size_t batch;    /* index of the next batch within the epoch */
    uint32_t *order; /* [n_rows] row order of the current epoch */
    int torch;       /* the shuffled order: 0 verlc's counter-based one, else a VC_ORDER_TORCH_* (vc_epoch_iter_torch) */
    int draws, first;/* VC_ORDER_TORCH_STREAM: epoch e is the generator's (first + draws e)-th randperm */
    struct vc_np_mt19937_s *mt; /* ... and the generator after its mt_done-th randperm (-1: none drawn) */
    int64_t mt_done;
} vc_epoch_iter;

/* verl's data orders (torch's randperm, rng.h):
 * VC_ORDER_TORCH_STREAM: a torchdata RandomSampler over one generator seeded once (verl's RL data loader), each
 *   epoch a randperm of it: the first one per epoch with num_workers 0 (draws 1, first 0), the second with workers,
 *   whose loader makes the sampler's iterator twice an epoch (draws 2, first 1);
 * VC_ORDER_TORCH_EPOCH: a DistributedSampler (verl's SFT data loader): epoch e a randperm of a generator seeded
 *   seed + e, whose consecutive slices of a batch are the global batches for any number of ranks. */
enum { VC_ORDER_TORCH_STREAM = 1, VC_ORDER_TORCH_EPOCH = 2 };

vc_status vc_epoch_iter_init(vc_epoch_iter *it, size_t n_rows, size_t batch_size, int shuffle, int drop_last,
                             uint64_t seed);
/* Batches per epoch: n/bs with drop_last, ceil(n/bs) without. */
size_t vc_epoch_iter_batches(const vc_epoch_iter *it);
/* Moves to (epoch, batch); the order is a pure function of (seed, epoch), so a resumed run continues
 * with exactly the batches it would have seen. */
void vc_epoch_iter_seek(vc_epoch_iter *it, int64_t epoch, size_t batch);
/* Next batch of row indices: returns its size and points *idx into the iterator; at the end of an
 * epoch it moves to the next epoch, reshuffles and continues, so it never returns 0 for n_rows > 0
 * (unless drop_last leaves no full batch). */
size_t vc_epoch_iter_next(vc_epoch_iter *it, const uint32_t **idx);
/* Shuffles as verl's data loader does (kind a VC_ORDER_TORCH_*; the epoch's order redone; no effect without shuffle) */
vc_status vc_epoch_iter_torch(vc_epoch_iter *it, int kind, uint64_t seed, int draws, int first);
void vc_epoch_iter_free(vc_epoch_iter *it);

/* ---- partitions and micro-batches ------------------------------------------------------------ */
/* k groups of item indices: group g is items[offsets[g] .. offsets[g+1]), ascending within a group. */
typedef struct vc_partition {
    size_t n_groups, n_items;
    size_t *offsets; /* [n_groups + 1] */
    uint32_t *items; /* [n_items] */
} vc_partition;

void vc_partition_free(vc_partition *p);
int64_t vc_partition_sum(const vc_partition *p, size_t g, const int64_t *lens);

/* Karmarkar-Karp (largest differencing) k-way balanced partition, as verl's
 * get_seqlen_balanced_partitions (same tie-breaking and output order). With equal_size, every
 * group gets n/k items (n % k must be 0). */
vc_status vc_partition_balanced(const int64_t *lens, size_t n, size_t k, int equal_size, vc_partition *out);
/* verl's calculate_workload of a sequence of len tokens, 24576 len + len^2 (a 7B model's dense work per token and
 * attention's): what verl balances micro-batches and ranks by */
static inline int64_t vc_seq_workload(int64_t len) { return 24576 * len + len * len; }
/* Token-budget micro-batches (verl's rearrange_micro_batches): the fewest groups balanced by vc_seq_workload,
 * starting from ceil(total / max_tokens) (at least min_groups), whose token sums never exceed max_tokens (verl
 * keeps ceil(total / max_tokens) groups even when one goes past the budget; verlc's memory plan counts on it),
 * in verl's order (by workload, the heaviest in the middle). A single sequence longer than max_tokens is VC_ERR_ARG
 * naming it. */
vc_status vc_micro_batches_by_tokens(const int64_t *lens, size_t n, int64_t max_tokens, size_t min_groups,
                                     vc_partition *out);
/* Consecutive micro-batches of `micro_bs` items (the last one may be smaller). */
vc_status vc_micro_batches_by_count(size_t n, size_t micro_bs, vc_partition *out);

#endif
