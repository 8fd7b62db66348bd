/* Hugging Face datasets' features of a Parquet file being written (parquet_w.h, pw_hf_features): the "huggingface"
 * key-value metadata datasets' to_parquet writes, {"info": {"features": {column: feature}}}, with each feature as
 * datasets infers it from the Arrow type (Value's dtype, a list's {"feature": ..., "_type": "List"}, a struct's
 * fields) and the image columns as its Image feature ({"_type": "Image"}), which load_dataset decodes. */
#include "parquet_w.h"
#include "verlc/json.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static cJSON *value(const char *dtype) {
    cJSON *v = cJSON_CreateObject();
    if (v && (!cJSON_AddStringToObject(v, "dtype", dtype) || !cJSON_AddStringToObject(v, "_type", "Value"))) {
        cJSON_Delete(v);
        return NULL;
    }
    return v;
}

static cJSON *typed(const char *type) {
    cJSON *v = cJSON_CreateObject();
    if (v && !cJSON_AddStringToObject(v, "_type", type)) {
        cJSON_Delete(v);
        return NULL;
    }
    return v;
}

/* a {"feature": item, "_type": "List"} (item taken) */
static cJSON *list_of(cJSON *item) {
    cJSON *v = item ? cJSON_CreateObject() : NULL;
    if (!v || !cJSON_AddItemToObject(v, "feature", item)) {
        cJSON_Delete(v);
        if (!v) cJSON_Delete(item);
        return NULL;
    }
    if (!cJSON_AddStringToObject(v, "_type", "List")) {
        cJSON_Delete(v);
        return NULL;
    }
    return v;
}

static cJSON *feature(const pw_node *n, int depth) {
    if (depth > 1000) return NULL;
    switch (n->kind) {
    case PW_NULL: return value("null");
    case PW_BOOL: return value("bool");
    case PW_INT: return value(n->big ? "uint64" : "int64");
    case PW_DOUBLE: return value("float64");
    case PW_STRING: return value(pw_binary(n) ? "binary" : "string");
    case PW_LIST: return list_of(feature(n->elem, depth + 1));
    default: break;
    }
    cJSON *o = cJSON_CreateObject();
    for (int i = 0; o && i < n->n_kids; i++) {
        cJSON *f = feature(n->kids[i], depth + 1);
        if (!f || !cJSON_AddItemToObject(o, n->kids[i]->name, f)) {
            cJSON_Delete(f);
            cJSON_Delete(o);
            o = NULL;
        }
    }
    return o;
}

/* a struct of bytes and path fields (and nothing else) */
static int image_struct(const pw_node *n) {
    if (n->kind != PW_STRUCT || n->n_kids < 1 || n->n_kids > 2) return 0;
    for (int i = 0; i < n->n_kids; i++)
        if (strcmp(n->kids[i]->name, "bytes") && strcmp(n->kids[i]->name, "path")) return 0;
    return 1;
}

void pw_hf_image_types(pw_node *root, const char *const *images, int n_images) {
    for (int i = 0; i < root->n_kids; i++)
        for (int k = 0; k < n_images; k++) {
            pw_node *c = root->kids[i];
            if (strcmp(c->name, images[k])) continue;
            if (c->kind == PW_LIST) c = c->elem;
            for (int f = 0; image_struct(c) && f < c->n_kids; f++)
                if (c->kids[f]->kind == PW_NULL) { /* (no path, or no bytes, anywhere: Image's string and binary) */
                    c->kids[f]->kind = PW_STRING;
                    if (!strcmp(c->kids[f]->name, "bytes")) c->kids[f]->n_str = c->kids[f]->n_uri = 1;
                }
        }
}

vc_status pw_hf_features(const pw_node *root, const char *const *images, int n_images, const char *path, char **out) {
    *out = NULL;
    for (int k = 0; k < n_images; k++) {
        const pw_node *c = NULL;
        for (int i = 0; i < root->n_kids && !c; i++) c = strcmp(root->kids[i]->name, images[k]) ? NULL : root->kids[i];
        if (c && !image_struct(c) && !(c->kind == PW_LIST && image_struct(c->elem)) && c->kind != PW_NULL)
            return vc_fail(VC_ERR_FORMAT, "%s: column '%s' holds no images ({bytes, path} objects, or lists of them)",
                           path, images[k]);
    }
    cJSON *doc = cJSON_CreateObject(), *info = doc ? cJSON_AddObjectToObject(doc, "info") : NULL;
    cJSON *fs = info ? cJSON_AddObjectToObject(info, "features") : NULL;
    int ok = fs != NULL;
    for (int i = 0; ok && i < root->n_kids; i++) {
        const pw_node *c = root->kids[i];
        int img = 0;
        for (int k = 0; k < n_images && !img; k++) img = !strcmp(c->name, images[k]);
        cJSON *f = !img || c->kind == PW_NULL ? feature(c, 0)
                   : c->kind == PW_LIST      ? list_of(typed("Image"))
                                             : typed("Image");
        ok = f && cJSON_AddItemToObject(fs, c->name, f);
        if (!ok) cJSON_Delete(f);
    }
    char *text = ok ? vc_json_print(doc, 0) : NULL;
    cJSON_Delete(doc);
    if (!text) return vc_fail(VC_ERR_NOMEM, "%s: out of memory writing its features", path);
    *out = text;
    return VC_OK;
}
