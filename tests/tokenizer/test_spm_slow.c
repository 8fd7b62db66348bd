/* SentencePiece-only tokenizers with a tokenizer_config.json (Baichuan2, InternLM2, ChatGLM3 ship theirs so),
 * against transformers' slow tokenizer path (tests/fixtures/spm_slow, made by tools/fixtures/make_spm_slow_ref.py
 * over the shared spm_bpe_bytefallback model): added tokens split out of the text with lstrip/rstrip, bos by
 * add_bos_token; ChatGLM3's nine special tokens numbered after the vocabulary, [gMASK] sop prefixed by
 * add_special_tokens, its chat template rendered and encoded; "encode_special_tokens": false leaves them text.
 * Also: the specials decode to their text and skip_special_tokens drops the config's special tokens. */
#include "verlc/chat_template.h"
#include "verlc/core.h"
#include "verlc/tokenizer.h"
#include "vc_test.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int same_ids(const int32_t *got, size_t n, const cJSON *want) {
    int eq = (int)n == cJSON_GetArraySize(want);
    for (size_t i = 0; eq && i < n; i++) eq = got[i] == cJSON_GetArrayItem(want, (int)i)->valueint;
    return eq;
}

static int encode_eq(const vc_tokenizer *t, const char *text, int special, const cJSON *want) {
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK_OK(vc_tokenizer_encode(t, text, strlen(text), special, &ids, &n));
    int eq = same_ids(ids, n, want);
    free(ids);
    return eq;
}

static int chat_eq(const char *dir, const vc_tokenizer *t, const cJSON *messages, const cJSON *want) {
    vc_chat_template *ct = NULL;
    vc_chat_opts o = { .add_generation_prompt = 1, .enable_thinking = -1 };
    char *text = NULL;
    CHECK_OK(vc_chat_template_load(dir, &ct));
    if (ct) CHECK_OK(vc_chat_template_render(ct, messages, &o, &text));
    int eq = text && encode_eq(t, text, 0, want);
    if (!eq) fprintf(stderr, "chat: '%s'\n", text ? text : "(none)");
    free(text);
    vc_chat_template_free(ct);
    return eq;
}

/* Copies the case's tokenizer_config.json beside the shared tokenizer.model; returns the folder. */
static void make_case(const char *tmp, const char *name, char *dir, size_t cap) {
    char cmd[1200];
    snprintf(dir, cap, "%s/%s", tmp, name);
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp tests/fixtures/spm_slow/%s/tokenizer_config.json %s/ && "
             "cp %s/fixtures/tokenizers/spm_bpe_bytefallback/tokenizer.model %s/", dir, name, dir, vc_test_shared(), dir);
    CHECK(system(cmd) == 0);
}

static void compare(const char *tmp, const char *name) {
    char dir[600], ref[300];
    make_case(tmp, name, dir, sizeof dir);
    snprintf(ref, sizeof ref, "tests/fixtures/spm_slow/%s/reference.jsonl", name);
    vc_tokenizer *t = NULL;
    CHECK_OK(vc_tokenizer_load(dir, &t));
    FILE *f = fopen(ref, "r");
    CHECK_MSG(f != NULL, "%s missing", ref);
    if (!t || !f) {
        if (f) fclose(f);
        vc_tokenizer_free(t);
        return;
    }
    char *line = NULL;
    size_t cap = 0;
    int n = 0, bad = 0, chats = 0;
    while (getline(&line, &cap, f) > 0) {
        cJSON *j = cJSON_Parse(line);
        const cJSON *text = cJSON_GetObjectItem(j, "text"), *msgs = cJSON_GetObjectItem(j, "messages");
        int ok;
        if (msgs) {
            ok = chat_eq(dir, t, msgs, cJSON_GetObjectItem(j, "ids"));
            chats++;
        } else {
            ok = encode_eq(t, text->valuestring, 0, cJSON_GetObjectItem(j, "ids")) &&
                 encode_eq(t, text->valuestring, 1, cJSON_GetObjectItem(j, "ids_special"));
        }
        if (!ok && bad++ < 3) fprintf(stderr, "%s: row %d differs: %.100s\n", name, n + 1, line);
        cJSON_Delete(j);
        n++;
    }
    free(line);
    fclose(f);
    CHECK_MSG(bad == 0 && n > 150, "%s: %d of %d rows differ from transformers", name, bad, n);
    printf("%s: %d rows (%d chats) as transformers' slow tokenizer encodes them\n", name, n - bad, chats);
    vc_tokenizer_free(t);
}

static char *decode(const vc_tokenizer *t, const int32_t *ids, size_t n, int skip) {
    char *s = NULL;
    CHECK_OK(vc_tokenizer_decode(t, ids, n, skip, &s, NULL));
    return s ? s : vc_strdup("");
}

int main(void) {
    if (!vc_test_have_shared()) return vc_test_done();
    char tmp[128], dir[600];
    snprintf(tmp, sizeof tmp, "/tmp/verlc_spm_slow_%d", (int)getpid());
    compare(tmp, "slow");
    compare(tmp, "chatglm3");
    compare(tmp, "chatglm3_raw");
    { /* ChatGLM3: ids, special-token queries, decoding */
        make_case(tmp, "chatglm3", dir, sizeof dir);
        vc_tokenizer *t = NULL;
        CHECK_OK(vc_tokenizer_load(dir, &t));
        if (t) {
            CHECK(vc_tokenizer_token_to_id(t, "[gMASK]") == 1001 && vc_tokenizer_token_to_id(t, "<|observation|>") == 1008);
            CHECK(vc_tokenizer_eos_id(t) == 2 && vc_tokenizer_pad_id(t) == 0 && vc_tokenizer_vocab_size(t) >= 1009);
            int32_t ids[] = { 1001, 1003, 1006, 403, 299, 928, 1007, 2 };
            char *s = decode(t, ids, 8, 0), *k = decode(t, ids, 8, 1);
            CHECK_MSG(!strcmp(s, "[gMASK]sop<|user|> Hello<|assistant|>"), "decode: '%s'", s);
            CHECK_MSG(!strcmp(k, s), "skip_special_tokens keeps ChatGLM3's own specials (not transformers' special ids): '%s'", k);
            free(s);
            free(k);
        }
        vc_tokenizer_free(t);
    }
    { /* the generic case: skip_special_tokens drops the config's special tokens */
        snprintf(dir, sizeof dir, "%s/slow", tmp);
        vc_tokenizer *t = NULL;
        CHECK_OK(vc_tokenizer_load(dir, &t));
        if (t) {
            int32_t ids[] = { 1, 3, 637, 271, 4, 2 };
            char *s = decode(t, ids, 6, 1);
            CHECK_MSG(!strcmp(s, "user"), "skip: '%s'", s);
            free(s);
        }
        vc_tokenizer_free(t);
    }
    { /* malformed tokenizer_config.json beside a tokenizer.model: refused naming the file, or loaded */
        static const struct { const char *cfg; int ok; } BAD[] = {
            { "{\"added_tokens_decoder\": {\"x\": {\"content\": \"<a>\"}, \"-3\": {\"content\": \"<b>\"}, "
              "\"7\": {\"content\": 5}, \"8\": 3, \"9\": {\"content\": \"\"}}}", 1 },
            { "{\"added_tokens_decoder\": [1, 2], \"bos_token\": [\"<s>\"], \"additional_special_tokens\": 7}", 1 },
            { "{\"tokenizer_class\": \"ChatGLMTokenizer\", \"encode_special_tokens\": \"yes\", "
              "\"auto_map\": {\"AutoTokenizer\": 5}}", 1 },
            { "{\"auto_map\": {\"AutoTokenizer\": [null, \"x.ChatGLMTokenizer\"]}}", 1 },
            { "{\"added_tokens_decoder\": {\"4\": {\"content\": \"<|im_end|>\", \"rstrip\": \"no\"}}", 0 },
            { "not json", 0 },
        };
        for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
            char p[700];
            snprintf(dir, sizeof dir, "%s/bad%zu", tmp, i);
            snprintf(p, sizeof p, "mkdir -p %s && cp %s/fixtures/tokenizers/spm_bpe_bytefallback/tokenizer.model %s/", dir,
                     vc_test_shared(), dir);
            CHECK(system(p) == 0);
            snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
            CHECK_OK(vc_write_file_atomic(p, BAD[i].cfg, strlen(BAD[i].cfg)));
            vc_tokenizer *t = NULL;
            vc_status st = vc_tokenizer_load(dir, &t);
            CHECK_MSG(BAD[i].ok ? st == VC_OK : (st && strstr(vc_last_error(), "tokenizer_config.json") != NULL),
                      "config %zu: %s", i, st ? vc_last_error() : "loaded");
            if (t) { /* still encodes */
                int32_t *ids = NULL;
                size_t n = 0;
                CHECK_OK(vc_tokenizer_encode(t, "a <|im_end|> [gMASK]", 20, 1, &ids, &n));
                free(ids);
            }
            vc_tokenizer_free(t);
        }
    }
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    CHECK(system(cmd) == 0);
    return vc_test_done();
}
