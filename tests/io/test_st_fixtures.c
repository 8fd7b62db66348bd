/* Reads every fixture checkpoint, checks it against an independent header parse, against the parameter
 * gradients listed in reference.safetensors, and through a write/read round trip. */
#include "io_helpers.h"
#include "vc_test.h"
#include "verlc/json.h"
#include "verlc/safetensors.h"
#include <dirent.h>

/* Independent check of a single file: header parsed here with cJSON, data compared at its offset. */
static void check_against_raw(const vc_checkpoint *ck, const char *file) {
    char *buf = NULL;
    size_t len = 0;
    if (vc_read_file(file, &buf, &len) != VC_OK) { CHECK(0); return; }
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = (hl << 8) | (unsigned char)buf[i];
    cJSON *h = cJSON_ParseWithLength(buf + 8, (size_t)hl);
    CHECK(h != NULL);
    int n = 0, bad = 0;
    for (cJSON *e = h ? h->child : NULL; e; e = e->next) {
        if (!strcmp(e->string, "__metadata__")) continue;
        n++;
        const vc_st_tensor *t = vc_ckpt_find(ck, e->string);
        if (!t) { bad++; continue; }
        cJSON *sh = cJSON_GetObjectItem(e, "shape"), *off = cJSON_GetObjectItem(e, "data_offsets");
        if (t->ndim != cJSON_GetArraySize(sh)) bad++;
        for (int d = 0; d < t->ndim && d < cJSON_GetArraySize(sh); d++)
            if (t->shape[d] != (int64_t)cJSON_GetArrayItem(sh, d)->valuedouble) bad++;
        size_t b = (size_t)cJSON_GetArrayItem(off, 0)->valuedouble, en = (size_t)cJSON_GetArrayItem(off, 1)->valuedouble;
        if (t->nbytes != en - b || memcmp(t->data, buf + 8 + hl + b, en - b)) bad++;
        if (strcmp(vc_dtype_name(t->dtype), cJSON_GetObjectItem(e, "dtype")->valuestring)) bad++;
        if (strcmp(t->file, file)) bad++;
    }
    CHECK_MSG(n == vc_ckpt_count(ck), "%s: %d header entries vs %d tensors", file, n, vc_ckpt_count(ck));
    CHECK_MSG(bad == 0, "%s: %d mismatches", file, bad);
    cJSON_Delete(h);
    free(buf);
}

/* Every grad.X of the reference names a checkpoint tensor X of the same shape, except MoE expert grads,
 * which transformers 5 reports in its fused layout (mlp.experts.gate_up_proj [E, 2I, H], mlp.experts.down_proj
 * [E, H, I]; Mixtral's router as mlp.gate.weight) while the checkpoints store per-expert tensors.
 * The reference loss matches reference.json. */
static void check_reference(const vc_checkpoint *ck, const char *dir) {
    char *rp = join2(dir, "reference.safetensors"), *jp = join2(dir, "reference.json");
    vc_checkpoint *ref = NULL;
    CHECK_OK(vc_ckpt_open(rp, &ref));
    int grads = 0, bad = 0, moe = 0;
    for (int i = 0; ref && i < vc_ckpt_count(ref); i++) {
        const vc_st_tensor *g = vc_ckpt_at(ref, i);
        if (strncmp(g->name, "grad.", 5)) continue;
        grads++;
        const vc_st_tensor *t = vc_ckpt_find(ck, g->name + 5);
        if (!t && (strstr(g->name, ".mlp.experts.") || strstr(g->name, ".mlp.gate.weight"))) { moe++; continue; }
        if (!t || t->ndim != g->ndim || memcmp(t->shape, g->shape, sizeof(int64_t) * (size_t)t->ndim)) {
            fprintf(stderr, "%s: gradient %s has no matching tensor\n", dir, g->name);
            bad++;
        }
    }
    CHECK_MSG(grads > 0 && bad == 0, "%s: %d grads, %d bad", dir, grads, bad);
    if (!moe) CHECK_MSG(vc_ckpt_count(ck) - grads <= 4, "%s: %d tensors but %d grads", dir, vc_ckpt_count(ck), grads);
    const vc_st_tensor *loss = ref ? vc_ckpt_find(ref, "loss") : NULL;
    const vc_st_tensor *ids = ref ? vc_ckpt_find(ref, "input_ids") : NULL;
    CHECK(loss && loss->dtype == VC_F32 && vc_st_tensor_numel(loss) == 1);
    CHECK(ids && ids->dtype == VC_I64 && ids->ndim == 2 && ids->shape[0] == 2 && ids->shape[1] == 12);
    cJSON *j = NULL;
    CHECK_OK(vc_json_load_file(jp, &j));
    double want = 0;
    CHECK_OK(vc_json_req_num(j, "loss", &want, jp));
    if (loss) {
        float got;
        vc_st_tensor_to_f32(loss, &got);
        CHECK_NEAR(got, want, 1e-6 * fabs(want));
    }
    cJSON_Delete(j);
    vc_ckpt_close(ref);
    free(rp);
    free(jp);
}

/* Writes every tensor (referenced, not copied) and reads it back: same names, shapes and bytes. */
static void check_round_trip(const vc_checkpoint *ck, const char *tmp, size_t shard) {
    vc_st_writer *w = NULL;
    CHECK_OK(vc_st_writer_new(&w));
    for (int i = 0; i < vc_ckpt_count(ck); i++) {
        const vc_st_tensor *t = vc_ckpt_at(ck, i);
        CHECK_OK(vc_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, 0));
    }
    const char *fmt = vc_ckpt_metadata(ck, "format");
    if (fmt) CHECK_OK(vc_st_writer_set_metadata(w, "format", fmt));
    CHECK_OK(vc_st_writer_write_dir(w, tmp, shard));
    vc_st_writer_free(w);
    vc_checkpoint *back = NULL;
    CHECK_OK(vc_ckpt_open(tmp, &back));
    int bad = 0;
    CHECK(vc_ckpt_count(back) == vc_ckpt_count(ck));
    for (int i = 0; back && i < vc_ckpt_count(ck) && i < vc_ckpt_count(back); i++) {
        const vc_st_tensor *a = vc_ckpt_at(ck, i), *b = vc_ckpt_at(back, i);
        if (strcmp(a->name, b->name) || a->dtype != b->dtype || a->ndim != b->ndim || a->nbytes != b->nbytes ||
            memcmp(a->shape, b->shape, sizeof a->shape) || memcmp(a->data, b->data, a->nbytes))
            bad++;
        if (((uintptr_t)b->data % vc_dtype_size(b->dtype)) != 0) bad++; /* our writer keeps alignment */
    }
    CHECK_MSG(bad == 0, "round trip: %d tensors differ", bad);
    if (fmt) CHECK(back && vc_ckpt_metadata(back, "format") && !strcmp(vc_ckpt_metadata(back, "format"), fmt));
    if (shard) CHECK(vc_ckpt_file_count(back) > 1);
    else CHECK(vc_ckpt_file_count(back) == 1);
    vc_ckpt_close(back);
}

static void check_sharded(const char *models, const char *tmp) {
    char *dir = join2(models, "llama_sharded");
    vc_checkpoint *ck = NULL;
    CHECK_OK(vc_ckpt_open(dir, &ck));
    CHECK(vc_ckpt_file_count(ck) == 4);
    CHECK(vc_ckpt_count(ck) == 21);
    const vc_st_tensor *e = vc_ckpt_find(ck, "model.embed_tokens.weight");
    CHECK(e && strstr(e->file, "model-00001-of-00004.safetensors"));
    const vc_st_tensor *h = vc_ckpt_find(ck, "lm_head.weight");
    CHECK(h && strstr(h->file, "model-00004-of-00004.safetensors"));
    CHECK(vc_ckpt_find(ck, "model.layers.7.mlp.up_proj.weight") == NULL);
    for (int s = 1; s <= 4; s++) {
        char name[64];
        snprintf(name, sizeof name, "model-%05d-of-00004.safetensors", s);
        char *p = join2(dir, name);
        vc_checkpoint *one = NULL;
        CHECK_OK(vc_ckpt_open(p, &one));
        for (int i = 0; one && i < vc_ckpt_count(one); i++) {
            const vc_st_tensor *a = vc_ckpt_at(one, i), *b = vc_ckpt_find(ck, a->name);
            CHECK(b && b->nbytes == a->nbytes && !memcmp(a->data, b->data, a->nbytes));
        }
        check_against_raw(one, p);
        vc_ckpt_close(one);
        free(p);
    }
    check_reference(ck, dir);
    size_t total = 0;
    for (int i = 0; i < vc_ckpt_count(ck); i++) total += vc_ckpt_at(ck, i)->nbytes;
    check_round_trip(ck, tmp, total / 3);
    check_round_trip(ck, tmp, 0); /* rewriting unsharded into the same folder drops the stale index */
    vc_ckpt_close(ck);
    free(dir);
}

int main(void) {
    char *models = join2(vc_test_shared(), "fixtures/models");
    char *tmp = tmp_dir();
    DIR *d = opendir(models);
    CHECK(d != NULL);
    int seen = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.' || !strcmp(e->d_name, "llama_sharded")) continue;
        char *dir = join2(models, e->d_name), *file = join2(dir, "model.safetensors");
        vc_checkpoint *ck = NULL;
        vc_status st = vc_ckpt_open(dir, &ck);
        CHECK_MSG(st == VC_OK, "%s: %s", dir, vc_last_error());
        if (st == VC_OK) {
            seen++;
            CHECK(vc_ckpt_file_count(ck) == 1);
            CHECK(vc_ckpt_metadata(ck, "format") && !strcmp(vc_ckpt_metadata(ck, "format"), "pt"));
            for (int i = 1; i < vc_ckpt_count(ck); i++)
                CHECK(strcmp(vc_ckpt_at(ck, i - 1)->name, vc_ckpt_at(ck, i)->name) < 0);
            check_against_raw(ck, file);
            check_reference(ck, dir);
            check_round_trip(ck, tmp, 0);
            vc_ckpt_close(ck);
        }
        free(dir);
        free(file);
    }
    if (d) closedir(d);
    CHECK_MSG(seen >= 28, "only %d fixture checkpoints read", seen);
    /* bf16 weights convert through the unaligned-safe helper */
    char *q = join2(models, "qwen3_bf16");
    vc_checkpoint *ck = NULL;
    CHECK_OK(vc_ckpt_open(q, &ck));
    const vc_st_tensor *t = ck ? vc_ckpt_find(ck, "model.norm.weight") : NULL;
    CHECK(t && t->dtype == VC_BF16);
    if (t) {
        float *v = malloc(sizeof(float) * (size_t)vc_st_tensor_numel(t));
        vc_st_tensor_to_f32(t, v);
        CHECK(v[0] > 0.8f && v[0] < 1.2f); /* norm weights are 1 +- 0.1 */
        CHECK(vc_bf16_to_f32(((const uint16_t *)t->data)[0]) == v[0]);
        free(v);
    }
    vc_ckpt_close(ck);
    free(q);
    check_sharded(models, tmp);
    printf("%d fixture checkpoints\n", seen);
    rm_tree(tmp);
    free(tmp);
    free(models);
    return vc_test_done();
}
