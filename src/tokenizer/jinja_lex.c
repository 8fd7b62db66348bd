/* Lexer: template source to a flat token list. Text between tags becomes T_TEXT with Jinja's
 * whitespace control already applied ({%- -%} {{- -}}, trim_blocks, lstrip_blocks, {%+ +%});
 * comments vanish; {% raw %} bodies become text. Inside tags, expression tokens. */
#include "tokenizer/jinja.h"
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *s;
    size_t n, pos;
    jtok *t;
    int nt, cap;
    int lstrip_next;   /* the previous tag ended with '-': strip leading whitespace of next text */
} lexer;

void jinja_linecol(const char *src, int pos, int *line, int *col) {
    int l = 1, c = 1;
    for (int i = 0; i < pos && src[i]; i++) {
        if (src[i] == '\n') { l++; c = 1; } else c++;
    }
    *line = l;
    *col = c;
}

static vc_status lex_fail(const lexer *L, size_t pos, const char *msg) {
    int line, col;
    jinja_linecol(L->s, (int)pos, &line, &col);
    return vc_fail(VC_ERR_FORMAT, "chat template line %d col %d: %s", line, col, msg);
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

static vc_status push(lexer *L, jtok tk) {
    if (L->nt == L->cap) {
        int cap = L->cap ? 2 * L->cap : 64;
        jtok *p = realloc(L->t, cap * sizeof *p);
        if (!p) { free(tk.s); return vc_fail(VC_ERR_NOMEM, "chat template: out of memory"); }
        L->t = p;
        L->cap = cap;
    }
    L->t[L->nt++] = tk;
    return VC_OK;
}

static vc_status push_text(lexer *L, size_t start, size_t end) {
    if (L->lstrip_next) while (start < end && is_ws(L->s[start])) start++;
    L->lstrip_next = 0;
    if (start >= end) return VC_OK;
    jtok tk = { .k = T_TEXT, .pos = (int)start, .len = end - start };
    tk.s = malloc(tk.len + 1);
    if (!tk.s) return vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
    memcpy(tk.s, L->s + start, tk.len);
    tk.s[tk.len] = 0;
    return push(L, tk);
}

/* Whitespace before a tag: '-' strips all of it; lstrip_blocks strips spaces back to a line start. */
static size_t text_end_before_tag(const lexer *L, size_t start, size_t tag, char kind, char sign) {
    size_t end = tag;
    if (sign == '-') {
        while (end > start && is_ws(L->s[end - 1])) end--;
    } else if (sign != '+' && kind != '{') {
        size_t l = end;
        while (l > start && L->s[l - 1] != '\n') l--;
        int line_start = l > start || start == 0 || L->s[start - 1] == '\n';
        int all_ws = l < end;
        for (size_t i = l; i < end; i++) if (!is_ws(L->s[i])) all_ws = 0;
        if (line_start && all_ws) end = l;
    }
    return end;
}

/* After a block or comment end: '-' strips what follows, else trim_blocks eats one newline. */
static void after_block_end(lexer *L, char sign) {
    if (sign == '-') L->lstrip_next = 1;
    else if (sign != '+' && L->pos < L->n && L->s[L->pos] == '\n') L->pos++;
}

static int decode_escape(const char *s, size_t n, size_t *i, char *out, int *olen) {
    char c = s[*i];
    *olen = 1;
    switch (c) {
    case 'n': out[0] = '\n'; return 1;
    case 't': out[0] = '\t'; return 1;
    case 'r': out[0] = '\r'; return 1;
    case '0': out[0] = '\0'; return 1;
    case 'b': out[0] = '\b'; return 1;
    case 'f': out[0] = '\f'; return 1;
    case 'v': out[0] = '\v'; return 1;
    case 'a': out[0] = '\a'; return 1;
    case '\\': case '\'': case '"': out[0] = c; return 1;
    case '\n': *olen = 0; return 1;
    case 'x': case 'u': case 'U': {
        int nd = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        if (*i + nd >= n) return 0;
        uint32_t cp = 0;
        for (int k = 1; k <= nd; k++) {
            char h = s[*i + k];
            if (!isxdigit((unsigned char)h)) return 0;
            cp = cp * 16 + (uint32_t)(isdigit((unsigned char)h) ? h - '0' : (tolower(h) - 'a' + 10));
        }
        if (cp > 0x10FFFF) return 0;
        *i += nd;
        int k = 0;
        if (cp < 0x80) out[k++] = (char)cp;
        else if (cp < 0x800) { out[k++] = (char)(0xC0 | cp >> 6); out[k++] = (char)(0x80 | (cp & 0x3F)); }
        else if (cp < 0x10000) {
            out[k++] = (char)(0xE0 | cp >> 12); out[k++] = (char)(0x80 | ((cp >> 6) & 0x3F));
            out[k++] = (char)(0x80 | (cp & 0x3F));
        } else {
            out[k++] = (char)(0xF0 | cp >> 18); out[k++] = (char)(0x80 | ((cp >> 12) & 0x3F));
            out[k++] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[k++] = (char)(0x80 | (cp & 0x3F));
        }
        *olen = k;
        return 1;
    }
    default: out[0] = '\\'; out[1] = c; *olen = 2; return 1; /* unknown escapes stay, as in Python */
    }
}

static vc_status lex_string(lexer *L) {
    char q = L->s[L->pos];
    size_t start = L->pos++;
    char *buf = malloc(L->n - L->pos + 1);
    size_t o = 0;
    if (!buf) return vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
    while (L->pos < L->n && L->s[L->pos] != q) {
        if (L->s[L->pos] == '\\' && L->pos + 1 < L->n) {
            L->pos++;
            char tmp[8];
            int k;
            if (!decode_escape(L->s, L->n, &L->pos, tmp, &k)) {
                free(buf);
                return lex_fail(L, L->pos, "bad escape sequence in string literal");
            }
            memcpy(buf + o, tmp, k);
            o += k;
            L->pos++;
        } else buf[o++] = L->s[L->pos++];
    }
    if (L->pos >= L->n) { free(buf); return lex_fail(L, start, "unterminated string literal"); }
    L->pos++;
    buf[o] = 0;
    jtok tk = { .k = T_STR, .pos = (int)start, .s = buf, .len = o };
    return push(L, tk);
}

static vc_status lex_number(lexer *L) {
    size_t start = L->pos;
    int is_float = 0;
    while (L->pos < L->n && (isdigit((unsigned char)L->s[L->pos]) || L->s[L->pos] == '_')) L->pos++;
    if (L->pos + 1 < L->n && L->s[L->pos] == '.' && isdigit((unsigned char)L->s[L->pos + 1])) {
        is_float = 1;
        L->pos++;
        while (L->pos < L->n && isdigit((unsigned char)L->s[L->pos])) L->pos++;
    }
    if (L->pos < L->n && (L->s[L->pos] == 'e' || L->s[L->pos] == 'E')) {
        size_t p = L->pos + 1;
        if (p < L->n && (L->s[p] == '+' || L->s[p] == '-')) p++;
        if (p < L->n && isdigit((unsigned char)L->s[p])) {
            is_float = 1;
            while (p < L->n && isdigit((unsigned char)L->s[p])) p++;
            L->pos = p;
        }
    }
    char buf[64];
    size_t o = 0;
    for (size_t i = start; i < L->pos && o < sizeof buf - 1; i++) if (L->s[i] != '_') buf[o++] = L->s[i];
    buf[o] = 0;
    jtok tk = { .k = is_float ? T_FLOAT : T_INT, .pos = (int)start };
    if (is_float) tk.f = strtod(buf, NULL);
    else tk.i = strtoll(buf, NULL, 10);
    return push(L, tk);
}

static const char *OPS[] = { "**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">",
                             "=", "(", ")", "[", "]", "{", "}", ",", ".", ":", "|", NULL };

/* Tokens inside {{ }} or {% %} up to the closing delimiter. */
static vc_status lex_tag(lexer *L, char kind, size_t open) {
    const char *close = kind == '{' ? "}}" : "%}";
    int depth = 0;
    for (;;) {
        while (L->pos < L->n && is_ws(L->s[L->pos])) L->pos++;
        if (L->pos >= L->n)
            return lex_fail(L, open, kind == '{' ? "unclosed '{{' (missing '}}')" : "unclosed '{%' (missing '%}')");
        const char *p = L->s + L->pos;
        char sign = 0;
        if ((*p == '-' || *p == '+') && !strncmp(p + 1, close, 2) && depth == 0) sign = *p;
        if (sign || (!strncmp(p, close, 2) && depth == 0)) {
            jtok tk = { .k = kind == '{' ? T_VEND : T_BEND, .pos = (int)L->pos };
            L->pos += sign ? 3 : 2;
            vc_status st = push(L, tk);
            if (st) return st;
            if (kind == '{') { if (sign == '-') L->lstrip_next = 1; }
            else after_block_end(L, sign);
            return VC_OK;
        }
        char c = *p;
        vc_status st;
        if (c == '"' || c == '\'') st = lex_string(L);
        else if (isdigit((unsigned char)c)) st = lex_number(L);
        else if (isalpha((unsigned char)c) || c == '_') {
            size_t s0 = L->pos;
            while (L->pos < L->n && (isalnum((unsigned char)L->s[L->pos]) || L->s[L->pos] == '_')) L->pos++;
            jtok tk = { .k = T_NAME, .pos = (int)s0, .len = L->pos - s0 };
            tk.s = malloc(tk.len + 1);
            if (!tk.s) return vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
            memcpy(tk.s, L->s + s0, tk.len);
            tk.s[tk.len] = 0;
            st = push(L, tk);
        } else {
            const char *op = NULL;
            for (int i = 0; OPS[i]; i++)
                if (!strncmp(p, OPS[i], strlen(OPS[i]))) { op = OPS[i]; break; }
            if (!op) return lex_fail(L, L->pos, "unexpected character in tag");
            if (*op == '(' || *op == '[' || *op == '{') depth++;
            if ((*op == ')' || *op == ']' || *op == '}') && depth > 0) depth--;
            jtok tk = { .k = T_OP, .pos = (int)L->pos, .len = strlen(op) };
            tk.s = strdup(op);
            L->pos += tk.len;
            st = tk.s ? push(L, tk) : vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
        }
        if (st) return st;
    }
}

/* "{% raw %}" at `at` (after '{%' and sign)? Sets *after to just past '%}'. */
static int match_word_tag(const lexer *L, size_t at, const char *word, size_t *after, char *end_sign) {
    size_t p = at;
    while (p < L->n && is_ws(L->s[p])) p++;
    size_t wl = strlen(word);
    if (strncmp(L->s + p, word, wl) || (p + wl < L->n && (isalnum((unsigned char)L->s[p + wl]) || L->s[p + wl] == '_')))
        return 0;
    p += wl;
    while (p < L->n && is_ws(L->s[p])) p++;
    *end_sign = 0;
    if (p < L->n && (L->s[p] == '-' || L->s[p] == '+')) *end_sign = L->s[p++];
    if (strncmp(L->s + p, "%}", 2)) return 0;
    *after = p + 2;
    return 1;
}

static vc_status lex_raw(lexer *L, size_t body, char open_end_sign, size_t open) {
    L->pos = body;
    if (open_end_sign == '-') L->lstrip_next = 1;
    for (size_t p = body; p + 1 < L->n; p++) {
        if (L->s[p] != '{' || L->s[p + 1] != '%') continue;
        size_t q = p + 2;
        char sign = 0;
        if (q < L->n && (L->s[q] == '-' || L->s[q] == '+')) sign = L->s[q++];
        size_t after;
        char esign;
        if (!match_word_tag(L, q, "endraw", &after, &esign)) continue;
        size_t end = sign == '-' ? text_end_before_tag(L, body, p, '%', '-') : p;
        vc_status st = push_text(L, body, end);
        if (st) return st;
        L->pos = after;
        after_block_end(L, esign);
        return VC_OK;
    }
    return lex_fail(L, open, "unclosed '{% raw %}' (missing '{% endraw %}')");
}

static vc_status lex_all(lexer *L) {
    size_t text_start = L->pos;
    while (L->pos < L->n) {
        const char *hit = NULL;
        for (size_t p = L->pos; p + 1 < L->n; p++)
            if (L->s[p] == '{' && (L->s[p + 1] == '{' || L->s[p + 1] == '%' || L->s[p + 1] == '#')) {
                hit = L->s + p;
                break;
            }
        if (!hit) break;
        size_t tag = (size_t)(hit - L->s);
        char kind = hit[1];
        char sign = (tag + 2 < L->n && (hit[2] == '-' || hit[2] == '+')) ? hit[2] : 0;
        if (kind == '{' && sign == '+') sign = 0; /* '+' only modifies block and comment tags */
        vc_status st = push_text(L, text_start, text_end_before_tag(L, text_start, tag, kind, sign));
        if (st) return st;
        L->pos = tag + 2 + (sign ? 1 : 0);
        if (kind == '#') {
            const char *e = strstr(L->s + L->pos, "#}");
            if (!e) return lex_fail(L, tag, "unclosed comment (missing '#}')");
            char esign = (e > L->s + L->pos && (e[-1] == '-' || e[-1] == '+')) ? e[-1] : 0;
            L->pos = (size_t)(e - L->s) + 2;
            after_block_end(L, esign);
        } else {
            size_t after;
            char esign;
            if (kind == '%' && match_word_tag(L, L->pos, "raw", &after, &esign)) {
                st = lex_raw(L, after, esign, tag);
            } else {
                jtok tk = { .k = kind == '{' ? T_VBEGIN : T_BBEGIN, .pos = (int)tag };
                st = push(L, tk);
                if (!st) st = lex_tag(L, kind, tag);
            }
            if (st) return st;
        }
        text_start = L->pos;
    }
    vc_status st = push_text(L, text_start, L->n);
    if (st) return st;
    jtok eof = { .k = T_EOF, .pos = (int)L->n };
    return push(L, eof);
}

vc_status jinja_lex(const char *src, jtok **out, int *n) {
    lexer L = { .s = src, .n = strlen(src) };
    vc_status st = lex_all(&L);
    if (st) { jinja_tokens_free(L.t, L.nt); return st; }
    *out = L.t;
    *n = L.nt;
    return VC_OK;
}

void jinja_tokens_free(jtok *t, int n) {
    for (int i = 0; i < n; i++) free(t[i].s);
    free(t);
}
