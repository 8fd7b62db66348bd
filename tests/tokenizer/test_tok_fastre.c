/* The hand-written ASCII matchers of the GPT-2, Llama 3 and Qwen2 pre-tokenizer regexes give exactly the
 * spans Oniguruma gives, on random ASCII strings rich in the characters those patterns treat specially. */
#include <stdint.h>
#include "vc_test.h"
#include "tokenizer/tok_internal.h"

static const char *pats[] = {
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
};

int main(void) {
    static const char alpha[] = "'''sStTrReEvVmMlLdDxZ09 5   \t\n\r\n\x0b\x0c\x1c\x1f\x7f\x01.,!?-_#$<>|\"";
    uint32_t seed = 99;
    for (int k = 0; k < 3; k++) {
        char err[256];
        regex_t *re = tk_regex_new(pats[k], strlen(pats[k]), err, sizeof err);
        CHECK(re != NULL);
        int kind = tk_fastre_kind(pats[k], strlen(pats[k]));
        CHECK(kind != TK_FAST_NONE);
        if (!re) continue;
        int same = 0, total = 20000;
        for (int t = 0; t < total; t++) {
            char s[64];
            seed = seed * 1664525u + 1013904223u;
            size_t n = (seed >> 16) % 48;
            for (size_t i = 0; i < n; i++) { seed = seed * 1664525u + 1013904223u; s[i] = alpha[(seed >> 12) % (sizeof alpha - 1)]; }
            size_t *a = NULL, *b = NULL, na = 0, nb = 0;
            CHECK(tk_regex_spans(re, 0, s, n, &a, &na) == 0);
            CHECK(tk_regex_spans(re, kind, s, n, &b, &nb) == 0);
            int eq = na == nb && (na == 0 || !memcmp(a, b, na * sizeof *a));
            if (!eq && t - same < 5) {
                fprintf(stderr, "pattern %d differs on [", k);
                for (size_t i = 0; i < n; i++) fprintf(stderr, (unsigned char)s[i] < 32 ? "\\x%02x" : "%c", (unsigned char)s[i]);
                fprintf(stderr, "]\n");
            }
            same += eq;
            free(a); free(b);
        }
        CHECK_MSG(same == total, "pattern %d: %d/%d agree", k, same, total);
        printf("pattern %d: fast path agrees with Oniguruma on %d/%d random ASCII strings\n", k, same, total);
        onig_free(re);
    }
    CHECK(tk_fastre_kind("\\p{N}{1,3}", 10) == TK_FAST_NONE);
    return vc_test_done();
}
