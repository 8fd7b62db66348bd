/* Hand-written matchers for the pre-tokenizer regexes of GPT-2 (ByteLevel), Llama 3 and Qwen2/3, used on
 * pure-ASCII text only, where their semantics are plain: \p{L} = [A-Za-z], \p{N} = [0-9],
 * \s = [\t\n\v\f\r ]. They reproduce Oniguruma's leftmost-first backtracking result for these patterns
 * (checked against Oniguruma itself by tests/tokenizer/test_tok_fastre.c). Any other text uses Oniguruma. */
#include <string.h>
#include "tokenizer/tok_internal.h"

static const char LLAMA3_RE[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char QWEN2_RE[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char GPT2_RE[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

int tk_fastre_kind(const char *pat, size_t len) {
    if (len == strlen(LLAMA3_RE) && !memcmp(pat, LLAMA3_RE, len)) return TK_FAST_LLAMA3;
    if (len == strlen(QWEN2_RE) && !memcmp(pat, QWEN2_RE, len)) return TK_FAST_QWEN2;
    if (len == strlen(GPT2_RE) && !memcmp(pat, GPT2_RE, len)) return TK_FAST_GPT2;
    return 0;
}

static inline int is_l(unsigned char c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
static inline int is_n(unsigned char c) { return c >= '0' && c <= '9'; }
static inline int is_s(unsigned char c) { return c == ' ' || (c >= 9 && c <= 13); }
static inline int is_p(unsigned char c) { return !is_s(c) && !is_l(c) && !is_n(c); }
static inline int is_nl(unsigned char c) { return c == '\r' || c == '\n'; }

/* 's 't 're 've 'm 'll 'd at i (case-insensitive for Llama 3 / Qwen); returns the end or 0 */
static size_t contraction(const unsigned char *s, size_t n, size_t i, int fold) {
    if (s[i] != '\'' || i + 1 >= n) return 0;
    unsigned char a = s[i + 1], b = i + 2 < n ? s[i + 2] : 0;
    if (fold) { a = (unsigned char)((a >= 'A' && a <= 'Z') ? a | 0x20 : a); b = (unsigned char)((b >= 'A' && b <= 'Z') ? b | 0x20 : b); }
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    return 0;
}

/* whitespace alternatives: \s*[\r\n]+ (Llama/Qwen only), \s+(?!\S), \s+ */
static size_t spaces(const unsigned char *s, size_t n, size_t i, int newline_alt) {
    size_t w = i;
    while (w < n && is_s(s[w])) w++;
    if (newline_alt) {
        size_t last = n;
        for (size_t j = i; j < w; j++) if (is_nl(s[j])) last = j;
        if (last < n) return last + 1;
    }
    if (w == n || w - i < 2) return w;
    return w - 1;
}

static size_t match_llama(const unsigned char *s, size_t n, size_t i, size_t maxdig) {
    size_t e = contraction(s, n, i, 1), j;
    if (e) return e;
    unsigned char c = s[i];
    if (!is_l(c) && !is_n(c) && !is_nl(c) && i + 1 < n && is_l(s[i + 1])) { for (j = i + 1; j < n && is_l(s[j]); j++) {} return j; }
    if (is_l(c)) { for (j = i; j < n && is_l(s[j]); j++) {} return j; }
    if (is_n(c)) { for (j = i; j < n && is_n(s[j]) && j - i < maxdig; j++) {} return j; }
    size_t k = c == ' ' ? i + 1 : i;
    if (k < n && is_p(s[k])) {
        for (j = k; j < n && is_p(s[j]); j++) {}
        while (j < n && is_nl(s[j])) j++;
        return j;
    }
    return spaces(s, n, i, 1);
}

static size_t match_gpt2(const unsigned char *s, size_t n, size_t i) {
    size_t e = contraction(s, n, i, 0), j;
    if (e) return e;
    size_t k = s[i] == ' ' ? i + 1 : i;
    if (k < n) {
        int (*cls)(unsigned char) = is_l(s[k]) ? is_l : is_n(s[k]) ? is_n : is_p(s[k]) ? is_p : NULL;
        if (cls) { for (j = k; j < n && cls(s[j]); j++) {} return j; }
    }
    return spaces(s, n, i, 0);
}

/* Every position of ASCII text starts a match of these patterns, so the spans tile the text. */
int tk_fastre_spans(int kind, const char *text, size_t n, size_t base, int (*add)(void *, size_t, size_t), void *arg) {
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < n;) {
        size_t e = kind == TK_FAST_GPT2 ? match_gpt2(s, n, i) : match_llama(s, n, i, kind == TK_FAST_LLAMA3 ? 3 : 1);
        if (e <= i) e = i + 1; /* cannot happen; keeps progress guaranteed */
        if (add(arg, base + i, base + e)) return -1;
        i = e;
    }
    return 0;
}
