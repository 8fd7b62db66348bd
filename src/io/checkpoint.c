/* Checkpoint folders: one model.safetensors, or model.safetensors.index.json naming shards; without
 * safetensors, PyTorch's pytorch_model.bin or pytorch_model.bin.index.json and its shards (pt_read.c).
 * The tensors of all files are merged into one list sorted by name; duplicates and index/shard
 * disagreements are errors. */
#define _GNU_SOURCE
#include "st_internal.h"
#include "verlc/json.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct vc_checkpoint {
    vc_st_map *files;
    int nfiles;
    vc_st_lists l;
};

static int tensor_cmp(const void *a, const void *b) {
    return strcmp(((const vc_st_tensor *)a)->name, ((const vc_st_tensor *)b)->name);
}

static int kv_cmp(const void *a, const void *b) {
    return strcmp(((const vc_st_kv *)a)->key, ((const vc_st_kv *)b)->key);
}

static int str_cmp(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void vc_ckpt_close(vc_checkpoint *ck) {
    if (!ck) return;
    vc_st_lists_free(&ck->l);
    for (int i = 0; i < ck->nfiles; i++) vc_st_map_release(&ck->files[i]);
    free(ck->files);
    free(ck);
}

/* Sorts tensors and metadata; two tensors with one name are an error naming both files. */
static vc_status finish(vc_checkpoint *ck) {
    if (ck->l.n) qsort(ck->l.t, (size_t)ck->l.n, sizeof *ck->l.t, tensor_cmp);
    if (ck->l.nmeta) qsort(ck->l.meta, (size_t)ck->l.nmeta, sizeof *ck->l.meta, kv_cmp);
    for (int i = 1; i < ck->l.n; i++)
        if (!strcmp(ck->l.t[i - 1].name, ck->l.t[i].name))
            return vc_fail(VC_ERR_FORMAT, "tensor '%s' appears twice: in %s and in %s", ck->l.t[i].name,
                           ck->l.t[i - 1].file, ck->l.t[i].file);
    return VC_OK;
}

/* a safetensors file, or a PyTorch checkpoint (a ZIP archive: "PK\3\4") */
static vc_status parse_any(vc_st_map *f, vc_st_lists *l) {
    unsigned char magic[4] = { 0 };
    FILE *fp = fopen(f->path, "rb");
    if (fp) {
        size_t n = fread(magic, 1, 4, fp);
        (void)n;
        fclose(fp);
    }
    /* torch.save's legacy format starts with the pickled magic number: PROTO 2, LONG1 of 10 bytes */
    if (!memcmp(magic, "PK\3\4", 4) || !memcmp(magic, "\x80\x02\x8a\x0a", 4)) return vc_pt_parse_file(f, l);
    return vc_st_parse_file(f, l);
}

static vc_status open_single(vc_checkpoint *ck, const char *path) {
    ck->files = vc_calloc(1, sizeof *ck->files);
    if (!ck->files) return VC_ERR_NOMEM;
    ck->files[0].path = vc_strdup(path);
    if (!ck->files[0].path) return VC_ERR_NOMEM;
    ck->nfiles = 1;
    vc_status st = parse_any(&ck->files[0], &ck->l);
    return st != VC_OK ? st : finish(ck);
}

/* Shard names must stay inside the checkpoint folder. */
static int shard_name_ok(const char *s) {
    if (!*s || s[0] == '/') return 0;
    for (const char *p = s; *p; p++)
        if (p[0] == '.' && p[1] == '.' && (p == s || p[-1] == '/') && (p[2] == 0 || p[2] == '/')) return 0;
    return 1;
}

/* Every weight_map entry must be in its shard, and every shard tensor in the weight_map. */
static vc_status check_index(vc_checkpoint *ck, const cJSON *wm, const char *ipath, const char *dir) {
    int nmap = 0;
    for (const cJSON *e = wm->child; e; e = e->next, nmap++) {
        const vc_st_tensor *t = vc_ckpt_find(ck, e->string);
        char *want = vc_path_join(dir, e->valuestring);
        if (!want) return VC_ERR_NOMEM;
        vc_status st = VC_OK;
        if (!t)
            st = vc_fail(VC_ERR_MISSING, "%s: tensor '%s' is mapped to %s but absent from it", ipath, e->string,
                         e->valuestring);
        else if (strcmp(t->file, want))
            st = vc_fail(VC_ERR_FORMAT, "%s: tensor '%s' is mapped to %s but found in %s", ipath, e->string,
                         e->valuestring, t->file);
        free(want);
        if (st != VC_OK) return st;
    }
    if (nmap == ck->l.n) return VC_OK;
    for (int i = 0; i < ck->l.n; i++)
        if (!cJSON_GetObjectItemCaseSensitive(wm, ck->l.t[i].name))
            return vc_fail(VC_ERR_FORMAT, "%s: tensor '%s' of %s is not listed in weight_map", ipath,
                           ck->l.t[i].name, ck->l.t[i].file);
    return vc_fail(VC_ERR_FORMAT, "%s: weight_map lists a tensor more than once", ipath);
}

/* Collects the distinct shard names of the weight_map, sorted. */
static vc_status shard_names(const cJSON *wm, const char *ipath, const char ***out, int *n) {
    int cap = cJSON_GetArraySize(wm), k = 0;
    const char **names = vc_calloc((size_t)cap + 1, sizeof *names);
    if (!names) return VC_ERR_NOMEM;
    for (const cJSON *e = wm->child; e; e = e->next) {
        if (!cJSON_IsString(e) || !shard_name_ok(e->valuestring)) {
            free(names);
            return vc_fail(VC_ERR_FORMAT, "%s: weight_map entry '%s' must be a file name inside the folder",
                           ipath, e->string);
        }
        names[k++] = e->valuestring;
    }
    qsort(names, (size_t)k, sizeof *names, str_cmp);
    int u = 0;
    for (int i = 0; i < k; i++)
        if (!u || strcmp(names[u - 1], names[i])) names[u++] = names[i];
    *out = names;
    *n = u;
    return VC_OK;
}

static vc_status open_sharded(vc_checkpoint *ck, const char *dir, const char *ipath) {
    cJSON *idx = NULL;
    const char **names = NULL;
    int n = 0;
    vc_status st = vc_json_load_file(ipath, &idx);
    if (st != VC_OK) goto out;
    const cJSON *wm = vc_json_member(idx, "weight_map");
    if (!cJSON_IsObject(idx) || !wm) {
        st = vc_fail(VC_ERR_MISSING, "%s: no weight_map object", ipath);
        goto out;
    }
    if (!cJSON_IsObject(wm) || !wm->child) {
        st = vc_fail(VC_ERR_FORMAT, "%s: weight_map must be a non-empty object", ipath);
        goto out;
    }
    if ((st = shard_names(wm, ipath, &names, &n)) != VC_OK) goto out;
    ck->files = vc_calloc((size_t)n, sizeof *ck->files);
    if (!ck->files) { st = VC_ERR_NOMEM; goto out; }
    for (int i = 0; i < n && st == VC_OK; i++) {
        ck->files[i].path = vc_path_join(dir, names[i]);
        if (!ck->files[i].path) { st = VC_ERR_NOMEM; break; }
        ck->nfiles = i + 1;
        if (!vc_file_exists(ck->files[i].path)) {
            st = vc_fail(VC_ERR_IO, "%s: shard %s named in weight_map does not exist", ipath, ck->files[i].path);
            break;
        }
        st = parse_any(&ck->files[i], &ck->l);
    }
    if (st == VC_OK) st = finish(ck);
    if (st == VC_OK) st = check_index(ck, wm, ipath, dir);
out:
    free(names);
    cJSON_Delete(idx);
    return st;
}

vc_status vc_ckpt_open(const char *path, vc_checkpoint **out) {
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0) return vc_fail(VC_ERR_IO, "%s: %s", path, strerror(errno));
    vc_checkpoint *ck = vc_calloc(1, sizeof *ck);
    if (!ck) return VC_ERR_NOMEM;
    vc_status st;
    if (!S_ISDIR(sb.st_mode)) {
        st = open_single(ck, path);
    } else {
        char *ipath = vc_path_join(path, "model.safetensors.index.json");
        char *spath = vc_path_join(path, "model.safetensors");
        char *bipath = vc_path_join(path, "pytorch_model.bin.index.json");
        char *bpath = vc_path_join(path, "pytorch_model.bin");
        if (!ipath || !spath || !bipath || !bpath) st = VC_ERR_NOMEM;
        else if (vc_file_exists(ipath)) st = open_sharded(ck, path, ipath);
        else if (vc_file_exists(spath)) st = open_single(ck, spath);
        else if (vc_file_exists(bipath)) st = open_sharded(ck, path, bipath);
        else if (vc_file_exists(bpath)) st = open_single(ck, bpath);
        else
            st = vc_fail(VC_ERR_IO, "%s: no model.safetensors, model.safetensors.index.json, pytorch_model.bin or "
                                    "pytorch_model.bin.index.json", path);
        free(ipath);
        free(spath);
        free(bipath);
        free(bpath);
    }
    if (st != VC_OK) { vc_ckpt_close(ck); return st; }
    *out = ck;
    return VC_OK;
}

int vc_ckpt_count(const vc_checkpoint *ck) { return ck ? ck->l.n : 0; }
int vc_ckpt_file_count(const vc_checkpoint *ck) { return ck ? ck->nfiles : 0; }

const vc_st_tensor *vc_ckpt_at(const vc_checkpoint *ck, int i) {
    return ck && i >= 0 && i < ck->l.n ? &ck->l.t[i] : NULL;
}

const vc_st_tensor *vc_ckpt_find(const vc_checkpoint *ck, const char *name) {
    int lo = 0, hi = ck ? ck->l.n - 1 : -1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(ck->l.t[mid].name, name);
        if (!c) return &ck->l.t[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

const char *vc_ckpt_metadata(const vc_checkpoint *ck, const char *key) {
    int lo = 0, hi = ck ? ck->l.nmeta - 1 : -1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(ck->l.meta[mid].key, key);
        if (!c) return ck->l.meta[mid].value;
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

int vc_ckpt_metadata_count(const vc_checkpoint *ck) { return ck ? ck->l.nmeta : 0; }

void vc_ckpt_metadata_at(const vc_checkpoint *ck, int i, const char **key, const char **value) {
    *key = *value = NULL;
    if (!ck || i < 0 || i >= ck->l.nmeta) return;
    *key = ck->l.meta[i].key;
    *value = ck->l.meta[i].value;
}
