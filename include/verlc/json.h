/* JSON helpers over cJSON: file loading with positioned syntax errors, typed getters with defaults. */
#ifndef VERLC_JSON_H
#define VERLC_JSON_H
#include <cjson/cJSON.h>
#include <stdint.h>
#include "verlc/core.h"

/* Parses a whole JSON file. A syntax error reads "PATH: JSON syntax error at byte N (line L, column C)". */
vc_status vc_json_load_file(const char *path, cJSON **out);
/* Parses len bytes of text; `what` names the source in error messages. Numbers keep their tokens
 * (vc_json_keep_numbers); repeated keys stay (a safetensors header refuses them by name). */
vc_status vc_json_parse(const char *text, size_t len, const char *what, cJSON **out);

/* json.loads tells 3 from 3.0 (an int from a float) and keeps every digit of an int; cJSON keeps a double. Where that
 * matters (a chat template prints 3.0 as transformers does, a tool gets Python's value) a number item keeps its token
 * as written in valuestring (cJSON copies and frees it with the item and prints numbers from valuedouble):
 * vc_json_keep_numbers sets them over the text root was parsed from (len bytes; numbers matched in document order;
 * nothing set when the two disagree). vc_json_number_is_float: a float by its token ('.', 'e' or 'E'), or, without
 * one, by its value (not integral, or past 2^53). */
void vc_json_keep_numbers(cJSON *root, const char *text, size_t len);
/* Repeated keys of an object as json.loads takes them (cJSON keeps every pair, and its lookups find the first): the
 * last value at the first key's place, the others dropped; throughout root. Dataset rows and tool-call arguments are
 * read so. */
void vc_json_py_keys(cJSON *root);
int vc_json_number_is_float(const cJSON *j);
/* cJSON_Print / cJSON_PrintUnformatted with every number exact, as json.dumps writes what json.loads read: an int's
 * kept digits (vc_json_keep_numbers' token, an INT64 past 2^53), a float's repr (its token says float: 1.0 stays 1.0),
 * an integral value without a token as digits (below 2^63), any other double as Python's repr (cJSON's own printing
 * can lose the last bit: its 15-digit form passes a relative check of one epsilon, so 556926.4760330019 came back as
 * 556926.476033002); non-finite numbers print null. Caller frees (free). */
char *vc_json_print(const cJSON *j, int pretty);

/* Typed getters on an object member. An absent or null member yields the default; a member of the wrong
 * type fails with VC_ERR_FORMAT naming `ctx` (usually the file path) and the key. The _req variants fail with
 * VC_ERR_MISSING when the member is absent or null. Integers accept integral JSON numbers only. */
vc_status vc_json_get_int(const cJSON *obj, const char *key, int64_t def, int64_t *out, const char *ctx);
vc_status vc_json_get_num(const cJSON *obj, const char *key, double def, double *out, const char *ctx);
vc_status vc_json_get_bool(const cJSON *obj, const char *key, int def, int *out, const char *ctx);
/* The returned string points into the cJSON tree. */
vc_status vc_json_get_str(const cJSON *obj, const char *key, const char *def, const char **out, const char *ctx);
vc_status vc_json_req_int(const cJSON *obj, const char *key, int64_t *out, const char *ctx);
vc_status vc_json_req_num(const cJSON *obj, const char *key, double *out, const char *ctx);
vc_status vc_json_req_str(const cJSON *obj, const char *key, const char **out, const char *ctx);
/* Member that is present and not null, or NULL. */
const cJSON *vc_json_member(const cJSON *obj, const char *key);
/* Short name of a JSON value's type ("string", "number", ...). */
const char *vc_json_type_name(const cJSON *v);
/* Writes s to f as a JSON string (quotes, backslashes and control characters escaped). */
#include <stdio.h>
void vc_json_fput_str(FILE *f, const char *s);
/* Sets (value: JSON text) or removes (value NULL) the top-level member `key` of the JSON object text *text, which
 * is replaced by a new malloc'd text; everything else keeps its bytes (numbers as written: 7.0 stays 7.0, which a
 * cJSON round trip would print as 7). A new member goes first. VC_ERR_FORMAT when *text is not an object. */
vc_status vc_json_text_set(char **text, const char *key, const char *value);
#endif
