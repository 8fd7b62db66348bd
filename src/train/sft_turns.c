/* SFT messages rows as verl's MultiTurnSFTDataset (b178a3cd) builds them: each message rendered by the chat template
 * alone (the row's tools with the first one), tokenized, the template's system prompt dropped from every later turn
 * but a system message, and an assistant turn's tokens trained but for as many leading tokens as the generation
 * prompt has; verl then checks that the turns' tokens are the whole conversation's. */
#include "sft_internal.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* the template's rendering of msgs (gen: with the generation prompt), tokenized without special tokens */
static vc_status encode_rendering(const sft_tok *tk, const cJSON *msgs, int gen, const cJSON *tools, int thinking,
                                  const cJSON *kwargs, int32_t **ids, size_t *n) {
    vc_chat_opts o = { gen, thinking, tools, kwargs };
    char *s = NULL;
    *ids = NULL, *n = 0;
    vc_status st = vc_chat_template_render(tk->tmpl, msgs, &o, &s);
    if (!st) st = vc_tokenizer_encode(tk->tok, s, strlen(s), 0, ids, n);
    free(s);
    return st;
}

/* the length of k lone user messages with empty contents, rendered as verl's probes render them (no row options) */
static vc_status probe(const sft_tok *tk, int k, int gen, int64_t *len) {
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < k && arr; i++) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "user");
        cJSON_AddStringToObject(m, "content", "");
        cJSON_AddItemToArray(arr, m);
    }
    if (!arr) return vc_fail(VC_ERR_NOMEM, "out of memory");
    int32_t *ids = NULL;
    size_t n = 0;
    vc_status st = encode_rendering(tk, arr, gen, NULL, -1, NULL, &ids, &n);
    cJSON_Delete(arr);
    free(ids);
    *len = (int64_t)n;
    return st;
}

/* verl's extract_system_prompt_and_generation, in token counts with Python's slicing: the system prompt is
 * token1[:-(len(token2) - len(token1))] of one and two empty user turns, the generation prompt token3[len(token1):]
 * of one turn with it */
vc_status sft_turn_probe_init(const sft_tok *tk, sft_turn_probe *tp) {
    int64_t l1, l2, l3;
    memset(tp, 0, sizeof *tp);
    vc_status st = probe(tk, 1, 0, &l1);
    if (!st) st = probe(tk, 2, 0, &l2);
    if (!st) st = probe(tk, 1, 1, &l3);
    if (st) return st;
    int64_t d = l2 - l1;
    tp->sys_len = d > 0 ? (l1 > d ? l1 - d : 0) : d == 0 ? 0 : (-d < l1 ? -d : l1);
    tp->gen_len = l3 > l1 ? l3 - l1 : 0;
    tp->ok = 1;
    return VC_OK;
}

/* one message's turn: its tokens after `skip`, the assistant's trained after its first `keep0` */
static vc_status add_turn(sft_rowbuf *r, const int32_t *ids, size_t n, size_t skip, int assistant, size_t keep0) {
    size_t k = n > skip ? n - skip : 0, z = assistant ? (keep0 < k ? keep0 : k) : k;
    vc_status st = sft_rowbuf_push(r, ids + skip, z, 0.0f);
    if (!st && k > z) st = sft_rowbuf_push(r, ids + skip + z, k - z, 1.0f);
    return st;
}

vc_status sft_verl_turns(const sft_tok *tk, const sft_turn_probe *tp, const cJSON *msgs, const cJSON *tools,
                         int thinking, sft_rowbuf *r, int64_t *mismatch_at) {
    int n = cJSON_GetArraySize(msgs);
    int32_t *ids = NULL;
    size_t k = 0, first = r->n;
    vc_status st = VC_OK;
    *mismatch_at = -1;
    for (int i = 0; i < n && !st; i++) {
        const cJSON *m = cJSON_GetArrayItem(msgs, i), *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsString(role)) return vc_fail(VC_ERR_FORMAT, "message %d has no string role", i);
        cJSON *one = cJSON_CreateArray();
        if (!one) return vc_fail(VC_ERR_NOMEM, "out of memory");
        cJSON_AddItemToArray(one, cJSON_Duplicate(m, 1));
        st = encode_rendering(tk, one, 0, i == 0 ? tools : NULL, thinking, tk->kwargs, &ids, &k);
        cJSON_Delete(one);
        size_t skip = i != 0 && strcmp(role->valuestring, "system") ? (size_t)tp->sys_len : 0;
        if (!st) st = add_turn(r, ids, k, skip, !strcmp(role->valuestring, "assistant"), (size_t)tp->gen_len);
        free(ids);
        ids = NULL;
    }
    if (!st) st = encode_rendering(tk, msgs, 0, tools, thinking, tk->kwargs, &ids, &k);
    if (!st) { /* verl's sanity check: the turns' tokens are the whole conversation's */
        size_t j = 0, got = r->n - first;
        while (j < k && j < got && ids[j] == r->ids[first + j]) j++;
        if (j < k || j < got) *mismatch_at = (int64_t)j;
    }
    free(ids);
    return st;
}
