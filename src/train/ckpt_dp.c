/* Optimiser state of data-parallel checkpoints. With ZeRO-1 every rank writes
 * optim_shard_R_of_N.bin: "VCZERO01", u64 world, rank, n_flat, first, count, i64 step, then m[count] and
 * v[count] (little-endian f32) of its range [first, first + count) of the flattened trained tensors.
 * Loading reads the moments of this trainer's range from those shards or from a whole-model optim.bin
 * (vc_adamw_state_save's layout), whatever the number of ranks that wrote them: re-sharding on load.
 * The moments live in backend memory: they are staged through host buffers with vc_be()->d2h / h2d. */
#define _DEFAULT_SOURCE
#include "trainer_dp.h"
#include "tensor/backend.h"
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char ZMAGIC[8] = { 'V', 'C', 'Z', 'E', 'R', 'O', '0', '1' };
#define ZHEADER (8 + 6 * 8)

/* this trainer's optimiser range of the flat vector */
static void opt_range(const vc_trainer *t, size_t *first, size_t *count) {
    *first = t->dp && t->dp->zero1 ? t->dp->first : 0;
    *count = 0;
    for (size_t i = 0; i < t->opt.n_params; i++) *count += t->opt.params[i].n;
}

/* the moments mv (m or v) of every tensor of this rank, in order, to f through a staging buffer */
static vc_status put_moments(vc_afile *f, const vc_trainer *t, float *const *mv, float *stage) {
    vc_status st = VC_OK;
    for (size_t i = 0; i < t->opt.n_params && !st; i++)
        st = vc_adamw_put_floats(&t->opt, mv[i], t->opt.params[i].n, stage, vc_put_afile, f);
    return st;
}

vc_status vc_dp_save_optim(const char *dir, const vc_trainer *t) {
    if (!t->dp || !t->dp->zero1) return VC_OK;
    const struct vc_trainer_dp *d = t->dp;
    size_t first, count;
    opt_range(t, &first, &count);
    unsigned char head[ZHEADER];
    uint64_t h[6] = { (uint64_t)d->world, (uint64_t)d->rank, d->n_flat, first, count, (uint64_t)t->opt.step };
    memcpy(head, ZMAGIC, 8);
    memcpy(head + 8, h, sizeof h);
    char name[64];
    snprintf(name, sizeof name, "optim_shard_%d_of_%d.bin", d->rank, d->world);
    char *p = vc_path_join(dir, name);
    float *stage = vc_malloc(VC_ADAMW_STAGE_FLOATS * sizeof(float));
    vc_afile *f = NULL;
    vc_status st = p && stage ? vc_afile_open(p, &f) : VC_ERR_NOMEM; /* streamed: never whole in host memory */
    if (!st) st = vc_afile_write(f, head, ZHEADER);
    if (!st) st = put_moments(f, t, t->opt.m, stage);
    if (!st) st = put_moments(f, t, t->opt.v, stage);
    if (st) vc_afile_abort(f);
    else st = vc_afile_commit(f);
    free(stage);
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
        unsigned char hd[ZHEADER];
        uint64_t h[6];
        if (!f) st = vc_fail(VC_ERR_MISSING, "%s: missing (a checkpoint written by %d ranks)", p ? p : dir, world);
        if (!st) st = read_at(f, p, 0, hd, ZHEADER);
        if (!st) memcpy(h, hd + 8, sizeof h);
        if (!st && (memcmp(hd, ZMAGIC, 8) || h[0] != (uint64_t)world || h[1] != (uint64_t)r))
            st = vc_fail(VC_ERR_FORMAT, "%s: bad header", p);
        if (!st && h[2] != n_flat)
            st = vc_fail(VC_ERR_SHAPE, "%s: %llu parameters saved, the trainer has %zu (another model?)", p,
                         (unsigned long long)h[2], n_flat);
        if (!st && r > 0 && (int64_t)h[5] != *step)
            st = vc_fail(VC_ERR_FORMAT, "%s: optimiser step %lld, shard 0 has %lld", p, (long long)h[5],
                         (long long)*step);
        if (!st) {
            *step = (int64_t)h[5];
            st = copy_overlap(f, p, h[3], h[4], ZHEADER, ZHEADER + (long long)h[4] * 4, first, count, m, v, &got);
        }
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
        if (hi <= lo) continue;
        vc_be()->h2d(t->opt.m[i] + (lo - off), m + (lo - a), (hi - lo) * sizeof(float));
        if (t->opt.v[i]) vc_be()->h2d(t->opt.v[i] + (lo - off), v + (lo - a), (hi - lo) * sizeof(float)); /* Muon: none */
    }
    return vc_be()->sync(); /* the staging buffers are reused */
}

/* this trainer's moments in pieces of at most 4 Mi floats (never a second copy of the whole state in host memory),
 * from optim.bin or from the shards of any number of ranks */
vc_status vc_dp_load_optim(const char *dir, vc_trainer *t) {
    size_t first, count;
    opt_range(t, &first, &count);
    size_t cap = count < VC_ADAMW_STAGE_FLOATS ? count : VC_ADAMW_STAGE_FLOATS;
    float *m = vc_malloc((cap + 1) * sizeof(float)), *v = vc_malloc((cap + 1) * sizeof(float));
    char *full = vc_path_join(dir, "optim.bin");
    int64_t step = 0;
    int world = shard_world(dir), whole = full && vc_file_exists(full);
    vc_status st = m && v && full ? VC_OK : VC_ERR_NOMEM;
    if (!st && !whole && world <= 0)
        st = vc_fail(VC_ERR_MISSING, "%s: no optim.bin and no optim_shard_*_of_N.bin", dir);
    for (size_t a = first, k; !st; a += k) { /* (once for an empty range: the header and step are still read) */
        k = first + count - a < cap ? first + count - a : cap;
        st = whole ? load_full(full, t, a, k, m, v, &step) : load_shards(dir, world, t, a, k, m, v, &step);
        if (!st) st = scatter(t, first, a, k, m, v);
        if (a + k >= first + count) break;
    }
    if (!st && step < 0) st = vc_fail(VC_ERR_FORMAT, "%s: negative optimiser step", dir);
    if (!st) t->opt.step = step;
    free(m);
    free(v);
    free(full);
    return st;
}

vc_status vc_train_ckpt_write_shard(const char *dir, const vc_trainer *t) { return vc_dp_save_optim(dir, t); }

int vc_trainer_sharded(const vc_trainer *t) { return t->dp && t->dp->zero1; }
