/* verl's trainer.log_val_generations (RayPPOTrainer._maybe_log_val_generations and the tensorboard branch of
 * ValidationGenerationsLogger): the validation samples (input, output, score) sorted by input, shuffled by
 * np.random.RandomState(42), the first N written as one markdown text at the step ("val/generations"). */
#include "trainer_internal.h"
#include "verlc/report.h"
#include "verlc/rng.h"
#include "verlc/tracking.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    cJSON *row;
    size_t pos; /* the gather order: Python's sort is stable */
} sample;

static int by_input(const void *a, const void *b) { /* Python's str order: code points, i.e. UTF-8 bytes */
    const sample *p = a, *q = b;
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(p->row, "input"), *y = cJSON_GetObjectItemCaseSensitive(q->row, "input");
    int c = strcmp(cJSON_IsString(x) ? x->valuestring : "", cJSON_IsString(y) ? y->valuestring : "");
    return c ? c : (p->pos > q->pos) - (p->pos < q->pos);
}

/* verl's text: "**Generation Results - Step S**", then per sample its input, output and score (repr) */
static vc_status compose(const sample *rows, const size_t *order, size_t n, int64_t step, vc_strbuf *sb) {
    vc_sb_printf(sb, "**Generation Results - Step %lld**\n\n", (long long)step);
    for (size_t i = 0; i < n; i++) {
        const cJSON *r = rows[order[i]].row;
        const cJSON *in = cJSON_GetObjectItemCaseSensitive(r, "input"), *out = cJSON_GetObjectItemCaseSensitive(r, "output");
        const cJSON *sc = cJSON_GetObjectItemCaseSensitive(r, "score");
        char score[64];
        vc_py_float_repr(cJSON_IsNumber(sc) ? (double)(float)sc->valuedouble : 0.0, score, sizeof score);
        vc_sb_printf(sb, "### Sample %zu\n**Input:** ", i + 1);
        vc_sb_puts(sb, cJSON_IsString(in) ? in->valuestring : "");
        vc_sb_puts(sb, "\n\n**Output:** ");
        vc_sb_puts(sb, cJSON_IsString(out) ? out->valuestring : "");
        vc_sb_printf(sb, "\n\n**Score:** %s\n\n---\n\n", score);
    }
    return sb->oom ? VC_ERR_NOMEM : VC_OK;
}

vc_status rl_log_val_generations(vc_rl_trainer *t, rl_dump *d) {
    char *text = NULL;
    size_t len = 0;
    vc_status st = rl_dump_gather(t, d, &text, &len);
    rl_dump_free(d);
    if (st || t->rank != 0 || !text) {
        free(text);
        return st;
    }
    size_t n = 0, cap = 64;
    sample *rows = vc_malloc(cap * sizeof *rows);
    for (char *s = text, *e; rows && s < text + len; s = e + 1) {
        if (!(e = memchr(s, '\n', (size_t)(text + len - s)))) e = text + len;
        *e = 0;
        cJSON *j = cJSON_Parse(s);
        if (!j) continue;
        if (n == cap) {
            sample *r = realloc(rows, 2 * cap * sizeof *rows);
            if (!r) { cJSON_Delete(j); break; }
            rows = r, cap *= 2;
        }
        rows[n] = (sample){ j, n };
        n++;
    }
    size_t *order = vc_malloc((n + 1) * sizeof *order);
    if (!rows || !order) st = VC_ERR_NOMEM;
    else {
        qsort(rows, n, sizeof *rows, by_input);
        for (size_t i = 0; i < n; i++) order[i] = i;
        vc_np_mt19937 m;
        vc_np_seed(&m, 42);
        vc_np_shuffle(&m, order, n);
        vc_strbuf sb = { 0 };
        size_t k = (size_t)t->log_val_gen < n ? (size_t)t->log_val_gen : n;
        st = compose(rows, order, k, t->step, &sb);
        if (!st) st = vc_tracker_text(t->tracker, t->step, "val/generations", sb.p ? sb.p : "");
        free(sb.p);
    }
    for (size_t i = 0; rows && i < n; i++) cJSON_Delete(rows[i].row);
    free(rows);
    free(order);
    free(text);
    return st;
}
