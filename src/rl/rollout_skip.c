/* Later verl's skip.rollout (verl/utils/skip/rollout_skip.py): for the training steps listed in
 * skip.rollout.steps, the generation of the step is read from
 *   <dump_dir>/<experiment_name>_<project_name>/GBS<gen batch>_N<n>_in<prompt>_out<response>/<step>/
 * when it is there (action cache: that step's; repeat: that step's, else the nearest earlier step's, else the
 * nearest later one's), otherwise generated and written there, with meta.json {"global_steps": step}, as verl
 * does. verlc writes its own file beside verl's layout: gen_batch[.<round>].rank<r>.vcrows, the rows of this
 * rank's batch as balance_batch exchanges them (prompts, responses, rollout log-probs, decoded text); verl's
 * gen_batch.dp pickles are not read. A dump of another number of ranks is not used. */
#include "trainer_internal.h"
#include "verlc/json.h"
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char MAGIC[8] = "VCROWS2"; /* 2: rows carry their tools' images */

/* the project's dump directory */
static void project_dir(const vc_rl_trainer *t, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/%s_%s/GBS%d_N%d_in%lld_out%lld", t->skip_dir, t->exp_name, t->project_name,
             t->gen_prompts > 0 ? t->gen_prompts : t->batch_prompts, t->n, (long long)t->max_prompt,
             (long long)t->max_resp);
}

static void step_file(const vc_rl_trainer *t, int64_t step, int round, char *buf, size_t cap) {
    char dir[900];
    project_dir(t, dir, sizeof dir);
    if (round) snprintf(buf, cap, "%s/%lld/gen_batch.%d.rank%d.vcrows", dir, (long long)step, round, t->rank);
    else snprintf(buf, cap, "%s/%lld/gen_batch.rank%d.vcrows", dir, (long long)step, t->rank);
}

/* a step whose dump this rank can read (meta.json and its file, written by as many ranks) */
static int step_ready(const vc_rl_trainer *t, int64_t step, int round) {
    char p[1100], dir[900];
    project_dir(t, dir, sizeof dir);
    snprintf(p, sizeof p, "%s/%lld/meta.json", dir, (long long)step);
    cJSON *j = NULL;
    if (vc_json_load_file(p, &j)) return 0;
    const cJSON *w = cJSON_GetObjectItem(j, "verlc_world");
    int ok = cJSON_IsNumber(w) && w->valueint == t->world;
    cJSON_Delete(j);
    step_file(t, step, round, p, sizeof p);
    return ok && vc_file_exists(p);
}

/* repeat: this step, else the nearest earlier ready step, else the nearest later one (-1: none) */
static int64_t nearest(const vc_rl_trainer *t, int64_t step, int round) {
    if (step_ready(t, step, round)) return step;
    char dir[900];
    project_dir(t, dir, sizeof dir);
    DIR *d = opendir(dir);
    int64_t below = -1, above = -1;
    for (struct dirent *e; d && (e = readdir(d));) {
        char *end;
        long long s = strtoll(e->d_name, &end, 10);
        if (*end || end == e->d_name || !step_ready(t, s, round)) continue;
        if (s < step && s > below) below = s;
        if (s > step && (above < 0 || s < above)) above = s;
    }
    if (d) closedir(d);
    return below >= 0 ? below : above;
}

static vc_status load(vc_rl_trainer *t, int64_t step, int round, rl_batch *b) {
    char p[1100];
    step_file(t, step, round, p, sizeof p);
    char *data = NULL;
    size_t n = 0;
    vc_status st = vc_read_file(p, &data, &n);
    if (!st && (n < sizeof MAGIC || memcmp(data, MAGIC, sizeof MAGIC)))
        st = vc_fail(VC_ERR_FORMAT, "%s: not a verlc rollout dump", p);
    if (!st) st = rl_batch_rows_read(data + sizeof MAGIC, n - sizeof MAGIC, (int)t->max_resp, b);
    if (!st) b->imgs = rl_images_for(t, t->train);
    free(data);
    for (int i = 0; !st && i < b->B; i++) { /* the dump's prompts must be the data's (rewards index them) */
        int pi = b->prompt[i];
        const vc_rl_dataset *d = t->train;
        if (pi < 0 || (size_t)pi >= d->n || b->plen[i] != d->p[pi].len ||
            memcmp(b->ids + b->cu[i], d->p[pi].ids, sizeof(int32_t) * (size_t)b->plen[i]))
            st = vc_fail(VC_ERR_FORMAT, "row %d's prompt is not prompt %d of data.train_files (the data changed "
                         "since the dump)", i, pi);
        if (st) rl_batch_free(b);
    }
    return st ? vc_fail_ctx(st, "skip.rollout: %s", p) : VC_OK;
}

static vc_status dump(vc_rl_trainer *t, int64_t step, int round, const rl_batch *b) {
    char p[1100], dir[900];
    project_dir(t, dir, sizeof dir);
    snprintf(p, sizeof p, "%s/%lld", dir, (long long)step);
    vc_status st = vc_mkdirs(p);
    char *rows = NULL, *buf = NULL;
    size_t n = 0;
    if (!st) st = rl_batch_rows_write(b, &rows, &n);
    if (!st && !(buf = vc_malloc(n + sizeof MAGIC))) st = VC_ERR_NOMEM;
    if (!st) {
        memcpy(buf, MAGIC, sizeof MAGIC);
        memcpy(buf + sizeof MAGIC, rows, n);
        step_file(t, step, round, p, sizeof p);
        st = vc_write_file_atomic(p, buf, n + sizeof MAGIC);
    }
    free(rows);
    free(buf);
    if (!st && t->rank == 0) { /* meta.json last: the step is ready once every rank's file is there */
        char text[96];
        snprintf(text, sizeof text, "{\"global_steps\": %lld, \"verlc_world\": %d}\n", (long long)step, t->world);
        snprintf(p, sizeof p, "%s/%lld/meta.json", dir, (long long)step);
        st = vc_write_file_atomic(p, text, strlen(text));
    }
    return st ? vc_fail_ctx(st, "skip.rollout: dumping step %lld", (long long)step) : VC_OK;
}

vc_status rl_rollout_or_skip(vc_rl_trainer *t, const uint32_t *idx, int n, uint64_t key, int round, rl_batch *b) {
    int listed = 0;
    for (int i = 0; i < t->skip_n; i++) listed |= t->skip_steps[i] == t->step;
    if (!t->skip_on || !listed) return rl_rollout_batch(t, t->train, idx, n, &t->samp, t->n, key, b);
    int64_t from = t->skip_repeat ? nearest(t, t->step, round) : step_ready(t, t->step, round) ? t->step : -1;
    vc_status st = rl_dist_agree(t, from < 0 ? VC_ERR_MISSING : VC_OK, "skip.rollout"); /* every rank or none */
    if (!st) {
        if (t->verbose)
            vc_info("skip.rollout: step %lld's generation read from the dump of step %lld", (long long)t->step,
                    (long long)from);
        return load(t, from, round, b);
    }
    if (t->verbose) vc_info("skip.rollout: no dump for step %lld: generating it and dumping", (long long)t->step);
    st = rl_rollout_batch(t, t->train, idx, n, &t->samp, t->n, key, b);
    return st ? st : dump(t, t->step, round, b);
}
