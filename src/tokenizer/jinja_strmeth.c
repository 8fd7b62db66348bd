/* The str methods beyond splitting, stripping and case (jinja_ops.c): padding (ljust, rjust, center, zfill),
 * partition, affixes, casefold and swapcase, index / rindex, expandtabs, and the Unicode is* predicates, with
 * Python's semantics; lengths and padding count characters (code points). */
#include "tokenizer/jinja.h"
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define OOM() vc_fail(VC_ERR_NOMEM, "chat template: out of memory")

static const char *const NAMES[] = { "ljust", "rjust", "center", "zfill", "partition", "rpartition", "removeprefix",
    "removesuffix", "casefold", "swapcase", "index", "rindex", "expandtabs", "isnumeric", "isdecimal", "istitle",
    "isidentifier", "isprintable", "isascii", "isdigit", "isalpha", "isalnum", "isspace", "format", NULL };

const char *jinja_str_method2_name(const char *name) {
    for (int i = 0; NAMES[i]; i++) if (!strcmp(NAMES[i], name)) return NAMES[i];
    return NULL;
}

typedef struct { const uint8_t *p; utf8proc_ssize_t left; } cps;
/* the next code point (a stray byte stands for itself); 0 at the end */
static int next_cp(cps *it, utf8proc_int32_t *cp) {
    if (it->left <= 0) return 0;
    utf8proc_ssize_t k = utf8proc_iterate(it->p, it->left, cp);
    if (k <= 0) *cp = *it->p, k = 1;
    it->p += k, it->left -= k;
    return 1;
}

static int is_int(const jv *v) { return v && (v->t == JV_INT || v->t == JV_BOOL); }
static int64_t int_of(const jv *v) { return v->t == JV_INT ? v->u.i : v->u.b; }

/* ljust / rjust / center / zfill: `s` widened to `width` characters with `fill` (one character; NULL: a space, or
 * '0' after any sign for zfill); center's odd margin puts the extra one on the left where the width is odd */
vc_status jinja_str_pad(jctx *c, const jnode *at, const char *m, const jv *s, jv *w, jv *fill, jv **out) {
    if (!is_int(w)) return jerr(c, at, VC_ERR_ARG, "%s() needs an integer width", m);
    if (fill && (fill->t != JV_STR || utf8_count(fill->u.str.s, fill->u.str.len) != 1))
        return jerr(c, at, VC_ERR_ARG, "The fill character must be exactly one character long");
    const char *f = fill ? fill->u.str.s : m[0] == 'z' ? "0" : " ";
    size_t fl = fill ? fill->u.str.len : 1;
    int64_t len = (int64_t)utf8_count(s->u.str.s, s->u.str.len), marg = int_of(w) - len;
    if (marg <= 0) { *out = jv_ref((jv *)s); return VC_OK; }
    if ((uint64_t)marg * fl > JINJA_MAX_OUT || jinja_work((size_t)marg * fl / 64))
        return jerr(c, at, VC_ERR_ARG, "%s(): width too large", m);
    int64_t left = m[0] == 'l' ? 0 : m[0] == 'c' ? marg / 2 + (marg & int_of(w) & 1) : marg;
    size_t sign = m[0] == 'z' && s->u.str.len && (s->u.str.s[0] == '+' || s->u.str.s[0] == '-');
    jbuf b = { 0 };
    jbuf_put(&b, s->u.str.s, sign);
    for (int64_t i = 0; i < left; i++) jbuf_put(&b, f, fl);
    jbuf_put(&b, s->u.str.s + sign, s->u.str.len - sign);
    for (int64_t i = left; i < marg; i++) jbuf_put(&b, f, fl);
    if (b.oom) { free(b.p); return OOM(); }
    *out = jv_str_take(b.p, b.n);
    return *out ? VC_OK : OOM();
}

/* partition / rpartition: a 3-tuple (head, sep, tail); not found: (s, '', '') or ('', '', s) */
static vc_status partition(jctx *c, const jnode *at, int right, const jv *s, jv *sep, jv **out) {
    if (!sep || sep->t != JV_STR) return jerr(c, at, VC_ERR_ARG, "must be str, not %s", sep ? jv_type_name(sep) : "nothing");
    if (!sep->u.str.len) return jerr(c, at, VC_ERR_ARG, "empty separator");
    const char *p = s->u.str.s, *e = p + s->u.str.len;
    const char *h = jinja_find_sub(p, s->u.str.len, sep->u.str.s, sep->u.str.len, right);
    jv *t = jv_list(), *parts[3];
    if (!t) return OOM();
    t->is_tuple = 1;
    if (h) parts[0] = jv_str(p, (size_t)(h - p)), parts[1] = jv_ref(sep), parts[2] = jv_str(h + sep->u.str.len, (size_t)(e - h - sep->u.str.len));
    else if (right) parts[0] = jv_cstr(""), parts[1] = jv_cstr(""), parts[2] = jv_ref((jv *)s);
    else parts[0] = jv_ref((jv *)s), parts[1] = jv_cstr(""), parts[2] = jv_cstr("");
    vc_status st = VC_OK;
    for (int i = 0; i < 3; i++) {
        if (!st && !parts[i]) st = OOM();
        if (!st) st = jv_list_push(t, parts[i]);
        else jv_unref(parts[i]);
    }
    if (st) { jv_unref(t); return st; }
    *out = t;
    return VC_OK;
}

/* casefold (utf8proc's full case folding: 'ß' -> 'ss') and swapcase */
static vc_status recase(const jv *s, int fold, jv **out) {
    if (fold) {
        utf8proc_uint8_t *dst = NULL;
        utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t *)s->u.str.s, (utf8proc_ssize_t)s->u.str.len, &dst,
                                          UTF8PROC_CASEFOLD);
        if (n >= 0) { *out = jv_str_take((char *)dst, (size_t)n); return *out ? VC_OK : OOM(); }
        free(dst);  /* invalid UTF-8: the bytes as they are, as the other case methods leave them */
        *out = jv_ref((jv *)s);
        return VC_OK;
    }
    jbuf b = { 0 };
    jbuf_put(&b, "", 0);
    cps it = { (const uint8_t *)s->u.str.s, (utf8proc_ssize_t)s->u.str.len };
    utf8proc_int32_t cp;
    while (next_cp(&it, &cp)) {
        utf8proc_category_t g = utf8proc_category(cp);
        utf8proc_int32_t r = g == UTF8PROC_CATEGORY_LU ? utf8proc_tolower(cp) : g == UTF8PROC_CATEGORY_LL ? utf8proc_toupper(cp) : cp;
        uint8_t enc[4];
        utf8proc_ssize_t k = utf8proc_encode_char(r, enc);
        jbuf_put(&b, (const char *)enc, (size_t)(k > 0 ? k : 0));
    }
    if (b.oom) { free(b.p); return OOM(); }
    *out = jv_str_take(b.p, b.n);
    return *out ? VC_OK : OOM();
}

/* expandtabs(tabsize=8): each tab to the next multiple of tabsize columns; columns restart after \n and \r */
static vc_status expandtabs(jctx *c, const jnode *at, const jv *s, jv *ts, jv **out) {
    if (ts && !is_int(ts)) return jerr(c, at, VC_ERR_ARG, "expandtabs() needs an integer tab size");
    int64_t size = ts ? int_of(ts) : 8, col = 0;
    jbuf b = { 0 };
    jbuf_put(&b, "", 0);
    cps it = { (const uint8_t *)s->u.str.s, (utf8proc_ssize_t)s->u.str.len };
    utf8proc_int32_t cp;
    const uint8_t *prev = it.p;
    while (next_cp(&it, &cp)) {
        if (cp == '\t') {
            int64_t k = size > 0 ? size - col % size : 0;
            if (k > 4096 || jinja_work((size_t)k / 64 + 1)) { free(b.p); return jerr(c, at, VC_ERR_ARG, "expandtabs(): tab size too large"); }
            for (int64_t i = 0; i < k; i++) jbuf_putc(&b, ' ');
            col += k;
        } else {
            jbuf_put(&b, (const char *)prev, (size_t)(it.p - prev));
            col = cp == '\n' || cp == '\r' ? 0 : col + 1;
        }
        prev = it.p;
    }
    if (b.oom) { free(b.p); return OOM(); }
    *out = jv_str_take(b.p, b.n);
    return *out ? VC_OK : OOM();
}

/* Unicode's derived Lowercase / Uppercase (Ll / Lu and the Other_Lowercase / Other_Uppercase characters: modifier
 * letters such as U+00AA and U+02B0, Roman numerals, circled letters), which Python's islower / isupper / istitle use:
 * 2 lowercase, 1 uppercase, 0 neither (titlecase letters are asked for apart) */
int jinja_py_case(utf8proc_int32_t cp) {
    static const utf8proc_int32_t lo[][2] = { { 0xAA, 0xAA }, { 0xBA, 0xBA }, { 0x2B0, 0x2B8 }, { 0x2C0, 0x2C1 },
        { 0x2E0, 0x2E4 }, { 0x345, 0x345 }, { 0x37A, 0x37A }, { 0x1D2C, 0x1D6A }, { 0x1D78, 0x1D78 },
        { 0x1D9B, 0x1DBF }, { 0x2071, 0x2071 }, { 0x207F, 0x207F }, { 0x2090, 0x209C }, { 0x2170, 0x217F },
        { 0x24D0, 0x24E9 }, { 0x2C7C, 0x2C7D }, { 0xA69C, 0xA69D }, { 0xA770, 0xA770 }, { 0xA7F2, 0xA7F4 },
        { 0xA7F8, 0xA7F9 }, { 0xAB5C, 0xAB5F }, { 0xAB69, 0xAB69 }, { 0x10780, 0x10780 }, { 0x10783, 0x10785 },
        { 0x10787, 0x107B0 }, { 0x107B2, 0x107BA }, { 0x1E030, 0x1E06D } };
    static const utf8proc_int32_t up[][2] = { { 0x2160, 0x216F }, { 0x24B6, 0x24CF }, { 0x1F130, 0x1F149 },
        { 0x1F150, 0x1F169 }, { 0x1F170, 0x1F189 } };
    utf8proc_category_t g = utf8proc_category(cp);
    if (g == UTF8PROC_CATEGORY_LL) return 2;
    if (g == UTF8PROC_CATEGORY_LU) return 1;
    for (size_t i = 0; i < sizeof lo / sizeof lo[0]; i++) if (cp >= lo[i][0] && cp <= lo[i][1]) return 2;
    for (size_t i = 0; i < sizeof up / sizeof up[0]; i++) if (cp >= up[i][0] && cp <= up[i][1]) return 1;
    return 0;
}

static int is_letter(utf8proc_category_t g) { return g >= UTF8PROC_CATEGORY_LU && g <= UTF8PROC_CATEGORY_LO; }

/* Python's isdigit: decimal digits and the other digits (Numeric_Type=Digit: superscripts, subscripts, circled,
 * parenthesized and dingbat digits, Ethiopic and Kharoshthi digits) */
static int is_digit_cp(utf8proc_int32_t cp, utf8proc_category_t g) {
    static const utf8proc_int32_t r[][2] = { { 0xB2, 0xB3 }, { 0xB9, 0xB9 }, { 0x1369, 0x1371 }, { 0x19DA, 0x19DA },
        { 0x2070, 0x2070 }, { 0x2074, 0x2079 }, { 0x2080, 0x2089 }, { 0x2460, 0x2468 }, { 0x2474, 0x247C },
        { 0x2488, 0x2490 }, { 0x24EA, 0x24EA }, { 0x24F5, 0x24FD }, { 0x24FF, 0x24FF }, { 0x2776, 0x277E },
        { 0x2780, 0x2788 }, { 0x278A, 0x2792 }, { 0x10A40, 0x10A43 }, { 0x1F100, 0x1F10A } };
    if (g == UTF8PROC_CATEGORY_ND) return 1;
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) if (cp >= r[i][0] && cp <= r[i][1]) return 1;
    return 0;
}

/* Python's isspace: category Zs or bidirectional class WS, B or S (tab, newline, the ASCII separators 0x1c-0x1f, ...) */
static int is_space_cp(utf8proc_int32_t cp, utf8proc_category_t g) {
    int bidi = utf8proc_get_property(cp)->bidi_class;
    return g == UTF8PROC_CATEGORY_ZS || bidi == UTF8PROC_BIDI_CLASS_WS || bidi == UTF8PROC_BIDI_CLASS_B ||
           bidi == UTF8PROC_BIDI_CLASS_S;
}

/* isnumeric (categories Nd, Nl, No), isdecimal (Nd), isdigit, isalpha (L*), isalnum, isspace, istitle, isidentifier,
 * isprintable, isascii */
static int predicate(const char *m, const jv *s) {
    cps it = { (const uint8_t *)s->u.str.s, (utf8proc_ssize_t)s->u.str.len };
    utf8proc_int32_t cp;
    int any = 0, ok = 1, prev_cased = 0, cased = 0;
    while (ok && next_cp(&it, &cp)) {
        utf8proc_category_t g = utf8proc_category(cp);
        if (!strcmp(m, "isnumeric")) ok = g == UTF8PROC_CATEGORY_ND || g == UTF8PROC_CATEGORY_NL || g == UTF8PROC_CATEGORY_NO;
        else if (!strcmp(m, "isdecimal")) ok = g == UTF8PROC_CATEGORY_ND;
        else if (!strcmp(m, "isdigit")) ok = is_digit_cp(cp, g);
        else if (!strcmp(m, "isalpha")) ok = is_letter(g);
        else if (!strcmp(m, "isspace")) ok = is_space_cp(cp, g);
        else if (!strcmp(m, "isalnum"))
            ok = is_letter(g) || is_digit_cp(cp, g) || g == UTF8PROC_CATEGORY_NL || g == UTF8PROC_CATEGORY_NO;
        else if (!strcmp(m, "isascii")) ok = cp < 0x80;
        else if (!strcmp(m, "isprintable"))
            ok = cp == ' ' || !(g == UTF8PROC_CATEGORY_CC || g == UTF8PROC_CATEGORY_CF || g == UTF8PROC_CATEGORY_CS ||
                                g == UTF8PROC_CATEGORY_CO || g == UTF8PROC_CATEGORY_CN || g == UTF8PROC_CATEGORY_ZL ||
                                g == UTF8PROC_CATEGORY_ZP || g == UTF8PROC_CATEGORY_ZS);
        else if (!strcmp(m, "isidentifier"))
            ok = cp == '_' || is_letter(g) || g == UTF8PROC_CATEGORY_NL ||
                 (any && (g == UTF8PROC_CATEGORY_MN || g == UTF8PROC_CATEGORY_MC || g == UTF8PROC_CATEGORY_ND ||
                          g == UTF8PROC_CATEGORY_PC));
        else { /* istitle: an upper- or titlecase letter only after an uncased one, a lowercase one only after a cased one */
            int pc = jinja_py_case(cp), up = pc == 1 || g == UTF8PROC_CATEGORY_LT, low = pc == 2;
            if ((up && prev_cased) || (low && !prev_cased)) ok = 0;
            prev_cased = up || low;
            cased |= prev_cased;
        }
        any = 1;
    }
    if (!strcmp(m, "istitle")) return ok && cased;
    if (!strcmp(m, "isprintable") || !strcmp(m, "isascii")) return ok;  /* true of the empty string */
    return ok && any;
}

vc_status jinja_str_method2(jctx *c, const jnode *at, const char *m, jv *s, jv **args, char **kw, int n, jv **out) {
    jv *a0 = jinja_arg(args, kw, n, 0, NULL), *a1 = jinja_arg(args, kw, n, 1, NULL);
    if (!strcmp(m, "ljust") || !strcmp(m, "rjust") || !strcmp(m, "center") || !strcmp(m, "zfill"))
        return jinja_str_pad(c, at, m, s, a0, m[0] == 'z' ? NULL : a1, out);
    if (!strcmp(m, "partition") || !strcmp(m, "rpartition")) return partition(c, at, m[0] == 'r', s, a0, out);
    if (!strcmp(m, "removeprefix") || !strcmp(m, "removesuffix")) {
        if (!a0 || a0->t != JV_STR) return jerr(c, at, VC_ERR_ARG, "%s() argument must be str", m);
        size_t k = a0->u.str.len;
        int suffix = m[6] == 's';
        if (k > s->u.str.len || memcmp(suffix ? s->u.str.s + s->u.str.len - k : s->u.str.s, a0->u.str.s, k)) k = 0;
        *out = jv_str(s->u.str.s + (suffix ? 0 : k), s->u.str.len - k);
        return *out ? VC_OK : OOM();
    }
    if (!strcmp(m, "casefold") || !strcmp(m, "swapcase")) return recase(s, m[0] == 'c', out);
    if (!strcmp(m, "index") || !strcmp(m, "rindex")) {
        if (!a0 || a0->t != JV_STR) return jerr(c, at, VC_ERR_ARG, "%s() argument must be str", m);
        const char *h = jinja_find_sub(s->u.str.s, s->u.str.len, a0->u.str.s, a0->u.str.len, m[0] == 'r');
        if (!h) return jerr(c, at, VC_ERR_ARG, "substring not found");
        *out = jv_int((int64_t)utf8_count(s->u.str.s, (size_t)(h - s->u.str.s)));
        return VC_OK;
    }
    if (!strcmp(m, "format")) return jinja_str_format(c, at, s, args, kw, n, out);
    if (!strcmp(m, "expandtabs")) return expandtabs(c, at, s, a0 ? a0 : jinja_arg(args, kw, n, -1, "tabsize"), out);
    *out = jv_bool(predicate(m, s));
    return VC_OK;
}
