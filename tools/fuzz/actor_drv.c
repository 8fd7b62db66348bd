/* Driver of tools/fuzz/diff_actor.py: one actor (or critic) update of verlc's RL trainer (its settings read from
 * verl's keys as the trainer reads them, rl_update_actor / rl_update_critic as the trainer calls them) on a batch
 * given in a file, then the update's metrics on stdout ("name value" lines) and the updated weights as a Hugging
 * Face checkpoint in OUT_DIR (f32; a critic's value head as OUT_DIR/head.txt, its weights then its bias, one a line;
 * with actor_rollout_ref.model.lora_rank the adapters too, as PEFT's adapter_model.safetensors).
 *
 * usage: actor_drv actor|critic MODEL_DIR BATCH_FILE OUT_DIR [key=value ...]
 * BATCH_FILE: "B T on_policy ncols", then per row "plen rlen", its prompt ids, its response ids, then rlen values
 * each of the response mask, the advantages, the old and the reference log-probs (C hex floats, as Python's
 * float.hex()), and with ncols 5 the rollout-correction importance weights (the update weighs its policy loss by
 * them, as with algorithm.rollout_correction); for the critic the returns, the old values and a column it does not
 * read in the second to fourth.
 *
 * Under mpirun each rank keeps its block of the rows (B / ranks consecutive ones, as verl's dispatch chunks the batch)
 * and runs the update as one rank of the trainer's data parallelism (rl_update_actor_dp / rl_update_critic_dp); rank 0
 * prints the metrics and writes the checkpoint. */
#include "../../src/rl/trainer_internal.h"
#include "verlc/config.h"
#include "verlc/dist.h"
#include "verlc/model.h"
#include "verlc/train.h"
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

/* past n rows of a batch file (responses up to T tokens), adding their tokens to *total; 0 on success */
static int skip_rows(FILE *f, int n, int ncols, int T, int64_t *total) {
    for (int i = 0; i < n; i++) {
        int64_t pl, rl;
        int32_t id;
        float v;
        if (fscanf(f, "%ld %ld", &pl, &rl) != 2 || pl < 1 || rl < 1 || rl > T) return 1;
        *total += pl + rl;
        for (int64_t j = 0; j < pl + rl; j++)
            if (fscanf(f, "%d", &id) != 1) return 1;
        for (int64_t j = 0; j < ncols * rl; j++)
            if (!read_vals(f, &v, 1)) return 1;
    }
    return 0;
}

/* the batch file's rows of rank `rank` of `world` into b (*on_policy: whether the update takes its own log-probs as the
 * old ones; *g_B: the file's rows) */
static void read_batch(const char *path, int critic, int rank, int world, rl_batch *b, int *on_policy, int *ncols,
                       int *g_B) {
    FILE *f = fopen(path, "r");
    int B, T;
    if (!f || fscanf(f, "%d %d %d %d", &B, &T, on_policy, ncols) != 4 || B < 1 || T < 1 || *ncols < 4 || *ncols > 5 ||
        B % world)
        die(path, VC_OK);
    *g_B = B;
    B /= world;
    int lo = rank * B;
    int64_t total = 0, pl, rl, before = 0;
    if (skip_rows(f, lo, *ncols, T, &before)) die(path, VC_OK); /* the ranks before this one */
    long pos = ftell(f);
    if (skip_rows(f, B, *ncols, T, &total)) die(path, VC_OK); /* a first pass for the token count */
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
        snprintf(uid, sizeof uid, "%d", lo + i);
        b->uid[i] = vc_strdup(uid);
        b->prompt[i] = lo + i;
        float *row[5] = { b->mask + (size_t)i * T, (critic ? b->ret : b->adv) + (size_t)i * T,
                          (critic ? b->values : b->old_logp) + (size_t)i * T, b->ref_logp + (size_t)i * T,
                          b->is_w + (size_t)i * T };
        if (!read_ids(f, b->ids + o, pl + rl)) die(path, VC_OK);
        for (int k = 0; k < *ncols; k++)
            if (!read_vals(f, row[k], rl)) die(path, VC_OK);
    }
    fclose(f);
    b->have_old = !*on_policy;
    b->have_ref = 1;
    b->have_values = critic;
}

/* the critic's value head, weights then bias, one a line */
static void write_head(const rl_critic *cr, const char *dir) {
    int64_t H = cr->head_w.n;
    float *h = vc_malloc(sizeof(float) * (size_t)(H + 1));
    char path[4096];
    snprintf(path, sizeof path, "%s/head.txt", dir);
    FILE *f = fopen(path, "w");
    vc_tensor whole;
    vc_param_init(&whole, cr->w, NULL, 1, (int64_t[]){ H + 1 });
    vc_status st = h && f ? vc_train_param_read(&whole, h) : VC_ERR_IO;
    if (st) die(path, st);
    for (int64_t i = 0; i <= H; i++) fprintf(f, "%a\n", (double)h[i]);
    fclose(f);
    free(h);
}

int main(int argc, char **argv) {
    if (argc < 5 || (strcmp(argv[1], "actor") && strcmp(argv[1], "critic"))) {
        fprintf(stderr, "usage: actor_drv actor|critic MODEL_DIR BATCH_FILE OUT_DIR [key=value ...]\n");
        return 2;
    }
    int critic = !strcmp(argv[1], "critic");
    argv++, argc--;
    vc_config *cfg = NULL;
    vc_status st = vc_config_load(NULL, argc - 4, argv + 4, &cfg);
    if (st) die("config", st);
    vc_rl_trainer *t = vc_calloc(1, sizeof *t);
    if (!t) die("memory", VC_ERR_NOMEM);
    if ((st = rl_read_update_settings(t, cfg))) die("settings", st);
    vc_comm *comm = NULL;
    if (getenv("OMPI_COMM_WORLD_SIZE") && (st = vc_comm_init(NULL, NULL, "mpi", &comm))) die("mpi", st);
    int world = comm ? vc_comm_size(comm) : 1, rank = comm ? vc_comm_rank(comm) : 0, g_B = 0;
    rl_batch b;
    int on_policy = 0, ncols = 4;
    read_batch(argv[2], critic, rank, world, &b, &on_policy, &ncols, &g_B);
    rl_dp dp = { comm, world, rank * b.B, g_B, b.T, NULL };
    t->acfg.use_is = ncols == 5 && !t->acfg.rc.bypass; /* as the trainer sets it for rollout_correction's weights */
    if (t->acfg.rc.bypass) { /* bypass mode: the old log-probs are the rollout's, as the trainer copies them */
        memcpy(b.rollout_logp, b.old_logp, sizeof(float) * (size_t)b.B * b.T);
        b.have_old = 1;
        on_policy = 0;
    }
    vc_model *m = NULL;
    rl_critic cr;
    if (critic) {
        if ((st = rl_critic_load(argv[1], NULL, &cr))) die(argv[1], st);
        m = cr.m;
    } else if ((st = vc_model_load(argv[1], &m)))
        die(argv[1], st);
    t->actor = critic ? NULL : m;
    if (!critic && (st = rl_attach_actor_lora(t, cfg))) die("lora", st);
    vc_tensor *const *lora = NULL;
    int n_lora = critic ? 0 : vc_model_lora_params(m, &lora);
    vc_trainer tr;
    st = critic ? rl_trainer_init_dp(&tr, m, cr.extra, cr.n_extra, cfg, "critic", 1, 1, comm)
                : rl_trainer_init_dp(&tr, m, lora, n_lora, cfg, "actor_rollout_ref.actor", 1, 0, comm);
    if (st) die("trainer", st);
    rl_metrics met = { 0 };
    const rl_dp *d = comm ? &dp : NULL;
    st = critic ? rl_update_critic_dp(&tr, &cr, &b, &t->ccfg, d, &met)
                : rl_update_actor_dp(&tr, &b, &t->acfg, on_policy, d, &met);
    if (st) die("update", st);
    for (int i = 0; i < met.n && rank == 0; i++) printf("%s %.17g\n", met.name[i], met.value[i]);
    if (rank == 0 && (st = vc_model_save_hf(m, argv[3], VC_F32))) die(argv[3], st);
    if (rank == 0 && t->lora_rank > 0 && (st = vc_model_lora_save(m, argv[3]))) die(argv[3], st); /* PEFT's file */
    if (rank == 0 && critic) write_head(&cr, argv[3]);
    rl_metrics_free(&met);
    rl_batch_free(&b);
    vc_trainer_free(&tr);
    if (critic) rl_critic_free(&cr);
    else vc_model_free(m);
    free(t);
    vc_config_free(cfg);
    vc_comm_free(comm);
    return 0;
}
