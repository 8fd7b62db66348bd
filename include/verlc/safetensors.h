/* safetensors checkpoints: mmap reading with strict validation (single file, or a folder with one file or
 * an index and shards) and atomic writing (one file, or shards plus index). */
#ifndef VERLC_SAFETENSORS_H
#define VERLC_SAFETENSORS_H
#include <stddef.h>
#include <stdint.h>
#include "verlc/core.h"
#include "verlc/dtype.h"

#define VC_ST_MAX_DIMS 8
#define VC_ST_MAX_HEADER 100000000u /* the safetensors limit on the JSON header length */

typedef struct vc_st_tensor {
    const char *name;
    vc_dtype dtype;
    int ndim;
    int64_t shape[VC_ST_MAX_DIMS];
    const void *data; /* points into the read-only mmap; may be unaligned for its type */
    size_t nbytes;
    const char *file; /* file it came from */
} vc_st_tensor;

typedef struct vc_checkpoint vc_checkpoint;

/* path: a folder holding model.safetensors, or model.safetensors.index.json and its shards (the index wins
 * when both exist), or one .safetensors file. Every file is validated as the safetensors reference
 * implementation does (header length, JSON, dtype/shape/data_offsets, tensors tiling the data section
 * with no gap or overlap up to the end of the file); errors name the file and the tensor. */
vc_status vc_ckpt_open(const char *path, vc_checkpoint **out);
void vc_ckpt_close(vc_checkpoint *ck);
int vc_ckpt_count(const vc_checkpoint *ck);
const vc_st_tensor *vc_ckpt_at(const vc_checkpoint *ck, int i);              /* sorted by name */
const vc_st_tensor *vc_ckpt_find(const vc_checkpoint *ck, const char *name); /* NULL if absent (binary search) */
const char *vc_ckpt_metadata(const vc_checkpoint *ck, const char *key);     /* __metadata__ entry or NULL */
int vc_ckpt_metadata_count(const vc_checkpoint *ck);
/* i-th metadata entry (sorted by key). */
void vc_ckpt_metadata_at(const vc_checkpoint *ck, int i, const char **key, const char **value);
int vc_ckpt_file_count(const vc_checkpoint *ck); /* 1, or the number of shards */

int64_t vc_st_tensor_numel(const vc_st_tensor *t);
/* Converts a tensor of any float/int dtype to f32 into dst[numel]; handles unaligned mmap data. */
void vc_st_tensor_to_f32(const vc_st_tensor *t, float *dst);

/* Writer: collects tensors (data copied when copy != 0, else referenced until the write), then writes
 * atomically (temp file + fsync + rename). Tensors are laid out largest dtype first, then by name, so every
 * tensor is aligned for its type; the header is padded with spaces to a multiple of 8 bytes. */
typedef struct vc_st_writer vc_st_writer;
vc_status vc_st_writer_new(vc_st_writer **out);
vc_status vc_st_writer_add(vc_st_writer *w, const char *name, vc_dtype dt, int ndim, const int64_t *shape,
                           const void *data, int copy);
/* A tensor whose bytes fill(ctx, index, offset, dst, nbytes) writes into dst when the file is written: bytes
 * [offset, offset + nbytes) of the tensor, asked for in order in pieces of at most VC_ST_FILL_PIECE bytes (whole
 * elements), so a few MiB of host memory stage a checkpoint of a model that fills the memory */
#define VC_ST_FILL_PIECE ((size_t)16 << 20)
typedef vc_status (*vc_st_fill_fn)(void *ctx, int64_t index, size_t offset, void *dst, size_t nbytes);
vc_status vc_st_writer_add_lazy(vc_st_writer *w, const char *name, vc_dtype dt, int ndim, const int64_t *shape,
                                vc_st_fill_fn fill, void *ctx, int64_t index);
vc_status vc_st_writer_set_metadata(vc_st_writer *w, const char *key, const char *value);
vc_status vc_st_writer_write(vc_st_writer *w, const char *path);
/* Writes DIR/model.safetensors, or model-0000K-of-0000N.safetensors shards plus model.safetensors.index.json
 * when the total data exceeds max_shard_bytes (0 = never shard). Creates DIR if needed and removes a stale
 * index (single-file case) or a stale model.safetensors (sharded case) so that vc_ckpt_open reads what was
 * written. */
vc_status vc_st_writer_write_dir(vc_st_writer *w, const char *dir, size_t max_shard_bytes);
int vc_st_writer_count(const vc_st_writer *w);
void vc_st_writer_free(vc_st_writer *w);
#endif
