/* Python's ways with text for the tool-call parsers (py_text.c): spans, str.strip, json.loads, int(), float(),
 * ast.literal_eval and the findall scans of non-greedy DOTALL regexes. */
#ifndef VC_PY_TEXT_H
#define VC_PY_TEXT_H
#include <stddef.h>

struct cJSON;
typedef struct {
    const char *p;
    size_t n;
} pt_span;

/* the first lit in [p, end), NULL if none; whether [p, end) starts with lit */
const char *pt_find(const char *p, const char *end, const char *lit);
int pt_starts(const char *p, const char *end, const char *lit);
/* past the whitespace (str.isspace, UTF-8 included) at p */
const char *pt_skip_space(const char *p, const char *end);
pt_span pt_strip(pt_span s); /* str.strip() */
struct cJSON *pt_str_of(pt_span s);        /* a JSON string of the span */
struct cJSON *pt_json_loads(pt_span s);    /* json.loads of the whole span, NULL if it is not JSON */
/* a growing text (s NUL-terminated once anything is put; nomem: an allocation failed, the rest dropped) */
typedef struct pt_buf { char *s; size_t n, cap; int nomem; } pt_buf;
void pt_buf_put(pt_buf *b, const char *s, size_t n);
/* repr() of a number node as json.loads makes it: an int's digits, a float's repr ("3.0", "1e-05"); pt_json_loads'
 * nodes know which they are, other numbers print as ints when whole; 0 when v is not a number */
int pt_json_number_repr(const struct cJSON *v, char *buf, size_t cap);
/* Python's repr() of a value json.loads made (as_str: str(), a string as it is), malloc'd; NULL when out of memory */
char *pt_py_repr(const struct cJSON *v, int as_str);
struct cJSON *pt_json_or_text(pt_span s);  /* stripped, then json.loads, else the stripped text */
int pt_py_int(pt_span s, double *out);     /* int(text): 0 when Python refuses it */
int pt_py_float(pt_span s, double *out);   /* float(text): 0 when Python refuses it (inf and nan taken) */
struct cJSON *pt_literal_eval(pt_span s);  /* ast.literal_eval (strings, numbers, True/False/None, lists,
                                            * tuples as lists, dicts with string keys), NULL otherwise */
/* findall of "open(.*?)close|open(.*?)$" (greedy_tail: "open(.*)$"): the next body from p and where the scan
 * goes on; 0 when open is not there */
int pt_next_open(const char *p, const char *end, const char *open, const char *close, int greedy_tail, pt_span *body,
                 const char **next);
/* findall of "open(.*?)close": 0 when there is no complete one */
int pt_next_block(const char *p, const char *end, const char *open, const char *close, pt_span *body,
                  const char **next);
char *pt_dup(const char *p, size_t n); /* malloc'd copy with a NUL */
/* t[0..n) with every occurrence of each token (NULL entries skipped) removed, in place; the new length */
size_t pt_remove_all(char *t, size_t n, const char *const *tok, int ntok);
#endif
