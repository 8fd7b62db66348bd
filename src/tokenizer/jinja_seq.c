/* Jinja's ordering and grouping filters (sort, dictsort, min, max, batch), wordcount and center, and the
 * methods a sandboxed template may call on lists and tuples (count, index): what Jinja2 delegates to Python. */
#define _GNU_SOURCE
#include "tokenizer/jinja.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define OOM() vc_fail(VC_ERR_NOMEM, "chat template: out of memory")

/* Jinja's ignore_case: a string's lower(), any other value itself */
static vc_status fold_case(jv *v, int fold, jv **out) {
    if (!fold || v->t != JV_STR) { *out = v; return VC_OK; }
    vc_status st = jinja_str_case(v, 1, out);
    jv_unref(v);
    return st;
}

/* make_attrgetter (one path) or make_multi_attrgetter (`multi`: comma-separated paths, a list of values) with
 * ignore_case as postprocess where `fold` */
static vc_status sort_key(jctx *c, const jnode *at, jv *item, const jv *attr, int multi, int fold, jv **out) {
    jv *v = NULL;
    vc_status st = VC_OK;
    if (!multi) {
        if (!attr) return fold_case(jv_ref(item), fold, out);
        st = jinja_attr_path(c, at, item, attr, &v);
        return st ? st : fold_case(v, fold, out);
    }
    /* a list even of one value: Python compares lists item by item, equal items (None and None) by '==' only */
    jv *l = jv_list();
    if (!l) return OOM();
    int split = attr && attr->t == JV_STR;
    const char *p = split ? attr->u.str.s : "", *e = p + (split ? attr->u.str.len : 0);
    while (!st) {
        const char *q = split ? memchr(p, ',', (size_t)(e - p)) : NULL;
        jv *part = split ? jv_str(p, (size_t)((q ? q : e) - p)) : NULL, *one = NULL;
        if (split && !part) st = OOM();
        else if (!attr) one = jv_ref(item);
        else st = jinja_attr_path(c, at, item, split ? part : attr, &one);
        jv_unref(part);
        if (!st) st = fold_case(one, fold, &one);
        if (!st) st = jv_list_push(l, one);
        if (!q) break;
        p = q + 1;
    }
    if (st) { jv_unref(l); return st; }
    *out = l;
    return VC_OK;
}

typedef struct { jctx *c; const jnode *at; jv **keys; int reverse; vc_status st; } sorter;

static int key_lt(sorter *s, size_t i, size_t j) {
    int r = 0;
    if (s->st) return 0;
    jinja_work(1);
    s->st = jinja_compare(s->c, s->at, OP_LT, s->keys[i], s->keys[j], &r);
    return r;
}

/* stable merge sort of idx[0..n) by their keys, asking only '<' as Python's sorted does; with `reverse` the
 * order is descending and equal keys keep their order (sorted(..., reverse=True)) */
static void merge_sort(sorter *s, size_t *idx, size_t *tmp, size_t n) {
    if (n < 2 || s->st) return;
    size_t h = n / 2, i = 0, j = h, k = 0;
    merge_sort(s, idx, tmp, h);
    merge_sort(s, idx + h, tmp, n - h);
    while (i < h && j < n) {
        int right = s->reverse ? key_lt(s, idx[i], idx[j]) : key_lt(s, idx[j], idx[i]);
        tmp[k++] = right ? idx[j++] : idx[i++];
    }
    while (i < h) tmp[k++] = idx[i++];
    while (j < n) tmp[k++] = idx[j++];
    memcpy(idx, tmp, n * sizeof *idx);
}

/* the items of `items` ordered by sort_key (attr, multi, fold) */
static vc_status sorted(jctx *c, const jnode *at, jv *items, const jv *attr, int multi, int fold, int reverse, jv **out) {
    size_t n = items->u.list.n;
    jv **keys = calloc(n + 1, sizeof *keys);
    size_t *idx = malloc((n + 1) * sizeof *idx), *tmp = malloc((n + 1) * sizeof *tmp);
    jv *res = jv_list();
    sorter s = { c, at, keys, reverse, (keys && idx && tmp && res) ? VC_OK : OOM() };
    for (size_t i = 0; i < n && !s.st; i++) {
        idx[i] = i;
        s.st = sort_key(c, at, items->u.list.items[i], attr, multi, fold, &keys[i]);
    }
    if (!s.st) merge_sort(&s, idx, tmp, n);
    for (size_t i = 0; i < n && !s.st; i++) s.st = jv_list_push(res, jv_ref(items->u.list.items[idx[i]]));
    for (size_t i = 0; keys && i < n; i++) jv_unref(keys[i]);
    free(keys);
    free(idx);
    free(tmp);
    if (s.st) { jv_unref(res); return s.st; }
    *out = res;
    return VC_OK;
}

/* sort(value, reverse=False, case_sensitive=False, attribute=None) */
static vc_status f_sort(jctx *c, const jnode *at, jv *in, jv **args, char **kw, int n, jv **out) {
    jv *rev = jinja_arg(args, kw, n, 0, "reverse"), *cs = jinja_arg(args, kw, n, 1, "case_sensitive");
    jv *attr = jinja_arg(args, kw, n, 2, "attribute"), *items = NULL;
    vc_status st = jinja_iterate(c, at, in, &items);
    if (st) return st;
    st = sorted(c, at, items, attr, 1, !(cs && jv_truthy(cs)), rev && jv_truthy(rev), out);
    jv_unref(items);
    return st;
}

/* dictsort(value, case_sensitive=False, by='key', reverse=False): the (key, value) pairs, sorted */
static vc_status f_dictsort(jctx *c, const jnode *at, jv *in, jv **args, char **kw, int n, jv **out) {
    jv *cs = jinja_arg(args, kw, n, 0, "case_sensitive"), *by = jinja_arg(args, kw, n, 1, "by");
    jv *rev = jinja_arg(args, kw, n, 2, "reverse"), *pairs = NULL, *pos = NULL, *items = NULL;
    vc_status st = VC_OK;
    if (in->t == JV_UNDEF) st = jinja_undef_error(c, at, in);
    else if (in->t != JV_DICT) st = jerr(c, at, VC_ERR_ARG, "'%s' object has no attribute 'items'", jv_type_name(in));
    else if (by && (by->t != JV_STR || (strcmp(by->u.str.s, "key") && strcmp(by->u.str.s, "value"))))
        st = jerr(c, at, VC_ERR_ARG, "You can only sort by either \"key\" or \"value\"");
    if (!st) st = jinja_getattr(c, at, in, "items", &items); /* value.items(): the (key, value) tuples */
    if (!st) st = jinja_call_builtin(c, at, items, NULL, NULL, 0, &pairs);
    jv_unref(items);
    if (!st && !(pos = jv_int(by && by->u.str.s[0] == 'v'))) st = OOM();
    if (!st) st = sorted(c, at, pairs, pos, 0, !(cs && jv_truthy(cs)), rev && jv_truthy(rev), out);
    jv_unref(pos);
    jv_unref(pairs);
    return st;
}

/* min / max(value, case_sensitive=False, attribute=None): the first least / greatest item by its key */
static vc_status f_minmax(jctx *c, const jnode *at, int is_max, jv *in, jv **args, char **kw, int n, jv **out) {
    jv *cs = jinja_arg(args, kw, n, 0, "case_sensitive"), *attr = jinja_arg(args, kw, n, 1, "attribute");
    jv *items = NULL, *best = NULL, *best_key = NULL;
    vc_status st = jinja_iterate(c, at, in, &items);
    for (size_t i = 0; !st && i < items->u.list.n; i++) {
        jv *key = NULL;
        int r = 1;
        st = sort_key(c, at, items->u.list.items[i], attr, 0, !(cs && jv_truthy(cs)), &key);
        if (!st && best) st = jinja_compare(c, at, is_max ? OP_GT : OP_LT, key, best_key, &r);
        if (!st && r) { jv_unref(best_key); best_key = key; best = items->u.list.items[i]; }
        else jv_unref(key);
    }
    if (!st) *out = best ? jv_ref(best) : jv_undef("No aggregated item, sequence was empty.");
    jv_unref(best_key);
    jv_unref(items);
    return st;
}

/* batch(value, linecount, fill_with=None): lists of linecount items, the last one filled up where asked (a list of
 * them where Jinja yields them one by one) */
static vc_status f_batch(jctx *c, const jnode *at, jv *in, jv **args, char **kw, int n, jv **out) {
    jv *cnt = jinja_arg(args, kw, n, 0, "linecount"), *fill = jinja_arg(args, kw, n, 1, "fill_with");
    jv *items = NULL, *res = NULL, *cur = NULL;
    if (!cnt) return jerr(c, at, VC_ERR_ARG, "batch needs a line count");
    if (cnt->t != JV_INT && cnt->t != JV_BOOL && cnt->t != JV_FLOAT)
        return jerr(c, at, VC_ERR_ARG, "batch: the line count must be a number, not %s", jv_type_name(cnt));
    double lc = cnt->t == JV_FLOAT ? cnt->u.f : cnt->t == JV_INT ? (double)cnt->u.i : cnt->u.b;
    vc_status st = jinja_iterate(c, at, in, &items);
    if (!st && (!(res = jv_list()) || !(cur = jv_list()))) st = OOM();
    for (size_t i = 0; !st && i < items->u.list.n; i++) {
        if ((double)cur->u.list.n == lc) {
            st = jv_list_push(res, cur);
            if (!st && !(cur = jv_list())) st = OOM();
        }
        if (!st) st = jv_list_push(cur, jv_ref(items->u.list.items[i]));
    }
    if (!st && cur->u.list.n) {
        while (!st && fill && fill->t != JV_NONE && (double)cur->u.list.n < lc) st = jv_list_push(cur, jv_ref(fill));
        if (!st) { st = jv_list_push(res, cur); cur = NULL; }
    }
    jv_unref(cur);
    jv_unref(items);
    if (st) { jv_unref(res); return st; }
    *out = res;
    return VC_OK;
}

/* Python's \w: letters, digits and numerals of any script, and '_' */
static int is_word_char(utf8proc_int32_t cp) {
    if (cp == '_') return 1;
    switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
        return 1;
    default: return 0;
    }
}

/* wordcount: the runs of \w in str(value) */
static vc_status f_wordcount(const jv *s, jv **out) {
    const uint8_t *p = (const uint8_t *)s->u.str.s;
    utf8proc_ssize_t left = (utf8proc_ssize_t)s->u.str.len;
    int64_t words = 0;
    int in_word = 0;
    jinja_work(s->u.str.len / 64);
    while (left > 0) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(p, left, &cp);
        if (k <= 0) cp = -1, k = 1;
        int w = cp >= 0 && is_word_char(cp);
        words += w && !in_word;
        in_word = w;
        p += k, left -= k;
    }
    *out = jv_int(words);
    return VC_OK;
}

/* format(value, *args, **kwargs): str(value) % (kwargs or args) */
static vc_status f_format(jctx *c, const jnode *at, const jv *s, jv **args, char **kw, int n, jv **out) {
    int nkw = 0;
    for (int i = 0; i < n; i++) nkw += kw && kw[i];
    if (nkw && nkw < n) return jerr(c, at, VC_ERR_ARG, "can't handle positional and keyword arguments at the same time");
    jv *vals = nkw ? jv_dict() : jv_list();
    vc_status st = vals ? VC_OK : OOM();
    if (vals && !nkw) vals->is_tuple = 1;
    for (int i = 0; i < n && !st; i++)
        st = nkw ? jv_dict_set(vals, jv_cstr(kw[i]), jv_ref(args[i])) : jv_list_push(vals, jv_ref(args[i]));
    if (!st) st = jinja_printf(c, at, s, vals, out);
    jv_unref(vals);
    return st;
}

/* truncate(s, length=255, killwords=False, end='...', leeway=5): s itself within length + leeway characters, else its
 * first length - len(end) characters (cut back to the last space unless killwords) and end */
static vc_status f_truncate(jctx *c, const jnode *at, const jv *s, jv **args, char **kw, int n, jv **out) {
    jv *len_a = jinja_arg(args, kw, n, 0, "length"), *kill = jinja_arg(args, kw, n, 1, "killwords");
    jv *end = jinja_arg(args, kw, n, 2, "end"), *lee = jinja_arg(args, kw, n, 3, "leeway");
    if ((len_a && len_a->t != JV_INT) || (lee && lee->t != JV_INT && lee->t != JV_NONE) || (end && end->t != JV_STR))
        return jerr(c, at, VC_ERR_ARG, "truncate: length and leeway must be integers, end a string");
    int64_t length = len_a ? len_a->u.i : 255, leeway = lee && lee->t == JV_INT ? lee->u.i : 5;
    const char *e = end ? end->u.str.s : "...";
    size_t el = end ? end->u.str.len : 3;
    int64_t echars = (int64_t)utf8_count(e, el), chars = (int64_t)utf8_count(s->u.str.s, s->u.str.len);
    if (length < echars) return jerr(c, at, VC_ERR_ARG, "expected length >= %lld, got %lld", (long long)echars, (long long)length);
    if (leeway < 0) return jerr(c, at, VC_ERR_ARG, "expected leeway >= 0, got %lld", (long long)leeway);
    if (chars <= length + leeway) { *out = jv_ref((jv *)s); return VC_OK; }
    size_t cut = 0;  /* the bytes of the first length - len(end) characters */
    for (int64_t k = 0; k < length - echars; k++) {
        cut++;
        while (cut < s->u.str.len && ((unsigned char)s->u.str.s[cut] & 0xC0) == 0x80) cut++;
    }
    if (!(kill && jv_truthy(kill))) {  /* rsplit(" ", 1)[0] */
        const char *sp = memrchr(s->u.str.s, ' ', cut);
        if (sp) cut = (size_t)(sp - s->u.str.s);
    }
    char *p = malloc(cut + el + 1);
    if (!p) return OOM();
    memcpy(p, s->u.str.s, cut);
    memcpy(p + cut, e, el);
    p[cut + el] = 0;
    *out = jv_str_take(p, cut + el);
    return *out ? VC_OK : OOM();
}

/* the filters of this file; 0 where `name` is none of them (*handled stays 0) */
vc_status jinja_seq_filter(jctx *c, const jnode *at, const char *name, jv *in, jv **args, char **kw, int n, jv **out,
                           int *handled) {
    *handled = 1;
    if (!strcmp(name, "sort")) return f_sort(c, at, in, args, kw, n, out);
    if (!strcmp(name, "dictsort")) return f_dictsort(c, at, in, args, kw, n, out);
    if (!strcmp(name, "min") || !strcmp(name, "max")) return f_minmax(c, at, name[1] == 'a', in, args, kw, n, out);
    if (!strcmp(name, "batch")) return f_batch(c, at, in, args, kw, n, out);
    if (!strcmp(name, "wordcount") || !strcmp(name, "center") || !strcmp(name, "format") || !strcmp(name, "truncate")) {
        jv *s = NULL;
        vc_status st = jinja_to_str(in, &s);
        jv *w = jinja_arg(args, kw, n, 0, "width"), *w80 = w ? NULL : jv_int(80);
        if (!st && name[0] == 'w') st = f_wordcount(s, out);
        else if (!st && name[0] == 'c') st = jinja_str_pad(c, at, "center", s, w ? w : w80, NULL, out);
        else if (!st && name[0] == 'f') st = f_format(c, at, s, args, kw, n, out);
        else if (!st) st = f_truncate(c, at, s, args, kw, n, out);
        jv_unref(w80);
        jv_unref(s);
        return st;
    }
    *handled = 0;
    return VC_OK;
}

/* list.count(x), list.index(x[, start[, end]]) (and a tuple's): the sandbox lets templates call these */
vc_status jinja_list_method(jctx *c, const jnode *at, const char *m, jv *l, jv **args, int n, jv **out) {
    if (n < 1) return jerr(c, at, VC_ERR_ARG, "%s() takes at least 1 argument", m);
    int64_t len = (int64_t)l->u.list.n, lo = 0, hi = len, hits = 0;
    for (int k = 1; k < 3 && k < n && m[0] == 'i'; k++) {
        if (args[k]->t != JV_INT && args[k]->t != JV_BOOL)
            return jerr(c, at, VC_ERR_ARG, "slice indices must be integers or have an __index__ method");
        int64_t v = args[k]->t == JV_INT ? args[k]->u.i : args[k]->u.b;
        if (v < 0) v = v + len < 0 ? 0 : v + len;
        *(k == 1 ? &lo : &hi) = v > len ? len : v;
    }
    for (int64_t i = lo; i < hi; i++) {
        if (!jv_equal(l->u.list.items[i], args[0])) continue;
        if (m[0] == 'i') { *out = jv_int(i); return VC_OK; }
        hits++;
    }
    if (m[0] == 'i')
        return jerr(c, at, VC_ERR_ARG, l->is_tuple ? "tuple.index(x): x not in tuple" : "list.index(x): x not in list");
    *out = jv_int(hits);
    return VC_OK;
}
