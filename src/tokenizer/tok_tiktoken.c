/* tiktoken rank files: one "base64(token bytes) rank" line per token, as Qwen1 (qwen.tiktoken), GLM-4
 * (tokenizer.model) and Kimi (tiktoken.model) ship them with Python tokenizers that call tiktoken. Loaded as the tokenizer.json
 * pipeline they amount to: the model's split pattern, byte-level characters, BPE by rank (the model's
 * `tiktoken` mode: any adjacent pair whose bytes form a token merges, the lowest rank first; a piece that
 * is a token is taken whole), byte-level decoding. Which model's pattern, normalisation and special tokens
 * follows tokenizer_config.json's tokenizer_class (QWenTokenizer, ChatGLM4Tokenizer, TikTokenTokenizer), else the
 * file name:
 *  - Qwen1 (tokenization_qwen.py): NFC first; <|endoftext|>, <|im_start|>, <|im_end|>, <|extra_0..204|>
 *    from id 151643 (its SPECIAL_START_ID), all matched in text;
 *  - GLM-4 (tokenization_chatglm.py): its pattern (numbers in groups of up to 3 digits); special tokens
 *    from tokenizer_config.json's added_tokens_decoder, as transformers adds them;
 *  - Kimi (tokenization_kimi.py: Kimi-Linear, Kimi K2): its pattern (runs of Han characters apart; letters
 *    split by case, with class intersections); the 258 ids after the ranks are special tokens, named by
 *    added_tokens_decoder or <|reserved_token_ID|>, all matched in text (its encode allows them all). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "tokenizer/tok_internal.h"

static const char QWEN_PAT[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                               "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char GLM4_PAT[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                               "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char KIMI_PAT[] = "[\\p{Han}]+|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]*"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
#define QWEN_SPECIAL_START 151643
#define KIMI_SPECIALS 258 /* num_reserved_special_tokens 256 + 2 */

static int b64val(int c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* base64 s[0, n) into out (room for 3n/4 bytes); -1 when malformed */
static long b64decode(const char *s, size_t n, unsigned char *out) {
    if (n % 4) return -1;
    long k = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        for (int j = 0; j < 4; j++) v[j] = s[i + j] == '=' && i + 4 == n && j >= 2 ? 0 : b64val((unsigned char)s[i + j]);
        if (v[0] < 0 || v[1] < 0 || v[2] < 0 || v[3] < 0) return -1;
        out[k++] = (unsigned char)(v[0] << 2 | v[1] >> 4);
        if (s[i + 2] != '=') out[k++] = (unsigned char)(v[1] << 4 | v[2] >> 2);
        if (s[i + 3] != '=') out[k++] = (unsigned char)(v[2] << 6 | v[3]);
    }
    return k;
}

int tk_is_tiktoken(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char line[512];
    int ok = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    size_t i = 0;
    while (ok && line[i] && b64val((unsigned char)line[i]) >= 0) i++;
    while (ok && line[i] == '=') i++;
    if (!ok || !i || line[i] != ' ' || !isdigit((unsigned char)line[i + 1])) return 0;
    for (i++; isdigit((unsigned char)line[i]); i++) {
    }
    return line[i] == '\n' || line[i] == '\r' || !line[i];
}

/* the ranks as a tokenizer.json BPE vocab of byte-level strings; *n_ranks = highest rank + 1 */
static vc_status read_ranks(const char *path, cJSON *vocab, int *n_ranks) {
    char *text = NULL;
    size_t len = 0;
    vc_status st = vc_read_file(path, &text, &len);
    if (st) return st;
    unsigned char bytes[1024];
    char chars[2 * sizeof bytes + 1];
    long line = 0;
    *n_ranks = 0;
    for (char *p = text, *end = text + len; p < end && !st;) {
        char *nl = memchr(p, '\n', (size_t)(end - p)), *e = nl ? nl : end;
        line++;
        char *sp = memchr(p, ' ', (size_t)(e - p));
        long n = sp && (size_t)(sp - p) <= 4 * sizeof bytes / 3 ? b64decode(p, (size_t)(sp - p), bytes) : -1;
        char *rend = NULL;
        long rank = sp ? strtol(sp + 1, &rend, 10) : -1;
        if (e > p && e[-1] == '\r') e--;
        if (e == p) { /* blank line */
        } else if (n <= 0 || rank < 0 || rank > 10000000 || rend != e) {
            st = vc_fail(VC_ERR_FORMAT, "%s:%ld: not a 'base64 rank' line of a tiktoken file", path, line);
        } else {
            size_t k = 0; /* the byte-level characters of the token's bytes (vc_tokenizer_load built the table) */
            for (long i = 0; i < n; i++) {
                size_t cl = strlen(tk_bytelevel_char[bytes[i]]);
                memcpy(chars + k, tk_bytelevel_char[bytes[i]], cl);
                k += cl;
            }
            chars[k] = 0;
            if (!cJSON_AddNumberToObject(vocab, chars, (double)rank)) st = VC_ERR_NOMEM;
            if (rank + 1 > *n_ranks) *n_ranks = (int)rank + 1;
        }
        p = nl ? nl + 1 : end;
    }
    free(text);
    if (!st && !*n_ranks) st = vc_fail(VC_ERR_FORMAT, "%s: no tokens", path);
    return st;
}

static cJSON *added_token(const char *content, int id) {
    cJSON *a = cJSON_CreateObject();
    cJSON_AddNumberToObject(a, "id", id);
    cJSON_AddStringToObject(a, "content", content);
    cJSON_AddBoolToObject(a, "single_word", 0);
    cJSON_AddBoolToObject(a, "lstrip", 0);
    cJSON_AddBoolToObject(a, "rstrip", 0);
    cJSON_AddBoolToObject(a, "normalized", 0);
    cJSON_AddBoolToObject(a, "special", 1);
    return a;
}

/* tokenizer_config.json's added_tokens_decoder {"id": {"content", "special", ...}} as added_tokens */
static void config_added(const cJSON *cfg, cJSON *added) {
    const cJSON *dec = cJSON_GetObjectItemCaseSensitive(cfg, "added_tokens_decoder"), *e;
    cJSON_ArrayForEach(e, dec) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "content");
        char *endp = NULL;
        long id = strtol(e->string, &endp, 10);
        if (!cJSON_IsString(c) || *endp || id < 0 || id > 100000000) continue;
        cJSON *a = added_token(c->valuestring, (int)id);
        const char *flags[] = { "single_word", "lstrip", "rstrip", "normalized", "special" };
        for (int i = 0; i < 5; i++) {
            const cJSON *f = cJSON_GetObjectItemCaseSensitive(e, flags[i]);
            if (cJSON_IsBool(f)) cJSON_ReplaceItemInObjectCaseSensitive(a, flags[i], cJSON_CreateBool(cJSON_IsTrue(f)));
        }
        cJSON_AddItemToArray(added, a);
    }
}

static cJSON *pre_tokenizer(const char *pattern) {
    cJSON *seq = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(seq, "pretokenizers");
    cJSON_AddStringToObject(seq, "type", "Sequence");
    cJSON *split = cJSON_CreateObject(), *pat = cJSON_AddObjectToObject(split, "pattern");
    cJSON_AddStringToObject(split, "type", "Split");
    cJSON_AddStringToObject(pat, "Regex", pattern);
    cJSON_AddStringToObject(split, "behavior", "Isolated");
    cJSON_AddBoolToObject(split, "invert", 0);
    cJSON *bl = cJSON_CreateObject();
    cJSON_AddStringToObject(bl, "type", "ByteLevel");
    cJSON_AddBoolToObject(bl, "add_prefix_space", 0);
    cJSON_AddBoolToObject(bl, "use_regex", 0);
    cJSON_AddItemToArray(arr, split);
    cJSON_AddItemToArray(arr, bl);
    return seq;
}

vc_status tk_load_tiktoken(vc_tokenizer *t, const char *path, const char *config_path) {
    cJSON *cfg = NULL;
    char *text = NULL;
    size_t len = 0;
    if (config_path && vc_file_exists(config_path) && !vc_read_file(config_path, &text, &len)) {
        cfg = cJSON_ParseWithLength(text, len);
        free(text);
    }
    const cJSON *cls = cJSON_GetObjectItemCaseSensitive(cfg, "tokenizer_class");
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    int qwen = cJSON_IsString(cls) ? !strcmp(cls->valuestring, "QWenTokenizer") : !strcmp(base, "qwen.tiktoken");
    int kimi = cJSON_IsString(cls) ? !strcmp(cls->valuestring, "TikTokenTokenizer") : !strcmp(base, "tiktoken.model");
    cJSON *root = cJSON_CreateObject(), *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
    cJSON_AddArrayToObject(model, "merges");
    cJSON_AddBoolToObject(model, "ignore_merges", 1);
    int n_ranks = 0;
    vc_status st = read_ranks(path, vocab, &n_ranks);
    cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
    if (!st && qwen) {
        if (n_ranks > QWEN_SPECIAL_START)
            st = vc_fail(VC_ERR_FORMAT, "%s: %d ranks, more than Qwen's %d before its special tokens", path, n_ranks,
                         QWEN_SPECIAL_START);
        const char *fixed[] = { "<|endoftext|>", "<|im_start|>", "<|im_end|>" };
        for (int i = 0; i < 3 + 205; i++) {
            char name[32];
            snprintf(name, sizeof name, "<|extra_%d|>", i - 3);
            cJSON_AddItemToArray(added, added_token(i < 3 ? fixed[i] : name, QWEN_SPECIAL_START + i));
        }
        cJSON *nfc = cJSON_AddObjectToObject(root, "normalizer");
        cJSON_AddStringToObject(nfc, "type", "NFC");
    } else if (!st && kimi) { /* ids n_ranks .. n_ranks + 257: the config's names, else reserved ones */
        const cJSON *dec = cJSON_GetObjectItemCaseSensitive(cfg, "added_tokens_decoder");
        for (int i = 0; i < KIMI_SPECIALS; i++) {
            char key[24], name[48];
            snprintf(key, sizeof key, "%d", n_ranks + i);
            const cJSON *c = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(dec, key), "content");
            snprintf(name, sizeof name, "<|reserved_token_%d|>", n_ranks + i);
            cJSON_AddItemToArray(added, added_token(cJSON_IsString(c) ? c->valuestring : name, n_ranks + i));
        }
    } else if (!st) config_added(cfg, added);
    cJSON_AddItemToObject(root, "pre_tokenizer", pre_tokenizer(qwen ? QWEN_PAT : kimi ? KIMI_PAT : GLM4_PAT));
    cJSON *dec = cJSON_AddObjectToObject(root, "decoder");
    cJSON_AddStringToObject(dec, "type", "ByteLevel");
    if (!st) st = tk_load_json_root(t, root, path);
    if (!st) t->tiktoken = 1;
    cJSON_Delete(root);
    cJSON_Delete(cfg);
    return st;
}
