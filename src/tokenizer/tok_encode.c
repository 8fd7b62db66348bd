/* tokenizer.json pipeline: added tokens, normalizer, pre-tokenizer, model, post-processor; decoders. */
#include <stdlib.h>
#include <string.h>
#include "tokenizer/tok_internal.h"

/* Longest added token (of the wanted `normalized` kind) matching at s[i]; returns its index or -1 and sets
 * *matched to the matched length (the normalized content's length for normalized tokens). */
static int added_at(const vc_tokenizer *t, const char *s, size_t n, size_t i, int normalized, size_t *matched) {
    if (!t->added_first[normalized][(unsigned char)s[i]]) return -1;
    for (int q = 0; q < t->n_added_lens[normalized]; q++) {
        size_t len = t->added_lens[normalized][q];
        if (len > n - i) continue;
        int k = tk_smap_get(&t->added_kind[normalized], s + i, len);
        if (k < 0) continue;
        *matched = len;
        return k;
    }
    return -1;
}

/* The code point ending at s[i] (i > 0); *at receives where it starts. */
static int32_t cp_before(const char *s, size_t i, size_t *at) {
    size_t k = i - 1;
    while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
    int32_t cp = -1;
    tk_utf8_next((const unsigned char *)s + k, i - k, &cp);
    *at = k;
    return cp;
}

/* single_word: no word character (Unicode \\w) touches the match on either side. */
static int is_single_word(const char *s, size_t n, size_t b, size_t e) {
    int32_t cp = -1;
    size_t at;
    if (b > 0 && tk_is_word_cp(cp_before(s, b, &at))) return 0;
    if (e < n) { tk_utf8_next((const unsigned char *)s + e, n - e, &cp); if (tk_is_word_cp(cp)) return 0; }
    return 1;
}

/* lstrip / rstrip widen a match over Unicode white space. */
static size_t space_back(const char *s, size_t b) {
    size_t at;
    while (b > 0 && tk_is_space_cp(cp_before(s, b, &at))) b = at;
    return b;
}
static size_t space_fwd(const char *s, size_t n, size_t e) {
    while (e < n) { int32_t cp = -1; int l = tk_utf8_next((const unsigned char *)s + e, n - e, &cp); if (!tk_is_space_cp(cp)) break; e += (size_t)l; }
    return e;
}

/* Scratch buffers reused across the segments of one encode call. */
typedef struct { tk_pieces ps, tmp; tk_buf nb; tk_ids *out; } enc_ctx;
typedef int (*seg_fn)(const vc_tokenizer *t, enc_ctx *c, const char *s, size_t n, uint8_t flag);

/* Splits s around added tokens of one kind: tokens go to `out` as ids, the text between goes to `fn`. As tokenizers'
 * AddedVocabulary finds them: the leftmost-longest matches, none overlapping another (a match refused as not a
 * single word still consumes its text); lstrip widens a match back to the previous one's end at most, rstrip widens
 * it forward, and a later match inside that widening still counts (its token repeated, as tokenizers does). */
static int split_added(const vc_tokenizer *t, enc_ctx *c, const char *s, size_t n, int normalized, uint8_t flag,
                       size_t head, seg_fn fn) {
    size_t off = 0, i = 0;
    while (i < n) {
        size_t matched = 0;
        int k = t->n_added ? added_at(t, s, n, i, normalized, &matched) : -1;
        if (k < 0) { i++; continue; }
        const tk_added *a = &t->added[k];
        size_t b = i, e = i + matched;
        i = e;
        if (a->single_word && !is_single_word(s, n, b, e)) continue;
        if (a->lstrip) { size_t nb = space_back(s, b); b = nb > off ? nb : off; }
        if (a->rstrip) e = space_fwd(s, n, e);
        int r = off < b ? fn(t, c, s + off, b - off, off < head ? flag : 0) : 0;
        if (r) return r;
        if (e > b && tk_ids_push(c->out, a->id)) return -1; /* a span lstrip clamped to nothing: dropped, as tokenizers drops empty splits */
        off = e;
    }
    if (n > off) return fn(t, c, s + off, n - off, off < head ? flag : 0);
    return 0;
}

static int model_words(const vc_tokenizer *t, enc_ctx *c, const char *s, size_t n, uint8_t flag) {
    tk_pieces_clear(&c->ps);
    int rc = tk_pieces_add(&c->ps, s, n, flag);
    if (!rc) rc = tk_pretok_apply(t->pre, &c->ps, &c->tmp);
    for (size_t i = 0; i < c->ps.n && !rc; i++) {
        const char *w = TK_PIECE(&c->ps, i);
        if (t->model == TK_M_BPE) rc = tk_bpe_word(t, w, c->ps.len[i], c->out);
        else if (t->model == TK_M_UNIGRAM) rc = tk_unigram_word(t, w, c->ps.len[i], c->out);
        else if (t->model == TK_M_WORDLEVEL) { /* the whole piece, else the unknown token */
            int32_t id = tk_smap_get(&t->vocab, w, c->ps.len[i]);
            rc = id >= 0 ? tk_ids_push(c->out, id) : t->unk_id >= 0 ? tk_ids_push(c->out, t->unk_id) : -2;
        }
        else rc = tk_wordpiece_word(t, w, c->ps.len[i], c->out);
    }
    return rc;
}

/* How many leading bytes of the normalized text s -> nb tokenizers aligns to the first character of s (a piece that
 * starts there keeps the "first piece" flag: Metaspace's prepend_scheme "first" asks for original offset 0). For the
 * first k = 1, 2, 3 characters of s: their own normalized form when nb begins with it (NFKC, Prepend; k > 1 for a
 * composition with what follows); none when it is empty and the rest of s normalizes to all of nb (Strip, Replace
 * dropping them); else, as a last resort, nb's first character. */
static size_t norm_head(const vc_tokenizer *t, const char *s, size_t n, const tk_buf *nb) {
    int32_t cp;
    size_t l = 0, h = (size_t)tk_utf8_next((const unsigned char *)nb->p, nb->n, &cp);
    int found = 0;
    tk_buf o = {0};
    for (int k = 0; k < 3 && l < n && !found; k++) {
        l += (size_t)tk_utf8_next((const unsigned char *)s + l, n - l, &cp);
        if (tk_norm_apply(t->norm, s, l, &o)) break;
        if (o.n && o.n <= nb->n && !memcmp(o.p, nb->p, o.n)) h = o.n, found = 1;
        else if (!o.n && !tk_norm_apply(t->norm, s + l, n - l, &o) && o.n == nb->n && !memcmp(o.p, nb->p, o.n)) h = 0, found = 1;
    }
    tk_buf_free(&o);
    return h;
}

static int normalized_segment(const vc_tokenizer *t, enc_ctx *c, const char *s, size_t n, uint8_t flag) {
    int rc = tk_norm_apply(t->norm, s, n, &c->nb);
    /* the normalized text must outlive the nested calls: move it out of the scratch buffer */
    tk_buf nb = c->nb;
    c->nb = (tk_buf){0};
    size_t head = flag && t->norm && t->first_flag && n && nb.n ? norm_head(t, s, n, &nb) : 1;
    if (!rc) rc = split_added(t, c, nb.p, nb.n, 1, flag, head, model_words);
    if (!c->nb.p) c->nb = nb; else tk_buf_free(&nb);
    return rc;
}

int tk_json_encode(const vc_tokenizer *t, const char *s, size_t n, tk_ids *out) {
    enc_ctx c = {.out = out};
    int rc = split_added(t, &c, s, n, 0, 1, 1, normalized_segment);
    tk_pieces_free(&c.ps); tk_pieces_free(&c.tmp); tk_buf_free(&c.nb);
    return rc;
}

static int spm_segment(const vc_tokenizer *t, enc_ctx *c, const char *s, size_t n, uint8_t flag) {
    (void)flag;
    return tk_spm_encode_text(t, s, n, c->out);
}

/* SentencePiece with added tokens (from tokenizer_config.json): transformers' slow tokenizers split them out of
 * the raw text, then SentencePiece encodes each piece between them on its own (each with its dummy prefix). */
int tk_spm_encode(const vc_tokenizer *t, const char *s, size_t n, tk_ids *out) {
    if (!t->n_added) return tk_spm_encode_text(t, s, n, out);
    enc_ctx c = {.out = out};
    int rc = split_added(t, &c, s, n, 0, 1, 1, spm_segment);
    tk_pieces_free(&c.ps); tk_pieces_free(&c.tmp); tk_buf_free(&c.nb);
    return rc;
}

/* ---- decoders: each step maps a list of token strings to a new list ---- */
static int dec_bytelevel(tk_pieces *in, tk_pieces *out) {
    tk_buf raw = {0}, res = {0};
    int rc = 0;
    for (size_t i = 0; i < in->n && !rc; i++) {
        const unsigned char *u = (const unsigned char *)TK_PIECE(in, i);
        size_t n = in->len[i], start = raw.n;
        int ok = 1;
        for (size_t j = 0; j < n && ok && !rc;) {
            int32_t cp; int l = tk_utf8_next(u + j, n - j, &cp);
            int b = tk_bytelevel_byte(cp);
            if (b < 0) ok = 0; else rc = tk_buf_putc(&raw, (char)b);
            j += (size_t)l;
        }
        if (!ok) { raw.n = start; rc = tk_buf_put(&raw, u, n); }
    }
    if (!rc) rc = tk_utf8_lossy(&res, raw.p ? raw.p : "", raw.n);
    if (!rc) rc = tk_pieces_add(out, res.p ? res.p : "", res.n, 0);
    tk_buf_free(&raw); tk_buf_free(&res);
    return rc;
}

static int hexv(char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1; }

static int flush_bytes(tk_buf *bytes, tk_pieces *out) {
    int rc = 0;
    if (!bytes->n) return 0;
    int valid = 1;
    for (size_t j = 0; j < bytes->n && valid;) { int32_t cp; int l = tk_utf8_next((unsigned char *)bytes->p + j, bytes->n - j, &cp); valid = cp >= 0; j += (size_t)l; }
    if (valid) rc = tk_pieces_add(out, bytes->p, bytes->n, 0);
    else for (size_t j = 0; j < bytes->n && !rc; j++) rc = tk_pieces_add(out, "\xEF\xBF\xBD", 3, 0);
    bytes->n = 0;
    return rc;
}

static int dec_bytefallback(tk_pieces *in, tk_pieces *out) {
    tk_buf bytes = {0};
    int rc = 0;
    for (size_t i = 0; i < in->n && !rc; i++) {
        const char *p = TK_PIECE(in, i);
        if (in->len[i] == 6 && !memcmp(p, "<0x", 3) && p[5] == '>' && hexv(p[3]) >= 0 && hexv(p[4]) >= 0) {
            rc = tk_buf_putc(&bytes, (char)(hexv(p[3]) * 16 + hexv(p[4])));
            continue;
        }
        rc = flush_bytes(&bytes, out);
        if (!rc) rc = tk_pieces_add(out, p, in->len[i], 0);
    }
    if (!rc) rc = flush_bytes(&bytes, out);
    tk_buf_free(&bytes);
    return rc;
}

/* Each rule (from, to) replaced over the whole text in turn, as Python's chained str.replace. */
static int replace_rules(tk_buf *m, const char *const (*rules)[2], size_t n_rules) {
    tk_buf o = {0};
    for (size_t r = 0; r < n_rules; r++) {
        size_t fl = strlen(rules[r][0]), tl = strlen(rules[r][1]);
        o.n = 0;
        if (tk_buf_put(&o, "", 0)) return -1;
        for (size_t j = 0; j < m->n;) {
            if (j + fl <= m->n && !memcmp(m->p + j, rules[r][0], fl)) { if (tk_buf_put(&o, rules[r][1], tl)) { tk_buf_free(&o); return -1; } j += fl; }
            else if (tk_buf_putc(&o, m->p[j++])) { tk_buf_free(&o); return -1; }
        }
        tk_buf t = *m; *m = o; o = t;
    }
    tk_buf_free(&o);
    return 0;
}

/* tokenizers' decoders::wordpiece::cleanup, applied in the same order */
static int wordpiece_cleanup(tk_buf *m) {
    static const char *const rules[][2] = {{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
                                           {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    return replace_rules(m, rules, sizeof rules / sizeof rules[0]);
}

/* transformers' PreTrainedTokenizerBase.clean_up_tokenization (no "do not" rule) */
int tk_clean_up_spaces(tk_buf *m) {
    static const char *const rules[][2] = {{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
                                           {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    return replace_rules(m, rules, sizeof rules / sizeof rules[0]);
}

/* Appends p[0..n) to m with every occurrence of `from` (non-empty) replaced by `to`. */
static int put_replaced(tk_buf *m, const char *p, size_t n, const char *from, const char *to) {
    size_t fl = strlen(from), tl = strlen(to);
    int rc = tk_buf_put(m, "", 0);
    for (size_t j = 0; j < n && !rc;) {
        if (fl && j + fl <= n && !memcmp(p + j, from, fl)) { rc = tk_buf_put(m, to, tl); j += fl; }
        else rc = tk_buf_putc(m, p[j++]);
    }
    return rc;
}

/* CTC (tokenizers' decoders::ctc): repeated tokens collapsed, the pad token removed, then with cleanup the WordPiece
 * cleanup and the word delimiter as a space; tokens left empty dropped. a = pad, b = word delimiter. */
static int dec_ctc(const tk_dec *d, tk_pieces *in, tk_pieces *out) {
    tk_buf m = {0}, c = {0};
    int rc = 0;
    for (size_t i = 0; i < in->n && !rc; i++) {
        const char *p = TK_PIECE(in, i);
        if (i > 0 && in->len[i] == in->len[i - 1] && !memcmp(p, TK_PIECE(in, i - 1), in->len[i])) continue;
        m.n = 0;
        rc = put_replaced(&m, p, in->len[i], d->a, "");
        if (!rc && d->cleanup) { rc = wordpiece_cleanup(&m); c.n = 0; if (!rc) rc = put_replaced(&c, m.p, m.n, d->b, " "); tk_buf t = m; m = c; c = t; }
        if (!rc && m.n) rc = tk_pieces_add(out, m.p, m.n, 0);
    }
    tk_buf_free(&m); tk_buf_free(&c);
    return rc;
}

static int dec_step(const tk_dec *d, tk_pieces *in, tk_pieces *out) {
    tk_buf m = {0};
    int rc = 0;
    if (d->type == TK_D_BYTELEVEL) return dec_bytelevel(in, out);
    if (d->type == TK_D_CTC) return dec_ctc(d, in, out);
    if (d->type == TK_D_BYTEFALLBACK) return dec_bytefallback(in, out);
    if (d->type == TK_D_FUSE) {
        for (size_t i = 0; i < in->n && !rc; i++) rc = tk_buf_put(&m, TK_PIECE(in, i), in->len[i]);
        if (!rc) rc = tk_pieces_add(out, m.p ? m.p : "", m.n, 0);
        tk_buf_free(&m);
        return rc;
    }
    size_t al = d->a ? strlen(d->a) : 0;
    for (size_t i = 0; i < in->n && !rc; i++) {
        const char *p = TK_PIECE(in, i);
        size_t n = in->len[i];
        m.n = 0;
        if (d->type == TK_D_REPLACE || d->type == TK_D_METASPACE) {
            int drop = d->type == TK_D_METASPACE && i == 0 && d->prepend_scheme != TK_PS_NEVER;
            rc = put_replaced(&m, p, n, d->a, d->type == TK_D_REPLACE ? d->b : drop ? "" : " ");
        } else if (d->type == TK_D_BPE) { /* the suffix ends a word: a space, none after the last token */
            rc = put_replaced(&m, p, n, d->a, i + 1 == in->n ? "" : " ");
        } else if (d->type == TK_D_STRIP) {
            size_t b = 0, e = n;
            for (int k = 0; k < d->start && al && b + al <= e && !memcmp(p + b, d->a, al); k++) b += al;
            for (int k = 0; k < d->stop && al && e >= b + al && !memcmp(p + e - al, d->a, al); k++) e -= al;
            rc = tk_buf_put(&m, p + b, e - b);
        } else if (d->type == TK_D_WORDPIECE) {
            if (i > 0) {
                if (n >= al && !memcmp(p, d->a, al)) { p += al; n -= al; }
                else rc = tk_buf_putc(&m, ' ');
            }
            if (!rc) rc = tk_buf_put(&m, p, n);
            if (!rc && d->cleanup) rc = wordpiece_cleanup(&m);
        } else rc = tk_buf_put(&m, p, n);
        if (!rc) rc = tk_pieces_add(out, m.p ? m.p : "", m.n, 0);
    }
    tk_buf_free(&m);
    return rc;
}

static int dec_apply(const tk_dec *d, tk_pieces *cur, tk_pieces *tmp) {
    if (d->type == TK_D_SEQ) {
        for (int i = 0; i < d->n_kids; i++) if (dec_apply(d->kids[i], cur, tmp)) return -1;
        return 0;
    }
    tk_pieces_clear(tmp);
    if (dec_step(d, cur, tmp)) return -1;
    tk_pieces t = *cur; *cur = *tmp; *tmp = t;
    return 0;
}

int tk_json_decode(const vc_tokenizer *t, const int32_t *ids, size_t n, int skip, tk_buf *out) {
    tk_pieces cur = {0}, tmp = {0};
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= t->n_tok || !t->tok[id]) continue;
        if (skip && t->dec_skip[id]) continue;
        rc = tk_pieces_add(&cur, t->tok[id], t->tok_len[id], 0);
    }
    if (!rc && t->dec) rc = dec_apply(t->dec, &cur, &tmp);
    for (size_t i = 0; i < cur.n && !rc; i++) {
        if (!t->dec && i > 0) rc = tk_buf_putc(out, ' ');
        if (!rc) rc = tk_buf_put(out, TK_PIECE(&cur, i), cur.len[i]);
    }
    if (!rc) rc = tk_buf_put(out, "", 0);
    tk_pieces_free(&cur); tk_pieces_free(&tmp);
    return rc;
}

void tk_dec_free(tk_dec *d) {
    if (!d) return;
    for (int i = 0; i < d->n_kids; i++) tk_dec_free(d->kids[i]);
    free(d->kids); free(d->a); free(d->b); free(d);
}
