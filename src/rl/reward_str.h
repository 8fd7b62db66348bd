/* Small string helpers with Python str semantics for the reward functions (internal). */
#ifndef VC_RL_REWARD_STR_H
#define VC_RL_REWARD_STR_H
#include <stddef.h>

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
/* Concatenation of up to 6 strings (NULLs ignored). */
char *vc_rs_cat(const char *a, const char *b, const char *c, const char *d, const char *e, const char *f);
#endif
