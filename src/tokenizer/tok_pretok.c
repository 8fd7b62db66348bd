/* Pre-tokenizers of tokenizer.json: Split, ByteLevel, Digits, Metaspace, Whitespace(Split), Punctuation. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>
#include "tokenizer/tok_internal.h"

const char *tk_bytelevel_char[256];
static char bl_store[256][3];
static int16_t bl_rev[512];
static pthread_once_t bl_once = PTHREAD_ONCE_INIT;

static void bytelevel_build(void) {
    int n = 0;
    for (int i = 0; i < 512; i++) bl_rev[i] = -1;
    for (int b = 0; b < 256; b++) {
        int keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        uint32_t cp = keep ? (uint32_t)b : (uint32_t)(256 + n++);
        int l = tk_utf8_encode(cp, bl_store[b]);
        if (l < 3) bl_store[b][l] = 0;
        tk_bytelevel_char[b] = bl_store[b];
        bl_rev[cp] = (int16_t)b;
    }
}
int tk_bytelevel_init(void) { return pthread_once(&bl_once, bytelevel_build); }
int tk_bytelevel_byte(int32_t cp) { return cp >= 0 && cp < 512 ? bl_rev[cp] : -1; }

regex_t *tk_regex_new(const char *pat, size_t len, char *err, size_t errlen) {
    regex_t *re = NULL;
    OnigErrorInfo ei;
    int r = onig_new(&re, (const UChar *)pat, (const UChar *)pat + len, ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
                     ONIG_SYNTAX_DEFAULT, &ei);
    if (r != ONIG_NORMAL) {
        UChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
        onig_error_code_to_str(msg, r, &ei);
        snprintf(err, errlen, "%s", (const char *)msg);
        return NULL;
    }
    return re;
}

/* ---- match finding: appends (start, end) pairs of matches in s ---- */
typedef struct { size_t *v; size_t n, cap; } spans;
static int spans_add(spans *m, size_t b, size_t e) {
    if (m->n + 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 64;
        size_t *v = realloc(m->v, cap * sizeof *v);
        if (!v) return -1;
        m->v = v; m->cap = cap;
    }
    m->v[m->n++] = b; m->v[m->n++] = e;
    return 0;
}

static int spans_cb(void *m, size_t b, size_t e) { return spans_add(m, b, e); }

/* Regex matches over the valid UTF-8 runs of s (each invalid byte stands alone, unmatched). */
static int find_regex(regex_t *re, int fast, const char *s, size_t n, spans *m) {
    const unsigned char *u = (const unsigned char *)s;
    OnigRegion region, *reg = &region;
    onig_region_init(reg);
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        int32_t cp;
        while (j < n) { int l = tk_utf8_next(u + j, n - j, &cp); if (cp < 0) break; j += (size_t)l; }
        if (fast) {
            size_t q = i;
            while (q < j && u[q] < 0x80) q++;
            if (q == j) {
                if (tk_fastre_spans(fast, s + i, j - i, i, spans_cb, m)) { onig_region_free(reg, 0); return -1; }
                i = j < n ? j + 1 : j;
                continue;
            }
        }
        const UChar *st = u + i, *end = u + j;
        size_t at = 0, rl = j - i;
        while (at < rl) {
            int r = onig_search(re, st, end, st + at, end, reg, ONIG_OPTION_NONE);
            if (r < 0) break;
            size_t b = (size_t)reg->beg[0], e = (size_t)reg->end[0];
            if (e == b) { int l = tk_utf8_next(st + b, rl - b, &cp); at = b + (size_t)l; continue; }
            if (spans_add(m, i + b, i + e)) { onig_region_free(reg, 0); return -1; }
            at = e;
        }
        i = j < n ? j + 1 : j;
    }
    onig_region_free(reg, 0);
    return 0;
}

static int is_punct_cp(int32_t c) {
    if (c < 0) return 0;
    if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) return 1;
    utf8proc_category_t k = utf8proc_category(c);
    return k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO;
}
static int is_numeric_cp(int32_t c) {
    if (c < 0) return 0;
    utf8proc_category_t k = utf8proc_category(c);
    return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

enum { PRED_DIGIT, PRED_SPACE, PRED_PUNCT, PRED_LITERAL };
static int find_chars(int pred, const char *lit, size_t lit_len, const char *s, size_t n, spans *m) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        if (pred == PRED_LITERAL) {
            if (lit_len && i + lit_len <= n && !memcmp(s + i, lit, lit_len)) {
                if (spans_add(m, i, i + lit_len)) return -1;
                i += lit_len;
            } else i++;
            continue;
        }
        int32_t cp;
        int l = tk_utf8_next(u + i, n - i, &cp);
        int hit = pred == PRED_DIGIT ? is_numeric_cp(cp) : pred == PRED_SPACE ? tk_is_space_cp(cp) : is_punct_cp(cp);
        if (hit && spans_add(m, i, i + (size_t)l)) return -1;
        i += (size_t)l;
    }
    return 0;
}

#define SMALL 64
int tk_regex_spans(regex_t *re, int fast, const char *s, size_t n, size_t **v, size_t *nv) {
    spans m = {0};
    int rc = find_regex(re, fast, s, n, &m);
    *v = m.v; *nv = m.n;
    return rc;
}

/* Turns matches into pieces per HF SplitDelimiterBehavior. */
static int split_emit(const char *s, size_t n, uint8_t flag, const spans *m, int behavior, int invert,
                      tk_pieces *out) {
    size_t cap = m->n + 2, k = 0;
    size_t sb[SMALL], se[SMALL], sob[SMALL], soe[SMALL];
    uint8_t sis[SMALL];
    int small = cap <= SMALL;
    size_t *b = small ? sb : malloc(cap * sizeof *b), *e = small ? se : malloc(cap * sizeof *e);
    uint8_t *is = small ? sis : malloc(cap);
    int rc = -1;
    if (!b || !e || !is) goto out;
    size_t prev = 0;
    for (size_t i = 0; i < m->n; i += 2) {
        if (prev != m->v[i]) { b[k] = prev; e[k] = m->v[i]; is[k++] = 0; }
        b[k] = m->v[i]; e[k] = m->v[i + 1]; is[k++] = 1;
        prev = m->v[i + 1];
    }
    if (prev != n) { b[k] = prev; e[k] = n; is[k++] = 0; }
    if (invert) for (size_t i = 0; i < k; i++) is[i] = !is[i];
    size_t w = 0;
    int prev_match = 0;
    /* generic fold into (b,e,keep) lists */
    size_t *ob = small ? sob : malloc((k + 1) * sizeof *ob), *oe = small ? soe : malloc((k + 1) * sizeof *oe);
    if (!ob || !oe) { if (!small) { free(ob); free(oe); } goto out; }
    prev_match = 0;
    if (behavior == TK_B_MERGED_NEXT) {
        for (size_t ii = k; ii-- > 0;) {
            if (is[ii] && !prev_match && w) ob[w - 1] = b[ii];
            else { ob[w] = b[ii]; oe[w] = e[ii]; w++; }
            prev_match = is[ii];
        }
        for (size_t i = 0; i < w / 2; i++) {
            size_t t = ob[i]; ob[i] = ob[w - 1 - i]; ob[w - 1 - i] = t;
            t = oe[i]; oe[i] = oe[w - 1 - i]; oe[w - 1 - i] = t;
        }
    } else {
        for (size_t i = 0; i < k; i++) {
            if (behavior == TK_B_REMOVED) { if (!is[i]) { ob[w] = b[i]; oe[w] = e[i]; w++; } continue; }
            if (behavior == TK_B_ISOLATED) { ob[w] = b[i]; oe[w] = e[i]; w++; continue; }
            int merge = behavior == TK_B_MERGED_PREV ? (is[i] && !prev_match) : (is[i] == prev_match);
            if (merge && w) oe[w - 1] = e[i];
            else { ob[w] = b[i]; oe[w] = e[i]; w++; }
            prev_match = is[i];
        }
    }
    rc = 0;
    for (size_t i = 0; i < w && !rc; i++)
        if (oe[i] > ob[i]) rc = tk_pieces_add(out, s + ob[i], oe[i] - ob[i], (uint8_t)(ob[i] == 0 ? flag : 0));
    if (!small) { free(ob); free(oe); }
out:
    if (!small) { free(b); free(e); free(is); }
    return rc;
}

static int split_piece(const tk_pretok *p, int pred, regex_t *re, int behavior, int invert, const char *s, size_t n,
                       uint8_t flag, tk_pieces *out) {
    spans m = {0};
    int rc = re ? find_regex(re, p && re == p->re ? p->fast : 0, s, n, &m) : find_chars(pred, p ? p->lit : NULL, p ? p->lit_len : 0, s, n, &m);
    if (!rc) rc = split_emit(s, n, flag, &m, behavior, invert, out);
    free(m.v);
    return rc;
}

/* Adds s as one piece with every byte replaced by its byte-level char (at most 2 UTF-8 bytes each). */
static int add_mapped(tk_pieces *out, const char *pre, size_t pl, const char *s, size_t n, uint8_t flag) {
    if (!pl && !n) return 0;
    if (tk_pieces_add(out, "", 0, flag)) return -1;
    tk_buf *b = &out->buf;
    if (b->n + 2 * (pl + n) + 1 > b->cap && tk_buf_put(b, NULL, 0) == 0) {
        size_t need = b->n + 2 * (pl + n) + 1, cap = b->cap ? b->cap : 64;
        while (cap < need) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return -1;
        b->p = p; b->cap = cap;
    }
    char *w = b->p + b->n;
    for (int part = 0; part < 2; part++) {
        const unsigned char *u = (const unsigned char *)(part ? s : pre);
        size_t m = part ? n : pl;
        for (size_t j = 0; j < m; j++) {
            const char *c = tk_bytelevel_char[u[j]];
            *w++ = c[0];
            if (c[1]) *w++ = c[1];
        }
    }
    out->len[out->n - 1] = (size_t)(w - (b->p + b->n));
    b->n = (size_t)(w - b->p);
    b->p[b->n] = 0;
    return 0;
}

static int bytelevel_piece(const tk_pretok *p, const char *s, size_t n, uint8_t flag, tk_pieces *out) {
    const char *pre = p->add_prefix_space && (n == 0 || s[0] != ' ') ? " " : "";
    size_t pl = strlen(pre);
    if (!p->use_regex) return add_mapped(out, pre, pl, s, n, flag);
    if (pl) { /* the regex must see the prefix space */
        char *tmp = malloc(n + 1);
        if (!tmp) return -1;
        tmp[0] = ' '; memcpy(tmp + 1, s, n);
        tk_pretok q = *p; q.add_prefix_space = 0;
        int rc = bytelevel_piece(&q, tmp, n + 1, flag, out);
        free(tmp);
        return rc;
    }
    spans m = {0};
    int rc = find_regex(p->re, p->fast, s, n, &m);
    size_t prev = 0;
    for (size_t i = 0; i < m.n && !rc; i += 2) {
        if (m.v[i] > prev) rc = add_mapped(out, "", 0, s + prev, m.v[i] - prev, prev == 0 ? flag : 0);
        if (!rc) rc = add_mapped(out, "", 0, s + m.v[i], m.v[i + 1] - m.v[i], m.v[i] == 0 ? flag : 0);
        prev = m.v[i + 1];
    }
    if (!rc && n > prev) rc = add_mapped(out, "", 0, s + prev, n - prev, prev == 0 ? flag : 0);
    free(m.v);
    return rc;
}

static int metaspace_piece(const tk_pretok *p, const char *s, size_t n, uint8_t flag, tk_pieces *out) {
    tk_buf m = {0};
    size_t rl = strlen(p->repl);
    int rc = 0;
    int starts = n && (s[0] == ' ' || (n >= rl && !memcmp(s, p->repl, rl)));
    if (!starts && (p->prepend_scheme == TK_PS_ALWAYS || (p->prepend_scheme == TK_PS_FIRST && (flag & 1))))
        rc = tk_buf_put(&m, p->repl, rl);
    for (size_t i = 0; i < n && !rc; i++) rc = s[i] == ' ' ? tk_buf_put(&m, p->repl, rl) : tk_buf_putc(&m, s[i]);
    if (!rc && m.n) {
        if (p->split) {
            tk_pretok lit = {.lit = p->repl, .lit_len = rl};
            rc = split_piece(&lit, PRED_LITERAL, NULL, TK_B_MERGED_NEXT, 0, m.p, m.n, flag, out);
        } else rc = tk_pieces_add(out, m.p, m.n, flag);
    }
    tk_buf_free(&m);
    return rc;
}

/* FixedLength: pieces of `length` characters (the last one shorter). */
static int fixed_piece(const tk_pretok *p, const char *s, size_t n, uint8_t flag, tk_pieces *out) {
    int rc = 0;
    for (size_t b = 0; b < n && !rc;) {
        size_t e = b;
        for (int k = 0; k < p->length && e < n; k++) { int32_t cp; e += (size_t)tk_utf8_next((const unsigned char *)s + e, n - e, &cp); }
        rc = tk_pieces_add(out, s + b, e - b, b == 0 ? flag : 0);
        b = e;
    }
    return rc;
}

static int pretok_piece(const tk_pretok *p, const char *s, size_t n, uint8_t flag, tk_pieces *out) {
    switch (p->type) {
    case TK_P_FIXED: return fixed_piece(p, s, n, flag, out);
    case TK_P_SPLIT:
        return split_piece(p, PRED_LITERAL, p->re, p->behavior, p->invert, s, n, flag, out);
    case TK_P_BYTELEVEL: return bytelevel_piece(p, s, n, flag, out);
    case TK_P_DIGITS:
        return split_piece(p, PRED_DIGIT, NULL, p->individual_digits ? TK_B_ISOLATED : TK_B_CONTIGUOUS, 0, s, n, flag, out);
    case TK_P_METASPACE: return metaspace_piece(p, s, n, flag, out);
    case TK_P_WHITESPACE: return split_piece(p, 0, p->re, TK_B_REMOVED, 1, s, n, flag, out);
    case TK_P_WSSPLIT: return split_piece(p, PRED_SPACE, NULL, TK_B_REMOVED, 0, s, n, flag, out);
    case TK_P_PUNCT: return split_piece(p, PRED_PUNCT, NULL, p->behavior, 0, s, n, flag, out);
    case TK_P_BERT: {
        tk_pieces tmp = {0};
        int rc = split_piece(p, PRED_SPACE, NULL, TK_B_REMOVED, 0, s, n, flag, &tmp);
        for (size_t i = 0; i < tmp.n && !rc; i++)
            rc = split_piece(p, PRED_PUNCT, NULL, TK_B_ISOLATED, 0, TK_PIECE(&tmp, i), tmp.len[i], tmp.flag[i], out);
        tk_pieces_free(&tmp);
        return rc;
    }
    }
    return tk_pieces_add(out, s, n, flag);
}

int tk_pretok_apply(const tk_pretok *p, tk_pieces *in, tk_pieces *tmp) {
    if (!p) return 0;
    if (p->type == TK_P_SEQ) {
        for (int i = 0; i < p->n_kids; i++)
            if (tk_pretok_apply(p->kids[i], in, tmp)) return -1;
        return 0;
    }
    tk_pieces_clear(tmp);
    for (size_t i = 0; i < in->n; i++)
        if (pretok_piece(p, TK_PIECE(in, i), in->len[i], in->flag[i], tmp)) return -1;
    tk_pieces t = *in; *in = *tmp; *tmp = t;
    return 0;
}

int tk_pretok_uses_first(const tk_pretok *p) {
    if (!p) return 0;
    for (int i = 0; i < p->n_kids; i++) if (tk_pretok_uses_first(p->kids[i])) return 1;
    return p->type == TK_P_METASPACE && p->prepend_scheme == TK_PS_FIRST;
}

void tk_pretok_free(tk_pretok *p) {
    if (!p) return;
    for (int i = 0; i < p->n_kids; i++) tk_pretok_free(p->kids[i]);
    free(p->kids); free(p->lit); free(p->repl);
    if (p->re) onig_free(p->re);
    free(p);
}
