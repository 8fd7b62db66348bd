/* tokenizer.json loader: model, added tokens, normalizer, pre-tokenizer, post-processor, decoder. */
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "tokenizer/tok_internal.h"

static const char *jstr(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}
static int jbool(const cJSON *o, const char *k, int def) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : def;
}
static char *dupz(const char *s) { return s ? vc_strdup(s) : NULL; }

/* Pattern object {"Regex": ...} or {"String": ...}: compiles a regex or returns the literal. */
static vc_status pattern_parse(const cJSON *pat, const char *path, const char *what, regex_t **re, char **lit) {
    const char *r = jstr(pat, "Regex"), *s = jstr(pat, "String");
    if (r) {
        char err[256];
        *re = tk_regex_new(r, strlen(r), err, sizeof err);
        if (!*re) return vc_fail(VC_ERR_FORMAT, "%s: %s: bad regex /%s/: %s", path, what, r, err);
        return VC_OK;
    }
    if (s) { *lit = vc_strdup(s); return *lit ? VC_OK : VC_ERR_NOMEM; }
    return vc_fail(VC_ERR_FORMAT, "%s: %s: pattern has neither Regex nor String", path, what);
}

static vc_status norm_parse(const cJSON *j, const char *path, tk_norm **out) {
    *out = NULL;
    if (!j || cJSON_IsNull(j)) return VC_OK;
    const char *type = jstr(j, "type");
    if (!type) return vc_fail(VC_ERR_FORMAT, "%s: normalizer without a type", path);
    tk_norm *n = calloc(1, sizeof *n);
    if (!n) return vc_fail(VC_ERR_NOMEM, "%s: out of memory", path);
    vc_status st = VC_OK;
    static const struct { const char *name; int type; } simple[] = {
        {"NFC", TK_N_NFC}, {"NFKC", TK_N_NFKC}, {"NFD", TK_N_NFD}, {"NFKD", TK_N_NFKD}, {"Lowercase", TK_N_LOWER}};
    for (size_t i = 0; i < sizeof simple / sizeof simple[0]; i++) if (!strcmp(type, simple[i].name)) n->type = simple[i].type;
    if (n->type) goto out;
    if (!strcmp(type, "Prepend")) {
        n->type = TK_N_PREPEND; n->a = dupz(jstr(j, "prepend"));
        if (!n->a) st = vc_fail(VC_ERR_FORMAT, "%s: Prepend normalizer without `prepend`", path);
    } else if (!strcmp(type, "Replace")) {
        n->type = TK_N_REPLACE;
        const char *c = jstr(j, "content");
        if (!c) { st = vc_fail(VC_ERR_FORMAT, "%s: Replace normalizer without `content`", path); goto out; }
        n->b = vc_strdup(c);
        st = pattern_parse(cJSON_GetObjectItemCaseSensitive(j, "pattern"), path, "Replace normalizer", &n->re, &n->a);
    } else if (!strcmp(type, "Strip")) {
        n->type = TK_N_STRIP; n->left = jbool(j, "strip_left", 1); n->right = jbool(j, "strip_right", 1);
    } else if (!strcmp(type, "StripAccents")) n->type = TK_N_STRIP_ACCENTS;
    else if (!strcmp(type, "Nmt")) n->type = TK_N_NMT;
    else if (!strcmp(type, "ByteLevel")) n->type = TK_N_BYTELEVEL;
    else if (!strcmp(type, "BertNormalizer")) {
        n->type = TK_N_BERT;
        n->left = jbool(j, "clean_text", 1); n->right = jbool(j, "handle_chinese_chars", 1);
        n->lowercase = jbool(j, "lowercase", 1);
        n->strip_accents = jbool(j, "strip_accents", n->lowercase); /* null follows lowercase */
    } else if (!strcmp(type, "Precompiled")) {
        n->type = TK_N_PRECOMPILED;
        /* the charsmap is base64 in tokenizer.json; an empty or absent one is the identity */
        const char *b64 = jstr(j, "precompiled_charsmap");
        if (b64 && *b64) {
            size_t L = strlen(b64), k = 0; uint32_t acc = 0; int bits = 0;
            char *raw = malloc(L);
            if (!raw) { st = VC_ERR_NOMEM; goto out; }
            for (size_t i = 0; i < L; i++) {
                const char *al = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
                const char *p = b64[i] ? strchr(al, b64[i]) : NULL;
                if (!p) continue;
                acc = (acc << 6) | (uint32_t)(p - al); bits += 6;
                if (bits >= 8) { bits -= 8; raw[k++] = (char)((acc >> bits) & 0xFF); }
            }
            st = tk_charsmap_load(raw, k, &n->cm, path);
            free(raw);
        }
    } else if (!strcmp(type, "Sequence")) {
        n->type = TK_N_SEQ;
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "normalizers"), *e;
        if (!cJSON_IsArray(arr)) { st = vc_fail(VC_ERR_FORMAT, "%s: normalizer Sequence without `normalizers`", path); goto out; }
        n->kids = calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof *n->kids);
        if (!n->kids) { st = VC_ERR_NOMEM; goto out; }
        cJSON_ArrayForEach(e, arr) {
            if ((st = norm_parse(e, path, &n->kids[n->n_kids]))) goto out;
            if (n->kids[n->n_kids]) n->n_kids++;
        }
    } else st = vc_fail(VC_ERR_UNSUPPORTED, "%s: unsupported normalizer type `%s`", path, type);
out:
    if (st) { tk_norm_free(n); return st; }
    *out = n;
    return VC_OK;
}

static int behavior_parse(const char *b) {
    if (!b || !strcmp(b, "Isolated")) return TK_B_ISOLATED;
    if (!strcmp(b, "Removed")) return TK_B_REMOVED;
    if (!strcmp(b, "MergedWithPrevious")) return TK_B_MERGED_PREV;
    if (!strcmp(b, "MergedWithNext")) return TK_B_MERGED_NEXT;
    if (!strcmp(b, "Contiguous")) return TK_B_CONTIGUOUS;
    return -1;
}

static int scheme_parse(const cJSON *j) {
    const char *s = jstr(j, "prepend_scheme");
    if (s) return !strcmp(s, "first") ? TK_PS_FIRST : !strcmp(s, "never") ? TK_PS_NEVER : TK_PS_ALWAYS;
    return jbool(j, "add_prefix_space", 1) ? TK_PS_ALWAYS : TK_PS_NEVER;
}

/* tokenizers' Whitespace uses the Rust regex crate: \w = Alphabetic, M, Nd, Pc, Join_Control; \s = White_Space */
static const char WS_RE[] = "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]+|"
                            "[^\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}\\p{White_Space}]+";
static const char GPT2_RE[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static vc_status pretok_parse(const cJSON *j, const char *path, tk_pretok **out) {
    *out = NULL;
    if (!j || cJSON_IsNull(j)) return VC_OK;
    const char *type = jstr(j, "type");
    if (!type) return vc_fail(VC_ERR_FORMAT, "%s: pre_tokenizer without a type", path);
    tk_pretok *p = calloc(1, sizeof *p);
    if (!p) return vc_fail(VC_ERR_NOMEM, "%s: out of memory", path);
    vc_status st = VC_OK;
    char err[256];
    if (!strcmp(type, "Split")) {
        p->type = TK_P_SPLIT;
        p->behavior = behavior_parse(jstr(j, "behavior"));
        p->invert = jbool(j, "invert", 0);
        if (p->behavior < 0) { st = vc_fail(VC_ERR_FORMAT, "%s: Split: unknown behavior", path); goto out; }
        st = pattern_parse(cJSON_GetObjectItemCaseSensitive(j, "pattern"), path, "Split pre_tokenizer", &p->re, &p->lit);
        const char *rx = jstr(cJSON_GetObjectItemCaseSensitive(j, "pattern"), "Regex");
        if (rx) p->fast = tk_fastre_kind(rx, strlen(rx));
        if (p->lit) p->lit_len = strlen(p->lit);
    } else if (!strcmp(type, "ByteLevel")) {
        p->type = TK_P_BYTELEVEL;
        p->add_prefix_space = jbool(j, "add_prefix_space", 1);
        p->use_regex = jbool(j, "use_regex", 1);
        if (p->use_regex && !(p->re = tk_regex_new(GPT2_RE, strlen(GPT2_RE), err, sizeof err)))
            st = vc_fail(VC_ERR_INTERNAL, "byte-level regex: %s", err);
        if (p->re) p->fast = tk_fastre_kind(GPT2_RE, strlen(GPT2_RE));
    } else if (!strcmp(type, "Digits")) {
        p->type = TK_P_DIGITS; p->individual_digits = jbool(j, "individual_digits", 0);
    } else if (!strcmp(type, "Metaspace")) {
        p->type = TK_P_METASPACE;
        p->repl = dupz(jstr(j, "replacement") ? jstr(j, "replacement") : "\xE2\x96\x81");
        p->prepend_scheme = scheme_parse(j);
        p->split = jbool(j, "split", 1);
    } else if (!strcmp(type, "Whitespace")) {
        p->type = TK_P_WHITESPACE;
        if (!(p->re = tk_regex_new(WS_RE, strlen(WS_RE), err, sizeof err))) st = vc_fail(VC_ERR_INTERNAL, "%s", err);
    } else if (!strcmp(type, "CharDelimiterSplit")) { /* a Split on that character, removed */
        const char *dl = jstr(j, "delimiter");
        int32_t cp;
        if (!dl || !*dl || tk_utf8_next((const unsigned char *)dl, strlen(dl), &cp) != (int)strlen(dl) || cp < 0) {
            st = vc_fail(VC_ERR_FORMAT, "%s: CharDelimiterSplit: `delimiter` is not one character", path); goto out;
        }
        p->type = TK_P_SPLIT; p->behavior = TK_B_REMOVED;
        if (!(p->lit = vc_strdup(dl))) { st = vc_fail(VC_ERR_NOMEM, "out of memory"); goto out; }
        p->lit_len = strlen(dl);
    } else if (!strcmp(type, "FixedLength")) {
        const cJSON *L = cJSON_GetObjectItemCaseSensitive(j, "length");
        p->type = TK_P_FIXED; p->length = L ? (cJSON_IsNumber(L) ? L->valueint : -1) : 5;
        if (p->length < 1) st = vc_fail(VC_ERR_FORMAT, "%s: FixedLength: `length` must be a positive number", path);
    } else if (!strcmp(type, "WhitespaceSplit")) p->type = TK_P_WSSPLIT;
    else if (!strcmp(type, "BertPreTokenizer")) p->type = TK_P_BERT;
    else if (!strcmp(type, "Punctuation")) {
        p->type = TK_P_PUNCT; p->behavior = behavior_parse(jstr(j, "behavior"));
        if (p->behavior < 0) st = vc_fail(VC_ERR_FORMAT, "%s: Punctuation: unknown behavior", path);
    } else if (!strcmp(type, "Sequence")) {
        p->type = TK_P_SEQ;
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "pretokenizers"), *e;
        if (!cJSON_IsArray(arr)) { st = vc_fail(VC_ERR_FORMAT, "%s: pre_tokenizer Sequence without `pretokenizers`", path); goto out; }
        p->kids = calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof *p->kids);
        if (!p->kids) { st = VC_ERR_NOMEM; goto out; }
        cJSON_ArrayForEach(e, arr) {
            if ((st = pretok_parse(e, path, &p->kids[p->n_kids]))) goto out;
            if (p->kids[p->n_kids]) p->n_kids++;
        }
    } else st = vc_fail(VC_ERR_UNSUPPORTED, "%s: unsupported pre_tokenizer type `%s`", path, type);
out:
    if (st) { tk_pretok_free(p); return st; }
    *out = p;
    return VC_OK;
}

static vc_status dec_parse(const cJSON *j, const char *path, tk_dec **out) {
    *out = NULL;
    if (!j || cJSON_IsNull(j)) return VC_OK;
    const char *type = jstr(j, "type");
    if (!type) return vc_fail(VC_ERR_FORMAT, "%s: decoder without a type", path);
    tk_dec *d = calloc(1, sizeof *d);
    if (!d) return vc_fail(VC_ERR_NOMEM, "%s: out of memory", path);
    vc_status st = VC_OK;
    if (!strcmp(type, "ByteLevel")) d->type = TK_D_BYTELEVEL;
    else if (!strcmp(type, "ByteFallback")) d->type = TK_D_BYTEFALLBACK;
    else if (!strcmp(type, "Fuse")) d->type = TK_D_FUSE;
    else if (!strcmp(type, "Replace")) {
        d->type = TK_D_REPLACE;
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(j, "pattern");
        const char *c = jstr(j, "content");
        if (!jstr(pat, "String") || !c) { st = vc_fail(VC_ERR_UNSUPPORTED, "%s: Replace decoder needs a String pattern and content", path); goto out; }
        d->a = vc_strdup(jstr(pat, "String")); d->b = vc_strdup(c);
    } else if (!strcmp(type, "Strip")) {
        d->type = TK_D_STRIP;
        d->a = dupz(jstr(j, "content") ? jstr(j, "content") : " ");
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "start"), *e = cJSON_GetObjectItemCaseSensitive(j, "stop");
        d->start = cJSON_IsNumber(s) ? s->valueint : 0; d->stop = cJSON_IsNumber(e) ? e->valueint : 0;
    } else if (!strcmp(type, "Metaspace")) {
        d->type = TK_D_METASPACE;
        d->a = dupz(jstr(j, "replacement") ? jstr(j, "replacement") : "\xE2\x96\x81");
        d->prepend_scheme = scheme_parse(j);
    } else if (!strcmp(type, "WordPiece")) {
        d->type = TK_D_WORDPIECE;
        d->a = dupz(jstr(j, "prefix") ? jstr(j, "prefix") : "##");
        d->cleanup = jbool(j, "cleanup", 1);
    } else if (!strcmp(type, "BPEDecoder")) {
        d->type = TK_D_BPE;
        d->a = dupz(jstr(j, "suffix") ? jstr(j, "suffix") : "</w>");
        if (!d->a) st = vc_fail(VC_ERR_NOMEM, "out of memory");
    } else if (!strcmp(type, "CTC")) {
        d->type = TK_D_CTC;
        d->a = dupz(jstr(j, "pad_token") ? jstr(j, "pad_token") : "<pad>");
        d->b = dupz(jstr(j, "word_delimiter_token") ? jstr(j, "word_delimiter_token") : "|");
        d->cleanup = jbool(j, "cleanup", 1);
        if (!d->a || !d->b) st = vc_fail(VC_ERR_NOMEM, "out of memory");
    } else if (!strcmp(type, "Sequence")) {
        d->type = TK_D_SEQ;
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "decoders"), *e;
        if (!cJSON_IsArray(arr)) { st = vc_fail(VC_ERR_FORMAT, "%s: decoder Sequence without `decoders`", path); goto out; }
        d->kids = calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof *d->kids);
        if (!d->kids) { st = VC_ERR_NOMEM; goto out; }
        cJSON_ArrayForEach(e, arr) {
            if ((st = dec_parse(e, path, &d->kids[d->n_kids]))) goto out;
            if (d->kids[d->n_kids]) d->n_kids++;
        }
    } else st = vc_fail(VC_ERR_UNSUPPORTED, "%s: unsupported decoder type `%s`", path, type);
out:
    if (st) { tk_dec_free(d); return st; }
    *out = d;
    return VC_OK;
}

static vc_status tmpl_add(vc_tokenizer *t, int32_t id, int is_seq) {
    tk_tmpl_item *n = realloc(t->tmpl, (size_t)(t->n_tmpl + 1) * sizeof *n);
    if (!n) return vc_fail(VC_ERR_NOMEM, "out of memory");
    t->tmpl = n;
    t->tmpl[t->n_tmpl++] = (tk_tmpl_item){id, is_seq};
    return VC_OK;
}

static vc_status post_parse(vc_tokenizer *t, const cJSON *j, const char *path) {
    if (!j || cJSON_IsNull(j)) return VC_OK;
    const char *type = jstr(j, "type");
    if (!type) return vc_fail(VC_ERR_FORMAT, "%s: post_processor without a type", path);
    vc_status st = VC_OK;
    if (!strcmp(type, "ByteLevel")) return VC_OK;
    if (!strcmp(type, "Sequence")) {
        const cJSON *e, *arr = cJSON_GetObjectItemCaseSensitive(j, "processors");
        cJSON_ArrayForEach(e, arr) if ((st = post_parse(t, e, path))) return st;
        return VC_OK;
    }
    if (!strcmp(type, "TemplateProcessing")) {
        const cJSON *single = cJSON_GetObjectItemCaseSensitive(j, "single"), *sp = cJSON_GetObjectItemCaseSensitive(j, "special_tokens"), *e;
        if (!cJSON_IsArray(single)) return vc_fail(VC_ERR_FORMAT, "%s: TemplateProcessing without `single`", path);
        t->has_post = 1; t->n_tmpl = 0;
        cJSON_ArrayForEach(e, single) {
            const cJSON *seq = cJSON_GetObjectItemCaseSensitive(e, "Sequence"), *tok = cJSON_GetObjectItemCaseSensitive(e, "SpecialToken");
            if (seq) { if ((st = tmpl_add(t, -1, 1))) return st; continue; }
            const char *name = jstr(tok, "id");
            const cJSON *ids = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(sp, name ? name : ""), "ids"), *x;
            if (!name || !cJSON_IsArray(ids)) return vc_fail(VC_ERR_FORMAT, "%s: TemplateProcessing: special token `%s` has no ids", path, name ? name : "?");
            cJSON_ArrayForEach(x, ids) if ((st = tmpl_add(t, (int32_t)x->valuedouble, 0))) return st;
        }
        return VC_OK;
    }
    if (!strcmp(type, "BertProcessing") || !strcmp(type, "RobertaProcessing")) {
        const cJSON *cls = cJSON_GetObjectItemCaseSensitive(j, "cls"), *sep = cJSON_GetObjectItemCaseSensitive(j, "sep");
        if (cJSON_GetArraySize(cls) != 2 || cJSON_GetArraySize(sep) != 2) return vc_fail(VC_ERR_FORMAT, "%s: %s needs cls and sep", path, type);
        t->has_post = 1; t->n_tmpl = 0;
        if ((st = tmpl_add(t, (int32_t)cJSON_GetArrayItem(cls, 1)->valuedouble, 0)) || (st = tmpl_add(t, -1, 1)) ||
            (st = tmpl_add(t, (int32_t)cJSON_GetArrayItem(sep, 1)->valuedouble, 0))) return st;
        return VC_OK;
    }
    return vc_fail(VC_ERR_UNSUPPORTED, "%s: unsupported post_processor type `%s`", path, type);
}

/* model: BPE / WordPiece / WordLevel (vocab object) or Unigram (vocab array of [piece, score]) */
static vc_status merges_parse(vc_tokenizer *t, const cJSON *merges, const char *path) {
    const cJSON *m;
    int rank = 0;
    tk_buf cat = {0};
    vc_status st = VC_OK;
    if (tk_pmap_reserve(&t->merges, t->merges.n + (size_t)cJSON_GetArraySize(merges))) return vc_fail(VC_ERR_NOMEM, "out of memory");
    cJSON_ArrayForEach(m, merges) {
        const char *a, *b; size_t al, bl;
        if (cJSON_IsString(m)) {
            const char *sp = strchr(m->valuestring, ' ');
            if (!sp || strchr(sp + 1, ' ')) { st = vc_fail(VC_ERR_FORMAT, "%s: bad merges entry %d: `%s`", path, rank, m->valuestring); break; }
            a = m->valuestring; al = (size_t)(sp - a); b = sp + 1; bl = strlen(b);
        } else if (cJSON_GetArraySize(m) == 2 && cJSON_IsString(cJSON_GetArrayItem(m, 0)) && cJSON_IsString(cJSON_GetArrayItem(m, 1))) {
            a = cJSON_GetArrayItem(m, 0)->valuestring; b = cJSON_GetArrayItem(m, 1)->valuestring; al = strlen(a); bl = strlen(b);
        } else { st = vc_fail(VC_ERR_FORMAT, "%s: bad merges entry %d", path, rank); break; }
        int32_t ia = tk_smap_get(&t->vocab, a, al), ib = tk_smap_get(&t->vocab, b, bl);
        cat.n = 0;
        /* as tokenizers does: the merged token drops the continuing-subword prefix length from b */
        size_t cut = t->cont_prefix ? strlen(t->cont_prefix) : 0;
        if (cut > bl) cut = bl;
        if (tk_buf_put(&cat, a, al) || tk_buf_put(&cat, b + cut, bl - cut)) { st = vc_fail(VC_ERR_NOMEM, "out of memory"); break; }
        int32_t io = tk_smap_get(&t->vocab, cat.p, cat.n);
        if (ia < 0 || ib < 0 || io < 0) { st = vc_fail(VC_ERR_FORMAT, "%s: bad merges entry %d: `%.*s` `%.*s` not in vocab", path, rank, (int)al, a, (int)bl, b); break; }
        if (tk_pmap_put(&t->merges, ia, ib, rank, io)) { st = vc_fail(VC_ERR_NOMEM, "out of memory"); break; }
        rank++;
    }
    tk_buf_free(&cat);
    return st;
}

static vc_status model_parse(vc_tokenizer *t, const cJSON *m, const char *path) {
    if (!cJSON_IsObject(m)) return vc_fail(VC_ERR_MISSING, "%s: missing `model`", path);
    const char *type = jstr(m, "type");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(m, "vocab"), *e;
    if (!vocab) return vc_fail(VC_ERR_MISSING, "%s: model has no `vocab`", path);
    if (!type) type = cJSON_GetObjectItemCaseSensitive(m, "merges") ? "BPE" : cJSON_IsArray(vocab) ? "Unigram" : "WordPiece";
    vc_status st;
    if (!strcmp(type, "Unigram")) {
        if (!cJSON_IsArray(vocab)) return vc_fail(VC_ERR_FORMAT, "%s: Unigram vocab is not an array", path);
        t->model = TK_M_UNIGRAM;
        int n = cJSON_GetArraySize(vocab), id = 0;
        t->score = calloc((size_t)n + 1, sizeof *t->score);
        if (!t->score) return vc_fail(VC_ERR_NOMEM, "out of memory");
        t->min_score = 1e300; t->max_score = -1e300;
        cJSON_ArrayForEach(e, vocab) {
            const cJSON *p = cJSON_GetArrayItem(e, 0), *s = cJSON_GetArrayItem(e, 1);
            if (!cJSON_IsString(p) || !cJSON_IsNumber(s)) return vc_fail(VC_ERR_FORMAT, "%s: Unigram vocab entry %d is not [piece, score]", path, id);
            if ((st = tk_vocab_set(t, id, p->valuestring, strlen(p->valuestring), 1))) return st;
            t->score[id] = s->valuedouble;
            if (t->score[id] < t->min_score) t->min_score = t->score[id];
            if (t->score[id] > t->max_score) t->max_score = t->score[id];
            int L = (int)strlen(p->valuestring);
            if (L > t->max_piece_len) t->max_piece_len = L;
            id++;
        }
        const cJSON *u = cJSON_GetObjectItemCaseSensitive(m, "unk_id");
        t->unk_id = cJSON_IsNumber(u) ? u->valueint : -1;
        t->n_model_vocab = n;
        t->byte_fallback = jbool(m, "byte_fallback", 0);
        return VC_OK;
    }
    if (strcmp(type, "BPE") && strcmp(type, "WordPiece") && strcmp(type, "WordLevel"))
        return vc_fail(VC_ERR_UNSUPPORTED, "%s: unknown model type `%s`", path, type);
    if (!cJSON_IsObject(vocab)) return vc_fail(VC_ERR_FORMAT, "%s: %s vocab is not an object", path, type);
    if (tk_smap_reserve(&t->vocab, t->vocab.n + (size_t)cJSON_GetArraySize(vocab))) return vc_fail(VC_ERR_NOMEM, "out of memory");
    cJSON_ArrayForEach(e, vocab) {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble > 1e8)
            return vc_fail(VC_ERR_FORMAT, "%s: vocab entry `%s` has a bad id", path, e->string);
        if ((st = tk_vocab_set(t, (int)e->valuedouble, e->string, strlen(e->string), 1))) return st;
    }
    t->n_model_vocab = (int32_t)t->vocab.n; /* distinct pieces, as tokenizers' vocabulary map counts them */
    const char *unk = jstr(m, "unk_token");
    if (!unk && !strcmp(type, "WordLevel")) unk = "<unk>"; /* its default */
    t->unk_id = unk ? tk_smap_get(&t->vocab, unk, strlen(unk)) : -1;
    if (!strcmp(type, "WordLevel")) { t->model = TK_M_WORDLEVEL; return VC_OK; }
    t->cont_prefix = dupz(jstr(m, "continuing_subword_prefix"));
    if (t->cont_prefix && !*t->cont_prefix) { free(t->cont_prefix); t->cont_prefix = NULL; }
    if (!strcmp(type, "WordPiece")) {
        t->model = TK_M_WORDPIECE;
        const cJSON *mx = cJSON_GetObjectItemCaseSensitive(m, "max_input_chars_per_word");
        t->wp_max_chars = cJSON_IsNumber(mx) ? mx->valueint : 100;
        if (!t->cont_prefix) t->cont_prefix = vc_strdup("##");
        return VC_OK;
    }
    t->model = TK_M_BPE;
    t->eow_suffix = dupz(jstr(m, "end_of_word_suffix"));
    if (t->eow_suffix && !*t->eow_suffix) { free(t->eow_suffix); t->eow_suffix = NULL; }
    t->byte_fallback = jbool(m, "byte_fallback", 0);
    t->fuse_unk = jbool(m, "fuse_unk", 0);
    t->ignore_merges = jbool(m, "ignore_merges", 0);
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(m, "merges");
    if (!cJSON_IsArray(merges)) return vc_fail(VC_ERR_MISSING, "%s: BPE model has no `merges` array", path);
    return merges_parse(t, merges, path);
}

/* added_tokens. From a tokenizer.json file the ids are assigned as tokenizers assigns them when it loads one (it only
 * warns about the file's ids): a content already added keeps its id (the later entry's options win), a content in the
 * model's vocabulary takes that id, any other the next id from the model's vocabulary size on; empty contents are
 * ignored. Generated configurations (tiktoken) keep their ids. */
static vc_status added_parse(vc_tokenizer *t, const cJSON *arr, const char *path) {
    const cJSON *e;
    int n = cJSON_GetArraySize(arr), k = 0;
    if (n <= 0) return VC_OK;
    t->added = calloc((size_t)n, sizeof *t->added);
    if (!t->added) return vc_fail(VC_ERR_NOMEM, "out of memory");
    int32_t next = t->n_model_vocab;
    cJSON_ArrayForEach(e, arr) {
        const char *c = jstr(e, "content");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        if (!c || !cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble > 1e8)
            return vc_fail(VC_ERR_FORMAT, "%s: added_tokens entry %d lacks content or id", path, k);
        k++;
        size_t len = strlen(c);
        int32_t want = (int32_t)id->valuedouble, prev = -1;
        if (t->hf_ids) {
            if (!len) continue;
            prev = tk_smap_get(&t->added_map, c, len);
            int32_t mid = tk_smap_get(&t->vocab, c, len);
            want = prev >= 0 ? prev : mid >= 0 ? mid : next++;
        }
        tk_added *a = NULL;
        for (int i = 0; prev >= 0 && i < t->n_added && !a; i++) if (t->added[i].id == prev) a = &t->added[i];
        uint8_t was_special = a ? a->special_set : 0;
        if (!a) {
            a = &t->added[t->n_added++];
            if (!(a->s = vc_strdup(c))) return vc_fail(VC_ERR_NOMEM, "out of memory");
            a->len = len;
        }
        a->id = want;
        a->special = (uint8_t)jbool(e, "special", 0); a->lstrip = (uint8_t)jbool(e, "lstrip", 0);
        a->rstrip = (uint8_t)jbool(e, "rstrip", 0); a->normalized = (uint8_t)jbool(e, "normalized", !a->special);
        a->single_word = (uint8_t)jbool(e, "single_word", 0);
        a->special_set = was_special | a->special; /* tokenizers' set of special contents only grows */
        vc_status st = tk_vocab_set(t, a->id, c, a->len, 0);
        if (st) return st;
        if (tk_smap_put(&t->added_map, c, a->len, a->id)) return vc_fail(VC_ERR_NOMEM, "out of memory");
    }
    return VC_OK;
}

vc_status tk_load_json(vc_tokenizer *t, const char *path) {
    char *text = NULL; size_t len;
    vc_status st = vc_read_file(path, &text, &len);
    if (st) return st;
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    if (!root) return vc_fail(VC_ERR_FORMAT, "%s: not valid JSON (truncated or corrupt)", path);
    t->hf_ids = 1;
    st = tk_load_json_root(t, root, path);
    cJSON_Delete(root);
    return st;
}

vc_status tk_load_json_root(vc_tokenizer *t, const cJSON *root, const char *path) {
    vc_status st;
    t->src = TK_SRC_JSON;
    if ((st = model_parse(t, cJSON_GetObjectItemCaseSensitive(root, "model"), path))) goto out;
    if ((st = added_parse(t, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), path))) goto out;
    if ((st = norm_parse(cJSON_GetObjectItemCaseSensitive(root, "normalizer"), path, &t->norm))) goto out;
    if ((st = pretok_parse(cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), path, &t->pre))) goto out;
    t->first_flag = tk_pretok_uses_first(t->pre);
    if ((st = post_parse(t, cJSON_GetObjectItemCaseSensitive(root, "post_processor"), path))) goto out;
    st = dec_parse(cJSON_GetObjectItemCaseSensitive(root, "decoder"), path, &t->dec);
out:
    return st;
}
