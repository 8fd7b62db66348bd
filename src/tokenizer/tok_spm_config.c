/* tokenizer_config.json beside a SentencePiece tokenizer.model (Baichuan2, InternLM2, ChatGLM3 ship their
 * tokenizers this way, with remote code over transformers' slow tokenizer), taken as transformers takes it:
 * - the added tokens (added_tokens_decoder, then bos/eos/unk/pad/additional_special_tokens where the vocabulary
 *   has them) are split out of the raw text first, honouring lstrip/rstrip; SentencePiece encodes the rest;
 * - ChatGLM3 (tokenizer_class ChatGLMTokenizer): its nine special tokens, numbered from the vocabulary size, are
 *   split out wherever they occur (its encode_special_tokens; its chat template writes "[gMASK]sop<|user|>" as
 *   text; "encode_special_tokens": false keeps them plain text), and add_special_tokens writes [gMASK] sop. */
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "tokenizer/tok_internal.h"

static const char *const GLM_SPECIAL[] = { "[MASK]", "[gMASK]", "[sMASK]", "sop", "eop", "<|system|>", "<|user|>",
                                           "<|assistant|>", "<|observation|>" };

static int jflag(const cJSON *o, const char *key) { return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, key)); }

/* One added token (raw-text matched); a content already added keeps its first id, as transformers' map does. */
static vc_status push_added(vc_tokenizer *t, const char *s, int id, int special, const cJSON *flags) {
    size_t len = strlen(s);
    if (!len || tk_smap_get(&t->added_map, s, len) >= 0) return VC_OK;
    tk_added *a = realloc(t->added, ((size_t)t->n_added + 1) * sizeof *a);
    if (!a) return vc_fail(VC_ERR_NOMEM, "out of memory");
    t->added = a;
    a = &t->added[t->n_added];
    *a = (tk_added){ .s = vc_strdup(s), .len = len, .id = id, .special = (uint8_t)special };
    if (!a->s) return vc_fail(VC_ERR_NOMEM, "out of memory");
    t->n_added++;
    a->lstrip = (uint8_t)jflag(flags, "lstrip");
    a->rstrip = (uint8_t)jflag(flags, "rstrip");
    a->single_word = (uint8_t)jflag(flags, "single_word");
    vc_status st = tk_vocab_set(t, id, s, len, 0);
    if (!st && tk_smap_put(&t->added_map, s, len, id)) st = vc_fail(VC_ERR_NOMEM, "out of memory");
    return st;
}

/* A named special token (a string, or an object with "content" and flags) the vocabulary has. */
static vc_status push_named(vc_tokenizer *t, const cJSON *v) {
    const cJSON *c = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, "content") : v;
    if (!cJSON_IsString(c)) return VC_OK;
    int id = tk_smap_get(&t->vocab, c->valuestring, strlen(c->valuestring));
    return id < 0 ? VC_OK : push_added(t, c->valuestring, id, 1, cJSON_IsObject(v) ? v : NULL);
}

static int is_chatglm(const cJSON *cfg) {
    const cJSON *cls = cJSON_GetObjectItemCaseSensitive(cfg, "tokenizer_class");
    if (cJSON_IsString(cls)) return !strcmp(cls->valuestring, "ChatGLMTokenizer");
    const cJSON *am = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cfg, "auto_map"), "AutoTokenizer");
    const cJSON *first = cJSON_IsArray(am) ? cJSON_GetArrayItem(am, 0) : am;
    const char *s = cJSON_IsString(first) ? first->valuestring : "";
    size_t n = strlen(s), k = strlen(".ChatGLMTokenizer");
    return n >= k && !strcmp(s + n - k, ".ChatGLMTokenizer");
}

static vc_status chatglm_specials(vc_tokenizer *t, const cJSON *cfg) {
    int split = !cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(cfg, "encode_special_tokens"));
    int n = (int)(sizeof GLM_SPECIAL / sizeof *GLM_SPECIAL);
    for (int i = 0; i < n; i++) {
        const char *s = GLM_SPECIAL[i];
        /* not in the model's vocabulary (SentencePiece never produces them); found by name as added tokens */
        vc_status st = split ? push_added(t, s, t->n_pieces + i, 0, NULL) : tk_vocab_set(t, t->n_pieces + i, s, strlen(s), 0);
        if (!st && !split && tk_smap_put(&t->added_map, s, strlen(s), t->n_pieces + i)) st = VC_ERR_NOMEM;
        if (st) return st;
    }
    t->prefix_ids[0] = t->n_pieces + 1; /* [gMASK] */
    t->prefix_ids[1] = t->n_pieces + 3; /* sop */
    t->n_prefix = 2;
    t->add_bos = 0;
    return VC_OK;
}

vc_status tk_spm_config(vc_tokenizer *t, const char *config_path) {
    char *text = NULL;
    size_t len = 0;
    if (!config_path || !vc_file_exists(config_path)) return VC_OK;
    vc_status st = vc_read_file(config_path, &text, &len);
    if (st) return st;
    cJSON *cfg = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cfg) return vc_fail(VC_ERR_FORMAT, "%s: not valid JSON", config_path);
    if (is_chatglm(cfg)) st = chatglm_specials(t, cfg);
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(cfg, "added_tokens_decoder")) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "content");
        char *endp = NULL;
        long id = strtol(e->string ? e->string : "", &endp, 10);
        if (st || !cJSON_IsString(c) || endp == e->string || *endp || id < 0 || id > 100000000) continue;
        st = push_added(t, c->valuestring, (int)id, jflag(e, "special"), e);
    }
    const char *names[] = { "bos_token", "eos_token", "unk_token", "pad_token" };
    for (int i = 0; i < 4 && !st; i++) st = push_named(t, cJSON_GetObjectItemCaseSensitive(cfg, names[i]));
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(cfg, "additional_special_tokens")) if (!st) st = push_named(t, e);
    cJSON_Delete(cfg);
    return st;
}
