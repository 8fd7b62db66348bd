/* Checkpoints with exact resume, in verl's layout:
 *   DIR/global_step_N/actor/      weights (f32, Hugging Face layout) + optim.bin (AdamW moments)
 *   DIR/global_step_N/critic/     the same + value_head.bin (critic runs only)
 *   DIR/global_step_N/trainer_state.json   step, data position, KL controller, scheduler steps
 *   DIR/latest_checkpointed_iteration.txt  N
 * f32 weights and optimiser moments, the data iterator's (epoch, batch) and per-step random streams
 * make a resumed run continue bit-identically. */
#include "trainer_internal.h"
#include "verlc/json.h"
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static vc_status save_optim(const rl_optim *o, const char *dir) {
    size_t n = vc_adamw_state_size(&o->opt);
    void *buf = vc_malloc(n);
    char *path = vc_path_join(dir, "optim.bin");
    vc_status st = buf && path ? vc_adamw_state_save(&o->opt, buf, n) : VC_ERR_NOMEM;
    if (!st) st = vc_write_file_atomic(path, buf, n);
    free(buf);
    free(path);
    return st;
}

static vc_status load_optim(rl_optim *o, const char *dir) {
    char *path = vc_path_join(dir, "optim.bin"), *buf = NULL;
    size_t n = 0;
    vc_status st = path ? vc_read_file(path, &buf, &n) : VC_ERR_NOMEM;
    if (!st) st = vc_adamw_state_load(&o->opt, buf, n);
    if (st) st = vc_fail_ctx(st, "%s", path ? path : dir);
    free(buf);
    free(path);
    return st;
}

static char *step_dir(const char *out, int64_t step) {
    char name[64];
    snprintf(name, sizeof name, "global_step_%lld", (long long)step);
    return vc_path_join(out, name);
}

static vc_status write_state(vc_rl_trainer *t, const char *dir) {
    cJSON *j = cJSON_CreateObject();
    if (!j) return VC_ERR_NOMEM;
    cJSON_AddNumberToObject(j, "global_step", (double)t->step);
    cJSON_AddNumberToObject(j, "epoch", (double)t->it.epoch);
    cJSON_AddNumberToObject(j, "batch", (double)t->it.batch);
    cJSON_AddNumberToObject(j, "kl_ctrl_value", t->kl_ctrl.value);
    cJSON_AddNumberToObject(j, "actor_optim_steps", (double)t->aopt.steps);
    cJSON_AddNumberToObject(j, "critic_optim_steps", (double)t->copt.steps);
    char *text = cJSON_Print(j), *path = vc_path_join(dir, "trainer_state.json");
    vc_status st = text && path ? vc_write_file_atomic(path, text, strlen(text)) : VC_ERR_NOMEM;
    free(text);
    free(path);
    cJSON_Delete(j);
    return st;
}

static vc_status save_critic(vc_rl_trainer *t, const char *dir) {
    vc_status st = vc_model_save_hf(t->critic.m, dir, VC_F32);
    if (!st) st = save_optim(&t->copt, dir);
    char *p = vc_path_join(dir, "value_head.bin");
    int64_t H = vc_model_cfg(t->critic.m)->hidden;
    if (!st) st = p ? vc_write_file_atomic(p, t->critic.w, sizeof(float) * (size_t)(H + 1)) : VC_ERR_NOMEM;
    free(p);
    return st;
}

vc_status rl_ckpt_save(vc_rl_trainer *t) {
    char *dir = step_dir(t->out_dir, t->step), *actor = NULL, *critic = NULL, *latest = NULL;
    vc_status st = dir ? VC_OK : VC_ERR_NOMEM;
    if (!st && mkdir(dir, 0755) && !vc_file_exists(dir)) st = vc_fail(VC_ERR_IO, "%s: cannot create directory", dir);
    if (!st && (!(actor = vc_path_join(dir, "actor")) || !(critic = vc_path_join(dir, "critic")))) st = VC_ERR_NOMEM;
    if (!st) st = vc_model_save_hf(t->actor, actor, VC_F32);
    if (!st) st = save_optim(&t->aopt, actor);
    if (!st && t->use_critic) st = save_critic(t, critic);
    if (!st) st = write_state(t, dir);
    if (!st && !(latest = vc_path_join(t->out_dir, "latest_checkpointed_iteration.txt"))) st = VC_ERR_NOMEM;
    if (!st) {
        char num[32];
        int n = snprintf(num, sizeof num, "%lld", (long long)t->step);
        st = vc_write_file_atomic(latest, num, (size_t)n);
    }
    if (!st && t->verbose) printf("checkpoint saved to %s\n", dir);
    if (st) st = vc_fail_ctx(st, "checkpoint %s", dir ? dir : "");
    free(dir);
    free(actor);
    free(critic);
    free(latest);
    return st;
}

vc_status rl_ckpt_find(const vc_config *cfg, const char *out_dir, char **dir) {
    *dir = NULL;
    const char *mode = "auto", *path = NULL;
    vc_status st = vc_config_get_str_or(cfg, "trainer.resume_mode", "auto", &mode);
    if (!st) st = vc_config_get_str_or(cfg, "trainer.resume_from_path", NULL, &path);
    if (st) return st;
    if (!strcmp(mode, "disable")) return VC_OK;
    if (!strcmp(mode, "resume_path")) {
        if (!path) return vc_fail(VC_ERR_MISSING, "trainer.resume_mode=resume_path needs trainer.resume_from_path");
        *dir = vc_strdup(path);
        return *dir ? VC_OK : VC_ERR_NOMEM;
    }
    if (strcmp(mode, "auto")) return vc_fail(VC_ERR_ARG, "trainer.resume_mode: `%s` is not auto, disable or resume_path", mode);
    char *latest = vc_path_join(out_dir, "latest_checkpointed_iteration.txt"), *text = NULL;
    size_t n = 0;
    if (!latest) return VC_ERR_NOMEM;
    if (!vc_file_exists(latest)) {
        free(latest);
        return VC_OK;
    }
    st = vc_read_file(latest, &text, &n);
    char *end = NULL;
    long long step = st ? 0 : strtoll(text, &end, 10);
    if (!st && (end == text || step < 0)) st = vc_fail(VC_ERR_FORMAT, "%s: not a step number", latest);
    if (!st && !(*dir = step_dir(out_dir, step))) st = VC_ERR_NOMEM;
    if (!st && !vc_file_exists(*dir)) {
        st = vc_fail(VC_ERR_IO, "%s names step %lld but %s is missing", latest, step, *dir);
        free(*dir);
        *dir = NULL;
    }
    free(latest);
    free(text);
    return st;
}

static vc_status load_critic_extra(vc_rl_trainer *t, const char *dir) {
    char *cdir = vc_path_join(dir, "critic"), *p = cdir ? vc_path_join(cdir, "value_head.bin") : NULL, *buf = NULL;
    size_t n = 0;
    int64_t H = vc_model_cfg(t->critic.m)->hidden;
    vc_status st = p ? vc_read_file(p, &buf, &n) : VC_ERR_NOMEM;
    if (!st && n != sizeof(float) * (size_t)(H + 1)) st = vc_fail(VC_ERR_SHAPE, "%s: %zu bytes, expected %zu", p, n, sizeof(float) * (size_t)(H + 1));
    if (!st) memcpy(t->critic.w, buf, n);
    if (!st) st = load_optim(&t->copt, cdir);
    free(buf);
    free(p);
    free(cdir);
    return st;
}

vc_status rl_ckpt_load_state(vc_rl_trainer *t, const char *dir) {
    char *sp = vc_path_join(dir, "trainer_state.json"), *actor = vc_path_join(dir, "actor");
    cJSON *j = NULL;
    vc_status st = sp && actor ? vc_json_load_file(sp, &j) : VC_ERR_NOMEM;
    int64_t step = 0, epoch = 0, batch = 0, as = 0, cs = 0;
    double klv = t->kl_ctrl.value;
    if (!st) st = vc_json_req_int(j, "global_step", &step, sp);
    if (!st) st = vc_json_req_int(j, "epoch", &epoch, sp);
    if (!st) st = vc_json_req_int(j, "batch", &batch, sp);
    if (!st) st = vc_json_get_num(j, "kl_ctrl_value", klv, &klv, sp);
    if (!st) st = vc_json_get_int(j, "actor_optim_steps", 0, &as, sp);
    if (!st) st = vc_json_get_int(j, "critic_optim_steps", 0, &cs, sp);
    if (!st) st = load_optim(&t->aopt, actor);
    if (!st && t->use_critic) st = load_critic_extra(t, dir);
    if (!st) {
        t->step = step;
        vc_epoch_iter_seek(&t->it, epoch, (size_t)batch);
        t->kl_ctrl.value = klv;
        t->aopt.steps = as;
        t->copt.steps = cs;
        if (t->verbose) printf("resumed from %s (step %lld)\n", dir, (long long)step);
    }
    cJSON_Delete(j);
    free(sp);
    free(actor);
    return st ? vc_fail_ctx(st, "resume from %s", dir) : VC_OK;
}

vc_status rl_export_hf(vc_rl_trainer *t, const char *dir) {
    vc_status st = vc_model_save_hf(t->actor, dir, VC_F32);
    return st ? vc_fail_ctx(st, "export to %s", dir) : VC_OK;
}

vc_status rl_copy_tokenizer_files(const char *from_dir, const char *to_dir) {
    static const char *FILES[] = { "tokenizer.json", "tokenizer_config.json", "tokenizer.model", "special_tokens_map.json" };
    vc_status st = VC_OK;
    for (size_t i = 0; !st && i < sizeof FILES / sizeof FILES[0]; i++) {
        char *src = vc_path_join(from_dir, FILES[i]), *dst = vc_path_join(to_dir, FILES[i]), *buf = NULL;
        size_t n = 0;
        if (!src || !dst) st = VC_ERR_NOMEM;
        else if (vc_file_exists(src) && !(st = vc_read_file(src, &buf, &n))) st = vc_write_file_atomic(dst, buf, n);
        free(src);
        free(dst);
        free(buf);
    }
    return st;
}
