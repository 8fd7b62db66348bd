/* Internal pieces shared by the safetensors reader files. */
#ifndef VC_IO_ST_INTERNAL_H
#define VC_IO_ST_INTERNAL_H
#include "verlc/safetensors.h"

typedef struct vc_st_map {
    char *path;
    void *map;
    size_t size;
} vc_st_map;

typedef struct vc_st_kv {
    char *key, *value;
} vc_st_kv;

/* Growable lists the parser appends to; names and strings are owned by the lists. */
typedef struct vc_st_lists {
    vc_st_tensor *t;
    int n, cap;
    vc_st_kv *meta;
    int nmeta, capmeta;
} vc_st_lists;

/* Maps f->path (which the caller has set) and appends its tensors and new metadata keys to `l`. */
vc_status vc_st_parse_file(vc_st_map *f, vc_st_lists *l);
void vc_st_map_release(vc_st_map *f);
void vc_st_lists_free(vc_st_lists *l);
#endif
