/* SentencePiece tokenizer.model: hand-written protobuf reader, normalizer, BPE and Unigram encode, decode. */
#include <stdlib.h>
#include <string.h>
#include "tokenizer/tok_internal.h"

typedef struct { const unsigned char *p, *end; } pb;

static int pb_varint(pb *r, uint64_t *v) {
    uint64_t x = 0;
    for (int s = 0; s < 64; s += 7) {
        if (r->p >= r->end) return -1;
        unsigned char b = *r->p++;
        x |= (uint64_t)(b & 0x7F) << s;
        if (!(b & 0x80)) { *v = x; return 0; }
    }
    return -1;
}

/* Reads one field: number, wire type, and for wire type 2 the payload; for 0 the value; 5 the 32 bits. */
static int pb_field(pb *r, uint32_t *num, int *wt, uint64_t *val, pb *sub) {
    uint64_t key;
    if (pb_varint(r, &key)) return -1;
    *num = (uint32_t)(key >> 3); *wt = (int)(key & 7);
    switch (*wt) {
    case 0: return pb_varint(r, val);
    case 1: if (r->end - r->p < 8) return -1; r->p += 8; return 0;
    case 5: if (r->end - r->p < 4) return -1;
        *val = (uint64_t)r->p[0] | (uint64_t)r->p[1] << 8 | (uint64_t)r->p[2] << 16 | (uint64_t)r->p[3] << 24;
        r->p += 4; return 0;
    case 2: {
        uint64_t n;
        if (pb_varint(r, &n) || n > (uint64_t)(r->end - r->p)) return -1;
        sub->p = r->p; sub->end = r->p + n; r->p += n; return 0;
    }
    }
    return -1;
}

static vc_status spm_piece(vc_tokenizer *t, pb m, int id, const char *path) {
    uint32_t num; int wt; uint64_t v = 0; pb sub = {0};
    const char *s = NULL; size_t sl = 0; float score = 0; int type = TK_SP_NORMAL;
    while (m.p < m.end) {
        if (pb_field(&m, &num, &wt, &v, &sub)) return vc_fail(VC_ERR_FORMAT, "%s: bad protobuf in piece %d", path, id);
        if (num == 1 && wt == 2) { s = (const char *)sub.p; sl = (size_t)(sub.end - sub.p); }
        else if (num == 2 && wt == 5) { uint32_t u = (uint32_t)v; memcpy(&score, &u, 4); }
        else if (num == 3 && wt == 0) type = (int)v;
    }
    if (!s) return vc_fail(VC_ERR_FORMAT, "%s: piece %d has no text", path, id);
    if (type < TK_SP_NORMAL || type > TK_SP_BYTE) return vc_fail(VC_ERR_FORMAT, "%s: piece %d has unknown type %d", path, id, type);
    vc_status st = tk_vocab_set(t, id, s, sl, 1);
    if (st) return st;
    t->score[id] = score; t->ptype[id] = (uint8_t)type;
    if (type == TK_SP_NORMAL) {
        if (score < t->min_score) t->min_score = score;
        if (score > t->max_score) t->max_score = score;
    }
    if ((int)sl > t->max_piece_len) t->max_piece_len = (int)sl;
    if (type == TK_SP_UNKNOWN) t->unk_id = id;
    if (type == TK_SP_CONTROL || type == TK_SP_UNKNOWN) t->is_special[id] = 1;
    if (type == TK_SP_BYTE && sl == 6 && !memcmp(s, "<0x", 3)) {
        unsigned b; if (sscanf(s + 3, "%2X", &b) == 1) t->byte_ids[b & 0xFF] = id;
    }
    return VC_OK;
}

static vc_status spm_trainer(vc_tokenizer *t, pb m, const char *path) {
    uint32_t num; int wt; uint64_t v = 0; pb sub = {0};
    while (m.p < m.end) {
        if (pb_field(&m, &num, &wt, &v, &sub)) return vc_fail(VC_ERR_FORMAT, "%s: bad protobuf in trainer_spec", path);
        if (num == 3 && wt == 0) t->model = v == 2 ? TK_M_BPE : v == 1 ? TK_M_UNIGRAM : -(int)v;
        else if (num == 35 && wt == 0) t->byte_fallback = v != 0;
        else if (num == 24 && wt == 0) t->treat_ws_suffix = v != 0;
        else if (num == 41 && wt == 0) t->bos_id = (int)(int32_t)v;
        else if (num == 42 && wt == 0) t->eos_id = (int)(int32_t)v;
        else if (num == 43 && wt == 0) t->pad_id = (int)(int32_t)v;
        else if (num == 44 && wt == 2) {
            free(t->unk_surface);
            t->unk_surface = malloc((size_t)(sub.end - sub.p) + 1);
            if (!t->unk_surface) return VC_ERR_NOMEM;
            memcpy(t->unk_surface, sub.p, (size_t)(sub.end - sub.p)); t->unk_surface[sub.end - sub.p] = 0;
        }
    }
    if (t->model <= 0) return vc_fail(VC_ERR_UNSUPPORTED, "%s: unsupported SentencePiece model type %d (only BPE and Unigram)", path, -t->model);
    return VC_OK;
}

static vc_status spm_normalizer(vc_tokenizer *t, pb m, const char *path) {
    uint32_t num; int wt; uint64_t v = 0; pb sub = {0};
    while (m.p < m.end) {
        if (pb_field(&m, &num, &wt, &v, &sub)) return vc_fail(VC_ERR_FORMAT, "%s: bad protobuf in normalizer_spec", path);
        if (num == 2 && wt == 2) {
            tk_charsmap_free(t->spm_cm); t->spm_cm = NULL;
            vc_status st = tk_charsmap_load((const char *)sub.p, (size_t)(sub.end - sub.p), &t->spm_cm, path);
            if (st) return st;
        } else if (num == 3 && wt == 0) t->add_dummy_prefix = v != 0;
        else if (num == 4 && wt == 0) t->remove_extra_ws = v != 0;
        else if (num == 5 && wt == 0) t->escape_ws = v != 0;
    }
    return VC_OK;
}

vc_status tk_load_spm(vc_tokenizer *t, const char *path) {
    char *data = NULL; size_t len;
    vc_status st = vc_read_file(path, &data, &len);
    if (st) return st;
    t->src = TK_SRC_SPM;
    t->add_dummy_prefix = t->remove_extra_ws = t->escape_ws = 1;
    t->bos_id = 1; t->eos_id = 2; t->pad_id = -1; t->unk_id = -1; t->model = TK_M_UNIGRAM;
    t->add_bos = 1;
    t->min_score = 1e300; t->max_score = -1e300;
    pb r = {(const unsigned char *)data, (const unsigned char *)data + len}, sub = {0};
    uint32_t num; int wt; uint64_t v = 0;
    int npieces = 0;
    while (r.p < r.end) { /* first pass: count pieces */
        if (pb_field(&r, &num, &wt, &v, &sub)) { st = vc_fail(VC_ERR_FORMAT, "%s: bad protobuf (truncated or corrupt)", path); goto out; }
        if (num == 1 && wt == 2) npieces++;
    }
    if (!npieces) { st = vc_fail(VC_ERR_MISSING, "%s: SentencePiece model has no pieces", path); goto out; }
    t->score = calloc((size_t)npieces, sizeof *t->score);
    t->ptype = calloc((size_t)npieces, 1);
    if (!t->score || !t->ptype) { st = vc_fail(VC_ERR_NOMEM, "out of memory"); goto out; }
    r.p = (const unsigned char *)data;
    int id = 0;
    while (r.p < r.end && !st) {
        pb_field(&r, &num, &wt, &v, &sub);
        if (wt != 2) continue;
        if (num == 1) st = spm_piece(t, sub, id++, path);
        else if (num == 2) st = spm_trainer(t, sub, path);
        else if (num == 3) st = spm_normalizer(t, sub, path);
    }
    if (st) goto out;
    if (t->min_score > t->max_score) t->min_score = t->max_score = 0;
    t->n_pieces = id;
    t->user_ids = malloc(((size_t)id + 1) * sizeof *t->user_ids);
    if (!t->user_ids) { st = vc_fail(VC_ERR_NOMEM, "out of memory"); goto out; }
    for (int i = 0; i < id; i++) if (t->ptype[i] == TK_SP_USER && t->tok_len[i]) t->user_ids[t->n_user++] = i;
    if (t->unk_id < 0) { st = vc_fail(VC_ERR_MISSING, "%s: SentencePiece model has no unknown piece", path); goto out; }
    if (!t->unk_surface) t->unk_surface = vc_strdup(" \xE2\x81\x87 ");
    if (t->bos_id >= t->n_tok) t->bos_id = -1;
    if (t->eos_id >= t->n_tok) t->eos_id = -1;
    if (t->pad_id >= t->n_tok) t->pad_id = -1;
out:
    free(data);
    return st;
}

/* ---- normalization (sentencepiece Normalizer::Normalize) ---- */
static size_t user_prefix(const vc_tokenizer *t, const char *s, size_t n) {
    size_t best = 0;
    for (int k = 0; k < t->n_user; k++) {
        int i = t->user_ids[k];
        if (t->tok_len[i] > n || t->tok_len[i] <= best) continue;
        if (!memcmp(s, t->tok[i], t->tok_len[i])) best = t->tok_len[i];
    }
    return best;
}

/* One normalization step at s: the replacement text and the bytes consumed. */
static size_t norm_prefix(const vc_tokenizer *t, int has_user, const char *s, size_t n, const char **rep, size_t *rl) {
    size_t u = has_user ? user_prefix(t, s, n) : 0;
    if (u) { *rep = s; *rl = u; return u; }
    size_t m = tk_charsmap_match(t->spm_cm, s, n, rep, rl);
    if (m) return m;
    int32_t cp;
    int l = tk_utf8_next((const unsigned char *)s, n, &cp);
    if (cp < 0) { *rep = "\xEF\xBF\xBD"; *rl = 3; return 1; }
    *rep = s; *rl = (size_t)l;
    return (size_t)l;
}

static int spm_normalize(const vc_tokenizer *t, const char *s, size_t n, tk_buf *out) {
    const char *ws = t->escape_ws ? "\xE2\x96\x81" : " ";
    size_t wl = strlen(ws);
    int has_user = t->n_user > 0;
    const char *rep; size_t rl;
    if (t->remove_extra_ws)
        while (n) {
            size_t c = norm_prefix(t, has_user, s, n, &rep, &rl);
            if (!(rl == 1 && rep[0] == ' ')) break;
            s += c; n -= c;
        }
    if (!n) return tk_buf_put(out, "", 0);
    if (!t->treat_ws_suffix && t->add_dummy_prefix && tk_buf_put(out, ws, wl)) return -1;
    int prev_space = t->remove_extra_ws;
    while (n) {
        size_t c = norm_prefix(t, has_user, s, n, &rep, &rl);
        if (prev_space) while (rl && rep[0] == ' ') { rep++; rl--; }
        if (rl) {
            for (size_t k = 0; k < rl; k++)
                if (rep[k] == ' ' && t->escape_ws ? tk_buf_put(out, ws, wl) : tk_buf_putc(out, rep[k])) return -1;
            prev_space = rep[rl - 1] == ' ';
        }
        s += c; n -= c;
        if (!t->remove_extra_ws) prev_space = 0;
    }
    if (t->remove_extra_ws) while (out->n >= wl && !memcmp(out->p + out->n - wl, ws, wl)) out->n -= wl;
    if (t->treat_ws_suffix && t->add_dummy_prefix && tk_buf_put(out, ws, wl)) return -1;
    return tk_buf_put(out, "", 0);
}

/* ---- BPE (sentencepiece bpe_model.cc): merge the best-scoring adjacent pair, leftmost on ties ---- */
typedef struct { size_t b, len; int prev, next; int freeze; } ssym;
typedef struct { float score; int left, right; size_t len; } spair;

static int pair_before(const spair *a, const spair *b) { return a->score != b->score ? a->score > b->score : a->left < b->left; }
static int spush(spair **h, size_t *n, size_t *cap, spair p) {
    if (*n == *cap) { size_t c = *cap ? *cap * 2 : 64; spair *x = realloc(*h, c * sizeof *x); if (!x) return -1; *h = x; *cap = c; }
    size_t i = (*n)++;
    (*h)[i] = p;
    while (i && pair_before(&(*h)[i], &(*h)[(i - 1) / 2])) { spair t = (*h)[i]; (*h)[i] = (*h)[(i - 1) / 2]; (*h)[(i - 1) / 2] = t; i = (i - 1) / 2; }
    return 0;
}
static spair spop(spair *h, size_t *n) {
    spair top = h[0];
    h[0] = h[--(*n)];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < *n && pair_before(&h[l], &h[m])) m = l;
        if (r < *n && pair_before(&h[r], &h[m])) m = r;
        if (m == i) break;
        spair t = h[i]; h[i] = h[m]; h[m] = t; i = m;
    }
    return top;
}

static int maybe_pair(const vc_tokenizer *t, const char *s, ssym *y, int l, int r, spair **h, size_t *n, size_t *cap) {
    if (l < 0 || r < 0 || y[l].freeze || y[r].freeze) return 0;
    size_t len = y[l].len + y[r].len;
    int32_t id = tk_smap_get(&t->vocab, s + y[l].b, len);
    if (id < 0) return 0;
    int ty = t->ptype[id];
    if (ty != TK_SP_NORMAL && ty != TK_SP_USER && ty != TK_SP_UNUSED) return 0;
    return spush(h, n, cap, (spair){t->score[id], l, r, len});
}

static int piece_id(const vc_tokenizer *t, const char *s, size_t n) {
    int32_t id = tk_smap_get(&t->vocab, s, n);
    return id < 0 ? t->unk_id : id;
}

int tk_spm_bpe(const vc_tokenizer *t, const char *s, size_t n, tk_ids *out) {
    int has_user = t->n_user > 0;
    ssym *y = malloc((n + 1) * sizeof *y);
    spair *h = NULL; size_t hn = 0, hc = 0;
    int k = 0, rc = -1;
    if (!y) return -1;
    for (size_t i = 0; i < n; k++) {
        size_t u = has_user ? user_prefix(t, s + i, n - i) : 0;
        int32_t cp;
        size_t l = u ? u : (size_t)tk_utf8_next((const unsigned char *)s + i, n - i, &cp);
        y[k] = (ssym){i, l, k - 1, i + l < n ? k + 1 : -1, u > 0};
        i += l;
    }
    for (int i = 1; i < k; i++) if (maybe_pair(t, s, y, i - 1, i, &h, &hn, &hc)) goto out;
    while (hn) {
        spair p = spop(h, &hn);
        if (!y[p.left].len || !y[p.right].len || y[p.left].len + y[p.right].len != p.len) continue;
        y[p.left].len = p.len;
        y[p.right].len = 0;
        y[p.left].next = y[p.right].next;
        if (y[p.right].next >= 0) y[y[p.right].next].prev = p.left;
        if (maybe_pair(t, s, y, y[p.left].prev, p.left, &h, &hn, &hc) ||
            maybe_pair(t, s, y, p.left, y[p.left].next, &h, &hn, &hc)) goto out;
    }
    rc = 0;
    for (int i = k ? 0 : -1; i >= 0 && !rc; i = y[i].next) {
        int32_t id = piece_id(t, s + y[i].b, y[i].len);
        if (id == t->unk_id && t->byte_fallback) {
            for (size_t j = 0; j < y[i].len && !rc; j++) {
                int32_t b = t->byte_ids[(unsigned char)s[y[i].b + j]];
                rc = tk_ids_push(out, b >= 0 ? b : t->unk_id);
            }
        } else rc = tk_ids_push(out, id);
    }
out:
    free(y); free(h);
    return rc;
}

int tk_spm_encode_text(const vc_tokenizer *t, const char *s, size_t n, tk_ids *out) {
    tk_buf nb = {0};
    int rc = spm_normalize(t, s, n, &nb);
    if (!rc && nb.n) rc = t->model == TK_M_BPE ? tk_spm_bpe(t, nb.p, nb.n, out) : tk_unigram_word(t, nb.p, nb.n, out);
    tk_buf_free(&nb);
    return rc;
}

/* ---- decode (SentencePieceProcessor::Decode) ---- */
static int hexv_spm(const char *piece) {
    unsigned b = 0;
    return sscanf(piece, "<0x%2X>", &b) == 1 ? (int)b : '?';
}

static int flush_spm_bytes(tk_buf *bytes, tk_buf *out) {
    for (size_t j = 0; j < bytes->n;) {
        int32_t cp;
        int l = tk_utf8_next((const unsigned char *)bytes->p + j, bytes->n - j, &cp);
        if (cp < 0 ? tk_buf_put(out, "\xEF\xBF\xBD", 3) : tk_buf_put(out, bytes->p + j, (size_t)l)) return -1;
        j += (size_t)l;
    }
    bytes->n = 0;
    return 0;
}

int tk_spm_decode(const vc_tokenizer *t, const int32_t *ids, size_t n, int skip, tk_buf *out) {
    tk_buf bytes = {0};
    int bos_ws = 1, rc = 0;
    int strip = !t->treat_ws_suffix && (t->add_dummy_prefix || t->remove_extra_ws);
    for (size_t i = 0; i < n && !rc; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= t->n_tok || !t->tok[id] || (skip && t->n_added && t->is_special[id])) continue;
        if (id >= t->n_pieces) { /* numbered after the model's pieces (ChatGLM3's): their text, as a piece */
            if ((rc = flush_spm_bytes(&bytes, out))) break;
            rc = tk_buf_put(out, t->tok[id], t->tok_len[id]);
            bos_ws = 0;
            continue;
        }
        int ty = t->ptype[id];
        if (ty == TK_SP_BYTE) { rc = tk_buf_putc(&bytes, (char)(hexv_spm(t->tok[id]))); bos_ws = 0; continue; }
        if ((rc = flush_spm_bytes(&bytes, out))) break;
        if (ty == TK_SP_CONTROL) continue;
        if (ty == TK_SP_UNKNOWN) { rc = tk_buf_put(out, t->unk_surface, strlen(t->unk_surface)); bos_ws = 0; continue; }
        const char *p = t->tok[id]; size_t l = t->tok_len[id];
        if (bos_ws && strip) while (l >= 3 && !memcmp(p, "\xE2\x96\x81", 3)) { p += 3; l -= 3; }
        bos_ws = 0;
        for (size_t j = 0; j < l && !rc;) {
            if (j + 3 <= l && !memcmp(p + j, "\xE2\x96\x81", 3)) { rc = tk_buf_putc(out, ' '); j += 3; }
            else rc = tk_buf_putc(out, p[j++]);
        }
    }
    if (!rc) rc = flush_spm_bytes(&bytes, out);
    if (!rc) rc = tk_buf_put(out, "", 0);
    tk_buf_free(&bytes);
    return rc;
}
