/* Tokenizer helpers: growable buffers, UTF-8, hash maps, the per-word cache. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>
#include "tokenizer/tok_internal.h"

int tk_buf_put(tk_buf *b, const void *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return -1;
        b->p = p; b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return 0;
}
int tk_buf_putc(tk_buf *b, char c) { return tk_buf_put(b, &c, 1); }
void tk_buf_free(tk_buf *b) { free(b->p); b->p = NULL; b->n = b->cap = 0; }

int tk_ids_push(tk_ids *a, int32_t id) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 32;
        int32_t *v = realloc(a->v, cap * sizeof *v);
        if (!v) return -1;
        a->v = v; a->cap = cap;
    }
    a->v[a->n++] = id;
    return 0;
}

int tk_pieces_add(tk_pieces *p, const char *s, size_t n, uint8_t flag) {
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 16;
        size_t *o = realloc(p->off, cap * sizeof *o);
        if (!o) return -1;
        p->off = o;
        size_t *l = realloc(p->len, cap * sizeof *l);
        if (!l) return -1;
        p->len = l;
        uint8_t *f = realloc(p->flag, cap);
        if (!f) return -1;
        p->flag = f;
        p->cap = cap;
    }
    p->off[p->n] = p->buf.n;
    p->len[p->n] = n;
    p->flag[p->n] = flag;
    if (tk_buf_put(&p->buf, s, n)) return -1;
    p->n++;
    return 0;
}
void tk_pieces_clear(tk_pieces *p) { p->n = 0; p->buf.n = 0; }
void tk_pieces_free(tk_pieces *p) {
    tk_buf_free(&p->buf); free(p->off); free(p->len); free(p->flag);
    memset(p, 0, sizeof *p);
}

int tk_utf8_next(const unsigned char *s, size_t n, int32_t *cp) {
    unsigned c = s[0];
    int len; uint32_t v; unsigned lo = 0x80, hi = 0xBF;
    if (c < 0x80) { *cp = (int32_t)c; return 1; }
    if (c >= 0xC2 && c <= 0xDF) { len = 2; v = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; v = c & 0x0F; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; v = c & 0x07; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    else { *cp = -1; return 1; }
    if ((size_t)len > n) { *cp = -1; return 1; }
    for (int i = 1; i < len; i++) {
        unsigned d = s[i];
        if (d < lo || d > hi) { *cp = -1; return 1; }
        lo = 0x80; hi = 0xBF;
        v = (v << 6) | (d & 0x3F);
    }
    *cp = (int32_t)v;
    return len;
}

int tk_utf8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) { out[0] = (char)(0xC0 | (cp >> 6)); out[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12)); out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F)); return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18)); out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the maximal prefix of a valid sequence at s (>= 1): what from_utf8_lossy replaces by one U+FFFD. */
static size_t utf8_invalid_span(const unsigned char *s, size_t n) {
    unsigned c = s[0], lo = 0x80, hi = 0xBF;
    size_t len;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    else return 1;
    size_t i = 1;
    while (i < len && i < n && s[i] >= lo && s[i] <= hi) { i++; lo = 0x80; hi = 0xBF; }
    return i;
}

int tk_utf8_lossy(tk_buf *out, const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        int32_t cp;
        int l = tk_utf8_next(u + i, n - i, &cp);
        if (cp >= 0) { if (tk_buf_put(out, s + i, (size_t)l)) return -1; i += (size_t)l; continue; }
        if (tk_buf_put(out, "\xEF\xBF\xBD", 3)) return -1;
        i += utf8_invalid_span(u + i, n - i);
    }
    return 0;
}

int tk_is_space_cp(int32_t c) {
    return (c >= 9 && c <= 13) || c == 32 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* Unicode \\w as Rust's regex crate has it: Alphabetic (letters, letter numbers and the Other_Alphabetic marks and
 * circled / squared Latin letters), marks, decimal digits, connector punctuation and the joiners. */
int tk_is_word_cp(int32_t c) {
    if (c < 128) return c == '_' || (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z');
    if (c == 0x200C || c == 0x200D || (c >= 0x24B6 && c <= 0x24E9) || (c >= 0x1F130 && c <= 0x1F149) ||
        (c >= 0x1F150 && c <= 0x1F169) || (c >= 0x1F170 && c <= 0x1F189)) return 1;
    switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_PC: return 1;
    default: return 0;
    }
}

/* ---- hash maps ---- */
static uint32_t hash_bytes(const char *k, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) { h ^= (unsigned char)k[i]; h *= 1099511628211ULL; }
    return (uint32_t)(h ^ (h >> 32)) | 1u;
}

static int smap_grow_to(tk_smap *m, uint32_t cap) {
    tk_ent *e = calloc(cap, sizeof *e);
    if (!e) return -1;
    for (uint32_t i = 0; i < m->cap; i++) {
        if (!m->e[i].h) continue;
        uint32_t j = m->e[i].h & (cap - 1);
        while (e[j].h) j = (j + 1) & (cap - 1);
        e[j] = m->e[i];
    }
    free(m->e);
    m->e = e; m->cap = cap;
    return 0;
}

/* the capacity a map of n entries keeps (under 3/4 full) */
static uint64_t smap_cap_for(size_t n) {
    uint64_t cap = 64;
    while ((n + 1) * 4 >= cap * 3) cap *= 2;
    return cap;
}

int tk_smap_reserve(tk_smap *m, size_t n) {
    uint64_t cap = smap_cap_for(n);
    if (cap > UINT32_MAX / 2) return -1;
    return cap > m->cap ? smap_grow_to(m, (uint32_t)cap) : 0;
}

/* a key's copy, NUL-terminated, in the map's blocks: a new block (the first previous one's address in its first bytes,
 * for tk_smap_free) when the current one is full */
#define SMAP_BLOCK ((size_t)64 << 10)
static char *smap_key_copy(tk_smap *m, const char *k, size_t klen) {
    size_t need = klen + 1;
    if (!m->block || m->block_used + need > m->block_cap) {
        size_t head = sizeof(char *), cap = need + head > SMAP_BLOCK ? need + head : SMAP_BLOCK;
        char *b = malloc(cap);
        if (!b) return NULL;
        memcpy(b, &m->block, sizeof(char *));
        m->block = b; m->block_used = head; m->block_cap = cap;
    }
    char *c = m->block + m->block_used;
    memcpy(c, k, klen);
    c[klen] = 0;
    m->block_used += need;
    return c;
}

int tk_smap_put(tk_smap *m, const char *k, size_t klen, int32_t v) {
    if ((m->n + 1) * 4 >= m->cap * 3 && smap_grow_to(m, m->cap ? m->cap * 2 : 64)) return -1;
    uint32_t h = hash_bytes(k, klen), j = h & (m->cap - 1);
    while (m->e[j].h) {
        if (m->e[j].h == h && m->e[j].klen == klen && !memcmp(m->e[j].k, k, klen)) { m->e[j].v = v; return 0; }
        j = (j + 1) & (m->cap - 1);
    }
    char *c = smap_key_copy(m, k, klen);
    if (!c) return -1;
    m->e[j].k = c; m->e[j].klen = (uint32_t)klen; m->e[j].h = h; m->e[j].v = v;
    m->n++;
    return 0;
}

int32_t tk_smap_get(const tk_smap *m, const char *k, size_t klen) {
    if (!m->cap) return -1;
    uint32_t h = hash_bytes(k, klen), j = h & (m->cap - 1);
    while (m->e[j].h) {
        if (m->e[j].h == h && m->e[j].klen == klen && !memcmp(m->e[j].k, k, klen)) return m->e[j].v;
        j = (j + 1) & (m->cap - 1);
    }
    return -1;
}

void tk_smap_free(tk_smap *m) {
    for (char *b = m->block, *prev; b; b = prev) {
        memcpy(&prev, b, sizeof prev);
        free(b);
    }
    free(m->e);
    memset(m, 0, sizeof *m);
}

static uint32_t hash_pair(uint64_t k) {
    k ^= k >> 33; k *= 0xff51afd7ed558ccdULL; k ^= k >> 33;
    return (uint32_t)k;
}

static int pmap_grow_to(tk_pmap *m, uint32_t cap) {
    uint64_t *k = malloc(cap * sizeof *k);
    int32_t *r = malloc(cap * sizeof *r), *o = malloc(cap * sizeof *o);
    if (!k || !r || !o) { free(k); free(r); free(o); return -1; }
    memset(k, 0xff, cap * sizeof *k);
    for (uint32_t i = 0; i < m->cap; i++) {
        if (m->k[i] == UINT64_MAX) continue;
        uint32_t j = hash_pair(m->k[i]) & (cap - 1);
        while (k[j] != UINT64_MAX) j = (j + 1) & (cap - 1);
        k[j] = m->k[i]; r[j] = m->rank[i]; o[j] = m->out[i];
    }
    free(m->k); free(m->rank); free(m->out);
    m->k = k; m->rank = r; m->out = o; m->cap = cap;
    return 0;
}

int tk_pmap_reserve(tk_pmap *m, size_t n) {
    uint64_t cap = 1024;
    while ((n + 1) * 2 >= cap) cap *= 2;
    if (cap > UINT32_MAX / 2) return -1;
    return cap > m->cap ? pmap_grow_to(m, (uint32_t)cap) : 0;
}

int tk_pmap_put(tk_pmap *m, int32_t a, int32_t b, int32_t rank, int32_t out) {
    if ((m->n + 1) * 2 >= m->cap && pmap_grow_to(m, m->cap ? m->cap * 2 : 1024)) return -1;
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    uint32_t j = hash_pair(key) & (m->cap - 1);
    while (m->k[j] != UINT64_MAX) {
        if (m->k[j] == key) return 0; /* first merge of a pair wins */
        j = (j + 1) & (m->cap - 1);
    }
    m->k[j] = key; m->rank[j] = rank; m->out[j] = out; m->n++;
    return 0;
}

int tk_pmap_get(const tk_pmap *m, int32_t a, int32_t b, int32_t *rank, int32_t *out) {
    if (!m->cap) return 0;
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    uint32_t j = hash_pair(key) & (m->cap - 1);
    while (m->k[j] != UINT64_MAX) {
        if (m->k[j] == key) { *rank = m->rank[j]; *out = m->out[j]; return 1; }
        j = (j + 1) & (m->cap - 1);
    }
    return 0;
}

void tk_pmap_free(tk_pmap *m) { free(m->k); free(m->rank); free(m->out); memset(m, 0, sizeof *m); }

/* ---- word cache: sharded, each shard under its own mutex; stops growing when full ---- */
#define TK_CACHE_PER_SHARD 4096
#define TK_CACHE_MAX_WORD 128

int tk_cache_get(const vc_tokenizer *t, const char *w, size_t n, tk_ids *out) {
    if (!t->cache || n > TK_CACHE_MAX_WORD) return 0;
    tk_cache_shard *s = &t->cache[hash_bytes(w, n) % TK_CACHE_SHARDS];
    int found = 0;
    pthread_mutex_lock(&s->mu);
    int32_t slot = tk_smap_get(&s->map, w, n);
    if (slot >= 0) {
        found = 1;
        for (uint32_t i = 0; i < s->nvals[slot]; i++)
            if (tk_ids_push(out, s->vals[slot][i])) { found = -1; break; }
    }
    pthread_mutex_unlock(&s->mu);
    return found;
}

void tk_cache_put(const vc_tokenizer *t, const char *w, size_t n, const int32_t *ids, size_t k) {
    if (!t->cache || n > TK_CACHE_MAX_WORD) return;
    tk_cache_shard *s = &t->cache[hash_bytes(w, n) % TK_CACHE_SHARDS];
    pthread_mutex_lock(&s->mu);
    if (s->n < TK_CACHE_PER_SHARD && tk_smap_get(&s->map, w, n) < 0) {
        if (!s->vals) {
            s->vals = calloc(TK_CACHE_PER_SHARD, sizeof *s->vals);
            s->nvals = calloc(TK_CACHE_PER_SHARD, sizeof *s->nvals);
        }
        int32_t *v = s->vals && s->nvals ? malloc((k ? k : 1) * sizeof *v) : NULL;
        if (v && !tk_smap_put(&s->map, w, n, (int32_t)s->n)) {
            if (k) memcpy(v, ids, k * sizeof *v);
            s->vals[s->n] = v; s->nvals[s->n] = (uint32_t)k; s->n++;
        } else free(v);
    }
    pthread_mutex_unlock(&s->mu);
}

void tk_cache_free(vc_tokenizer *t) {
    if (!t->cache) return;
    for (int i = 0; i < TK_CACHE_SHARDS; i++) {
        tk_cache_shard *s = &t->cache[i];
        for (uint32_t j = 0; j < s->n; j++) free(s->vals[j]);
        free(s->vals); free(s->nvals);
        tk_smap_free(&s->map);
        pthread_mutex_destroy(&s->mu);
    }
    free(t->cache);
    t->cache = NULL;
}
