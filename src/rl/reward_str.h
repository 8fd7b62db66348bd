/* Small string helpers with Python str semantics for the reward functions (internal). */
#ifndef VC_RL_REWARD_STR_H
#define VC_RL_REWARD_STR_H
#include "verlc/core.h"
#include <stddef.h>
#include <stdint.h>

/* s.replace(old, new): a new string (NULL on allocation failure). */
char *vc_rs_replace(const char *s, const char *old, const char *rep);
/* Number of non-overlapping occurrences of sep in s (split count is this + 1). */
size_t vc_rs_count(const char *s, const char *sep);
/* Byte length of the UTF-8 character at s (1 for invalid bytes and ASCII). */
size_t vc_rs_u8len(const char *s);
/* Number of code points in the first n bytes of s. */
size_t vc_rs_cp_count(const char *s, size_t n);
/* New string of the n bytes at s. */
char *vc_rs_ndup(const char *s, size_t n);
/* str.isspace() of one code point: White_Space plus the separators U+001C..U+001F */
int vc_rs_py_space(int32_t c);
/* the code point of valid UTF-8 text at s (*c) and its byte length (1 for an invalid byte) */
size_t vc_rs_next_cp(const char *s, int32_t *c);
/* s.strip(): a new string (NULL on allocation failure) */
char *vc_rs_py_strip(const char *s);
/* 1 when s is valid UTF-8 */
int vc_rs_valid_utf8(const char *s);
/* a scorer's text arguments: VC_ERR_ARG naming the scorer `who` when solution or ground_truth is NULL or not UTF-8 */
vc_status vc_rs_check_texts(const char *who, const char *solution, const char *ground_truth);
/* Concatenation of up to 6 strings (NULLs ignored). */
char *vc_rs_cat(const char *a, const char *b, const char *c, const char *d, const char *e, const char *f);

/* Python's str.lower() (capitalize 0) or str.capitalize() (1: the first character's title case, the rest lowered), on
 * valid UTF-8, malloc'd: Unicode's simple case mappings (utf8proc) and the two context rules Python applies, capital
 * sigma's final form after a cased letter not followed by one, and U+0130 lowered to "i" and a combining dot;
 * Unicode's other multi-character mappings (a title-cased initial 'ß' -> "Ss", ligatures) are left single. */
char *vc_rs_py_case(const char *s, int capitalize);

/* ---- Python `re` on UTF-8 text (reward_re.c): Oniguruma with its Python syntax. The text must be valid
 * UTF-8; a compiled pattern may be used by several threads at once (each call has its own match region). */
struct re_pattern_buffer; /* Oniguruma's regex_t */
/* re.compile(pattern); VC_ERR_ARG with Oniguruma's message for a bad pattern. */
vc_status vc_rs_re_compile(const char *pattern, struct re_pattern_buffer **re);
void vc_rs_re_free(struct re_pattern_buffer *re);
/* *out = re.sub(pattern, repl, s) (malloc'd): every non-overlapping match, an empty match next to the
 * previous match included (Python 3.7+). repl: \1..\9 are group references (an unmatched group gives "");
 * every other character, backslashes included, is copied as it is (Python would also read escapes such as
 * \n and \\). After an empty match the search goes on one character later (Python would first try a
 * non-empty match at the same place; this differs only for patterns like "|a"). */
vc_status vc_rs_re_sub(struct re_pattern_buffer *re, const char *repl, const char *s, char **out);
/* re.findall(pattern, s)[-1] for a pattern with one group: the last non-overlapping match's group 1
 * ("" when it did not take part; the whole match for a pattern without groups), malloc'd; *out = NULL when
 * nothing matches. */
vc_status vc_rs_re_findall_last(struct re_pattern_buffer *re, const char *s, char **out);
#endif
