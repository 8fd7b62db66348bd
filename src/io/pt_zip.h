/* The ZIP directory of a PyTorch checkpoint (torch.save writes an uncompressed ZIP, ZIP64 past 4 GiB):
 * entries with their data's place in the mapped file. Internal to pt_read.c. */
#ifndef VC_IO_PT_ZIP_H
#define VC_IO_PT_ZIP_H
#include "verlc/core.h"
#include <stddef.h>
#include <stdint.h>

typedef struct pt_zip_entry {
    const char *name; /* not NUL-terminated: name_len bytes inside the mapping */
    size_t name_len;
    int method; /* 0: stored */
    uint64_t size, offset; /* uncompressed size; offset of the data in the file */
} pt_zip_entry;

/* the entries of the ZIP held in m[0, n), sorted by name; *out is malloc'ed (free it) */
vc_status pt_zip_read(const char *path, const uint8_t *m, size_t n, pt_zip_entry **out, int *count);
/* the entry named name (NUL-terminated), or NULL */
const pt_zip_entry *pt_zip_find(const pt_zip_entry *e, int count, const char *name);
#endif
