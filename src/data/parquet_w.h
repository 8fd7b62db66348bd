/* Parquet writing (internal): the schema inferred from JSON rows (parquet_infer.c), as pyarrow infers a table's
 * types from Python rows, and the leaf columns the rows are shredded into (parquet_write.c). */
#ifndef VC_DATA_PARQUET_W_H
#define VC_DATA_PARQUET_W_H
#include "parquet_tw.h"
#include "verlc/core.h"
#include <stddef.h>
#include <stdint.h>

/* a column's or field's type: PW_NULL (only nulls seen: pyarrow's null type), a leaf, a list or a struct */
enum { PW_NULL, PW_BOOL, PW_INT, PW_DOUBLE, PW_STRING, PW_LIST, PW_STRUCT };

typedef struct pw_node {
    char *name;
    int kind;
    struct pw_node *elem;  /* PW_LIST: the items' node */
    struct pw_node **kids; /* PW_STRUCT: fields in the order first seen */
    int n_kids, cap_kids;
    int neg, big; /* PW_INT: a value below 0 seen; one past 2^63 - 1 (the column is then uint64, as pyarrow's) */
    int64_t n_str, n_uri; /* PW_STRING: strings seen, and those that are VC_DATA_URI_BINARY's (all: a binary column) */
    /* set by pw_levels */
    int def, rep; /* definition and repetition levels where the value is present */
    int leaf;     /* a leaf's column index (-1 for groups) */
} pw_node;

struct cJSON;
/* the root (a struct of the rows' keys) merged with row `index` (1-based, for messages); a type that cannot join
 * the earlier rows' (a string where numbers were, an object where lists were) fails naming the row and key */
vc_status pw_infer(pw_node *root, const struct cJSON *row, size_t index, const char *path);
/* numbers the leaves in schema order and sets every node's levels; returns the leaf count (-1: a struct without
 * fields, which Parquet cannot hold: named in the error) */
int pw_levels(pw_node *root, const char *path);
void pw_node_free(pw_node *n);
/* a string column every value of which is the reader's data URI of binary bytes: written as binary */
int pw_binary(const pw_node *n);
/* an int's value (its kept digits past 2^53); 0 when it is past int64's range */
int pw_int_value(const struct cJSON *j, int64_t *out);
/* an int from 2^63 to 2^64 - 1 (uint64); 0 otherwise */
int pw_uint_value(const struct cJSON *j, uint64_t *out);
/* a row read back (b) equals the row written (a): a repeated key's last value is the one written (json.loads'),
 * a key a row lacks reads as null, an int in a column of floats as
 * that float (ints compared by their 64 bits) */
int pw_same(const struct cJSON *a, const struct cJSON *b);
/* Hugging Face datasets' "huggingface" metadata for the schema under root ({"info": {"features": ...}}, each column's
 * feature as datasets infers it from the Arrow type; the top-level columns named in images, a {bytes, path} struct or
 * a list of them, as its Image feature), newly allocated into *out; a named column that is not such fails naming it */
vc_status pw_hf_features(const pw_node *root, const char *const *images, int n_images, const char *path, char **out);
/* the image columns' {bytes, path} fields that only ever held null given Image's storage types (binary, string), as
 * datasets writes them; before pw_levels */
void pw_hf_image_types(pw_node *root, const char *const *images, int n_images);
/* the writer's page and row-group sizes in bytes (0: the defaults, 1 MiB and 128 MiB), for tests */
void pw_set_limits(size_t page_bytes, size_t group_bytes);
#endif
