/* Validation (verl's _validate): generate for every val prompt with val_kwargs (greedy by default),
 * score, and report verl's metrics per data source (val_metrics.c: val-core/<data_source>/acc/mean@<n>,
 * best@k, maj@k, ...), the mean response length, and with multi-turn rollouts val-aux/num_turns. */
#include "trainer_internal.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define VAL_CHUNK 64

typedef struct ds_acc {
    const char *name;
    double n, len;
} ds_acc;

static ds_acc *ds_find(ds_acc *a, int *na, const char *name) {
    for (int i = 0; i < *na; i++)
        if (!strcmp(a[i].name, name)) return &a[i];
    a[*na] = (ds_acc){ name, 0, 0 };
    return &a[(*na)++];
}

/* verl's val-aux/num_turns/{min,max,mean} over every rank's validation responses */
static vc_status val_turns(vc_rl_trainer *t, double turns[4], rl_metrics *met) {
    vc_status st = rl_dist_reduce(t, turns, 2, VC_SUM);
    if (!st) st = rl_dist_reduce(t, turns + 2, 1, VC_MIN);
    if (!st) st = rl_dist_reduce(t, turns + 3, 1, VC_MAX);
    if (st || !(turns[1] > 0)) return st;
    rl_metrics_set(met, "val-aux/num_turns/min", turns[2]);
    rl_metrics_set(met, "val-aux/num_turns/max", turns[3]);
    rl_metrics_set(met, "val-aux/num_turns/mean", turns[0] / turns[1]);
    return VC_OK;
}

/* this rank's samples for val_metrics.c: grown chunk by chunk */
typedef struct {
    rl_val_sample *s;
    cJSON **info;
    int n, cap;
} val_set;

static vc_status val_add(val_set *v, const vc_rl_dataset *d, const rl_batch *b, cJSON **info) {
    if (v->n + b->B > v->cap) {
        int cap = (v->n + b->B) * 2;
        rl_val_sample *s = realloc(v->s, sizeof *s * (size_t)cap);
        if (s) v->s = s;
        cJSON **in = s ? realloc(v->info, sizeof *in * (size_t)cap) : NULL;
        if (!in) return VC_ERR_NOMEM;
        v->info = in, v->cap = cap;
    }
    for (int i = 0; i < b->B; i++) {
        v->info[v->n] = info[i];
        info[i] = NULL;
        v->s[v->n] = (rl_val_sample){ d->p[b->prompt[i]].data_source, (uint64_t)b->prompt[i], b->score[i], v->info[v->n] };
        v->n++;
    }
    return VC_OK;
}

static void val_free(val_set *v) {
    for (int i = 0; i < v->n; i++) cJSON_Delete(v->info[i]);
    free(v->s);
    free(v->info);
}

/* data parallel: rank r generates for the contiguous block r of the prompts; the per-source sums are
 * reduced over the ranks (the sources are listed from the whole dataset, so every rank has the same) */
vc_status rl_validate(vc_rl_trainer *t, rl_metrics *met) {
    const vc_rl_dataset *d = t->val;
    if (!d) return VC_OK;
    double t0 = vc_now();
    ds_acc *acc = vc_calloc(d->n + 1, sizeof *acc);
    /* data.val_batch_size prompts per batch over all ranks: this rank's share of it */
    size_t chunk = t->val_batch > 0 ? (size_t)((t->val_batch + t->world - 1) / t->world) : VAL_CHUNK;
    uint32_t *idx = vc_calloc(chunk, sizeof *idx);
    double *sums = vc_calloc(2 * d->n + 1, sizeof *sums), turns[4] = { 0, 0, INFINITY, -INFINITY };
    vc_status st = acc && idx && sums ? VC_OK : VC_ERR_NOMEM;
    int na = 0, lo = 0, hi = (int)d->n;
    rl_dump *dump = NULL, *gen = NULL; /* validation_data_dir's lines, log_val_generations' */
    val_set vs = { 0 };
    for (size_t i = 0; !st && i < d->n; i++) ds_find(acc, &na, d->p[i].data_source);
    rl_dist_block(t, (int)d->n, &lo, &hi);
    for (size_t s = (size_t)lo; !st && s < (size_t)hi; s += chunk) {
        int n = (int)((size_t)hi - s < chunk ? (size_t)hi - s : chunk);
        for (int i = 0; i < n; i++) idx[i] = (uint32_t)(s + i);
        rl_batch b;
        /* validation streams are keyed apart from training steps */
        st = rl_rollout_batch(t, d, idx, n, &t->val_samp, t->val_n, 0xFFFFFFFF00000000ull + (uint64_t)t->step, &b);
        if (st) break;
        if (t->agent) rl_agent_turns(t, turns);
        cJSON **info = vc_calloc((size_t)b.B + 1, sizeof *info);
        st = info ? rl_score_batch(t, d, &b, NULL, info) : VC_ERR_NOMEM;
        if (!st && t->val_dir) st = rl_dump_add(t, d, &b, info, &dump);
        if (!st && t->log_val_gen > 0) st = rl_dump_add(t, d, &b, info, &gen);
        if (!st) st = val_add(&vs, d, &b, info);
        for (int i = 0; !st && i < b.B; i++) {
            ds_acc *a = ds_find(acc, &na, d->p[b.prompt[i]].data_source);
            a->n += 1;
            a->len += (double)b.rlen[i];
        }
        for (int i = 0; info && i < b.B; i++) cJSON_Delete(info[i]);
        free(info);
        rl_batch_free(&b);
    }
    for (int i = 0; !st && i < na; i++) sums[2 * i] = acc[i].n, sums[2 * i + 1] = acc[i].len;
    if (t->val_dir) { /* every rank joins the dump's collectives, failed or not */
        vc_status ds = rl_dist_agree(t, st, t->val_dir);
        if (!ds) ds = rl_dump_write(t, dump, t->val_dir);
        else rl_dump_free(dump);
        if (!st) st = ds;
    }
    st = rl_dist_agree(t, st, "validation"); /* a failed rank must not leave the others in a collective */
    if (!st && t->log_val_gen > 0) st = rl_log_val_generations(t, gen);
    else rl_dump_free(gen);
    if (!st) st = rl_val_metrics(t->world > 1 ? t->comm : NULL, vs.s, vs.n, met);
    if (!st) st = rl_dist_reduce(t, sums, 2 * na, VC_SUM);
    for (int i = 0; !st && i < na; i++)
        rl_metrics_setf(met, sums[2 * i + 1] / (sums[2 * i] > 0 ? sums[2 * i] : 1), "val-aux/%s/response_length/mean",
                        acc[i].name);
    if (!st && t->agent) st = val_turns(t, turns, met);
    rl_metrics_set(met, "timing_s/testing", vc_now() - t0);
    val_free(&vs);
    free(acc);
    free(idx);
    free(sums);
    rl_images_drop(&t->val_img);
    return st ? vc_fail_ctx(st, "validation") : VC_OK;
}
