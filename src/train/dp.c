/* Data parallelism in the trainer: ordered gradient all-reduce or reduce-scatter in buckets, the global
 * gradient norm, clipping, AdamW on the whole model or on this rank's ZeRO-1 shard, weight all-gather,
 * and a cross-rank weights checksum. See the "data parallelism" notes in include/verlc/train.h. */
#include "trainer_dp.h"
#include "tensor/backend.h"
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
    if (!strcmp(s, "zero2") || !strcmp(s, "zero-2") || !strcmp(s, "ZeRO-2")) {
        *out = VC_SHARD_ZERO2;
        return VC_OK;
    }
    if (!strcmp(s, "zero3") || !strcmp(s, "zero-3") || !strcmp(s, "ZeRO-3") || !strcmp(s, "fsdp") ||
        !strcmp(s, "full_shard")) {
        *out = VC_SHARD_ZERO3;
        return VC_OK;
    }
    return vc_fail(VC_ERR_ARG, "sharding=%s: expected none, zero1, zero2 or zero3", s);
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

/* Moves between backend memory (the tensors) and the communication buffer: device-to-device when the
 * communicator takes device buffers (NCCL), else through the backend's d2h / h2d (a copy on the CPU). */
void vc_dp_to_comm(const struct vc_trainer_dp *d, float *dst, const float *src, size_t n) {
    if (d->dev_comm) vc_be()->d2d(dst, src, n * sizeof(float));
    else vc_be()->d2h(dst, src, n * sizeof(float));
}

void vc_dp_from_comm(const struct vc_trainer_dp *d, float *dst, const float *src, size_t n) {
    if (d->dev_comm) vc_be()->d2d(dst, src, n * sizeof(float));
    else vc_be()->h2d(dst, src, n * sizeof(float));
}

static void zero_comm(const struct vc_trainer_dp *d, float *dst, size_t n) {
    if (d->dev_comm) vc_be()->zero(dst, n * sizeof(float));
    else memset(dst, 0, n * sizeof(float));
}

void vc_dp_flat_read(const vc_trainer *t, float *const *bufs, size_t first, size_t len, float *dst) {
    const struct vc_trainer_dp *d = t->dp;
    size_t end = first + len, pos = first;
    if (pos < d->n_flat) {
        for (int i = tensor_at(d, t->n_params, pos); pos < end && i < t->n_params; i++) {
            size_t stop = min_sz(end, d->offs[i + 1]);
            if (stop > pos) vc_dp_to_comm(d, dst + (pos - first), bufs[i] + (pos - d->offs[i]), stop - pos);
            if (stop > pos) pos = stop;
        }
    }
    if (pos < end) zero_comm(d, dst + (pos - first), end - pos);
}

void vc_dp_flat_write(const vc_trainer *t, float *const *bufs, size_t first, size_t len, const float *src) {
    const struct vc_trainer_dp *d = t->dp;
    size_t end = min_sz(first + len, d->n_flat), pos = first;
    if (pos >= end) return;
    for (int i = tensor_at(d, t->n_params, pos); pos < end && i < t->n_params; i++) {
        size_t stop = min_sz(end, d->offs[i + 1]);
        if (stop > pos) vc_dp_from_comm(d, bufs[i] + (pos - d->offs[i]), src + (pos - first), stop - pos);
        if (stop > pos) pos = stop;
    }
}

/* AdamW over the pieces of the trained tensors inside [first, first + count); gradients from gbase
 * (shard-relative) when not NULL, else the tensors' own; weights from wbase likewise (ZeRO-3). */
static vc_status make_opt(vc_trainer *t, const vc_optim_param *op, size_t first, size_t count, float *gbase,
                          float *wbase) {
    struct vc_trainer_dp *d = t->dp;
    vc_optim_param *pieces = vc_calloc((size_t)t->n_params + 1, sizeof *pieces);
    if (!pieces) return VC_ERR_NOMEM;
    size_t np = 0, end = first + count;
    for (int i = 0; i < t->n_params; i++) {
        size_t a = d->offs[i] > first ? d->offs[i] : first, b = min_sz(d->offs[i + 1], end);
        if (b <= a) continue;
        size_t off = a - d->offs[i];
        pieces[np++] = (vc_optim_param){ wbase ? wbase + (a - first) : op[i].w + off, gbase ? gbase + (a - first) : op[i].g + off, b - a,
                                          op[i].decay };
    }
    vc_status st = vc_adamw_init(&t->opt, &t->cfg.adamw, pieces, np);
    free(pieces);
    return st;
}

/* A communicator that takes device buffers (NCCL) needs the tensors in device memory; a host one (MPI,
 * single) works with any backend through staging copies. */
static vc_status check_comm(vc_comm *c) {
    if (!vc_comm_on_device(c) || !vc_be()->host_visible) return VC_OK;
    return vc_fail(VC_ERR_UNSUPPORTED,
                   "trainer: the %s communicator takes device buffers, but the %s backend keeps tensors in host "
                   "memory (use VERLC_DIST=mpi, or a GPU device)", vc_comm_kind(c), vc_be()->name);
}

static vc_status alloc_buffers(vc_trainer *t, struct vc_trainer_dp *d) {
    size_t bytes = t->cfg.bucket_bytes ? t->cfg.bucket_bytes : DEFAULT_BUCKET_BYTES;
    d->bucket = bytes / sizeof(float) / (size_t)d->world;
    if (d->bucket < 1024) d->bucket = 1024;
    d->bucket = min_sz(d->bucket, d->shard_len ? d->shard_len : 1);
    /* world blocks to send plus one block that receives this rank's reduced block */
    vc_status st = vc_comm_mem_alloc(d->comm, ((size_t)d->world + 1) * d->bucket * sizeof(float), (void **)&d->buf);
    if (st) return vc_fail_ctx(st, "trainer: the communication bucket");
    if (!d->zero1) return VC_OK;
    d->shard_grad = vc_be()->alloc((d->shard_len ? d->shard_len : 1) * sizeof(float));
    return d->shard_grad ? VC_OK : vc_fail_ctx(VC_ERR_NOMEM, "trainer: the gradient shard");
}

vc_status vc_dp_init(vc_trainer *t, const vc_optim_param *op, vc_tensor **tens) {
    vc_comm *c = t->cfg.comm;
    t->rank = c ? vc_comm_rank(c) : 0;
    t->world = c ? vc_comm_size(c) : 1;
    if (t->world <= 1) return vc_adamw_init(&t->opt, &t->cfg.adamw, op, (size_t)t->n_params);
    vc_status st = check_comm(c);
    if (st) return st;
    if (t->cfg.sharding < VC_SHARD_NONE || t->cfg.sharding > VC_SHARD_ZERO3)
        return vc_fail(VC_ERR_ARG, "trainer: unknown sharding %d", t->cfg.sharding);
    if (t->cfg.sharding == VC_SHARD_ZERO3 && t->cfg.overlap_grad_reduce)
        return vc_fail(VC_ERR_UNSUPPORTED, "trainer: ZeRO-3 gathers layers between the gradient reductions on the "
                       "main thread; overlap_grad_reduce is not supported with it (turn one off)");
    if (t->cfg.adamw.muon.on && t->cfg.sharding != VC_SHARD_NONE)
        return vc_fail(VC_ERR_UNSUPPORTED, "trainer: Muon orthogonalises whole matrices, so its state is not sharded "
                       "(Megatron-core refuses Muon with its distributed optimizer as well): zero_stage=0 with "
                       "optim.optimizer=muon");
    struct vc_trainer_dp *d = vc_calloc(1, sizeof *d);
    if (!d) return VC_ERR_NOMEM;
    t->dp = d;
    d->comm = c;
    d->dev_comm = vc_comm_on_device(c);
    d->rank = t->rank;
    d->world = t->world;
    d->zero3 = t->cfg.sharding == VC_SHARD_ZERO3;
    d->zero2 = t->cfg.sharding == VC_SHARD_ZERO2 || d->zero3;
    d->zero1 = t->cfg.sharding == VC_SHARD_ZERO1 || d->zero2;
    d->tens = vc_calloc((size_t)t->n_params + 1, sizeof *d->tens);
    if (!d->tens) return VC_ERR_NOMEM;
    memcpy(d->tens, tens, (size_t)t->n_params * sizeof *tens);
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
    if ((st = alloc_buffers(t, d))) return st;
    if (d->zero2 && (st = vc_dp_zero2_init(t, tens))) return st;
    if (d->zero3 && (st = vc_dp_zero3_init(t))) return st;
    if (!d->zero1) { /* Muon: the ranks share out its groups' Newton-Schulz work (muon_bcast), layer-wise its state */
        d->lw = t->cfg.adamw.muon.on && t->cfg.adamw.muon.layer_wise;
        return vc_adamw_init_dp(&t->opt, &t->cfg.adamw, op, (size_t)t->n_params, d->rank, d->world);
    }
    return make_opt(t, op, d->first, d->count, d->shard_grad, vc_dp_zero3_master(t));
}

void vc_dp_free(vc_trainer *t) {
    struct vc_trainer_dp *d = t->dp;
    if (!d) return;
    free(d->offs);
    free(d->w);
    free(d->decay);
    vc_dp_overlap_free(t);
    vc_dp_zero3_free(t);
    vc_dp_zero2_free(t);
    free(d->tens);
    vc_be()->free(d->shard_grad);
    vc_comm_mem_free(d->comm, d->buf);
    free(d);
    t->dp = NULL;
}

void vc_dp_share(const vc_trainer *t, size_t n_groups, size_t *first, size_t *count) {
    vc_dp_share_of(t, t->rank, n_groups, first, count);
}

void vc_dp_share_of(const vc_trainer *t, int rank, size_t n_groups, size_t *first, size_t *count) {
    if (!t->dp || t->cfg.local_batch) {
        *first = 0;
        *count = n_groups;
        return;
    }
    size_t p = (size_t)t->world, r = (size_t)rank, q = n_groups / p, rem = n_groups % p;
    *count = q + (r < rem);
    *first = r * q + (r < rem ? r : rem);
}

/* Collectives on small host arrays (counts, losses, norms, checksums). A device communicator (NCCL)
 * takes device buffers only: the array is staged through communicator memory. kind: 0 ordered f64
 * allreduce, 1 f64 allreduce, 2 allgather of `bytes` per rank (x holds every rank's block). */
static vc_status host_coll(struct vc_trainer_dp *d, int kind, void *x, size_t n, vc_reduce_op op) {
    size_t bytes = kind == 2 ? n * (size_t)d->world : n * sizeof(double);
    void *dev = NULL;
    vc_status st = VC_OK;
    if (d->dev_comm && !(st = vc_comm_mem_alloc(d->comm, bytes, &dev))) st = vc_comm_mem_upload(d->comm, dev, x, bytes);
    void *buf = d->dev_comm ? dev : x;
    if (!st && kind == 0) st = vc_comm_allreduce_f64_ordered(d->comm, buf, n, op);
    else if (!st && kind == 1) st = vc_comm_allreduce_f64(d->comm, buf, n, op);
    else if (!st) st = vc_comm_allgather(d->comm, (char *)buf + (size_t)d->rank * n, buf, n);
    if (!st && d->dev_comm) st = vc_comm_mem_download(d->comm, x, dev, bytes);
    vc_comm_mem_free(d->comm, dev);
    return st;
}

vc_status vc_dp_sum(vc_trainer *t, double *x, size_t n) {
    if (!t->dp) return VC_OK;
    return host_coll(t->dp, 0, x, n, VC_SUM);
}

vc_status vc_dp_max(vc_trainer *t, double *x) { return t->dp ? host_coll(t->dp, 1, x, 1, VC_MAX) : VC_OK; }

vc_status vc_dp_reduce_norm(vc_trainer *t, vc_loss_norm *n, int fixed_factor) {
    if (!t->dp) return VC_OK;
    double s[2] = { n->n_tokens, n->n_seqs };
    vc_status st = host_coll(t->dp, 0, s, 2, VC_SUM);
    if (!st && !fixed_factor) st = host_coll(t->dp, 1, &n->loss_scale_factor, 1, VC_MAX);
    n->n_tokens = s[0];
    n->n_seqs = s[1];
    return st;
}

/* ---- gradients ---- */
size_t vc_dp_n_buckets(const vc_trainer *t) {
    const struct vc_trainer_dp *d = t->dp;
    size_t unit = d->zero1 ? d->bucket : d->bucket * (size_t)d->world, n = d->zero1 ? d->shard_len : d->n_flat;
    return (n + unit - 1) / unit;
}

void vc_dp_bucket_ranges(const vc_trainer *t, size_t b, size_t *start, size_t *len) {
    const struct vc_trainer_dp *d = t->dp;
    if (!d->zero1) { /* one range of the flat vector */
        size_t chunk = d->bucket * (size_t)d->world;
        *start = b * chunk;
        *len = min_sz(chunk, d->n_flat - *start);
        return;
    }
    *start = b * d->bucket; /* the same offset in every rank's block */
    *len = min_sz(d->bucket, d->shard_len - *start);
}

/* Reduces bucket b of the gradients: the ordered all-reduce of one range of the flat vector, or (ZeRO-1)
 * the ordered reduce-scatter of one bucket of every rank's block into this rank's shard. Each element's
 * sum is the rank-order sum whatever the bucketing, so bucket sizes and order never change the bits. */
vc_status vc_dp_reduce_bucket(vc_trainer *t, size_t b) {
    struct vc_trainer_dp *d = t->dp;
    size_t k, len;
    vc_dp_bucket_ranges(t, b, &k, &len);
    vc_status st;
    if (!d->zero1) {
        vc_dp_flat_read(t, t->grads, k, len, d->buf);
        st = vc_comm_allreduce_f32_ordered(d->comm, d->buf, len, VC_SUM);
        if (!st) vc_dp_flat_write(t, t->grads, k, len, d->buf);
        return st;
    }
    for (int r = 0; r < d->world; r++)
        vc_dp_flat_read(t, t->grads, (size_t)r * d->shard_len + k, len, d->buf + (size_t)r * len);
    /* a device communicator writes the shard itself; a host one a staging block, then uploaded */
    float *out = d->dev_comm ? d->shard_grad + k : d->buf + (size_t)d->world * len;
    st = vc_comm_reduce_scatter_f32_ordered(d->comm, d->buf, out, len);
    if (!st && !d->dev_comm) vc_be()->h2d(d->shard_grad + k, out, len * sizeof(float));
    return st;
}

/* all buckets, in the order the overlapped path issues them when it is on (every rank the same order) */
static vc_status reduce_grads(vc_trainer *t) {
    size_t n = vc_dp_n_buckets(t);
    vc_status st = VC_OK;
    for (size_t i = 0; i < n && !st; i++) st = vc_dp_reduce_bucket(t, t->cfg.overlap_grad_reduce ? n - 1 - i : i);
    return st;
}

/* Sum of squares of n pieces of backend memory (the backend's fixed-order entry). */
static vc_status sumsq_pieces(const float *const *x, const size_t *len, size_t n, double *out) {
    *out = 0.0;
    return n ? vc_be()->sumsq(x, len, n, out) : VC_OK;
}

/* Sum of squares over [a, b) of the flat gradient, tensor piece by tensor piece, from the tensors or
 * from this rank's shard (backend memory either way). */
static vc_status sumsq_range(const vc_trainer *t, size_t a, size_t b, const float *shard, double *out) {
    const struct vc_trainer_dp *d = t->dp;
    *out = 0.0;
    if (a >= b) return VC_OK;
    const float **x = vc_calloc((size_t)t->n_params + 1, sizeof *x);
    size_t *len = vc_calloc((size_t)t->n_params + 1, sizeof *len), n = 0;
    vc_status st = x && len ? VC_OK : VC_ERR_NOMEM;
    for (int i = tensor_at(d, t->n_params, a); !st && i < t->n_params && a < b; i++) {
        size_t e = min_sz(b, d->offs[i + 1]);
        if (e <= a) continue;
        x[n] = shard ? shard + (a - d->first) : t->grads[i] + (a - d->offs[i]);
        len[n++] = e - a;
        a = e;
    }
    if (!st) st = sumsq_pieces(x, len, n, out);
    free(x);
    free(len);
    return st;
}

static vc_status global_norm(vc_trainer *t, double *norm) {
    struct vc_trainer_dp *d = t->dp;
    double *part = vc_calloc((size_t)d->world, sizeof *part);
    if (!part) return VC_ERR_NOMEM;
    vc_status st = VC_OK;
    if (d->zero1) {
        st = sumsq_range(t, d->first, d->first + d->count, d->shard_grad, part + d->rank);
        if (!st) st = host_coll(d, 2, part, sizeof *part, VC_SUM);
    } else {
        for (int r = 0; r < d->world && !st; r++) {
            size_t a = min_sz((size_t)r * d->shard_len, d->n_flat);
            st = sumsq_range(t, a, min_sz(a + d->shard_len, d->n_flat), NULL, part + r);
        }
    }
    double total = 0.0;
    for (int r = 0; r < d->world; r++) total += part[r];
    free(part);
    *norm = sqrt(total);
    return st;
}

/* x *= c in backend memory */
static void scale(float *x, size_t n, float c) { vc_be()->scale(x, x, c, (int64_t)n); }

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

vc_status vc_dp_reduce_all(vc_trainer *t) {
    vc_status st = reduce_grads(t);
    if (!st) t->dp->reduced = 1;
    t->dp->early = 0;
    return st;
}

/* Muon shared out over the ranks: each run of consecutive Muon parameters updated by one rank goes to the others from
 * it, in pieces of the communication buffer (every rank then holds the same bits) */
static vc_status muon_bcast(vc_trainer *t) {
    struct vc_trainer_dp *d = t->dp;
    size_t cap = ((size_t)d->world + 1) * d->bucket;
    vc_status st = VC_OK;
    for (int i = 0; i < t->n_params && !st;) {
        int r = vc_adamw_muon_owner(&t->opt, (size_t)i), j = i + 1;
        if (r < 0) {
            i++;
            continue;
        }
        while (j < t->n_params && vc_adamw_muon_owner(&t->opt, (size_t)j) == r) j++;
        for (size_t a = d->offs[i]; a < d->offs[j] && !st; a += cap) {
            size_t n = min_sz(cap, d->offs[j] - a);
            if (r == d->rank) vc_dp_flat_read(t, d->w, a, n, d->buf);
            st = vc_comm_bcast(d->comm, d->buf, n * sizeof(float), r);
            if (!st && r != d->rank) vc_dp_flat_write(t, d->w, a, n, d->buf);
        }
        i = j;
    }
    return st;
}

vc_status vc_dp_update(vc_trainer *t, vc_step_stats *st) {
    struct vc_trainer_dp *d = t->dp;
    /* reduced: overlapped with backward (dp_overlap.c); ZeRO-2: every micro-batch reduced (dp_zero2.c) */
    vc_status s = d->reduced || d->zero2 ? VC_OK : reduce_grads(t);
    if (d->zero2 && !vc_dp_zero2_rounds(t)) vc_be()->zero(d->shard_grad, d->shard_len * sizeof(float));
    st->n_buckets = (int)(d->zero2 ? vc_dp_zero2_chunks(t) : vc_dp_n_buckets(t));
    if (d->zero2) d->reduced = 1;
    st->n_buckets_early = d->reduced ? d->early : 0;
    d->reduced = 0;
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
    if (t->opt.muon) return muon_bcast(t); /* (never ZeRO) */
    if (d->zero3) return vc_dp_zero3_refresh(t);
    return d->zero1 ? gather_weights(t) : VC_OK;
}

/* ---- consistency ---- */
/* FNV-1a over the weights' bits, read back to the host a bucket at a time */
static vc_status weights_hash(const vc_trainer *t, uint64_t *out) {
    const struct vc_trainer_dp *d = t->dp;
    size_t cap = d->bucket * (size_t)d->world;
    uint32_t *h = vc_malloc(cap * sizeof *h);
    if (!h) return VC_ERR_NOMEM;
    uint64_t x = 1469598103934665603ull;
    for (int i = 0; i < t->n_params; i++)
        for (size_t k = 0; vc_dp_zero3_replicated(t, i) && k < t->sizes[i]; k += cap) {
            size_t n = min_sz(cap, t->sizes[i] - k);
            vc_be()->d2h(h, d->w[i] + k, n * sizeof(float));
            for (size_t j = 0; j < n; j++) x = (x ^ h[j]) * 1099511628211ull;
        }
    free(h);
    *out = x;
    return VC_OK;
}

vc_status vc_dp_check_weights(vc_trainer *t) {
    struct vc_trainer_dp *d = t->dp;
    if (!d) return VC_OK;
    uint64_t *all = vc_calloc((size_t)d->world, sizeof *all);
    if (!all) return VC_ERR_NOMEM;
    vc_status st = weights_hash(t, all + d->rank);
    if (!st) st = host_coll(d, 2, all, sizeof *all, VC_SUM);
    for (int r = 1; r < d->world && !st; r++)
        if (all[r] != all[0])
            st = vc_fail(VC_ERR_INTERNAL, "rank %d: after step %lld the weights of rank %d differ from rank 0's "
                         "(checksum %016llx vs %016llx)", d->rank, (long long)t->step, r,
                         (unsigned long long)all[r], (unsigned long long)all[0]);
    free(all);
    return st;
}

static double mib(size_t floats) { return floats * 4.0 / 1048576.0; }

/* this rank's gradient floats: the full-size buffer (+ the shard with ZeRO-1), or ZeRO-2's shard and
 * working area */
size_t vc_dp_grad_floats(const vc_trainer *t) {
    const struct vc_trainer_dp *d = t->dp;
    if (d && d->zero2) return d->shard_len + vc_dp_zero2_area(t);
    return d ? d->n_flat + (d->zero1 ? d->shard_len : 0) : 0;
}

const char *vc_dp_sharding_name(const struct vc_trainer_dp *d) {
    return !d         ? "data parallel, full AdamW state"
           : d->zero3 ? "ZeRO-3, weights, AdamW state and gradients for its 1/N shard"
           : d->zero2 ? "ZeRO-2, AdamW state and gradients for its 1/N shard"
           : d->zero1 ? "ZeRO-1, AdamW state for its 1/N shard"
           : d->lw    ? "layer-wise, Muon+AdamW state of the tensors it owns"
                      : "data parallel, full AdamW state";
}

void vc_trainer_print_memory(const vc_trainer *t, const char *who, FILE *log) {
    const struct vc_trainer_dp *d = t->dp;
    if (!d || !log) return;
    size_t moments = 0;
    for (size_t i = 0; i < t->opt.n_params; i++) moments += t->opt.m[i] ? t->opt.params[i].n : 0;
    size_t wm = 0, ws = 0, wk = 0, wf = d->zero3 ? vc_dp_zero3_weight_floats(t, &wm, &ws, &wk) : d->n_flat;
    fprintf(log, "rank %d/%d %s (%s): %s weights %.3f MiB + grads %.3f MiB + %s %.3f MiB "
                 "(%zu of %zu parameters' moments)\n",
            d->rank, d->world, who ? who : "trainer", vc_dp_sharding_name(d), d->zero3 ? "sharded" : "trained",
            mib(wf), mib(vc_dp_grad_floats(t)), vc_adamw_name(&t->opt), mib(vc_adamw_state_floats(&t->opt)),
            moments, d->n_flat);
    if (d->zero3)
        fprintf(log, "rank %d/%d %s: ZeRO-3 weights = master shard %.3f MiB + layer slots %.3f MiB + kept whole "
                     "(embedding, head, norms, buffers) %.3f MiB (all weights: %.3f MiB)\n",
                d->rank, d->world, who ? who : "trainer", mib(wm), mib(ws), mib(wk),
                mib((size_t)vc_model_param_count(t->model)));
    if (d->zero2)
        fprintf(log, "rank %d/%d %s: ZeRO-2 grads = shard %.3f MiB + working area %.3f MiB (%zu chunks of %.3f MiB "
                     "reduced per micro-batch; the full-size gradient would be %.3f MiB)\n",
                d->rank, d->world, who ? who : "trainer", mib(d->shard_len), mib(vc_dp_zero2_area(t)),
                vc_dp_zero2_chunks(t), mib(d->bucket * (size_t)d->world), mib(d->n_flat));
}
