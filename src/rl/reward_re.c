/* Python `re` operations for the reward functions: re.sub and the last item of re.findall, on UTF-8 text
 * with Oniguruma's Python syntax. */
#include "rl/reward_str.h"
#include "verlc/report.h"
#include <oniguruma.h>
#include <stdlib.h>
#include <string.h>

vc_status vc_rs_re_compile(const char *pattern, regex_t **re) {
    OnigErrorInfo ei;
    const UChar *p = (const UChar *)pattern;
    int r = onig_new(re, p, p + strlen(pattern), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8, ONIG_SYNTAX_PYTHON, &ei);
    if (r == ONIG_NORMAL) return VC_OK;
    *re = NULL;
    if (r == ONIGERR_MEMORY) return vc_fail(VC_ERR_NOMEM, "out of memory compiling the regular expression %s", pattern);
    UChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(msg, r, &ei);
    return vc_fail(VC_ERR_ARG, "bad regular expression %s: %s", pattern, (const char *)msg);
}

void vc_rs_re_free(regex_t *re) {
    if (re) onig_free(re);
}

/* ---- the output string: the project's vc_strbuf ---- */
/* the finished string in *out (an empty one when nothing was put) */
static vc_status sb_finish(vc_strbuf *b, char **out) {
    vc_sb_putn(b, "", 0);
    if (b->oom || !b->p) {
        free(b->p);
        *out = NULL;
        return vc_fail(VC_ERR_NOMEM, "out of memory in a regular-expression substitution");
    }
    *out = b->p;
    return VC_OK;
}

/* ---- matching ---- */
/* The next match at or after byte `at` into reg: 1, 0 when none, or a failing status (negative). */
static int next_match(regex_t *re, const char *s, size_t len, size_t at, OnigRegion *reg, vc_status *st) {
    const UChar *u = (const UChar *)s;
    int r = onig_search(re, u, u + len, u + at, u + len, reg, ONIG_OPTION_NONE);
    if (r >= 0) return 1;
    if (r == ONIG_MISMATCH) return 0;
    UChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(msg, r);
    *st = r == ONIGERR_MEMORY ? vc_fail(VC_ERR_NOMEM, "out of memory in a regular-expression search")
                              : vc_fail(VC_ERR_UNSUPPORTED, "regular-expression search failed: %s", (const char *)msg);
    return -1;
}

/* Where the search resumes after the match in reg: its end, or one character on after an empty match
 * (SIZE_MAX past the end of the text). */
static size_t resume_at(const char *s, size_t len, const OnigRegion *reg) {
    size_t b = (size_t)reg->beg[0], e = (size_t)reg->end[0];
    if (e > b) return e;
    return b < len ? b + vc_rs_u8len(s + b) : (size_t)-1;
}

static void put_group(vc_strbuf *b, const char *s, const OnigRegion *reg, int g) {
    if (g < reg->num_regs && reg->beg[g] >= 0) vc_sb_putn(b, s + reg->beg[g], (size_t)(reg->end[g] - reg->beg[g]));
}

/* appends repl with \1..\9 replaced by the groups of the match in reg */
static void expand(vc_strbuf *b, const char *repl, const char *s, const OnigRegion *reg) {
    for (const char *p = repl; *p; p++) {
        if (p[0] == '\\' && p[1] >= '1' && p[1] <= '9') put_group(b, s, reg, *++p - '0');
        else vc_sb_putn(b, p, 1);
    }
}

static vc_status check_refs(regex_t *re, const char *repl) {
    for (const char *p = repl; *p; p++)
        if (p[0] == '\\' && p[1] >= '1' && p[1] <= '9' && p[1] - '0' > onig_number_of_captures(re))
            return vc_fail(VC_ERR_ARG, "re.sub template %s: invalid group reference %c", repl, p[1]);
    return VC_OK;
}

vc_status vc_rs_re_sub(regex_t *re, const char *repl, const char *s, char **out) {
    *out = NULL;
    vc_status st = check_refs(re, repl);
    if (st) return st;
    OnigRegion *reg = onig_region_new();
    if (!reg) return vc_fail(VC_ERR_NOMEM, "out of memory in a regular-expression substitution");
    size_t len = strlen(s), copied = 0, at = 0;
    vc_strbuf b = { 0 };
    int m;
    while (at <= len && (m = next_match(re, s, len, at, reg, &st)) > 0) {
        vc_sb_putn(&b, s + copied, (size_t)reg->beg[0] - copied);
        expand(&b, repl, s, reg);
        copied = (size_t)reg->end[0];
        at = resume_at(s, len, reg);
    }
    onig_region_free(reg, 1);
    vc_sb_putn(&b, s + copied, len - copied);
    if (st) {
        free(b.p);
        return st;
    }
    return sb_finish(&b, out);
}

vc_status vc_rs_re_findall_last(regex_t *re, const char *s, char **out) {
    *out = NULL;
    OnigRegion *reg = onig_region_new();
    if (!reg) return vc_fail(VC_ERR_NOMEM, "out of memory in a regular-expression search");
    size_t len = strlen(s), at = 0, beg = 0, end = 0;
    int g = onig_number_of_captures(re) ? 1 : 0, found = 0, m;
    vc_status st = VC_OK;
    while (at <= len && (m = next_match(re, s, len, at, reg, &st)) > 0) {
        found = 1;
        beg = reg->beg[g] >= 0 ? (size_t)reg->beg[g] : 0;
        end = reg->beg[g] >= 0 ? (size_t)reg->end[g] : 0;
        at = resume_at(s, len, reg);
    }
    onig_region_free(reg, 1);
    if (st || !found) return st;
    *out = vc_rs_ndup(s + beg, end - beg);
    return *out ? VC_OK : vc_fail(VC_ERR_NOMEM, "out of memory in a regular-expression search");
}
