/* Checkpoints: an interrupted and resumed run ends bit-identical to an uninterrupted one; rotation;
 * foreign and corrupt checkpoints are clear errors; export of an unmodified model reproduces the
 * input tensors exactly and passes `verlc check`. */
#define _DEFAULT_SOURCE
#include "verlc/check.h"
#include "verlc/rng.h"
#include "verlc/safetensors.h"
#include "verlc/train.h"
#include "vc_test.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NROWS 20
#define BS 4
static int64_t RCU[NROWS + 1];
static int32_t RIDS[NROWS * 16];
static float RMASK[NROWS * 16];

static void make_rows(void) {
    RCU[0] = 0;
    for (int r = 0; r < NROWS; r++) {
        int64_t L = 4 + vc_rng_below(12, 3, r, 0, 0);
        for (int64_t j = 0; j < L; j++) {
            RIDS[RCU[r] + j] = (int32_t)vc_rng_below(256, 3, r, 1, (uint64_t)j);
            RMASK[RCU[r] + j] = j >= 2;
        }
        RCU[r + 1] = RCU[r] + L;
    }
}

static char TMP[256];
static char MODEL[512];

static vc_model *load_model(void) {
    vc_model *m = NULL;
    CHECK_OK(vc_model_load(MODEL, &m));
    return m;
}

static void init_trainer(vc_trainer *t, vc_model *m) {
    vc_trainer_config tc;
    vc_trainer_config_default(&tc);
    tc.micro_bs = 2;
    vc_lr_config lc;
    vc_lr_config_default(&lc);
    lc.lr_scheduler_type = "cosine";
    lc.lr = 1e-2;
    lc.total_training_steps = 6;
    lc.lr_warmup_steps = 2;
    CHECK_OK(vc_lr_schedule_init(&tc.sched, &lc));
    tc.adamw.lr = 1e-2;
    CHECK_OK(vc_trainer_init(t, m, &tc));
}

/* runs steps until t->step == until, drawing batches from the iterator */
static void run_steps(vc_trainer *t, vc_epoch_iter *it, int64_t until) {
    static int64_t cu[BS + 1];
    static int32_t ids[BS * 16];
    static float mask[BS * 16];
    while (t->step < until) {
        const uint32_t *idx;
        size_t n = vc_epoch_iter_next(it, &idx);
        cu[0] = 0;
        for (size_t i = 0; i < n; i++) {
            int64_t a = RCU[idx[i]], L = RCU[idx[i] + 1] - a;
            memcpy(ids + cu[i], RIDS + a, L * 4);
            memcpy(mask + cu[i], RMASK + a, L * 4);
            cu[i + 1] = cu[i] + L;
        }
        vc_minibatch b = { (int)n, cu, ids, mask };
        vc_step_stats st;
        CHECK_OK(vc_trainer_step(t, &b, NULL, NULL, &st));
    }
}

static void fill_state(vc_train_state *s, const vc_epoch_iter *it) {
    memset(s, 0, sizeof *s);
    s->seed = 11;
    s->epoch = it->epoch;
    s->batch = (int64_t)it->batch;
    snprintf(s->model_dir, sizeof s->model_dir, "%s", MODEL);
}

static char *path2(const char *a, const char *b) {
    static char buf[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", a, b);
    return buf[k];
}

static void test_resume(void) {
    make_rows();
    /* uninterrupted: 6 steps (more than one epoch of 5 batches) */
    vc_model *m = load_model();
    vc_trainer t;
    vc_epoch_iter it;
    init_trainer(&t, m);
    CHECK_OK(vc_epoch_iter_init(&it, NROWS, BS, 1, 1, 11));
    run_steps(&t, &it, 6);
    vc_train_state s;
    fill_state(&s, &it);
    char *full = NULL;
    CHECK_OK(vc_train_ckpt_save(path2(TMP, "full"), &t, &s, 0, &full));
    vc_trainer_free(&t);
    vc_model_free(m);
    vc_epoch_iter_free(&it);
    /* interrupted after 3 steps, saved, everything freed, then resumed from the run dir */
    m = load_model();
    init_trainer(&t, m);
    CHECK_OK(vc_epoch_iter_init(&it, NROWS, BS, 1, 1, 11));
    run_steps(&t, &it, 3);
    fill_state(&s, &it);
    s.config_json = "{\"note\": \"test\"}";
    CHECK_OK(vc_train_ckpt_save(path2(TMP, "part"), &t, &s, 2, NULL));
    vc_trainer_free(&t);
    vc_model_free(m);
    vc_epoch_iter_free(&it);

    m = load_model();
    init_trainer(&t, m);
    char *ck = NULL;
    vc_train_state rs;
    CHECK_OK(vc_train_ckpt_resolve(path2(TMP, "part"), &ck));
    CHECK_OK(vc_train_ckpt_load(ck, &t, &rs));
    CHECK(rs.step == 3 && t.step == 3 && t.opt.step == 3 && rs.seed == 11);
    CHECK(rs.config_json && strstr(rs.config_json, "test"));
    CHECK_OK(vc_epoch_iter_init(&it, NROWS, BS, 1, 1, rs.seed));
    vc_epoch_iter_seek(&it, rs.epoch, (size_t)rs.batch);
    vc_train_state_clear(&rs);
    run_steps(&t, &it, 6);
    fill_state(&s, &it);
    char *resumed = NULL;
    CHECK_OK(vc_train_ckpt_save(path2(TMP, "part"), &t, &s, 2, &resumed));
    free(ck);
    /* bit-identical weights and optimiser state */
    const char *files[] = { "model.safetensors", "optim.bin" };
    for (int f = 0; f < 2; f++) {
        char *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        CHECK_OK(vc_read_file(path2(full, files[f]), &a, &na));
        CHECK_OK(vc_read_file(path2(resumed, files[f]), &b, &nb));
        CHECK_MSG(na == nb && a && b && memcmp(a, b, na) == 0, "%s differs after resume", files[f]);
        free(a);
        free(b);
    }
    for (int k = 0; k < 2; k++) {
        t.step++;
        CHECK_OK(vc_train_ckpt_save(path2(TMP, "part"), &t, &s, 2, NULL));
    }
    vc_trainer_free(&t);
    vc_model_free(m);
    vc_epoch_iter_free(&it);
    /* rotation kept the newest two: step_7 and step_8 (step_3 and step_6 removed) */
    CHECK(!vc_file_exists(path2(path2(TMP, "part"), "step_3")));
    CHECK(!vc_file_exists(path2(path2(TMP, "part"), "step_6")));
    CHECK(vc_file_exists(path2(path2(TMP, "part"), "step_8/trainer_state.json")));
    CHECK(vc_file_exists(path2(path2(TMP, "part"), "latest_checkpointed_iteration.txt")));
    char *latest = NULL;
    CHECK_OK(vc_train_ckpt_latest(path2(TMP, "part"), &latest));
    CHECK(latest && strstr(latest, "step_8"));
    free(latest);
    free(full);
    free(resumed);
}

static void write_text(const char *path, const char *text) {
    CHECK_OK(vc_write_file_atomic(path, text, strlen(text)));
}

static void test_corrupt(void) {
    char dir[1024], cmd[2048];
    snprintf(dir, sizeof dir, "%s/bad", TMP);
    snprintf(cmd, sizeof cmd, "cp -r %s/full/step_6 %s", TMP, dir);
    CHECK(system(cmd) == 0);
    vc_model *m = load_model();
    vc_trainer t;
    vc_train_state s;
    init_trainer(&t, m);
    /* truncated weights */
    char *w = NULL;
    size_t n;
    CHECK_OK(vc_read_file(path2(dir, "model.safetensors"), &w, &n));
    CHECK_OK(vc_write_file_atomic(path2(dir, "model.safetensors"), w, n / 2));
    vc_status st = vc_train_ckpt_load(dir, &t, &s);
    CHECK(st == VC_ERR_FORMAT || st == VC_ERR_IO);
    vc_train_state_clear(&s);
    CHECK_OK(vc_write_file_atomic(path2(dir, "model.safetensors"), w, n));
    free(w);
    /* truncated optimiser state */
    CHECK_OK(vc_read_file(path2(dir, "optim.bin"), &w, &n));
    CHECK_OK(vc_write_file_atomic(path2(dir, "optim.bin"), w, n - 5));
    st = vc_train_ckpt_load(dir, &t, &s);
    CHECK_MSG(st != VC_OK && strstr(vc_last_error(), "optim.bin"), "truncated optim.bin: %s", vc_last_error());
    vc_train_state_clear(&s);
    free(w);
    /* foreign state file */
    write_text(path2(dir, "trainer_state.json"), "{\"format\": \"something-else\", \"step\": 1}");
    CHECK(vc_train_ckpt_load(dir, &t, &s) == VC_ERR_FORMAT);
    CHECK(strstr(vc_last_error(), "not a verlc training checkpoint") != NULL);
    vc_train_state_clear(&s);
    write_text(path2(dir, "trainer_state.json"), "{not json");
    CHECK(vc_train_ckpt_read_state(dir, &s) == VC_ERR_FORMAT);
    vc_train_state_clear(&s);
    /* a directory that is no checkpoint at all */
    char *p = NULL;
    CHECK(vc_train_ckpt_resolve(TMP, &p) == VC_ERR_MISSING);
    free(p);
    vc_trainer_free(&t);
    vc_model_free(m);
    /* weights of another model */
    char llama[512];
    snprintf(llama, sizeof llama, "%s/fixtures/models/llama", vc_test_shared());
    CHECK_OK(vc_model_load(llama, &m));
    st = vc_train_ckpt_load_weights(path2(TMP, "full/step_6"), m);
    CHECK_MSG(st == VC_ERR_SHAPE || st == VC_ERR_MISSING, "foreign weights: %s", vc_last_error());
    vc_model_free(m);
}

/* export of a step-0 checkpoint reproduces the base tensors byte for byte */
static void export_same(const char *fixture, const char *name) {
    char base[512], run[1024], out[1024];
    snprintf(base, sizeof base, "%s/fixtures/models/%s", vc_test_shared(), fixture);
    snprintf(run, sizeof run, "%s/exp_%s", TMP, name);
    snprintf(out, sizeof out, "%s/hf_%s", TMP, name);
    vc_model *m = NULL;
    CHECK_OK(vc_model_load(base, &m));
    vc_trainer t;
    vc_trainer_config tc;
    vc_trainer_config_default(&tc);
    CHECK_OK(vc_trainer_init(&t, m, &tc));
    vc_train_state s;
    memset(&s, 0, sizeof s);
    snprintf(s.model_dir, sizeof s.model_dir, "%s", base);
    CHECK_OK(vc_train_ckpt_save(run, &t, &s, 0, NULL));
    vc_trainer_free(&t);
    vc_model_free(m);
    CHECK_OK(vc_train_export(run, out, -1));
    vc_checkpoint *a = NULL, *b = NULL;
    CHECK_OK(vc_ckpt_open(base, &a));
    CHECK_OK(vc_ckpt_open(out, &b));
    if (!a || !b) return;
    CHECK(vc_ckpt_count(a) == vc_ckpt_count(b));
    int same = 0;
    for (int i = 0; i < vc_ckpt_count(a); i++) {
        const vc_st_tensor *x = vc_ckpt_at(a, i), *y = vc_ckpt_find(b, x->name);
        same += y && x->dtype == y->dtype && x->nbytes == y->nbytes && !memcmp(x->data, y->data, x->nbytes);
    }
    CHECK_MSG(same == vc_ckpt_count(a), "%s: %d/%d tensors identical after export", fixture, same, vc_ckpt_count(a));
    vc_ckpt_close(a);
    vc_ckpt_close(b);
    /* with the fixture's reference outputs next to it, `verlc check` passes on the export */
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cp %s/reference.json %s/reference.safetensors %s/", base, base, out);
    CHECK(system(cmd) == 0);
    vc_check_result r;
    CHECK_OK(vc_check_model(out, &r));
    CHECK_MSG(r.ok && r.has_reference, "%s: verlc check fails on the export", fixture);
}

int main(void) {
    snprintf(TMP, sizeof TMP, "/tmp/verlc_test_ckpt_%d", (int)getpid());
    snprintf(MODEL, sizeof MODEL, "%s/fixtures/models/qwen3", vc_test_shared());
    char cmd[512];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", TMP);
    CHECK(system(cmd) == 0);
    test_resume();
    test_corrupt();
    export_same("qwen3", "qwen3");
    export_same("qwen3_bf16", "bf16");
    export_same("llama", "llama");
    snprintf(cmd, sizeof cmd, "rm -rf %s", TMP);
    CHECK(system(cmd) == 0);
    return vc_test_done();
}
