/* verlc reward: verl's rule-based reward functions (verl/utils/reward_score) and custom reward programs.
 * Strings are UTF-8; "characters" below are code points, as in Python. */
#ifndef VERLC_REWARD_H
#define VERLC_REWARD_H
#include "verlc/core.h"

/* GSM8K (verl gsm8k.py): looks at the last 300 characters; strict takes the last "#### <number>"
 * (commas and '$' removed), flexible the last number. Returns 0 when no answer is found, `score` on an
 * exact string match with ground_truth, else `format_score`. verl's defaults: strict, 0.0, 1.0. */
double vc_reward_gsm8k(const char *solution, const char *ground_truth, int flexible, double format_score,
                       double score);
/* Extracted answer (malloc'd) or NULL when none. */
char *vc_gsm8k_extract(const char *solution, int flexible);

/* MATH (verl math_reward.py, from lm-evaluation-harness): last \boxed{...} (or "\boxed " / \fbox),
 * strip_string normalisation and string equality. Returns 1.0 or 0.0. */
double vc_reward_math(const char *solution, const char *ground_truth);
char *vc_math_last_boxed(const char *s);  /* malloc'd, or NULL */
char *vc_math_remove_boxed(const char *s); /* its content (malloc'd), or NULL where verl's asserts fail */
/* strip_string; returns NULL where Python raises (callers then compare the raw strings, as is_equiv does). */
char *vc_math_strip_string(const char *s);
int vc_math_is_equiv(const char *a, const char *b);
/* _strip_string as PRM800K's math_normalize has it (as verl's but removing "\\%" and "%"); NULL where Python
 * raises */
char *vc_math_strip_string_prm800k(const char *s);

/* verl's hiyouga/geometry3k reward (geo3k.compute_score over mathruler 0.1.0's grader): 0.9 when the last
 * \boxed{} content grades equal to ground_truth, plus 0.1 when solution is "<think>...</think>...\boxed{...}..."
 * (so 0, 0.1, 0.9 or 1.0). Grading is mathruler's grade_answer: the MATH normalisation's strings, then its own
 * normalisation (units, LaTeX to text as pylatexenc 2.11 makes it, lower case) and, element by element of a
 * tuple, sympy's simplify(a - b) == 0 as parse_expr reads them (exact rationals, radicals and 53-bit Floats
 * by sympy's rules; other expressions without a Float numerically at complex points). */
vc_status vc_reward_geo3k(const char *solution, const char *ground_truth, double *score);
int vc_mathruler_grade(const char *given, const char *ground_truth); /* grade_answer: 1 or 0 */
char *vc_mathruler_boxed(const char *text); /* extract_boxed_content ("None" when there is none), malloc'd */

/* verl's prime_math reward (the numina_* data sources): 1.0 when the answer match_answer takes from solution
 * grades equal to ground_truth (the PRM800K grader as prime_math has it) or math_equal accepts it (strings,
 * numbers within a relative 1e-4 (also as percentages), intervals and tuples part by part; with "\pi", pi as
 * math.pi or 3.14; its sympy stage never accepts in verl, as here), else 0.0. */
vc_status vc_reward_prime_math(const char *solution, const char *ground_truth, double *score);
char *vc_prime_math_match_answer(const char *response); /* match_answer's text, malloc'd */
int vc_prime_math_equal(const char *prediction, const char *reference, double pi); /* math_equal: 1 or 0 */

/* Countdown (TinyZero): equation in the last <answer>...</answer> of the last line must use each of
 * `numbers` exactly once and evaluate (Python arithmetic, no eval) to target within 1e-5:
 * `score`; a malformed or wrong equation: `format_score`; no answer: 0. Defaults 0.1 / 1.0. */
double vc_reward_countdown(const char *solution, double target, const double *numbers, int n_numbers,
                           double format_score, double score);
/* Evaluates +, -, *, /, //, **, unary signs and parentheses on decimal numbers as Python would;
 * VC_ERR_FORMAT for syntax errors and characters outside [0-9+-*().\s/], VC_ERR_NUMERIC for division by zero. */
vc_status vc_arith_eval(const char *expr, double *out);

/* Search-R1 exact match (verl search_r1_like_qa_em.compute_score, data sources searchR1_nq, _triviaqa, _popqa,
 * _hotpotqa, _2wikimultihopqa, _musique, _bamboogle): 1 when the last <answer>...</answer> equals a golden
 * answer after SQuAD normalisation (0.25 with more than 10 answer tags), else 0. ground_truth: JSON
 * {"target": answer or [answers]}. */
vc_status vc_reward_qa_em(const char *solution, const char *ground_truth, double *score);
/* SQuAD's normalize_answer (malloc'd; NULL on allocation failure) */
char *vc_qa_normalize(const char *s);

/* verl's default_compute_score: chooses the scorer by data_source
 *   openai/gsm8k -> gsm8k; lighteval/MATH, DigitalLearningGmbH/MATH-lighteval, DigitalLearningGmbH/MATH-lvl5,
 *   HuggingFaceH4/MATH-500 -> math; math_dapo, math, math_dapo_reasoning, aime* -> math_dapo (score +-1);
 *   searchR1_* (verl's seven) -> qa_em; countdown (and countdown*) -> countdown.
 * ground_truth: a JSON value (a JSON string is decoded; countdown wants {"target", "numbers"}) or plain
 * text (used as is). extra_info_json may be NULL. Unknown data_source: VC_ERR_UNSUPPORTED naming it. */
vc_status vc_reward_default(const char *data_source, const char *solution_str, const char *ground_truth,
                            const char *extra_info_json, double *score);
/* ... and verl's dict result as JSON when the scorer returns one (math_dapo: {"score", "acc", "pred"}),
 * else *info = NULL; info may be NULL. *info is the caller's to cJSON_Delete. */
struct cJSON;
vc_status vc_reward_default_info(const char *data_source, const char *solution_str, const char *ground_truth,
                                 const char *extra_info_json, double *score, struct cJSON **info);

/* ---------------------------------------------------------------- custom reward programs
 * A child process started once and kept alive; one JSON line per row on its stdin
 *   {"data_source": ..., "solution_str": ..., "ground_truth": ..., "extra_info": ...}
 * and one line {"score": x} on its stdout (an object with more keys is verl's dict result; {"error": text}
 * fails the row without a restart). Each call has a deadline of timeout_ms.
 * Statuses of vc_reward_proc_score:
 *   VC_OK
 *   VC_ERR_TIMEOUT  failed row: the program hung, crashed, closed its output or wrote a line that is not
 *                   JSON; it was killed (whole process group) and is restarted on the next call; *score = 0
 *                   and the failure is counted. Training may go on.
 *   VC_ERR_FORMAT   the answer was JSON but its score is missing or not a number (the message names the row).
 *   other           fatal: the program cannot be (re)started, out of memory. */
typedef struct vc_reward_proc vc_reward_proc;
vc_status vc_reward_proc_start(char *const *argv, int timeout_ms, vc_reward_proc **proc);
vc_status vc_reward_proc_score(vc_reward_proc *proc, const char *data_source, const char *solution,
                               const char *ground_truth, const char *extra_info_json, double *score);
#define vc_reward_row_failed(st) ((st) == VC_ERR_TIMEOUT)
/* ... keeping the program's answer when it is a JSON object (*answer: the caller's to cJSON_Delete; NULL
 * for a bare number or on failure): its other keys (acc, pred, ...) are verl's reward_extra_info */
struct cJSON;
vc_status vc_reward_proc_score_ex(vc_reward_proc *proc, const char *data_source, const char *solution,
                                  const char *ground_truth, const char *extra_info_json, double *score,
                                  struct cJSON **answer);
/* the same channel for any request: one line (ending in a newline) out, one JSON value back (*answer,
 * owned by the caller); failures as vc_reward_proc_score's (VC_ERR_TIMEOUT: killed, restarted next call) */
struct cJSON;
vc_status vc_reward_proc_call(vc_reward_proc *proc, const char *request_line, struct cJSON **answer);
/* one request for n calls: answer lines {"i": k, ...} in any order into answers[k] (the caller frees them), each
 * within the timeout (and 2 s: the program is to time its calls out) of the one before; a timeout, an exit or a stray line kills the program (restarted at the next
 * call) and fails with the calls not answered left NULL */
vc_status vc_reward_proc_call_many(vc_reward_proc *proc, const char *request_line, int n, struct cJSON **answers);
/* ... with the row's own JSON values (NULL: JSON null) as ground_truth and extra_info, as verl passes them */
vc_status vc_reward_proc_score_v(vc_reward_proc *proc, const char *data_source, const char *solution,
                                 const struct cJSON *ground_truth, const struct cJSON *extra_info, double *score,
                                 struct cJSON **answer);
/* One request for n rows {"data_sources": [...], "solution_strs", "ground_truths", "extra_infos"} and one
 * list of n answers back (verl's batch reward manager). A failed call (timeout, crash, {"error": ...}) fails
 * every row; an {"error": ...} answer fails its row: failed[i] = 1, score 0, and VC_OK (the message stays in
 * vc_last_error). answer: NULL or [n] objects as vc_reward_proc_score_ex's. */
vc_status vc_reward_proc_score_batch(vc_reward_proc *proc, int n, const char *const *data_source,
                                     const char *const *solution, const struct cJSON *const *ground_truth,
                                     const struct cJSON *const *extra_info, double *score, struct cJSON **answer,
                                     int *failed);
/* raw lines on the same channel (MCP's stdio transport), before a deadline (vc_now() seconds); a failure
 * (VC_ERR_TIMEOUT: it exited, hung or stopped reading) kills the program, which is not restarted */
vc_status vc_reward_proc_send_line(vc_reward_proc *proc, const char *line, double deadline);
vc_status vc_reward_proc_read_line(vc_reward_proc *proc, double deadline, char **line);
long vc_reward_proc_failures(const vc_reward_proc *proc); /* rows failed so far */
long vc_reward_proc_restarts(const vc_reward_proc *proc); /* times the program was started again */
void vc_reward_proc_close(vc_reward_proc *proc);

/* ---------------------------------------------------------------- DAPO / AIME
 * verl's math_dapo.compute_score (verl/utils/reward_score/math_dapo.py; the data sources "math_dapo",
 * "math", "math_dapo_reasoning" and "aime*"), on the last 300 characters of solution:
 *   default            the last "Answer: ..." line (re.findall(r"(?i)Answer\s*:\s*([^\n]+)")[-1], "[INVALID]"
 *                      when there is none) and ground_truth, both through normalize_final_answer (the part
 *                      after the last "=", Minerva's substitutions and removed words, $...$, \text{},
 *                      \textbf{}, \overline{}, \boxed{} unwrapped, \fracab and \sqrta shorthand, "1,000" ->
 *                      "1000", strip), compared as strings;
 *   strict_box_verify  the content of the last "\boxed{...}" within the last 100 characters, compared with
 *                      ground_truth as it is.
 * *score 1.0 or -1.0, *acc 1/0, *pred a malloc'd copy of the normalized prediction (strict: the boxed
 * content; NULL where verl's pred is None: strict without a closed \boxed{}). Any output may be NULL.
 * VC_ERR_ARG for a NULL or non-UTF-8 string, VC_ERR_NOMEM on allocation failure. */
vc_status vc_reward_math_dapo(const char *solution, const char *ground_truth, int strict_box_verify,
                              double *score, int *acc, char **pred);


/* ---------------------------------------------------------------- verl's Python reward functions
 * custom_reward_function.path as verl reads it: a .py file, file://FILE or pkg://module (1), else a program
 * command line (0). */
int vc_reward_path_is_python(const char *path);
/* Starts a Python interpreter ($VERLC_PYTHON, default python3) serving function `name` (NULL:
 * compute_score) of `path` over the channel above, loaded as verl's load_module does; kwargs_json: a JSON
 * object of extra keyword arguments (verl's reward_kwargs; NULL: none). batch: verl's batch reward manager's
 * call (data_sources=..., solution_strs=..., ground_truths=..., extra_infos=...; vc_reward_proc_score_batch)
 * instead of one row per call. Each row's extra_info gets verl's rollout_reward_scores = {}. Fails at once,
 * with Python's message, when the interpreter, the file or the function cannot be loaded. */
vc_status vc_reward_py_start(const char *path, const char *name, const char *kwargs_json, int batch, int timeout_ms,
                             vc_reward_proc **proc);
/* verl's tool class class_name ("package.module.Class", a BaseTool) built with config and tool_schema (JSON
 * texts) in a Python interpreter as above, answering verlc.tools.CommandTool's requests
 * ({"name", "arguments", "create_kwargs", "extra_info"} -> {"text", "reward"}) by create / execute / release
 * as verl's tool agent loop calls them; an exception is verl's "Error when executing tool: ..." text. */
vc_status vc_tool_py_start(const char *class_name, const char *config_json, const char *schema_json, int timeout_ms,
                           vc_reward_proc **proc);
/* later verl's function tools: a Python file of @function_tool functions (multi_turn.function_tool_path) served by
 * one interpreter: {"op": "list"} gives their names and schemas, {"name", "arguments"} runs one ({"text",
 * "reward"}) */
vc_status vc_function_tools_py_start(const char *path, int timeout_ms, vc_reward_proc **out);
/* verl's interaction class (a BaseInteraction) built with config (a JSON object, "name" included), answering
 * {"op": "start", "id", "kwargs"} with {"ok": true} (start_interaction(id, **kwargs)) and
 * {"op": "respond", "id", "messages", "kwargs"} with {"terminate", "content", "score"}
 * (generate_response(id, messages, **kwargs)); an exception is {"error": ...}. */
vc_status vc_interaction_py_start(const char *class_name, const char *config_json, int timeout_ms, vc_reward_proc **proc);

#endif
