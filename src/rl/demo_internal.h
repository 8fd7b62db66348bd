/* Internal pieces of `verlc demo` (src/rl/demo*.c). */
#ifndef VC_DEMO_INTERNAL_H
#define VC_DEMO_INTERNAL_H
#include "rl_internal.h"

#define DEMO_HIDDEN 64
#define DEMO_LAYERS 2
#define DEMO_INTER 192
#define DEMO_VOCAB 14

vc_status demo_write_tokenizer(const char *dir);
vc_status demo_write_model_config(const char *path, int vocab);
void demo_problem(uint64_t seed, int split, int k, int *a, int *b);
vc_status demo_write_dataset(const char *path, uint64_t seed, int split, int n);
int demo_tok(char c);
int demo_encode(const char *text, int32_t *ids);
void demo_decode(const int32_t *ids, int n, char *out);

/* greedy accuracy on the first n problems of split 1; examples (may be NULL) gets up to n_show lines */
vc_status demo_eval(vc_model *m, uint64_t seed, int n, double *acc, char *examples, size_t cap, int n_show);
/* supervised warm-up until the greedy accuracy reaches target (checked every check_every steps) or
 * max_steps; *acc gets the last measured accuracy */
vc_status demo_sft(vc_model *m, uint64_t seed, int n_train, int max_steps, double target, int verbose, double *acc,
                   int *steps_done);
#endif
