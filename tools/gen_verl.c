/* verl's main_generation_server as `verlc generate key=value ...` (cmd_generate.h): its command line read from
 * verl's PPO trainer config, and its Parquet output. */
#include "cli.h"
#include "cmd_generate.h"
#include "verlc/config.h"
#include "verlc/data.h"
#include "verlc/json.h"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RO "actor_rollout_ref.rollout."
#define PARAM_DTYPE "actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype"

static vc_status train_files(const vc_config *c, gen_args *a) {
    size_t n = 0;
    if (vc_config_list_len(c, "data.train_files", &n) == VC_OK) {
        if (n == 0 || n > GEN_MAX_INPUTS)
            return vc_fail(VC_ERR_ARG, "data.train_files: 1 to %d files, got %zu", GEN_MAX_INPUTS, n);
        for (size_t i = 0; i < n; i++) {
            vc_status st = vc_config_list_str(c, "data.train_files", i, &a->inputs[i]);
            if (st) return st;
        }
        a->n_inputs = (int)n;
        return VC_OK;
    }
    vc_status st = vc_config_get_str(c, "data.train_files", &a->inputs[0]);
    if (!st) a->n_inputs = 1;
    return st;
}

static vc_status read_keys(const vc_config *c, gen_args *a) {
    int64_t n = 1, resp = 512, plen = 512, seqs = 0, top_k = -1;
    double temp = 1.0, top_p = 1.0, mem = 0.5;
    vc_status st = VC_OK;
#define TRY(x) if (!st) st = (x)
    TRY(vc_config_get_str(c, "actor_rollout_ref.model.path", &a->model));
    TRY(vc_config_get_str_or(c, "actor_rollout_ref.model.tokenizer_path", NULL, &a->tok_dir));
    TRY(train_files(c, a));
    TRY(vc_config_get_str_or(c, "data.prompt_key", "prompt", &a->prompt_key));
    if (!st && !vc_config_has(c, "data.output_path"))
        return vc_fail(VC_ERR_MISSING, "+data.output_path=FILE.parquet is needed (where main_generation_server "
                       "writes its rows)");
    TRY(vc_config_get_str(c, "data.output_path", &a->output));
    TRY(vc_config_get_int_or(c, RO "n", 1, &n));
    TRY(vc_config_get_double_or(c, RO "temperature", 1.0, &temp));
    TRY(vc_config_get_double_or(c, RO "top_p", 1.0, &top_p));
    TRY(vc_config_get_int_or(c, RO "top_k", -1, &top_k));
    TRY(vc_config_get_int_or(c, RO "response_length", 512, &resp));
    TRY(vc_config_get_int_or(c, RO "prompt_length", 512, &plen));
    TRY(vc_config_get_int_or(c, RO "max_num_seqs", 0, &seqs));
    TRY(vc_config_get_double_or(c, RO "gpu_memory_utilization", 0.5, &mem));
    TRY(vc_config_get_str_or(c, "trainer.device", "auto", &a->device));
    TRY(vc_config_get_str_or(c, PARAM_DTYPE, "fp32", &a->precision));
#undef TRY
    if (st) return st;
    if (n < 1 || n > 1 << 20) return vc_fail(VC_ERR_ARG, RO "n must be 1 or more, got %lld", (long long)n);
    if (temp == 0.0 && n != 1) return vc_fail(VC_ERR_ARG, "When temperature=0, n_samples must be 1. (" RO "n=%lld)", (long long)n);
    if (temp < 0 || !(top_p > 0 && top_p <= 1))
        return vc_fail(VC_ERR_ARG, RO "temperature must be >= 0 and top_p in (0, 1] (got %g, %g)", temp, top_p);
    if (resp < 1 || resp > 1 << 24 || plen < 1 || plen > 1 << 24)
        return vc_fail(VC_ERR_ARG, RO "prompt_length and response_length must be positive (got %lld, %lld)",
                       (long long)plen, (long long)resp);
    if (!(mem > 0 && mem <= 1))
        return vc_fail(VC_ERR_ARG, RO "gpu_memory_utilization must be in (0, 1] (got %g)", mem);
    if (top_k > 0) /* (its sampling_params keep top_k commented out) */
        fprintf(stderr, "verlc generate: " RO "top_k=%lld not applied: verl's main_generation_server sends "
                        "temperature, top_p and max_tokens only\n", (long long)top_k);
    a->n = (int)n;
    a->greedy = temp == 0.0;
    a->temperature = (float)temp;
    a->top_p = (float)top_p;
    a->max_new = (int)resp;
    a->max_prompt = (int)plen;
    a->max_batch = seqs > 0 && seqs < 1 << 20 ? (int)seqs : 256;
    a->kv_fraction = mem;
    if (!a->tok_dir) a->tok_dir = a->model;
    a->input = a->inputs[0];
    a->parquet = 1;
    return VC_OK;
}

int gen_verl_args(int argc, char **argv, gen_args *a) {
    char **args = NULL;
    int n_args = 0;
    *a = (gen_args){ .overlong = OVER_ERROR, .spec_k = -1 };
    if (vc_cli_verl_args("generate", argc, argv, &args, &n_args)) return 0;
    vc_config *c = NULL;
    vc_status st = vc_config_load_argv(n_args, args, NULL, &c);
    vc_cli_free_args(args, n_args);
    if (!st) st = read_keys(c, a);
    if (st) {
        fprintf(stderr, "verlc generate: %s\n", vc_last_error());
        vc_config_free(c);
        return 0;
    }
    a->cfg = c;
    return 1;
}

vc_status gen_write_parquet(const char *path, const gen_out_row *rows, int n_rows, int n) {
    cJSON **out = calloc((size_t)n_rows + 1, sizeof *out);
    vc_status st = out ? VC_OK : VC_ERR_NOMEM;
    for (int i = 0; !st && i < n_rows; i++) {
        cJSON *r = cJSON_Duplicate(rows[i].row, 1), *resp = cJSON_CreateArray();
        if (r && resp) cJSON_DeleteItemFromObjectCaseSensitive(r, "responses"); /* (pandas replaces the column) */
        for (int k = 0; r && resp && k < n; k++) {
            cJSON *s = cJSON_CreateString(rows[i].texts[k] ? rows[i].texts[k] : "");
            if (!s || !cJSON_AddItemToArray(resp, s)) {
                cJSON_Delete(s);
                st = VC_ERR_NOMEM;
            }
        }
        if (!r || !resp || !cJSON_AddItemToObject(r, "responses", resp)) {
            cJSON_Delete(resp);
            st = VC_ERR_NOMEM;
        }
        out[i] = r;
    }
    const char *slash = strrchr(path, '/');
    if (!st && slash && slash > path) { /* (main_generation_server makes the output's folder) */
        char *dir = strndup(path, (size_t)(slash - path));
        st = dir ? vc_mkdirs(dir) : VC_ERR_NOMEM;
        free(dir);
    }
    if (st == VC_ERR_NOMEM) vc_fail(st, "%s: out of memory", path);
    if (!st) st = vc_parquet_write(path, out, (size_t)n_rows);
    for (int i = 0; out && i < n_rows; i++) cJSON_Delete(out[i]);
    free(out);
    return st;
}
