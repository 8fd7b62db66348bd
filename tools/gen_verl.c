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
#include <strings.h>

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

/* ---- verl's older main_generation (removed from verl in January 2026; recipe/r1 still runs it): its own
 * generation.yaml keys. Its defaults: 5 samples a prompt, temperature 1, top_k 50, top_p 0.7, prompts of 1,536 tokens,
 * responses of 512, bf16 (vLLM's dtype) ---- */

/* 1 when the command line is main_generation's (its keys: data.path, data.n_samples, model.path, rollout.*) */
static int legacy_form(int argc, char **argv) {
    static const char *const KEYS[] = { "data.path=", "data.n_samples=", "data.batch_size=", "model.path=", "rollout." };
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i] + strspn(argv[i], "+~");
        for (size_t j = 0; j < sizeof KEYS / sizeof KEYS[0]; j++)
            if (!strncmp(k, KEYS[j], strlen(KEYS[j]))) return 1;
    }
    return 0;
}

/* generation.yaml's keys verlc takes as they are (the engine's and the workers' settings, Ray's) */
static int legacy_ignored(const char *k) {
    static const char *const P[] = { "trainer.nnodes", "trainer.n_gpus_per_node", "data.batch_size", "rollout._target_",
                                     "rollout.name", "rollout.mode", "rollout.enforce_eager", "rollout.free_cache_engine",
                                     "rollout.load_format", "rollout.tensor_model_parallel_size",
                                     "rollout.data_parallel_size", "rollout.max_num_batched_tokens", "rollout.max_model_len",
                                     "rollout.log_prob_micro_batch_size", "rollout.log_prob_micro_batch_size_per_gpu",
                                     "rollout.disable_log_stats", "rollout.enable_chunked_prefill",
                                     "rollout.calculate_log_probs", "data.trust_remote_code", "model.trust_remote_code",
                                     "actor.", "ray_kwargs." };
    for (size_t j = 0; j < sizeof P / sizeof P[0]; j++) {
        size_t n = strlen(P[j]);
        if (!strncmp(k, P[j], n) && (P[j][n - 1] == '.' || !k[n])) return 1;
    }
    return 0;
}

static int legacy_bool(const char *v) { return !strcasecmp(v, "true") || !strcmp(v, "1"); }

static vc_status legacy_num(const char *k, const char *v, double lo, double hi, double *out) {
    char *end;
    double d = strtod(v, &end);
    if (end == v || *end || !(d >= lo && d <= hi))
        return vc_fail(VC_ERR_ARG, "%s=%s: a number from %g to %g", k, v, lo, hi);
    *out = d;
    return VC_OK;
}

static vc_status legacy_key(gen_args *a, const char *k, const char *v, double *ns, double *tk, double *temp, int *sample) {
    double d = 0;
    vc_status st = VC_OK;
    if (!strcmp(k, "data.path")) a->inputs[0] = v;
    else if (!strcmp(k, "data.prompt_key")) a->prompt_key = v;
    else if (!strcmp(k, "data.output_path")) a->output = v;
    else if (!strcmp(k, "data.n_samples")) st = legacy_num(k, v, 1, 1 << 20, ns);
    else if (!strcmp(k, "model.path")) a->model = v;
    else if (!strcmp(k, "trainer.device")) a->device = v;
    else if (!strcmp(k, "rollout.temperature")) st = legacy_num(k, v, 0, 1e6, temp);
    else if (!strcmp(k, "rollout.top_k")) st = legacy_num(k, v, -1, 1 << 30, tk);
    else if (!strcmp(k, "rollout.top_p")) {
        if (!(st = legacy_num(k, v, 1e-9, 1, &d))) a->top_p = (float)d;
    }
    else if (!strcmp(k, "rollout.prompt_length")) {
        if (!(st = legacy_num(k, v, 1, 1 << 24, &d))) a->max_prompt = (int)d;
    }
    else if (!strcmp(k, "rollout.response_length")) {
        if (!(st = legacy_num(k, v, 1, 1 << 24, &d))) a->max_new = (int)d;
    }
    else if (!strcmp(k, "rollout.gpu_memory_utilization")) {
        if (!(st = legacy_num(k, v, 1e-6, 1, &d))) a->kv_fraction = d;
    }
    else if (!strcmp(k, "rollout.max_num_seqs")) {
        if (!(st = legacy_num(k, v, 1, 1 << 20, &d))) a->max_batch = (int)d;
    }
    else if (!strcmp(k, "rollout.do_sample")) *sample = legacy_bool(v);
    else if (!strcmp(k, "rollout.dtype")) {
        if (!strcmp(v, "bfloat16") || !strcmp(v, "bf16")) a->precision = "bf16";
        else if (!strcmp(v, "float32") || !strcmp(v, "fp32")) a->precision = "fp32";
        else st = vc_fail(VC_ERR_UNSUPPORTED, "%s=%s: bfloat16 or float32", k, v);
    } else if (!strcmp(k, "rollout.ignore_eos") && legacy_bool(v))
        st = vc_fail(VC_ERR_UNSUPPORTED, "%s=%s: generation stops at the tokenizer's EOS", k, v);
    else if (!strcmp(k, "rollout.n") && strcmp(v, "1"))
        st = vc_fail(VC_ERR_ARG, "%s=%s: main_generation draws data.n_samples samples a prompt, one a pass (rollout.n 1)", k, v);
    else if (!strcmp(k, "model.external_lib") && strcmp(v, "null"))
        st = vc_fail(VC_ERR_UNSUPPORTED, "%s=%s: verlc imports no Python modules", k, v);
    else if (!strcmp(k, "data.apply_chat_template_kwargs") || !strncmp(k, "data.apply_chat_template_kwargs.", 32))
        st = vc_fail(VC_ERR_UNSUPPORTED, "%s: chat template arguments are not built into verlc generate", k);
    else if (!strcmp(k, "rollout.ignore_eos") || !strcmp(k, "rollout.n") || !strcmp(k, "model.external_lib") ||
             legacy_ignored(k))
        ;
    else st = vc_fail(VC_ERR_ARG, "%s: not a key of verl's main_generation (generation.yaml)", k);
    return st;
}

static int legacy_args(int argc, char **argv, gen_args *a) {
    *a = (gen_args){ .overlong = OVER_ERROR, .spec_k = -1, .top_p = 0.7f, .max_prompt = 1536, .max_new = 512,
                     .kv_fraction = 0.5, .max_batch = 1024, .device = "auto", .precision = "bf16", .prompt_key = "prompt",
                     .output = "/opt/tiger/math_Qwen2-7B-Instruct.parquet", .parquet = 1, .n_inputs = 1 };
    double ns = 5, tk = 50, temp = 1.0;
    int sample = 1;
    vc_status st = VC_OK;
    for (int i = 1; i < argc && !st; i++) {
        if (!strcmp(argv[i], "--device") || !strcmp(argv[i], "--precision")) {
            if (i + 1 >= argc) st = vc_fail(VC_ERR_ARG, "%s needs a value", argv[i]);
            else if (argv[i][2] == 'd') a->device = argv[++i];
            else a->precision = argv[++i];
            continue;
        }
        const char *eq = strchr(argv[i], '=');
        if (!eq || argv[i][0] == '~') {
            st = vc_fail(VC_ERR_ARG, "'%s': main_generation takes key=value", argv[i]);
            break;
        }
        char key[160];
        const char *k0 = argv[i] + strspn(argv[i], "+");
        snprintf(key, sizeof key, "%.*s", (int)(eq - k0), k0);
        st = legacy_key(a, key, eq + 1, &ns, &tk, &temp, &sample);
    }
    if (!st && (!a->inputs[0] || !a->model))
        st = vc_fail(VC_ERR_MISSING, "data.path and model.path are needed (main_generation's prompts and model)");
    if (!st && sample && temp == 0.0 && ns != 1)
        st = vc_fail(VC_ERR_ARG, "When temperature=0, n_samples must be 1. (data.n_samples=%g)", ns);
    if (st) {
        fprintf(stderr, "verlc generate: %s\n", vc_last_error());
        return 0;
    }
    a->n = (int)ns;
    a->greedy = !sample || temp == 0.0; /* (vLLM samples greedily at temperature 0; do_sample=False: the HF rollout's) */
    a->temperature = (float)temp;
    a->top_k = tk > 0 ? (int)tk : 0;
    a->input = a->inputs[0];
    a->tok_dir = a->model;
    return 1;
}

int gen_verl_args(int argc, char **argv, gen_args *a) {
    char **args = NULL;
    int n_args = 0;
    if (legacy_form(argc, argv)) return legacy_args(argc, argv, a);
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
