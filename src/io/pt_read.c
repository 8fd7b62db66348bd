/* PyTorch checkpoints (pytorch_model.bin, torch.save's zip format): the pickled state dict (data.pkl) is
 * read by a small pickle machine that knows only what a tensor state dict uses (protocol 2 opcodes,
 * tensors rebuilt by torch._utils._rebuild_tensor_v2, parameters, OrderedDict; DTensors as FSDP's sharded state
 * dicts pickle them: their local tensor and DTensorSpec, classes made by NEWOBJ and BUILD as plain data) and runs
 * nothing: any other callable is refused by name. Each tensor points into its storage's ZIP entry in the mapped file
 * (torch stores entries uncompressed), so loading copies nothing, as for safetensors. Tensors that share
 * a storage (tied weights) or start at an offset in it are fine; non-contiguous ones are refused. */
#include "pt_zip.h"
#include "st_internal.h"
#include <stdlib.h>
#include <string.h>

#define MAX_STACK (1 << 20)
#define MAX_MEMO (1 << 24)
#define MAX_VALUES (4 << 20) /* a state dict of 20,000 tensors makes about 200,000 */

typedef enum { PV_NONE, PV_INT, PV_FLOAT, PV_STR, PV_TUPLE, PV_LIST, PV_DICT, PV_GLOBAL, PV_STORAGE, PV_TENSOR,
               PV_OBJECT, PV_MARK } pv_kind;

typedef struct pv {
    pv_kind k;
    int64_t i;          /* INT; STORAGE: element count; TENSOR: storage offset */
    double d;
    char *s;            /* STR; GLOBAL "module.name"; STORAGE: key */
    struct pv **items;  /* TUPLE / LIST items, DICT keys and values alternating */
    int n, cap;
    vc_dtype dt;        /* STORAGE, TENSOR */
    struct pv *storage; /* TENSOR */
    int ndim;
    int64_t shape[VC_ST_MAX_DIMS], stride[VC_ST_MAX_DIMS];
    struct pv *state; /* OBJECT: its BUILD state; TENSOR: a DTensor's DTensorSpec object (else NULL) */
    int gndim;        /* a DTensor's whole shape */
    int64_t gshape[VC_ST_MAX_DIMS];
} pv;

typedef struct vm {
    const char *path;
    const uint8_t *p, *end;
    pv **all; /* every value made, freed at the end */
    int n_all, cap_all;
    pv **stack;
    int sp, cap_stack;
    pv **memo;
    int64_t cap_memo, n_memo; /* n_memo: slots set (MEMOIZE's next index) */
    char err[300];
} vm;

static pv MARK = { .k = PV_MARK };

static pv *make(vm *m, pv_kind k) {
    if (m->n_all >= MAX_VALUES) {
        snprintf(m->err, sizeof m->err, "more than %d values (not a state dict)", MAX_VALUES);
        return NULL;
    }
    if (m->n_all == m->cap_all) {
        int cap = m->cap_all ? 2 * m->cap_all : 256;
        pv **a = realloc(m->all, (size_t)cap * sizeof *a);
        if (!a) return NULL;
        m->all = a;
        m->cap_all = cap;
    }
    pv *v = calloc(1, sizeof *v);
    if (v) {
        v->k = k;
        m->all[m->n_all++] = v;
    }
    return v;
}

static int add_item(pv *c, pv *x) {
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 4;
        pv **a = realloc(c->items, (size_t)cap * sizeof *a);
        if (!a) return 0;
        c->items = a;
        c->cap = cap;
    }
    c->items[c->n++] = x;
    return 1;
}

static int push(vm *m, pv *v) {
    if (!v) return 0;
    if (m->sp == m->cap_stack) {
        int cap = m->cap_stack ? 2 * m->cap_stack : 64;
        pv **s = cap <= MAX_STACK ? realloc(m->stack, (size_t)cap * sizeof *s) : NULL;
        if (!s) return 0;
        m->stack = s;
        m->cap_stack = cap;
    }
    m->stack[m->sp++] = v;
    return 1;
}

static pv *pop(vm *m) { return m->sp > 0 && m->stack[m->sp - 1] != &MARK ? m->stack[--m->sp] : NULL; }

/* the items above the topmost mark, removed with it, as a new TUPLE (or LIST) */
static pv *pop_mark(vm *m, pv_kind k) {
    int at = m->sp;
    while (at > 0 && m->stack[at - 1] != &MARK) at--;
    if (at == 0) return NULL;
    pv *t = make(m, k);
    for (int i = at; t && i < m->sp; i++)
        if (!add_item(t, m->stack[i])) return NULL;
    m->sp = at - 1;
    return t;
}

static const struct {
    const char *name;
    vc_dtype dt;
} STORAGES[] = { { "torch.FloatStorage", VC_F32 }, { "torch.BFloat16Storage", VC_BF16 }, { "torch.HalfStorage", VC_F16 },
                 { "torch.DoubleStorage", VC_F64 }, { "torch.LongStorage", VC_I64 }, { "torch.IntStorage", VC_I32 },
                 { "torch.ShortStorage", VC_I16 }, { "torch.CharStorage", VC_I8 }, { "torch.ByteStorage", VC_U8 },
                 { "torch.BoolStorage", VC_BOOL }, { "torch.Float8_e4m3fnStorage", VC_F8E4M3 } };

/* BINPERSID: ('storage', storage type, key, location, numel) */
static pv *persistent(vm *m, pv *id) {
    if (!id || id->k != PV_TUPLE || id->n < 5 || id->items[0]->k != PV_STR || strcmp(id->items[0]->s, "storage") ||
        id->items[1]->k != PV_GLOBAL || id->items[2]->k != PV_STR || id->items[4]->k != PV_INT) {
        snprintf(m->err, sizeof m->err, "a persistent id that is not a torch storage");
        return NULL;
    }
    pv *s = make(m, PV_STORAGE);
    if (!s) return NULL;
    for (size_t i = 0; i < sizeof STORAGES / sizeof STORAGES[0]; i++)
        if (!strcmp(id->items[1]->s, STORAGES[i].name)) {
            s->dt = STORAGES[i].dt;
            s->s = strdup(id->items[2]->s);
            s->i = id->items[4]->i;
            return s->s ? s : NULL;
        }
    snprintf(m->err, sizeof m->err, "storage type %.100s is not read", id->items[1]->s);
    return NULL;
}

static int int_tuple(const pv *t, int64_t *out, int *n) {
    if (!t || t->k != PV_TUPLE || t->n > VC_ST_MAX_DIMS) return 0;
    for (int i = 0; i < t->n; i++) {
        if (t->items[i]->k != PV_INT) return 0;
        out[i] = t->items[i]->i;
    }
    *n = t->n;
    return 1;
}

static pv *reduce(vm *m, pv *fn, pv *args);

static pv *plain_get(const pv *d, const char *key) {
    for (int i = 0; d && d->k == PV_DICT && i + 1 < d->n; i += 2)
        if (d->items[i]->k == PV_STR && !strcmp(d->items[i]->s, key)) return d->items[i + 1];
    return NULL;
}

/* d[key] of a DICT value, or of either dict of a (dict state, slots state) pair as BUILD takes it (NULL: absent) */
static pv *dict_get(const pv *d, const char *key) {
    if (d && d->k == PV_TUPLE && d->n == 2) {
        pv *v = plain_get(d->items[1], key);
        return v ? v : plain_get(d->items[0], key);
    }
    return plain_get(d, key);
}

static int is_dtensor_class(const char *s) {
    return !strcmp(s, "torch.distributed.tensor.DTensor") || !strcmp(s, "torch.distributed._tensor.api.DTensor") ||
           !strcmp(s, "torch.distributed.tensor._api.DTensor") || !strcmp(s, "torch.distributed._tensor.DTensor");
}

/* torch._tensor._rebuild_from_type_v2(func, type, args, state): a DTensor (its local tensor, spec and whole shape) or a
 * plain tensor or parameter rebuilt by func */
static pv *from_type(vm *m, pv *args) {
    pv *fn = args->n == 4 ? args->items[0] : NULL, *type = args->n == 4 ? args->items[1] : NULL;
    pv *fargs = args->n == 4 ? args->items[2] : NULL, *state = args->n == 4 ? args->items[3] : NULL;
    if (!fn || fn->k != PV_GLOBAL || !type || type->k != PV_GLOBAL || !fargs || fargs->k != PV_TUPLE) {
        snprintf(m->err, sizeof m->err, "_rebuild_from_type_v2 with unexpected arguments");
        return NULL;
    }
    if (!strcmp(type->s, "torch.Tensor") || !strcmp(type->s, "torch.nn.parameter.Parameter")) {
        if (!strcmp(fn->s, "torch._tensor._rebuild_from_type_v2")) { /* (no nesting: a pickle cannot recurse us deep) */
            snprintf(m->err, sizeof m->err, "_rebuild_from_type_v2 rebuilding by itself");
            return NULL;
        }
        return reduce(m, fn, fargs);
    }
    if (!is_dtensor_class(type->s)) {
        snprintf(m->err, sizeof m->err, "a tensor of class %.120s, which verlc does not read", type->s);
        return NULL;
    }
    pv *local = dict_get(state, "_local_tensor"), *spec = dict_get(state, "_spec"), *t;
    if (!local || local->k != PV_TENSOR || !spec || spec->k != PV_OBJECT || fargs->n < 3 || !(t = make(m, PV_TENSOR))) {
        if (!m->err[0]) snprintf(m->err, sizeof m->err, "a DTensor without its local tensor and spec");
        return NULL;
    }
    pv *g = fargs->items[2];
    if (g->k != PV_TUPLE || g->n > VC_ST_MAX_DIMS) {
        snprintf(m->err, sizeof m->err, "a DTensor without its shape");
        return NULL;
    }
    for (int i = 0; i < g->n; i++) {
        if (g->items[i]->k != PV_INT || g->items[i]->i < 0) {
            snprintf(m->err, sizeof m->err, "a DTensor without its shape");
            return NULL;
        }
        t->gshape[i] = g->items[i]->i;
    }
    t->gndim = g->n;
    t->storage = local->storage;
    t->dt = local->dt;
    t->i = local->i;
    t->ndim = local->ndim;
    memcpy(t->shape, local->shape, sizeof t->shape);
    memcpy(t->stride, local->stride, sizeof t->stride);
    t->state = spec;
    return t;
}

/* REDUCE: the callables of a tensor state dict */
static pv *reduce(vm *m, pv *fn, pv *args) {
    if (!fn || fn->k != PV_GLOBAL || !args || args->k != PV_TUPLE) {
        snprintf(m->err, sizeof m->err, "REDUCE without a callable and arguments");
        return NULL;
    }
    if (!strcmp(fn->s, "collections.OrderedDict")) return make(m, PV_DICT);
    if (!strcmp(fn->s, "torch._utils._rebuild_tensor_v2") || !strcmp(fn->s, "torch._utils._rebuild_tensor")) {
        pv *t = make(m, PV_TENSOR);
        int nst = 0;
        if (!t) return NULL;
        if (args->n < 4 || args->items[0]->k != PV_STORAGE || args->items[1]->k != PV_INT ||
            !int_tuple(args->items[2], t->shape, &t->ndim) || !int_tuple(args->items[3], t->stride, &nst) ||
            nst != t->ndim) {
            snprintf(m->err, sizeof m->err, "%s with unexpected arguments", fn->s);
            return NULL;
        }
        t->storage = args->items[0];
        t->dt = t->storage->dt;
        t->i = args->items[1]->i;
        return t;
    }
    if (!strcmp(fn->s, "torch.Size") && args->n == 1 && args->items[0]->k == PV_TUPLE) return args->items[0];
    if ((!strcmp(fn->s, "torch.device") || !strcmp(fn->s, "torch.serialization._get_layout")) && args->n >= 1 &&
        args->items[0]->k == PV_STR)
        return args->items[0];
    if (!strcmp(fn->s, "torch._tensor._rebuild_from_type_v2")) return from_type(m, args);
    if (!strcmp(fn->s, "torch._utils._rebuild_parameter") || !strcmp(fn->s, "torch._utils._rebuild_parameter_with_state")) {
        if (args->n >= 1 && args->items[0]->k == PV_TENSOR) return args->items[0];
        snprintf(m->err, sizeof m->err, "%s without a tensor", fn->s);
        return NULL;
    }
    snprintf(m->err, sizeof m->err, "the pickle calls %.120s, which verlc does not run (not a plain tensor state dict)",
             fn->s);
    return NULL;
}

static int need(vm *m, size_t n) { return (size_t)(m->end - m->p) >= n; }

static uint64_t rd(vm *m, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | m->p[i];
    m->p += n;
    return v;
}

static pv *str_value(vm *m, size_t n, pv_kind k) {
    if (!need(m, n)) return NULL;
    pv *v = make(m, k);
    if (!v || !(v->s = malloc(n + 1))) return NULL;
    memcpy(v->s, m->p, n);
    v->s[n] = 0;
    m->p += n;
    return v;
}

static int memo_put(vm *m, int64_t i, pv *v) {
    if (!v || i < 0 || i >= MAX_MEMO) return 0;
    if (i >= m->cap_memo) {
        int64_t cap = m->cap_memo ? m->cap_memo : 256;
        while (cap <= i) cap *= 2;
        pv **a = realloc(m->memo, (size_t)cap * sizeof *a);
        if (!a) return 0;
        memset(a + m->cap_memo, 0, (size_t)(cap - m->cap_memo) * sizeof *a);
        m->memo = a;
        m->cap_memo = cap;
    }
    m->n_memo += !m->memo[i];
    m->memo[i] = v;
    return 1;
}

static int set_items(pv *d, pv *t) { /* SETITEMS: key/value pairs of t into dict d */
    if (!d || d->k != PV_DICT || !t || t->n % 2) return 0;
    for (int i = 0; i < t->n; i++)
        if (!add_item(d, t->items[i])) return 0;
    return 1;
}

/* one opcode; 0 at STOP or on error (m->err says which) */
static int step(vm *m, int *done) {
    if (!need(m, 1)) return 0;
    uint8_t op = *m->p++;
    pv *v = NULL, *a, *b;
    switch (op) {
    case 0x80: return need(m, 1) && (m->p++, 1);                         /* PROTO */
    case 0x95: return need(m, 8) && (m->p += 8, 1);                      /* FRAME */
    case '}': return push(m, make(m, PV_DICT));                          /* EMPTY_DICT */
    case ']': return push(m, make(m, PV_LIST));                          /* EMPTY_LIST */
    case ')': return push(m, make(m, PV_TUPLE));                         /* EMPTY_TUPLE */
    case 'N': return push(m, make(m, PV_NONE));                          /* NONE */
    case 0x88:                                                           /* NEWTRUE */
    case 0x89:                                                           /* NEWFALSE */
        v = make(m, PV_INT);
        if (v) v->i = op == 0x88;
        return push(m, v);
    case '(': return push(m, &MARK);
    case 'K': case 'M': case 'J':                                        /* BININT1, BININT2, BININT */
        if (!need(m, op == 'K' ? 1 : op == 'M' ? 2 : 4) || !(v = make(m, PV_INT))) return 0;
        v->i = op == 'J' ? (int32_t)rd(m, 4) : (int64_t)rd(m, op == 'K' ? 1 : 2);
        return push(m, v);
    case 0x8a: {                                                         /* LONG1 */
        if (!need(m, 1)) return 0;
        int n = *m->p++;
        if (n > 8 || !need(m, (size_t)n) || !(v = make(m, PV_INT))) return 0;
        uint64_t u = rd(m, n);
        v->i = n && n < 8 && (u >> (8 * n - 1) & 1) ? (int64_t)(u | ~(((uint64_t)1 << (8 * n)) - 1)) : (int64_t)u;
        return push(m, v);
    }
    case 'G': {                                                          /* BINFLOAT (big-endian) */
        if (!need(m, 8) || !(v = make(m, PV_FLOAT))) return 0;
        uint64_t u = 0;
        for (int i = 0; i < 8; i++) u = u << 8 | m->p[i];
        m->p += 8;
        memcpy(&v->d, &u, 8);
        return push(m, v);
    }
    case 'X': case 'B': return need(m, 4) && push(m, str_value(m, (size_t)rd(m, 4), PV_STR)); /* BINUNICODE, BINBYTES */
    case 0x8c: case 'U': case 'C': return need(m, 1) && push(m, str_value(m, (size_t)rd(m, 1), PV_STR));
    case 'c': {                                                          /* GLOBAL "module\nname\n" */
        const uint8_t *nl1 = memchr(m->p, '\n', (size_t)(m->end - m->p));
        const uint8_t *nl2 = nl1 ? memchr(nl1 + 1, '\n', (size_t)(m->end - nl1 - 1)) : NULL;
        const uint8_t *start = m->p;
        if (!nl2 || !(v = str_value(m, (size_t)(nl2 - m->p), PV_GLOBAL))) return 0;
        v->s[nl1 - start] = '.'; /* module.name */
        m->p++;
        return push(m, v);
    }
    case 't': return push(m, pop_mark(m, PV_TUPLE));                     /* TUPLE */
    case 0x85: case 0x86: case 0x87: {                                   /* TUPLE1..3 */
        int n = op - 0x84;
        if (m->sp < n || !(v = make(m, PV_TUPLE))) return 0;
        for (int i = m->sp - n; i < m->sp; i++)
            if (m->stack[i] == &MARK || !add_item(v, m->stack[i])) return 0;
        m->sp -= n;
        return push(m, v);
    }
    case 'Q': return push(m, persistent(m, pop(m)));                     /* BINPERSID */
    case 'R': a = pop(m), b = pop(m); return push(m, reduce(m, b, a));  /* REDUCE */
    case 'b': a = pop(m);                                                /* BUILD: an object's state kept */
        if (!a || m->sp == 0) return 0;
        if (m->stack[m->sp - 1]->k == PV_OBJECT) m->stack[m->sp - 1]->state = a;
        return 1;
    case 0x81: a = pop(m), b = pop(m);                                   /* NEWOBJ: cls(*args) as plain data */
        if (!a || !b || b->k != PV_GLOBAL || a->k != PV_TUPLE || !(v = make(m, PV_OBJECT)) || !(v->s = strdup(b->s)))
            return 0;
        v->items = NULL;
        v->storage = a; /* (its arguments) */
        return push(m, v);
    case 's': a = pop(m), b = pop(m), v = pop(m);                        /* SETITEM */
        return v && v->k == PV_DICT && b && a && add_item(v, b) && add_item(v, a) && push(m, v);
    case 'u': a = pop_mark(m, PV_TUPLE); return a && m->sp > 0 && set_items(m->stack[m->sp - 1], a);
    case 'a': a = pop(m); return a && m->sp > 0 && m->stack[m->sp - 1]->k == PV_LIST && add_item(m->stack[m->sp - 1], a);
    case 'e': a = pop_mark(m, PV_TUPLE);                                 /* APPENDS */
        if (!a || m->sp == 0 || m->stack[m->sp - 1]->k != PV_LIST) return 0;
        for (int i = 0; i < a->n; i++)
            if (!add_item(m->stack[m->sp - 1], a->items[i])) return 0;
        return 1;
    case 'q': return need(m, 1) && m->sp > 0 && memo_put(m, (int64_t)rd(m, 1), m->stack[m->sp - 1]);
    case 'r': return need(m, 4) && m->sp > 0 && memo_put(m, (int64_t)rd(m, 4), m->stack[m->sp - 1]);
    case 0x94: return m->sp > 0 && memo_put(m, m->n_memo, m->stack[m->sp - 1]); /* MEMOIZE */
    case 'h': case 'j': {                                                /* BINGET, LONG_BINGET */
        if (!need(m, op == 'h' ? 1 : 4)) return 0;
        int64_t i = (int64_t)rd(m, op == 'h' ? 1 : 4);
        return i < m->cap_memo && m->memo[i] && push(m, m->memo[i]);
    }
    case '.': *done = 1; return 0;                                       /* STOP */
    default:
        snprintf(m->err, sizeof m->err, "pickle opcode 0x%02x is not read", op);
        return 0;
    }
}

static void vm_free(vm *m) {
    for (int i = 0; i < m->n_all; i++) {
        free(m->all[i]->s);
        free(m->all[i]->items);
        free(m->all[i]);
    }
    free(m->all);
    free(m->stack);
    free(m->memo);
}

/* the state dict's tensor t as a checkpoint tensor pointing into its storage's entry */
static vc_status to_tensor(const char *path, const char *prefix, const pt_zip_entry *z, int nz, const uint8_t *map,
                           const char *name, const pv *t, vc_st_tensor *out) {
    char ename[600];
    snprintf(ename, sizeof ename, "%s/data/%s", prefix, t->storage->s);
    const pt_zip_entry *e = pt_zip_find(z, nz, ename);
    if (!e) return vc_fail(VC_ERR_FORMAT, "%s: tensor '%s': storage %s missing from the archive", path, name, ename);
    if (e->method != 0)
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: tensor '%s': storage %s is compressed (torch.save stores them plain)",
                       path, name, ename);
    size_t es = vc_dtype_size(t->dt);
    int64_t numel = 1, expect = 1;
    for (int d = t->ndim - 1; d >= 0; d--) { /* contiguous: each stride the product of the later sizes */
        if (t->shape[d] < 0 || (t->shape[d] > 1 && t->stride[d] != expect))
            return vc_fail(VC_ERR_UNSUPPORTED, "%s: tensor '%s' is not contiguous (save it after .contiguous())",
                           path, name);
        if (t->shape[d] && numel > INT64_MAX / t->shape[d]) return vc_fail(VC_ERR_FORMAT, "%s: tensor '%s' too large", path, name);
        numel *= t->shape[d];
        expect *= t->shape[d] ? t->shape[d] : 1;
    }
    if (t->i < 0 || (uint64_t)t->i > e->size / es || (uint64_t)numel > e->size / es - (uint64_t)t->i)
        return vc_fail(VC_ERR_FORMAT, "%s: tensor '%s' (%lld elements at offset %lld) runs past its storage of %llu bytes",
                       path, name, (long long)numel, (long long)t->i, (unsigned long long)e->size);
    memset(out, 0, sizeof *out);
    out->dtype = t->dt;
    out->ndim = t->ndim;
    memcpy(out->shape, t->shape, sizeof out->shape);
    out->data = map + e->offset + (size_t)t->i * es;
    out->nbytes = (size_t)numel * es;
    out->name = vc_strdup(name);
    return out->name ? VC_OK : VC_ERR_NOMEM;
}

static const char *short_class(const char *s) {
    const char *d = strrchr(s, '.');
    return d ? d + 1 : s;
}

/* a DTensor's place from its DTensorSpec: the placements (Shard(d) / Replicate), the mesh's dimension names and this
 * rank's coordinates (torch 2.6+ keeps them in the DeviceMesh's state); a refusal names the key */
static vc_status dtensor_place(const char *path, const char *name, const pv *t, vc_pt_shard *o) {
    memset(o, 0, sizeof *o);
    const pv *spec = t->state->state, *pl = dict_get(spec, "placements"), *mesh = dict_get(spec, "mesh");
    if (!pl || pl->k != PV_TUPLE || pl->n < 1 || pl->n > VC_PT_MESH_DIMS)
        return vc_fail(VC_ERR_FORMAT, "%s: DTensor '%s' without its placements", path, name);
    o->n_dims = pl->n;
    for (int d = 0; d < pl->n; d++) {
        const pv *p = pl->items[d];
        const char *cls = p->k == PV_OBJECT ? short_class(p->s) : "?";
        const pv *dim = p->k == PV_OBJECT ? dict_get(p->state, "dim") : NULL;
        o->coord[d] = -1;
        if (!strcmp(cls, "Replicate")) o->place[d] = -1;
        else if (!strcmp(cls, "Shard") && dim && dim->k == PV_INT && dim->i >= 0 && dim->i < t->gndim)
            o->place[d] = (int)dim->i;
        else
            return vc_fail(VC_ERR_UNSUPPORTED, "%s: DTensor '%s' placed by %s on mesh dimension %d: only Shard and "
                           "Replicate are merged (as verl's model merger: no tensor parallelism)", path, name, cls, d);
    }
    const pv *st = mesh && mesh->k == PV_OBJECT ? mesh->state : NULL;
    const pv *names = dict_get(st, "_mesh_dim_names"), *coord = dict_get(st, "_coordinate_on_dim");
    if (!names) names = dict_get(st, "mesh_dim_names");
    for (int d = 0; names && names->k == PV_TUPLE && d < names->n && d < o->n_dims; d++)
        if (names->items[d]->k == PV_STR) snprintf(o->names[d], sizeof o->names[d], "%s", names->items[d]->s);
    for (int d = 0; coord && coord->k == PV_TUPLE && coord->n == o->n_dims && d < coord->n; d++)
        if (coord->items[d]->k == PV_INT) o->coord[d] = (int)coord->items[d]->i;
    o->ndim = t->gndim;
    memcpy(o->shape, t->gshape, sizeof o->shape);
    if (t->ndim != t->gndim)
        return vc_fail(VC_ERR_FORMAT, "%s: DTensor '%s': its local tensor has %d dimensions, the whole one %d", path,
                       name, t->ndim, t->gndim);
    return VC_OK;
}

/* runs data.pkl; the state dict (a DICT value) into *root */
static vc_status unpickle(vm *m, const pt_zip_entry *e, const uint8_t *map, pv **root) {
    m->p = map + e->offset;
    m->end = m->p + e->size;
    int done = 0;
    while (step(m, &done)) {
    }
    pv *top = done && m->sp == 1 ? m->stack[0] : NULL;
    if (!done || !top)
        return vc_fail(VC_ERR_FORMAT, "%s: data.pkl: %s at byte %lld", m->path,
                       m->err[0] ? m->err : "malformed or truncated pickle", (long long)(m->p - (map + e->offset)));
    if (top->k != PV_DICT)
        return vc_fail(VC_ERR_FORMAT, "%s: data.pkl holds no state dict (a dict of tensors)", m->path);
    *root = top;
    return VC_OK;
}

vc_status vc_pt_parse_file(vc_st_map *f, vc_st_lists *l) {
    vc_status st = vc_st_map_file(f, 1, "a checkpoint");
    return st ? st : vc_pt_parse_mem(f->path, f->map, f->size, l);
}

vc_status vc_pt_parse_mem(const char *path, const uint8_t *map, size_t size, vc_st_lists *l) {
    vc_status st;
    if (size >= 4 && !memcmp(map, "\x80\x02\x8a\x0a", 4))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: torch.save's legacy (pre-1.6) format is not read: re-save it with a "
                       "current torch, or as safetensors", path);
    pt_zip_entry *z = NULL;
    int nz = 0;
    if ((st = pt_zip_read(path, map, size, &z, &nz))) return st;
    /* the archive's folder: the prefix of its data.pkl */
    const pt_zip_entry *pkl = NULL;
    for (int i = 0; i < nz && !pkl; i++)
        if (z[i].name_len > 9 && z[i].name_len < 400 && !memcmp(z[i].name + z[i].name_len - 9, "/data.pkl", 9)) pkl = &z[i];
    char prefix[400] = "", bo[600];
    if (pkl) snprintf(prefix, sizeof prefix, "%.*s", (int)(pkl->name_len - 9), pkl->name);
    snprintf(bo, sizeof bo, "%s/byteorder", prefix);
    const pt_zip_entry *order = pt_zip_find(z, nz, bo);
    vm m = { .path = path };
    pv *root = NULL;
    if (!pkl) st = vc_fail(VC_ERR_FORMAT, "%s: no data.pkl in the archive (not a torch.save checkpoint)", path);
    else if (pkl->method != 0) st = vc_fail(VC_ERR_FORMAT, "%s: data.pkl is compressed", path);
    else if (order && (order->size != 6 || order->method || memcmp(map + order->offset, "little", 6)))
        st = vc_fail(VC_ERR_UNSUPPORTED, "%s: tensors stored big-endian", path);
    else st = unpickle(&m, pkl, map, &root);
    for (int i = 0; !st && i + 1 < root->n; i += 2) {
        const pv *k = root->items[i], *v = root->items[i + 1];
        if (k->k != PV_STR) st = vc_fail(VC_ERR_FORMAT, "%s: a state dict key that is not a string", path);
        else if (v->k == PV_DICT || v->k == PV_LIST)
            st = vc_fail(VC_ERR_UNSUPPORTED, "%s: '%s' holds a nested container, not a tensor (save the model's "
                         "state_dict itself)", path, k->s);
        else if (v->k == PV_TENSOR && v->state && !l->want_shards)
            st = vc_fail(VC_ERR_UNSUPPORTED, "%s: '%s' is one rank's part of a DTensor (a verl / FSDP sharded "
                         "checkpoint): merge the ranks' files first (`verlc model_merger merge --backend fsdp "
                         "--local_dir DIR --target_dir OUT`)", path, k->s);
        else if (v->k == PV_TENSOR && !(st = vc_st_lists_grow(l, 1))) {
            st = to_tensor(path, prefix, z, nz, map, k->s, v, &l->t[l->n]);
            if (!st && l->want_shards) {
                l->shard[l->n] = (vc_pt_shard){ 0 };
                if (v->state) st = dtensor_place(path, k->s, v, &l->shard[l->n]);
                if (st) free((char *)l->t[l->n].name);
            }
            if (!st) l->t[l->n++].file = path;
        }
    }
    vm_free(&m);
    free(z);
    return st;
}
