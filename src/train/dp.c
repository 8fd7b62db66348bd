/* Data parallelism in the trainer: ordered gradient all-reduce or reduce-scatter in buckets, the global
 * gradient norm, clipping, AdamW on the whole model or on this rank's ZeRO-1 shard, weight all-gather,
 * and a cross-rank weights checksum. See the "data parallelism" notes in include/verlc/train.h. */
#include "trainer_dp.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_BUCKET_BYTES ((size_t)32 << 20)

vc_status vc_sharding_parse(const char *s, int *out) {
    if (!s || !*s || !strcmp(s, "none") || !strcmp(s, "dp") || !strcmp(s, "ddp") || !strcmp(s, "no_shard")) {
        *out = VC_SHARD_NONE;
        return VC_OK;
    }
    if (!strcmp(s, "zero1") || !strcmp(s, "zero") || !strcmp(s, "zero-1") || !strcmp(s, "ZeRO-1")) {
        *out = VC_SHARD_ZERO1;
        return VC_OK;
    }
    return vc_fail(VC_ERR_ARG, "sharding=%s: expected none or zero1 (ZeRO-2/3 are not implemented)", s);
}

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

/* index of the tensor holding flat position pos (< n_flat) */
static int tensor_at(const struct vc_trainer_dp *d, int n, size_t pos) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (d->offs[mid] <= pos) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

void vc_dp_flat_read(const vc_trainer *t, float *const *bufs, size_t first, size_t len, float *dst) {
    const struct vc_trainer_dp *d = t->dp;
    size_t end = first + len, pos = first;
    if (pos < d->n_flat) {
        for (int i = tensor_at(d, t->n_params, pos); pos < end && i < t->n_params; i++) {
            size_t stop = min_sz(end, d->offs[i + 1]);
            if (stop > pos) memcpy(dst + (pos - first), bufs[i] + (pos - d->offs[i]), (stop - pos) * sizeof(float));
            if (stop > pos) pos = stop;
        }
    }
    if (pos < end) memset(dst + (pos - first), 0, (end - pos) * sizeof(float));
}

void vc_dp_flat_write(const vc_trainer *t, float *const *bufs, size_t first, size_t len, const float *src) {
    const struct vc_trainer_dp *d = t->dp;
    size_t end = min_sz(first + len, d->n_flat), pos = first;
    if (pos >= end) return;
    for (int i = tensor_at(d, t->n_params, pos); pos < end && i < t->n_params; i++) {
        size_t stop = min_sz(end, d->offs[i + 1]);
        if (stop > pos) memcpy(bufs[i] + (pos - d->offs[i]), src + (pos - first), (stop - pos) * sizeof(float));
        if (stop > pos) pos = stop;
    }
}

/* AdamW over the pieces of the trained tensors inside [first, first + count); gradients from base
 * (shard-relative) when not NULL, else the tensors' own. */
static vc_status make_opt(vc_trainer *t, const vc_optim_param *op, size_t first, size_t count, float *gbase) {
    struct vc_trainer_dp *d = t->dp;
    vc_optim_param *pieces = vc_calloc((size_t)t->n_params + 1, sizeof *pieces);
    if (!pieces) return VC_ERR_NOMEM;
    size_t np = 0, end = first + count;
    for (int i = 0; i < t->n_params; i++) {
        size_t a = d->offs[i] > first ? d->offs[i] : first, b = min_sz(d->offs[i + 1], end);
        if (b <= a) continue;
        size_t off = a - d->offs[i];
        pieces[np++] = (vc_optim_param){ op[i].w + off, gbase ? gbase + (a - first) : op[i].g + off, b - a,
                                          op[i].decay };
    }
    vc_status st = vc_adamw_init(&t->opt, &t->cfg.adamw, pieces, np);
    free(pieces);
    return st;
}

vc_status vc_dp_init(vc_trainer *t, const vc_optim_param *op) {
    vc_comm *c = t->cfg.comm;
    t->rank = c ? vc_comm_rank(c) : 0;
    t->world = c ? vc_comm_size(c) : 1;
    if (t->world <= 1) return vc_adamw_init(&t->opt, &t->cfg.adamw, op, (size_t)t->n_params);
    if (vc_comm_on_device(c))
        return vc_fail(VC_ERR_UNSUPPORTED,
                       "trainer: the %s communicator takes device buffers; the CPU trainer needs a host one "
                       "(VERLC_DIST=mpi)", vc_comm_kind(c));
    if (t->cfg.sharding != VC_SHARD_NONE && t->cfg.sharding != VC_SHARD_ZERO1)
        return vc_fail(VC_ERR_ARG, "trainer: unknown sharding %d", t->cfg.sharding);
    struct vc_trainer_dp *d = vc_calloc(1, sizeof *d);
    if (!d) return VC_ERR_NOMEM;
    t->dp = d;
    d->comm = c;
    d->rank = t->rank;
    d->world = t->world;
    d->zero1 = t->cfg.sharding == VC_SHARD_ZERO1;
    d->offs = vc_calloc((size_t)t->n_params + 1, sizeof *d->offs);
    d->w = vc_calloc((size_t)t->n_params + 1, sizeof *d->w);
    d->decay = vc_calloc((size_t)t->n_params + 1, sizeof *d->decay);
    if (!d->offs || !d->w || !d->decay) return VC_ERR_NOMEM;
    for (int i = 0; i < t->n_params; i++) {
        d->offs[i + 1] = d->offs[i] + op[i].n;
        d->w[i] = op[i].w;
        d->decay[i] = op[i].decay;
    }
    d->n_flat = d->offs[t->n_params];
    d->shard_len = (d->n_flat + (size_t)d->world - 1) / (size_t)d->world;
    d->first = min_sz((size_t)d->rank * d->shard_len, d->n_flat);
    d->count = min_sz(d->shard_len, d->n_flat - d->first);
    size_t bytes = t->cfg.bucket_bytes ? t->cfg.bucket_bytes : DEFAULT_BUCKET_BYTES;
    d->bucket = bytes / sizeof(float) / (size_t)d->world;
    if (d->bucket < 1024) d->bucket = 1024;
    d->bucket = min_sz(d->bucket, d->shard_len ? d->shard_len : 1);
    d->buf = vc_aligned_alloc((size_t)d->world * d->bucket * sizeof(float));
    if (!d->buf) return vc_fail(VC_ERR_NOMEM, "trainer: cannot allocate the communication bucket");
    if (!d->zero1) return vc_adamw_init(&t->opt, &t->cfg.adamw, op, (size_t)t->n_params);
    d->shard_grad = vc_aligned_alloc((d->shard_len ? d->shard_len : 1) * sizeof(float));
    if (!d->shard_grad) return vc_fail(VC_ERR_NOMEM, "trainer: cannot allocate the gradient shard");
    return make_opt(t, op, d->first, d->count, d->shard_grad);
}

void vc_dp_free(vc_trainer *t) {
    struct vc_trainer_dp *d = t->dp;
    if (!d) return;
    free(d->offs);
    free(d->w);
    free(d->decay);
    vc_aligned_free(d->shard_grad);
    vc_aligned_free(d->buf);
    free(d);
    t->dp = NULL;
}

void vc_dp_share(const vc_trainer *t, size_t n_groups, size_t *first, size_t *count) {
    if (!t->dp || t->cfg.local_batch) {
        *first = 0;
        *count = n_groups;
        return;
    }
    size_t p = (size_t)t->world, r = (size_t)t->rank, q = n_groups / p, rem = n_groups % p;
    *count = q + (r < rem);
    *first = r * q + (r < rem ? r : rem);
}

vc_status vc_dp_sum(vc_trainer *t, double *x, size_t n) {
    if (!t->dp) return VC_OK;
    return vc_comm_allreduce_f64_ordered(t->dp->comm, x, n, VC_SUM);
}

vc_status vc_dp_reduce_norm(vc_trainer *t, vc_loss_norm *n, int fixed_factor) {
    if (!t->dp) return VC_OK;
    double s[2] = { n->n_tokens, n->n_seqs };
    vc_status st = vc_comm_allreduce_f64_ordered(t->dp->comm, s, 2, VC_SUM);
    if (!st && !fixed_factor) st = vc_comm_allreduce_f64(t->dp->comm, &n->loss_scale_factor, 1, VC_MAX);
    n->n_tokens = s[0];
    n->n_seqs = s[1];
    return st;
}

/* ---- gradients ---- */
static vc_status reduce_grads(vc_trainer *t) {
    struct vc_trainer_dp *d = t->dp;
    vc_status st = VC_OK;
    if (!d->zero1) {
        size_t chunk = d->bucket * (size_t)d->world;
        for (size_t k = 0; k < d->n_flat && !st; k += chunk) {
            size_t len = min_sz(chunk, d->n_flat - k);
            vc_dp_flat_read(t, t->grads, k, len, d->buf);
            st = vc_comm_allreduce_f32_ordered(d->comm, d->buf, len, VC_SUM);
            if (!st) vc_dp_flat_write(t, t->grads, k, len, d->buf);
        }
        return st;
    }
    for (size_t k = 0; k < d->shard_len && !st; k += d->bucket) {
        size_t len = min_sz(d->bucket, d->shard_len - k);
        for (int r = 0; r < d->world; r++)
            vc_dp_flat_read(t, t->grads, (size_t)r * d->shard_len + k, len, d->buf + (size_t)r * len);
        st = vc_comm_reduce_scatter_f32_ordered(d->comm, d->buf, d->shard_grad + k, len);
    }
    return st;
}

/* Sum of squares over [a, b) of the flat gradient, tensor piece by tensor piece (the pieces and their
 * 4-way accumulation as vc_grad_norm's), from the tensors or from this rank's shard. */
static double sumsq_range(const vc_trainer *t, size_t a, size_t b, const float *shard) {
    const struct vc_trainer_dp *d = t->dp;
    double total = 0.0;
    if (a >= b) return 0.0;
    for (int i = tensor_at(d, t->n_params, a); i < t->n_params && a < b; i++) {
        size_t e = min_sz(b, d->offs[i + 1]);
        if (e <= a) continue;
        const float *g = shard ? shard + (a - d->first) : t->grads[i] + (a - d->offs[i]);
        size_t n = e - a, j = 0;
        double acc[4] = { 0, 0, 0, 0 };
        for (; j + 4 <= n; j += 4)
            for (int k = 0; k < 4; k++) acc[k] += (double)g[j + k] * g[j + k];
        for (; j < n; j++) acc[0] += (double)g[j] * g[j];
        total += (acc[0] + acc[1]) + (acc[2] + acc[3]);
        a = e;
    }
    return total;
}

static vc_status global_norm(vc_trainer *t, double *norm) {
    struct vc_trainer_dp *d = t->dp;
    double *part = vc_calloc((size_t)d->world, sizeof *part);
    if (!part) return VC_ERR_NOMEM;
    vc_status st = VC_OK;
    if (d->zero1) {
        part[d->rank] = sumsq_range(t, d->first, d->first + d->count, d->shard_grad);
        st = vc_comm_allgather(d->comm, part + d->rank, part, sizeof *part);
    } else {
        for (int r = 0; r < d->world; r++) {
            size_t a = min_sz((size_t)r * d->shard_len, d->n_flat);
            part[r] = sumsq_range(t, a, min_sz(a + d->shard_len, d->n_flat), NULL);
        }
    }
    double total = 0.0;
    for (int r = 0; r < d->world; r++) total += part[r];
    free(part);
    *norm = sqrt(total);
    return st;
}

static void scale(float *x, size_t n, float c) {
    for (size_t i = 0; i < n; i++) x[i] *= c;
}

static vc_status gather_weights(vc_trainer *t) {
    struct vc_trainer_dp *d = t->dp;
    vc_status st = VC_OK;
    for (size_t k = 0; k < d->shard_len && !st; k += d->bucket) {
        size_t len = min_sz(d->bucket, d->shard_len - k);
        float *mine = d->buf + (size_t)d->rank * len;
        vc_dp_flat_read(t, d->w, (size_t)d->rank * d->shard_len + k, len, mine);
        st = vc_comm_allgather(d->comm, mine, d->buf, len * sizeof(float));
        for (int r = 0; r < d->world && !st; r++)
            if (r != d->rank) vc_dp_flat_write(t, d->w, (size_t)r * d->shard_len + k, len, d->buf + (size_t)r * len);
    }
    return st;
}

vc_status vc_dp_update(vc_trainer *t, vc_step_stats *st) {
    struct vc_trainer_dp *d = t->dp;
    vc_status s = reduce_grads(t);
    if (!s) s = global_norm(t, &st->grad_norm);
    if (s) return s;
    if (!isfinite(st->grad_norm) || !isfinite(st->loss)) {
        st->skipped = 1;
        t->n_skipped++;
        return VC_OK;
    }
    double max_norm = t->cfg.grad_clip, coef = max_norm / (st->grad_norm + 1e-6);
    if (max_norm > 0 && coef < 1.0) {
        if (d->zero1) scale(d->shard_grad, d->count, (float)coef);
        else
            for (int i = 0; i < t->n_params; i++) scale(t->grads[i], t->sizes[i], (float)coef);
    }
    if ((s = vc_adamw_step(&t->opt, st->lr))) return s;
    return d->zero1 ? gather_weights(t) : VC_OK;
}

/* ---- consistency ---- */
static uint64_t weights_hash(const vc_trainer *t) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < t->n_params; i++) {
        const uint32_t *u = (const uint32_t *)t->dp->w[i];
        for (size_t j = 0; j < t->sizes[i]; j++) h = (h ^ u[j]) * 1099511628211ull;
    }
    return h;
}

vc_status vc_dp_check_weights(vc_trainer *t) {
    struct vc_trainer_dp *d = t->dp;
    if (!d) return VC_OK;
    uint64_t *all = vc_calloc((size_t)d->world, sizeof *all);
    if (!all) return VC_ERR_NOMEM;
    all[d->rank] = weights_hash(t);
    vc_status st = vc_comm_allgather(d->comm, all + d->rank, all, sizeof *all);
    for (int r = 1; r < d->world && !st; r++)
        if (all[r] != all[0])
            st = vc_fail(VC_ERR_INTERNAL, "rank %d: after step %lld the weights of rank %d differ from rank 0's "
                         "(checksum %016llx vs %016llx)", d->rank, (long long)t->step, r,
                         (unsigned long long)all[r], (unsigned long long)all[0]);
    free(all);
    return st;
}
