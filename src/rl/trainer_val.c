/* Validation (verl's _validate): generate for every val prompt with val_kwargs (greedy by default),
 * score, and report the mean per data source: val-core/<data_source>/acc/mean@<n>. */
#include "trainer_internal.h"
#include <stdlib.h>
#include <string.h>

#define VAL_CHUNK 64

typedef struct ds_acc {
    const char *name;
    double sum, n, len;
} ds_acc;

static ds_acc *ds_find(ds_acc *a, int *na, const char *name) {
    for (int i = 0; i < *na; i++)
        if (!strcmp(a[i].name, name)) return &a[i];
    a[*na] = (ds_acc){ name, 0, 0, 0 };
    return &a[(*na)++];
}

/* data parallel: rank r generates for the contiguous block r of the prompts; the per-source sums are
 * reduced over the ranks (the sources are listed from the whole dataset, so every rank has the same) */
vc_status rl_validate(vc_rl_trainer *t, rl_metrics *met) {
    const vc_rl_dataset *d = t->val;
    if (!d) return VC_OK;
    double t0 = vc_now();
    ds_acc *acc = vc_calloc(d->n + 1, sizeof *acc);
    uint32_t *idx = vc_calloc(VAL_CHUNK, sizeof *idx);
    double *sums = vc_calloc(3 * d->n + 1, sizeof *sums);
    vc_status st = acc && idx && sums ? VC_OK : VC_ERR_NOMEM;
    int na = 0, lo = 0, hi = (int)d->n;
    rl_dump *dump = NULL;
    for (size_t i = 0; !st && i < d->n; i++) ds_find(acc, &na, d->p[i].data_source);
    rl_dist_block(t, (int)d->n, &lo, &hi);
    for (size_t s = (size_t)lo; !st && s < (size_t)hi; s += VAL_CHUNK) {
        int n = (int)((size_t)hi - s < VAL_CHUNK ? (size_t)hi - s : VAL_CHUNK);
        for (int i = 0; i < n; i++) idx[i] = (uint32_t)(s + i);
        rl_batch b;
        /* validation streams are keyed apart from training steps */
        st = rl_rollout_batch(t, d, idx, n, &t->val_samp, t->val_n, 0xFFFFFFFF00000000ull + (uint64_t)t->step, &b);
        if (st) break;
        st = rl_score_batch(t, d, &b, NULL);
        if (!st && t->val_dir) st = rl_dump_add(t, d, &b, &dump);
        for (int i = 0; !st && i < b.B; i++) {
            ds_acc *a = ds_find(acc, &na, d->p[b.prompt[i]].data_source);
            a->sum += b.score[i];
            a->n += 1;
            a->len += (double)b.rlen[i];
        }
        rl_batch_free(&b);
    }
    for (int i = 0; !st && i < na; i++) sums[3 * i] = acc[i].sum, sums[3 * i + 1] = acc[i].n, sums[3 * i + 2] = acc[i].len;
    if (t->val_dir) { /* every rank joins the dump's collectives, failed or not */
        vc_status ds = rl_dist_agree(t, st, t->val_dir);
        if (!ds) ds = rl_dump_write(t, dump, t->val_dir);
        else rl_dump_free(dump);
        if (!st) st = ds;
    }
    if (!st) st = rl_dist_reduce(t, sums, 3 * na, VC_SUM);
    for (int i = 0; !st && i < na; i++) {
        double n = sums[3 * i + 1] > 0 ? sums[3 * i + 1] : 1;
        rl_metrics_setf(met, sums[3 * i] / n, "val-core/%s/acc/mean@%d", acc[i].name, t->val_n);
        rl_metrics_setf(met, sums[3 * i] / n, "val-aux/%s/reward/mean@%d", acc[i].name, t->val_n);
        rl_metrics_setf(met, sums[3 * i + 2] / n, "val-aux/%s/response_length/mean", acc[i].name);
    }
    rl_metrics_set(met, "timing_s/testing", vc_now() - t0);
    free(acc);
    free(idx);
    free(sums);
    return st ? vc_fail_ctx(st, "validation") : VC_OK;
}
