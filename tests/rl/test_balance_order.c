/* trainer.balance_batch on one rank puts the rows in verl's order (RayPPOTrainer._balance_batch with one
 * partition): sorted by (workload 24576 L + L^2, index), then order[::2] + order[1::2][::-1], so the
 * mini-batches are consecutive rows of it; whole rows move (tokens, arrays, uid, text, reward info), and verl's
 * global_seqlen metrics of one partition are reported. */
#include "../../src/rl/trainer_internal.h"
#include "vc_test.h"
#include <stdlib.h>
#include <string.h>

#define NB 7
#define NT 4
/* lengths with a tie (rows 1 and 3): sorted (L, index) -> rows 5 1 3 6 0 4 2; even places 5 3 0 2, odd
 * places reversed 4 6 1 (Python: p = sorted(range(7), key=lambda i: (w[i], i)); p[::2] + p[1::2][::-1]) */
static const int LEN[NB] = { 5, 3, 9, 3, 7, 1, 4 };
static const int WANT[NB] = { 5, 3, 0, 2, 4, 6, 1 };

int main(void) {
    rl_batch b;
    int64_t tot = 0;
    for (int i = 0; i < NB; i++) tot += LEN[i];
    CHECK_OK(rl_batch_alloc(&b, NB, NT, tot));
    for (int i = 0; i < NB; i++) {
        for (int k = 0; k < LEN[i]; k++) b.ids[b.cu[i] + k] = 100 * i + k;
        b.cu[i + 1] = b.cu[i] + LEN[i];
        b.plen[i] = 1;
        b.rlen[i] = LEN[i] - 1 < NT ? LEN[i] - 1 : NT;
        b.score[i] = (float)i;
        char s[32];
        snprintf(s, sizeof s, "uid%d", i);
        b.uid[i] = vc_strdup(s);
        snprintf(s, sizeof s, "text %d", i);
        b.text[i] = vc_strdup(s);
        snprintf(s, sizeof s, "{\"acc\":%d}", i);
        if (i != 4) b.info[i] = vc_strdup(s); /* row 4 has no extra values */
        for (int j = 0; j < NT; j++) b.adv[i * NT + j] = 10.0f * i + j, b.sum_pi_sq[i * NT + j] = -1.0f * i;
    }
    vc_rl_trainer *t = vc_calloc(1, sizeof *t);
    rl_metrics met = { 0 };
    CHECK_OK(rl_balance_batch(t, &b, NULL, &met));
    int ok = b.B == NB;
    for (int j = 0; ok && j < NB; j++) {
        int g = WANT[j];
        char s[32];
        snprintf(s, sizeof s, "text %d", g);
        ok &= b.cu[j + 1] - b.cu[j] == LEN[g] && b.ids[b.cu[j]] == 100 * g && b.score[j] == (float)g &&
              !strcmp(b.text[j], s) && (g == 4 ? b.info[j] == NULL : b.info[j] && atoi(b.info[j] + 7) == g) && b.adv[j * NT + 1] == 10.0f * g + 1 && b.sum_pi_sq[j * NT] == -1.0f * g;
        CHECK_MSG(ok, "place %d holds row %d, want %d", j, b.ids[b.cu[j]] / 100, g);
    }
    double v = 0;
    CHECK(rl_metrics_get(&met, "global_seqlen/mean", &v) && v == 32);
    CHECK(rl_metrics_get(&met, "global_seqlen/balanced_max", &v) && v == 32);
    CHECK(rl_metrics_get(&met, "global_seqlen/minmax_diff", &v) && v == 0);
    rl_metrics_free(&met);
    /* the row records as skip.rollout writes them: read back whole, and refused (never overread) when cut
     * short anywhere or when a header's counts are damaged */
    char *rec = NULL;
    size_t bytes = 0;
    CHECK_OK(rl_batch_rows_write(&b, &rec, &bytes));
    rl_batch back;
    CHECK_OK(rl_batch_rows_read(rec, bytes, NT, &back));
    int same = back.B == b.B && back.cu[NB] == b.cu[NB] && !memcmp(back.ids, b.ids, sizeof(int32_t) * (size_t)b.cu[NB]);
    for (int i = 0; same && i < NB; i++)
        same = !strcmp(back.text[i], b.text[i]) && back.adv[i * NT + 2] == b.adv[i * NT + 2] && back.plen[i] == b.plen[i];
    CHECK_MSG(same, "rows read back differ");
    rl_batch_free(&back);
    int refused = 0, cuts = 0;
    for (size_t cut = 1; cut < bytes; cut += 7, cuts++) { /* short buffers (copies: ASan sees overreads) */
        char *c = malloc(cut);
        memcpy(c, rec, cut);
        vc_status st = rl_batch_rows_read(c, cut, NT, &back);
        if (st == VC_ERR_FORMAT) refused++;
        else if (!st) rl_batch_free(&back); /* a cut between records: fewer rows */
        free(c);
    }
    CHECK_MSG(refused > cuts / 2, "%d of %d cut buffers refused", refused, cuts);
    for (size_t k = 0; k < 64; k++) { /* a header word set huge */
        char *c = malloc(bytes);
        memcpy(c, rec, bytes);
        int64_t huge = INT64_MAX / 3;
        memcpy(c + (k % 6) * 8, &huge, 8);
        vc_status st = rl_batch_rows_read(c, bytes, NT, &back);
        CHECK_MSG(st == VC_ERR_FORMAT, "a damaged header field %zu read as %s", k % 6, vc_status_name(st));
        if (!st) rl_batch_free(&back);
        free(c);
    }
    free(rec);
    rl_batch_free(&b);
    free(t);
    return vc_test_done();
}
