/* Public tokenizer API: loading (tokenizer.json / tokenizer.model (SentencePiece or tiktoken) / qwen.tiktoken +
 * tokenizer_config.json), encode, decode. */
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "tokenizer/tok_internal.h"

vc_status tk_vocab_set(vc_tokenizer *t, int id, const char *s, size_t len, int model) {
    if (id < 0 || id > 100000000) return vc_fail(VC_ERR_FORMAT, "token id %d out of range", id);
    if (id >= t->n_tok) {
        int n = t->n_tok ? t->n_tok : 1024;
        while (n <= id) n *= 2;
        char **tok = realloc(t->tok, (size_t)n * sizeof *tok);
        if (!tok) return vc_fail(VC_ERR_NOMEM, "out of memory");
        t->tok = tok;
        uint32_t *tl = realloc(t->tok_len, (size_t)n * sizeof *tl);
        if (!tl) return vc_fail(VC_ERR_NOMEM, "out of memory");
        t->tok_len = tl;
        uint8_t *sp = realloc(t->is_special, (size_t)n);
        if (!sp) return vc_fail(VC_ERR_NOMEM, "out of memory");
        t->is_special = sp;
        for (int i = t->n_tok; i < n; i++) { t->tok[i] = NULL; t->tok_len[i] = 0; t->is_special[i] = 0; }
        t->n_tok = n;
    }
    if (!t->tok[id] || !model) { /* an added token's content is the id's string even over a model piece (tokenizers) */
        char *c = malloc(len + 1);
        if (!c) return vc_fail(VC_ERR_NOMEM, "out of memory");
        memcpy(c, s, len); c[len] = 0;
        free(t->tok[id]);
        t->tok[id] = c; t->tok_len[id] = (uint32_t)len;
    }
    if (model && tk_smap_put(&t->vocab, s, len, id)) return vc_fail(VC_ERR_NOMEM, "out of memory");
    return VC_OK;
}

/* Token from tokenizer_config.json: a string or {"content": ...}. */
static int config_token_id(const vc_tokenizer *t, const cJSON *cfg, const char *key, int def) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "content");
    if (cJSON_IsNull(v)) return -1;
    if (!cJSON_IsString(v)) return def;
    int id = vc_tokenizer_token_to_id(t, v->valuestring);
    return id >= 0 ? id : def;
}

static vc_status load_config(vc_tokenizer *t, const char *path) {
    char *text = NULL; size_t len;
    vc_status st = vc_read_file(path, &text, &len);
    if (st) return st;
    cJSON *cfg = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cfg) return vc_fail(VC_ERR_FORMAT, "%s: not valid JSON", path);
    t->bos_id = config_token_id(t, cfg, "bos_token", t->bos_id);
    t->eos_id = config_token_id(t, cfg, "eos_token", t->eos_id);
    t->pad_id = config_token_id(t, cfg, "pad_token", t->pad_id);
    int unk = config_token_id(t, cfg, "unk_token", -1);
    if (unk >= 0 && t->unk_id < 0) t->unk_id = unk;
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(cfg, "add_bos_token"), *e = cJSON_GetObjectItemCaseSensitive(cfg, "add_eos_token");
    if (cJSON_IsBool(b)) t->add_bos = cJSON_IsTrue(b);
    if (cJSON_IsBool(e)) t->add_eos = cJSON_IsTrue(e);
    /* transformers (5.7 on) cleans decoded text up when the config asks, but not a BPE model's unless forced */
    int clean = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, "clean_up_tokenization_spaces"));
    int force = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cfg, "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output"));
    t->clean_up = clean && (t->model != TK_M_BPE || force);
    cJSON_Delete(cfg);
    return VC_OK;
}

static vc_status index_one(vc_tokenizer *t, int kind, const char *c, size_t cl, int i) {
    if (!cl) return VC_OK;
    /* the first entry for a content wins, as a later duplicate maps to the same string */
    if (tk_smap_get(&t->added_kind[kind], c, cl) < 0 && tk_smap_put(&t->added_kind[kind], c, cl, i))
        return vc_fail(VC_ERR_NOMEM, "out of memory");
    t->added_first[kind][(unsigned char)c[0]] = 1;
    int k = 0;
    while (k < t->n_added_lens[kind] && t->added_lens[kind][k] > cl) k++;
    if (k < t->n_added_lens[kind] && t->added_lens[kind][k] == cl) return VC_OK;
    memmove(t->added_lens[kind] + k + 1, t->added_lens[kind] + k, (size_t)(t->n_added_lens[kind] - k) * sizeof(uint32_t));
    t->added_lens[kind][k] = (uint32_t)cl;
    t->n_added_lens[kind]++;
    return VC_OK;
}

/* Indexes added tokens for matching: per kind, a content map, the distinct lengths and the first bytes. */
static vc_status index_added(vc_tokenizer *t) {
    for (int kind = 0; kind < 2; kind++) {
        t->added_lens[kind] = malloc(((size_t)t->n_added + 1) * sizeof(uint32_t));
        if (!t->added_lens[kind]) return vc_fail(VC_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < t->n_added; i++) {
        const tk_added *a = &t->added[i];
        int kind = a->normalized ? 1 : 0;
        /* tokens matched on normalized text are themselves normalized first, as tokenizers does */
        tk_buf nb = {0};
        const char *c = a->s; size_t cl = a->len;
        if (kind && t->norm) {
            if (tk_norm_apply(t->norm, a->s, a->len, &nb)) { tk_buf_free(&nb); return vc_fail(VC_ERR_NOMEM, "out of memory"); }
            c = nb.p ? nb.p : ""; cl = nb.n;
            /* tokenizers then maps the id back to the normalized content (decode, id_to_token) */
            char *dup = malloc(cl + 1);
            if (!dup) { tk_buf_free(&nb); return vc_fail(VC_ERR_NOMEM, "out of memory"); }
            memcpy(dup, c, cl); dup[cl] = 0;
            free(t->tok[a->id]); t->tok[a->id] = dup; t->tok_len[a->id] = (uint32_t)cl;
        }
        vc_status st = index_one(t, kind, c, cl, i);
        tk_buf_free(&nb);
        if (st) return st;
    }
    return VC_OK;
}

/* tokenizers' decode(skip_special_tokens) leaves out an id whose string (an added token's normalized form where it
 * is normalized, else the model's piece) is the content of a special added token: by string, not by id, so a model
 * piece equal to a special token's content goes too, and a normalized special token whose form changed stays. */
static vc_status index_dec_skip(vc_tokenizer *t) {
    tk_smap sp = {0};
    vc_status st = VC_OK;
    for (int i = 0; i < t->n_added && !st; i++)
        if (t->added[i].special_set && t->added[i].len && tk_smap_put(&sp, t->added[i].s, t->added[i].len, 1)) st = vc_fail(VC_ERR_NOMEM, "out of memory");
    if (!st && !(t->dec_skip = calloc((size_t)t->n_tok + 1, 1))) st = vc_fail(VC_ERR_NOMEM, "out of memory");
    for (int id = 0; id < t->n_tok && !st && sp.n; id++)
        t->dec_skip[id] = t->tok[id] && tk_smap_get(&sp, t->tok[id], t->tok_len[id]) >= 0;
    tk_smap_free(&sp);
    return st;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static vc_status vc_tokenizer_load_at(const char *dir, vc_tokenizer **out) {
    *out = NULL;
    if (!dir) return vc_fail(VC_ERR_ARG, "tokenizer: no path given");
    if (tk_bytelevel_init()) return vc_fail(VC_ERR_INTERNAL, "tokenizer: init failed");
    vc_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return vc_fail(VC_ERR_NOMEM, "out of memory");
    t->unk_id = t->bos_id = t->eos_id = t->pad_id = -1;
    for (int i = 0; i < 256; i++) t->byte_ids[i] = -1;
    char *folder = NULL, *json = NULL, *model = NULL, *cfg = NULL;
    vc_status st = VC_OK;
    if (ends_with(dir, ".json") || ends_with(dir, ".model") || ends_with(dir, ".tiktoken")) {
        const char *slash = strrchr(dir, '/');
        folder = slash ? strndup(dir, (size_t)(slash - dir)) : vc_strdup(".");
        if (ends_with(dir, ".json")) json = vc_strdup(dir); else model = vc_strdup(dir);
    } else { /* tokenizer.json, else Qwen1's qwen.tiktoken, Kimi's tiktoken.model, else tokenizer.model */
        folder = vc_strdup(dir);
        json = vc_path_join(dir, "tokenizer.json");
        model = vc_path_join(dir, "qwen.tiktoken");
        if (model && !vc_file_exists(model)) { free(model); model = vc_path_join(dir, "tiktoken.model"); } /* Kimi */
        if (model && !vc_file_exists(model)) { free(model); model = vc_path_join(dir, "tokenizer.model"); }
    }
    cfg = folder ? vc_path_join(folder, "tokenizer_config.json") : NULL;
    if (!folder || !cfg || (!json && !model)) { st = vc_fail(VC_ERR_NOMEM, "out of memory"); goto out; }
    if (json && vc_file_exists(json)) st = tk_load_json(t, json);
    else if (model && vc_file_exists(model) && tk_is_tiktoken(model)) st = tk_load_tiktoken(t, model, cfg);
    else if (model && vc_file_exists(model)) {
        st = tk_load_spm(t, model);
        if (!st) st = tk_spm_config(t, cfg);
    }
    else { st = vc_fail(VC_ERR_IO, "%s: no tokenizer.json, tokenizer.model, qwen.tiktoken or tiktoken.model", dir); goto out; }
    if (st) goto out;
    for (int i = 0; i < t->n_added; i++) if (t->added[i].special) t->is_special[t->added[i].id] = 1;
    if ((st = index_added(t))) goto out;
    if (t->src == TK_SRC_JSON && (st = index_dec_skip(t))) goto out;
    /* byte-fallback pieces <0xNN> */
    if (t->src == TK_SRC_JSON)
        for (int b = 0; b < 256; b++) { char nm[8]; snprintf(nm, sizeof nm, "<0x%02X>", b); t->byte_ids[b] = tk_smap_get(&t->vocab, nm, 6); }
    if (vc_file_exists(cfg) && (st = load_config(t, cfg))) goto out;
    if (t->model == TK_M_BPE && t->src == TK_SRC_JSON) {
        t->cache = calloc(TK_CACHE_SHARDS, sizeof *t->cache);
        if (!t->cache) { st = vc_fail(VC_ERR_NOMEM, "out of memory"); goto out; }
        for (int i = 0; i < TK_CACHE_SHARDS; i++) pthread_mutex_init(&t->cache[i].mu, NULL);
    }
out:
    free(folder); free(json); free(model); free(cfg);
    if (st) { vc_tokenizer_free(t); return st; }
    *out = t;
    return VC_OK;
}

/* a local directory, or a Hugging Face Hub id found in the local cache (vc_hf_resolve) */
vc_status vc_tokenizer_load(const char *dir, vc_tokenizer **out) {
    char *path = NULL;
    *out = NULL;
    vc_status st = vc_hf_resolve(dir, &path);
    if (!st) st = vc_tokenizer_load_at(path, out);
    free(path);
    return st;
}

void vc_tokenizer_free(vc_tokenizer *t) {
    if (!t) return;
    for (int i = 0; i < t->n_tok; i++) free(t->tok[i]);
    free(t->tok); free(t->tok_len); free(t->is_special); free(t->dec_skip);
    tk_smap_free(&t->vocab); tk_smap_free(&t->added_map); tk_pmap_free(&t->merges);
    free(t->cont_prefix); free(t->eow_suffix); free(t->score); free(t->ptype); free(t->user_ids); free(t->unk_surface);
    tk_charsmap_free(t->spm_cm);
    for (int i = 0; i < t->n_added; i++) free(t->added[i].s);
    free(t->added);
    for (int k = 0; k < 2; k++) { tk_smap_free(&t->added_kind[k]); free(t->added_lens[k]); }
    tk_norm_free(t->norm); tk_pretok_free(t->pre); tk_dec_free(t->dec);
    free(t->tmpl);
    tk_cache_free(t);
    free(t);
}

static int add_template(const vc_tokenizer *t, tk_ids *body, tk_ids *out) {
    if (t->src == TK_SRC_SPM || !t->has_post) {
        for (int k = 0; t->src == TK_SRC_SPM && k < t->n_prefix; k++) if (tk_ids_push(out, t->prefix_ids[k])) return -1;
        if (t->src == TK_SRC_SPM && t->add_bos && t->bos_id >= 0 && tk_ids_push(out, t->bos_id)) return -1;
        for (size_t i = 0; i < body->n; i++) if (tk_ids_push(out, body->v[i])) return -1;
        if (t->src == TK_SRC_SPM && t->add_eos && t->eos_id >= 0 && tk_ids_push(out, t->eos_id)) return -1;
        return 0;
    }
    for (int k = 0; k < t->n_tmpl; k++) {
        if (!t->tmpl[k].is_seq) { if (tk_ids_push(out, t->tmpl[k].id)) return -1; continue; }
        for (size_t i = 0; i < body->n; i++) if (tk_ids_push(out, body->v[i])) return -1;
    }
    return 0;
}

vc_status vc_tokenizer_encode(const vc_tokenizer *t, const char *text, size_t len, int add_special_tokens,
                              int32_t **ids, size_t *n_ids) {
    *ids = NULL; *n_ids = 0;
    if (!t || (!text && len)) return vc_fail(VC_ERR_ARG, "tokenizer encode: null argument");
    tk_ids body = {0}, all = {0};
    int rc = t->src == TK_SRC_SPM ? tk_spm_encode(t, text ? text : "", len, &body) : tk_json_encode(t, text ? text : "", len, &body);
    if (!rc && add_special_tokens) {
        rc = add_template(t, &body, &all);
        free(body.v);
        body = all;
    }
    if (rc) {
        free(body.v);
        if (rc == -2) return vc_fail(VC_ERR_MISSING, "tokenizer encode: text has a piece with no token and the model has no unk token");
        return vc_fail(VC_ERR_NOMEM, "tokenizer encode: out of memory");
    }
    if (!body.v) body.v = malloc(sizeof(int32_t));
    if (!body.v) return vc_fail(VC_ERR_NOMEM, "tokenizer encode: out of memory");
    *ids = body.v; *n_ids = body.n;
    return VC_OK;
}

vc_status vc_tokenizer_decode(const vc_tokenizer *t, const int32_t *ids, size_t n, int skip_special_tokens,
                              char **text, size_t *len) {
    *text = NULL; if (len) *len = 0;
    if (!t || (!ids && n)) return vc_fail(VC_ERR_ARG, "tokenizer decode: null argument");
    tk_buf out = {0};
    int rc = t->src == TK_SRC_SPM ? tk_spm_decode(t, ids, n, skip_special_tokens, &out) : tk_json_decode(t, ids, n, skip_special_tokens, &out);
    if (!rc && t->clean_up) rc = tk_clean_up_spaces(&out);
    if (!rc && !out.p) rc = tk_buf_put(&out, "", 0);
    if (rc) { tk_buf_free(&out); return vc_fail(VC_ERR_NOMEM, "tokenizer decode: out of memory"); }
    *text = out.p; if (len) *len = out.n;
    return VC_OK;
}

int vc_tokenizer_vocab_size(const vc_tokenizer *t) {
    int n = 0;
    for (int i = 0; i < t->n_tok; i++) if (t->tok[i]) n = i + 1;
    return n;
}
int vc_tokenizer_token_to_id(const vc_tokenizer *t, const char *token) {
    size_t l = strlen(token);
    int32_t id = tk_smap_get(&t->added_map, token, l);
    return id >= 0 ? id : tk_smap_get(&t->vocab, token, l);
}
const char *vc_tokenizer_id_to_token(const vc_tokenizer *t, int id) { return id >= 0 && id < t->n_tok ? t->tok[id] : NULL; }
int vc_tokenizer_is_special(const vc_tokenizer *t, int id) { return id >= 0 && id < t->n_tok && t->is_special[id]; }
int vc_tokenizer_bos_id(const vc_tokenizer *t) { return t->bos_id; }
int vc_tokenizer_eos_id(const vc_tokenizer *t) { return t->eos_id; }
int vc_tokenizer_pad_id(const vc_tokenizer *t) { return t->pad_id; }
int vc_tokenizer_unk_id(const vc_tokenizer *t) { return t->unk_id; }
