/* Models: byte-pair encoding as `tokenizers` BPE does it, WordPiece, and the Unigram Viterbi lattice. */
#include <stdlib.h>
#include <string.h>
#include "tokenizer/tok_internal.h"

typedef struct { int32_t id; int32_t prev, next; uint32_t len; } bsym;
typedef struct { int32_t rank, pos, out; } bmerge;

static int merge_less(const bmerge *a, const bmerge *b) { /* a has priority over b */
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}
static void heap_push(bmerge *h, size_t *n, bmerge m) {
    size_t i = (*n)++;
    h[i] = m;
    while (i && merge_less(&h[i], &h[(i - 1) / 2])) { bmerge t = h[i]; h[i] = h[(i - 1) / 2]; h[(i - 1) / 2] = t; i = (i - 1) / 2; }
}
static bmerge heap_pop(bmerge *h, size_t *n) {
    bmerge top = h[0];
    h[0] = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < *n && merge_less(&h[l], &h[m])) m = l;
        if (r < *n && merge_less(&h[r], &h[m])) m = r;
        if (m == i) break;
        bmerge t = h[i]; h[i] = h[m]; h[m] = t; i = m;
    }
    return top;
}

/* Builds the initial symbols of a word (chars, byte fallback, unk) as tokenizers' BPE::merge_word does. */
static size_t bpe_symbols(const vc_tokenizer *t, const char *w, size_t n, bsym *sym, tk_buf *tmp) {
    const unsigned char *u = (const unsigned char *)w;
    size_t k = 0;
    int32_t unk_id = -1; uint32_t unk_len = 0;
    size_t plen = t->cont_prefix ? strlen(t->cont_prefix) : 0, slen = t->eow_suffix ? strlen(t->eow_suffix) : 0;
    for (size_t i = 0; i < n;) {
        int32_t cp;
        size_t l = (size_t)tk_utf8_next(u + i, n - i, &cp);
        const char *s = w + i; size_t sl = l;
        if ((i > 0 && plen) || (i + l == n && slen)) {
            tmp->n = 0;
            if (i > 0 && plen) tk_buf_put(tmp, t->cont_prefix, plen);
            tk_buf_put(tmp, w + i, l);
            if (i + l == n && slen) tk_buf_put(tmp, t->eow_suffix, slen);
            if (tmp->p) { s = tmp->p; sl = tmp->n; }
        }
        int32_t id = tk_smap_get(&t->vocab, s, sl);
        if (id >= 0) {
            if (unk_id >= 0) { sym[k++] = (bsym){unk_id, 0, 0, unk_len}; unk_id = -1; }
            sym[k++] = (bsym){id, 0, 0, (uint32_t)l};
        } else {
            int ok = t->byte_fallback;
            for (size_t j = 0; j < sl && ok; j++) ok = t->byte_ids[(unsigned char)s[j]] >= 0;
            if (ok) {
                for (size_t j = 0; j < sl; j++) sym[k++] = (bsym){t->byte_ids[(unsigned char)s[j]], 0, 0, 1};
            } else if (t->unk_id >= 0) {
                if (unk_id >= 0 && t->fuse_unk) unk_len += (uint32_t)l;
                else {
                    if (unk_id >= 0) sym[k++] = (bsym){unk_id, 0, 0, unk_len};
                    unk_id = t->unk_id; unk_len = (uint32_t)l;
                }
            }
        }
        i += l;
    }
    if (unk_id >= 0) sym[k++] = (bsym){unk_id, 0, 0, unk_len};
    return k;
}

/* the merge of adjacent tokens a, b: from the merges list, or for a tiktoken model the token their bytes
 * make, ranked by its id (tiktoken merges any pair whose concatenation is a token) */
static int pair_get(const vc_tokenizer *t, int32_t a, int32_t b, int32_t *rank, int32_t *out) {
    if (!t->tiktoken) return tk_pmap_get(&t->merges, a, b, rank, out);
    uint32_t la = t->tok_len[a], lb = t->tok_len[b];
    char buf[256], *c = la + lb <= sizeof buf ? buf : malloc(la + lb);
    if (!c) return 0;
    memcpy(c, t->tok[a], la);
    memcpy(c + la, t->tok[b], lb);
    int32_t id = tk_smap_get(&t->vocab, c, la + lb);
    if (c != buf) free(c);
    if (id < 0) return 0;
    *rank = *out = id;
    return 1;
}

static int bpe_merge_all(const vc_tokenizer *t, bsym *sym, size_t k, bmerge *heap) {
    size_t hn = 0;
    for (size_t i = 0; i < k; i++) { sym[i].prev = (int32_t)i - 1; sym[i].next = i + 1 < k ? (int32_t)i + 1 : -1; }
    for (size_t i = 0; i + 1 < k; i++) {
        int32_t r, o;
        if (pair_get(t, sym[i].id, sym[i + 1].id, &r, &o)) heap_push(heap, &hn, (bmerge){r, (int32_t)i, o});
    }
    while (hn) {
        bmerge top = heap_pop(heap, &hn);
        bsym *a = &sym[top.pos];
        if (!a->len || a->next < 0) continue;
        bsym *b = &sym[a->next];
        int32_t r, o;
        if (!pair_get(t, a->id, b->id, &r, &o) || o != top.out) continue;
        a->id = top.out; a->len += b->len; b->len = 0;
        int32_t bn = b->next;
        a->next = bn;
        if (bn >= 0) sym[bn].prev = top.pos;
        if (a->prev >= 0 && pair_get(t, sym[a->prev].id, a->id, &r, &o))
            heap_push(heap, &hn, (bmerge){r, a->prev, o});
        if (bn >= 0 && pair_get(t, a->id, sym[bn].id, &r, &o)) heap_push(heap, &hn, (bmerge){r, top.pos, o});
    }
    return 0;
}

int tk_bpe_word(const vc_tokenizer *t, const char *w, size_t n, tk_ids *out) {
    if (!n) return 0;
    if (t->ignore_merges) {
        int32_t id = tk_smap_get(&t->vocab, w, n);
        if (id >= 0) return tk_ids_push(out, id);
    }
    int c = tk_cache_get(t, w, n, out);
    if (c) return c < 0 ? -1 : 0;
    size_t plen = t->cont_prefix ? strlen(t->cont_prefix) : 0, slen = t->eow_suffix ? strlen(t->eow_suffix) : 0;
    size_t cap = n * (1 + plen) + slen + 4; /* byte fallback yields one symbol per byte */
    bsym sbuf[256]; bmerge hbuf[768];
    bsym *sym = cap <= 256 ? sbuf : malloc(cap * sizeof *sym);
    bmerge *heap = 3 * cap <= 768 ? hbuf : malloc(3 * cap * sizeof *heap);
    tk_buf tmp = {0};
    int rc = -1;
    if (!sym || !heap) goto out;
    size_t k = bpe_symbols(t, w, n, sym, &tmp);
    bpe_merge_all(t, sym, k, heap);
    size_t start = out->n;
    rc = 0;
    for (size_t i = 0; i < k && !rc; i++) if (sym[i].len) rc = tk_ids_push(out, sym[i].id);
    if (!rc) tk_cache_put(t, w, n, out->n > start ? out->v + start : NULL, out->n - start);
out:
    if (sym != sbuf) free(sym);
    if (heap != hbuf) free(heap);
    tk_buf_free(&tmp);
    return rc;
}

/* WordPiece: greedy longest match first; the whole word becomes unk when any part fails. */
int tk_wordpiece_word(const vc_tokenizer *t, const char *w, size_t n, tk_ids *out) {
    const unsigned char *u = (const unsigned char *)w;
    size_t nchars = 0;
    for (size_t i = 0; i < n;) { int32_t cp; i += (size_t)tk_utf8_next(u + i, n - i, &cp); nchars++; }
    if (t->wp_max_chars > 0 && nchars > (size_t)t->wp_max_chars) return t->unk_id < 0 ? -2 : tk_ids_push(out, t->unk_id);
    size_t start = 0, first = out->n;
    const char *pre = t->cont_prefix ? t->cont_prefix : "##";
    size_t plen = strlen(pre);
    tk_buf tmp = {0};
    while (start < n) {
        size_t end = n;
        int32_t cur = -1;
        while (start < end) {
            tmp.n = 0;
            if (start > 0 && tk_buf_put(&tmp, pre, plen)) { tk_buf_free(&tmp); return -1; }
            if (tk_buf_put(&tmp, w + start, end - start)) { tk_buf_free(&tmp); return -1; }
            cur = tk_smap_get(&t->vocab, tmp.p, tmp.n);
            if (cur >= 0) break;
            end--;
            while (end > start && (u[end] & 0xC0) == 0x80) end--;
        }
        if (cur < 0) { out->n = first; tk_buf_free(&tmp); return t->unk_id < 0 ? -2 : tk_ids_push(out, t->unk_id); }
        if (tk_ids_push(out, cur)) { tk_buf_free(&tmp); return -1; }
        start = end;
    }
    tk_buf_free(&tmp);
    return 0;
}

/* Unigram Viterbi over s; SentencePiece rules when t->ptype is set (skip UNUSED, user-defined bonus).
 * Consecutive unknowns are fused. Byte fallback turns an unknown span into <0xNN> pieces. */
int tk_unigram_word(const vc_tokenizer *t, const char *s, size_t n, tk_ids *out) {
    if (!n) return 0;
    const unsigned char *u = (const unsigned char *)s;
    double *best = malloc((n + 1) * sizeof *best);
    int32_t *from = malloc((n + 1) * sizeof *from), *bid = malloc((n + 1) * sizeof *bid);
    int rc = -1;
    if (!best || !from || !bid) goto out;
    for (size_t i = 0; i <= n; i++) { from[i] = -1; best[i] = 0; bid[i] = -1; }
    from[0] = 0;
    double unk_score = t->ptype ? (double)((float)t->min_score - 10.0f) : t->min_score - 10.0; /* sentencepiece: float */
    for (size_t st = 0; st < n;) {
        int32_t cp;
        size_t mblen = (size_t)tk_utf8_next(u + st, n - st, &cp);
        if (from[st] < 0) { st += mblen; continue; }
        int single = 0;
        size_t end = st;
        for (int nc = 0; end < n; nc++) {
            end += (size_t)tk_utf8_next(u + end, n - end, &cp);
            if (end - st > (size_t)t->max_piece_len) break;
            int32_t id = tk_smap_get(&t->vocab, s + st, end - st);
            if (id < 0) continue;
            double sc;
            if (t->ptype) {
                if (t->ptype[id] == TK_SP_UNUSED || t->ptype[id] == TK_SP_CONTROL || t->ptype[id] == TK_SP_UNKNOWN ||
                    t->ptype[id] == TK_SP_BYTE) continue;
                sc = t->ptype[id] == TK_SP_USER ? (float)((double)(end - st) * t->max_score - 0.1) : t->score[id];
            } else sc = t->score[id];
            double cand = best[st] + sc;
            if (t->ptype) cand = (float)cand; /* sentencepiece accumulates path scores in float */
            if (from[end] < 0 || cand > best[end]) { best[end] = cand; from[end] = (int32_t)st; bid[end] = id; }
            if (end - st == mblen) single = 1;
        }
        if (!single) {
            double cand = best[st] + unk_score;
            if (t->ptype) cand = (float)cand;
            if (from[st + mblen] < 0 || cand > best[st + mblen]) { best[st + mblen] = cand; from[st + mblen] = (int32_t)st; bid[st + mblen] = t->unk_id; }
        }
        st += mblen;
    }
    /* backtrack into (start,end,id) triples stored in reverse */
    size_t cnt = 0;
    for (size_t e = n; e > 0; e = (size_t)from[e]) cnt++;
    size_t *sb = malloc((cnt + 1) * sizeof *sb), *se = malloc((cnt + 1) * sizeof *se);
    int32_t *sid = malloc((cnt + 1) * sizeof *sid);
    if (!sb || !se || !sid) { free(sb); free(se); free(sid); goto out; }
    size_t k = cnt;
    for (size_t e = n; e > 0; e = (size_t)from[e]) { k--; sb[k] = (size_t)from[e]; se[k] = e; sid[k] = bid[e]; }
    size_t m = 0; /* fuse consecutive unknowns */
    for (size_t i = 0; i < cnt; i++) {
        if (m && sid[i] == t->unk_id && sid[m - 1] == t->unk_id) { se[m - 1] = se[i]; continue; }
        sb[m] = sb[i]; se[m] = se[i]; sid[m++] = sid[i];
    }
    rc = 0;
    for (size_t i = 0; i < m && !rc; i++) {
        if (sid[i] == t->unk_id && t->byte_fallback) {
            for (size_t j = sb[i]; j < se[i] && !rc; j++) {
                int32_t b = t->byte_ids[u[j]];
                rc = b >= 0 ? tk_ids_push(out, b) : t->unk_id >= 0 ? tk_ids_push(out, t->unk_id) : -2;
            }
        } else rc = sid[i] >= 0 ? tk_ids_push(out, sid[i]) : -2;
    }
    free(sb); free(se); free(sid);
out:
    free(best); free(from); free(bid);
    return rc;
}
