/* trainer.rollout_data_dir and trainer.validation_data_dir (verl's _dump_generations): each training
 * step's (or validation's) samples as DIR/<global step>.jsonl, one object per response:
 * {"input": prompt text, "output": response text, "gts": reward_model.ground_truth, "score": the
 * response's summed token scores, "step": N, then verl's reward_extra_info ("acc", "pred", a custom
 * program's keys; validation lines also "reward")}, texts decoded without special tokens. Rank 0 writes
 * the rows of every rank (in rank order), atomically. */
#include "trainer_internal.h"
#include "verlc/json.h"
#include "verlc/report.h"
#include "verlc/tokenizer.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct rl_dump {
    vc_strbuf sb; /* the JSONL text */
};

static vc_status append(rl_dump *d, const char *line) {
    vc_sb_printf(&d->sb, "%s\n", line);
    return d->sb.oom ? VC_ERR_NOMEM : VC_OK;
}

/* the reward function's extra values of a row, as verl adds them to the line (for validation verl's
 * reward_extra_infos_dict holds "reward" too: reward not NaN) */
static int add_info(cJSON *o, double reward, const cJSON *info) {
    if (!isnan(reward) && !cJSON_AddNumberToObject(o, "reward", reward)) return 0; /* validation lines only */
    for (const cJSON *c = info ? info->child : NULL; c; c = c->next) { /* a key of verl's line is replaced */
        cJSON *dup = cJSON_Duplicate(c, 1);
        if (!dup) return 0;
        if (cJSON_GetObjectItemCaseSensitive(o, c->string)) cJSON_ReplaceItemInObjectCaseSensitive(o, c->string, dup);
        else cJSON_AddItemToObject(o, c->string, dup);
    }
    return 1;
}

vc_status rl_dump_add(vc_rl_trainer *t, const vc_rl_dataset *ds, const rl_batch *b, cJSON *const *infos, rl_dump **dp) {
    if (!*dp && !(*dp = vc_calloc(1, sizeof **dp))) return VC_ERR_NOMEM;
    rl_dump *d = *dp;
    vc_status st = VC_OK;
    for (int i = 0; !st && i < b->B; i++) {
        const vc_rl_prompt *p = &ds->p[b->prompt[i]];
        char *prompt = NULL;
        size_t plen = 0;
        if ((st = vc_tokenizer_decode(t->tok, b->ids + b->cu[i], (size_t)b->plen[i], 1, &prompt, &plen))) break;
        double score = 0;
        for (int j = 0; j < b->T; j++) score += b->token_scores[(size_t)i * b->T + j];
        const cJSON *rm = cJSON_GetObjectItemCaseSensitive(p->row, "reward_model");
        const cJSON *gt = rm ? cJSON_GetObjectItemCaseSensitive(rm, "ground_truth") : NULL;
        cJSON *o = cJSON_CreateObject();
        cJSON *g = gt ? cJSON_Duplicate(gt, 1) : cJSON_CreateNull();
        char *line = NULL;
        if (o && g && cJSON_AddStringToObject(o, "input", prompt) &&
            cJSON_AddStringToObject(o, "output", b->text[i] ? b->text[i] : "")) {
            cJSON_AddItemToObject(o, "gts", g);
            g = NULL;
            cJSON *row_info = infos ? NULL : cJSON_Parse(b->info[i] ? b->info[i] : "null"); /* a training row's */
            if (cJSON_AddNumberToObject(o, "score", (float)score) &&
                cJSON_AddNumberToObject(o, "step", (double)t->step) &&
                (infos ? add_info(o, b->score[i], infos[i]) : add_info(o, NAN, row_info)))
                line = vc_json_print(o, 0);
            cJSON_Delete(row_info);
        }
        st = line ? append(d, line) : VC_ERR_NOMEM;
        free(line);
        cJSON_Delete(o);
        cJSON_Delete(g);
        free(prompt);
    }
    return st;
}

void rl_dump_free(rl_dump *d) {
    if (d) free(d->sb.p);
    free(d);
}

vc_status rl_dump_batch(vc_rl_trainer *t, const vc_rl_dataset *ds, const rl_batch *b, const char *dir) {
    rl_dump *d = NULL;
    vc_status st = rl_dist_agree(t, rl_dump_add(t, ds, b, NULL, &d), dir);
    if (st) {
        rl_dump_free(d);
        return st;
    }
    return rl_dump_write(t, d, dir);
}

vc_status rl_dump_gather(vc_rl_trainer *t, rl_dump *d, char **text, size_t *len) {
    *text = NULL;
    *len = 0;
    size_t *sizes = NULL, total = d ? d->sb.n : 0;
    void *all = NULL;
    vc_status st = VC_OK;
    if (t->world > 1) { /* every rank's lines to rank 0 */
        st = vc_comm_gatherv_bytes(t->comm, d && d->sb.p ? d->sb.p : "", total, &all, &sizes, 0);
        total = 0;
        for (int r = 0; !st && t->rank == 0 && r < t->world; r++) total += sizes[r];
    } else if (total && !(all = vc_malloc(total))) st = VC_ERR_NOMEM;
    else if (total) memcpy(all, d->sb.p, total);
    free(sizes);
    if (st || t->rank != 0) {
        free(all);
        return st;
    }
    *text = all;
    *len = total;
    return VC_OK;
}

vc_status rl_dump_write(vc_rl_trainer *t, rl_dump *d, const char *dir) {
    char *text = NULL;
    size_t total = 0;
    vc_status st = rl_dump_gather(t, d, &text, &total);
    if (!st && t->rank == 0) {
        char name[32], *path = NULL;
        snprintf(name, sizeof name, "%lld.jsonl", (long long)t->step);
        if (mkdir(dir, 0755) && !vc_file_exists(dir))
            st = vc_fail(VC_ERR_IO, "%s: cannot create the directory", dir);
        if (!st && !(path = vc_path_join(dir, name))) st = VC_ERR_NOMEM;
        if (!st) st = vc_write_file_atomic(path, text ? text : "", total);
        free(path);
    }
    free(text);
    rl_dump_free(d);
    st = rl_dist_agree(t, st, dir); /* rank 0's write decides for every rank */
    return st ? vc_fail_ctx(st, "dumping generations to %s", dir) : VC_OK;
}
