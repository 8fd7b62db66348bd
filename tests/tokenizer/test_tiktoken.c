/* tiktoken-format tokenizers (Qwen1's qwen.tiktoken, GLM-4's tokenizer.model, Kimi's tiktoken.model) against the
 * Python tiktoken library as Qwen1's, GLM-4's and Kimi's own tokenizer code calls it (tests/fixtures/tiktoken, made by
 * tools/fixtures/make_tiktoken_ref.py: 519 texts each, special tokens included). The rank file is written
 * here from the shared Qwen3 tokenizer.json (Qwen2/3 kept Qwen1's 151,643 byte-level tokens) exactly as
 * the generator wrote the one it encoded with. Also: decoding gives the text back, a malformed rank file
 * is refused naming its line, a SentencePiece tokenizer.model still loads as SentencePiece. */
#include "verlc/core.h"
#include "verlc/tokenizer.h"
#include "vc_test.h"
#include <cjson/cJSON.h>
#include <unistd.h>

#define N_RANKS 151643

/* byte-level character (a code point) -> byte, GPT-2's table inverted */
static int cp_byte(int cp) {
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        if (printable ? cp == b : cp == 256 + n) return b;
        n += !printable;
    }
    return -1;
}

static int write_ranks(const char *path) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/fixtures/tokenizers/qwen3", vc_test_shared());
    vc_tokenizer *q = NULL;
    CHECK_OK(vc_tokenizer_load(dir, &q));
    FILE *f = q ? fopen(path, "w") : NULL;
    if (!f) {
        vc_tokenizer_free(q);
        return 0;
    }
    static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    int ok = 1;
    for (int id = 0; id < N_RANKS && ok; id++) {
        const unsigned char *s = (const unsigned char *)vc_tokenizer_id_to_token(q, id);
        unsigned char b[512];
        size_t n = 0;
        for (size_t i = 0; s && s[i] && n < sizeof b;) { /* UTF-8 code points of the byte-level string */
            int cp = s[i] < 0x80 ? s[i] : ((s[i] & 0x1F) << 6) | (s[i + 1] & 0x3F);
            i += s[i] < 0x80 ? 1 : 2;
            int by = cp_byte(cp);
            ok = by >= 0;
            b[n++] = (unsigned char)by;
        }
        ok = ok && s && n > 0;
        for (size_t i = 0; ok && i < n; i += 3) {
            unsigned v = (unsigned)b[i] << 16 | (i + 1 < n ? (unsigned)b[i + 1] << 8 : 0) | (i + 2 < n ? b[i + 2] : 0);
            fputc(B64[v >> 18 & 63], f);
            fputc(B64[v >> 12 & 63], f);
            fputc(i + 1 < n ? B64[v >> 6 & 63] : '=', f);
            fputc(i + 2 < n ? B64[v & 63] : '=', f);
        }
        fprintf(f, " %d\n", id);
    }
    fclose(f);
    vc_tokenizer_free(q);
    CHECK_MSG(ok, "could not write %s from the Qwen3 vocabulary", path);
    return ok;
}

static void compare(const char *tok_dir, const char *ref, int nfc) {
    vc_tokenizer *t = NULL;
    CHECK_OK(vc_tokenizer_load(tok_dir, &t));
    FILE *f = fopen(ref, "r");
    CHECK_MSG(f != NULL, "%s missing", ref);
    if (!t || !f) {
        if (f) fclose(f);
        vc_tokenizer_free(t);
        return;
    }
    char *line = NULL;
    size_t cap = 0;
    int n = 0, bad = 0, round = 0;
    while (getline(&line, &cap, f) > 0) {
        cJSON *j = cJSON_Parse(line);
        const char *text = cJSON_GetObjectItem(j, "text")->valuestring;
        const cJSON *ids = cJSON_GetObjectItem(j, "ids");
        int32_t *got = NULL;
        size_t ng = 0;
        CHECK_OK(vc_tokenizer_encode(t, text, strlen(text), 0, &got, &ng));
        int eq = (int)ng == cJSON_GetArraySize(ids);
        for (size_t i = 0; eq && i < ng; i++) eq = got[i] == cJSON_GetArrayItem(ids, (int)i)->valueint;
        if (!eq && bad++ < 3) fprintf(stderr, "%s: '%.80s': %zu ids, want %d\n", tok_dir, text, ng, cJSON_GetArraySize(ids));
        char *back = NULL;
        size_t nb = 0;
        CHECK_OK(vc_tokenizer_decode(t, got, ng, 0, &back, &nb));
        round += back && nb == strlen(text) && !memcmp(back, text, nb);
        free(back);
        free(got);
        cJSON_Delete(j);
        n++;
    }
    free(line);
    fclose(f);
    CHECK_MSG(bad == 0 && n > 500, "%s: %d of %d texts differ from tiktoken", tok_dir, bad, n);
    /* decoding gives the text back, except the few texts NFC changes (Qwen1 normalises) */
    CHECK_MSG(round >= n - (nfc ? 12 : 0), "%s: %d of %d texts decode back", tok_dir, round, n);
    printf("%s: %d texts as tiktoken encodes them, %d decode back exactly\n", tok_dir, n - bad, round);
    vc_tokenizer_free(t);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

int main(void) {
    if (!vc_test_have_shared()) return vc_test_done();
    char dir[128], p[300], q[300];
    snprintf(dir, sizeof dir, "/tmp/verlc_tiktoken_%d", (int)getpid());
    snprintf(p, sizeof p, "mkdir -p %s/qwen1 %s/glm4 %s/kimi %s/bad", dir, dir, dir, dir);
    CHECK(system(p) == 0);
    snprintf(p, sizeof p, "%s/qwen1/qwen.tiktoken", dir);
    if (!write_ranks(p)) return vc_test_done();
    snprintf(q, sizeof q, "%s/qwen1/tokenizer_config.json", dir);
    write_text(q, "{\"tokenizer_class\": \"QWenTokenizer\", \"model_max_length\": 8192}\n");
    snprintf(q, sizeof q, "cp %s %s/glm4/tokenizer.model && cp tests/fixtures/tiktoken/glm4_tokenizer_config.json "
             "%s/glm4/tokenizer_config.json", p, dir, dir);
    CHECK(system(q) == 0);
    snprintf(q, sizeof q, "cp %s %s/kimi/tiktoken.model && cp tests/fixtures/tiktoken/kimi_tokenizer_config.json "
             "%s/kimi/tokenizer_config.json", p, dir, dir);
    CHECK(system(q) == 0);
    snprintf(q, sizeof q, "%s/qwen1", dir);
    compare(q, "tests/fixtures/tiktoken/qwen1.jsonl", 1);
    snprintf(q, sizeof q, "%s/kimi", dir);
    compare(q, "tests/fixtures/tiktoken/kimi.jsonl", 0);
    { /* Kimi: the config's names and the reserved ones after the ranks are special tokens; BOS / EOS by name */
        vc_tokenizer *t = NULL;
        CHECK_OK(vc_tokenizer_load(q, &t));
        CHECK(t && vc_tokenizer_token_to_id(t, "<|im_end|>") == N_RANKS + 2 && vc_tokenizer_is_special(t, N_RANKS + 2) &&
              vc_tokenizer_token_to_id(t, "<|reserved_token_151900|>") == 151900 && vc_tokenizer_eos_id(t) == N_RANKS + 1);
        vc_tokenizer_free(t);
    }
    snprintf(q, sizeof q, "%s/glm4", dir);
    compare(q, "tests/fixtures/tiktoken/glm4.jsonl", 0);
    { /* GLM-4's special tokens from added_tokens_decoder; eos from the config */
        vc_tokenizer *t = NULL;
        CHECK_OK(vc_tokenizer_load(q, &t));
        CHECK(t && vc_tokenizer_token_to_id(t, "<|user|>") == N_RANKS + 7 && vc_tokenizer_is_special(t, N_RANKS + 7) &&
              vc_tokenizer_eos_id(t) == N_RANKS);
        vc_tokenizer_free(t);
    }
    /* a broken line is named */
    snprintf(q, sizeof q, "%s/bad/qwen.tiktoken", dir);
    write_text(q, "IQ== 0\nIg== 1\nnot base64! 2\n");
    snprintf(q, sizeof q, "%s/bad", dir);
    vc_tokenizer *t = NULL;
    vc_status st = vc_tokenizer_load(q, &t);
    CHECK_MSG(st && !t && strstr(vc_last_error(), "qwen.tiktoken:3:"), "malformed rank file: %d '%s'", st,
              vc_last_error());
    /* a SentencePiece tokenizer.model is not taken for a rank file */
    snprintf(q, sizeof q, "%s/fixtures/tokenizers/spm_bpe_bytefallback", vc_test_shared());
    CHECK_OK(vc_tokenizer_load(q, &t));
    vc_tokenizer_free(t);
    snprintf(p, sizeof p, "rm -rf %s", dir);
    CHECK(system(p) == 0);
    return vc_test_done();
}
