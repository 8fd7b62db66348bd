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

/* A DTensor's place in its mesh (torch.distributed's sharded state dicts: verl's FSDP checkpoints), as read from a
 * torch.save file whose tensor is this rank's local part */
#define VC_PT_MESH_DIMS 4
typedef struct vc_pt_shard {
    int n_dims;                   /* mesh dimensions (0: a plain tensor) */
    int place[VC_PT_MESH_DIMS];   /* per mesh dimension: -1 Replicate, d >= 0 Shard(d) */
    int coord[VC_PT_MESH_DIMS];   /* this rank's coordinate on each (-1: not in the file) */
    char names[VC_PT_MESH_DIMS][16]; /* mesh_dim_names ("" where unnamed) */
    int ndim;
    int64_t shape[VC_ST_MAX_DIMS]; /* the whole tensor's */
} vc_pt_shard;

/* Growable lists the parser appends to; names and strings are owned by the lists. */
typedef struct vc_st_lists {
    vc_st_tensor *t;
    int n, cap;
    vc_st_kv *meta;
    int nmeta, capmeta;
    int want_shards;     /* set by the caller: DTensors are read as their local parts, their places in shard[] */
    vc_pt_shard *shard;  /* [cap] when want_shards */
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
