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
/* The same for a PyTorch checkpoint (torch.save's zip format: pytorch_model.bin), pt_read.c. */
vc_status vc_pt_parse_file(vc_st_map *f, vc_st_lists *l);
/* The same over a file already in memory (map[0, size) must outlive the tensors; path names it). */
vc_status vc_pt_parse_mem(const char *path, const uint8_t *map, size_t size, vc_st_lists *l);
/* Maps f->path read-only; files under min_size bytes are an error saying they cannot hold `what`. */
vc_status vc_st_map_file(vc_st_map *f, size_t min_size, const char *what);
/* Room for `extra` more tensors in l->t. */
vc_status vc_st_lists_grow(vc_st_lists *l, int extra);
void vc_st_map_release(vc_st_map *f);
void vc_st_lists_free(vc_st_lists *l);
#endif
