/* Helpers of the dataset conversions (verl's examples/data_preprocess scripts): a row's text field, a chat message of
 * joined parts. */
#ifndef VC_DATA_ROWS_H
#define VC_DATA_ROWS_H
#include "verlc/core.h"
struct cJSON;
/* raw's string field key into *out; VC_ERR_FORMAT "WHERE: `key` is missing / is not a string / is not valid UTF-8" */
vc_status vc_row_text(const struct cJSON *raw, const char *key, const char *where, const char **out);
/* {role, content: a b c d (NULL parts left out)} appended to list; 0 when out of memory or list is NULL */
int vc_row_message(struct cJSON *list, const char *role, const char *a, const char *b, const char *c, const char *d);
#endif
