/* verl's validation metrics (metric_utils.process_validation_metrics and RayPPOTrainer._val_metrics_update):
 * per data source, per variable (the reward, and every number the reward function reported: `acc`, or a
 * custom program's keys) and per prompt: mean@n and std@n of its n responses; for k = 2, 4, 8, ... < n
 * and n, best@k and worst@k (mean and std over 1000 bootstrap draws of k responses with replacement) and,
 * when the reward reported a `pred`, maj@k (the value of the most frequent prediction's first response).
 * The draws are numpy's: np.random.seed(42) (MT19937) then np.random.choice(n, (1000, k)), the same for
 * every prompt, as verl reseeds per call. Each metric is then averaged over the prompts of its data
 * source and named val-core/<source>/<var>/<metric> for the core variable's (acc if reported, else reward)
 * mean, maj and best at the largest n, val-aux/... otherwise. With several ranks each rank holds whole
 * prompts; the per-metric sums and counts are gathered to every rank. */
#define _GNU_SOURCE /* qsort_r */
#include "verlc/rng.h"
#include "trainer_internal.h"
#include "verlc/dist.h"
#include "verlc/report.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define N_BOOT 1000

/* idx[N_BOOT * k] in [0, n): np.random.seed(42) then np.random.choice(n, (N_BOOT, k)) (legacy randint draws) */
static void boot_indices(int n, int k, int *idx) {
    vc_np_mt19937 m;
    vc_np_seed(&m, 42);
    for (int i = 0; i < N_BOOT * k; i++) idx[i] = (int)vc_np_interval(&m, (uint64_t)(n - 1));
}

/* mean and population std (np.mean, np.std) of x[n] */
static void mean_std(const double *x, int n, double *mean, double *std) {
    double s = 0, q = 0;
    for (int i = 0; i < n; i++) s += x[i];
    *mean = s / n;
    for (int i = 0; i < n; i++) q += (x[i] - *mean) * (x[i] - *mean);
    *std = sqrt(q / n);
}

/* ---- the metric table: (source, var, metric) -> sum and count over prompts ---- */
typedef struct {
    char *key; /* "source\tvar\tmetric" */
    double sum, n;
} vm_entry;

typedef struct {
    vm_entry *e;
    int n, cap;
} vm_table;

static vc_status vm_add(vm_table *t, const char *ds, const char *var, const char *metric, double v, double count) {
    size_t len = strlen(ds) + strlen(var) + strlen(metric) + 3;
    char *key = vc_malloc(len);
    if (!key) return VC_ERR_NOMEM;
    snprintf(key, len, "%s\t%s\t%s", ds, var, metric);
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->e[i].key, key)) {
            t->e[i].sum += v, t->e[i].n += count;
            free(key);
            return VC_OK;
        }
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 64;
        vm_entry *e = realloc(t->e, sizeof *e * (size_t)cap);
        if (!e) {
            free(key);
            return VC_ERR_NOMEM;
        }
        t->e = e, t->cap = cap;
    }
    t->e[t->n++] = (vm_entry){ key, v, count };
    return VC_OK;
}

static void vm_free(vm_table *t) {
    for (int i = 0; i < t->n; i++) free(t->e[i].key);
    free(t->e);
}

/* ---- one prompt's responses ---- */
/* value of variable `var` for sample r (reward, or a number / bool in the info); 0 when absent */
static int value_of(const rl_val_sample *s, const char *var, double *v) {
    if (!strcmp(var, "reward")) {
        *v = s->reward;
        return 1;
    }
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(s->info, var);
    if (cJSON_IsNumber(x)) *v = x->valuedouble;
    else if (cJSON_IsBool(x)) *v = cJSON_IsTrue(x) ? 1.0 : 0.0;
    else return 0;
    return 1;
}

static const char *pred_of(const rl_val_sample *s) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(s->info, "pred");
    return cJSON_IsString(p) ? p->valuestring : NULL; /* NULL: Python's None, a vote of its own */
}

static int same_vote(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

/* maj@k of one draw: the first value of the most frequent prediction (ties: the first seen) */
static double majority(const double *val, const char *const *pred, const int *draw, int k) {
    int best = -1, best_cnt = 0;
    for (int i = 0; i < k; i++) {
        int seen = 0, cnt = 0;
        for (int j = 0; j < i && !seen; j++) seen = same_vote(pred[draw[j]], pred[draw[i]]);
        if (seen) continue;
        for (int j = i; j < k; j++) cnt += same_vote(pred[draw[j]], pred[draw[i]]);
        if (cnt > best_cnt) best = i, best_cnt = cnt;
    }
    return val[draw[best]];
}

static vc_status var_metrics(vm_table *t, const char *ds, const char *var, const double *val,
                             const char *const *pred, int n) {
    char name[64];
    double mean, sd;
    mean_std(val, n, &mean, &sd);
    snprintf(name, sizeof name, "mean@%d", n);
    vc_status st = vm_add(t, ds, var, name, mean, 1);
    if (st || n <= 1) return st;
    snprintf(name, sizeof name, "std@%d", n);
    if ((st = vm_add(t, ds, var, name, sd, 1))) return st;
    double *best = vc_malloc(sizeof(double) * 3 * N_BOOT);
    int *idx = vc_malloc(sizeof(int) * (size_t)N_BOOT * (size_t)n);
    if (!best || !idx) st = VC_ERR_NOMEM;
    for (int k = 2; !st; k = k * 2 < n ? k * 2 : n) {
        double *worst = best + N_BOOT, *maj = best + 2 * N_BOOT, m;
        boot_indices(n, k, idx);
        for (int b = 0; b < N_BOOT; b++) {
            const int *d = idx + (size_t)b * k;
            double hi = val[d[0]], lo = val[d[0]];
            for (int j = 1; j < k; j++) hi = fmax(hi, val[d[j]]), lo = fmin(lo, val[d[j]]);
            best[b] = hi, worst[b] = lo;
            if (pred) maj[b] = majority(val, pred, d, k);
        }
        const char *kind[3] = { "best", "worst", "maj" };
        for (int c = 0; c < (pred ? 3 : 2) && !st; c++) {
            mean_std(best + c * N_BOOT, N_BOOT, &m, &sd);
            snprintf(name, sizeof name, "%s@%d/mean", kind[c], k);
            st = vm_add(t, ds, var, name, m, 1);
            snprintf(name, sizeof name, "%s@%d/std", kind[c], k);
            if (!st) st = vm_add(t, ds, var, name, sd, 1);
        }
        if (k == n) break;
    }
    free(best);
    free(idx);
    return st;
}

/* the variables of one prompt: reward, then the info's numeric keys in order of first appearance (a
 * variable every response reports; strings are not averaged) */
static vc_status prompt_metrics(vm_table *t, const rl_val_sample *s, const int *rows, int n) {
    double *val = vc_malloc(sizeof(double) * (size_t)n);
    const char **pred = vc_malloc(sizeof(char *) * (size_t)n);
    const char **vars = vc_malloc(sizeof(char *) * 64);
    if (!val || !pred || !vars) {
        free(val), free(pred), free(vars);
        return VC_ERR_NOMEM;
    }
    int nv = 0, has_pred = 1;
    vars[nv++] = "reward";
    for (int i = 0; i < n; i++) {
        has_pred &= cJSON_GetObjectItemCaseSensitive(s[rows[i]].info, "pred") != NULL;
        pred[i] = pred_of(&s[rows[i]]);
        for (const cJSON *c = s[rows[i]].info ? s[rows[i]].info->child : NULL; c && nv < 64; c = c->next) {
            int dup = 0;
            for (int v = 0; v < nv && !dup; v++) dup = !strcmp(vars[v], c->string);
            if (!dup && (cJSON_IsNumber(c) || cJSON_IsBool(c))) vars[nv++] = c->string;
        }
    }
    vc_status st = VC_OK;
    for (int v = 0; v < nv && !st; v++) {
        int all = 1;
        for (int i = 0; i < n && all; i++) all = value_of(&s[rows[i]], vars[v], &val[i]);
        if (all) st = var_metrics(t, s[rows[0]].data_source, vars[v], val, has_pred ? pred : NULL, n);
    }
    free(val), free(pred), free(vars);
    return st;
}

static int cmp_sample(const void *a, const void *b, void *ctx) {
    const rl_val_sample *s = ctx;
    const rl_val_sample *x = &s[*(const int *)a], *y = &s[*(const int *)b];
    int c = strcmp(x->data_source, y->data_source);
    if (c) return c;
    if (x->uid != y->uid) return x->uid < y->uid ? -1 : 1;
    return *(const int *)a - *(const int *)b;
}

/* ---- all ranks' sums, merged in rank order ---- */
static vc_status vm_serialize(const vm_table *t, char **out, size_t *len) {
    vc_strbuf b = { 0 };
    vc_sb_puts(&b, "");
    for (int i = 0; i < t->n; i++) vc_sb_printf(&b, "%s\t%.17g\t%.17g\n", t->e[i].key, t->e[i].sum, t->e[i].n);
    if (b.oom || !b.p) {
        free(b.p);
        return VC_ERR_NOMEM;
    }
    *len = b.n;
    *out = b.p;
    return VC_OK;
}

static vc_status vm_merge_text(vm_table *t, char *text, size_t len) {
    vc_status st = VC_OK;
    for (char *p = text, *end = text + len; !st && p < end;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) break;
        *nl = 0;
        char *f[5] = { p };
        for (int k = 1; k < 5 && f[k - 1]; k++) {
            char *tab = strchr(f[k - 1], '\t');
            if (tab) *tab = 0;
            f[k] = tab ? tab + 1 : NULL;
        }
        if (!f[4]) return vc_fail(VC_ERR_INTERNAL, "validation metrics: a malformed record from a rank");
        st = vm_add(t, f[0], f[1], f[2], strtod(f[3], NULL), strtod(f[4], NULL));
        p = nl + 1;
    }
    return st;
}

static vc_status vm_gather(vc_comm *comm, vm_table *local, vm_table *all) {
    char *mine = NULL;
    size_t len = 0, *sizes = NULL;
    void *every = NULL;
    vc_status st = vm_serialize(local, &mine, &len);
    if (!st) st = vc_comm_gatherv_bytes(comm, mine, len, &every, &sizes, -1);
    if (!st) {
        size_t tot = 0;
        for (int r = 0; r < vc_comm_size(comm); r++) tot += sizes[r];
        st = vm_merge_text(all, every, tot);
    }
    free(mine), free(every), free(sizes);
    return st;
}

/* ---- naming: verl's _val_metrics_update ---- */
static int n_of(const char *metric) {
    const char *at = strchr(metric, '@');
    return at ? atoi(at + 1) : 0;
}

static void vm_publish(const vm_table *t, rl_metrics *met) {
    for (int i = 0; i < t->n; i++) {
        char key[512];
        snprintf(key, sizeof key, "%s", t->e[i].key);
        char *ds = key, *var = strchr(ds, '\t');
        *var++ = 0;
        char *metric = strchr(var, '\t');
        *metric++ = 0;
        /* the core variable of the source: acc when reported, else reward; n_max over the variable's metrics */
        int has_acc = 0, n_max = 0;
        size_t dl = strlen(ds), vl = strlen(var);
        for (int j = 0; j < t->n; j++) {
            const char *k = t->e[j].key;
            if (strncmp(k, ds, dl) || k[dl] != '\t') continue;
            has_acc |= !strncmp(k + dl + 1, "acc\t", 4);
            if (!strncmp(k + dl + 1, var, vl) && k[dl + 1 + vl] == '\t' && n_of(k + dl + vl + 2) > n_max)
                n_max = n_of(k + dl + vl + 2);
        }
        char at[24];
        snprintf(at, sizeof at, "@%d", n_max);
        int core = !strcmp(var, has_acc ? "acc" : "reward") &&
                   (!strncmp(metric, "mean", 4) || !strncmp(metric, "maj", 3) || !strncmp(metric, "best", 4)) &&
                   strstr(metric, at);
        rl_metrics_setf(met, t->e[i].n > 0 ? t->e[i].sum / t->e[i].n : 0, "%s/%s/%s/%s", core ? "val-core" : "val-aux",
                        ds, var, metric);
    }
}

vc_status rl_val_metrics(vc_comm *comm, const rl_val_sample *s, int n, rl_metrics *met) {
    int *order = vc_malloc(sizeof(int) * (size_t)(n ? n : 1));
    vm_table local = { 0 }, all = { 0 };
    vc_status st = order ? VC_OK : VC_ERR_NOMEM;
    for (int i = 0; i < n && !st; i++) order[i] = i;
    if (!st) qsort_r(order, (size_t)n, sizeof(int), cmp_sample, (void *)s);
    for (int a = 0, b; a < n && !st; a = b) {
        for (b = a + 1; b < n && !strcmp(s[order[a]].data_source, s[order[b]].data_source) &&
                        s[order[a]].uid == s[order[b]].uid;
             b++) {
        }
        st = prompt_metrics(&local, s, order + a, b - a);
    }
    if (!st && comm && vc_comm_size(comm) > 1) st = vm_gather(comm, &local, &all);
    if (!st) vm_publish(comm && vc_comm_size(comm) > 1 ? &all : &local, met);
    vm_free(&local);
    vm_free(&all);
    free(order);
    return st ? vc_fail_ctx(st, "validation metrics") : VC_OK;
}
