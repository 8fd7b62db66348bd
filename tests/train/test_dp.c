/* Data-parallel training. Run directly, the program tests the one-rank pieces (sharding names, a trainer
 * over a one-rank communicator equals one without, bitwise); then, when this build has MPI and mpirun
 * is on PATH (or VERLC_MPIRUN names it), it launches itself (env VC_DP_TEST_MODE) under mpirun on the
 * qwen3 fixture model (8 sequences, micro-batches of one sequence, 2 AdamW steps):
 *  - np 2 and np 4 "dp": plain DP vs one rank (same global batch) within a float tolerance (the sums of
 *    micro-batch gradients are re-associated: ((g0+g1)+(g2+g3)) instead of (((g0+g1)+g2)+g3)); ZeRO-1 vs
 *    plain DP bitwise; local mode (each rank passes its own sequences, normalisers summed over ranks)
 *    vs global mode bitwise; weights bitwise equal on every rank (checksum every step);
 *  - np 4 also saves a ZeRO-1 checkpoint after step 1 (one micro-batch, no clipping: every world size
 *    then sums the same gradient, so the runs agree exactly) and continues to step 2 (the reference);
 *    plain DP on 4 ranks resumes from it; np 2 ZeRO-1 and one rank (this process) resume from it; all
 *    must give the reference weights exactly; rank 0's export of that checkpoint loads;
 *  - np 2 with VERLC_DIST_TIMEOUT=2: rank 1 hangs in its loss (rank 0 must fail with VC_ERR_TIMEOUT
 *    naming itself within ~2 s), and rank 1 killed mid-step (the job must end). */
#define _GNU_SOURCE
#include "verlc/device.h"
#include "verlc/dist.h"
#include "verlc/ops.h"
#include "verlc/pool.h"
#include "verlc/rng.h"
#include "verlc/train.h"
#include "train_test_util.h"
#include "vc_test.h"
#include "mpi_launch.h"
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NSEQ 8
static int64_t CU[NSEQ + 1];
static int32_t IDS[512];
static float MASK[512];

static void make_batch(vc_minibatch *b) { random_minibatch(b, NSEQ, 6, 20, 11, CU, IDS, MASK); }

static char MODEL[PATH_MAX];

static vc_model *load_model(void) {
    vc_model *m = NULL;
    if (vc_model_load(MODEL, &m)) fprintf(stderr, "load %s: %s\n", MODEL, vc_last_error());
    return m;
}

static int OVERLAP; /* overlap_grad_reduce of the next trainers */
static int CKPT;    /* gradient checkpointing of the next trainers */
static int MAXTOK;  /* token budget per micro-batch of the next trainers (0: by count) */
static int64_t GATHERS; /* ZeRO-3 layer gathers of the last step train() took */
static int MUON;        /* Muon (Megatron-core's defaults, f32 iteration) on the matrices of the next trainers */
static int LAYERWISE;   /* ... with use_layer_wise_distributed_optimizer: each tensor's state on its owner only */
static size_t STATE;    /* optimiser state floats this rank held in the last train() */
static size_t BIGGEST;  /* ... and the largest unit's (an AdamW tensor's two moments, a Muon group's momentum) */
static const char *CKPT_FROM = "a 4-rank ZeRO-2"; /* what resume_and_compare resumes from */
static int MICRO_NORM;  /* 1: the next trainers normalise each micro-batch by itself; 2: also pooling the ranks' tokens */
static int DEAL;        /* > 0: the next train() calls take the batch dealt as a DEAL-rank job's i-th micro-batches */

static void config(vc_trainer_config *c, vc_comm *comm, int sharding, int micro_bs, double clip) {
    vc_trainer_config_default(c);
    c->adamw.lr = 1e-2;
    c->sched.base_lr = 1e-2;
    c->grad_clip = clip;
    c->micro_bs = micro_bs;
    c->comm = comm;
    c->sharding = sharding;
    c->check_every = 1;
    c->bucket_bytes = 64 << 10; /* several buckets on this small model */
    c->overlap_grad_reduce = OVERLAP;
    c->checkpointing = CKPT;
    c->max_tokens = MAXTOK;
    c->micro_norm = MICRO_NORM > 0;
    c->micro_norm_dp_tokens = MICRO_NORM == 2;
    if (MUON) {
        vc_muon_config_default(&c->adamw.muon);
        c->adamw.muon.on = 1;
        c->adamw.muon.bf16 = 0;
        c->adamw.muon.layer_wise = LAYERWISE;
    }
}

static size_t n_trained(const vc_trainer *t) {
    size_t n = 0;
    for (int i = 0; i < t->n_params; i++) n += t->sizes[i];
    return n;
}

/* (ZeRO-3: gathered first, a collective) */
static float *weights(vc_trainer *t) {
    CHECK_OK(vc_trainer_full_weights(t, 1));
    float *w = malloc(n_trained(t) * sizeof *w + 1);
    size_t o = 0;
    for (int i = 0; i < t->n_params; i++) {
        vc_tensor *p = NULL;
        for (int k = 0, j = 0; k < vc_model_n_params(t->model); k++) {
            vc_tensor *q = vc_model_param(t->model, k, NULL, NULL);
            if (q->grad && j++ == i) { p = q; break; }
        }
        CHECK_OK(vc_tensor_read(p, w + o)); /* backend memory */
        o += t->sizes[i];
    }
    CHECK_OK(vc_trainer_full_weights(t, 0));
    return w;
}

/* Trains `steps` steps on b (or on this rank's part in local mode); returns the weights. */
static float *train(vc_comm *comm, int sharding, int local, int micro_bs, double clip, int steps, double *loss,
                    size_t *moments) {
    vc_model *m = load_model();
    if (!m) { CHECK(0); return NULL; }
    vc_trainer_config c;
    config(&c, comm, sharding, micro_bs, clip);
    c.local_batch = local;
    vc_trainer t;
    vc_minibatch b;
    make_batch(&b);
    if (DEAL) { /* sequence r q + i (q = NSEQ / DEAL, rank r's i-th micro-batch of one) at DEAL i + r */
        static int64_t cu[NSEQ + 1];
        static int32_t ids[512];
        static float mask[512];
        int q = NSEQ / DEAL, k = 0;
        cu[0] = 0;
        for (int i = 0; i < q; i++)
            for (int r = 0; r < DEAL; r++, k++) {
                int s = r * q + i;
                int64_t L = CU[s + 1] - CU[s];
                memcpy(ids + cu[k], IDS + CU[s], sizeof *ids * (size_t)L);
                memcpy(mask + cu[k], MASK + CU[s], sizeof *mask * (size_t)L);
                cu[k + 1] = cu[k] + L;
            }
        b = (vc_minibatch){ NSEQ, cu, ids, mask };
    }
    if (local) { /* rank r's contiguous share of the sequences */
        int P = vc_comm_size(comm), r = vc_comm_rank(comm), q = NSEQ / P, rem = NSEQ % P;
        int first = r * q + (r < rem ? r : rem), n = q + (r < rem);
        static int64_t cu[NSEQ + 1];
        for (int i = 0; i <= n; i++) cu[i] = CU[first + i] - CU[first];
        b = (vc_minibatch){ n, cu, IDS + CU[first], MASK + CU[first] };
    }
    float *w = NULL;
    CHECK_OK(vc_trainer_init(&t, m, &c));
    if (MUON && comm && vc_comm_size(comm) > 1) { /* every rank owns some of Muon's groups */
        int owns[8] = { 0 }, P = vc_comm_size(comm), all = 1;
        for (size_t i = 0; i < t.opt.n_params; i++) {
            int o = vc_adamw_muon_owner(&t.opt, i);
            if (o >= 0 && o < 8) owns[o] = 1;
        }
        for (int r = 0; r < P && r < 8; r++) all &= owns[r];
        CHECK_MSG(all, "Muon's groups not shared out over the %d ranks", P);
    }
    vc_step_stats st;
    for (int s = 0; s < steps; s++) {
        vc_status rc = vc_trainer_step(&t, &b, NULL, NULL, &st);
        CHECK_MSG(rc == VC_OK, "step %d: %s", s, vc_last_error());
        CHECK(!st.skipped);
        if (s == 0 && loss) *loss = st.loss;
        GATHERS = st.n_gathers;
        if (OVERLAP && comm && vc_comm_rank(comm) == 0 && vc_comm_size(comm) > 1) {
            /* some buckets could be reduced while backward ran (rank 0 always has a micro-batch here), also
             * with gradient checkpointing (a recomputed layer's node declares the weights it writes) */
            CHECK_MSG(st.n_buckets > 1 && st.n_buckets_early > 0, "overlap%s: %d of %d buckets early",
                      CKPT ? " with checkpointing" : "", st.n_buckets_early, st.n_buckets);
            if (s == 0)
                printf("overlap (%s%s%s): %d of %d gradient buckets final before the end of backward\n",
                       sharding == VC_SHARD_ZERO2 ? "ZeRO-2" : sharding ? "ZeRO-1" : "DP", local ? ", local" : "",
                       CKPT ? ", checkpointing" : "", st.n_buckets_early, st.n_buckets);
        }
    }
    STATE = vc_adamw_state_floats(&t.opt);
    BIGGEST = 0;
    for (size_t i = 0; i < t.opt.n_params; i++) { /* (Muon's fused members are one unit) */
        const vc_optim_param *q = &t.opt.params[i];
        int muon = t.opt.cfg.muon.on && q->mats > 0;
        size_t f = q->n * (muon ? 1 : 2);
        for (size_t j = 0; muon && q->fuse > 0 && j < t.opt.n_params; j++)
            if (j != i && t.opt.params[j].mats > 0 && t.opt.params[j].fuse == q->fuse) f += t.opt.params[j].n;
        if (f > BIGGEST) BIGGEST = f;
    }
    if (moments) {
        *moments = 0;
        for (size_t i = 0; i < t.opt.n_params; i++) *moments += t.opt.params[i].n;
    }
    w = weights(&t);
    vc_trainer_free(&t);
    vc_model_free(m);
    return w;
}

static double max_abs_diff(const float *a, const float *b, size_t n, double *rel) {
    double d = 0, s = 0, e = 0;
    for (size_t i = 0; i < n; i++) {
        double x = fabs((double)a[i] - b[i]);
        if (x > d) d = x;
        e += x * x;
        s += (double)a[i] * a[i];
    }
    *rel = sqrt(e / (s > 0 ? s : 1));
    return d;
}

static int same_values(const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

static size_t model_size(void) {
    vc_model *m = load_model();
    vc_trainer t;
    vc_trainer_config c;
    config(&c, NULL, 0, 1, 1.0);
    size_t n = 0;
    if (m && vc_trainer_init(&t, m, &c) == VC_OK) {
        n = n_trained(&t);
        vc_trainer_free(&t);
    }
    vc_model_free(m);
    return n;
}

/* bytes of the largest layer's trained weights */
static size_t layer_bytes(void) {
    vc_model *m = load_model();
    size_t most = 0, *per = NULL;
    int nl = m ? (int)vc_model_cfg(m)->n_layer : 0;
    if (m && (per = calloc((size_t)nl + 1, sizeof *per))) {
        for (int k = 0; k < vc_model_n_params(m); k++) {
            const char *name = NULL;
            vc_tensor *q = vc_model_param(m, k, &name, NULL);
            int layer = name && !strncmp(name, "layers.", 7) ? atoi(name + 7) : -1; /* "layers.3.q" */
            if (layer >= 0 && layer < nl) per[layer] += (size_t)q->n * 4;
        }
        for (int l = 0; l < nl; l++)
            if (per[l] > most) most = per[l];
    }
    CHECK(most > 0);
    free(per);
    vc_model_free(m);
    return most;
}

/* ---- checkpoints: one micro-batch, no clipping, so every world size sums the same gradient ---- */
static vc_status ckpt_trainer(vc_comm *comm, int sharding, vc_model **m, vc_trainer *t) {
    vc_trainer_config c;
    /* ZeRO-3 needs a micro-batch on every rank: the sums associate per rank first (float rounding) */
    config(&c, comm, sharding, sharding == VC_SHARD_ZERO3 ? NSEQ / vc_comm_size(comm) : NSEQ, 0.0);
    *m = load_model();
    return *m ? vc_trainer_init(t, *m, &c) : VC_ERR_IO;
}

static void ckpt_state(vc_train_state *s) {
    memset(s, 0, sizeof *s);
    s->seed = 1;
    snprintf(s->model_dir, sizeof s->model_dir, "%s", MODEL);
}

/* Loads DIR/step_1 into a fresh trainer, takes step 2 and compares with DIR/ref.bin. */
static void resume_and_compare(vc_comm *comm, int sharding, const char *dir, const char *what) {
    vc_model *m;
    vc_trainer t;
    vc_train_state s;
    vc_minibatch b;
    vc_step_stats st;
    make_batch(&b);
    char ck[PATH_MAX], ref[PATH_MAX];
    snprintf(ck, sizeof ck, "%s/step_1", dir);
    snprintf(ref, sizeof ref, "%s/ref.bin", dir);
    if (ckpt_trainer(comm, sharding, &m, &t)) { CHECK(0); vc_model_free(m); return; }
    vc_status rc = vc_train_ckpt_load(ck, &t, &s);
    CHECK_MSG(rc == VC_OK, "%s: load: %s", what, vc_last_error());
    vc_train_state_clear(&s);
    CHECK(t.step == 1 && t.opt.step == 1);
    CHECK_OK(vc_trainer_step(&t, &b, NULL, NULL, &st));
    float *w = weights(&t), *r = NULL;
    size_t n = 0;
    CHECK_OK(vc_read_file(ref, (char **)&r, &n));
    double rel = 1, d = r && n == n_trained(&t) * sizeof(float) ? max_abs_diff(w, r, n_trained(&t), &rel) : 1;
    int ok = r && n == n_trained(&t) * sizeof(float) &&
             (sharding == VC_SHARD_ZERO3 ? d < 1e-5 && rel < 1e-6 : same_values(w, r, n_trained(&t)));
    CHECK_MSG(ok, "%s: weights after resume differ from the uninterrupted run (max |dw| %.3g)", what, d);
    printf("%s: resumed from %s checkpoint, step 2 weights %s the uninterrupted run%s\n", what, CKPT_FROM,
           ok ? "equal" : "DIFFER FROM", sharding == VC_SHARD_ZERO3 ? " (within float rounding: 1e-5)" : "");
    free(w);
    free(r);
    vc_trainer_free(&t);
    vc_model_free(m);
}

static void save_and_continue(vc_comm *comm, const char *dir, int sharding) {
    vc_model *m;
    vc_trainer t;
    vc_train_state s;
    vc_minibatch b;
    vc_step_stats st;
    make_batch(&b);
    ckpt_state(&s);
    if (ckpt_trainer(comm, sharding, &m, &t)) { CHECK(0); vc_model_free(m); return; }
    CHECK_OK(vc_trainer_step(&t, &b, NULL, NULL, &st));
    char *path = NULL;
    vc_status rc = vc_train_ckpt_save(dir, &t, &s, 0, &path);
    CHECK_MSG(rc == VC_OK, "save: %s", vc_last_error());
    free(path);
    CHECK_OK(vc_trainer_step(&t, &b, NULL, NULL, &st));
    float *w = weights(&t);
    char ref[PATH_MAX];
    snprintf(ref, sizeof ref, "%s/ref.bin", dir);
    if (vc_comm_rank(comm) == 0) CHECK_OK(vc_write_file_atomic(ref, w, n_trained(&t) * sizeof(float)));
    free(w);
    vc_trainer_free(&t);
    vc_model_free(m);
    CHECK_OK(vc_comm_barrier(comm));
}

/* ---- ZeRO-2 ---- */
/* The memory plan of a trainer with this sharding. */
static vc_mem_plan plan_of(vc_comm *c, int sharding) {
    vc_model *m = load_model();
    vc_trainer t;
    vc_trainer_config cf;
    config(&cf, c, sharding, 1, 0.5);
    vc_mem_plan plan;
    memset(&plan, 0, sizeof plan);
    if (m && vc_trainer_init(&t, m, &cf) == VC_OK) {
        CHECK_OK(vc_trainer_plan(&t, 32, 0, vc_comm_rank(c) == 0 ? stdout : NULL, &plan));
        if (vc_comm_rank(c) == 0) vc_trainer_print_memory(&t, "zero-test", stdout);
        vc_trainer_free(&t);
    } else
        CHECK(0);
    vc_model_free(m);
    return plan;
}

/* this rank's gradient bytes in the plan */
static size_t plan_grads(vc_comm *c, int sharding) { return plan_of(c, sharding).grads; }

/* Bytes this rank sends during one step with this sharding and micro-batch size (the communicator's
 * bytes_sent counter around vc_trainer_step); *rounds: the micro-batches of the busiest rank. */
static double step_traffic(vc_comm *c, int sharding, int micro_bs) {
    vc_model *m = load_model();
    vc_trainer t;
    vc_trainer_config cf;
    vc_minibatch b;
    vc_step_stats st;
    vc_comm_stats s0, s1;
    double sent = -1;
    config(&cf, c, sharding, micro_bs, 0.5);
    make_batch(&b);
    if (m && vc_trainer_init(&t, m, &cf) == VC_OK) {
        vc_comm_get_stats(c, &s0);
        CHECK_OK(vc_trainer_step(&t, &b, NULL, NULL, &st));
        vc_comm_get_stats(c, &s1);
        sent = s1.bytes_sent - s0.bytes_sent;
        vc_trainer_free(&t);
    } else
        CHECK(0);
    vc_model_free(m);
    return sent;
}

/* ZeRO-2's gradient traffic per rank and round is reduce-scatter traffic: the other ranks' pieces of every
 * chunk, (N-1)/N of the flat gradient, not an all-reduce's 2(N-1)/N. A step also all-gathers the weights
 * ((N-1) x the shard) and sums a few scalars (under 64 bytes per peer). */
static void zero2_traffic(vc_comm *c, size_t n) {
    int me = vc_comm_rank(c), np = vc_comm_size(c);
    size_t shard = (n + np - 1) / np, first = (size_t)me * shard < n ? (size_t)me * shard : n;
    size_t count = n - first < shard ? n - first : shard;
    double gather = (double)(np - 1) * shard * 4, rs = (double)(n - count) * 4, full = (double)n * 4;
    for (int mb = NSEQ / np; mb >= 1; mb /= NSEQ / np) { /* one round, then NSEQ / np rounds */
        int rounds = NSEQ / np / mb;
        double grad = step_traffic(c, VC_SHARD_ZERO2, mb) - gather;
        CHECK_MSG(grad >= rounds * rs && grad <= rounds * rs + 64.0 * (np - 1),
                  "rank %d: ZeRO-2 gradient traffic %.0f bytes in %d round(s), want %d x %.0f", me, grad, rounds,
                  rounds, rs);
        if (me == 0)
            printf("np %d: ZeRO-2 gradient bytes sent per rank and round %.0f = %.3f of the flat gradient "
                   "((N-1)/N = %.3f; an all-reduce would be %.3f), %d round(s)\n", np, grad / rounds,
                   grad / rounds / full, (np - 1.0) / np, 2.0 * (np - 1) / np, rounds);
        if (mb == 1) break;
    }
    /* ZeRO-1 with one micro-batch per rank moves the same gradient bytes (ordered reduce-scatter) */
    double z1 = step_traffic(c, VC_SHARD_ZERO1, NSEQ / np) - gather;
    CHECK_MSG(z1 >= (double)(np - 1) * shard * 4 && z1 <= (double)(np - 1) * shard * 4 + 64.0 * (np - 1),
              "rank %d: ZeRO-1 gradient traffic %.0f bytes", me, z1);
}

/* ZeRO-2 under gradient checkpointing: a recomputed layer's tape node declares the layer's weights as the
 * tensors whose gradients its backward writes, so the working area still packs tensors whose gradients are
 * not live together: it is smaller than the full gradient, and no larger than without checkpointing plus
 * one layer's weights (a checkpointed layer writes all its weights at one node, so they become live
 * together, up to a layer earlier than without checkpointing). g2: the memory plan's gradient bytes
 * without checkpointing (shard + working area). */
static void zero2_ckpt_area(vc_comm *c, size_t n, size_t g2) {
    int me = vc_comm_rank(c), np = vc_comm_size(c);
    size_t shard = (n + np - 1) / np * 4, layer = layer_bytes();
    CKPT = 1;
    size_t g2c = plan_grads(c, VC_SHARD_ZERO2);
    CKPT = 0;
    size_t area = g2 - shard, area_c = g2c - shard;
    CHECK_MSG(g2c > shard && area_c < n * 4 && area_c <= area + layer,
              "rank %d: ZeRO-2 working area with checkpointing %zu bytes, without %zu, full gradient %zu, a layer %zu",
              me, area_c, area, n * 4, layer);
    if (me == 0)
        printf("np %d: ZeRO-2 working area per rank: %zu bytes without checkpointing, %zu with (%.2f and %.2f of the "
               "full gradient %zu; a layer's weights %zu); memory plan gradient bytes %zu and %zu\n", np, area, area_c,
               (double)area / (n * 4.0), (double)area_c / (n * 4.0), n * 4, layer, g2, g2c);
}

/* MODEL becomes an 8-layer random model of the fixture's shape (rank 0 writes it; a collective) */
static int deep_model(vc_comm *c) {
    char dir[PATH_MAX], cfg[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s.deep", getenv("VC_DP_DIR"));
    if (vc_comm_rank(c) == 0) {
        char *text = NULL, *at;
        size_t n = 0;
        snprintf(cfg, sizeof cfg, "%s/config.json", MODEL);
        vc_model *m = NULL;
        int ok = !vc_read_file(cfg, &text, &n) && (at = strstr(text, "\"num_hidden_layers\": 2")) != NULL;
        if (ok) at[strlen("\"num_hidden_layers\": ")] = '8';
        snprintf(cfg, sizeof cfg, "%s/config.json", dir);
        ok = ok && (mkdir(dir, 0755) == 0 || errno == EEXIST) && !vc_write_file_atomic(cfg, text, strlen(text));
        ok = ok && !vc_model_init_random(cfg, 7, &m) && !vc_model_save_hf(m, dir, VC_F32);
        CHECK_MSG(ok, "8-layer model in %s: %s", dir, vc_last_error());
        vc_model_free(m);
        free(text);
    }
    CHECK_OK(vc_comm_barrier(c));
    snprintf(MODEL, sizeof MODEL, "%s", dir);
    return 0;
}

/* ZeRO-3 against ZeRO-2 (the same reductions on the same weights, so the same bits): a2 one micro-batch
 * per rank, b2 one sequence per micro-batch, i2 micro-batches of 4 sequences (idle ranks with 4 ranks:
 * ZeRO-3 splits them evenly instead; too few sequences on a rank fail every rank). Also local mode, checkpointing, token budgets that give the ranks different
 * counts (made equal), and the weight memory per rank. */
static void zero3_checks(vc_comm *c, size_t n, const float *a2, const float *b2, const float *i2) {
    int me = vc_comm_rank(c), np = vc_comm_size(c);
    float *a3 = train(c, VC_SHARD_ZERO3, 0, NSEQ / np, 0.5, 2, NULL, NULL);
    float *b3 = train(c, VC_SHARD_ZERO3, 0, 1, 0.5, 2, NULL, NULL);
    float *l3 = train(c, VC_SHARD_ZERO3, 1, 1, 0.5, 2, NULL, NULL);
    CKPT = 1;
    float *k3 = train(c, VC_SHARD_ZERO3, 0, 1, 0.5, 2, NULL, NULL);
    CKPT = 0;
    if (a2 && b2 && a3 && b3 && l3 && k3) {
        CHECK_MSG(!memcmp(a2, a3, n * sizeof(float)), "rank %d: ZeRO-3 differs from ZeRO-2 (one micro-batch)", me);
        CHECK_MSG(!memcmp(b2, b3, n * sizeof(float)), "rank %d: ZeRO-3 differs from ZeRO-2 (micro-batches)", me);
        CHECK_MSG(!memcmp(b2, l3, n * sizeof(float)), "rank %d: local-mode ZeRO-3 differs from ZeRO-2", me);
        CHECK_MSG(!memcmp(b2, k3, n * sizeof(float)), "rank %d: ZeRO-3 with checkpointing differs", me);
    } else
        CHECK(0);
    /* 2 micro-batches of 4 sequences: on 2 ranks one each; on 4 ranks, split evenly into 4 of 2: one per
     * rank, as a2 */
    float *i3 = train(c, VC_SHARD_ZERO3, 0, 4, 0.5, 2, NULL, NULL);
    CHECK_MSG(i3 && !memcmp(np == 4 ? a2 : i2, i3, n * sizeof(float)), "rank %d: ZeRO-3 (2 micro-batches) differs", me);
    free(i3);
    /* more micro-batches than sequences on a rank: every rank fails with the message */
    vc_model *m = load_model();
    vc_trainer t;
    vc_trainer_config cf;
    config(&cf, c, VC_SHARD_ZERO3, 1, 0.5);
    cf.local_batch = 1;
    int64_t cu[NSEQ + 1];
    vc_minibatch b;
    vc_step_stats st;
    make_batch(&b);
    int mine = me == 0 ? 1 : NSEQ / np; /* rank 0 has one sequence, the others NSEQ / np */
    for (int i = 0; i <= mine; i++) cu[i] = b.cu_seqlens[i];
    b.n_seq = mine;
    b.cu_seqlens = cu;
    if (m && vc_trainer_init(&t, m, &cf) == VC_OK) {
        vc_status rc = vc_trainer_step(&t, &b, NULL, NULL, &st);
        CHECK_MSG(rc == VC_ERR_ARG && strstr(vc_last_error(), "same number of micro-batches"),
                  "rank %d: ZeRO-3 with too few sequences: %d %s", me, rc, vc_last_error());
        vc_trainer_free(&t);
    } else
        CHECK(0);
    vc_model_free(m);
    /* overlap_grad_reduce is refused with ZeRO-3, with a message; the model is untouched */
    m = load_model();
    config(&cf, c, VC_SHARD_ZERO3, 1, 0.5);
    cf.overlap_grad_reduce = 1;
    vc_status rc = m ? vc_trainer_init(&t, m, &cf) : VC_ERR_IO;
    CHECK_MSG(rc == VC_ERR_UNSUPPORTED && strstr(vc_last_error(), "overlap_grad_reduce"), "rank %d: ZeRO-3 + overlap: "
              "%d %s", me, rc, vc_last_error());
    vc_model_free(m);
    /* token budgets: the ranks' own sequences split into different counts, made equal under ZeRO-3 */
    MAXTOK = 48;
    float *t2 = train(c, VC_SHARD_ZERO2, 1, 1, 0.5, 2, NULL, NULL);
    float *t3 = train(c, VC_SHARD_ZERO3, 1, 1, 0.5, 2, NULL, NULL);
    MAXTOK = 0;
    double rel = 1, d = t2 && t3 ? max_abs_diff(t2, t3, n, &rel) : 1;
    CHECK_MSG(d < 1e-4 && rel < 1e-5, "rank %d: ZeRO-3 vs ZeRO-2 with token budgets: max |dw| %.3g, rel %.3g", me,
              d, rel);
    /* 8 layers: layers leave the two slots and are gathered again in backward */
    char keep[PATH_MAX];
    snprintf(keep, sizeof keep, "%s", MODEL);
    if (deep_model(c)) { CHECK(0); return; }
    float *d2 = train(c, VC_SHARD_ZERO2, 0, 1, 0.5, 2, NULL, NULL);
    GATHERS = -1;
    float *d3 = train(c, VC_SHARD_ZERO3, 0, 1, 0.5, 2, NULL, NULL);
    /* the first micro-batch: every layer in forward, in backward all but the two still resident; the
     * next ones find layers 0 and 1 still resident from the previous backward */
    int64_t k = NSEQ / np, want = (2 * 8 - 2) + (2 * 8 - 4) * (k - 1);
    CHECK_MSG(GATHERS == want, "rank %d: 8 layers, %lld micro-batches: %lld gathers in the last step, want %lld", me,
              (long long)k, (long long)GATHERS, (long long)want);
    CKPT = 1;
    float *dk = train(c, VC_SHARD_ZERO3, 0, 1, 0.5, 2, NULL, NULL);
    CKPT = 0;
    size_t nd = model_size();
    CHECK_MSG(d2 && d3 && dk && !memcmp(d2, d3, nd * 4) && !memcmp(d2, dk, nd * 4),
              "rank %d: 8 layers: ZeRO-3 differs from ZeRO-2", me);
    free(d2); free(d3); free(dk);
    vc_mem_plan p2 = plan_of(c, VC_SHARD_ZERO2), p3 = plan_of(c, VC_SHARD_ZERO3);
    snprintf(MODEL, sizeof MODEL, "%s", keep);
    CHECK_MSG(p3.weights < p2.weights && p3.grads == p2.grads && p3.optim == p2.optim,
              "rank %d: memory plan ZeRO-3 weights %zu grads %zu AdamW %zu vs ZeRO-2 %zu %zu %zu", me, p3.weights,
              p3.grads, p3.optim, p2.weights, p2.grads, p2.optim);
    if (me == 0)
        printf("np %d: ZeRO-3 bitwise equal to ZeRO-2 (one and several micro-batches, local, checkpointing%s; 8 "
               "layers with and without checkpointing); token budgets made equal: max |dw| %.3g vs ZeRO-2's own "
               "partition; 8 layers: weight bytes per rank %zu vs %zu (%.2f)\n", np,
               np == 2 ? ", 2 micro-batches" : ", micro-batches split for idle ranks", d, p3.weights, p2.weights,
               (double)p3.weights / (double)p2.weights);
    free(a3); free(b3); free(l3); free(k3); free(t2); free(t3);
}

/* ZeRO-2 against ZeRO-1 and plain DP (dp: plain DP, one micro-batch of one sequence, 2 steps). */
static void zero2_checks(vc_comm *c, const float *dp, size_t n) {
    int me = vc_comm_rank(c), np = vc_comm_size(c);
    /* one micro-batch per rank: the same sums as ZeRO-1, bitwise */
    float *a1 = train(c, VC_SHARD_ZERO1, 0, NSEQ / np, 0.5, 2, NULL, NULL);
    float *a2 = train(c, VC_SHARD_ZERO2, 0, NSEQ / np, 0.5, 2, NULL, NULL);
    /* several micro-batches per rank: reduced per micro-batch, then summed: float rounding only */
    size_t mz = 0;
    float *b2 = train(c, VC_SHARD_ZERO2, 0, 1, 0.5, 2, NULL, &mz);
    float *l2 = train(c, VC_SHARD_ZERO2, 1, 1, 0.5, 2, NULL, NULL);
    CKPT = 1;
    float *k2 = train(c, VC_SHARD_ZERO2, 0, 1, 0.5, 2, NULL, NULL);
    CKPT = 0;
    /* 2 micro-batches of 4 sequences: with 4 ranks two of them reduce zeros */
    float *i1 = train(c, VC_SHARD_ZERO1, 0, 4, 0.5, 2, NULL, NULL);
    float *i2 = train(c, VC_SHARD_ZERO2, 0, 4, 0.5, 2, NULL, NULL);
    if (a1 && a2 && b2 && l2 && k2 && i1 && i2) {
        CHECK_MSG(!memcmp(a1, a2, n * sizeof(float)), "rank %d: ZeRO-2 differs from ZeRO-1 (one micro-batch)", me);
        CHECK_MSG(!memcmp(i1, i2, n * sizeof(float)), "rank %d: ZeRO-2 with idle ranks differs from ZeRO-1", me);
        CHECK_MSG(!memcmp(b2, l2, n * sizeof(float)), "rank %d: local-mode ZeRO-2 differs from global", me);
        CHECK_MSG(!memcmp(b2, k2, n * sizeof(float)), "rank %d: ZeRO-2 with checkpointing differs", me);
        double rel = 1, d = max_abs_diff(b2, dp, n, &rel);
        CHECK_MSG(d < 1e-5 && rel < 1e-5, "rank %d: ZeRO-2 (4 micro-batches) vs DP: max |dw| %.3g, rel %.3g", me, d,
                  rel);
        CHECK(mz <= (n + np - 1) / np);
        if (me == 0)
            printf("np %d: ZeRO-2 bitwise equal to ZeRO-1 with one micro-batch per rank (also with idle ranks), "
                   "local == global, checkpointing == none; %d micro-batches per rank vs plain DP: max |dw| %.3g, "
                   "relative L2 %.3g\n", np, NSEQ / np, d, rel);
    } else
        CHECK(0);
    /* the chunks reduced on a communication thread while backward goes on: the same bits */
    OVERLAP = 1;
    float *oa = train(c, VC_SHARD_ZERO2, 0, NSEQ / np, 0.5, 2, NULL, NULL);
    float *ob = train(c, VC_SHARD_ZERO2, 0, 1, 0.5, 2, NULL, NULL);
    float *ol = train(c, VC_SHARD_ZERO2, 1, 1, 0.5, 2, NULL, NULL);
    float *oi = train(c, VC_SHARD_ZERO2, 0, 4, 0.5, 2, NULL, NULL);
    CKPT = 1;
    float *ok = train(c, VC_SHARD_ZERO2, 0, 1, 0.5, 2, NULL, NULL);
    CKPT = 0;
    OVERLAP = 0;
    if (a2 && b2 && i2 && oa && ob && ol && oi && ok) {
        CHECK_MSG(!memcmp(a2, oa, n * sizeof(float)), "rank %d: overlapped ZeRO-2 (one micro-batch) differs", me);
        CHECK_MSG(!memcmp(b2, ob, n * sizeof(float)), "rank %d: overlapped ZeRO-2 (micro-batches) differs", me);
        CHECK_MSG(!memcmp(b2, ol, n * sizeof(float)), "rank %d: overlapped local ZeRO-2 differs", me);
        CHECK_MSG(!memcmp(i2, oi, n * sizeof(float)), "rank %d: overlapped ZeRO-2 with idle ranks differs", me);
        CHECK_MSG(!memcmp(b2, ok, n * sizeof(float)), "rank %d: overlapped ZeRO-2 with checkpointing differs", me);
        if (me == 0)
            printf("np %d: overlapped ZeRO-2 (one and several micro-batches, local, idle ranks, checkpointing) "
                   "bitwise equal to the non-overlapped runs\n", np);
    } else
        CHECK(0);
    free(oa); free(ob); free(ol); free(oi); free(ok);
    zero3_checks(c, n, a2, b2, i2);
    free(a1); free(a2); free(b2); free(l2); free(k2); free(i1); free(i2);
    zero2_traffic(c, n);
    size_t g1 = plan_grads(c, VC_SHARD_ZERO1), g2 = plan_grads(c, VC_SHARD_ZERO2);
    CHECK_MSG(g1 >= n * 4 && g2 < g1, "rank %d: memory plan grads ZeRO-1 %zu, ZeRO-2 %zu bytes", me, g1, g2);
    if (me == 0)
        printf("np %d: memory plan gradient bytes per rank: ZeRO-1 %zu, ZeRO-2 %zu (%.2f of the full %zu)\n", np, g1,
               g2, (double)g2 / (n * 4.0), n * 4);
    zero2_ckpt_area(c, n, g2);
}

/* layer-wise Muon's 4-rank checkpoint (DIR_muon) resumed here: layer-wise, and with every rank keeping the whole
 * state */
static void muon_resume(vc_comm *c, const char *dir) {
    char lw[PATH_MAX], what[64];
    snprintf(lw, sizeof lw, "%s_muon", dir);
    CKPT_FROM = "a 4-rank layer-wise Muon";
    MUON = 1;
    for (LAYERWISE = 1; LAYERWISE >= 0; LAYERWISE--) {
        snprintf(what, sizeof what, "np %d Muon%s", c ? vc_comm_size(c) : 1, LAYERWISE ? ", layer-wise" : "");
        resume_and_compare(c, VC_SHARD_NONE, lw, what);
    }
    MUON = LAYERWISE = 0;
    CKPT_FROM = "a 4-rank ZeRO-2";
}

/* a shard of layer-wise Muon's checkpoint (DIR_muon) made corrupt: the resume fails naming it, never crashes */
static void corrupt_shard(const char *dir) {
    char ck[PATH_MAX], p[PATH_MAX + 32];
    snprintf(ck, sizeof ck, "%s_muon/step_1", dir);
    snprintf(p, sizeof p, "%s/optim_shard_1_of_4.bin", ck);
    char *orig = NULL;
    size_t len = 0;
    CHECK_OK(vc_read_file(p, &orig, &len));
    if (!orig || len < 64) { CHECK(0); free(orig); return; }
    static const struct { int at; uint64_t value; size_t len; const char *want; } cases[] = {
        { 48, 1u << 30, 0, "outside" },      /* the first run starts past the parameters */
        { 32, 1u << 20, 0, "runs" },         /* more runs than tensors */
        { 0, 0x3130524f455a4356ull, 0, "" }, /* "VCZERO01" with a v2 body: ranges misread, or sizes mismatch */
        { -1, 0, 60, "truncated" },          /* cut inside the run table */
    };
    MUON = LAYERWISE = 1;
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char *b = malloc(len);
        memcpy(b, orig, len);
        if (cases[k].at >= 0) memcpy(b + cases[k].at, &cases[k].value, 8);
        CHECK_OK(vc_write_file_atomic(p, b, cases[k].len ? cases[k].len : len));
        free(b);
        vc_model *m;
        vc_trainer t;
        vc_train_state s;
        if (ckpt_trainer(NULL, VC_SHARD_NONE, &m, &t)) { CHECK(0); vc_model_free(m); continue; }
        vc_status rc = vc_train_ckpt_load(ck, &t, &s);
        vc_train_state_clear(&s);
        CHECK_MSG(rc != VC_OK && strstr(vc_last_error(), "optim_shard_1_of_4.bin") &&
                  strstr(vc_last_error(), cases[k].want), "corrupt shard %zu: %s", k, rc ? vc_last_error() : "loaded");
        vc_trainer_free(&t);
        vc_model_free(m);
    }
    MUON = LAYERWISE = 0;
    CHECK_OK(vc_write_file_atomic(p, orig, len));
    free(orig);
    printf("layer-wise Muon shards with a range past the parameters, too many runs, the old magic over a new body "
           "and a cut run table: refused naming the file\n");
}

/* ---- children under mpirun ---- */
/* verl b178a3cd's fsdp_sft_trainer normalisation over the ranks (micro-batches of one sequence, NSEQ / np a rank): the
 * mean of the rank means of the micro-batches' token means is one rank's mean over them all; with the ranks' tokens
 * pooled (balance_dp_token), one rank whose micro-batches of np sequences are the ranks' i-th ones */
/* token budgets over each rank's own sequences (local_batch, as the RL update): every rank runs as many micro-batches as
 * the rank needing the most, as verl's rearrange_micro_batches (same_micro_num_in_dp), not only under ZeRO-3: rank 0
 * holds all NSEQ sequences, which need several micro-batches of a budget that the first two, the others' rows, fit in */
static void same_micro_count_checks(vc_comm *c) {
    int me = vc_comm_rank(c);
    vc_minibatch b;
    make_batch(&b);
    int64_t cu[NSEQ + 1], longest = 0;
    for (int i = 0; i < NSEQ; i++)
        if (b.cu_seqlens[i + 1] - b.cu_seqlens[i] > longest) longest = b.cu_seqlens[i + 1] - b.cu_seqlens[i];
    int mine = me == 0 ? NSEQ : 2;
    for (int i = 0; i <= mine; i++) cu[i] = b.cu_seqlens[i];
    b.n_seq = mine;
    b.cu_seqlens = cu;
    vc_model *m = load_model();
    vc_trainer t;
    vc_trainer_config cf;
    config(&cf, c, VC_SHARD_NONE, 1, 0.5);
    cf.local_batch = 1;
    cf.max_tokens = cu[2] > longest ? cu[2] : longest;
    vc_step_stats st = { 0 };
    if (m && vc_trainer_init(&t, m, &cf) == VC_OK) {
        CHECK_OK(vc_trainer_step(&t, &b, NULL, NULL, &st));
        vc_trainer_free(&t);
    } else
        CHECK(0);
    vc_model_free(m);
    /* (the step's count is the ranks' sum) rank 0's own count k0, k0 - 1 more than its rows would need elsewhere */
    vc_minibatch all;
    make_batch(&all);
    vc_partition p0;
    CHECK_OK(vc_train_micro_partition(&all, 1, cf.max_tokens, &p0));
    int k0 = (int)p0.n_groups, np = vc_comm_size(c), want = k0 + 2 * (np - 1);
    vc_partition_free(&p0);
    CHECK_MSG(k0 >= 2 && st.n_micro == want, "rank %d: %d micro-batches over the ranks of a %lld-token budget, want %d "
              "(rank 0's %d, the others' 2 rows each as 2)", me, st.n_micro, (long long)cf.max_tokens, want, k0);
    if (me == 0)
        printf("np %d: token budget %lld over each rank's own rows: rank 0's rows in %d micro-batches, the others' 2 rows "
               "(one budget's worth) in 2 each: %d in all\n", np, (long long)cf.max_tokens, k0, st.n_micro);
}

static void micro_norm_checks(vc_comm *c, size_t n) {
    int me = vc_comm_rank(c), np = vc_comm_size(c);
    for (MICRO_NORM = 1; MICRO_NORM <= 2; MICRO_NORM++) {
        double loss_dp = 0, loss_one = 0; /* (Adam's update does not see a gradient's scale: the loss does) */
        float *dp = train(c, VC_SHARD_NONE, 0, 1, 0.5, 2, &loss_dp, NULL);
        if (me == 0 && dp) {
            int pooled = MICRO_NORM == 2;
            DEAL = pooled ? np : 0;
            MICRO_NORM = 1;
            float *one = train(NULL, VC_SHARD_NONE, 0, pooled ? np : 1, 0.5, 2, &loss_one, NULL);
            DEAL = 0;
            MICRO_NORM = pooled; /* what the other setting gives: the test can tell them apart */
            float *other = train(NULL, VC_SHARD_NONE, 0, 1, 0.5, 2, NULL, NULL);
            MICRO_NORM = pooled ? 2 : 1;
            double rel = 1, d = one ? max_abs_diff(one, dp, n, &rel) : 1, rel_other = 0;
            if (other) max_abs_diff(other, dp, n, &rel_other);
            CHECK_MSG(one && d < 5e-5 && rel < 1e-5 && rel_other > 1e-4 && fabs(loss_dp - loss_one) < 1e-6 * loss_one,
                      "micro_norm%s np %d vs one rank: max |dw| %.3g, rel %.3g (%.3g from the %s), loss %.9g vs %.9g",
                      pooled ? " pooled" : "", np, d, rel, rel_other, pooled ? "unpooled" : "global normalisation", loss_dp,
                      loss_one);
            printf("np %d: per-micro-batch normalisation%s vs one rank after 2 steps: max |dw| %.3g, relative L2 %.3g (%.3g "
                   "from the %s)\n", np, pooled ? " with the ranks' tokens pooled" : "", d, rel, rel_other,
                   pooled ? "unpooled" : "global normalisation");
            free(one), free(other);
        }
        free(dp);
    }
    MICRO_NORM = 0;
}

static int child_dp(int *argc, char ***argv, const char *mode) {
    vc_comm *c = NULL;
    if (vc_comm_init(argc, argv, "auto", &c)) {
        fprintf(stderr, "init failed: %s\n", vc_last_error());
        return 2;
    }
    int me = vc_comm_rank(c), np = vc_comm_size(c);
    const char *dir = getenv("VC_DP_DIR");
    size_t n = model_size(), moments = 0, mz = 0;
    if (!strcmp(mode, "resume")) {
        resume_and_compare(c, VC_SHARD_ZERO1, dir, "np 2 ZeRO-1");
        resume_and_compare(c, VC_SHARD_ZERO2, dir, "np 2 ZeRO-2");
        resume_and_compare(c, VC_SHARD_ZERO3, dir, "np 2 ZeRO-3");
        muon_resume(c, dir);
        goto done;
    }
    double loss_dp = 0, loss_1 = 0;
    float *dp = train(c, VC_SHARD_NONE, 0, 1, 0.5, 2, &loss_dp, &moments);
    float *z1 = train(c, VC_SHARD_ZERO1, 0, 1, 0.5, 2, NULL, &mz);
    float *loc = train(c, VC_SHARD_NONE, 1, 1, 0.5, 2, NULL, NULL);
    if (dp && z1 && loc) {
        CHECK_MSG(!memcmp(dp, z1, n * sizeof(float)), "rank %d: ZeRO-1 weights differ from plain DP", me);
        CHECK_MSG(!memcmp(dp, loc, n * sizeof(float)), "rank %d: local-mode weights differ from global mode", me);
        CHECK(moments == n && mz <= (n + np - 1) / np && mz + (n + np - 1) / np * (np - 1) >= n);
        printf("rank %d/%d: AdamW moments for %zu of %zu parameters (ZeRO-1), %zu (plain DP)\n", me, np, mz, n,
               moments);
    }
    if (dp) zero2_checks(c, dp, n);
    /* gradient buckets reduced on a communication thread during the last backward: the same bits */
    OVERLAP = 1;
    float *ov = train(c, VC_SHARD_NONE, 0, 1, 0.5, 2, NULL, NULL);
    float *ovz = train(c, VC_SHARD_ZERO1, 0, 1, 0.5, 2, NULL, NULL);
    float *ovl = train(c, VC_SHARD_ZERO1, 1, 1, 0.5, 2, NULL, NULL);
    /* gradient checkpointing: the recompute node writes its layer's weight gradients (it declares them), so
     * buckets still become final during backward; the same bits */
    CKPT = 1;
    float *ovc = train(c, VC_SHARD_ZERO1, 0, 1, 0.5, 2, NULL, NULL);
    CKPT = 0;
    if (dp && ovc) CHECK_MSG(!memcmp(dp, ovc, n * sizeof(float)), "rank %d: overlap + checkpointing differs", me);
    free(ovc);
    /* 2 micro-batches of 4 sequences: with 4 ranks, ranks 2 and 3 run none and reduce at the same point */
    float *ovb = train(c, VC_SHARD_ZERO1, 0, 4, 0.5, 2, NULL, NULL);
    OVERLAP = 0;
    float *big = train(c, VC_SHARD_NONE, 0, 4, 0.5, 2, NULL, NULL);
    if (big && ovb)
        CHECK_MSG(!memcmp(big, ovb, n * sizeof(float)), "rank %d: overlapped ZeRO-1 with idle ranks differs", me);
    free(big);
    free(ovb);
    if (dp && ov && ovz && ovl) {
        CHECK_MSG(!memcmp(dp, ov, n * sizeof(float)), "rank %d: overlapped DP weights differ from plain DP", me);
        CHECK_MSG(!memcmp(dp, ovz, n * sizeof(float)), "rank %d: overlapped ZeRO-1 weights differ from DP", me);
        CHECK_MSG(!memcmp(dp, ovl, n * sizeof(float)), "rank %d: overlapped local ZeRO-1 weights differ", me);
        if (me == 0)
            printf("np %d: overlapped gradient reduction (DP, ZeRO-1, local ZeRO-1; ZeRO-1 with idle ranks) bitwise "
                   "equal to the non-overlapped runs\n", np);
    }
    free(ov);
    free(ovz);
    free(ovl);
    if (me == 0 && dp) {
        float *one = train(NULL, VC_SHARD_NONE, 0, 1, 0.5, 2, &loss_1, NULL);
        double rel = 1, d = one ? max_abs_diff(one, dp, n, &rel) : 1;
        CHECK_MSG(one && d < 1e-5 && rel < 1e-5, "np %d vs one rank: max |dw| %.3g, rel %.3g", np, d, rel);
        CHECK_NEAR(loss_dp, loss_1, 1e-6 * fabs(loss_1));
        printf("np %d: plain DP vs one rank after 2 steps: max |dw| = %.3g, relative L2 %.3g, loss %.9g vs %.9g "
               "(%s); ZeRO-1 and local mode bitwise equal to DP\n", np, d, rel, loss_dp, loss_1,
               memcmp(one, dp, n * sizeof(float)) ? "not bitwise" : "bitwise");
        free(one);
    }
    free(dp);
    free(z1);
    free(loc);
    /* Muon with its groups shared out over the ranks (each orthogonalised on one, broadcast to the others; the
     * weights' hash checked equal on every rank each step): the same update as one rank computing them all */
    MUON = 1;
    float *mu = train(c, VC_SHARD_NONE, 0, 1, 0.5, 2, NULL, NULL);
    vc_model *mm = load_model();
    vc_trainer_config mc;
    config(&mc, c, VC_SHARD_ZERO1, 1, 0.5);
    vc_trainer mt;
    CHECK(mm && vc_trainer_init(&mt, mm, &mc) == VC_ERR_UNSUPPORTED && strstr(vc_last_error(), "zero_stage=0"));
    vc_model_free(mm);
    if (me == 0 && mu) {
        float *mu1 = train(NULL, VC_SHARD_NONE, 0, 1, 0.5, 2, NULL, NULL);
        double rel = 1, d = mu1 ? max_abs_diff(mu1, mu, n, &rel) : 1;
        CHECK_MSG(mu1 && d < 1e-5 && rel < 1e-5, "Muon np %d vs one rank: max |dw| %.3g, rel %.3g", np, d, rel);
        printf("np %d: Muon with its Newton-Schulz groups shared out vs one rank after 2 steps: max |dw| = %.3g, "
               "relative L2 %.3g\n", np, d, rel);
        free(mu1);
    }
    micro_norm_checks(c, n);
    same_micro_count_checks(c);
    size_t whole = STATE; /* every rank keeps the whole state */
    LAYERWISE = 1;
    float *lw = train(c, VC_SHARD_NONE, 0, 1, 0.5, 2, NULL, NULL);
    double held = (double)STATE, most = held, sum = held;
    CHECK_OK(vc_comm_allreduce_f64(c, &sum, 1, VC_SUM));
    CHECK_OK(vc_comm_allreduce_f64(c, &most, 1, VC_MAX));
    /* the largest first, each to the least loaded rank: at most 1/N of the whole plus one tensor */
    CHECK_MSG(sum == (double)whole && most < (double)whole && most <= (double)whole / np + (double)BIGGEST,
              "layer-wise Muon: rank %d holds %.0f of %zu state floats "
              "(%.0f on all ranks, %.0f on the fullest)", me, held, whole, sum, most);
    if (mu && lw) CHECK_MSG(!memcmp(mu, lw, n * sizeof(float)), "rank %d: layer-wise Muon's weights differ", me);
    if (me == 0)
        printf("np %d: layer-wise Muon: bitwise the weights of the shared-out run; state per rank %.0f floats on the "
               "fullest rank, %.2f of the whole %zu (1/N = %.2f)\n", np, most, most / (double)whole, whole, 1.0 / np);
    LAYERWISE = MUON = 0;
    free(lw);
    free(mu);
    if (!strcmp(mode, "dp_save")) {
        save_and_continue(c, dir, VC_SHARD_ZERO2);
        resume_and_compare(c, VC_SHARD_NONE, dir, "np 4 plain DP");
        MUON = LAYERWISE = 1;
        char lw[PATH_MAX];
        snprintf(lw, sizeof lw, "%s_muon", dir);
        save_and_continue(c, lw, VC_SHARD_NONE);
        MUON = LAYERWISE = 0;
        muon_resume(c, dir);
    }
done:
    fflush(stdout);
    int rc = vc_test_done();
    vc_comm_free(c);
    return rc;
}

static int FAULT_DEAD;
static vc_status fault_loss(void *ctx, vc_graph *g, const vc_micro_batch *mb, vc_tensor *logp, vc_tensor *ent,
                            vc_tensor **loss) {
    vc_comm *c = ctx;
    (void)ent;
    if (vc_comm_rank(c) == 1) {
        if (FAULT_DEAD) raise(SIGKILL);
        sleep(30);
    }
    float *w = vc_graph_alloc(g, sizeof(float) * (size_t)mb->n_tokens, 0);
    if (!w) return VC_ERR_NOMEM;
    for (int64_t t = 0; t < mb->n_tokens; t++) w[t] = -mb->weight[t];
    *loss = vc_op_dot_const(g, logp, w);
    return VC_OK;
}

static int child_fault(int *argc, char ***argv, int dead) {
    vc_comm *c = NULL;
    if (vc_comm_init(argc, argv, "auto", &c)) return 2;
    FAULT_DEAD = dead;
    vc_model *m = load_model();
    vc_trainer t;
    vc_trainer_config cfg;
    config(&cfg, c, VC_SHARD_ZERO1, 1, 1.0);
    vc_minibatch b;
    make_batch(&b);
    vc_step_stats st;
    if (!m || vc_trainer_init(&t, m, &cfg)) return 2;
    double t0 = vc_now();
    vc_status rc = vc_trainer_step(&t, &b, fault_loss, c, &st);
    double dt = vc_now() - t0;
    printf("FAULT rank %d: %s after %.2f s: %s\n", vc_comm_rank(c), vc_status_name(rc), dt, vc_last_error());
    if (rc == VC_ERR_TIMEOUT && strstr(vc_last_error(), "rank 0: ") && dt < 4) printf("TIMEOUT-OK\n");
    fflush(stdout);
    vc_trainer_free(&t);
    vc_model_free(m);
    vc_comm_free(c);
    return rc ? 3 : 0;
}

/* ---- launcher (as tests/dist/test_dist.c) ---- */

static int run_mpi(const char *mpirun, int np, const char *mode, const char *log, double limit, double *secs) {
    static const char *const env[] = { "VC_DP_DIR", "VC_DP_MODEL", "VERLC_DIST_TIMEOUT", NULL };
    return vc_test_run_mpi(mpirun, np, "VC_DP_TEST_MODE", mode, env, log, limit, secs);
}

static void show_log(const char *log, int always) {
    char *text = NULL;
    size_t len = 0;
    if (vc_read_file(log, &text, &len) == VC_OK) fprintf(always ? stdout : stderr, "---- %s ----\n%s----\n", log, text);
    free(text);
}

static void test_mpi_runs(void) {
    const char *mpirun = getenv("VERLC_MPIRUN");
    if (!mpirun || !*mpirun) mpirun = "mpirun";
    if (!vc_comm_available("mpi")) { printf("MPI runs skipped: this build has no MPI\n"); return; }
    if (!vc_test_on_path(mpirun)) { printf("MPI runs skipped: %s not found\n", mpirun); return; }
    char dir[] = "/tmp/vc_dp_test_XXXXXX", log[PATH_MAX + 16], run[PATH_MAX + 16], cmd[PATH_MAX + 64];
    if (!mkdtemp(dir)) { CHECK(0); return; }
    snprintf(log, sizeof log, "%s/out.txt", dir);
    snprintf(run, sizeof run, "%s/run", dir);
    setenv("VC_DP_DIR", run, 1);
    char *old = getenv("LSAN_OPTIONS") ? vc_strdup(getenv("LSAN_OPTIONS")) : NULL, lsan[512];
    snprintf(lsan, sizeof lsan, "%s%sdetect_leaks=0", old && *old ? old : "", old && *old ? ":" : "");
    setenv("LSAN_OPTIONS", lsan, 1); /* Open MPI's plugin leaks: see tests/dist/test_dist.c */
    setenv("VERLC_DIST_TIMEOUT", "30", 1);
    double secs = 0;
    for (int np = 2; np <= 4; np += 2) {
        int rc = run_mpi(mpirun, np, np == 4 ? "dp_save" : "dp", log, 90, &secs);
        int ok = rc == 0 && vc_test_log_has(log, " 0 failed", np);
        CHECK_MSG(ok, "mpirun -np %d dp: exit %d", np, rc);
        show_log(log, !ok);
        printf("mpirun -np %d: data-parallel checks %s (%.1f s)\n", np, ok ? "pass" : "FAIL", secs);
    }
    int rc = run_mpi(mpirun, 2, "resume", log, 60, &secs);
    int ok = rc == 0 && vc_test_log_has(log, " 0 failed", 2);
    CHECK_MSG(ok, "mpirun -np 2 resume: exit %d", rc);
    show_log(log, !ok);
    /* one rank, no communicator, from the same 4-rank checkpoint; then export it to a HF dir */
    resume_and_compare(NULL, VC_SHARD_NONE, run, "one rank");
    muon_resume(NULL, run);
    corrupt_shard(run);
    char hf[PATH_MAX + 16], ck[PATH_MAX + 16];
    snprintf(hf, sizeof hf, "%s/hf", dir);
    snprintf(ck, sizeof ck, "%s/step_1", run);
    CHECK_OK(vc_train_export(ck, hf, -1));
    vc_model *m = NULL;
    CHECK_OK(vc_model_load(hf, &m));
    vc_model_free(m);
    setenv("VERLC_DIST_TIMEOUT", "2", 1);
    rc = run_mpi(mpirun, 2, "stuck", log, 20, &secs);
    ok = rc != 0 && rc != -1 && vc_test_log_has(log, "TIMEOUT-OK", 1) && secs < 12;
    CHECK_MSG(ok, "hung rank: exit %d after %.1f s", rc, secs);
    show_log(log, !ok);
    printf("rank 1 hung in its backward: rank 0 timed out and the job ended in %.1f s %s\n", secs,
           ok ? "(pass)" : "(FAIL)");
    rc = run_mpi(mpirun, 2, "dead", log, 20, &secs);
    ok = rc != 0 && rc != -1 && secs < 12;
    CHECK_MSG(ok, "killed rank: exit %d after %.1f s", rc, secs);
    show_log(log, !ok);
    printf("rank 1 killed mid-step: the job ended with status %d in %.1f s %s\n", rc, secs, ok ? "(pass)" : "(FAIL)");
    unsetenv("VERLC_DIST_TIMEOUT");
    unsetenv("VC_DP_DIR");
    if (old) setenv("LSAN_OPTIONS", old, 1);
    else unsetenv("LSAN_OPTIONS");
    free(old);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
}

/* ---- one process ---- */
static void test_single(void) {
    int s = -1;
    CHECK_OK(vc_sharding_parse("zero1", &s));
    CHECK(s == VC_SHARD_ZERO1);
    CHECK_OK(vc_sharding_parse("none", &s));
    CHECK(s == VC_SHARD_NONE);
    CHECK_OK(vc_sharding_parse("zero2", &s));
    CHECK(s == VC_SHARD_ZERO2);
    CHECK_OK(vc_sharding_parse("zero3", &s));
    CHECK(s == VC_SHARD_ZERO3);
    CHECK(vc_sharding_parse("zero4", &s) == VC_ERR_ARG);
    /* a one-rank communicator changes nothing */
    vc_comm *c = NULL;
    setenv("VERLC_DIST", "single", 1);
    CHECK_OK(vc_comm_init(NULL, NULL, "auto", &c));
    unsetenv("VERLC_DIST");
    size_t n = model_size();
    float *a = train(NULL, VC_SHARD_NONE, 0, 2, 0.5, 2, NULL, NULL);
    float *b = train(c, VC_SHARD_ZERO1, 0, 2, 0.5, 2, NULL, NULL);
    float *z = train(c, VC_SHARD_ZERO2, 0, 2, 0.5, 2, NULL, NULL); /* one rank: nothing to shard */
    float *z3 = train(c, VC_SHARD_ZERO3, 0, 2, 0.5, 2, NULL, NULL);
    CHECK(a && b && z && z3 && !memcmp(a, b, n * sizeof(float)) && !memcmp(a, z, n * sizeof(float)) &&
          !memcmp(a, z3, n * sizeof(float)));
    free(z3);
    free(a);
    free(b);
    free(z);
    vc_comm_free(c);
}

int main(int argc, char **argv) {
    const char *env = getenv("VC_DP_MODEL");
    if (env && *env) snprintf(MODEL, sizeof MODEL, "%s", env);
    else snprintf(MODEL, sizeof MODEL, "%s/fixtures/models/qwen3", vc_test_shared());
    char abs[PATH_MAX];
    if (realpath(MODEL, abs)) snprintf(MODEL, sizeof MODEL, "%s", abs); /* absolute for the checkpoint state */
    setenv("VC_DP_MODEL", MODEL, 1);
    /* the kernels' results depend on the thread count: one thread in every process, so that the one-rank
     * references here and in the ranks compute the same micro-batch gradients */
    vc_set_threads(1);
    /* by hand: VC_DP_DEVICE=sim runs everything on the poisoned-pointer backend (mpirun passes the env) */
    const char *dev = getenv("VC_DP_DEVICE");
    if (dev && *dev && vc_device_select(dev, "VC_DP_DEVICE")) {
        fprintf(stderr, "%s\n", vc_last_error());
        return 2;
    }
    const char *mode = getenv("VC_DP_TEST_MODE");
    if (mode && (!strcmp(mode, "dp") || !strcmp(mode, "dp_save") || !strcmp(mode, "resume")))
        return child_dp(&argc, &argv, mode);
    if (mode && !strcmp(mode, "stuck")) return child_fault(&argc, &argv, 0);
    if (mode && !strcmp(mode, "dead")) return child_fault(&argc, &argv, 1);
    test_single();
    test_mpi_runs();
    return vc_test_done();
}
