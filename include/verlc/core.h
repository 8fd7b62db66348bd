/* verlc core: status codes, error text, logging, small utilities. */
#ifndef VERLC_CORE_H
#define VERLC_CORE_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum vc_status {
    VC_OK = 0,
    VC_ERR_IO,          /* file missing, unreadable, short read/write */
    VC_ERR_FORMAT,      /* malformed file contents (JSON, safetensors, protobuf, JSONL row) */
    VC_ERR_UNSUPPORTED, /* valid input verlc does not handle (unknown architecture, dtype, construct) */
    VC_ERR_SHAPE,       /* tensor shape or size mismatch */
    VC_ERR_MISSING,     /* required tensor, key or field absent */
    VC_ERR_ARG,         /* bad argument or configuration value */
    VC_ERR_NOMEM,       /* allocation failed or memory plan over budget */
    VC_ERR_NUMERIC,     /* NaN/inf where a finite value is required */
    VC_ERR_TIMEOUT,     /* an external process or peer did not answer in time */
    VC_ERR_DEVICE,      /* accelerator/driver failure */
    VC_ERR_INTERNAL,    /* a bug: an invariant did not hold */
} vc_status;

/* Sets the calling thread's error message (printf-style) and returns `st`, so that
 * `return vc_fail(VC_ERR_IO, "%s: cannot open", path);` reads naturally. */
vc_status vc_fail(vc_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefixes the current message with more context: "ctx: old message". */
vc_status vc_fail_ctx(vc_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *vc_last_error(void);
const char *vc_status_name(vc_status st);
void vc_clear_error(void);

/* Logging to stderr; level from VERLC_LOG (error, warn, info, debug), default info. */
enum { VC_LOG_ERROR, VC_LOG_WARN, VC_LOG_INFO, VC_LOG_DEBUG };
void vc_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define vc_info(...) vc_log(VC_LOG_INFO, __VA_ARGS__)
#define vc_warn(...) vc_log(VC_LOG_WARN, __VA_ARGS__)
#define vc_debug(...) vc_log(VC_LOG_DEBUG, __VA_ARGS__)

/* Allocation helpers: abort-free; return NULL and set VC_ERR_NOMEM text on failure. */
void *vc_malloc(size_t n);
void *vc_calloc(size_t count, size_t size);
void *vc_aligned_alloc(size_t n); /* 64-byte aligned, zeroed; free with vc_aligned_free */
void vc_aligned_free(void *p);
char *vc_strdup(const char *s);

/* Reads a whole file into a NUL-terminated buffer. */
vc_status vc_read_file(const char *path, char **out, size_t *len);
/* Writes a file atomically: temp file in the same folder, fsync, rename. */
vc_status vc_write_file_atomic(const char *path, const void *data, size_t len);
/* The same, written in pieces (a checkpoint streamed tensor by tensor, never whole in memory): open, write any
 * number of times, then commit (fsync, rename into place) or abort (the temp file removed). Commit and abort
 * free the handle; after a failed write only abort is left to call. */
typedef struct vc_afile vc_afile;
vc_status vc_afile_open(const char *path, vc_afile **out);
vc_status vc_afile_write(vc_afile *f, const void *data, size_t len);
vc_status vc_afile_commit(vc_afile *f);
void vc_afile_abort(vc_afile *f);
/* Joins a directory and a file name into a new string. */
char *vc_path_join(const char *dir, const char *name);
int vc_file_exists(const char *path);
/* "~/x": the home directory's x (os.path.expanduser, as fsspec reads verl's data paths); else a copy */
char *vc_path_expand_user(const char *path);
vc_status vc_mkdirs(const char *path); /* mkdir -p (0755) */
/* A model or tokenizer path as verl takes it: a local path as it is (*out a copy), or a Hugging Face Hub id
 * (ORG/NAME) that is not a local path, resolved in the local Hugging Face cache ($HF_HUB_CACHE, $HF_HOME/hub,
 * ~/.cache/huggingface/hub: models--ORG--NAME/snapshots/<refs/main>); VC_ERR_IO naming the cache when it is not
 * there (nothing is downloaded). *out is malloc'd. */
vc_status vc_hf_resolve(const char *path, char **out);

double vc_now(void); /* monotonic seconds */
/* Python's repr(float) into out (NUL-terminated, at most cap bytes): "0.1", "1e-05", "inf", "nan", "72.0" */
void vc_py_float_repr(double f, char *out, size_t cap);

#endif
