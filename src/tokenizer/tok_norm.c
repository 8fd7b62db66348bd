/* Normalizers of tokenizer.json, and SentencePiece's precompiled charsmap. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>
#include "tokenizer/tok_internal.h"

/* Applies a utf8proc mapping to the valid UTF-8 runs of s; invalid bytes are copied unchanged. */
static int norm_utf8proc(const char *s, size_t len, tk_buf *out, utf8proc_option_t opt) {
    const unsigned char *u = (const unsigned char *)s;
    /* fast path: text below U+0300 (lead bytes < 0xCC) is NFC/NFD-stable; ASCII is stable under all forms */
    unsigned char limit = (opt & UTF8PROC_COMPAT) || (opt & UTF8PROC_DECOMPOSE) ? 0x80 : 0xCC;
    size_t q = 0;
    while (q < len && u[q] < limit) q++;
    if (q == len) return tk_buf_put(out, s, len);
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        int32_t cp;
        while (j < len) { int l = tk_utf8_next(u + j, len - j, &cp); if (cp < 0) break; j += (size_t)l; }
        if (j > i) {
            utf8proc_uint8_t *dst = NULL;
            utf8proc_ssize_t r = utf8proc_map(u + i, (utf8proc_ssize_t)(j - i), &dst, opt);
            if (r < 0) { if (tk_buf_put(out, s + i, j - i)) return -1; }
            else { int e = tk_buf_put(out, dst, (size_t)r); free(dst); if (e) return -1; }
        }
        if (j < len) { if (tk_buf_putc(out, s[j])) return -1; j++; }
        i = j;
    }
    return 0;
}

static int norm_lower(const char *s, size_t len, tk_buf *out) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        int32_t cp;
        int l = tk_utf8_next(u + i, len - i, &cp);
        if (cp < 0) { if (tk_buf_putc(out, s[i])) return -1; }
        else { char c[4]; int k = tk_utf8_encode((uint32_t)utf8proc_tolower(cp), c); if (tk_buf_put(out, c, (size_t)k)) return -1; }
        i += (size_t)l;
    }
    return 0;
}

static int norm_replace(const tk_norm *n, const char *s, size_t len, tk_buf *out) {
    size_t blen = strlen(n->b), i = 0;
    if (n->re) {
        OnigRegion *reg = onig_region_new();
        if (!reg) return -1;
        const UChar *st = (const UChar *)s, *end = st + len;
        while (i <= len) {
            int r = onig_search(n->re, st, end, st + i, end, reg, ONIG_OPTION_NONE);
            if (r < 0) break;
            size_t b = (size_t)reg->beg[0], e = (size_t)reg->end[0];
            if (tk_buf_put(out, s + i, b - i) || tk_buf_put(out, n->b, blen)) { onig_region_free(reg, 1); return -1; }
            if (e == b) { if (b >= len) { i = len; break; } int32_t cp; int l = tk_utf8_next(st + b, len - b, &cp);
                if (tk_buf_put(out, s + b, (size_t)l)) { onig_region_free(reg, 1); return -1; } e = b + (size_t)l; }
            i = e;
        }
        onig_region_free(reg, 1);
        return i < len ? tk_buf_put(out, s + i, len - i) : 0;
    }
    size_t alen = strlen(n->a);
    if (!alen) return tk_buf_put(out, s, len);
    while (i < len) {
        if (i + alen <= len && !memcmp(s + i, n->a, alen)) { if (tk_buf_put(out, n->b, blen)) return -1; i += alen; }
        else { if (tk_buf_putc(out, s[i])) return -1; i++; }
    }
    return 0;
}

static int norm_strip(const tk_norm *n, const char *s, size_t len, tk_buf *out) {
    const unsigned char *u = (const unsigned char *)s;
    size_t b = 0, e = len;
    if (n->left)
        while (b < e) { int32_t cp; int l = tk_utf8_next(u + b, e - b, &cp); if (!tk_is_space_cp(cp)) break; b += (size_t)l; }
    if (n->right)
        while (e > b) {
            size_t k = e - 1;
            while (k > b && (u[k] & 0xC0) == 0x80) k--;
            int32_t cp; tk_utf8_next(u + k, e - k, &cp);
            if (!tk_is_space_cp(cp)) break;
            e = k;
        }
    return tk_buf_put(out, s + b, e - b);
}

/* tokenizers' Precompiled: per extended grapheme cluster, a grapheme under 6 bytes with a trie match at its
 * start is replaced whole by the shortest match's replacement; otherwise each char is mapped on its own. */
static int norm_precompiled(const tk_charsmap *cm, const char *s, size_t len, tk_buf *out) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        int32_t cp, prev;
        size_t g = (size_t)tk_utf8_next(u + i, len - i, &prev);
        utf8proc_int32_t state = 0;
        while (i + g < len) { /* extend the grapheme */
            int l = tk_utf8_next(u + i + g, len - i - g, &cp);
            if (cp < 0 || prev < 0 || utf8proc_grapheme_break_stateful(prev, cp, &state)) break;
            g += (size_t)l; prev = cp;
        }
        const char *rep; size_t rl;
        if (g < 6 && tk_charsmap_first(cm, s + i, g, &rep, &rl)) { if (tk_buf_put(out, rep, rl)) return -1; i += g; continue; }
        for (size_t j = i; j < i + g;) {
            int l = tk_utf8_next(u + j, i + g - j, &cp);
            if (tk_charsmap_first(cm, s + j, (size_t)l, &rep, &rl)) { if (tk_buf_put(out, rep, rl)) return -1; }
            else if (tk_buf_put(out, s + j, (size_t)l)) return -1;
            j += (size_t)l;
        }
        i += g;
    }
    return 0;
}

/* Drops marks: all of them (Mn, Mc, Me: the StripAccents normalizer) or only nonspacing ones (Mn: BertNormalizer). */
static int norm_strip_accents(const char *s, size_t len, int all_marks, tk_buf *out) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        int32_t cp;
        int l = tk_utf8_next(u + i, len - i, &cp);
        utf8proc_category_t k = cp < 0 ? UTF8PROC_CATEGORY_CN : utf8proc_category(cp);
        int mark = k == UTF8PROC_CATEGORY_MN || (all_marks && (k == UTF8PROC_CATEGORY_MC || k == UTF8PROC_CATEGORY_ME));
        if (!mark && tk_buf_put(out, s + i, (size_t)l)) return -1;
        i += (size_t)l;
    }
    return 0;
}

static int is_cjk(int32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* tokenizers' BertNormalizer: clean_text, handle_chinese_chars, strip_accents (NFD + drop Mn), lowercase. */
static int norm_bert(const tk_norm *n, const char *s, size_t len, tk_buf *out) {
    const unsigned char *u = (const unsigned char *)s;
    tk_buf a = {0}, b = {0};
    int rc = tk_buf_put(&a, "", 0);
    for (size_t i = 0; i < len && !rc;) {
        int32_t cp;
        int l = tk_utf8_next(u + i, len - i, &cp);
        i += (size_t)l;
        if (cp < 0) { rc = tk_buf_put(&a, u + i - l, (size_t)l); continue; }
        if (n->left) {
            if (cp == 0 || cp == 0xFFFD) continue;
            utf8proc_category_t k = utf8proc_category(cp);
            int ws = cp == '\t' || cp == '\n' || cp == '\r' || tk_is_space_cp(cp);
            if (!ws && (k == UTF8PROC_CATEGORY_CC || k == UTF8PROC_CATEGORY_CF || k == UTF8PROC_CATEGORY_CS ||
                        k == UTF8PROC_CATEGORY_CO || k == UTF8PROC_CATEGORY_CN)) continue;
            if (ws) cp = ' ';
        }
        char c[4];
        int cl = tk_utf8_encode((uint32_t)cp, c);
        if (n->right && is_cjk(cp)) rc = tk_buf_putc(&a, ' ') || tk_buf_put(&a, c, (size_t)cl) || tk_buf_putc(&a, ' ');
        else rc = tk_buf_put(&a, c, (size_t)cl);
    }
    if (!rc && n->strip_accents) {
        rc = norm_utf8proc(a.p, a.n, &b, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
        a.n = 0;
        if (!rc) rc = tk_buf_put(&a, "", 0) || norm_strip_accents(b.p ? b.p : "", b.n, 0, &a);
    }
    if (!rc) rc = n->lowercase ? norm_lower(a.p, a.n, out) : tk_buf_put(out, a.p, a.n);
    tk_buf_free(&a); tk_buf_free(&b);
    return rc;
}

/* tokenizers' Nmt: some control characters dropped, other separators and format characters turned into spaces. */
static int norm_nmt(const char *s, size_t len, tk_buf *out) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        int32_t c;
        int l = tk_utf8_next(u + i, len - i, &c);
        int drop = (c >= 1 && c <= 8) || c == 0x0B || (c >= 0x0E && c <= 0x1F) || c == 0x7F || c == 0x8F || c == 0x9F;
        int space = c == 9 || c == 10 || c == 12 || c == 13 || c == 0x1680 || (c >= 0x200B && c <= 0x200F) || c == 0x2028 ||
                    c == 0x2029 || c == 0x2581 || c == 0xFEFF || c == 0xFFFD;
        if (!drop && (space ? tk_buf_putc(out, ' ') : tk_buf_put(out, s + i, (size_t)l))) return -1;
        i += (size_t)l;
    }
    return 0;
}

/* The ByteLevel normalizer: every byte as its byte-level character (GPT-2's table). */
static int norm_bytelevel(const char *s, size_t len, tk_buf *out) {
    for (size_t i = 0; i < len; i++) {
        const char *c = tk_bytelevel_char[(unsigned char)s[i]];
        if (tk_buf_put(out, c, strlen(c))) return -1;
    }
    return 0;
}

int tk_norm_apply(const tk_norm *n, const char *s, size_t len, tk_buf *out) {
    out->n = 0;
    if (tk_buf_put(out, "", 0)) return -1;
    if (!n) return tk_buf_put(out, s, len);
    switch (n->type) {
    case TK_N_NFC: return norm_utf8proc(s, len, out, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    case TK_N_NFKC: return norm_utf8proc(s, len, out, UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
    case TK_N_NFD: return norm_utf8proc(s, len, out, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
    case TK_N_NFKD: return norm_utf8proc(s, len, out, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
    case TK_N_LOWER: return norm_lower(s, len, out);
    case TK_N_PREPEND:
        if (len && tk_buf_put(out, n->a, strlen(n->a))) return -1;
        return tk_buf_put(out, s, len);
    case TK_N_REPLACE: return norm_replace(n, s, len, out);
    case TK_N_STRIP: return norm_strip(n, s, len, out);
    case TK_N_PRECOMPILED: return norm_precompiled(n->cm, s, len, out);
    case TK_N_STRIP_ACCENTS: return norm_strip_accents(s, len, 1, out);
    case TK_N_BERT: return norm_bert(n, s, len, out);
    case TK_N_NMT: return norm_nmt(s, len, out);
    case TK_N_BYTELEVEL: return norm_bytelevel(s, len, out);
    case TK_N_SEQ: {
        tk_buf cur = {0};
        if (tk_buf_put(&cur, s, len)) return -1;
        for (int i = 0; i < n->n_kids; i++) {
            if (tk_norm_apply(n->kids[i], cur.p, cur.n, out)) { tk_buf_free(&cur); return -1; }
            tk_buf tmp = cur; cur = *out; *out = tmp;
        }
        out->n = 0;
        int e = tk_buf_put(out, cur.p, cur.n);
        tk_buf_free(&cur);
        return e;
    }
    }
    return tk_buf_put(out, s, len);
}

void tk_norm_free(tk_norm *n) {
    if (!n) return;
    for (int i = 0; i < n->n_kids; i++) tk_norm_free(n->kids[i]);
    free(n->kids); free(n->a); free(n->b);
    if (n->re) onig_free(n->re);
    tk_charsmap_free(n->cm);
    free(n);
}

/* ---- precompiled charsmap: uint32 trie size, darts-clone double array, NUL-terminated replacements ---- */
vc_status tk_charsmap_load(const char *data, size_t len, tk_charsmap **out, const char *what) {
    *out = NULL;
    if (len == 0) return VC_OK;
    if (len < 4) return vc_fail(VC_ERR_FORMAT, "%s: precompiled charsmap truncated", what);
    uint32_t tsize = (uint32_t)(unsigned char)data[0] | (uint32_t)(unsigned char)data[1] << 8 |
                     (uint32_t)(unsigned char)data[2] << 16 | (uint32_t)(unsigned char)data[3] << 24;
    if (tsize % 4 || tsize == 0 || tsize > len - 4)
        return vc_fail(VC_ERR_FORMAT, "%s: precompiled charsmap trie size %u does not fit %zu bytes", what, tsize, len);
    tk_charsmap *cm = calloc(1, sizeof *cm);
    char *blob = malloc(len + 1);
    if (!cm || !blob) { free(cm); free(blob); return vc_fail(VC_ERR_NOMEM, "%s: out of memory", what); }
    memcpy(blob, data, len);
    blob[len] = 0; /* guards the last replacement string */
    cm->blob = blob;
    cm->n_units = tsize / 4;
    cm->units = malloc(tsize);
    if (!cm->units) { tk_charsmap_free(cm); return vc_fail(VC_ERR_NOMEM, "%s: out of memory", what); }
    for (size_t i = 0; i < cm->n_units; i++) {
        const unsigned char *p = (const unsigned char *)data + 4 + i * 4;
        cm->units[i] = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    }
    cm->norm = blob + 4 + tsize;
    cm->norm_len = len - 4 - tsize;
    *out = cm;
    return VC_OK;
}

static inline uint32_t du_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

static size_t charsmap_search(const tk_charsmap *cm, const char *s, size_t n, const char **rep, size_t *rep_len, int first);
size_t tk_charsmap_match(const tk_charsmap *cm, const char *s, size_t n, const char **rep, size_t *rep_len) {
    return charsmap_search(cm, s, n, rep, rep_len, 0);
}
size_t tk_charsmap_first(const tk_charsmap *cm, const char *s, size_t n, const char **rep, size_t *rep_len) {
    return charsmap_search(cm, s, n, rep, rep_len, 1);
}

static size_t charsmap_search(const tk_charsmap *cm, const char *s, size_t n, const char **rep, size_t *rep_len, int first) {
    if (!cm) return 0;
    size_t best = 0;
    uint32_t pos = 0, best_val = 0;
    uint32_t unit = cm->units[0];
    pos ^= du_offset(unit);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        pos ^= c;
        if (pos >= cm->n_units) break;
        unit = cm->units[pos];
        if ((unit & ((1u << 31) | 0xFF)) != c) break;
        pos ^= du_offset(unit);
        if (pos >= cm->n_units) break;
        if ((unit >> 8) & 1) {
            best = i + 1; best_val = cm->units[pos] & ((1u << 31) - 1);
            if (first) break;
        }
    }
    if (!best || best_val >= cm->norm_len) return 0;
    *rep = cm->norm + best_val;
    *rep_len = strlen(*rep);
    return best;
}

void tk_charsmap_free(tk_charsmap *cm) {
    if (!cm) return;
    free(cm->units); free(cm->blob); free(cm);
}
