/* Driver of tools/fuzz/diff_actor.py: one actor update of verlc's RL trainer (its settings read from verl's keys as
 * the trainer reads them, rl_update_actor as the trainer calls it) on a batch given in a file, then the update's
 * metrics on stdout ("name value" lines) and the updated weights as a Hugging Face checkpoint in OUT_DIR (f32).
 *
 * usage: actor_drv MODEL_DIR BATCH_FILE OUT_DIR [key=value ...]
 * BATCH_FILE: "B T on_policy", then per row "plen rlen", its prompt ids, its response ids, then rlen values each of
 * the response mask, the advantages, the old and the reference log-probs (C hex floats, as Python's float.hex()). */
#include "../../src/rl/trainer_internal.h"
#include "verlc/config.h"
#include "verlc/model.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what, vc_status st) {
    fprintf(stderr, "actor_drv: %s: %s\n", what, st ? vc_last_error() : "bad batch file");
    exit(2);
}

static int read_ids(FILE *f, int32_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (fscanf(f, "%d", &dst[i]) != 1) return 0;
    return 1;
}

static int read_vals(FILE *f, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        double v;
        if (fscanf(f, "%la", &v) != 1) return 0;
        dst[i] = (float)v;
    }
    return 1;
}

/* the batch file into b (*on_policy: whether the update takes its own log-probs as the old ones) */
static void read_batch(const char *path, rl_batch *b, int *on_policy) {
    FILE *f = fopen(path, "r");
    int B, T;
    if (!f || fscanf(f, "%d %d %d", &B, &T, on_policy) != 3 || B < 1 || T < 1) die(path, VC_OK);
    long pos = ftell(f);
    int64_t total = 0, pl, rl;
    for (int i = 0; i < B; i++) { /* a first pass for the token count */
        if (fscanf(f, "%ld %ld", &pl, &rl) != 2 || pl < 1 || rl < 1 || rl > T) die(path, VC_OK);
        total += pl + rl;
        int32_t skip;
        float sk;
        for (int64_t j = 0; j < pl + rl; j++)
            if (fscanf(f, "%d", &skip) != 1) die(path, VC_OK);
        for (int64_t j = 0; j < 4 * rl; j++)
            if (!read_vals(f, &sk, 1)) die(path, VC_OK);
    }
    vc_status st = rl_batch_alloc(b, B, T, total);
    if (st) die("batch", st);
    fseek(f, pos, SEEK_SET);
    for (int i = 0; i < B; i++) {
        if (fscanf(f, "%ld %ld", &pl, &rl) != 2) die(path, VC_OK);
        int64_t o = b->cu[i];
        b->cu[i + 1] = o + pl + rl;
        b->plen[i] = pl;
        b->rlen[i] = rl;
        char uid[24];
        snprintf(uid, sizeof uid, "%d", i);
        b->uid[i] = vc_strdup(uid);
        b->prompt[i] = i;
        float *row[4] = { b->mask + (size_t)i * T, b->adv + (size_t)i * T, b->old_logp + (size_t)i * T,
                          b->ref_logp + (size_t)i * T };
        if (!read_ids(f, b->ids + o, pl + rl)) die(path, VC_OK);
        for (int k = 0; k < 4; k++)
            if (!read_vals(f, row[k], rl)) die(path, VC_OK);
    }
    fclose(f);
    b->have_old = !*on_policy;
    b->have_ref = 1;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: actor_drv MODEL_DIR BATCH_FILE OUT_DIR [key=value ...]\n");
        return 2;
    }
    vc_config *cfg = NULL;
    vc_status st = vc_config_load(NULL, argc - 4, argv + 4, &cfg);
    if (st) die("config", st);
    vc_rl_trainer *t = vc_calloc(1, sizeof *t);
    if (!t) die("memory", VC_ERR_NOMEM);
    if ((st = rl_read_actor_settings(t, cfg))) die("actor settings", st);
    vc_model *m = NULL;
    if ((st = vc_model_load(argv[1], &m))) die(argv[1], st);
    rl_batch b;
    int on_policy = 0;
    read_batch(argv[2], &b, &on_policy);
    vc_trainer tr;
    if ((st = rl_trainer_init(&tr, m, NULL, 0, cfg, "actor_rollout_ref.actor", 1, 0))) die("trainer", st);
    rl_metrics met = { 0 };
    if ((st = rl_update_actor(&tr, &b, &t->acfg, on_policy, &met))) die("update", st);
    for (int i = 0; i < met.n; i++) printf("%s %.17g\n", met.name[i], met.value[i]);
    if ((st = vc_model_save_hf(m, argv[3], VC_F32))) die(argv[3], st);
    rl_metrics_free(&met);
    rl_batch_free(&b);
    vc_trainer_free(&tr);
    vc_model_free(m);
    free(t);
    vc_config_free(cfg);
    return 0;
}
