/* Optimiser state of data-parallel checkpoints. With ZeRO-1 (and -2, -3) and with layer-wise Muon every rank writes
 * optim_shard_R_of_N.bin: "VCZERO02", u64 world, rank, n_flat, n_runs, i64 step, n_runs pairs of u64 (first, count),
 * then the m of every run in order and the v of every run (little-endian f32; zeros for Muon's tensors, which have
 * no second moment): the runs are the ranges [first, first + count) of the flattened trained tensors this rank holds
 * (ZeRO: its one block; layer-wise: its tensors, consecutive ones merged). "VCZERO01" files (one range: u64 world,
 * rank, n_flat, first, count, i64 step) read as before. Loading reads the moments of this trainer's runs from those
 * shards or from a whole-model optim.bin (vc_adamw_state_save's layout), whatever the number of ranks or the
 * sharding that wrote them: re-sharding on load. The moments live in backend memory: they are staged through host
 * buffers with vc_be()->d2h / h2d. */
#define _DEFAULT_SOURCE
#include "trainer_dp.h"
#include "tensor/backend.h"
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char ZMAGIC1[8] = { 'V', 'C', 'Z', 'E', 'R', 'O', '0', '1' };
static const char ZMAGIC2[8] = { 'V', 'C', 'Z', 'E', 'R', 'O', '0', '2' };
#define ZHEADER (8 + 6 * 8)  /* VCZERO01's */
#define ZHEADER2 (8 + 5 * 8) /* VCZERO02's, before its runs */

/* this trainer's optimiser range of the flat vector */
static void opt_range(const vc_trainer *t, size_t *first, size_t *count) {
    *first = t->dp && t->dp->zero1 ? t->dp->first : 0;
    *count = 0;
    for (size_t i = 0; i < t->opt.n_params; i++) *count += t->opt.params[i].n;
}

/* the runs of consecutive tensors whose state this rank holds, as flat [first, first + count) pairs (run[2 k],
 * run[2 k + 1]); at least room for one */
static size_t held_runs(const vc_trainer *t, uint64_t *run) {
    size_t first, count, n = 0, off;
    opt_range(t, &first, &count);
    off = first;
    for (size_t i = 0; i < t->opt.n_params; off += t->opt.params[i].n, i++) {
        if (!t->opt.m[i] || !t->opt.params[i].n) continue;
        if (n && run[2 * n - 2] + run[2 * n - 1] == off) run[2 * n - 1] += t->opt.params[i].n;
        else {
            run[2 * n] = off;
            run[2 * n + 1] = t->opt.params[i].n;
            n++;
        }
    }
    return n;
}

/* the moments mv (m or v) of every held tensor of this rank, in order, to f through a staging buffer (zeros where
 * the tensor has none: Muon's v) */
static vc_status put_moments(vc_afile *f, const vc_trainer *t, float *const *mv, float *stage) {
    vc_status st = VC_OK;
    for (size_t i = 0; i < t->opt.n_params && !st; i++) {
        size_t n = t->opt.params[i].n;
        if (!t->opt.m[i]) continue;
        if (mv[i]) {
            st = vc_adamw_put_floats(&t->opt, mv[i], n, stage, vc_put_afile, f);
            continue;
        }
        memset(stage, 0, (n < VC_ADAMW_STAGE_FLOATS ? n : VC_ADAMW_STAGE_FLOATS) * sizeof(float));
        for (size_t at = 0; at < n && !st; at += VC_ADAMW_STAGE_FLOATS)
            st = vc_afile_write(f, stage, (n - at < VC_ADAMW_STAGE_FLOATS ? n - at : VC_ADAMW_STAGE_FLOATS) * 4);
    }
    return st;
}

vc_status vc_dp_save_optim(const char *dir, const vc_trainer *t) {
    if (!vc_trainer_sharded(t)) return VC_OK;
    const struct vc_trainer_dp *d = t->dp;
    uint64_t *run = vc_calloc(2 * (t->opt.n_params + 1), sizeof *run);
    size_t n_runs = run ? held_runs(t, run) : 0;
    unsigned char head[ZHEADER];
    uint64_t h[6] = { (uint64_t)d->world, (uint64_t)d->rank, d->n_flat, n_runs, (uint64_t)t->opt.step, 0 };
    memcpy(head, ZMAGIC2, 8);
    memcpy(head + 8, h, ZHEADER2 - 8);
    char name[64];
    snprintf(name, sizeof name, "optim_shard_%d_of_%d.bin", d->rank, d->world);
    char *p = vc_path_join(dir, name);
    float *stage = vc_malloc(VC_ADAMW_STAGE_FLOATS * sizeof(float));
    vc_afile *f = NULL;
    vc_status st = p && stage && run ? vc_afile_open(p, &f) : VC_ERR_NOMEM; /* streamed: never whole in host memory */
    if (!st) st = vc_afile_write(f, head, ZHEADER2);
    if (!st && n_runs) st = vc_afile_write(f, run, n_runs * 2 * sizeof *run);
    if (!st) st = put_moments(f, t, t->opt.m, stage);
    if (!st) st = put_moments(f, t, t->opt.v, stage);
    if (st) vc_afile_abort(f);
    else st = vc_afile_commit(f);
    free(stage);
    free(run);
    free(p);
    return st;
}

static vc_status read_at(FILE *f, const char *path, long long off, void *dst, size_t bytes) {
    if (!bytes) return VC_OK;
    if (fseeko(f, (off_t)off, SEEK_SET) != 0 || fread(dst, 1, bytes, f) != bytes)
        return vc_fail(VC_ERR_FORMAT, "%s: truncated (%zu bytes at offset %lld)", path, bytes, off);
    return VC_OK;
}

/* Copies [a, b) of a source range [s0, s0 + n) stored as m at moff, v at voff into m/v (range first). */
static vc_status copy_overlap(FILE *f, const char *path, size_t s0, size_t n, long long moff, long long voff,
                              size_t first, size_t count, float *m, float *v, size_t *got) {
    size_t a = s0 > first ? s0 : first, b = s0 + n < first + count ? s0 + n : first + count;
    if (b <= a) return VC_OK;
    vc_status st = read_at(f, path, moff + (long long)(a - s0) * 4, m + (a - first), (b - a) * 4);
    if (!st) st = read_at(f, path, voff + (long long)(a - s0) * 4, v + (a - first), (b - a) * 4);
    if (!st) *got += b - a;
    return st;
}

/* from a whole-model optim.bin */
static vc_status load_full(const char *path, const vc_trainer *t, size_t first, size_t count, float *m, float *v,
                           int64_t *step) {
    FILE *f = fopen(path, "rb");
    if (!f) return vc_fail(VC_ERR_IO, "%s: cannot open", path);
    unsigned char hd[24];
    uint64_t np, n;
    size_t got = 0, flat = 0;
    vc_status st = read_at(f, path, 0, hd, 24);
    if (!st && memcmp(hd, "VCADAMW1", 8)) st = vc_fail(VC_ERR_FORMAT, "%s: bad header", path);
    if (st) goto out;
    memcpy(&np, hd + 8, 8);
    memcpy(step, hd + 16, 8);
    if (np != (uint64_t)t->n_params) {
        st = vc_fail(VC_ERR_SHAPE, "%s: %llu tensors saved, the trainer has %d", path, (unsigned long long)np,
                     t->n_params);
        goto out;
    }
    long long at = 24;
    for (int i = 0; i < t->n_params && !st; i++) {
        if ((st = read_at(f, path, at, &n, 8))) break;
        if (n != t->sizes[i]) {
            st = vc_fail(VC_ERR_SHAPE, "%s: tensor %d has %llu elements saved, %zu expected", path, i,
                         (unsigned long long)n, t->sizes[i]);
            break;
        }
        st = copy_overlap(f, path, flat, n, at + 8, at + 8 + (long long)n * 4, first, count, m, v, &got);
        at += 8 + 8 * (long long)n;
        flat += n;
    }
    if (!st && got != count) st = vc_fail(VC_ERR_FORMAT, "%s: holds %zu of %zu moments", path, got, count);
    if (!st && (fseeko(f, 0, SEEK_END) != 0 || ftello(f) != (off_t)at))
        st = vc_fail(VC_ERR_FORMAT, "%s: %lld bytes, %lld expected", path, (long long)ftello(f), at);
out:
    fclose(f);
    return st;
}

/* number of ranks that wrote optim_shard_*_of_N.bin files in dir (0: none) */
static int shard_world(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0, r, w;
    char tail[8];
    while (d && (e = readdir(d)))
        if (sscanf(e->d_name, "optim_shard_%d_of_%d.bi%1s", &r, &w, tail) == 3 && w > n) n = w;
    if (d) closedir(d);
    return n;
}

/* one shard file's moments overlapping [first, first + count): its header checked against rank r of world */
static vc_status load_shard(FILE *f, const char *p, int r, int world, size_t n_flat, size_t n_params, size_t first,
                            size_t count, float *m, float *v, int64_t *step, size_t *got) {
    unsigned char hd[ZHEADER];
    uint64_t h[6], one[2], *run = one, n_runs = 1, total = 0;
    vc_status st = read_at(f, p, 0, hd, ZHEADER2);
    int v2 = !st && !memcmp(hd, ZMAGIC2, 8);
    if (!st && !v2) st = read_at(f, p, ZHEADER2, hd + ZHEADER2, ZHEADER - ZHEADER2);
    if (!st) memcpy(h, hd + 8, sizeof h);
    if (!st && ((!v2 && memcmp(hd, ZMAGIC1, 8)) || h[0] != (uint64_t)world || h[1] != (uint64_t)r))
        return vc_fail(VC_ERR_FORMAT, "%s: bad header", p);
    if (!st && h[2] != n_flat)
        return vc_fail(VC_ERR_SHAPE, "%s: %llu parameters saved, the trainer has %zu (another model?)", p,
                       (unsigned long long)h[2], n_flat);
    int64_t s = (int64_t)(v2 ? h[4] : h[5]);
    if (!st && r > 0 && s != *step)
        return vc_fail(VC_ERR_FORMAT, "%s: optimiser step %lld, shard 0 has %lld", p, (long long)s, (long long)*step);
    if (st) return st;
    *step = s;
    long long base = ZHEADER;
    if (v2) {
        n_runs = h[3];
        if (n_runs > n_params) return vc_fail(VC_ERR_FORMAT, "%s: %llu runs of tensors", p, (unsigned long long)n_runs);
        run = vc_calloc(2 * n_runs + 2, sizeof *run);
        if (!run) return VC_ERR_NOMEM;
        base = ZHEADER2;
        st = read_at(f, p, base, run, n_runs * 2 * sizeof *run);
        base += (long long)(n_runs * 2 * sizeof *run);
    } else {
        one[0] = h[3];
        one[1] = h[4];
    }
    for (uint64_t k = 0; k < n_runs && !st; k++) {
        if (run[2 * k] > n_flat || run[2 * k + 1] > n_flat - run[2 * k])
            st = vc_fail(VC_ERR_FORMAT, "%s: range [%llu, +%llu) outside the %zu parameters", p,
                         (unsigned long long)run[2 * k], (unsigned long long)run[2 * k + 1], n_flat);
        total += run[2 * k + 1];
    }
    for (uint64_t k = 0, pre = 0; k < n_runs && !st; pre += run[2 * k + 1], k++)
        st = copy_overlap(f, p, run[2 * k], run[2 * k + 1], base + (long long)pre * 4,
                          base + (long long)(total + pre) * 4, first, count, m, v, got);
    if (run != one) free(run);
    return st;
}

static vc_status load_shards(const char *dir, int world, const vc_trainer *t, size_t first, size_t count, float *m,
                             float *v, int64_t *step) {
    size_t got = 0, n_flat = 0;
    for (int i = 0; i < t->n_params; i++) n_flat += t->sizes[i];
    vc_status st = VC_OK;
    for (int r = 0; r < world && !st; r++) {
        char name[64];
        snprintf(name, sizeof name, "optim_shard_%d_of_%d.bin", r, world);
        char *p = vc_path_join(dir, name);
        FILE *f = p ? fopen(p, "rb") : NULL;
        if (!f) st = vc_fail(VC_ERR_MISSING, "%s: missing (a checkpoint written by %d ranks)", p ? p : dir, world);
        else st = load_shard(f, p, r, world, n_flat, (size_t)t->n_params, first, count, m, v, step, &got);
        if (f) fclose(f);
        free(p);
    }
    if (!st && got != count) st = vc_fail(VC_ERR_FORMAT, "%s: the shards hold %zu of %zu moments", dir, got, count);
    return st;
}

/* the moments of the flat range [a, a + k) (m, v: host) into the backend memory of the tensors that hold them; the
 * trainer's tensors lie one after the other from first */
static vc_status scatter(const vc_trainer *t, size_t first, size_t a, size_t k, const float *m, const float *v) {
    size_t off = first;
    for (size_t i = 0; i < t->opt.n_params; off += t->opt.params[i].n, i++) {
        size_t n = t->opt.params[i].n, lo = a > off ? a : off, hi = a + k < off + n ? a + k : off + n;
        if (hi <= lo || !t->opt.m[i]) continue; /* (layer-wise: another rank's tensor) */
        vc_be()->h2d(t->opt.m[i] + (lo - off), m + (lo - a), (hi - lo) * sizeof(float));
        if (t->opt.v[i]) vc_be()->h2d(t->opt.v[i] + (lo - off), v + (lo - a), (hi - lo) * sizeof(float)); /* Muon: none */
    }
    return vc_be()->sync(); /* the staging buffers are reused */
}

/* this trainer's moments in pieces of at most 4 Mi floats (never a second copy of the whole state in host memory),
 * run by run of the tensors it holds, from optim.bin or from the shards of any number of ranks */
vc_status vc_dp_load_optim(const char *dir, vc_trainer *t) {
    size_t first, count;
    opt_range(t, &first, &count);
    size_t cap = count < VC_ADAMW_STAGE_FLOATS ? count : VC_ADAMW_STAGE_FLOATS;
    float *m = vc_malloc((cap + 1) * sizeof(float)), *v = vc_malloc((cap + 1) * sizeof(float));
    uint64_t *run = vc_calloc(2 * (t->opt.n_params + 1), sizeof *run);
    char *full = vc_path_join(dir, "optim.bin");
    int64_t step = 0;
    int world = shard_world(dir), whole = full && vc_file_exists(full);
    vc_status st = m && v && full && run ? VC_OK : VC_ERR_NOMEM;
    size_t n_runs = st ? 0 : held_runs(t, run);
    if (!st && !n_runs) run[0] = first, run[1] = 0, n_runs = 1; /* (the header and step are still read) */
    if (!st && !whole && world <= 0)
        st = vc_fail(VC_ERR_MISSING, "%s: no optim.bin and no optim_shard_*_of_N.bin", dir);
    for (size_t r = 0; r < n_runs && !st; r++)
        for (size_t a = run[2 * r], end = a + run[2 * r + 1], k; !st; a += k) {
            k = end - a < cap ? end - a : cap;
            st = whole ? load_full(full, t, a, k, m, v, &step) : load_shards(dir, world, t, a, k, m, v, &step);
            if (!st) st = scatter(t, first, a, k, m, v);
            if (a + k >= end) break;
        }
    if (!st && step < 0) st = vc_fail(VC_ERR_FORMAT, "%s: negative optimiser step", dir);
    if (!st) t->opt.step = step;
    free(m);
    free(v);
    free(run);
    free(full);
    return st;
}

vc_status vc_train_ckpt_write_shard(const char *dir, const vc_trainer *t) { return vc_dp_save_optim(dir, t); }

int vc_trainer_sharded(const vc_trainer *t) { return t->dp && (t->dp->zero1 || t->dp->lw); }
