/* Hugging Face datasets' features in a Parquet file (the "huggingface" key-value metadata `datasets` writes:
 * {"info": {"features": {column: feature}}}): the top-level columns that load_dataset decodes as PIL images, an
 * Image feature (decode not false) or a list of them (datasets 4-5's {"_type": "List", "feature": ...}, older
 * versions' "Sequence" / "LargeList", or a one-item JSON list). verl's _build_messages converts such an image with
 * convert("RGB"), which drops an alpha band that fetch_image's to_rgb would paste on white, so their rows' image
 * objects are marked {"bytes": ..., "path": ..., "pil": true} (and "pil_mode": the feature's mode, which datasets
 * converts to first, where it has one). */
#include "parquet.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static const cJSON *member(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

/* 1 when ft is an Image feature decoded to PIL (*mode: its mode, NULL for none) */
static int image_feature(const cJSON *ft, const char **mode) {
    const cJSON *t = member(ft, "_type"), *m = member(ft, "mode");
    if (!cJSON_IsString(t) || strcmp(t->valuestring, "Image")) return 0;
    if (cJSON_IsFalse(member(ft, "decode"))) return 0; /* {bytes, path} dicts in verl, as here */
    *mode = cJSON_IsString(m) ? m->valuestring : NULL;
    return 1;
}

/* the column's kind: PQ_HF_IMAGE, PQ_HF_IMAGE_LIST or 0 */
static int column_kind(const cJSON *ft, const char **mode) {
    if (image_feature(ft, mode)) return PQ_HF_IMAGE;
    const cJSON *item = NULL, *t = member(ft, "_type");
    if (cJSON_IsArray(ft) && cJSON_GetArraySize(ft) == 1) item = cJSON_GetArrayItem(ft, 0);
    else if (cJSON_IsString(t) && (!strcmp(t->valuestring, "List") || !strcmp(t->valuestring, "Sequence") ||
                                   !strcmp(t->valuestring, "LargeList")))
        item = member(ft, "feature");
    return item && image_feature(item, mode) ? PQ_HF_IMAGE_LIST : 0;
}

vc_status pq_hf_images(const pq_file *f, pq_hf_cols *out) {
    memset(out, 0, sizeof *out);
    if (!f->hf_meta) return VC_OK;
    cJSON *j = cJSON_Parse(f->hf_meta); /* (metadata that is not JSON: no features, as datasets then infers them) */
    const cJSON *feats = member(member(j, "info"), "features"), *c;
    vc_status st = VC_OK;
    if (!cJSON_IsObject(feats)) feats = NULL;
    cJSON_ArrayForEach(c, feats) {
        const char *mode = NULL;
        int k = column_kind(c, &mode);
        if (!k) continue;
        pq_hf_col *grown = realloc(out->cols, sizeof *grown * (size_t)(out->n + 1));
        if (grown) out->cols = grown;
        char *name = grown ? strdup(c->string) : NULL, *m = name && mode ? strdup(mode) : NULL;
        if (!name || (mode && !m)) {
            free(name);
            st = VC_ERR_NOMEM;
            break;
        }
        out->cols[out->n++] = (pq_hf_col){ name, k, m };
    }
    cJSON_Delete(j);
    if (st) pq_hf_free(out);
    return st;
}

/* "pil": true, and the feature's mode as "pil_mode" (what datasets converts it to first) */
static int mark(cJSON *img, const char *mode) {
    if (!cJSON_IsObject(img)) return 1; /* (null: no image) */
    cJSON_DeleteItemFromObjectCaseSensitive(img, "pil");
    cJSON_DeleteItemFromObjectCaseSensitive(img, "pil_mode");
    return cJSON_AddTrueToObject(img, "pil") != NULL && (!mode || cJSON_AddStringToObject(img, "pil_mode", mode));
}

vc_status pq_hf_mark(const pq_hf_cols *h, cJSON *row) {
    for (int i = 0; i < h->n; i++) {
        cJSON *v = cJSON_GetObjectItemCaseSensitive(row, h->cols[i].name), *e;
        int ok = 1;
        if (h->cols[i].kind == PQ_HF_IMAGE) ok = mark(v, h->cols[i].mode);
        else if (cJSON_IsArray(v)) cJSON_ArrayForEach(e, v) ok &= mark(e, h->cols[i].mode);
        if (!ok) return VC_ERR_NOMEM;
    }
    return VC_OK;
}

void pq_hf_free(pq_hf_cols *h) {
    for (int i = 0; i < h->n; i++) free(h->cols[i].name), free(h->cols[i].mode);
    free(h->cols);
    memset(h, 0, sizeof *h);
}
