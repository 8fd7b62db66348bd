/* Training checkpoints: RUN_DIR/step_N/{model.safetensors (internal names, f32), optim.bin (or with
 * ZeRO-1 optim_shard_R_of_N.bin from every rank), trainer_state.json, run_config.json,
 * model_config.json}, written atomically and rotated. With data parallelism saving and loading are
 * collectives: rank 0 prepares and publishes the directory, every rank learns whether any rank failed. */
#define _XOPEN_SOURCE 700
#include "trainer_dp.h"
#include "verlc/json.h"
#include "verlc/safetensors.h"
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void vc_train_state_clear(vc_train_state *s) {
    free(s->config_json);
    memset(s, 0, sizeof *s);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)flag; (void)ftw;
    return remove(path);
}

static vc_status rm_tree(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return VC_OK;
    if (nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0) return vc_fail(VC_ERR_IO, "%s: cannot remove", path);
    return VC_OK;
}

static vc_status fsync_dir(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return vc_fail(VC_ERR_IO, "%s: cannot open directory", path);
    int rc = fsync(fd);
    close(fd);
    return rc == 0 || errno == EINVAL ? VC_OK : vc_fail(VC_ERR_IO, "%s: fsync failed", path);
}

/* bytes [offset, offset + nbytes) of parameter i, f32, from backend memory (the writer asks piece by piece) */
static vc_status weight_fill(void *m, int64_t i, size_t offset, void *dst, size_t nbytes) {
    return vc_model_param_read_range(m, (int)i, offset / sizeof(float), nbytes / sizeof(float), dst);
}

static vc_status write_weights(const vc_model *mc, const char *path) {
    vc_model *m = (vc_model *)mc; /* vc_model_param is not const; nothing is modified */
    vc_st_writer *w = NULL;
    vc_status st = vc_st_writer_new(&w);
    for (int i = 0; i < vc_model_n_params(m) && !st; i++) { /* read as the file is written, piece by piece */
        const char *name;
        vc_tensor *t = vc_model_param(m, i, &name, NULL);
        st = vc_st_writer_add_lazy(w, name, VC_F32, t->ndim, t->shape, weight_fill, m, i);
    }
    if (!st) st = vc_st_writer_set_metadata(w, "format", VC_TRAIN_CKPT_FORMAT);
    if (!st) st = vc_st_writer_write(w, path);
    vc_st_writer_free(w);
    return st;
}

/* the optimiser state streamed to path (vc_adamw_state_save's bytes, a few MiB in host memory at a time) */
static vc_status write_optim(const vc_adamw *opt, const char *path) {
    vc_afile *f;
    vc_status st = vc_afile_open(path, &f);
    if (!st) st = vc_adamw_state_stream(opt, vc_put_afile, f);
    if (st) {
        vc_afile_abort(f);
        return st;
    }
    return vc_afile_commit(f);
}

static vc_status write_text(const char *dir, const char *name, const char *text) {
    char *p = vc_path_join(dir, name);
    if (!p) return VC_ERR_NOMEM;
    vc_status st = vc_write_file_atomic(p, text, strlen(text));
    free(p);
    return st;
}

static vc_status write_state(const char *dir, const vc_trainer *t, const vc_train_state *s) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "format", VC_TRAIN_CKPT_FORMAT);
    cJSON_AddNumberToObject(o, "step", (double)t->step);
    cJSON_AddNumberToObject(o, "optimizer_steps", (double)t->opt.step);
    cJSON_AddNumberToObject(o, "skipped_steps", (double)t->n_skipped);
    cJSON_AddNumberToObject(o, "epoch", (double)s->epoch);
    cJSON_AddNumberToObject(o, "batch", (double)s->batch);
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)s->seed);
    cJSON_AddStringToObject(o, "seed", seed);
    cJSON_AddStringToObject(o, "rng", "philox4x32-10 (counter-based: state = seed, step)");
    cJSON_AddStringToObject(o, "model_dir", s->model_dir);
    cJSON_AddStringToObject(o, "tokenizer_dir", s->tokenizer_dir);
    cJSON_AddNumberToObject(o, "world_size", t->world > 0 ? t->world : 1);
    cJSON_AddStringToObject(o, "sharding", t->dp && t->dp->zero1 ? "zero1" : "none");
    char *text = vc_json_print(o, 1);
    cJSON_Delete(o);
    if (!text) return vc_fail(VC_ERR_NOMEM, "checkpoint state: out of memory");
    vc_status st = write_text(dir, "trainer_state.json", text);
    free(text);
    return st;
}

static vc_status copy_file(const char *src, const char *dst) {
    char *buf = NULL;
    size_t n = 0;
    vc_status st = vc_read_file(src, &buf, &n);
    if (!st) st = vc_write_file_atomic(dst, buf, n);
    free(buf);
    return st;
}

/* LoRA runs: the adapters in DIR/lora_adapter (PEFT's format), beside the frozen base weights */
static vc_status lora_io(const char *dir, vc_model *m, int save) {
    if (!vc_model_has_lora(m)) return VC_OK;
    char *p = vc_path_join(dir, "lora_adapter");
    vc_status st = p ? VC_OK : VC_ERR_NOMEM;
    if (!st && save && mkdir(p, 0755) != 0 && errno != EEXIST) st = vc_fail(VC_ERR_IO, "%s: cannot create", p);
    if (!st) st = save ? vc_model_lora_save(m, p) : vc_model_lora_load(m, p);
    free(p);
    return st;
}

static vc_status write_contents(const char *tmp, const vc_trainer *t, const vc_train_state *s) {
    char *p = vc_path_join(tmp, "model.safetensors");
    vc_status st = p ? write_weights(t->model, p) : VC_ERR_NOMEM;
    free(p);
    if (!st) st = lora_io(tmp, t->model, 1);
    if (st) return st;
    if (vc_trainer_sharded(t)) goto rest; /* every rank writes its shard (vc_dp_save_optim) */
    p = vc_path_join(tmp, "optim.bin");
    st = p ? write_optim(&t->opt, p) : VC_ERR_NOMEM;
    free(p);
rest:
    if (!st) st = write_state(tmp, t, s);
    if (!st && s->config_json) st = write_text(tmp, "run_config.json", s->config_json);
    char *src = s->model_dir[0] ? vc_path_join(s->model_dir, "config.json") : NULL;
    if (!st && src && vc_file_exists(src)) {
        char *dst = vc_path_join(tmp, "model_config.json");
        st = dst ? copy_file(src, dst) : VC_ERR_NOMEM;
        free(dst);
    }
    free(src);
    return st;
}

vc_status vc_train_ckpt_write(const char *dir, const vc_trainer *t, const vc_train_state *s) {
    return write_contents(dir, t, s);
}

/* step numbers of the <prefix>N directories of run_dir, ascending */
static vc_status list_steps_of(const char *run_dir, const char *prefix, int64_t **steps, size_t *n) {
    *steps = NULL;
    *n = 0;
    DIR *d = opendir(run_dir);
    if (!d) return vc_fail(VC_ERR_IO, "%s: cannot open directory", run_dir);
    size_t cap = 0;
    struct dirent *e;
    vc_status st = VC_OK;
    while ((e = readdir(d))) {
        char *end;
        size_t pl = strlen(prefix);
        if (strncmp(e->d_name, prefix, pl)) continue;
        long long v = strtoll(e->d_name + pl, &end, 10);
        if (end == e->d_name + pl || *end || v < 0) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            int64_t *g = realloc(*steps, cap * sizeof **steps);
            if (!g) { st = vc_fail(VC_ERR_NOMEM, "out of memory"); break; }
            *steps = g;
        }
        (*steps)[(*n)++] = v;
    }
    closedir(d);
    for (size_t i = 1; i < *n; i++)
        for (size_t j = i; j > 0 && (*steps)[j - 1] > (*steps)[j]; j--) {
            int64_t x = (*steps)[j]; (*steps)[j] = (*steps)[j - 1]; (*steps)[j - 1] = x;
        }
    return st;
}

static vc_status list_steps(const char *run_dir, int64_t **steps, size_t *n) {
    return list_steps_of(run_dir, "step_", steps, n);
}

static char *step_path(const char *run_dir, const char *prefix, int64_t step) {
    size_t n = strlen(run_dir) + strlen(prefix) + 32;
    char *p = vc_malloc(n);
    if (p) snprintf(p, n, "%s/%s%lld", run_dir, prefix, (long long)step);
    return p;
}

static vc_status rotate(const char *run_dir, const char *prefix, int keep_last) {
    int64_t *steps;
    size_t n;
    vc_status st = list_steps_of(run_dir, prefix, &steps, &n);
    for (size_t i = 0; !st && keep_last > 0 && i + (size_t)keep_last < n; i++) {
        char *p = step_path(run_dir, prefix, steps[i]);
        st = p ? rm_tree(p) : VC_ERR_NOMEM;
        free(p);
    }
    free(steps);
    return st;
}

/* Every rank learns whether any rank failed; the ranks that did not fail say so. One rank: st. */
static vc_status agree(const vc_trainer *t, vc_status st, const char *what) {
    if (!t || !t->dp) return st;
    double bad = st ? 1 : 0;
    vc_status cs = vc_comm_allreduce_f64(t->dp->comm, &bad, 1, VC_MAX);
    if (st || cs) return st ? st : cs;
    return bad ? vc_fail(VC_ERR_IO, "rank %d: %s: another rank failed (see its message)", t->rank, what) : VC_OK;
}

/* Rank 0: moves the finished tmp dir to fin, updates the latest marker, rotates. */
static vc_status publish(const char *run_dir, const char *prefix, const char *tmp, const char *fin, const char *old,
                         int64_t step, int keep_last) {
    vc_status st;
    if ((st = fsync_dir(tmp))) return st;
    /* an existing <prefix>N (a re-run of the same step) is moved aside first: rename cannot replace a folder */
    if (vc_file_exists(fin) && ((st = rm_tree(old)) || rename(fin, old) != 0))
        return st ? st : vc_fail(VC_ERR_IO, "%s: cannot move aside", fin);
    if (rename(tmp, fin) != 0) return vc_fail(VC_ERR_IO, "%s: cannot rename to %s", tmp, fin);
    rm_tree(old);
    if ((st = fsync_dir(run_dir))) return st;
    char num[32];
    snprintf(num, sizeof num, "%lld\n", (long long)step);
    if ((st = write_text(run_dir, "latest_checkpointed_iteration.txt", num))) return st;
    return rotate(run_dir, prefix, keep_last);
}

/* Writes run_dir/<prefix>N atomically: rank 0 makes a temporary folder, `fill` runs on every rank
 * (each writes what it owns), rank 0 renames it into place. t == NULL: a single process. */
static vc_status save_dir(const char *run_dir, const char *prefix, int64_t step, const vc_trainer *t,
                          vc_status (*fill)(void *ctx, const char *tmp_dir), void *ctx, int keep_last, char **path) {
    int r0 = !t || t->rank == 0;
    char tp[64], op[64];
    snprintf(tp, sizeof tp, ".tmp_%s", prefix);
    snprintf(op, sizeof op, ".old_%s", prefix);
    char *tmp = step_path(run_dir, tp, step), *fin = step_path(run_dir, prefix, step);
    char *old = step_path(run_dir, op, step);
    vc_status st = tmp && fin && old ? VC_OK : VC_ERR_NOMEM;
    if (!st && r0 && mkdir(run_dir, 0755) != 0 && errno != EEXIST) st = vc_fail(VC_ERR_IO, "%s: cannot create", run_dir);
    if (!st && r0) st = rm_tree(tmp);
    if (!st && r0 && mkdir(tmp, 0755) != 0) st = vc_fail(VC_ERR_IO, "%s: cannot create", tmp);
    st = agree(t, st, "checkpoint");
    if (st) goto out;
    st = agree(t, fill(ctx, tmp), "checkpoint");
    if (st) {
        vc_fail_ctx(st, "checkpoint %s", fin ? fin : run_dir);
        if (r0) rm_tree(tmp);
        goto out;
    }
    if (r0) st = publish(run_dir, prefix, tmp, fin, old, step, keep_last);
    st = agree(t, st, "checkpoint");
    if (!st && path) {
        *path = fin;
        fin = NULL;
    }
out:
    free(tmp);
    free(fin);
    free(old);
    return st;
}

typedef struct save_ctx {
    const vc_trainer *t;
    const vc_train_state *s;
} save_ctx;

/* rank 0 writes weights, shared optimiser state and the state files; with ZeRO-1 every rank its shard */
static vc_status fill_trainer(void *ctx, const char *tmp) {
    const save_ctx *c = ctx;
    vc_status st = c->t->rank == 0 ? write_contents(tmp, c->t, c->s) : VC_OK;
    return st ? st : vc_dp_save_optim(tmp, c->t);
}

/* save_dir on every rank of t; ZeRO-3 writes from gathered full weights */
static vc_status save_dir_dp(const char *run_dir, const char *prefix, int64_t step, const vc_trainer *t,
                             vc_status (*fill)(void *ctx, const char *tmp_dir), void *ctx, int keep_last, char **path) {
    vc_trainer *tw = (vc_trainer *)t; /* the weights are gathered and released, not changed */
    vc_status st = agree(t, vc_trainer_full_weights(tw, 1), "checkpoint");
    if (!st) st = save_dir(run_dir, prefix, step, t, fill, ctx, keep_last, path);
    vc_status e = vc_trainer_full_weights(tw, 0);
    return st ? st : e;
}

vc_status vc_train_ckpt_save(const char *run_dir, const vc_trainer *t, const vc_train_state *s, int keep_last,
                             char **path) {
    save_ctx c = { t, s };
    return save_dir_dp(run_dir, "step_", t->step, t, fill_trainer, &c, keep_last, path);
}

vc_status vc_train_ckpt_save_as(const char *run_dir, const char *prefix, int64_t step,
                                vc_status (*fill)(void *ctx, const char *tmp_dir), void *ctx, int keep_last,
                                char **path) {
    return save_dir(run_dir, prefix, step, NULL, fill, ctx, keep_last, path);
}

/* data-parallel hook (scale-out): save_dir with the trainer's communicator, for sharded RL checkpoints */
vc_status vc_train_ckpt_save_as_dp(const char *run_dir, const char *prefix, int64_t step, const vc_trainer *t,
                                   vc_status (*fill)(void *ctx, const char *tmp_dir), void *ctx, int keep_last,
                                   char **path) {
    return save_dir_dp(run_dir, prefix, step, t, fill, ctx, keep_last, path);
}

static int is_ckpt(const char *dir) {
    char *p = vc_path_join(dir, "trainer_state.json");
    int ok = p && vc_file_exists(p);
    free(p);
    return ok;
}

vc_status vc_train_ckpt_latest(const char *run_dir, char **path) {
    int64_t *steps;
    size_t n;
    *path = NULL;
    vc_status st = list_steps(run_dir, &steps, &n);
    for (size_t i = n; !st && i-- > 0;) {
        char *p = step_path(run_dir, "step_", steps[i]);
        if (p && is_ckpt(p)) {
            *path = p;
            break;
        }
        free(p);
    }
    free(steps);
    if (!st && !*path) st = vc_fail(VC_ERR_MISSING, "%s: no checkpoint (step_N/trainer_state.json)", run_dir);
    return st;
}

vc_status vc_train_ckpt_resolve(const char *path, char **ckpt_dir) {
    if (is_ckpt(path)) {
        *ckpt_dir = vc_strdup(path);
        return *ckpt_dir ? VC_OK : VC_ERR_NOMEM;
    }
    return vc_train_ckpt_latest(path, ckpt_dir);
}

static int64_t num_field(const cJSON *o, const char *key, int *ok) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v)) {
        *ok = 0;
        return 0;
    }
    return (int64_t)v->valuedouble;
}

static void str_field(const cJSON *o, const char *key, char *dst, size_t cap) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    dst[0] = 0;
    if (cJSON_IsString(v)) snprintf(dst, cap, "%s", v->valuestring);
}

vc_status vc_train_ckpt_read_state(const char *ckpt_dir, vc_train_state *s) {
    memset(s, 0, sizeof *s);
    char *p = vc_path_join(ckpt_dir, "trainer_state.json"), *text = NULL;
    size_t n;
    vc_status st = p ? vc_read_file(p, &text, &n) : VC_ERR_NOMEM;
    cJSON *o = NULL;
    if (st) {
        st = vc_fail(st, "%s: not a verlc training checkpoint (no readable trainer_state.json)", ckpt_dir);
        goto out;
    }
    o = cJSON_Parse(text);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(o, "format");
    if (!cJSON_IsObject(o) || !cJSON_IsString(fmt) || strcmp(fmt->valuestring, VC_TRAIN_CKPT_FORMAT)) {
        st = vc_fail(VC_ERR_FORMAT, "%s: not a verlc training checkpoint (format is not \"%s\")", p,
                     VC_TRAIN_CKPT_FORMAT);
        goto out;
    }
    int ok = 1;
    s->step = num_field(o, "step", &ok);
    s->n_skipped = num_field(o, "skipped_steps", &ok);
    s->epoch = num_field(o, "epoch", &ok);
    s->batch = num_field(o, "batch", &ok);
    const cJSON *seed = cJSON_GetObjectItemCaseSensitive(o, "seed");
    if (!ok || !cJSON_IsString(seed) || s->step < 0 || s->epoch < 0 || s->batch < 0) {
        st = vc_fail(VC_ERR_FORMAT, "%s: missing or invalid step/epoch/batch/seed", p);
        goto out;
    }
    s->seed = strtoull(seed->valuestring, NULL, 10);
    str_field(o, "model_dir", s->model_dir, sizeof s->model_dir);
    str_field(o, "tokenizer_dir", s->tokenizer_dir, sizeof s->tokenizer_dir);
    char *cp = vc_path_join(ckpt_dir, "run_config.json");
    if (cp && vc_file_exists(cp)) st = vc_read_file(cp, &s->config_json, &n);
    free(cp);
out:
    cJSON_Delete(o);
    free(text);
    free(p);
    return st;
}

/* checkpoint tensor -> host floats -> the parameter's backend memory */
static vc_status load_param(const vc_st_tensor *s, vc_model *m, int i, const char *path, const char *name) {
    int64_t n = vc_model_param(m, i, NULL, NULL)->n;
    float *host = vc_malloc(sizeof(float) * (size_t)(n ? n : 1));
    if (!host) return vc_fail(VC_ERR_NOMEM, "%s: cannot stage tensor %s", path, name);
    vc_st_tensor_to_f32(s, host);
    vc_status st = vc_model_param_write(m, i, host);
    free(host);
    return st ? vc_fail_ctx(st, "%s: tensor %s", path, name) : VC_OK;
}

vc_status vc_train_ckpt_load_weights(const char *ckpt_dir, vc_model *m) {
    char *p = vc_path_join(ckpt_dir, "model.safetensors");
    vc_checkpoint *ck = NULL;
    vc_status st = p ? vc_ckpt_open(p, &ck) : VC_ERR_NOMEM;
    if (st) goto out;
    const char *fmt = vc_ckpt_metadata(ck, "format");
    if (!fmt || strcmp(fmt, VC_TRAIN_CKPT_FORMAT)) {
        st = vc_fail(VC_ERR_FORMAT, "%s: not verlc training weights (metadata format is not \"%s\")", p,
                     VC_TRAIN_CKPT_FORMAT);
        goto out;
    }
    int np = vc_model_n_params(m);
    if (vc_ckpt_count(ck) != np) {
        st = vc_fail(VC_ERR_SHAPE, "%s: %d tensors, the model has %d parameters (a checkpoint of another model?)", p,
                     vc_ckpt_count(ck), np);
        goto out;
    }
    for (int i = 0; i < np && !st; i++) {
        const char *name;
        vc_tensor *t = vc_model_param(m, i, &name, NULL);
        const vc_st_tensor *s = vc_ckpt_find(ck, name);
        int same = s && s->dtype == VC_F32 && s->ndim == t->ndim;
        for (int d = 0; same && d < t->ndim; d++) same = s->shape[d] == t->shape[d];
        if (!same)
            st = vc_fail(s ? VC_ERR_SHAPE : VC_ERR_MISSING, "%s: tensor %s %s (a checkpoint of another model?)", p,
                         name, s ? "has another dtype or shape than the model's" : "is missing");
        else
            st = load_param(s, m, i, p, name);
    }
    if (!st) st = lora_io(ckpt_dir, m, 0);
out:
    vc_ckpt_close(ck);
    free(p);
    return st;
}

vc_status vc_train_ckpt_load(const char *ckpt_dir, vc_trainer *t, vc_train_state *s) {
    /* ZeRO-3: the weights load into full buffers; releasing them keeps this rank's block as its master */
    vc_status st = agree(t, vc_trainer_full_weights(t, 1), "resume");
    if (st) return st;
    st = vc_train_ckpt_read_state(ckpt_dir, s);
    if (!st) st = vc_train_ckpt_load_weights(ckpt_dir, t->model);
    /* this rank's range (the whole state on one rank), from optim.bin or the shards of any number of ranks */
    if (!st) st = vc_dp_load_optim(ckpt_dir, t);
    st = agree(t, st, "resume");
    vc_status e = vc_trainer_full_weights(t, 0);
    if (!st) st = e;
    if (!st) {
        t->step = s->step;
        t->n_skipped = s->n_skipped;
    }
    return st;
}
