/* Parquet reading (internal): the footer's metadata (Thrift compact protocol, parquet_meta.c), one column
 * chunk's pages decoded into levels and values (parquet_col.c), and rows assembled from the leaf columns
 * into JSON objects (parquet.c), with the less common encodings in parquet_enc.c. No Parquet library is
 * packaged for Debian; the codecs come from Debian's snappy, zlib, zstd, lz4 and brotli. Not read:
 * encrypted files and the LZO codec (each refused by name). */
#ifndef VC_DATA_PARQUET_H
#define VC_DATA_PARQUET_H
#include "verlc/core.h"
#include <stddef.h>
#include <stdint.h>

enum { PQ_BOOLEAN, PQ_INT32, PQ_INT64, PQ_INT96, PQ_FLOAT, PQ_DOUBLE, PQ_BYTE_ARRAY, PQ_FIXED };
enum { PQ_REQUIRED, PQ_OPTIONAL, PQ_REPEATED };
enum { PQ_K_PLAIN, PQ_K_LIST, PQ_K_MAP }; /* how a group becomes JSON: object, array, object from key/value */

typedef struct pq_node {
    char *name;
    int type, type_length, repetition, num_children;
    int converted; /* converted_type, -1 none */
    int logical;   /* LogicalType union field id, 0 none */
    int scale, int_bits, int_signed, decimal;
    /* filled by the schema analysis */
    int parent, first_child, kind, unwrap; /* unwrap: a list's repeated group whose one child is the item */
    int def, rep;                          /* definition and repetition levels where the node is present */
    int leaf0, leaf1;                      /* leaf columns under the node: [leaf0, leaf1) */
} pq_node;

typedef struct pq_chunk {
    int type, codec;
    int64_t num_values, data_off, dict_off, total_size;
} pq_chunk;

typedef struct pq_group {
    int64_t num_rows;
    pq_chunk *cols; /* [n_leaves] */
} pq_group;

typedef struct pq_file {
    const char *path;
    const uint8_t *data;
    size_t size;
    pq_node *nodes;
    int n_nodes, n_leaves;
    int *leaf_node; /* [n_leaves] node index of each leaf column, in schema order */
    pq_group *groups;
    int n_groups;
    int64_t num_rows;
    char *hf_meta; /* the key-value metadata "huggingface" (Hugging Face datasets' features, JSON), NULL: none */
} pq_file;

/* one value of a leaf column: numbers widened, byte arrays pointing into a page buffer */
typedef struct pq_val {
    union {
        int64_t i;
        double d;
        struct {
            const uint8_t *p;
            uint32_t n;
        } s;
    };
} pq_val;

/* a leaf column of one row group, decoded */
typedef struct pq_column {
    uint16_t *def, *rep; /* [n] levels (NULL when the maximum level is 0) */
    int64_t n;           /* entries (levels) */
    pq_val *vals;        /* values of the entries at the maximum definition level */
    int64_t n_vals;
    uint8_t **bufs; /* page buffers the byte-array values point into */
    int n_bufs, cap_bufs;
} pq_column;

/* the footer's metadata of the file held in data[0, size); *f is cleared by pq_meta_free */
vc_status pq_meta_read(pq_file *f);
void pq_meta_free(pq_file *f);
/* the full dotted name of a leaf column ("prompt.list.element.content") into buf */
const char *pq_leaf_name(const pq_file *f, int leaf, char *buf, size_t cap);

/* the rows of the parquet file held in data[0, size) as JSON objects: fn takes each row (and owns it,
 * also when it fails) with its 1-based index; the first failure stops the read. hf_images: Hugging Face datasets'
 * Image columns' image objects marked "pil": true (pq_hf_mark) */
struct cJSON;
typedef vc_status (*pq_row_fn)(void *user, struct cJSON *row, int64_t index);
vc_status pq_rows(const char *path, const uint8_t *data, size_t size, int hf_images, pq_row_fn fn, void *user);

/* parquet_enc.c: one PLAIN value of `type` (w bytes at q: numbers widened, byte arrays pointing at q);
 * the DELTA_* and BYTE_STREAM_SPLIT encodings, 1 when count values decoded */
void pq_plain_value(int type, const uint8_t *q, uint32_t w, pq_val *v);
int pq_delta_binary(const uint8_t *p, size_t n, int64_t *out, int64_t count, size_t *used);
/* DELTA_LENGTH_BYTE_ARRAY (length_only; values point into p) or DELTA_BYTE_ARRAY (values rebuilt in *buf) */
int pq_delta_strings(const uint8_t *p, size_t n, pq_val *v, int64_t count, int length_only, uint8_t **buf);
/* BYTE_STREAM_SPLIT; fixed-length byte arrays are gathered into *buf */
int pq_byte_stream_split(const uint8_t *p, size_t n, int type, int width, pq_val *v, int64_t count, uint8_t **buf);

/* parquet_hf.c: the top-level columns Hugging Face datasets decodes as PIL images (its "huggingface" metadata) */
enum { PQ_HF_IMAGE = 1, PQ_HF_IMAGE_LIST };
typedef struct pq_hf_col {
    char *name;
    int kind;   /* PQ_HF_IMAGE: an Image feature; PQ_HF_IMAGE_LIST: a list of them */
    char *mode; /* the feature's mode (NULL: none) */
} pq_hf_col;
typedef struct pq_hf_cols {
    pq_hf_col *cols;
    int n;
} pq_hf_cols;
vc_status pq_hf_images(const pq_file *f, pq_hf_cols *out);
/* row's image objects in those columns get "pil": true (and "pil_mode" where the feature has a mode) */
vc_status pq_hf_mark(const pq_hf_cols *h, struct cJSON *row);
void pq_hf_free(pq_hf_cols *h);

/* leaf column `leaf` of row group g */
vc_status pq_column_read(const pq_file *f, int g, int leaf, pq_column *out);
void pq_column_free(pq_column *c);
#endif
