/* libFuzzer harness for config.json (not a CTest program; scripts/fuzz.sh builds and runs it): the file parsed as a
 * model config and, where its weights (a vision tower's too) come to at most about 4 M floats by a rough count, a random model built from
 * it and a 4-token forward with log-probs run. Input: the whole file. */
#include "../fuzz_util.h"
#include "verlc/model.h"
#include "verlc/tensor.h"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64], path[96];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_scratch("config", "config.json", dir, sizeof dir, path, sizeof path);
    return 0;
}

/* a rough count of the weights (floats), saturating: what decides whether a model is built */
static double weights(const vc_model_config *c) {
    double h = (double)c->hidden, q = (double)c->n_head * (double)c->head_dim, kv = (double)c->n_kv_head * (double)c->head_dim;
    double layer = h * (2 * q + 2 * kv) + 3 * h * (double)c->inter +
                   (double)c->n_expert * 3 * h * (double)(c->moe_inter > 0 ? c->moe_inter : 0);
    /* a linear mixer's projections of its keys, values and gates in and out (Mamba's and Gated DeltaNet's) */
    double lin = 3 * h * (2 * (double)c->lin_nk * (double)c->lin_dk + 2 * (double)c->lin_nv * (double)c->lin_dv);
    return 2 * (double)c->vocab * h + (double)c->n_layer * layer + (double)c->n_linear * lin;
}

/* a rough count of a vision tower's weights (floats) from the config's vision_config, the keys a mangled input lacks
 * at the sizes of the largest towers (Qwen2-VL's 1280 wide and 32 deep): such a tower under ASan took 10-20 s */
static double vision_weights(const uint8_t *data, size_t size) {
    cJSON *j = cJSON_ParseWithLength((const char *)data, size);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "vision_config");
    double n = 0;
    if (cJSON_IsObject(v)) {
        const cJSON *hs = cJSON_GetObjectItemCaseSensitive(v, "hidden_size"), *ed = cJSON_GetObjectItemCaseSensitive(v, "embed_dim");
        const cJSON *dp = cJSON_GetObjectItemCaseSensitive(v, "depth"), *im = cJSON_GetObjectItemCaseSensitive(v, "intermediate_size");
        const cJSON *np = cJSON_GetObjectItemCaseSensitive(v, "num_position_embeddings");
        const cJSON *nl = cJSON_GetObjectItemCaseSensitive(v, "num_hidden_layers"); /* (MoonViT's depth and table) */
        const cJSON *ph = cJSON_GetObjectItemCaseSensitive(v, "init_pos_emb_height");
        const cJSON *pw = cJSON_GetObjectItemCaseSensitive(v, "init_pos_emb_width");
        const cJSON *mt = cJSON_GetObjectItemCaseSensitive(j, "model_type"); /* Qwen2-VL's tower is embed_dim wide */
        int q2 = cJSON_IsString(mt) && !strcmp(mt->valuestring, "qwen2_vl");
        double h = q2 ? (cJSON_IsNumber(ed) ? ed->valuedouble : 1280)
                      : cJSON_IsNumber(hs) ? hs->valuedouble : cJSON_IsNumber(ed) ? ed->valuedouble : 1280;
        double d = cJSON_IsNumber(dp) ? dp->valuedouble : cJSON_IsNumber(nl) ? nl->valuedouble : 32;
        double i = cJSON_IsNumber(im) ? im->valuedouble : 4 * h;
        double p = cJSON_IsNumber(np) ? np->valuedouble : 2304;
        if (cJSON_IsNumber(ph) || cJSON_IsNumber(pw))
            p = (cJSON_IsNumber(ph) ? ph->valuedouble : 64) * (cJSON_IsNumber(pw) ? pw->valuedouble : 64);
        n = d * (4 * h * h + 2 * h * i) + p * h;
    }
    cJSON_Delete(j);
    return n;
}

static void forward(vc_model *m, int64_t vocab) {
    int32_t ids[4], tgt[4];
    for (int i = 0; i < 4; i++) ids[i] = (int32_t)((i * 7 + 1) % vocab), tgt[i] = i < 3 ? (int32_t)((i * 7 + 8) % vocab) : -1;
    int64_t cu[2] = { 0, 4 };
    vc_batch b = { .n_seq = 1, .cu_seqlens = cu, .ids = ids };
    vc_graph *g = vc_graph_new();
    vc_tensor *h = g ? vc_model_forward(m, g, &b, NULL) : NULL, *lp = NULL;
    if (h) vc_model_logprobs(m, g, h, tgt, &lp, NULL);
    vc_graph_free(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    vc_model_config *c = calloc(1, sizeof *c);
    vc_model *m = NULL;
    if (c && !vc_config_load_model(dir, c) && c->vocab > 0 && weights(c) + vision_weights(data, size) <= 4e6 &&
        !vc_model_init_random(path, 1, &m)) {
        forward(m, vc_cfg_out_vocab(c) < c->vocab ? vc_cfg_out_vocab(c) : c->vocab);
        vc_model_free(m);
    }
    free(c);
    unlink(path);
    return 0;
}
