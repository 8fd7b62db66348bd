/* verlc generate's options (cmd_generate.c), and verl's main_generation_server form of them (gen_verl.c): its
 * command line and its Parquet output, each prompt row with its samples' texts as `responses`. */
#ifndef VC_TOOLS_CMD_GENERATE_H
#define VC_TOOLS_CMD_GENERATE_H
#include "verlc/core.h"
#include <stddef.h>
#include <stdint.h>

enum { OVER_ERROR, OVER_SKIP, OVER_TRUNCATE };
#define GEN_MAX_INPUTS 64

typedef struct {
    const char *model, *input, *output, *tok_dir, *device, *precision;
    int n, top_k, max_new, greedy, max_batch, max_prompt, overlong, threads, n_stop, spec, spec_k;
    uint64_t seed;
    float temperature, top_p, min_p;
    double kv_budget, kv_fraction;
    const char *stop[16];
    const char *inputs[GEN_MAX_INPUTS]; /* input files, read in order (input: the first) */
    int n_inputs;
    const char *prompt_key; /* NULL: `messages`, else `prompt` */
    int parquet;            /* write main_generation_server's Parquet rows */
    struct vc_config *cfg;  /* verl's config (its strings back the options above), or NULL */
} gen_args;

/* verl's `python -m verl.trainer.main_generation_server` command line (key=value overrides of the PPO trainer's
 * config) into *a: data.train_files, data.prompt_key, +data.output_path, actor_rollout_ref.model.path and the
 * rollout's n, temperature, top_p, prompt_length, response_length. 1 when parsed (a->cfg then set), 0 after
 * printing why not. */
int gen_verl_args(int argc, char **argv, gen_args *a);

struct cJSON;
/* the output as main_generation_server writes it: each prompt's input row (row[i] of its file) with `responses`,
 * its n samples' texts in sample order */
typedef struct {
    const struct cJSON *row;
    char **texts; /* [n] */
} gen_out_row;
vc_status gen_write_parquet(const char *path, const gen_out_row *rows, int n_rows, int n);
#endif
