/* verl's model merger (vc_verl_merge, `verlc model_merger`) on FSDP checkpoints written by torch's FSDP2 as verl's
 * checkpoint manager writes them (tests/fixtures/verl_ckpt, tools/fixtures/make_verl_ckpt.py with torch 2.15): a
 * mesh of 3 with uneven parts, an HSDP (ddp, fsdp) mesh of 2 x 2 with tied embeddings, LoRA on q / v over 2 ranks
 * (and saved LoRA-only, as verl's save_lora_only: the adapter alone), a model in bf16 over 2 ranks;
 * every merged tensor bit for bit the model's own save_pretrained in bfloat16, the LM head's tied alias dropped, the
 * adapters apart with PEFT's names and config, config.json's dtype bfloat16 and the generation config beside; `test`
 * passes against the reference and names an extra key against another; a missing or truncated rank file, a bad
 * world size and a rank's file opened as a model are refused naming the file. */
#include "cli_util.h"
#include "io_helpers.h"
#include "verlc/json.h"
#include "verlc/merge.h"
#include "verlc/safetensors.h"
#include <cjson/cJSON.h>

#define DIR "tests/fixtures/verl_ckpt/"

static void same_weights(const char *got_dir, const char *want_dir) {
    vc_checkpoint *a = NULL, *b = NULL;
    CHECK_OK(vc_ckpt_open(got_dir, &a));
    CHECK_OK(vc_ckpt_open(want_dir, &b));
    if (a && b) {
        CHECK_MSG(vc_ckpt_count(a) == vc_ckpt_count(b), "%s: %d tensors, %s %d", got_dir, vc_ckpt_count(a), want_dir,
                  vc_ckpt_count(b));
        int same = 0;
        for (int i = 0; i < vc_ckpt_count(a) && i < vc_ckpt_count(b); i++) {
            const vc_st_tensor *x = vc_ckpt_at(a, i), *y = vc_ckpt_at(b, i);
            same += !strcmp(x->name, y->name) && x->dtype == VC_BF16 && y->dtype == VC_BF16 && x->ndim == y->ndim &&
                    x->nbytes == y->nbytes && !memcmp(x->shape, y->shape, sizeof x->shape[0] * (size_t)x->ndim) &&
                    !memcmp(x->data, y->data, x->nbytes);
        }
        CHECK_MSG(same == vc_ckpt_count(b) && same > 0, "%s: %d of %d tensors equal to %s", got_dir, same,
                  vc_ckpt_count(b), want_dir);
    }
    vc_ckpt_close(a);
    vc_ckpt_close(b);
}

static cJSON *json_at(const char *dir, const char *name) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    cJSON *j = NULL;
    CHECK_OK(vc_json_load_file(p, &j));
    return j;
}

static void merge_case(const char *tmp, const char *name) {
    char local[300], out[400], ref[400];
    snprintf(local, sizeof local, DIR "%s", name);
    snprintf(out, sizeof out, "%s/%s", tmp, name);
    snprintf(ref, sizeof ref, DIR "%s/ref", name);
    vc_verl_merge_opts o = { .local_dir = local, .target_dir = out };
    CHECK_OK(vc_verl_merge(&o));
    same_weights(out, ref);
    cJSON *cfg = json_at(out, "config.json"), *gen = json_at(out, "generation_config.json");
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(cfg, "dtype");
    CHECK(cJSON_IsString(dt) && !strcmp(dt->valuestring, "bfloat16") && !cJSON_GetObjectItemCaseSensitive(cfg, "torch_dtype"));
    CHECK(gen != NULL);
    cJSON_Delete(cfg);
    cJSON_Delete(gen);
    vc_verl_merge_opts t = { .local_dir = local, .test_hf_dir = ref };
    CHECK_OK(vc_verl_merge(&t));
}

static void lora(const char *tmp) {
    char out[400], ref[300];
    snprintf(out, sizeof out, "%s/lora2/lora_adapter", tmp);
    snprintf(ref, sizeof ref, DIR "lora2/ref/lora_adapter/adapter_model.safetensors");
    char file[500];
    snprintf(file, sizeof file, "%s/adapter_model.safetensors", out);
    same_weights(file, ref);
    cJSON *c = json_at(out, "adapter_config.json");
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(c, "r"), *a = cJSON_GetObjectItemCaseSensitive(c, "lora_alpha");
    const cJSON *tt = cJSON_GetObjectItemCaseSensitive(c, "task_type"), *tm = cJSON_GetObjectItemCaseSensitive(c, "target_modules");
    CHECK(cJSON_IsNumber(r) && r->valuedouble == 4 && cJSON_IsNumber(a) && a->valuedouble == 8);
    CHECK(cJSON_IsString(tt) && !strcmp(tt->valuestring, "CAUSAL_LM"));
    int q = 0, v = 0;
    for (const cJSON *m = tm ? tm->child : NULL; m; m = m->next) q += !strcmp(m->valuestring, "q_proj"), v += !strcmp(m->valuestring, "v_proj");
    CHECK(cJSON_GetArraySize(tm) == 2 && q == 1 && v == 1);
    cJSON_Delete(c);
}

/* a LoRA-only checkpoint (verl's save_lora_only): the adapters alone, as the full checkpoint's, config beside */
static void lora_only(const char *tmp) {
    char out[400], file[500], cfg[500];
    snprintf(out, sizeof out, "%s/loraonly2", tmp);
    vc_verl_merge_opts o = { .local_dir = DIR "loraonly2", .target_dir = out };
    CHECK_OK(vc_verl_merge(&o));
    snprintf(file, sizeof file, "%s/lora_adapter/adapter_model.safetensors", out);
    same_weights(file, DIR "loraonly2/ref/lora_adapter/adapter_model.safetensors");
    same_weights(file, DIR "lora2/ref/lora_adapter/adapter_model.safetensors");
    snprintf(file, sizeof file, "%s/model.safetensors", out);
    snprintf(cfg, sizeof cfg, "%s/config.json", out);
    CHECK(access(file, F_OK) != 0 && access(cfg, F_OK) == 0);
}

static void refused(const vc_verl_merge_opts *o, const char *want) {
    vc_status st = vc_verl_merge(o);
    CHECK_MSG(st != VC_OK && strstr(vc_last_error(), want), "want '%s', got '%s'", want, st ? vc_last_error() : "success");
}

static void copy_case(const char *from, const char *to) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cp -r %s %s", from, to);
    CHECK(system(cmd) == 0);
}

static void bad_input(const char *tmp) {
    /* against another checkpoint's reference: fsdp3 keeps the untied head that hsdp4's ties away */
    vc_verl_merge_opts t = { .local_dir = DIR "fsdp3", .test_hf_dir = DIR "hsdp4/ref" };
    refused(&t, "Extra key in collected state dict: 'lm_head.weight'");
    char d[400], p[600];
    snprintf(d, sizeof d, "%s/broken", tmp);
    copy_case(DIR "fsdp3", d);
    snprintf(p, sizeof p, "%s/model_world_size_3_rank_2.pt", d);
    char keep[600];
    snprintf(keep, sizeof keep, "%s.keep", p);
    CHECK(rename(p, keep) == 0);
    vc_verl_merge_opts o = { .local_dir = d, .target_dir = tmp };
    refused(&o, "model_world_size_3_rank_2.pt");
    /* truncated: the archive cut in half */
    FILE *f = fopen(keep, "rb"), *g = fopen(p, "wb");
    static char buf[1 << 20];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (g) fwrite(buf, 1, n / 2, g);
    if (f) fclose(f);
    if (g) fclose(g);
    refused(&o, "model_world_size_3_rank_2.pt");
    snprintf(p, sizeof p, "%s/fsdp_config.json", d);
    g = fopen(p, "w");
    if (g) fputs("{\"FSDP_version\": 2, \"world_size\": 0}", g), fclose(g);
    refused(&o, "world_size 0 out of range");
    /* one rank's file is not a model */
    vc_checkpoint *ck = NULL;
    vc_status st = vc_ckpt_open(DIR "fsdp3/model_world_size_3_rank_0.pt", &ck);
    CHECK_MSG(st != VC_OK && strstr(vc_last_error(), "one rank's part of a DTensor") &&
              strstr(vc_last_error(), "verlc model_merger merge"), "%s", st ? vc_last_error() : "opened");
    vc_ckpt_close(ck);
}

int main(void) {
    char *tmp = tmp_dir();
    CHECK(tmp != NULL);
    if (!tmp) return vc_test_done();
    merge_case(tmp, "fsdp3");
    merge_case(tmp, "hsdp4");
    merge_case(tmp, "lora2");
    merge_case(tmp, "bf16x2"); /* (parts in bf16: their bytes as they are) */
    lora(tmp);
    lora_only(tmp);
    bad_input(tmp);
    rm_tree(tmp);
    free(tmp);
    return vc_test_done();
}
