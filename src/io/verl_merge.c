/* verl's model merger for FSDP checkpoints (`python -m verl.model_merger merge --backend fsdp`), as
 * vc_verl_merge: each rank's model_world_size_W_rank_R.pt (torch.save of the FSDP model's sharded state dict: DTensors
 * whose local parts pt_read.c reads with their placements), the parts put back together by their placements along the
 * mesh's fsdp dimension (Shard(d): joined along d in mesh order; Replicate: one of them; an HSDP mesh's replicated
 * first dimension dropped, as verl drops it; plain tensors joined along dim 0, as verl joins them), in bfloat16 as
 * verl's merger writes them, with the checkpoint's huggingface/ config and tokenizer files beside; a tied LM head's
 * alias dropped; LoRA adapters split into lora_adapter/ (PEFT's names and config) as verl does. `test` compares the
 * merged weights with a Hugging Face folder instead of writing them. */
#include "st_internal.h"
#include "verlc/dtype.h"
#include "verlc/json.h"
#include "verlc/merge.h"
#include "verlc/model.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RANKS 65536

typedef struct {
    int ws;
    vc_st_map *maps;
    vc_st_lists *lists;
    FILE *log;
} ranks;

static vc_status world_size(const char *dir, int *ws) {
    char *p = vc_path_join(dir, "fsdp_config.json");
    cJSON *j = NULL;
    vc_status st = p ? vc_json_load_file(p, &j) : VC_ERR_NOMEM;
    int64_t w = 0;
    if (!st) st = vc_json_get_int(j, "world_size", 0, &w, p);
    if (!st && (w < 1 || w > MAX_RANKS)) st = vc_fail(VC_ERR_FORMAT, "%s: world_size %lld out of range", p, (long long)w);
    *ws = (int)w;
    cJSON_Delete(j);
    free(p);
    return st;
}

static vc_status load_ranks(const char *dir, ranks *R) {
    vc_status st = world_size(dir, &R->ws);
    if (st) return st;
    R->maps = calloc((size_t)R->ws, sizeof *R->maps);
    R->lists = calloc((size_t)R->ws, sizeof *R->lists);
    if (!R->maps || !R->lists) return vc_fail(VC_ERR_NOMEM, "out of memory for %d ranks", R->ws);
    for (int r = 0; !st && r < R->ws; r++) {
        char name[96];
        snprintf(name, sizeof name, "model_world_size_%d_rank_%d.pt", R->ws, r);
        R->lists[r].want_shards = 1;
        if (!(R->maps[r].path = vc_path_join(dir, name))) return VC_ERR_NOMEM;
        st = vc_pt_parse_file(&R->maps[r], &R->lists[r]);
        if (!st && R->log && (r == R->ws - 1 || r % 8 == 0))
            fprintf(R->log, "model_merger: read rank %d of %d (%d tensors)\n", r + 1, R->ws, R->lists[r].n);
    }
    for (int r = 1; !st && r < R->ws; r++)
        if (R->lists[r].n != R->lists[0].n)
            st = vc_fail(VC_ERR_FORMAT, "%s holds %d tensors, rank 0's file %d", R->maps[r].path, R->lists[r].n,
                         R->lists[0].n);
    return st;
}

static void ranks_free(ranks *R) {
    for (int r = 0; R->lists && r < R->ws; r++) vc_st_lists_free(&R->lists[r]);
    for (int r = 0; R->maps && r < R->ws; r++) vc_st_map_release(&R->maps[r]);
    free(R->lists);
    free(R->maps);
}

/* rank r's tensor named as rank 0's i-th (the same index when the state dicts agree in order) */
static int find(const ranks *R, int r, int i) {
    const vc_st_lists *l = &R->lists[r];
    const char *name = R->lists[0].t[i].name;
    if (i < l->n && !strcmp(l->t[i].name, name)) return i;
    for (int k = 0; k < l->n; k++)
        if (!strcmp(l->t[k].name, name)) return k;
    return -1;
}

/* the parts of tensor i in merge order: parts[k] = (rank, index); *dim the dimension joined (-1: take parts[0]) */
static vc_status plan(const ranks *R, int i, int *rank_of, int *n, int *dim) {
    const vc_pt_shard *s = &R->lists[0].shard[i];
    const char *name = R->lists[0].t[i].name;
    *n = 0;
    if (s->n_dims == 0) { /* a plain tensor: every rank's, along dim 0 (verl's torch.cat) */
        for (int r = 0; r < R->ws; r++) {
            int k = find(R, r, i);
            if (k < 0) return vc_fail(VC_ERR_FORMAT, "%s lacks '%s'", R->maps[r].path, name);
            if (R->lists[r].shard[k].n_dims)
                return vc_fail(VC_ERR_FORMAT, "%s: '%s' is a DTensor, a plain tensor in rank 0's file", R->maps[r].path,
                               name);
            rank_of[(*n)++] = r;
        }
        *dim = 0;
        return VC_OK;
    }
    int md = 0; /* the mesh dimension merged */
    if (s->n_dims == 2) {
        if (strcmp(s->names[0], "ddp") && strcmp(s->names[0], "dp"))
            return vc_fail(VC_ERR_UNSUPPORTED, "'%s': a mesh of (%s, %s): verl's merger takes (fsdp) and (ddp, fsdp) "
                           "meshes", name, s->names[0], s->names[1]);
        if (s->place[0] != -1)
            return vc_fail(VC_ERR_UNSUPPORTED, "'%s' is sharded on the mesh's %s dimension", name, s->names[0]);
        md = 1;
    } else if (s->n_dims > 2)
        return vc_fail(VC_ERR_UNSUPPORTED, "'%s': a mesh of %d dimensions (verl's merger takes one or two)", name,
                       s->n_dims);
    int known = 1;
    for (int r = 0; r < R->ws; r++) {
        int k = find(R, r, i);
        if (k < 0) return vc_fail(VC_ERR_FORMAT, "%s lacks '%s'", R->maps[r].path, name);
        const vc_pt_shard *q = &R->lists[r].shard[k];
        if (q->n_dims != s->n_dims || memcmp(q->place, s->place, sizeof q->place))
            return vc_fail(VC_ERR_FORMAT, "%s: '%s' is placed otherwise than in rank 0's file", R->maps[r].path, name);
        known &= q->coord[md] >= 0 && (md == 0 || q->coord[0] >= 0);
    }
    if (!known && md == 1)
        return vc_fail(VC_ERR_UNSUPPORTED, "'%s': a (ddp, fsdp) mesh saved by a torch that keeps no mesh coordinates",
                       name);
    for (int r = 0; r < R->ws; r++) { /* the ranks of the first replica, by their coordinate (or rank) */
        const vc_pt_shard *q = &R->lists[r].shard[find(R, r, i)];
        if (md == 1 && q->coord[0] != 0) continue;
        int c = known ? q->coord[md] : r;
        if (c >= R->ws) return vc_fail(VC_ERR_FORMAT, "%s: '%s' at mesh coordinate %d", R->maps[r].path, name, c);
        rank_of[c] = r;
        (*n)++;
    }
    for (int k = 0; k < *n; k++)
        if (rank_of[k] < 0) return vc_fail(VC_ERR_FORMAT, "'%s': no rank holds its part %d of %d", name, k, *n);
    *dim = s->place[md];
    return VC_OK;
}

/* tensor i joined from its parts, in bf16 (round to nearest even, as torch's .bfloat16()) */
static vc_status join(const ranks *R, int i, uint16_t **out, int *ndim, int64_t *shape) {
    int n = 0, dim = 0;
    int *rank_of = malloc(sizeof(int) * (size_t)R->ws);
    if (!rank_of) return VC_ERR_NOMEM;
    for (int r = 0; r < R->ws; r++) rank_of[r] = -1;
    vc_status st = plan(R, i, rank_of, &n, &dim);
    const vc_st_tensor *t0 = &R->lists[0].t[i];
    const vc_pt_shard *s0 = &R->lists[0].shard[i];
    *ndim = t0->ndim;
    memcpy(shape, t0->shape, sizeof(int64_t) * VC_ST_MAX_DIMS);
    if (!st && dim >= 0 && t0->ndim == 0) st = vc_fail(VC_ERR_FORMAT, "'%s': a scalar cannot be joined", t0->name);
    if (!st && dim >= 0) {
        shape[dim] = 0;
        for (int k = 0; !st && k < n; k++) {
            const vc_st_tensor *t = &R->lists[rank_of[k]].t[find(R, rank_of[k], i)];
            if (t->ndim != t0->ndim) st = vc_fail(VC_ERR_FORMAT, "'%s': its parts differ in rank", t0->name);
            for (int d = 0; !st && d < t->ndim; d++)
                if (d != dim && t->shape[d] != t0->shape[d])
                    st = vc_fail(VC_ERR_FORMAT, "'%s': its parts differ in shape off dimension %d", t0->name, dim);
            if (!st) shape[dim] += t->shape[dim];
        }
    }
    if (!st && s0->n_dims && (s0->ndim != *ndim || memcmp(s0->shape, shape, sizeof(int64_t) * (size_t)*ndim)))
        st = vc_fail(VC_ERR_FORMAT, "'%s': its %d parts make %lld along dimension %d, the DTensor's shape says %lld",
                     t0->name, n, (long long)shape[dim < 0 ? 0 : dim], dim < 0 ? 0 : dim,
                     (long long)s0->shape[dim < 0 ? 0 : dim]);
    int64_t numel = 1, inner = 1, outer = 1;
    for (int d = 0; d < *ndim; d++) numel *= shape[d];
    for (int d = dim + 1; dim >= 0 && d < *ndim; d++) inner *= shape[d];
    for (int d = 0; d < dim; d++) outer *= shape[d];
    uint16_t *o = st ? NULL : malloc(sizeof *o * (size_t)(numel ? numel : 1));
    float *tmp = NULL;
    if (!st && !o) st = vc_fail(VC_ERR_NOMEM, "'%s': out of memory", t0->name);
    int64_t at = 0;
    for (int k = 0; !st && k < (dim < 0 ? 1 : n); k++) { /* part k's rows of each outer block */
        const vc_st_tensor *t = &R->lists[rank_of[k]].t[find(R, rank_of[k], i)];
        int64_t rows = dim < 0 ? numel : t->shape[dim] * inner, m = vc_st_tensor_numel(t);
        if (t->dtype == VC_BF16) { /* (as it is: the bytes themselves, rows at a time) */
            for (int64_t b = 0; b < (dim < 0 ? 1 : outer); b++)
                memcpy(o + (dim < 0 ? 0 : b * shape[dim] * inner) + at, (const uint16_t *)t->data + b * rows,
                       sizeof *o * (size_t)rows);
            if (dim >= 0) at += t->shape[dim] * inner;
            continue;
        }
        free(tmp);
        if (!(tmp = malloc(sizeof *tmp * (size_t)(m ? m : 1)))) st = vc_fail(VC_ERR_NOMEM, "'%s': out of memory", t0->name);
        if (!st) vc_st_tensor_to_f32(t, tmp);
        for (int64_t b = 0; !st && b < (dim < 0 ? 1 : outer); b++)
            for (int64_t e = 0; e < rows; e++)
                o[(dim < 0 ? 0 : b * shape[dim] * inner) + at + e] = vc_f32_to_bf16(tmp[b * rows + e]);
        if (dim >= 0) at += t->shape[dim] * inner;
    }
    free(tmp);
    free(rank_of);
    if (st) free(o);
    else *out = o;
    return st;
}

/* ---- LoRA: verl's save_lora_adapter ---- */
static int is_lora(const char *name) { return strstr(name, "lora_") != NULL; }

/* a base weight's name with PEFT's wrapping taken off ("base_model.model.", ".base_layer") */
static void base_name(const char *name, char *out, size_t cap) {
    const char *p = strncmp(name, "base_model.model.", 17) ? name : name + 17;
    snprintf(out, cap, "%s", p);
    char *b;
    while ((b = strstr(out, ".base_layer."))) memmove(b, b + 11, strlen(b + 11) + 1);
}

/* the adapter's name: ".default.weight" -> ".weight" (the module path kept, as verl keeps it) */
static void lora_name(const char *name, char *out, size_t cap) {
    snprintf(out, cap, "%s", name);
    char *d = strstr(out, ".default.weight");
    if (d) memmove(d, d + 8, strlen(d + 8) + 1);
}

static vc_status lora_config(const char *local_dir, const char *dir, int rank, cJSON *targets) {
    char *mp = vc_path_join(local_dir, "lora_train_meta.json"), *path = vc_path_join(dir, "adapter_config.json");
    cJSON *meta = NULL, *c = cJSON_CreateObject();
    if (mp && vc_file_exists(mp) && vc_json_load_file(mp, &meta)) meta = NULL; /* (verl warns and goes on) */
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(meta, "r"), *a = cJSON_GetObjectItemCaseSensitive(meta, "lora_alpha");
    const cJSON *tt = cJSON_GetObjectItemCaseSensitive(meta, "task_type");
    if (cJSON_IsNumber(r) && r->valuedouble > 0) rank = (int)r->valuedouble;
    cJSON_AddItemToObject(c, "task_type", cJSON_IsString(tt) ? cJSON_CreateString(tt->valuestring) : cJSON_CreateNull());
    cJSON_AddStringToObject(c, "peft_type", "LORA");
    cJSON_AddBoolToObject(c, "inference_mode", 0);
    cJSON_AddNumberToObject(c, "r", rank);
    cJSON_AddItemToObject(c, "target_modules", targets);
    cJSON_AddNumberToObject(c, "lora_alpha", cJSON_IsNumber(a) ? (double)(int64_t)a->valuedouble : 0);
    cJSON_AddNumberToObject(c, "lora_dropout", 0.0);
    cJSON_AddBoolToObject(c, "fan_in_fan_out", 0);
    cJSON_AddStringToObject(c, "bias", "none");
    cJSON_AddBoolToObject(c, "use_rslora", 0);
    cJSON_AddBoolToObject(c, "use_dora", 0);
    if (!cJSON_IsNumber(a)) fprintf(stderr, "model_merger: LoRA alpha metadata is missing (lora_train_meta.json): "
                                            "lora_alpha 0 written, as verl's merger does\n");
    char *text = vc_json_print(c, 1);
    vc_status st = text && path ? vc_write_file_atomic(path, text, strlen(text)) : VC_ERR_NOMEM;
    free(text);
    cJSON_Delete(c);
    cJSON_Delete(meta);
    free(mp);
    free(path);
    return st;
}

/* ---- the Hugging Face folder ---- */
static int tied(const char *cfg_dir) {
    char *p = vc_path_join(cfg_dir, "config.json");
    cJSON *j = NULL;
    int t = 0;
    if (p && !vc_json_load_file(p, &j)) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "tie_word_embeddings");
        const cJSON *tc = cJSON_GetObjectItemCaseSensitive(j, "text_config");
        if (!v && tc) v = cJSON_GetObjectItemCaseSensitive(tc, "tie_word_embeddings");
        t = cJSON_IsTrue(v);
    }
    cJSON_Delete(j);
    free(p);
    return t;
}

/* config.json with its dtype bfloat16 (save_pretrained of a bf16 model), beside the tokenizer files */
static vc_status write_config(const char *cfg_dir, const char *dir) {
    char *src = vc_path_join(cfg_dir, "config.json"), *dst = vc_path_join(dir, "config.json");
    cJSON *j = NULL;
    vc_status st = src && dst ? vc_json_load_file(src, &j) : VC_ERR_NOMEM;
    if (!st) {
        cJSON_DeleteItemFromObjectCaseSensitive(j, "torch_dtype");
        cJSON_DeleteItemFromObjectCaseSensitive(j, "dtype");
        cJSON_AddStringToObject(j, "dtype", "bfloat16");
        char *text = vc_json_print(j, 1);
        st = text ? vc_write_file_atomic(dst, text, strlen(text)) : VC_ERR_NOMEM;
        free(text);
    }
    if (!st) st = vc_model_copy_side_files(cfg_dir, dir, 1);
    cJSON_Delete(j);
    free(src);
    free(dst);
    return st;
}

/* the input embedding's name in the Hugging Face layouts verlc reads (the tied LM head's alias is dropped beside it) */
static int embedding_name(const char *n) {
    static const char *E[] = { "embed_tokens.weight", "wte.weight", "word_embeddings.weight", "tok_embeddings.weight",
                               "embed_in.weight", "tokens_embed.weight", "backbone.embeddings.weight" };
    size_t l = strlen(n);
    for (size_t i = 0; i < sizeof E / sizeof *E; i++)
        if (l >= strlen(E[i]) && !strcmp(n + l - strlen(E[i]), E[i])) return 1;
    return 0;
}

/* compares the merged tensor with the reference's (test): names, shapes, bf16, values within 1e-6 (assert_close) */
static vc_status compare(const vc_checkpoint *ref, const char *name, const uint16_t *v, int ndim, const int64_t *shape) {
    const vc_st_tensor *t = vc_ckpt_find(ref, name);
    if (!t) return vc_fail(VC_ERR_FORMAT, "Extra key in collected state dict: '%s'", name);
    if (t->ndim != ndim || memcmp(t->shape, shape, sizeof(int64_t) * (size_t)ndim))
        return vc_fail(VC_ERR_FORMAT, "Shape mismatch for key '%s'", name);
    if (t->dtype != VC_BF16) return vc_fail(VC_ERR_FORMAT, "Dtype mismatch for key '%s': %s, not bfloat16", name,
                                            vc_dtype_name(t->dtype));
    int64_t n = vc_st_tensor_numel(t);
    float *r = malloc(sizeof *r * (size_t)(n ? n : 1));
    if (!r) return VC_ERR_NOMEM;
    vc_st_tensor_to_f32(t, r);
    vc_status st = VC_OK;
    for (int64_t k = 0; !st && k < n; k++) {
        float a = vc_bf16_to_f32(v[k]);
        if (!(fabsf(a - r[k]) <= 1e-6f + 1e-6f * fabsf(r[k])) && !(isnan(a) && isnan(r[k])))
            st = vc_fail(VC_ERR_FORMAT, "'%s' differs at element %lld: %g merged, %g in the reference", name,
                         (long long)k, (double)a, (double)r[k]);
    }
    free(r);
    return st;
}

static vc_status merge_all(const vc_verl_merge_opts *o, const ranks *R, const char *cfg_dir) {
    vc_st_writer *w = NULL, *lw = NULL;
    vc_checkpoint *ref = NULL;
    cJSON *targets = cJSON_CreateArray();
    int drop_head = tied(cfg_dir), lora_rank = 0, n_ref = 0;
    vc_status st = o->test_hf_dir ? vc_ckpt_open(o->test_hf_dir, &ref) : vc_st_writer_new(&w);
    if (!st && !o->test_hf_dir) st = vc_st_writer_new(&lw);
    const vc_st_lists *l0 = &R->lists[0];
    int has_embed = 0;
    for (int i = 0; i < l0->n; i++) has_embed |= embedding_name(l0->t[i].name) && !is_lora(l0->t[i].name);
    for (int i = 0; !st && i < l0->n; i++) {
        const char *name = l0->t[i].name;
        char nm[512];
        int lora = is_lora(name), ndim;
        int64_t shape[VC_ST_MAX_DIMS];
        uint16_t *v = NULL;
        if (lora) lora_name(name, nm, sizeof nm);
        else base_name(name, nm, sizeof nm);
        if (!lora && drop_head && has_embed && !strcmp(nm, "lm_head.weight")) continue; /* (tied to the embedding) */
        if ((st = join(R, i, &v, &ndim, shape))) break;
        if (lora) { /* target_modules: the module before lora_A / lora_B */
            char mod[512];
            snprintf(mod, sizeof mod, "%s", nm);
            char *e = strrchr(mod, '.'), *b = e ? (*e = 0, strrchr(mod, '.')) : NULL, *m = b ? (*b = 0, strrchr(mod, '.')) : NULL;
            const char *tm = m ? m + 1 : mod;
            int seen = 0;
            for (const cJSON *c = targets->child; c; c = c->next) seen |= !strcmp(c->valuestring, tm);
            if (!seen) cJSON_AddItemToArray(targets, cJSON_CreateString(tm));
            if (ndim == 2) lora_rank = (int)(shape[0] < shape[1] ? shape[0] : shape[1]);
        }
        if (o->test_hf_dir) {
            st = lora ? VC_OK : compare(ref, nm, v, ndim, shape);
            n_ref += !lora;
            free(v);
        } else
            st = vc_st_writer_add(lora ? lw : w, nm, VC_BF16, ndim, shape, v, 1), free(v);
    }
    if (!st && o->test_hf_dir && n_ref != vc_ckpt_count(ref))
        for (int k = 0; k < vc_ckpt_count(ref) && !st; k++) { /* a reference key no rank holds */
            const char *rn = vc_ckpt_at(ref, k)->name;
            int found = 0;
            for (int i = 0; i < l0->n && !found; i++) {
                char nm[512];
                base_name(l0->t[i].name, nm, sizeof nm);
                found = !strcmp(nm, rn);
            }
            if (!found) st = vc_fail(VC_ERR_FORMAT, "Missing key in collected state dict: '%s'", rn);
        }
    if (!st && !o->test_hf_dir) {
        /* a LoRA-only checkpoint (verl's save_lora_only): the adapter, with the config and tokenizer beside it */
        if (!vc_st_writer_count(w) && vc_st_writer_count(lw)) {
            if (o->log) fprintf(o->log, "model_merger: the checkpoint holds LoRA adapters only (no base weights)\n");
            st = vc_mkdirs(o->target_dir);
        } else {
            if (o->log) fprintf(o->log, "model_merger: saving model to %s\n", o->target_dir);
            st = vc_st_writer_write_dir(w, o->target_dir, (size_t)50e9);
        }
        if (!st) st = write_config(cfg_dir, o->target_dir);
        if (!st && vc_st_writer_count(lw)) {
            char *ld = vc_path_join(o->target_dir, "lora_adapter");
            char *lf = ld ? vc_path_join(ld, "adapter_model.safetensors") : NULL;
            st = lf ? vc_mkdirs(ld) : VC_ERR_NOMEM;
            if (!st) st = vc_st_writer_write(lw, lf);
            if (!st) st = lora_config(o->local_dir, ld, lora_rank, targets), targets = NULL;
            if (!st && o->log) fprintf(o->log, "model_merger: saving lora adapter to %s\n", ld);
            free(lf);
            free(ld);
        }
    }
    cJSON_Delete(targets);
    vc_st_writer_free(w);
    vc_st_writer_free(lw);
    vc_ckpt_close(ref);
    return st;
}

vc_status vc_verl_merge(const vc_verl_merge_opts *o) {
    if (!o->local_dir || (!o->target_dir && !o->test_hf_dir))
        return vc_fail(VC_ERR_ARG, "model_merger: --local_dir and --target_dir (merge) or --test_hf_dir (test) are needed");
    char *cfg_dir = o->hf_config_dir ? strdup(o->hf_config_dir) : vc_path_join(o->local_dir, "huggingface");
    ranks R = { .log = o->log };
    vc_status st = cfg_dir ? load_ranks(o->local_dir, &R) : VC_ERR_NOMEM;
    if (!st) st = merge_all(o, &R, cfg_dir);
    if (!st && o->test_hf_dir && o->log)
        fprintf(o->log, "FSDP checks passed: The merged state_dict matches the hf model at %s.\n", o->test_hf_dir);
    ranks_free(&R);
    free(cfg_dir);
    return st;
}
