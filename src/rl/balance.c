/* trainer.balance_batch (verl's RayPPOTrainer._balance_batch), after the advantages. On one rank the rows
 * take verl's order of its single partition: sorted by (workload, index), verl's workload 24576 L + L^2 of a
 * row of L tokens, the even places ascending then the odd ones descending (light rows at both ends). With
 * several ranks rows move between ranks as verl's partition of them (rl_balance_partition: Karmarkar-Karp into
 * equal counts, which every rank computes from the same gathered lengths), each rank's rows in that order of
 * their own; a row carries its place (rank r's block, then its place in it), and the update splits each
 * rank's rows into its mini-batch slices as verl's workers do. The log-prob passes before it run on the
 * rollout's layout.
 * Metrics are verl's global_seqlen/{min,max,minmax_diff,balanced_min,balanced_max,mean}. With the actor's
 * use_prefix_grouper, verl's group-level balancing: whole groups go to the ranks (Karmarkar-Karp on their
 * workloads, equal counts), each rank's rows in their order (one rank: the rollout's order). */
#include "trainer_internal.h"
#include <stdlib.h>
#include <string.h>

static double workload(int64_t L) { return (double)vc_seq_workload(L); }

struct item { double w; int g; };
static int by_work_desc(const void *a, const void *b) {
    const struct item *x = a, *y = b;
    if (x->w != y->w) return x->w > y->w ? -1 : 1;
    return x->g - y->g;
}

/* owner[g] for the GB rows of lengths len[g]: equal counts, the heaviest row first to the least loaded
 * rank with room (ties: the lower rank) */
static vc_status partition(const int64_t *len, int GB, int world, int *owner) {
    struct item *it = vc_malloc(sizeof *it * (size_t)GB);
    double *load = vc_calloc((size_t)world, sizeof(double));
    int *room = vc_calloc((size_t)world, sizeof(int));
    vc_status st = it && load && room ? VC_OK : VC_ERR_NOMEM;
    for (int r = 0; !st && r < world; r++) room[r] = GB / world + (r < GB % world);
    for (int g = 0; !st && g < GB; g++) it[g] = (struct item){ workload(len[g]), g };
    if (!st) qsort(it, (size_t)GB, sizeof *it, by_work_desc);
    for (int i = 0; !st && i < GB; i++) {
        int best = -1;
        for (int r = 0; r < world; r++)
            if (room[r] > 0 && (best < 0 || load[r] < load[best])) best = r;
        owner[it[i].g] = best;
        load[best] += it[i].w;
        room[best]--;
    }
    free(it);
    free(load);
    free(room);
    return st;
}

/* label[g]: row g's place in verl's one-partition order (sorted by workload and index, then
 * order[::2] + order[1::2][::-1]) */
struct wrow { double w; int g; };
static int by_work_asc(const void *a, const void *b) {
    const struct wrow *x = a, *y = b;
    if (x->w != y->w) return x->w < y->w ? -1 : 1;
    return x->g - y->g;
}

static vc_status verl_order(const int64_t *len, int GB, int *label) {
    struct wrow *r = vc_malloc(sizeof *r * (size_t)(GB ? GB : 1));
    if (!r) return VC_ERR_NOMEM;
    for (int g = 0; g < GB; g++) r[g] = (struct wrow){ workload(len[g]), g };
    qsort(r, (size_t)GB, sizeof *r, by_work_asc);
    int pos = 0;
    for (int k = 0; k < GB; k += 2) label[r[k].g] = pos++;
    for (int k = GB - 1 - (GB % 2 == 1); k >= 1; k -= 2) label[r[k].g] = pos++;
    free(r);
    return VC_OK;
}

/* With shared prompts, verl's group-level balancing (seqlen_balancing.get_group_balanced_partitions): the
 * groups (consecutive rows from a start flag) weigh the sum of their rows' workloads and go to the ranks by
 * Karmarkar-Karp with equal counts; each rank's rows keep their order, and the global order is rank 0's rows,
 * then rank 1's, ... owner[g], label[g]: row g's rank and place. */
static vc_status group_partition(const int64_t *len, const int64_t *start, int GB, int world, int *owner, int *label) {
    int ng = 0;
    int *grp = vc_malloc(sizeof(int) * (size_t)(GB ? GB : 1));
    int64_t *w = vc_calloc((size_t)(GB ? GB : 1), sizeof(int64_t));
    vc_partition part = { 0 };
    vc_status st = grp && w ? VC_OK : VC_ERR_NOMEM;
    for (int g = 0; !st && g < GB; g++) {
        if (g == 0 || start[g]) ng++;
        grp[g] = ng - 1;
        w[ng - 1] += (int64_t)workload(len[g]);
    }
    if (!st && ng % world)
        st = vc_fail(VC_ERR_ARG, "actor.use_prefix_grouper with balance_batch needs the groups (%d) to divide over the "
                     "ranks (%d), as in verl: make train_batch_size a multiple of the number of ranks", ng, world);
    if (!st) st = vc_partition_balanced(w, (size_t)ng, (size_t)world, 1, &part);
    int pos = 0;
    for (size_t r = 0; !st && r < part.n_groups; r++) /* a rank's groups' rows in ascending order */
        for (int g = 0; g < GB; g++)
            for (size_t q = part.offsets[r]; q < part.offsets[r + 1]; q++)
                if ((int)part.items[q] == grp[g]) owner[g] = (int)r, label[g] = pos++;
    vc_partition_free(&part);
    free(grp);
    free(w);
    return st;
}

/* Several ranks, as verl's _balance_batch: the rows' workloads split into equal counts by Karmarkar-Karp
 * (get_seqlen_balanced_partitions, vc_partition_balanced), partition r to rank r, each partition's rows in verl_order
 * of their own; label[g]: rank r's rows take places r x GB / world onwards in that order (each rank's rows are a
 * block of the global order, as verl's dispatch hands them out). Rows that do not split evenly (which verl refuses):
 * the greedy partition and the one-partition order. With start (each row's flag: whether it starts a group of
 * shared prompts), group_partition. */
vc_status rl_balance_partition(const int64_t *len, const int64_t *start, int GB, int world, int *owner, int *label) {
    if (start) return group_partition(len, start, GB, world, owner, label);
    if (GB % world) {
        vc_status st = partition(len, GB, world, owner);
        return st ? st : verl_order(len, GB, label);
    }
    int64_t *w = vc_malloc(sizeof *w * (size_t)GB), *sub = vc_malloc(sizeof *sub * (size_t)GB);
    int *pos = vc_malloc(sizeof *pos * (size_t)GB);
    vc_partition part = { 0 };
    vc_status st = w && sub && pos ? VC_OK : VC_ERR_NOMEM;
    for (int g = 0; !st && g < GB; g++) w[g] = vc_seq_workload(len[g]);
    if (!st) st = vc_partition_balanced(w, (size_t)GB, (size_t)world, 1, &part);
    for (size_t r = 0; !st && r < part.n_groups; r++) {
        size_t a = part.offsets[r], n = part.offsets[r + 1] - a; /* its rows, ascending */
        for (size_t j = 0; j < n; j++) sub[j] = len[part.items[a + j]];
        if ((st = verl_order(sub, (int)n, pos))) break;
        for (size_t j = 0; j < n; j++) owner[part.items[a + j]] = (int)r, label[part.items[a + j]] = (int)a + pos[j];
    }
    vc_partition_free(&part);
    free(w);
    free(sub);
    free(pos);
    return st;
}

/* ---- rows as bytes ---- */
#define NA RL_BATCH_ARRAYS

typedef struct {
    int64_t gidx, plen, rlen, n_ids, T, lk, tk;
    int64_t img_rows, img_row, img_span; /* the row's own images (rl_batch.rimg): patch rows, their width, span */
    int32_t prompt, finish, n_img, turns;
    float score;
    uint32_t n_uid, n_text, n_info;
} row_hdr;

/* a row's routes (router replay): lk ints per token */
static size_t route_bytes(int64_t n_ids, int64_t lk) { return sizeof(int32_t) * (size_t)(n_ids * lk); }
/* a row's teacher top-k (distillation): T x tk ids and log-probs */
static size_t topk_bytes(int64_t T, int64_t tk) { return 8 * (size_t)(T * tk); }
/* a row's own images: n grids, n time steps (vc_images.t_scale) and rows x row pixels */
static size_t img_bytes(int64_t n, int64_t rows, int64_t row) { return 16 * (size_t)n + 4 * (size_t)(rows * row); }
static int64_t img_rows(const vc_images *im) { return vc_images_rows(im, im->n); }
static const vc_images *own_images(const rl_batch *b, int i) { return b->rimg && b->rimg[i].n ? &b->rimg[i] : NULL; }

static size_t row_bytes(const rl_batch *b, int i) {
    size_t n = sizeof(row_hdr) + sizeof(int32_t) * (size_t)(b->cu[i + 1] - b->cu[i]);
    n += strlen(b->uid[i] ? b->uid[i] : "") + strlen(b->text[i] ? b->text[i] : "") + strlen(b->info[i] ? b->info[i] : "");
    const vc_images *im = own_images(b, i);
    return n + NA * sizeof(float) * (size_t)b->T + (b->route ? route_bytes(b->cu[i + 1] - b->cu[i], b->route_lk) : 0) +
           (b->tk_ids ? topk_bytes(b->T, b->tk_k) : 0) + (im ? img_bytes(im->n, img_rows(im), im->row) : 0);
}

static char *put(char *p, const void *src, size_t n) {
    memcpy(p, src, n);
    return p + n;
}

static char *write_row(const rl_batch *b, int i, int64_t gidx, char *p) {
    const char *uid = b->uid[i] ? b->uid[i] : "", *text = b->text[i] ? b->text[i] : "", *info = b->info[i] ? b->info[i] : "";
    const vc_images *im = own_images(b, i);
    row_hdr h = { gidx, b->plen[i], b->rlen[i], b->cu[i + 1] - b->cu[i], b->T, b->route ? b->route_lk : 0,
                  b->tk_ids ? b->tk_k : 0, im ? img_rows(im) : 0, im ? im->row : 0, im ? b->rspan[i] : 0,
                  b->prompt[i], b->finish[i], im ? im->n : 0, b->turns[i], b->score[i], (uint32_t)strlen(uid),
                  (uint32_t)strlen(text), (uint32_t)strlen(info) };
    p = put(p, &h, sizeof h);
    p = put(p, b->ids + b->cu[i], sizeof(int32_t) * (size_t)h.n_ids);
    p = put(p, uid, h.n_uid);
    p = put(p, text, h.n_text);
    p = put(p, info, h.n_info);
    float *arr[NA];
    rl_batch_arrays(b, arr);
    for (int k = 0; k < NA; k++) p = put(p, arr[k] + (size_t)i * b->T, sizeof(float) * (size_t)b->T);
    if (h.lk) p = put(p, b->route + (size_t)b->cu[i] * (size_t)h.lk, route_bytes(h.n_ids, h.lk));
    if (h.tk) {
        size_t tk = (size_t)b->T * (size_t)h.tk;
        p = put(p, b->tk_ids + (size_t)i * tk, 4 * tk);
        p = put(p, b->tk_lp + (size_t)i * tk, 4 * tk);
    }
    if (im) {
        p = put(p, im->grid, 12 * (size_t)im->n);
        for (int k = 0; k < im->n; k++) {
            float ts = im->t_scale ? im->t_scale[k] : 1.0f;
            p = put(p, &ts, 4);
        }
        p = put(p, im->pixels, 4 * (size_t)(h.img_rows * h.img_row));
    }
    return p;
}

static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

/* row i of nb from a record; *next: the record after it */
static vc_status read_row(rl_batch *nb, int i, const char *p, const char **next) {
    row_hdr h;
    memcpy(&h, p, sizeof h);
    p += sizeof h;
    nb->plen[i] = h.plen;
    nb->rlen[i] = h.rlen;
    nb->prompt[i] = h.prompt;
    nb->finish[i] = h.finish;
    nb->turns[i] = h.turns;
    nb->score[i] = h.score;
    memcpy(nb->ids + nb->cu[i], p, sizeof(int32_t) * (size_t)h.n_ids);
    nb->cu[i + 1] = nb->cu[i] + h.n_ids;
    p += sizeof(int32_t) * (size_t)h.n_ids;
    nb->uid[i] = dup_n(p, h.n_uid);
    p += h.n_uid;
    nb->text[i] = dup_n(p, h.n_text);
    p += h.n_text;
    nb->info[i] = h.n_info ? dup_n(p, h.n_info) : NULL; /* an empty record: no info */
    p += h.n_info;
    if (!nb->uid[i] || !nb->text[i] || (h.n_info && !nb->info[i])) return VC_ERR_NOMEM;
    float *arr[NA];
    rl_batch_arrays(nb, arr);
    int64_t tc = h.T < nb->T ? h.T : nb->T;
    for (int k = 0; k < NA; k++, p += sizeof(float) * (size_t)h.T)
        memcpy(arr[k] + (size_t)i * nb->T, p, sizeof(float) * (size_t)tc);
    if (h.lk && (!nb->route || nb->route_lk != h.lk))
        return vc_fail(VC_ERR_INTERNAL, "balance_batch: a row with routes of %lld experts into a batch of %lld",
                       (long long)h.lk, (long long)nb->route_lk);
    if (h.lk) memcpy(nb->route + (size_t)nb->cu[i] * (size_t)h.lk, p, route_bytes(h.n_ids, h.lk));
    p += h.lk ? route_bytes(h.n_ids, h.lk) : 0;
    if (h.tk && (!nb->tk_ids || nb->tk_k != h.tk))
        return vc_fail(VC_ERR_INTERNAL, "balance_batch: a row with top-%lld teacher tokens into a batch of %d",
                       (long long)h.tk, nb->tk_k);
    if (h.tk) { /* [T, k] per row; the positions both batches have */
        size_t tk = (size_t)h.T * (size_t)h.tk, own = (size_t)nb->T * (size_t)h.tk, n = (size_t)tc * (size_t)h.tk;
        memcpy(nb->tk_ids + (size_t)i * own, p, 4 * n);
        memcpy(nb->tk_lp + (size_t)i * own, p + 4 * tk, 4 * n);
        p += 8 * tk;
    }
    if (h.n_img) { /* the row's own images */
        vc_status st = rl_batch_rimg_alloc(nb);
        int32_t *grid = st ? NULL : vc_malloc(12 * (size_t)h.n_img);
        float *ts = grid ? vc_malloc(4 * (size_t)h.n_img) : NULL;
        float *px = ts ? vc_malloc(4 * (size_t)(h.img_rows * h.img_row) + 4) : NULL;
        if (!px) {
            free(grid), free(ts);
            return VC_ERR_NOMEM;
        }
        memcpy(grid, p, 12 * (size_t)h.n_img);
        memcpy(ts, p + 12 * (size_t)h.n_img, 4 * (size_t)h.n_img);
        memcpy(px, p + 16 * (size_t)h.n_img, 4 * (size_t)(h.img_rows * h.img_row));
        p += img_bytes(h.n_img, h.img_rows, h.img_row);
        nb->rimg[i] = (vc_images){ h.n_img, grid, px, h.img_row, ts };
        nb->rspan[i] = h.img_span;
        int64_t rows = 0;
        for (int k = 0; k < 3 * h.n_img; k++) rows = grid[k] > 0 && grid[k] <= (1 << 20) ? rows : -1;
        if (!rows) rows = img_rows(&nb->rimg[i]);
        if (rows != h.img_rows)
            return vc_fail(VC_ERR_FORMAT, "row record %d: its images' grids are not its %lld patch rows", i,
                           (long long)h.img_rows);
    }
    *next = p;
    return VC_OK;
}

static vc_status skip_row(const char *p, const char **next, row_hdr *h) {
    memcpy(h, p, sizeof *h);
    *next = p + sizeof *h + sizeof(int32_t) * (size_t)h->n_ids + h->n_uid + h->n_text + h->n_info +
            NA * sizeof(float) * (size_t)h->T + route_bytes(h->n_ids, h->lk) + topk_bytes(h->T, h->tk) +
            img_bytes(h->n_img, h->img_rows, h->img_row);
    return VC_OK;
}

/* ---- the exchange ---- */
static void seqlen_metrics(const int64_t *len, const int *owner, const size_t *counts, int GB, int world,
                           rl_metrics *met) {
    double before_min = 0, before_max = 0, after_min = 0, after_max = 0, total = 0;
    double *after = vc_calloc((size_t)world, sizeof(double));
    if (!after) return;
    for (int r = 0, g = 0; r < world; r++) {
        double s = 0;
        for (size_t k = 0; k < counts[r]; k++, g++) s += (double)len[g];
        before_min = r == 0 || s < before_min ? s : before_min;
        before_max = r == 0 || s > before_max ? s : before_max;
        total += s;
    }
    for (int g = 0; g < GB; g++) after[owner[g]] += (double)len[g];
    for (int r = 0; r < world; r++) {
        after_min = r == 0 || after[r] < after_min ? after[r] : after_min;
        after_max = r == 0 || after[r] > after_max ? after[r] : after_max;
    }
    rl_metrics_set(met, "global_seqlen/min", before_min);
    rl_metrics_set(met, "global_seqlen/max", before_max);
    rl_metrics_set(met, "global_seqlen/minmax_diff", before_max - before_min);
    rl_metrics_set(met, "global_seqlen/balanced_min", after_min);
    rl_metrics_set(met, "global_seqlen/balanced_max", after_max);
    rl_metrics_set(met, "global_seqlen/mean", total / world);
    free(after);
}

/* nb's routes for ntok tokens when b has routes */
static vc_status route_like(rl_batch *nb, const rl_batch *b, int64_t ntok) {
    nb->route_lk = b->route_lk;
    nb->route = vc_malloc(sizeof(int32_t) * (size_t)(ntok * b->route_lk + 1));
    return nb->route ? VC_OK : VC_ERR_NOMEM;
}

/* the rows this rank now owns, in global order, from every rank's records; owner NULL: every record */
static vc_status rebuild(const char *all, size_t total, const int *owner, int rank, int T, rl_batch *b, int **gidx) {
    int B = 0, G = 0;
    int64_t ntok = 0;
    row_hdr h;
    for (const char *p = all, *q; p < all + total; p = q, G++) {
        skip_row(p, &q, &h);
        if (!owner || owner[h.gidx] == rank) B++, ntok += h.n_ids;
    }
    const char **rec = vc_calloc((size_t)G + 1, sizeof *rec); /* by global index */
    rl_batch nb;
    vc_status st = rec ? rl_batch_alloc(&nb, B, T, ntok) : VC_ERR_NOMEM;
    if (!st && b->route && (st = route_like(&nb, b, ntok))) rl_batch_free(&nb);
    if (!st && b->tk_ids && (st = rl_batch_topk_alloc(&nb, b->tk_k))) rl_batch_free(&nb);
    int *gi = st ? NULL : vc_malloc(sizeof(int) * (size_t)(B ? B : 1));
    if (!st && !gi) {
        rl_batch_free(&nb);
        st = VC_ERR_NOMEM;
    }
    for (const char *p = all, *q; !st && p < all + total; p = q) {
        skip_row(p, &q, &h);
        if (h.gidx < 0 || h.gidx >= G || rec[h.gidx]) st = vc_fail(VC_ERR_INTERNAL, "balance_batch: global row %lld twice or out of range", (long long)h.gidx);
        else rec[h.gidx] = p;
    }
    for (int g = 0, i = 0; !st && g < G; g++) {
        const char *q;
        if (!rec[g]) st = vc_fail(VC_ERR_INTERNAL, "balance_batch: global row %d missing", g);
        if (st || (owner && owner[g] != rank)) continue;
        gi[i] = g;
        st = read_row(&nb, i++, rec[g], &q);
    }
    free(rec);
    if (st) {
        if (gi) rl_batch_free(&nb);
        free(gi);
        return st;
    }
    nb.have_old = b->have_old;
    nb.have_ref = b->have_ref;
    nb.have_values = b->have_values;
    nb.imgs = b->imgs;
    rl_batch_free(b);
    *b = nb;
    if (gidx) *gidx = gi;
    else free(gi);
    return VC_OK;
}

vc_status rl_batch_rows_write(const rl_batch *b, char **buf, size_t *bytes) {
    size_t n = 0;
    for (int i = 0; i < b->B; i++) n += row_bytes(b, i);
    char *p = vc_malloc(n ? n : 1);
    if (!p) return VC_ERR_NOMEM;
    *buf = p;
    *bytes = n;
    for (int i = 0; i < b->B; i++) p = write_row(b, i, i, p);
    return VC_OK;
}

vc_status rl_batch_rows_read(const char *buf, size_t bytes, int T, rl_batch *b) {
    row_hdr h;
    for (size_t at = 0, k = 0; at < bytes; k++) { /* the records fit the buffer, in order, before any is read */
        size_t left = bytes - at, need;
        if (left < sizeof h) return vc_fail(VC_ERR_FORMAT, "row record %zu is truncated", k);
        memcpy(&h, buf + at, sizeof h);
        int ok = h.n_ids >= 0 && (size_t)h.n_ids <= left && h.T >= 0 && (size_t)h.T <= left && h.lk == 0 && h.tk == 0 &&
                 h.plen >= 0 && h.rlen >= 0 && h.plen + h.rlen <= h.n_ids && h.rlen <= h.T && h.gidx == (int64_t)k &&
                 h.n_uid <= left && h.n_text <= left && h.n_info <= left && h.n_img >= 0 && (size_t)h.n_img <= left &&
                 h.img_rows >= 0 && h.img_row >= 0 && (size_t)h.img_rows <= left && (size_t)h.img_row <= left &&
                 (!h.img_row || (size_t)h.img_rows <= left / (size_t)h.img_row) && h.img_span >= 0 &&
                 h.img_span <= h.n_ids && (h.n_img > 0) == (h.img_rows > 0);
        need = ok ? sizeof h + 4 * (size_t)h.n_ids + h.n_uid + h.n_text + h.n_info + NA * 4 * (size_t)h.T +
                        img_bytes(h.n_img, h.img_rows, h.img_row) : 0;
        if (!ok || need > left) return vc_fail(VC_ERR_FORMAT, "row record %zu does not fit (%lld tokens)", k,
                                               (long long)h.n_ids);
        at += need;
    }
    rl_batch empty;
    memset(&empty, 0, sizeof empty);
    *b = empty;
    return rebuild(buf, bytes, NULL, 0, T, b, NULL);
}

vc_status rl_batch_append_rows(rl_batch *acc, const rl_batch *src, const int *rows, int n) {
    size_t bytes = 0;
    for (int i = 0; i < acc->B; i++) bytes += row_bytes(acc, i);
    for (int i = 0; i < n; i++) bytes += row_bytes(src, rows[i]);
    char *buf = vc_malloc(bytes ? bytes : 1), *p = buf;
    if (!buf) return VC_ERR_NOMEM;
    int k = 0;
    for (int i = 0; i < acc->B; i++) p = write_row(acc, i, k++, p);
    for (int i = 0; i < n; i++) p = write_row(src, rows[i], k++, p);
    int T = acc->T > src->T ? acc->T : src->T;
    vc_status st = rebuild(buf, bytes, NULL, 0, T, acc, NULL);
    if (!st && !acc->imgs) acc->imgs = src->imgs;
    free(buf);
    return st;
}

/* one rank: the rows put in verl's order, and the metrics of one partition */
static vc_status balance_one(vc_rl_trainer *t, rl_batch *b, rl_dp *dp, rl_metrics *met) {
    int *label = vc_malloc(sizeof(int) * (size_t)(b->B + 1)), *src = vc_malloc(sizeof(int) * (size_t)(b->B + 1));
    int64_t *len = vc_malloc(sizeof(int64_t) * (size_t)(b->B + 1));
    size_t count = (size_t)b->B;
    vc_status st = label && src && len ? VC_OK : VC_ERR_NOMEM;
    for (int i = 0; !st && i < b->B; i++) len[i] = b->cu[i + 1] - b->cu[i];
    if (!st && !t->acfg.prefix_share) st = verl_order(len, b->B, label);
    for (int i = 0; !st && t->acfg.prefix_share && i < b->B; i++) label[i] = i; /* groups kept together, in order */
    for (int i = 0; !st && i < b->B; i++) src[label[i]] = i, label[i] = 0; /* label: now every row's owner, 0 */
    if (!st) seqlen_metrics(len, label, &count, b->B, 1, met);
    rl_dp one = { .world = 1, .g_B = b->B, .g_T = b->T };
    if (!st) st = rl_batch_take_global(t, b, dp ? dp : &one, src);
    free(label);
    free(src);
    free(len);
    return st;
}

vc_status rl_balance_batch(vc_rl_trainer *t, rl_batch *b, rl_dp *dp, rl_metrics *met) {
    if (t->world <= 1 || !dp || dp->world <= 1) {
        vc_status s1 = balance_one(t, b, dp, met);
        return s1 ? vc_fail_ctx(s1, "trainer.balance_batch") : VC_OK;
    }
    int GB = dp->g_B, grouped = t->acfg.prefix_share;
    /* each row's length, and with shared prompts whether it starts a group (groups are whole on one rank) */
    int64_t *mine = vc_malloc(sizeof(int64_t) * (size_t)(b->B ? b->B : 1) * 2);
    if (!mine) return VC_ERR_NOMEM;
    for (int i = 0; i < b->B; i++) {
        mine[i] = b->cu[i + 1] - b->cu[i];
        mine[b->B + i] = i == 0 || !b->uid[i] || !b->uid[i - 1] || strcmp(b->uid[i], b->uid[i - 1]);
    }
    void *all_len = NULL, *all_rows = NULL, *all_start = NULL;
    size_t *len_sizes = NULL, *row_sizes = NULL, *start_sizes = NULL;
    vc_status st = vc_comm_gatherv_bytes(t->comm, mine, sizeof(int64_t) * (size_t)b->B, &all_len, &len_sizes, -1);
    if (!st && grouped)
        st = vc_comm_gatherv_bytes(t->comm, mine + b->B, sizeof(int64_t) * (size_t)b->B, &all_start, &start_sizes, -1);
    int *owner = st ? NULL : vc_malloc(sizeof(int) * (size_t)GB), *label = st ? NULL : vc_malloc(sizeof(int) * (size_t)GB);
    int *own_l = st ? NULL : vc_malloc(sizeof(int) * (size_t)GB);
    size_t *counts = st ? NULL : vc_malloc(sizeof(size_t) * (size_t)t->world), got = 0;
    if (!st && (!owner || !counts || !label || !own_l)) st = VC_ERR_NOMEM;
    for (int r = 0; !st && r < t->world; r++) got += (counts[r] = len_sizes[r] / sizeof(int64_t));
    if (!st && got != (size_t)GB)
        st = vc_fail(VC_ERR_INTERNAL, "balance_batch: %zu rows over the ranks, the step has %d", got, GB);
    if (!st) st = rl_balance_partition(all_len, grouped ? all_start : NULL, GB, t->world, owner, label);
    for (int g = 0; !st && g < GB; g++) own_l[label[g]] = owner[g]; /* owners by place in the global order */
    if (!st) seqlen_metrics(all_len, owner, counts, GB, t->world, met);
    /* every rank's rows, tagged with their place in the global order, to every rank */
    size_t bytes = 0;
    for (int i = 0; !st && i < b->B; i++) bytes += row_bytes(b, i);
    char *buf = st ? NULL : vc_malloc(bytes ? bytes : 1), *p = buf;
    if (!st && !buf) st = VC_ERR_NOMEM;
    for (int i = 0; !st && i < b->B; i++) p = write_row(b, i, label[dp->g_off + i], p);
    if (!st) st = vc_comm_gatherv_bytes(t->comm, buf, bytes, &all_rows, &row_sizes, -1);
    size_t total = 0;
    for (int r = 0; !st && r < t->world; r++) total += row_sizes[r];
    int *gidx = NULL;
    if (!st) st = rebuild(all_rows, total, own_l, t->rank, dp->g_T, b, &gidx);
    if (!st) {
        free(dp->g_idx);
        dp->g_idx = gidx;
    }
    free(all_start);
    free(start_sizes);
    free(mine);
    free(all_len);
    free(len_sizes);
    free(all_rows);
    free(row_sizes);
    free(owner);
    free(label);
    free(own_l);
    free(counts);
    free(buf);
    return st ? vc_fail_ctx(st, "trainer.balance_batch") : VC_OK;
}

vc_status rl_batch_take_global(vc_rl_trainer *t, rl_batch *b, const rl_dp *dp, const int *src) {
    int GB = dp->g_B, multi = t->world > 1 && dp->world > 1;
    if (dp->g_idx) return vc_fail(VC_ERR_INTERNAL, "rows taken from the global batch after balance_batch");
    size_t bytes = 0;
    for (int i = 0; i < b->B; i++) bytes += row_bytes(b, i);
    char *buf = vc_malloc(bytes ? bytes : 1), *p = buf, *all = NULL;
    const char **rec = vc_calloc((size_t)GB, sizeof *rec);
    size_t *sizes = NULL, total = bytes;
    vc_status st = buf && rec ? VC_OK : VC_ERR_NOMEM;
    for (int i = 0; !st && i < b->B; i++) p = write_row(b, i, dp->g_off + i, p);
    if (!st && multi) { /* every rank's rows to every rank */
        st = vc_comm_gatherv_bytes(t->comm, buf, bytes, (void **)&all, &sizes, -1);
        total = 0;
        for (int r = 0; !st && r < t->world; r++) total += sizes[r];
    }
    const char *base = multi ? all : buf;
    row_hdr h;
    for (const char *q = base, *nx; !st && q < base + total; q = nx) {
        skip_row(q, &nx, &h);
        if (h.gidx < 0 || h.gidx >= GB) st = vc_fail(VC_ERR_INTERNAL, "row with global index %lld of %d", (long long)h.gidx, GB);
        else rec[h.gidx] = q;
    }
    int64_t ntok = 0;
    for (int i = 0; !st && i < b->B; i++) {
        if (src[i] < 0 || src[i] >= GB || !rec[src[i]]) {
            st = vc_fail(VC_ERR_INTERNAL, "global row %d is not in the batch", src[i]);
            break;
        }
        memcpy(&h, rec[src[i]], sizeof h);
        ntok += h.n_ids;
    }
    rl_batch nb;
    if (!st) st = rl_batch_alloc(&nb, b->B, multi ? dp->g_T : b->T, ntok);
    if (!st && b->route && (st = route_like(&nb, b, ntok))) rl_batch_free(&nb);
    if (!st && b->tk_ids && (st = rl_batch_topk_alloc(&nb, b->tk_k))) rl_batch_free(&nb);
    for (int i = 0; !st && i < b->B; i++) {
        const char *nx;
        if ((st = read_row(&nb, i, rec[src[i]], &nx))) rl_batch_free(&nb);
    }
    if (!st) {
        nb.have_old = b->have_old;
        nb.have_ref = b->have_ref;
        nb.have_values = b->have_values;
        nb.imgs = b->imgs;
        rl_batch_free(b);
        *b = nb;
    }
    free(buf);
    free(all);
    free(sizes);
    free(rec);
    return st;
}
