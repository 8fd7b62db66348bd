/* Checkpoints with exact resume in verl's layout, written by the training core (train.h):
 *   DIR/global_step_N/actor/      the actor's vc_train checkpoint (f32 weights, AdamW state, trainer_state.json)
 *   DIR/global_step_N/critic/     the critic's, plus value_head.bin (critic runs only)
 *   DIR/global_step_N/rl_state.json   the RL loop's state: global step, data cursor, KL controller, seed
 *   DIR/latest_checkpointed_iteration.txt  N
 * The step directory is filled under DIR/.tmp_global_step_N and renamed (vc_train_ckpt_save_as), and
 * only the newest trainer.max_actor_ckpt_to_keep are kept. f32 weights and optimiser moments, the data
 * iterator's (epoch, batch) and the counter-based random streams (keyed by seed and step) make a
 * resumed run continue bit-identically. */
#define _XOPEN_SOURCE 700
#include "trainer_internal.h"
#include "verlc/json.h"
#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *step_dir(const char *out, int64_t step) {
    char name[64];
    snprintf(name, sizeof name, "global_step_%lld", (long long)step);
    return vc_path_join(out, name);
}

static vc_status write_rl_state(vc_rl_trainer *t, const char *dir) {
    cJSON *j = cJSON_CreateObject();
    if (!j) return VC_ERR_NOMEM;
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)t->seed);
    cJSON_AddStringToObject(j, "format", "verlc-rl-state-1");
    cJSON_AddNumberToObject(j, "global_step", (double)t->step);
    cJSON_AddNumberToObject(j, "epoch", (double)t->it.epoch);
    cJSON_AddNumberToObject(j, "batch", (double)t->it.batch);
    cJSON_AddNumberToObject(j, "kl_ctrl_value", t->kl_ctrl.value);
    cJSON_AddStringToObject(j, "seed", seed);
    cJSON_AddStringToObject(j, "rng", "philox4x32-10 keyed by (data.seed, global step)");
    char *text = vc_json_print(j, 1), *path = vc_path_join(dir, "rl_state.json");
    vc_status st = text && path ? vc_write_file_atomic(path, text, strlen(text)) : VC_ERR_NOMEM;
    free(text);
    free(path);
    cJSON_Delete(j);
    return st;
}

/* one trainer's checkpoint in dir/name */
static vc_status save_one(vc_rl_trainer *t, const char *dir, const char *name, const vc_trainer *tr, const char *base,
                          char **sub) {
    vc_train_state s;
    memset(&s, 0, sizeof s);
    s.epoch = (int64_t)t->it.epoch;
    s.batch = (int64_t)t->it.batch;
    s.seed = t->seed;
    if (!realpath(base, s.model_dir)) snprintf(s.model_dir, sizeof s.model_dir, "%s", base);
    *sub = vc_path_join(dir, name);
    if (!*sub) return VC_ERR_NOMEM;
    if (mkdir(*sub, 0755) && !vc_file_exists(*sub)) return vc_fail(VC_ERR_IO, "%s: cannot create directory", *sub);
    return vc_train_ckpt_write(*sub, tr, &s);
}

/* actor.checkpoint.save_contents with "hf_model" (verl's key): the actor also as a Hugging Face directory
 * in the checkpoint, global_step_N/actor/huggingface (merged weights, tokenizer files) */
static vc_status save_hf_contents(vc_rl_trainer *t, const char *actor) {
    size_t n = 0;
    int want = 0;
    const char *K = "actor_rollout_ref.actor.checkpoint.save_contents", *v = NULL;
    if (vc_config_has(t->cfg, K) && vc_config_list_len(t->cfg, K, &n)) n = 0;
    for (size_t i = 0; i < n; i++)
        if (!vc_config_list_str(t->cfg, K, i, &v) && v && !strcmp(v, "hf_model")) want = 1;
    if (!want) return VC_OK;
    char *hf = vc_path_join(actor, "huggingface");
    vc_status st = hf ? rl_export_hf(t, hf) : VC_ERR_NOMEM;
    if (!st) st = rl_copy_tokenizer_files(t->model_path, hf);
    free(hf);
    return st;
}

static vc_status fill_step(void *ctx, const char *dir) {
    vc_rl_trainer *t = ctx;
    char *actor = NULL, *critic = NULL;
    vc_status st = save_one(t, dir, "actor", &t->atr, t->model_path, &actor);
    if (!st) st = save_hf_contents(t, actor);
    if (!st && t->use_critic) {
        const char *cp = t->model_path;
        st = vc_config_get_str_or(t->cfg, "critic.model.path", t->model_path, &cp);
        if (!st) st = save_one(t, dir, "critic", &t->ctr, cp, &critic);
        char *p = st ? NULL : vc_path_join(critic, "value_head.bin");
        int64_t H = vc_cfg_out_hidden(vc_model_cfg(t->critic.m));
        vc_tensor whole; /* the value head [H + 1] lives in backend memory: one host copy */
        vc_param_init(&whole, t->critic.w, NULL, 1, (int64_t[]){ H + 1 });
        float *hw = NULL;
        if (!st && !p) st = VC_ERR_NOMEM;
        if (!st) st = vc_train_param_host(&whole, &hw);
        if (!st) st = vc_write_file_atomic(p, hw, sizeof(float) * (size_t)(H + 1));
        free(hw);
        free(p);
    }
    if (!st) st = write_rl_state(t, dir);
    free(actor);
    free(critic);
    return st;
}

static vc_status fill_sharded(void *ctx, const char *dir) { return rl_dist_fill_sharded(ctx, dir, fill_step); }

vc_status rl_ckpt_save(vc_rl_trainer *t) {
    char *path = NULL;
    int keep = t->max_ckpt_keep > 0 && t->max_ckpt_keep < INT_MAX ? (int)t->max_ckpt_keep : 0;
    /* plain data parallelism: every rank holds the same weights and optimiser state, so rank 0 writes the
     * whole checkpoint and every rank learns whether it worked (a collective) */
    vc_status st;
    if (rl_dist_sharded(t)) /* scale-out hook: ZeRO-1, every rank writes its optimiser shards (collective) */
        st = vc_train_ckpt_save_as_dp(t->out_dir, "global_step_", t->step, &t->atr, fill_sharded, t, keep, &path);
    else
        st = t->rank == 0 ? vc_train_ckpt_save_as(t->out_dir, "global_step_", t->step, fill_step, t, keep, &path)
                          : VC_OK;
    st = rl_dist_agree(t, st, "checkpoint");
    if (!st && t->verbose) printf("checkpoint saved to %s\n", path);
    free(path);
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

static vc_status load_critic(vc_rl_trainer *t, const char *dir) {
    char *cdir = vc_path_join(dir, "critic"), *p = cdir ? vc_path_join(cdir, "value_head.bin") : NULL, *buf = NULL;
    size_t n = 0;
    int64_t H = vc_cfg_out_hidden(vc_model_cfg(t->critic.m));
    vc_train_state s;
    memset(&s, 0, sizeof s);
    vc_status st = p ? vc_train_ckpt_load(cdir, &t->ctr, &s) : VC_ERR_NOMEM;
    if (!st) st = vc_read_file(p, &buf, &n);
    if (!st && n != sizeof(float) * (size_t)(H + 1))
        st = vc_fail(VC_ERR_SHAPE, "%s: %zu bytes, expected %zu", p, n, sizeof(float) * (size_t)(H + 1));
    vc_tensor whole;
    vc_param_init(&whole, t->critic.w, NULL, 1, (int64_t[]){ H + 1 });
    if (!st) st = vc_train_param_write(&whole, (const float *)buf);
    vc_train_state_clear(&s);
    free(buf);
    free(p);
    free(cdir);
    return st;
}

vc_status rl_ckpt_load_state(vc_rl_trainer *t, const char *dir) {
    char *sp = vc_path_join(dir, "rl_state.json"), *actor = vc_path_join(dir, "actor");
    cJSON *j = NULL;
    vc_status st = sp && actor ? vc_json_load_file(sp, &j) : VC_ERR_NOMEM;
    int64_t step = 0, epoch = 0, batch = 0;
    double klv = t->kl_ctrl.value;
    if (!st) st = vc_json_req_int(j, "global_step", &step, sp);
    if (!st) st = vc_json_req_int(j, "epoch", &epoch, sp);
    if (!st) st = vc_json_req_int(j, "batch", &batch, sp);
    if (!st) st = vc_json_get_num(j, "kl_ctrl_value", klv, &klv, sp);
    if (!st && (step < 0 || epoch < 0 || batch < 0)) st = vc_fail(VC_ERR_FORMAT, "%s: negative step, epoch or batch", sp);
    vc_train_state s;
    memset(&s, 0, sizeof s);
    if (!st) st = vc_train_ckpt_load(actor, &t->atr, &s);
    vc_train_state_clear(&s);
    if (!st && t->use_critic) st = load_critic(t, dir);
    if (!st) {
        t->step = step;
        vc_epoch_iter_seek(&t->it, epoch, (size_t)batch);
        t->kl_ctrl.value = klv;
        if (t->verbose) printf("resumed from %s (step %lld)\n", dir, (long long)step);
    }
    cJSON_Delete(j);
    free(sp);
    free(actor);
    return st ? vc_fail_ctx(st, "resume from %s", dir) : VC_OK;
}

/* the actor as a Hugging Face directory (under LoRA: merged weights plus DIR/lora_adapter) */
vc_status rl_export_hf(vc_rl_trainer *t, const char *dir) {
    vc_status st = vc_model_save_hf_merged(t->actor, dir, VC_F32);
    return st ? vc_fail_ctx(st, "export to %s", dir) : VC_OK;
}

vc_status rl_copy_tokenizer_files(const char *from_dir, const char *to_dir) {
    return vc_model_copy_side_files(from_dir, to_dir, 1);
}
